"""One training step as a fixed, topologically ordered node list (PROTOCOL §2.3).

A node names its operator, its inputs and its output shape. Inputs are references: a state
tensor name (`w0`, `m.b1`, ...; see state.py), `X` / `Y` (the dataset), `idx` (the step's batch
indices, (1, B)), or an earlier node's name. The op trace of a step is the list of every node's
output in this order; the outputs named in `StepGraph.next_state` form S_{t+1}. The graph
depends only on the widths and the batch size, never on data, so both parties of a dispute
build the same list.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from agents.training import registry
from agents.training.ir import Graph, Value
from agents.training.state import param_names, param_shape, state_names

INPUT_REFS = ("X", "Y", "idx")


@dataclass(frozen=True)
class Node:
    index: int
    name: str
    op: str
    inputs: tuple[str, ...]
    shape: tuple[int, int]
    dtype: str = "f32"  # "u32" for labels

    def to_obj(self) -> dict:
        return {
            "index": self.index,
            "name": self.name,
            "op": self.op,
            "inputs": list(self.inputs),
            "shape": list(self.shape),
            "dtype": self.dtype,
        }


@dataclass(frozen=True)
class StepGraph:
    widths: tuple[int, ...]
    batch: int
    nodes: tuple[Node, ...]
    next_state: dict[str, str]  # state tensor name -> node whose output it becomes
    loss: str  # node holding the batch's mean loss (1, 1)

    def node(self, name: str) -> Node:
        return self.nodes[self.index_of(name)]

    def index_of(self, name: str) -> int:
        for n in self.nodes:
            if n.name == name:
                return n.index
        raise KeyError(name)


def build_step_graph(widths: tuple[int, ...], batch: int) -> StepGraph:
    nodes: list[Node] = []

    def add(name: str, op: str, inputs: tuple[str, ...], shape, dtype="f32") -> str:
        nodes.append(Node(len(nodes), name, op, inputs, (int(shape[0]), int(shape[1])), dtype))
        return name

    L, B = len(widths) - 1, batch
    # forward
    a = add("x", "gather_rows", ("X", "idx"), (B, widths[0]))
    y = add("y", "gather_labels", ("Y", "idx"), (1, B), "u32")
    acts, pre = [a], []
    for i in range(L):
        mm = add(f"fwd{i}.mm", "matmul_nt", (acts[-1], f"w{i}"), (B, widths[i + 1]))
        z = add(f"fwd{i}.z", "add_row", (mm, f"b{i}"), (B, widths[i + 1]))
        pre.append(z)
        if i < L - 1:
            acts.append(add(f"fwd{i}.relu", "relu", (z,), (B, widths[i + 1])))
    # softmax cross-entropy
    C = widths[-1]
    z = pre[-1]
    mx = add("loss.max", "row_max", (z,), (1, B))
    s = add("loss.shift", "sub_col", (z, mx), (B, C))
    e = add("loss.exp", "exp", (s,), (B, C))
    se = add("loss.sum", "row_sum", (e,), (1, B))
    p = add("loss.prob", "div_col", (e, se), (B, C))
    ls = add("loss.logsum", "log", (se,), (1, B))
    nl = add("loss.nll", "nll", (ls, s, y), (1, B))
    loss = add("loss.mean", "mean", (nl,), (1, 1))
    g = add("bwd.dz", "xent_grad", (p, y), (B, C))
    # backward, last layer first
    grads: dict[str, str] = {}
    for i in reversed(range(L)):
        gt = add(f"bwd{i}.dzT", "transpose", (g,), (widths[i + 1], B))
        at = add(f"bwd{i}.aT", "transpose", (acts[i],), (widths[i], B))
        grads[f"w{i}"] = add(f"bwd{i}.dw", "matmul_nt", (gt, at), (widths[i + 1], widths[i]))
        grads[f"b{i}"] = add(f"bwd{i}.db", "row_sum", (gt,), (1, widths[i + 1]))
        if i > 0:
            wt = add(f"bwd{i}.wT", "transpose", (f"w{i}",), (widths[i], widths[i + 1]))
            da = add(f"bwd{i}.da", "matmul_nt", (g, wt), (B, widths[i]))
            g = add(f"bwd{i - 1}.dz", "relu_bwd", (da, pre[i - 1]), (B, widths[i]))
    # update, in parameter order
    nxt: dict[str, str] = {}
    for name in param_names(widths):
        shape = param_shape(widths, name)
        v = add(f"upd.{name}.m", "momentum", (f"m.{name}", grads[name]), shape)
        nxt[name] = add(f"upd.{name}", "sgd", (name, v), shape)
        nxt[f"m.{name}"] = v
    nxt = {name: nxt[name] for name in state_names(widths)}  # protocol state order
    return StepGraph(tuple(widths), batch, tuple(nodes), nxt, loss)


def step_ir(g: StepGraph, lr_bits: int, momentum_bits: int, n: int, features: int) -> Graph:
    """The version-1/2 step in the one graph form that run_graph runs: inputs the state tensors
    in protocol order, then X (N, F) f32, Y (1, N) i32 and idx (1, B) i32; nodes one-to-one with
    `g`'s, labels as i32, an update's hyper-parameter its attribute (momentum's mu, sgd's lr:
    the `param` its descriptor carries on chain); outputs S_{t+1}, then the loss."""
    hyper = {"momentum": (momentum_bits,), "sgd": (lr_bits,)}
    ins = [Value(k, param_shape(g.widths, k.removeprefix("m.")), "f32")
           for k in state_names(g.widths)]  # fmt: skip
    ins += [Value("X", (n, features), "f32"), Value("Y", (1, n), "i32"),
            Value("idx", (1, g.batch), "i32")]  # fmt: skip
    vid = {v.name: i for i, v in enumerate(ins)} | {m.name: len(ins) + m.index for m in g.nodes}
    out = tuple(registry.Node(m.op, tuple(vid[r] for r in m.inputs), hyper.get(m.op, ()), m.shape,
                              "i32" if m.dtype == "u32" else m.dtype)
                for m in g.nodes)  # fmt: skip
    outputs = tuple((k, vid[v]) for k, v in g.next_state.items()) + (("loss", vid[g.loss]),)
    return Graph(tuple(ins), out, outputs)


def forward_ir(widths: tuple[int, ...], rows: int) -> Graph:
    """The version-1/2 forward pass in the one graph form: inputs the parameters in protocol
    order (w0, b0, w1, ...), then x (rows, F) f32; output the logits (the step's forward ops)."""
    ins = [Value(k, param_shape(widths, k), "f32") for k in param_names(widths)]
    ins.append(Value("x", (rows, widths[0]), "f32"))
    nodes: list[registry.Node] = []

    def add(op: str, inputs: tuple[int, ...], width: int) -> int:
        nodes.append(registry.Node(op, inputs, (), (rows, width), "f32"))
        return len(ins) + len(nodes) - 1

    a, L = len(ins) - 1, len(widths) - 1
    for i in range(L):
        a = add("add_row", (add("matmul_nt", (a, 2 * i), widths[i + 1]), 2 * i + 1), widths[i + 1])
        if i < L - 1:
            a = add("relu", (a,), widths[i + 1])
    return Graph(tuple(ins), tuple(nodes), (("logits", a),))


def reference_step(g: StepGraph, nodes, state: dict, X, Y, idx) -> tuple[dict, list]:
    """Scalar reference of one whole version-1 step: each node (`nodes`: step_ir(g, ..).nodes)
    by its operator's whole-tensor reference (reference.py). Returns (S_{t+1}, trace) like
    Engine.trace_step, as numpy arrays."""
    env = {k: np.asarray(v) for k, v in state.items()}
    env["X"], env["Y"] = np.asarray(X, np.float32), np.asarray(Y).reshape(1, -1)
    env["idx"] = np.asarray(idx).reshape(1, -1)
    trace = []
    for node, rn in zip(g.nodes, nodes, strict=True):
        out = registry.OPS[node.op].reference([env[r] for r in node.inputs], rn)
        env[node.name] = out
        trace.append(out)
    return {name: env[n] for name, n in g.next_state.items()}, trace
