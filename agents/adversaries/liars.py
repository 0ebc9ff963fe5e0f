"""Dispute-game players that lie where an honest party never would, for tests, benches and the
--cheat-challenge verifier: defenders (`Defender`s whose answers at one kind of move are
replaced) and `LyingChallenger`, which disputes a true claim. Kept out of the honest players
(agents/dispute/player.py), in the adversaries package no production module imports."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import numpy as np

from agents.core.enums import Phase
from agents.dispute import reduction
from agents.dispute.graph import JobGraph
from agents.dispute.player import (
    DEFENDER_PHASES,
    LEAF,
    Defender,
    GameView,
    Move,
    bisects,
    element_chain,
    pick_accumulators,
    pick_leaf,
    pick_node,
    pick_segment,
    pick_step,
    prove_accumulation,
    prove_element,
    walked_trace,
)
from agents.dispute.trace import Computation


@dataclass
class ChainLiar(Defender):
    """A cheating defender that also lies inside a disputed reduction's accumulator chain
    (PROTOCOL §7.10): from position `from_pos` on it posts its claimed (wrong) element, as if
    the chain had reached it early. The game then ends at accumulation step `from_pos`."""

    from_pos: int = 1

    def next_move(self, v: GameView) -> Move | None:
        move = super().next_move(v)
        if move is None or move.fn != "postAccumulators":
            return move
        acc = element_chain(self.comp, self.jg, v.global_step, v.node, v.element)
        out = self.comp.node_output(v.global_step, v.node).contiguous().reshape(-1)
        claimed = int(out.numpy().view(np.uint32)[v.element])  # its own (wrong) element
        cuts = reduction.cuts(v.lo, v.hi)
        return Move(
            "postAccumulators", ([claimed if p >= self.from_pos else int(acc[p]) for p in cuts],)
        )


@dataclass
class ProducerLiar(Defender):
    """A cheating defender whose posted trace is not the one its claimed S_{t+1} came from: it
    posts `traced`'s trace (an honest party's) with its own S_{t+1} tensor roots, so that a
    producer node's trace entry differs from the root posted for its state tensor. A trace of
    more than 64 nodes is not checked against S_{t+1} when posted (PROTOCOL §7.3): the
    challenger walks to that producer and proves the mismatch (`proveProducer`)."""

    traced: Computation | None = None

    def trace_roots(self, t: int) -> list[bytes]:
        if self.traced is None:
            raise ValueError("ProducerLiar needs the computation whose trace it posts")
        return self.traced.trace_roots(t)


def model_element_cheats(job, jg, start, honest, steps: int, every: int, count: int, seed: int):
    """`count` cheating version-3 computations (agents/dispute/model_trace.py), each flipping
    one high bit of one element of one node at a random step, the graph's operator types taken
    in turn: [(operator, fault, computation)]. A flip that does not change the claimed final
    state is no lie about the claim (nothing downstream reads it), and one that breaks the step
    itself (an index out of range) cannot be committed: both are drawn again (six tries per
    operator)."""
    import random
    from collections import defaultdict

    from agents.adversaries.faults import Fault, FaultyModelComputation

    rng = random.Random(seed)
    by_op = defaultdict(list)
    for i, n in enumerate(jg.graph.nodes):
        by_op[n.op].append(i)
    ops = sorted(by_op)
    out: list = []
    for k in range(count * 6):
        if len(out) == count:
            break
        op = ops[k % len(ops)]
        for _ in range(6):
            i = rng.choice(by_op[op])
            fault = Fault("element", rng.randrange(steps), i, rng.randrange(jg.nodes[i].numel),
                          1 << rng.randrange(16, 31))  # fmt: skip
            cheat = FaultyModelComputation(job, jg, start, steps, every, fault=fault)
            try:
                if cheat.final_root() != honest.final_root():
                    out.append((op, fault, cheat))
                    break
            except (RuntimeError, IndexError, ValueError):
                continue
    return out


@dataclass
class LyingChallenger:
    """Disputes a claim it cannot fault: picks random positions at every level, then proves a
    random element with true openings (`forge=False`: the only ones that verify) or with one
    input word altered (`forge=True`: the prover rejects it); `stop_at` falls silent."""

    comp: Computation  # honest data, for openings and proofs it needs
    jg: JobGraph
    seed: int = 0
    forge: bool = False
    stop_at: int | None = None
    segment: int | None = None  # dispute this segment rather than a random one
    node: int | None = None  # and this node
    element: int | None = None  # and this element of it (row-major index)
    direct_terms: int | None = None  # bisect longer reductions, as the honest challenger does
    rng: random.Random = field(init=False)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)

    def next_move(self, v: GameView) -> Move | None:
        if v.phase in DEFENDER_PHASES or v.phase in (Phase.NONE, Phase.RESOLVED):
            return None
        if v.phase == self.stop_at:
            return None
        rnd = self.rng.randrange
        if v.phase == Phase.PICK_SEGMENT:
            s = rnd(v.segments) if self.segment is None else self.segment
            return pick_segment(v.checkpoints or [], s)
        if v.phase == Phase.PICK_STEP:
            return pick_step(v.step_roots or [], rnd(v.interval))
        if v.phase == Phase.PICK_TRACE_SUBTREE:
            height, first, nodes = v.trace_rounds[-1]
            span = 1 << height
            if self.node is None:
                live = [j for j in range(len(nodes)) if (first + j) * span < len(self.jg.nodes)]
                child = live[rnd(len(live))]
            else:
                child = self.node // span - first
            return Move("pickTraceSubtree", (child, nodes))
        if v.phase == Phase.PICK_NODE:
            i = rnd(len(self.jg.nodes)) if self.node is None else self.node
            return pick_node(self.jg, walked_trace(self.comp, v), i)
        if v.phase == Phase.PICK_LEAF and v.leaves is None and v.subtree is not None:
            # a walk: a random child that still holds tensor leaves (or this element's leaf)
            num_leaves = -(-self.jg.nodes[v.node].numel // LEAF)
            span = 1 << v.subtree_height
            if self.element is None:
                live = [
                    j for j in range(len(v.subtree)) if (v.subtree_index + j) * span < num_leaves
                ]
                child = live[rnd(len(live))]
            else:
                child = self.element // LEAF // span - v.subtree_index
            return Move("pickSubtree", (child, v.subtree))
        if v.phase == Phase.PICK_LEAF:
            leaf = rnd(len(v.leaves or [])) if self.element is None else self.element // LEAF
            return pick_leaf(v.leaves or [], leaf)
        if v.phase == Phase.PICK_ACCUMULATORS:
            return pick_accumulators(v, rnd(len(v.cut_values or []) + 1))
        if v.phase == Phase.PROVE_ACCUMULATION:
            move = prove_accumulation(self.comp, self.jg, v)
            return _forged_accumulation(move) if self.forge else move
        desc = self.jg.nodes[v.node]
        in_range = min(LEAF, desc.numel - v.leaf * LEAF)
        offset = rnd(in_range) if self.element is None else self.element % LEAF
        if bisects(self.comp, self.jg, v, offset, self.direct_terms):
            return Move("openReduction", (offset, v.chunk, desc.encode()))
        move = prove_element(self.comp, self.jg, v, offset)
        if self.forge:
            move = _forged(move)
        return move


def _forged_openings(openings: list[tuple]) -> list[tuple]:
    for k, (troot, proof, droot, chunks) in enumerate(openings):
        if chunks:
            leaf, data, sib = chunks[0]
            data = bytes([data[0] ^ 0x40]) + data[1:]
            openings = list(openings)
            openings[k] = (troot, proof, droot, [(leaf, data, sib), *chunks[1:]])
            break
    return openings


def _forged_accumulation(move: Move) -> Move:
    """The accumulation proof with one opened input word flipped (the prover rejects it)."""
    desc, cfg, openings = move.args
    return Move(move.fn, (desc, cfg, _forged_openings(openings)))


def _forged(move: Move) -> Move:
    """The same proof with one opened input word flipped (a lie about an input)."""
    offset, chunk, desc, cfg, openings = move.args
    return Move(move.fn, (offset, chunk, desc, cfg, _forged_openings(openings)))
