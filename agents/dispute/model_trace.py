"""A party's account of a version-3 claim (PROTOCOL §2.7, §7): the states, op traces and roots
it commits step by step, and what its last moves open — a `trace.Computation` over a
`ModelJob`, so the players of agents/dispute/player.py play version-3 games unchanged. A
cheating party's account (tests, demos, --cheat) is agents/adversaries/faults.py's
`FaultyModelComputation`.
"""

from __future__ import annotations

import numpy as np
import torch

from agents.dispute.budget import DEFAULT_STATE_CACHE_BYTES, StateBudget
from agents.dispute.model_graph import (
    ModelJobGraph,
    StepValues,
    chain_terms,
    element_chain,
    node_reads,
    openings,
    term_reads,
)
from agents.dispute.trace import Computation
from agents.dispute.trace_walk import TraceRoots
from agents.model.job import ModelJob, State, commit_view, view2d
from agents.training.run import run_graph


class ModelComputation(Computation):
    """States, traces and claimed roots of steps t0 … t0 + steps of a version-3 job (one shard
    of a decomposed job's round: `shard`), from its given start state (the job's initial state,
    or G_r); the claim's bookkeeping is `Computation`'s, its kept states under a byte budget."""

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
        shard: int | None = None,
        cache_bytes: int = DEFAULT_STATE_CACHE_BYTES,
        budget: StateBudget | None = None,
    ):
        self.job, self.jg = job, jg
        # a unit's view of a decomposed job (ModelJob.unit) draws its own shard's batches
        self.shard = job.unit_shard if shard is None else shard
        self._claim(steps, interval, t0, start, cache_bytes, budget)

    def _run(self, st: State, t: int) -> tuple[State, list[torch.Tensor]]:
        g = self.jg.graph
        ins = self.job.step_inputs(st, t, self.shard)
        outs, trace = run_graph(g, ins, self.job.cfg, keep_trace=True)
        return {v.name: outs[v.name] for v in self.job.bundle.state}, trace

    def state_view(self, x: torch.Tensor) -> torch.Tensor:
        return view2d(x)

    def commit_view(self, x: torch.Tensor) -> torch.Tensor:
        """A value's 2-D view, i32 values as uint32 words."""
        return commit_view(x)

    # -- what the last moves open -----------------------------------------------------------

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
