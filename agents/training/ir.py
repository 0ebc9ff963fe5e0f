"""The one intermediate form (PROTOCOL §2.7): a graph of registry operators as data.

Values are numbered: the graph's inputs first (0 .. len(inputs)-1, in order), then one value
per node. A node reads only earlier values, so the node list is already in evaluation order.
The op trace of a step is the list of every node's output, in node order. Front ends (the
PyTorch lowering, agents/model/lower.py) produce it; run.py executes it.
"""

from __future__ import annotations

from dataclasses import dataclass

from agents.training.registry import GraphError, Node, Shape, check_node


@dataclass(frozen=True)
class Value:
    name: str
    shape: Shape
    dtype: str


@dataclass(frozen=True)
class Graph:
    inputs: tuple[Value, ...]
    nodes: tuple[Node, ...]
    outputs: tuple[tuple[str, int], ...]  # (name, value id)

    def value(self, vid: int) -> tuple[Shape, str]:
        if vid < len(self.inputs):
            v = self.inputs[vid]
            return v.shape, v.dtype
        n = self.nodes[vid - len(self.inputs)]
        return n.shape, n.dtype

    def output(self, name: str) -> int:
        for k, vid in self.outputs:
            if k == name:
                return vid
        raise KeyError(name)

    def to_obj(self) -> dict:
        return {
            "inputs": [[v.name, list(v.shape), v.dtype] for v in self.inputs],
            "nodes": [
                [n.op, list(n.inputs), list(n.attrs), list(n.shape), n.dtype] for n in self.nodes
            ],  # fmt: skip
            "outputs": [[k, vid] for k, vid in self.outputs],
        }

    def validate(self) -> None:
        """Every node obeys its operator's rules and reads only earlier values."""
        seen = len(self.inputs)
        for i, n in enumerate(self.nodes):
            for vid in n.inputs:
                if not 0 <= vid < seen + i:
                    raise GraphError(f"node {i} ({n.op}) reads value {vid} before it exists")
            shapes = [self.value(v)[0] for v in n.inputs]
            dtypes = [self.value(v)[1] for v in n.inputs]
            try:
                check_node(n, shapes, dtypes)
            except GraphError as e:
                raise GraphError(f"node {i}: {e}") from None
        total = seen + len(self.nodes)
        for k, vid in self.outputs:
            if not 0 <= vid < total:
                raise GraphError(f"output {k} names value {vid} of {total}")


def graph_from_obj(o) -> Graph:
    try:
        inputs = tuple(Value(str(n), tuple(int(x) for x in s), str(d)) for n, s, d in o["inputs"])
        nodes = tuple(
            Node(str(op), tuple(int(x) for x in ins), tuple(int(x) for x in at),
                 tuple(int(x) for x in sh), str(dt))
            for op, ins, at, sh, dt in o["nodes"]
        )  # fmt: skip
        outputs = tuple((str(k), int(v)) for k, v in o["outputs"])
    except (KeyError, TypeError, ValueError) as e:
        raise GraphError(f"malformed graph: {e!r}"[:300]) from None
    g = Graph(inputs, nodes, outputs)
    g.validate()
    return g
