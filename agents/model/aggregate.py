"""The aggregation of a decomposed job's round as a committed graph of registry operators
(PROTOCOL §2.9, §5.1, §5.2).

Round r starts from the **round state** H_r: the step state G_r (every tensor the step graph
carries: parameters and the inner optimizer's state) followed, for an outer optimizer with
momentum, by one outer momentum buffer `outer.<p>` per parameter p. Each unit (r, s) trains
from G_r (H_r's first tensors) and ends in S_{r,s}. The aggregation graph reads H_r and, per
step-state tensor n, the S units' final values stacked as one (S, numel) input `u.<n>` (row s is
S_{r,s}[n], row-major), and writes H_{r+1}:

    avg_n  = reshape(matmul(w, u.n), shape_n)          w = (1, S) const, w_s = fl(N_s / N)
    average outer:   G'_n = avg_n                                   (every tensor: version 2)
    nesterov outer:  for a parameter p:                             (torch SGD, nesterov=True)
                       Δ    = G_p − avg_p                           the pseudo-gradient
                       buf' = fl(μ·buf) + Δ                         outer.p, committed state
                       G'_p = G_p − fl(lr · fl(Δ + fl(μ·buf')))
                     for the inner optimizer's state: avg_n (averaged, as version 2 does)

`matmul` of the (1, S) weights with the (S, numel) stack is §2's `average` bit for bit (acc =
+0; acc = fl(acc + fl(w_s × P_s)) for s ascending), and its accumulator chain is the S shards, so
a dispute over an aggregate element is bisected over the S inputs (PROTOCOL §7.10) and a move
opens one unit's element. A version-3 spec binds its graph by hash (`aggregate`); version 2
keeps its own reference (agents/training/decompose.py), which `average` equals bit for bit.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from math import prod

import numpy as np
import torch

from agents.training import float32 as F
from agents.training.ir import Graph, Value, graph_from_obj
from agents.training.keccak import keccak256
from agents.training.registry import GraphError, Node
from agents.training.run import RunConfig, run_graph
from agents.training.spec import OUTER_HYPER, ModelSpec, canonical_json

AGGREGATE_FORMAT = "vtp.aggregate.v1"
OUTER_KINDS = tuple(OUTER_HYPER)
OUTER_PREFIX = "outer."
UNIT_PREFIX = "u."
ROUND_PREFIX = "g."

State = dict[str, torch.Tensor]


@dataclass(frozen=True)
class Outer:
    """The outer optimizer of a decomposed job: `average` (G_{r+1} = the units' weighted average)
    or `nesterov` (SGD with Nesterov momentum on the pseudo-gradient, lr and momentum as
    binary32 bits)."""

    kind: str = "average"
    lr_bits: int = 0
    momentum_bits: int = 0

    @classmethod
    def nesterov(cls, lr: float, momentum: float) -> Outer:
        return cls("nesterov", F.bits(np.float32(lr)), F.bits(np.float32(momentum)))

    @classmethod
    def of(cls, spec: ModelSpec) -> Outer:
        bits = dict(spec.outer_bits)
        return cls(spec.outer, bits.get("lr", 0), bits.get("momentum", 0))

    def bits(self) -> tuple[tuple[str, int], ...]:
        """The spec's `outer_bits`: the hyper-parameters of this kind, in order."""
        have = {"lr": self.lr_bits, "momentum": self.momentum_bits}
        return tuple((k, have[k]) for k in OUTER_HYPER[self.kind])

    @property
    def has_momentum(self) -> bool:
        return self.kind == "nesterov"

    def to_obj(self) -> dict:
        if self.kind == "average":
            return {"kind": "average"}
        return {"kind": self.kind, "lr": f"0x{self.lr_bits:08x}",
                "momentum": f"0x{self.momentum_bits:08x}"}  # fmt: skip


def outer_names(params: Sequence[str]) -> list[str]:
    """The outer momentum buffers' state names, one per parameter, in parameter order."""
    return [OUTER_PREFIX + p for p in params]


def round_state_values(state: Sequence[Value], params: Sequence[str], outer: Outer) -> list[Value]:
    """H's tensors: the step state, then (nesterov) one outer buffer per parameter."""
    shapes = {v.name: v.shape for v in state}
    extra = [Value(n, shapes[p], "f32") for n, p in zip(outer_names(params), params, strict=True)]
    return [*state, *(extra if outer.has_momentum else [])]


def aggregation_graph(
    state: Sequence[Value], params: Sequence[str], weights: Sequence[np.float32], outer: Outer
) -> Graph:
    """The aggregation graph of a job whose step state is `state` (state order), `params` the
    parameters among it (in state order), `weights` the S binary32 shard weights."""
    S = len(weights)
    if S < 1:
        raise GraphError("an aggregation needs at least one shard")
    if outer.kind not in OUTER_KINDS:
        raise GraphError(f"outer optimizer must be one of {OUTER_KINDS}, got {outer.kind!r}")
    if not set(params) <= {v.name for v in state}:
        raise GraphError("every parameter must be a state tensor")
    h = round_state_values(state, params, outer)
    inputs = [Value(ROUND_PREFIX + v.name, v.shape, "f32") for v in h]
    inputs += [Value(UNIT_PREFIX + v.name, (S, prod(v.shape)), "f32") for v in state]
    nodes: list[Node] = []

    def add(op: str, ins: tuple[int, ...], shape, attrs: tuple[int, ...] = ()) -> int:
        nodes.append(Node(op, ins, attrs, tuple(shape), "f32"))
        return len(inputs) + len(nodes) - 1

    w = add("const", (), (1, S), tuple(F.bits(x) for x in weights))
    if outer.has_momentum:
        mu = add("const", (), (), (outer.momentum_bits,))
        lr = add("const", (), (), (outer.lr_bits,))
    out: dict[str, int] = {}
    n_h = len(h)
    pos = {v.name: i for i, v in enumerate(h)}
    for k, v in enumerate(state):
        m = add("matmul", (w, n_h + k), (1, prod(v.shape)))
        avg = add("reshape", (m,), v.shape)
        if not (outer.has_momentum and v.name in params):
            out[v.name] = avg
            continue
        g, buf = pos[v.name], pos[OUTER_PREFIX + v.name]
        delta = add("sub", (g, avg), v.shape)
        new_buf = add("add", (add("mul", (mu, buf), v.shape), delta), v.shape)
        step = add("add", (delta, add("mul", (mu, new_buf), v.shape)), v.shape)
        out[v.name] = add("sub", (g, add("mul", (lr, step), v.shape)), v.shape)
        out[OUTER_PREFIX + v.name] = new_buf
    graph = Graph(tuple(inputs), tuple(nodes), tuple((v.name, out[v.name]) for v in h))
    graph.validate()
    return graph


def graph_bytes(g: Graph) -> bytes:
    """The aggregation graph's canonical bytes (sorted keys, no spaces, ASCII)."""
    return canonical_json({"format": AGGREGATE_FORMAT, "graph": g.to_obj()})


def graph_hash(g: Graph) -> str:
    """keccak-256 of `graph_bytes`, as a spec's `aggregate` field writes it."""
    return "0x" + keccak256(graph_bytes(g)).hex()


def graph_from_bytes(blob: bytes) -> Graph:
    try:
        o = json.loads(blob)
        if o.get("format") != AGGREGATE_FORMAT:
            raise GraphError(f"aggregation graph format must be {AGGREGATE_FORMAT!r}")
        g = graph_from_obj(o["graph"])
    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError, AttributeError) as e:
        raise GraphError(f"malformed aggregation graph: {e!r}"[:300]) from None
    if graph_bytes(g) != blob:
        raise GraphError("aggregation graph bytes are not canonical JSON")
    return g


