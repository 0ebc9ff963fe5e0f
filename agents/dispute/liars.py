"""Defenders that lie in ways an honest solver never would, for tests and benches: each is a
`Defender` whose answers at one kind of move are replaced. Kept out of the honest players
(player.py) so that an honest agent's code path has no lie in it."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from agents.dispute import reduction
from agents.dispute.player import Defender, GameView, Move, element_chain


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
