"""A party's account of a version-3 claim (PROTOCOL §2.7, §7): the states, op traces and roots
it commits step by step, and what its last moves open — `trace.Computation`'s interface over a
`ModelJob`, so the players of agents/dispute/player.py play version-3 games unchanged. A
cheating party's account (tests, demos, --cheat) is agents/adversaries/faults.py's
`FaultyModelComputation`.
"""

from __future__ import annotations

import numpy as np
import torch

from agents.dispute.model_graph import (
    ModelJobGraph,
    StepValues,
    chain_terms,
    element_chain,
    node_reads,
    openings,
    term_reads,
)
from agents.dispute.trace_walk import TraceRoots
from agents.model.job import ModelJob, State, commit_view, state_root
from agents.model.run import run_graph
from agents.training import merkle


class ModelComputation:
    """States, traces and claimed roots of steps t0 … t0 + steps of a version-3 job (one shard
    of a decomposed job's round: `shard`)."""

    # A version-3 matmul reads B down a strided column, one 256-byte chunk per term (about 35k
    # gas each: 2.3 M for K = 64, bench/results/graph_prover.json), so reductions of more than
    # 8 terms are bisected (every move of the bisection opens at most two chunks).
    direct_terms = 8

    def __init__(
        self,
        job: ModelJob,
        jg: ModelJobGraph,
        start: State,
        steps: int,
        interval: int,
        t0: int = 0,
        shard: int = 0,
    ):
        if steps <= 0 or interval <= 0 or steps % interval:
            raise ValueError(f"bad claim: steps={steps} interval={interval}")
        self.job, self.jg, self.steps, self.interval, self.t0 = job, jg, steps, interval, t0
        self.shard = shard
        self._states: dict[int, State] = {t0: start}  # S_t0: the job's initial state, or G_r
        self._traces: dict[int, list[torch.Tensor]] = {}
        self._roots: dict[int, bytes] = {}
        self._troots: dict[int, list[bytes]] = {}

    # -- running ----------------------------------------------------------------------------

    def _run(self, st: State, t: int) -> tuple[State, list[torch.Tensor]]:
        g = self.jg.graph
        ins = self.job.step_inputs(st, t, self.shard)
        outs, trace = run_graph(g, ins, self.job.cfg, keep_trace=True)
        return {v.name: outs[v.name] for v in self.job.bundle.state}, trace

    def seed(self, t: int, st: State) -> None:
        """Give the party's state at global step t (a checkpoint it published), so that states
        after it are computed from it rather than from the start (`Computation.seed`)."""
        if not self.t0 <= t <= self.t0 + self.steps:
            raise IndexError(f"step {t} outside the claim")
        self._states[t] = st

    def release(self) -> None:
        """Drop every kept state but the start, and every trace (`Computation.release`: the
        account is no longer needed; asked again, it recomputes them, the same)."""
        self._states = {self.t0: self._states[self.t0]}
        self._traces.clear()

    def state(self, t: int) -> State:
        if t not in self._states:
            prev = self.state(t - 1)
            st, trace = self._run(prev, t - 1)
            self._states[t], self._traces[t - 1] = st, trace
        return self._states[t]

    def trace(self, t: int) -> list[torch.Tensor]:
        if t not in self._traces:
            self._traces[t] = self._run(self.state(t), t)[1]
        return self._traces[t]

    def trace_roots(self, t: int) -> list[bytes]:
        if t not in self._troots:
            self._troots[t] = [merkle.tensor_root(commit_view(x)) for x in self.trace(t)]
        return self._troots[t]

    def claimed_root(self, t: int) -> bytes:
        if t not in self._roots:
            self._roots[t] = state_root(self.state(t))
        return self._roots[t]

    @property
    def segments(self) -> int:
        return self.steps // self.interval

    def checkpoint_roots(self) -> list[bytes]:
        return [self.claimed_root(self.t0 + k * self.interval)
                for k in range(self.steps // self.interval + 1)]  # fmt: skip

    def checkpoint_commit(self) -> bytes:
        return merkle.checkpoint_root(self.checkpoint_roots())

    def final_root(self) -> bytes:
        return self.claimed_root(self.t0 + self.steps)

    def segment_roots(self, segment: int) -> list[bytes]:
        base = self.t0 + segment * self.interval
        return [self.claimed_root(base + j) for j in range(self.interval + 1)]

    # -- what the last moves open -----------------------------------------------------------

    def node_output(self, t: int, node: int) -> torch.Tensor:
        """Node `node`'s output at step t as committed (its 2-D view, i32 as uint32 words)."""
        return commit_view(self.trace(t)[node])

    def step_values(self, t: int) -> StepValues:
        return StepValues.of(self.job, self.jg, self.state(t), t, self.trace(t), self.shard)

    def reduction_terms(self, jg: ModelJobGraph, node: int) -> int:
        return chain_terms(jg.graph, node)

    def element_chain(self, jg: ModelJobGraph, t: int, node: int, element: int) -> np.ndarray:
        return element_chain(jg.graph, node, element, self.step_values(t).values)

    def element_openings(
        self, jg: ModelJobGraph, node_roots: TraceRoots, t: int, i: int, element: int,
        term: int | None = None,
    ) -> list[tuple]:  # fmt: skip
        sv = self.step_values(t)
        if term is None:
            reads = node_reads(jg.graph, i, element, sv.values)
        else:
            reads = term_reads(jg.graph, i, element, term, sv.values)
        return openings(sv, i, reads, node_roots)
