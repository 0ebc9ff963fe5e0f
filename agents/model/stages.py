"""A pipelined step run by stages (PROTOCOL §5.4): a segment of the plan as its own graph
(what a verifier replays from committed boundary inputs), and P holders that each keep only
their own state and exchange only the plan's boundary tensors.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

import torch

from agents.model.job import commit_view
from agents.model.stage_plan import PUBLIC, StagePlan
from agents.training import merkle
from agents.training.ir import Graph, Value
from agents.training.run import RunConfig, run_graph

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


def boundary_root(t: torch.Tensor) -> bytes:
    """The commitment of a boundary tensor: its tensor root (§3) as a value of the op trace is
    committed (its 2-D view; i32 as uint32 words)."""
    return merkle.tensor_root(commit_view(t))


class BoundaryMismatch(ValueError):
    """A boundary tensor that is not the one its producer committed: the consumer refuses it."""

    def __init__(self, name: str, producer: int, consumer: int):
        super().__init__(f"boundary tensor {name} from stage {producer} does not match the root "
                         f"stage {producer} committed (refused by stage {consumer})")  # fmt: skip
        self.name, self.producer, self.consumer = name, producer, consumer


class StageHolder:
    """One stage's solver in miniature: it holds its own state tensors only, the values its
    segments made, and the boundary tensors it was sent, each checked against the root its
    producer committed before use."""

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

    def receive(self, name: str, t: torch.Tensor, root: bytes, producer: int) -> None:
        if boundary_root(t) != root:
            raise BoundaryMismatch(name, producer, self.stage)
        self.values[name] = t
        self.received.append(name)

    def state_bytes(self) -> int:
        return sum(4 * prod(t.shape) for t in self.state.values())


@dataclass
class StagedStep:
    state: dict[str, torch.Tensor]  # S_{t+1}, gathered from the holders, in state order
    loss: torch.Tensor
    holders: list[StageHolder]
    published: dict[str, torch.Tensor]  # every boundary tensor, as its producer published it
    roots: dict[str, bytes]  # its producer's commitment (boundary_root)


def run_stages(g: Graph, p: StagePlan, state: dict[str, torch.Tensor],
               public: dict[str, torch.Tensor], cfg: RunConfig = RunConfig(),
               segments: list[Segment] | None = None, holder=None) -> StagedStep:  # fmt: skip
    """One step by stages: P holders (`holder(stage, own state)`, default StageHolder), each
    given only its own state, run the schedule's segments in order; each boundary tensor is
    committed (its root) and published by its producer as it is made, and each consumer checks
    it against that root before use."""
    n_in = len(g.inputs)
    make = holder or StageHolder
    holders = [make(s, {n: state[n] for n in names}) for s, names in enumerate(p.state)]
    consumers = {value_name(v): c for v, _, c in p.boundaries}
    segments = segments or [segment(g, p, k) for k in range(len(p.schedule))]
    new_state: dict[str, torch.Tensor] = {}
    published: dict[str, torch.Tensor] = {}
    roots: dict[str, bytes] = {}
    loss = None
    for seg in segments:
        h = holders[seg.stage]
        out = h.run(seg, public, cfg)
        for name, t in out.items():
            if name in consumers:
                published[name], roots[name] = t, boundary_root(t)
                for c in consumers[name]:
                    holders[c].receive(name, t, roots[name], seg.stage)
            if name == "loss":
                loss = t
            elif name in h.state:
                new_state[name] = t
    for name, vid in g.outputs:  # a state output that is its input (a tensor no step changes)
        if name in state and vid < n_in:
            new_state[name] = state[g.inputs[vid].name]
    for h in holders:
        h.state = {n: new_state[n] for n in h.state}
    out_state = {v.name: new_state[v.name] for v in g.inputs if v.name in new_state}
    return StagedStep(out_state, loss, holders, published, roots)


def replay_stage(g: Graph, p: StagePlan, stage: int, state: dict[str, torch.Tensor],
                 public: dict[str, torch.Tensor], inputs: dict[str, torch.Tensor],
                 roots: dict[str, bytes], cfg: RunConfig = RunConfig()) -> list[str]:  # fmt: skip
    """A verifier's replay of one stage's step from its S_t (`state`: that stage's tensors) and
    the committed boundary inputs (`inputs`, each checked against `roots` first): the names of
    the boundary tensors this stage published (`roots`) that its replay does not reproduce.
    Empty: the stage computed what it committed from what it was committed to receive."""
    h = StageHolder(stage, dict(state))
    mine = {value_name(v) for v, prod_, _ in p.boundaries if prod_ == stage}
    feeds = {value_name(v): prod_ for v, prod_, c in p.boundaries if stage in c}
    for name, producer in feeds.items():
        h.receive(name, inputs[name], roots[name], producer)
    wrong = []
    for k, (s, _) in enumerate(p.schedule):
        if s != stage:
            continue
        out = h.run(segment(g, p, k), public, cfg)
        wrong += [n for n in sorted(mine & out.keys()) if boundary_root(out[n]) != roots[n]]
    return wrong
