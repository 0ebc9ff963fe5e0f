"""The one game loop of the roles: a turn in a dispute game (the job manager's, or the attestation
court's), whoever plays it — the solver defending its unit, a challenger (verifier or
whistleblower) playing the game it opened, a verifier defending its attestation in court, a
whistleblower challenging one there.

A turn reads the game with a keyless `AsyncGameReader` (through the agent's one async client),
asks the player for its move, decides with the pure `logic.game_act` (my move while it is my
turn and my clock runs, a timeout claim once the opponent's has run out) and hands the typed
action to the role's one executor: the move is simulated, recorded under its intent and sent
like every other transaction of the agent.
"""

from __future__ import annotations

from typing import Protocol

from agents.core.enums import Side
from agents.dispute.client import AsyncGameReader, Player
from agents.dispute.player import GameView
from agents.roles.actions import Arena, ChainAction, ClaimTimeout, GameMove
from agents.roles.logic import Now, game_act


class Executes(Protocol):
    async def execute(self, action: ChainAction) -> object: ...


async def take_turn(
    executor: Executes,
    reader: AsyncGameReader,
    game_id: int,
    side: Side,
    player: Player,
    now: Now,
    *,
    arena: Arena = Arena.UNIT,
    view: GameView | None = None,
    deadline: int | None = None,
) -> GameMove | ClaimTimeout | None:
    """My turn as `side` in game `game_id` (read by `reader`; `view` and the turn's `deadline`
    when the caller has just read them): the action executed, or None when there is none to
    take now."""
    view = view if view is not None else await reader.view(game_id)
    if deadline is None:
        deadline = await reader.deadline(game_id)
    move = player.next_move(view)
    action = game_act(game_id, side, view.phase, view.moves, deadline, now, move, arena)
    if action is not None:
        await executor.execute(action)
    return action
