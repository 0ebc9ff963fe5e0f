"""What the verifier and the whistleblower share as challengers: the replay of sampled segments,
the start states a court defence keeps, and `ChallengerMixin`, which plays the dispute game as the
honest challenger from a full computation of the job. Its own module so that neither role
imports the other.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from agents.core.blobs import BlobError, BlobStore
from agents.core.bounded import BoundedCache
from agents.dispute.graph import JobGraph
from agents.dispute.player import Challenger
from agents.roles.actions import Challenge, ChallengeUnit
from agents.roles.artifacts import BadBlob, Checkpoints
from agents.roles.games import take_turn
from agents.roles.jobs import JobContext
from agents.roles.logic import Now, Side, UnitView
from agents.roles.runner import progress_bar
from agents.roles.runtime import Claim, JobRuntime
from agents.training.state import State


class ChallengerStrategy(Protocol):
    """How a challenger disputes a unit: the honest one here; test adversaries (a lying
    challenger) in agents.adversaries, chosen once at start-up from the CLI flags."""

    def counter_claim(self, honest_root: Callable[[], bytes]) -> bytes:
        """The checkpoint root to challenge with (`honest_root`: my full replay's)."""
        ...

    def challenger(self, comp: Claim, jg: JobGraph, game_id: int) -> Any:
        """The dispute-game player answering as the challenger of game `game_id`."""
        ...


@dataclass(frozen=True)
class HonestChallenger:
    """Challenges with the root of its own full replay and plays the honest challenger."""

    def counter_claim(self, honest_root: Callable[[], bytes]) -> bytes:
        return honest_root()

    def challenger(self, comp: Claim, jg: JobGraph, game_id: int) -> Challenger:
        return Challenger(comp, jg)


def replay_segments(
    ctx: JobContext,
    reader: Checkpoints,
    segments: list[int],
    progress: bool = False,
    keep: Callable[[int, State], None] | None = None,
) -> dict[int, bytes]:
    """My end root of each segment, replayed from the solver's start checkpoint; `keep(s, state)`
    is shown each start state (checked against the solver's root) before it is replayed."""
    k, rt = ctx.spec.checkpoint_every, ctx.runtime
    ends: dict[int, bytes] = {}
    todo = sorted(set(segments))
    with progress_bar("replay", len(todo) * k, progress) as advance:
        for s in todo:
            st = reader.state(s)
            if keep is not None:
                keep(s, st)
            for t in range(s * k, (s + 1) * k):
                st = rt.step(st, t)
                advance(1)
            ends[s] = rt.state_root(st)
    return ends


def keep_state(blobs: BlobStore, rt: JobRuntime, st: State, log: logging.Logger) -> str | None:
    """Copy a state into my own blob store (content-addressed) and return its address: a court
    game over a segment I replayed starts from it, and the solver may stop serving its copy.
    None (logged) when my store refuses it: the defence then falls back to a replay from step 0."""
    try:
        return blobs.put(rt.encode_state(st))
    except (BlobError, OSError) as exc:
        log.warning("could not keep a start state in my blob store: %s", exc)
        return None


def kept_state(blobs: BlobStore, rt: JobRuntime, address: str | None, root: bytes) -> State | None:
    """The state I kept at `address`, if it is still there and has state root `root`."""
    if not address:
        return None
    try:
        st = rt.decode_state(blobs.get(address))
    except (BlobError, BadBlob):
        return None
    return st if rt.state_root(st) == root else None


class ChallengerMixin:
    """Plays dispute games as the challenger, from its own full computation, as its strategy
    says (honest unless the start-up wiring chose a test adversary)."""

    strategy: ChallengerStrategy = HonestChallenger()

    def challenger_comp(self, ctx: JobContext) -> Claim:
        """My own account of job `ctx` from step 0 (a replay of the whole job, a challenge, a
        court defence without a kept start). One per job, for at most --max-loaded-jobs jobs:
        an evicted account gives its states back and, asked again, computes them again (the
        same: the engine is deterministic); until then it holds its job's engine."""
        comps = self.__dict__.get("_comps")
        if comps is None:
            comps = self.__dict__["_comps"] = BoundedCache(
                self.max_loaded_jobs, on_evict=lambda comp: comp.release()
            )
        comp = comps.get(ctx.job_id)
        if comp is None:
            comp = ctx.runtime.computation(
                ctx.spec.steps, ctx.spec.checkpoint_every, budget=self.state_budget
            )
            comps.put(ctx.job_id, comp)
        return comp

    def court_comp(self, ctx: JobContext, segment: int, start: State) -> Claim:
        """My account of a court game's claim: segment `segment` replayed from `start`."""
        k = ctx.spec.checkpoint_every
        return ctx.runtime.computation(k, k, t0=segment * k, start=start,
                                       budget=self.state_budget)  # fmt: skip

    async def court_start(
        self,
        ctx: JobContext,
        segment: int,
        root: bytes,
        kept: str | None,
        solver: Callable[[], Awaitable[State | None]],
    ) -> State | None:
        """The start state of a court game over `segment`, whose state root the game fixed at
        `root`: my own copy, kept when I replayed the segment, else the solver's checkpoint
        (`await solver()`, a coroutine since finding it reads the chain: None while it is being
        read, off the round loop: then None, ask again),
        else my own replay from step 0 (the solver's state there whenever its checkpoint is
        right, as it is under a true attestation). None when no source has it."""
        rt = ctx.runtime
        st = kept_state(self.agent.blobs, rt, kept, root)
        if st is not None:
            return st
        try:
            st = await solver()
        except BadBlob as exc:
            self.log.warning(
                "segment %d: the solver's checkpoint is unusable (%s); replaying from step 0",
                segment,
                exc,
            )
        else:
            if st is None:
                return None
            if rt.state_root(st) == root:
                return st
        st = self.challenger_comp(ctx).state(segment * ctx.spec.checkpoint_every)
        return st if rt.state_root(st) == root else None

    async def play(self, game_id: int, ctx: JobContext, now: Now) -> None:
        """My turn as the challenger in the dispute game `game_id` I opened."""
        player = self.strategy.challenger(self.challenger_comp(ctx), ctx.jg, game_id)
        await take_turn(self.executor, self.game_reader, game_id, Side.CHALLENGER, player, now)

    async def open_challenge(self, act: Challenge, u: UnitView, ctx: JobContext) -> bool:
        """Challenge the unit with the checkpoint root of my own full replay. Returns False,
        sending nothing, when that root is the unit's (the caller says what that means)."""
        counter = self.strategy.counter_claim(self.challenger_comp(ctx).checkpoint_commit)
        if counter == u.checkpoint_root:
            return False
        # The bond scales with the job's collateral (at least the flat `challengeBond`): quote it
        # from the chain just before the challenge, as the manager will take it.
        bond = int(await self.manager.functions.challengeBondOf(u.unit_id).call())
        await self.approve_at_least(act.intent, self.manager.address, bond)
        out = await self.executor.execute(ChallengeUnit(act.intent, u.unit_id, counter))
        if out is not None:
            d = await self.manager.functions.getDispute(u.unit_id).call()
            self.log.info(
                "challenged unit %d: dispute game %d opened, bond %d paid",
                u.unit_id,
                d.gameId,
                d.bond,
            )
        return True

    def roots_are_right(self, u: UnitView, intent: str) -> None:
        """open_challenge found the unit's root right after a replay that disagreed: the data
        failed its checks, not the roots. A challenge with my root cannot succeed (the manager
        refuses a counter-claim equal to the commitment): recorded under its intent, so that no
        round plans it again (issue #45: it was planned every round until the window closed)."""
        self.log.warning(
            "unit %d: the data failed its checks but the roots are right: not challenging",
            u.unit_id,
        )
        self.drop(intent, "my replay gives the unit's checkpoint root")
