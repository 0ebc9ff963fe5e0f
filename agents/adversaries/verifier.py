"""Verifiers that do not replay: `LazyVerifier` (--lazy) agrees with whatever was committed,
`LyingVerifier` (--cheat-challenge) disputes every unit and plays a lying challenger. For demos
and tests only: the first is what whistleblowers and forced errors exist to catch, the second
tests an honest solver's defence."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from agents.adversaries.banner import Announced
from agents.adversaries.liars import LyingChallenger
from agents.dispute.graph import JobGraph
from agents.roles.logic import Verdict
from agents.roles.runtime import Claim
from agents.roles.verifier import HonestVerifier, VerdictRecord

#: The made-up counter-claim of a lying challenger: any nonzero root other than the unit's.
MADE_UP_ROOT = bytes(32 - 1) + b"\x01"


@dataclass(frozen=True)
class LazyVerifier(Announced, HonestVerifier):
    """Attests without fetching or replaying anything: seals the unit's committed final state
    root as the end root of every sampled segment; has no data to defend a court game with (it
    stays silent there and loses on time)."""

    banner: str = "LAZY: will attest without replaying"

    async def judge_unread(
        self, segments: list[int], final_root: bytes, record: Callable[[VerdictRecord], None],
        read: Callable[[], Awaitable[None]],
    ) -> None:  # fmt: skip
        ends = ["0x" + final_root.hex()] * len(segments)
        record((Verdict.AGREE, {"segments": segments, "end_roots": ends, "replayed": False}))

    async def defend_court(self, defend: Callable[[], Awaitable[None]]) -> None:
        return None


@dataclass(frozen=True)
class LyingVerifier(Announced, HonestVerifier):
    """Disputes every unit without replaying: seals the solver's published end roots (so it is
    not silent), challenges with a made-up root and plays a lying challenger."""

    banner: str = "CHEAT-CHALLENGE: will dispute every unit without replaying"

    async def judge_read(
        self, segments: list[int], published_root: Callable[[int], bytes],
        record: Callable[[VerdictRecord], None], replay: Callable[[], Awaitable[None]],
    ) -> None:  # fmt: skip
        ends = ["0x" + published_root(s + 1).hex() for s in segments]
        record((Verdict.DISAGREE, {"segments": segments, "end_roots": ends, "wrong": []}))

    def counter_claim(self, honest_root: Callable[[], bytes]) -> bytes:
        return MADE_UP_ROOT

    def challenger(self, comp: Claim, jg: JobGraph, game_id: int) -> LyingChallenger:
        return LyingChallenger(comp, jg, seed=game_id)
