"""Defenders that lie in ways an honest solver never would, for tests and benches: each is a
`Defender` whose answers at one kind of move are replaced. Kept out of the honest players
(agents/dispute/player.py), in the adversaries package no production module imports."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from agents.dispute import reduction
from agents.dispute.player import Defender, GameView, Move, element_chain
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

    from agents.dispute.model_trace import ModelComputation
    from agents.dispute.trace import Fault

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
            cheat = ModelComputation(job, jg, start, steps, every, fault=fault)
            try:
                if cheat.final_root() != honest.final_root():
                    out.append((op, fault, cheat))
                    break
            except (RuntimeError, IndexError, ValueError):
                continue
    return out
