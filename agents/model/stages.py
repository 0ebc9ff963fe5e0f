"""A pipelined step run by stages (PROTOCOL §5.4): a segment of the plan as its own graph
(what a verifier replays from committed boundary inputs), and P holders that each keep only
their own state and exchange only the plan's boundary tensors.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

import torch

from agents.model.graph import Graph, Value
from agents.model.run import RunConfig, run_graph
from agents.model.stage_plan import PUBLIC, StagePlan

# -- a segment as a graph, and a run by stages -------------------------------------------------


def value_name(vid: int) -> str:
    return f"v{vid}"


@dataclass(frozen=True)
class Segment:
    stage: int
    graph: Graph  # inputs: own state, public inputs, then values by value_name; outputs too
    reads: tuple[int, ...]  # the step-graph value ids of graph.inputs


def segment(g: Graph, p: StagePlan, k: int) -> Segment:
    """Segment k of the schedule as its own graph: it reads the stage's state and the public
    inputs (hyper-parameters, x, y, step) by name and earlier values (boundary tensors, or the
    stage's own from its earlier segments) as `v<id>`; it recomputes the public nodes it reads;
    it writes every value it makes that a later segment reads, its state outputs and the loss."""
    s, nodes = p.schedule[k]
    n_in = len(g.inputs)
    mine = set(nodes)
    need: set[int] = set()  # public nodes to recompute

    def pull(v: int) -> None:
        if v >= n_in and p.node_stage[v - n_in] == PUBLIC and v - n_in not in need:
            need.add(v - n_in)
            for u in g.nodes[v - n_in].inputs:
                pull(u)

    for i in nodes:
        for v in g.nodes[i].inputs:
            pull(v)
    body = sorted(mine | need)
    reads = []
    for i in body:
        for v in g.nodes[i].inputs:
            if (v < n_in or (v - n_in) not in mine and (v - n_in) not in need) and v not in reads:
                reads.append(v)
    reads.sort()
    remap = {v: j for j, v in enumerate(reads)}
    inputs = []
    for v in reads:
        shape, dt = g.value(v)
        inputs.append(Value(g.inputs[v].name if v < n_in else value_name(v), shape, dt))
    new_nodes = []
    for i in body:
        n = g.nodes[i]
        new_nodes.append(type(n)(n.op, tuple(remap[v] for v in n.inputs), n.attrs, n.shape,
                                 n.dtype))  # fmt: skip
        remap[n_in + i] = len(reads) + len(new_nodes) - 1
    later: set[int] = set()
    for _, ns in p.schedule[k + 1 :]:
        for i in ns:
            later.update(g.nodes[i].inputs)
    outs = [(value_name(n_in + i), remap[n_in + i]) for i in nodes if n_in + i in later]
    outs += [(name, remap[vid]) for name, vid in g.outputs if vid >= n_in and vid - n_in in mine]
    sg = Graph(tuple(inputs), tuple(new_nodes), tuple(outs))
    sg.validate()
    return Segment(s, sg, tuple(reads))


class StageHolder:
    """One stage's solver in miniature: it holds its own state tensors only, the values its
    segments made, and the boundary tensors it was sent."""

    def __init__(self, stage: int, state: dict[str, torch.Tensor]):
        self.stage = stage
        self.state = state
        self.values: dict[str, torch.Tensor] = {}
        self.received: list[str] = []

    def run(self, seg: Segment, public: dict[str, torch.Tensor], cfg: RunConfig
            ) -> dict[str, torch.Tensor]:  # fmt: skip
        ins = []
        for v in seg.graph.inputs:
            if v.name in self.state:
                ins.append(self.state[v.name])
            elif v.name in public:
                ins.append(public[v.name])
            else:
                ins.append(self.values[v.name])  # a KeyError: a value this stage was never sent
        out, _ = run_graph(seg.graph, ins, cfg)
        self.values.update({k: t for k, t in out.items() if k.startswith("v")})
        return out

    def receive(self, name: str, t: torch.Tensor) -> None:
        self.values[name] = t
        self.received.append(name)

    def state_bytes(self) -> int:
        return sum(4 * prod(t.shape) for t in self.state.values())


def run_stages(g: Graph, p: StagePlan, state: dict[str, torch.Tensor],
               public: dict[str, torch.Tensor], cfg: RunConfig = RunConfig(),
               segments: list[Segment] | None = None
               ) -> tuple[dict[str, torch.Tensor], torch.Tensor, list[StageHolder]]:  # fmt: skip
    """One step by stages: P holders, each given only its own state, run the schedule's
    segments in order and send each boundary tensor to its consumers as it is made. Returns
    S_{t+1} (gathered from the holders), the loss and the holders."""
    n_in = len(g.inputs)
    holders = [StageHolder(s, {n: state[n] for n in names}) for s, names in enumerate(p.state)]
    consumers = {value_name(v): c for v, _, c in p.boundaries}
    segments = segments or [segment(g, p, k) for k in range(len(p.schedule))]
    new_state: dict[str, torch.Tensor] = {}
    loss = None
    for seg in segments:
        h = holders[seg.stage]
        out = h.run(seg, public, cfg)
        for name, t in out.items():
            for c in consumers.get(name, ()):
                holders[c].receive(name, t)
            if name == "loss":
                loss = t
            elif name in h.state:
                new_state[name] = t
    for name, vid in g.outputs:  # a state output that is its input (a tensor no step changes)
        if name in state and vid < n_in:
            new_state[name] = state[g.inputs[vid].name]
    if loss is None:
        loss = holders[p.P - 1].values.get("loss")
    for h in holders:
        h.state = {n: new_state[n] for n in h.state}
    return {v.name: new_state[v.name] for v in g.inputs if v.name in new_state}, loss, holders
