"""An aggregate as the dispute game sees it (PROTOCOL §6.9, §7.2): the aggregation graph's node
descriptors and dispute config, and a party's account of the claim "from the round state H_r,
with the round's units list U_r, the aggregation graph gives H_{r+1}" — one step, which the
players of agents/dispute/player.py play as they play a training step.

The claim's agreed start is H_r (a state root: its tensors are opened as a step's S_t is), and
the units list U_r (the root list of the S units' final state roots, `units_root`) stands where
a training claim has its dataset: row s of a unit stack `u.<name>` is opened in unit s's final
state, which is entry s of U_r (operand kind 13, `unit_opening`). The stacks' reduction is a
`matmul` of K = S terms, each reading one unit: it is always bisected (a direct proof would need
every unit's opening), so every move opens at most one unit's element.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from agents.dispute.encoding import (
    DTYPE_F32,
    KIND_CONST,
    KIND_NODE,
    KIND_STATE,
    KIND_UNITS,
    UNITS_DOMAIN,
    TensorInput,
    name_hash,
)
from agents.dispute.model_graph import (
    ModelJobGraph,
    chain_terms,
    element_chain,
    encode_nodes,
    graph_config,
    node_reads,
    term_reads,
)
from agents.dispute.trace import merkle_opening
from agents.dispute.trace_walk import TraceRoots, trace_siblings
from agents.model.aggregate import ROUND_PREFIX, UNIT_PREFIX, Aggregation
from agents.model.job import commit_view, state_root
from agents.training import merkle
from agents.training.run import RunConfig

State = dict[str, torch.Tensor]


def units_root(final_roots: Sequence[bytes]) -> bytes:
    """U_r: the root list under vtp.units.v1 of the S units' final state roots, shard order."""
    return merkle.root_list(UNITS_DOMAIN, list(final_roots))


def aggregation_job_graph(agg: Aggregation) -> ModelJobGraph:
    """Descriptors, graph root and dispute config of a job's aggregation graph: H's tensors are
    state inputs (kind 1, H's positions), the unit stacks kind 13 (the step state's positions)."""
    g = agg.graph
    step_pos = {n: i for i, n in enumerate(agg.step_names)}
    round_pos = {n: i for i, n in enumerate(agg.round_names)}
    inputs = []
    for v in g.inputs:
        if v.name.startswith(ROUND_PREFIX):
            name = v.name[len(ROUND_PREFIX) :]
            inputs.append(TensorInput(KIND_STATE, round_pos[name], name_hash(name), DTYPE_F32,
                                      tuple(v.shape)))  # fmt: skip
        else:
            name = v.name[len(UNIT_PREFIX) :]
            inputs.append(TensorInput(KIND_UNITS, step_pos[name], name_hash(name), DTYPE_F32,
                                      tuple(v.shape)))  # fmt: skip
    nodes = encode_nodes(g, inputs)
    cfg = graph_config(g, nodes, list(agg.round_names), 0, 0, 0)
    return ModelJobGraph(g, tuple(nodes), cfg, False)