@dataclass(frozen=True)
class Aggregation:
    """A job's aggregation: its graph, the step state's and the round state's tensor names."""

    graph: Graph
    step_names: tuple[str, ...]  # G's tensors (a unit's state), state order
    round_names: tuple[str, ...]  # H's tensors: G's, then the outer buffers

    @classmethod
    def of(cls, graph: Graph) -> Aggregation:
        rn = tuple(v.name[len(ROUND_PREFIX):] for v in graph.inputs
                   if v.name.startswith(ROUND_PREFIX))  # fmt: skip
        sn = tuple(v.name[len(UNIT_PREFIX):] for v in graph.inputs
                   if v.name.startswith(UNIT_PREFIX))  # fmt: skip
        if rn[: len(sn)] != sn or [k for k, _ in graph.outputs] != list(rn):
            raise GraphError("an aggregation graph reads H and the units' stacks, writes H")
        return cls(graph, sn, rn)

    @property
    def shards(self) -> int:
        return self.graph.inputs[len(self.round_names)].shape[0]

    def initial(self, g0: State) -> State:
        """H_0: S_0, then zero outer buffers."""
        h = {n: g0[n] for n in self.step_names}
        for v in self.graph.inputs[len(self.step_names) : len(self.round_names)]:
            h[v.name[len(ROUND_PREFIX) :]] = torch.zeros(v.shape, dtype=torch.float32)
        return h

    def unit_start(self, h: State) -> State:
        """G_r: the step state a unit of round r trains from (H_r's first tensors)."""
        return {n: h[n] for n in self.step_names}

    def inputs(self, h: State, units: Sequence[State]) -> list[torch.Tensor]:
        """The graph's inputs: H_r's tensors, then each step-state tensor's (S, numel) stack."""
        if len(units) != self.shards:
            raise ValueError(f"{len(units)} unit states for {self.shards} shards")
        ins = [h[n] for n in self.round_names]
        for n in self.step_names:
            ins.append(torch.stack([u[n].reshape(-1) for u in units]))
        return ins

    def run(self, h: State, units: Sequence[State], cfg: RunConfig = RunConfig(),
            keep_trace: bool = False) -> tuple[State, list[torch.Tensor]]:  # fmt: skip
        """H_{r+1} (and the op trace: every node's output, when keep_trace)."""
        out, trace = run_graph(self.graph, self.inputs(h, units), cfg, keep_trace=keep_trace)
        return {n: out[n] for n in self.round_names}, trace
