"""The roles' one game loop (agents/roles/games.py `take_turn`), without a chain: it reads the
game with a keyless reader, asks the player for its move and hands the typed move, or a timeout
claim, to the executor, on the job manager's game or the court's."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from agents.core.enums import Phase, Side
from agents.dispute.player import Move
from agents.roles.actions import Arena, ClaimTimeout, GameMove
from agents.roles.games import take_turn
from agents.roles.logic import Now

GAME, DEADLINE = 5, 100
MOVE = Move("postCheckpoints", ([b"\0" * 32],))


class Executor:
    def __init__(self) -> None:
        self.executed: list = []

    async def execute(self, action) -> None:
        self.executed.append(action)


class Reader:
    """An AsyncGameReader's two reads of a game, answered from a view and DEADLINE."""

    def __init__(self, view) -> None:
        self._view = view

    async def view(self, game_id: int):
        return self._view

    async def deadline(self, game_id: int) -> int:
        return DEADLINE


def turn(phase: Phase, at: int, arena: Arena = Arena.UNIT, move: Move | None = MOVE) -> list:
    reader = Reader(SimpleNamespace(phase=phase, moves=3))
    player = SimpleNamespace(next_move=lambda v: move)
    ex = Executor()
    taken = asyncio.run(take_turn(ex, reader, GAME, Side.DEFENDER, player, Now(1, at), arena=arena))
    assert ex.executed == ([taken] if taken is not None else [])
    return ex.executed


def test_my_move_is_executed_on_my_turn_on_the_game_it_belongs_to():
    assert turn(Phase.POST_CHECKPOINTS, 50) == [GameMove(f"game:{GAME}:move:3", GAME, MOVE)]
    court = turn(Phase.POST_CHECKPOINTS, 50, Arena.COURT)
    assert court == [GameMove(f"court-game:{GAME}:move:3", GAME, MOVE, Arena.COURT)]
    rounds = turn(Phase.POST_CHECKPOINTS, 50, Arena.ROUND)
    assert rounds == [GameMove(f"round-game:{GAME}:move:3", GAME, MOVE, Arena.ROUND)]


def test_the_opponents_clock_run_out_is_claimed_and_nothing_else_is_sent():
    assert turn(Phase.PICK_SEGMENT, 50) == []  # the challenger's turn, its clock runs
    assert turn(Phase.PICK_SEGMENT, DEADLINE + 1) == [ClaimTimeout(f"game:{GAME}:timeout", GAME)]
    assert turn(Phase.POST_CHECKPOINTS, DEADLINE + 1) == []  # my own clock ran out
    assert turn(Phase.POST_CHECKPOINTS, 50, move=None) == []  # no move to make
    assert turn(Phase.RESOLVED, DEADLINE + 1) == []