class AggregationComputation:
    """A party's account of round r's aggregation claim: H_r, the S unit final states, and the
    aggregation graph run on them (its op trace and H_{r+1}). The `Computation` interface of
    agents/dispute/trace.py, with one step and one segment (global step 0)."""

    # the units' reduction reads one unit per term: always bisected (PROTOCOL §7.10)
    direct_terms = 0
    steps = interval = segments = 1
    t0 = 0

    def __init__(self, agg: Aggregation, jg: ModelJobGraph, h: State, units: Sequence[State],
                 cfg: RunConfig = RunConfig()) -> None:  # fmt: skip
        self.agg, self.jg, self.h, self.units, self.cfg = agg, jg, h, list(units), cfg
        self._out: tuple[State, list[torch.Tensor]] | None = None
        self._troots: list[bytes] | None = None
        self._finals: list[bytes] | None = None

    # -- running ---------------------------------------------------------------------------

    def _run(self) -> tuple[State, list[torch.Tensor]]:
        """H_{r+1} and the op trace (a cheater's account overrides this)."""
        return self.agg.run(self.h, self.units, self.cfg, keep_trace=True)

    def _ran(self) -> tuple[State, list[torch.Tensor]]:
        if self._out is None:
            self._out = self._run()
        return self._out

    def output(self) -> State:
        """H_{r+1} as this party computes it."""
        return self._ran()[0]

    def release(self) -> None:
        self._out, self._troots = None, None

    def state(self, t: int) -> State:
        return self.h if t == 0 else self.output()

    def trace(self, t: int) -> list[torch.Tensor]:
        return self._ran()[1]

    def trace_roots(self, t: int) -> list[bytes]:
        if self._troots is None:
            self._troots = [merkle.tensor_root(commit_view(x)) for x in self.trace(t)]
        return self._troots

    def claimed_root(self, t: int) -> bytes:
        return state_root(self.state(t))

    def checkpoint_roots(self) -> list[bytes]:
        return [self.claimed_root(0), self.claimed_root(1)]

    def checkpoint_commit(self) -> bytes:
        return merkle.checkpoint_root(self.checkpoint_roots())

    def final_root(self) -> bytes:
        return self.claimed_root(1)

    def segment_roots(self, segment: int) -> list[bytes]:
        return self.checkpoint_roots()

    def unit_roots(self) -> list[bytes]:
        """F_0 … F_{S-1}, the units' final state roots (computed once: S full states)."""
        if self._finals is None:
            self._finals = [state_root(u) for u in self.units]
        return self._finals

    def units_root(self) -> bytes:
        return units_root(self.unit_roots())

    # -- what the last moves open ----------------------------------------------------------

    def values(self) -> list[torch.Tensor]:
        """Every value by id: the graph's inputs, then its nodes' outputs."""
        return self.agg.inputs(self.h, self.units) + list(self.trace(0))

    def node_output(self, t: int, node: int) -> torch.Tensor:
        return commit_view(self.trace(t)[node])

    def reduction_terms(self, jg: ModelJobGraph, node: int) -> int:
        return chain_terms(jg.graph, node)

    def element_chain(self, jg: ModelJobGraph, t: int, node: int, element: int) -> np.ndarray:
        return element_chain(jg.graph, node, element, self.values())

    def element_openings(
        self, jg: ModelJobGraph, node_roots: TraceRoots, t: int, i: int, element: int,
        term: int | None = None,
    ) -> list[tuple]:  # fmt: skip
        values = self.values()
        if term is None:
            reads = node_reads(jg.graph, i, element, values)
        else:
            reads = term_reads(jg.graph, i, element, term, values)
        g, desc = jg.graph, jg.nodes[i]
        out = []
        for k, inp in enumerate(desc.inputs):
            vid = g.nodes[i].inputs[k] if k < len(g.nodes[i].inputs) else -1
            if inp.kind == KIND_STATE:
                out.append(merkle_opening(commit_view(values[vid]), self._state_proof(inp.index),
                                          reads[k]))  # fmt: skip
            elif inp.kind == KIND_NODE:
                out.append(
                    merkle_opening(
                        commit_view(values[vid]), trace_siblings(node_roots, inp.index), reads[k]
                    )
                )
            elif inp.kind == KIND_CONST:
                out.append(merkle_opening(commit_view(values[len(g.inputs) + i]), [], reads[k]))
            elif inp.kind == KIND_UNITS:
                out.append(self.unit_opening(inp, reads[k]))
            else:
                raise ValueError(f"an aggregation graph has no operand of kind {inp.kind}")
        return out

    def _state_proof(self, index: int) -> list[bytes]:
        entries = [merkle.state_entry(n, merkle.tensor_root(commit_view(self.h[n])))
                   for n in self.agg.round_names]  # fmt: skip
        return list(merkle.list_proof(merkle.STATE_DOMAIN, entries, index).siblings)

    def unit_opening(self, inp: TensorInput, elems: list[int]) -> tuple:
        """The Opening of elements `elems` of a unit stack (S, numel), all in one row s: unit s's
        tensor, its list proof [F_s, n, rows, s, U_r's siblings, F_s's siblings]
        (contracts/dispute/lib/Openings.sol `verifyUnits`)."""
        numel = inp.shape[1]
        rows_of = {e // numel for e in elems} or {0}
        if len(rows_of) != 1:
            raise ValueError("one opening opens one unit's tensor")
        s = rows_of.pop()
        unit = self.units[s]
        names = self.agg.step_names
        tensors = [commit_view(unit[n]) for n in names]
        entries = [merkle.state_entry(n, merkle.tensor_root(t)) for n, t in
                   zip(names, tensors, strict=True)]  # fmt: skip
        finals = self.unit_roots()
        outer = merkle.list_proof(UNITS_DOMAIN, finals, s).siblings
        inner = merkle.list_proof(merkle.STATE_DOMAIN, entries, inp.index).siblings
        t = tensors[inp.index]
        words = [finals[s], merkle.u256(len(names)), merkle.u256(t.shape[0]), merkle.u256(s)]
        return merkle_opening(t, [*words, *outer, *inner], [e % numel for e in elems])
