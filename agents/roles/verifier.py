"""The verifier: register and stake; when drawn for a unit, fetch its checkpoints, replay the
sampled segments (or every segment with --replay-all), seal the end roots it computed
(`sealAttestation`, commit-reveal: no verifier can copy another's roots or wait for another's
verdict) and open the seal (`attest`) once every drawn verifier sealed or the challenge window
closed (the last drawn verifier to answer attests in the clear instead: one transaction, nobody
is left to copy it); a replay that disagrees also challenges the unit and plays the dispute
game as the challenger; withdraw its fees.

What it decides is its `VerifierStrategy`: `HonestVerifier` here. The test adversaries selected
by `--lazy` and `--cheat-challenge` (agents/adversaries/verifier.py) are wired in at start-up
(agents/cli/adversaries.py); this module does not know them.

A drawn verifier answers whatever dispute config the job has: it replays and seals with the spec
and the data alone, and only a challenge (which opens a game under the config) is skipped, with
one log line, when the registered config is missing or not the spec's.

Persistent memory: kind "verdict", id "<unit>:<attempt>" — the replay's outcome, the end roots
to attest and the blob address (in my own blob store) of each attested segment's start state,
so a restart neither replays again nor changes its answer, and a court game over a segment can
be defended after the solver's data is gone; kind "seal", same id — the end roots sealed, and
secret "seal-salt:<unit>:<attempt>" — the salt, both stored before the seal is sent, so a
restarted verifier sends the same seal and can open it; kind "court", id "<game>" — a court game
over my attestation, recorded from the court's AttestationChallenged events (read through the
core's reorg-safe event stream, `--confirmations` deep).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from eth_abi import encode
from eth_utils import keccak

from agents.core.bounded import SaidOnce
from agents.core.enums import Role
from agents.core.events import AbiDecoder, Event, EventStream
from agents.core.store import Record, Store
from agents.dispute.availability import StateOpening
from agents.dispute.player import Defender, Phase
from agents.dispute.trace import drop_computation
from agents.economics.detection import chain_sample
from agents.roles.actions import (
    AnswerData,
    Arena,
    Attest,
    AttestRoots,
    ChainAction,
    Challenge,
    Offer,
    OfferData,
    Play,
    Replay,
    Seal,
    SealAttestation,
    WithdrawCourt,
)
from agents.roles.artifacts import BadBlob, Checkpoints, make_locator
from agents.roles.challenge import (
    ChallengerMixin,
    ChallengerStrategy,
    HonestChallenger,
    keep_state,
    kept_state,
    replay_segments,
)
from agents.roles.config import VerifierConfig
from agents.roles.games import take_turn
from agents.roles.holding import answer_request
from agents.roles.jobs import (
    JobContext,
    JobRejected,
    LoadedJobs,
    keep_job,
    load_job,
)
from agents.roles.logic import (
    Act,
    Now,
    Side,
    UnitStatus,
    UnitView,
    Verdict,
    VerifierFacts,
    VerifierStatus,
    late_by,
    seals_open,
    verifier_acts,
)
from agents.roles.runner import RoleAgent
from agents.training.merkle import checkpoint_root
from agents.training.state import State

TOKEN = 10**18


def seal_of(
    unit_id: int, attempt: int, verifier: str, end_roots: list[bytes], salt: bytes
) -> bytes:
    """IJobManager.sealOf: keccak256(abi.encode(unitId, attempt, verifier, endRoots, salt))."""
    types = ["uint256", "uint32", "address", "bytes32[]", "bytes32"]
    return keccak(encode(types, [unit_id, attempt, verifier, end_roots, salt]))


def sealed_attestation(
    store: Store, unit_id: int, attempt: int, verifier: str, end_roots: list[bytes]
) -> tuple[list[bytes], bytes, bytes]:
    """(end roots, salt, seal) of my attestation of this attempt. The first call draws the salt
    and stores it with the roots before anything is sent: a verifier restarted after sending
    the seal must open it with the same roots and salt (and re-sends the same seal if the first
    send was lost, so its intent stays the same transaction)."""
    key = f"{unit_id}:{attempt}"
    rec = store.get_record("seal", key)
    salt = store.get_secret(f"seal-salt:{key}")
    if rec is None or salt is None:
        salt = salt or os.urandom(32)
        data = {"end_roots": ["0x" + r.hex() for r in end_roots]}
        with store.transaction():
            store.put_secret(f"seal-salt:{key}", salt)
            store.put_record("seal", key, "sealed", data)
        rec = store.get_record("seal", key)
        assert rec is not None
    roots = [bytes.fromhex(r[2:]) for r in rec.data["end_roots"]]
    return roots, salt, seal_of(unit_id, attempt, verifier, roots, salt)


def no_game_reason(registered: bytes, placement: tuple[int, ...] | None) -> str:
    """Why a job's game is not set up for it (game_context), in one phrase for the log."""
    if placement is not None:
        return f"a unit placement {list(placement)} is registered for a job that is no unit"
    if not any(registered):
        return "no dispute config is registered"
    return f"the registered dispute config 0x{registered.hex()[:16]}… is not the spec's"


#: A verifier's verdict of a unit's attempt, as its "verdict" record: ("agree" | "disagree",
#: {"segments", "end_roots", ...}); "replayed": False marks one that no replay backs.
VerdictRecord = tuple[Verdict, dict]


class VerifierStrategy(ChallengerStrategy, Protocol):
    """What a verifier decides: the honest replay (`HonestVerifier`) or a test adversary's
    shortcut (agents.adversaries: --lazy, --cheat-challenge), chosen once at start-up. Each
    hook is handed what the honest verifier does next, as a callable."""

    def announce(self, log: logging.Logger) -> None:
        """Say once at start-up what this strategy does, if it is not the honest one."""
        ...

    async def judge_unread(
        self, segments: list[int], final_root: bytes, record: Callable[[VerdictRecord], None],
        read: Callable[[], Awaitable[None]],
    ) -> None:  # fmt: skip
        """Decide a unit's verdict before any checkpoint is fetched: `await read()` fetches the
        solver's checkpoints (then `judge_read`); `record(verdict)` decides without them. A
        coroutine, as `read` is: it reads the chain."""
        ...

    async def judge_read(
        self, segments: list[int], published_root: Callable[[int], bytes],
        record: Callable[[VerdictRecord], None], replay: Callable[[], Awaitable[None]],
    ) -> None:  # fmt: skip
        """Decide it once the solver's checkpoints are read: `await replay()` replays the
        segments and records what the replay says (it reads the chain time after the replay);
        `record(verdict)` decides from the published roots."""
        ...

    async def defend_court(self, defend: Callable[[], Awaitable[None]]) -> None:
        """Defend my attestations disputed in the AttestationCourt: `defend()` does."""
        ...


@dataclass(frozen=True)
class HonestVerifier(HonestChallenger):
    """Fetches, replays and says what its replay says; defends what it attested."""

    def announce(self, log: logging.Logger) -> None:
        return None

    async def judge_unread(
        self, segments: list[int], final_root: bytes, record: Callable[[VerdictRecord], None],
        read: Callable[[], Awaitable[None]],
    ) -> None:  # fmt: skip
        await read()

    async def judge_read(
        self, segments: list[int], published_root: Callable[[int], bytes],
        record: Callable[[VerdictRecord], None], replay: Callable[[], Awaitable[None]],
    ) -> None:  # fmt: skip
        await replay()

    async def defend_court(self, defend: Callable[[], Awaitable[None]]) -> None:
        await defend()


class Verifier(ChallengerMixin, RoleAgent):
    role = "verifier"
    config: VerifierConfig
    # A class default, so verifiers built without __init__ (tests) are honest.
    strategy: VerifierStrategy = HonestVerifier()

    def __init__(self, *a, strategy: VerifierStrategy | None = None, **kw) -> None:
        super().__init__(*a, **kw)
        self.strategy = strategy or HonestVerifier()
        self._lock_warned = SaidOnce()  # units whose verifier lock my free stake cannot cover
        self._no_contest: set[str] = set()  # "<unit>:<attempt>": judged WRONG, but C is my root
        # loaded without the dispute config check, under the same bound as `jobs`
        self._replay_jobs = LoadedJobs(self.max_loaded_jobs)
        self._no_game = SaidOnce()  # jobs whose missing or wrong config I logged
        self._undefended = SaidOnce()  # court games whose missing start state I logged
        self._court_stream: EventStream | None = None

    async def setup(self) -> None:
        await self.ensure_registered(Role.VERIFIER, int(self.config.stake * TOKEN), (0, 0, 0))
        self.strategy.announce(self.log)

    async def round(self) -> bool:
        now = await self.now()
        await self.heartbeat_if_due(now)
        for u in await self.units():
            if u.status in (UnitStatus.FINALIZED, UnitStatus.CANCELLED, UnitStatus.NONE):
                continue
            with self.isolated(f"unit {u.unit_id}"):
                await self.warn_if_lock_uncovered(u)
                for act in verifier_acts(u, now, await self.facts(u, now)):
                    await self.handle(act, u, now)
        await self.withdraw_if_credited(now)
        with self.isolated("court defence"):
            await self.defend_attestations(now)
        return False

    def forget_unit(self, unit_id: int) -> None:
        """A settled unit's replay bookkeeping ("<unit>:<attempt>" keys) goes with it."""
        super().forget_unit(unit_id)
        prefix = f"{unit_id}:"
        self.reads.forget(f"checkpoints:{prefix}")
        self._no_contest.difference_update({k for k in self._no_contest if k.startswith(prefix)})

    async def warn_if_lock_uncovered(self, u: UnitView) -> None:
        """Say once per unit, before its draw, when my free stake cannot cover its verifier lock S
        (PROTOCOL §6.5: the draw skips me), so an operator sees why it is never drawn."""
        if u.status != UnitStatus.COMMITTED or u.unit_id in self._lock_warned:
            return
        lock = await self.manager.functions.verifierLockOf(u.job_id).call()
        free = await self.registry.functions.freeStake(self.me).call()
        if free < lock and self._lock_warned.first(u.unit_id):
            self.log.warning(
                "unit %d: its verifier lock %g exceeds my free stake %g: the draw skips me",
                u.unit_id,
                lock / TOKEN,
                free / TOKEN,
            )

    # --- job contexts: replaying needs the spec and the data, a game also the config -----------

    async def replay_context(self, job_id: int) -> JobContext | None:
        """The job's spec, data and engine, checked against the chain like `context` but not its
        dispute config: a drawn verifier does not choose its units and loses its lock S if it
        stays silent, while only a game needs the config (`game_context`). A unit job of a
        decomposed job is loaded with its config and placement (its RoundManager registers them)."""
        ctx = self.jobs.get(job_id) or self._replay_jobs.get(job_id)
        if ctx is not None:
            return ctx
        job = await self.manager.functions.getJob(job_id).call()
        if self.rounds is not None and self.rounds.is_unit_job(job):
            return await self.context(job_id)
        try:
            ctx = load_job(job_id, job, self.spec_stores(), None, self.max_params, self.engine_cfg,
                           self.config.fetch)  # fmt: skip
        except JobRejected as exc:
            self.log.warning("job %d: %s", job_id, exc)
            return None
        keep_job(ctx, self.agent.blobs, self.log)
        self._replay_jobs.put(job_id, ctx)
        return ctx

    async def game_context(self, job_id: int) -> JobContext | None:
        """The job's context if the game it would be disputed in is set up for it (a challenge
        opens a game under its registered config); else None, said once per job: I replay and
        attest, but do not challenge. The checks are RoleAgent.job_context's game checks: the
        registered config is the spec's, and no unit placement is registered for a job that is
        no round manager's unit (its one-step proofs would draw another step's batch)."""
        if (checked := self.jobs.get(job_id)) is not None:
            return checked
        ctx = await self.replay_context(job_id)
        if ctx is None or job_id in self.jobs:
            return ctx
        registered = bytes(await self.game.functions.configOf(job_id).call())
        placement = await self.foreign_placement(job_id)
        if registered == ctx.jg.config.hash() and placement is None:
            # what `context` checks for a job that is no unit job; it leaves the replay cache,
            # so that one context is not counted (and kept) twice
            self._replay_jobs.pop(job_id)
            self.jobs.put(job_id, ctx)
            return ctx
        if self._no_game.first(job_id):
            self.log.warning(
                "job %d: %s: attesting my replay, but not challenging",
                job_id,
                no_game_reason(registered, placement),
            )
        return None

    # --- the attestation court --------------------------------------------------------------

    def court_events(self) -> EventStream:
        """The court's AttestationChallenged events, read `--confirmations` blocks deep through
        the core's reorg-safe stream (persisted cursor and block-hash checkpoints): a challenge
        re-mined in a reorg below the last block read is still seen, one reorged away is
        retracted, and a restart resumes where the stream stopped."""
        if self._court_stream is None:
            assert self.court is not None
            decoder = AbiDecoder(self.court.abi)
            stream = self.agent.stream(
                f"court-challenges:{self.court.address.lower()}",
                decoder,
                [self.court.address],
                decoder.topic0(["AttestationChallenged"]),
            )
            stream.subscribe(
                "verifier", self._on_challenge, self._on_challenge_retracted,
                ["AttestationChallenged"],
            )  # fmt: skip
            self._court_stream = stream
        return self._court_stream

    def _on_challenge(self, ev: Event) -> None:
        a = ev.args
        if a["verifier"].lower() != self.me.lower():
            return
        rec = self.agent.store.get_record("court", str(a["gameId"]))
        if rec is not None and rec.state == "resolved":
            return  # delivered again (a rescan after an upgrade): the game is over
        data = {"unit": int(a["unitId"]), "segment": int(a["segment"]), "block": ev.block_number}
        self.agent.store.put_record("court", str(a["gameId"]), "open", data)

    def _on_challenge_retracted(self, ev: Event) -> None:
        rec = self.agent.store.get_record("court", str(ev.args["gameId"]))
        if rec is not None and rec.state == "open":
            self.agent.store.put_record("court", rec.record_id, "retracted", rec.data)

    async def defend_attestations(self, now: Now) -> None:
        """Defend my attestations disputed in the AttestationCourt, as my strategy does."""
        if self.court is None or self.court_game is None:
            return
        await self.strategy.defend_court(lambda: self._defend_attestations(now))

    async def _defend_attestations(self, now: Now) -> None:
        await self.court_events().catch_up()
        for rec in self.agent.store.list_records("court", "open"):
            await self.defend_one(int(rec.record_id), rec.data, now)
        credits = await self.court.functions.credits(self.me).call()
        if credits > 0:
            await self.executor.execute(WithdrawCourt(f"court-withdraw:{credits}:{now.block}"))

    async def defend_one(self, gid: int, data: dict, now: Now) -> None:
        assert self.court_game is not None
        view = await self.court_game_reader.view(gid)
        if view.phase == Phase.RESOLVED:
            drop_computation(self.__dict__.get("_court_comps", {}), gid)  # done with its states
            self.reads.forget(f"court:{gid}:")
            self.agent.store.put_record("court", str(gid), "resolved", data)
            self.log.info(
                "court game %d over my attestation resolved (winner side %d)", gid, view.winner
            )
            return
        unit_id, s = int(data["unit"]), int(data["segment"])
        ctx = await self.replay_context(unit_id >> 32)
        if ctx is None:
            return
        comps = self.__dict__.setdefault("_court_comps", {})
        deadline = await self.court_game_reader.deadline(gid)
        if gid not in comps:
            block = int(data["block"])
            start = await self.defence_start(gid, unit_id, s, block, ctx, now, deadline)
            if start is None:
                return
            comps[gid] = self.court_comp(ctx, s, start)
            self.reads.forget(f"court:{gid}:")  # the start state lives in the computation now
        player = Defender(comps[gid], ctx.jg)
        await take_turn(
            self.executor, self.court_game_reader, gid, Side.DEFENDER, player, now,
            arena=Arena.COURT, view=view, deadline=deadline,
        )  # fmt: skip

    async def defence_start(
        self,
        gid: int,
        unit_id: int,
        s: int,
        block: int,
        ctx: JobContext,
        now: Now,
        deadline: int,
    ) -> State | None:
        """The start state of court game `gid` over segment `s` of my attestation, which was
        challenged in `block` (the unit as it was then: a later attempt overwrites it); the
        solver's checkpoint is read within the budget of my turn's `deadline`."""
        u = await self.manager.functions.getUnit(unit_id).call(block_identifier=block)
        root = bytes((await self.court_game.functions.claimOf(gid).call()).initialStateRoot)
        rec = self.agent.store.get_record("verdict", f"{unit_id}:{u.attempt}")
        kept = rec.data.get("starts", {}).get(str(s)) if rec is not None else None
        reading = False

        async def solver() -> State | None:
            nonlocal reading
            locator = await self.locator(unit_id, block)
            got = self.checkpoints_read(
                f"court:{gid}:", ctx.runtime, locator, bytes(u.checkpointRoot), [s], now, deadline
            )
            reading = got is None
            return None if got is None else got.state(s)

        start = await self.court_start(ctx, s, root, kept, solver)
        if start is None and not reading and self._undefended.first(gid):
            self.log.error(
                "court game %d: no state of segment %d has the game's start root 0x%s…: "
                "cannot defend (will retry)",
                gid,
                s,
                root.hex()[:16],
            )
        return start

    async def facts(self, u: UnitView, now: Now) -> VerifierFacts:
        if u.status == UnitStatus.COMMITTED:
            return await self.drawing_facts(u, now)
        status = await self.verifier_status(u, self.me)
        rec = self.agent.store.get_record("verdict", f"{u.unit_id}:{u.attempt}")
        verdict = Verdict(rec.state) if rec is not None and self.verdict_holds(u, rec) else None
        game_id, mine = 0, False
        if u.status == UnitStatus.DISPUTED:
            d = await self.dispute(u)
            game_id, mine = int(d.gameId), d.challenger.lower() == self.me.lower()
        opened = last = False
        if status in (VerifierStatus.SEALED, VerifierStatus.PENDING) and verdict is not None:
            statuses = [d.status for d in await self.drawn(u)]
            opened = seals_open(statuses, now, u.deadline)
            # Pending myself: am I the only one left to answer?
            last = status == VerifierStatus.PENDING and statuses.count(VerifierStatus.PENDING) == 1
        # my challenge leaves my status as it is: the intent record says whether I sent one, the
        # dropped record whether it cannot succeed (my root is the chain's)
        intent = f"challenge:{u.unit_id}:{u.attempt}"
        challenged = self.agent.store.get_intent(intent) is not None or self.dropped(intent)
        replayed = rec is not None and rec.data.get("replayed", True)
        key = f"{u.unit_id}:{u.attempt}"
        contested = (
            self.agent.store.get_intent(f"challenge-revealed:{key}") is not None
            or key in self._no_contest
        )
        req = u.data_request
        return VerifierFacts(
            self.me,
            status,
            verdict,
            game_id,
            mine,
            opened,
            await self.reveal_window(),
            challenged,
            last,
            replayed,
            contested,
            result_requested=req is not None and req.checkpoint == await self.final_checkpoint(u),
            holds_result=rec is not None and "final" in rec.data,
            offered=self.agent.store.get_intent(f"offer-data:{key}") is not None,
        )

    @staticmethod
    def verdict_holds(u: UnitView, rec: Record) -> bool:
        """My verdict record is of this draw: replayed before the draw (PROTOCOL §6.5), it names
        the verification seed its segments came from, which a re-armed seed would change."""
        seed = rec.data.get("verify_seed")
        return seed is None or not u.verify_seed or int(seed) == u.verify_seed

    async def drawing_facts(self, u: UnitView, now: Now) -> VerifierFacts:
        """My facts on a Committed unit: PENDING when the draw simulated now picks me (my first
        answer draws, PROTOCOL §6.5), the last to answer when it picks me alone."""
        drawn, _ = await self.simulated_draw(u)
        mine = any(a.lower() == self.me.lower() for a in drawn)
        rec = self.agent.store.get_record("verdict", f"{u.unit_id}:{u.attempt}")
        verdict = Verdict(rec.state) if rec is not None and mine else None
        return VerifierFacts(
            self.me,
            VerifierStatus.PENDING if mine else VerifierStatus.NONE,
            verdict,
            0,
            False,
            reveal_window=await self.reveal_window(),
            last_to_answer=mine and len(drawn) == 1,
            keeper=await self.keeper_facts(u),
        )

    async def still_drawn(self, u: UnitView) -> bool:
        """Just before an answer that draws: the draw simulated now still picks me (my free
        stake, heartbeat or the pool may have changed since). If not, said once at INFO: the
        facts of the next round no longer plan an answer."""
        if u.status != UnitStatus.COMMITTED:
            return True
        drawn, _ = await self.simulated_draw(u, fresh=True)
        if any(a.lower() == self.me.lower() for a in drawn):
            return True
        self.log.info("unit %d: the draw no longer picks me: not answering", u.unit_id)
        return False

    async def segments_per_verifier(self) -> int:
        """JobManager.Config.segmentsPerVerifier (immutable, read once)."""
        if "_segments_per_verifier" not in self.__dict__:
            config = await self.manager.functions.config().call()
            self._segments_per_verifier = int(config.segmentsPerVerifier)
        return self._segments_per_verifier

    async def handle(self, act: Act, u: UnitView, now: Now) -> None:
        match act:
            case Replay():
                await self.replay(u, now)
            case Offer():
                await self.offer(u)
            case AnswerData():
                await self.answer_result(u)
            case Seal():
                await self.seal(act, u)
            case Attest():
                await self.attest(act, u)
            case Challenge():
                await self.challenge(act, u)
            case Play(game_id=game_id):
                ctx = await self.game_context(u.job_id)
                if ctx is not None:
                    await self.play(game_id, ctx, now)
            case ChainAction():  # keeper steps, the settlement of my held win
                await self.executor.execute(act)

    async def challenge(self, act: Challenge, u: UnitView) -> None:
        """Challenge the unit with my full replay's root; when that root is the unit's, say why
        I do not."""
        ctx = await self.game_context(u.job_id)
        if ctx is None or await self.open_challenge(act, u, ctx):
            return
        if act.revealed:
            # judged WRONG, yet my full replay gives the revealed C: my sampled replay was
            # wrong, so there is nothing to contest (once: no retry)
            self._no_contest.add(f"{u.unit_id}:{u.attempt}")
            self.log.error(
                "unit %d: judged WRONG, but my full replay gives the revealed root: not contesting",
                u.unit_id,
            )
        else:
            self.roots_are_right(u, act.intent)

    # --- holding the result (PROTOCOL §6.11) ----------------------------------------------------

    async def final_checkpoint(self, u: UnitView) -> int:
        """The index of the unit's final checkpoint, T / k."""
        job = await self.job_of(u)
        return int(job.steps) // int(job.checkpointInterval)

    def _held(self, u: UnitView) -> dict:
        rec = self.agent.store.get_record("verdict", f"{u.unit_id}:{u.attempt}")
        assert rec is not None and "final" in rec.data
        return rec.data

    async def offer(self, u: UnitView) -> None:
        """Say where I serve the unit's result, now that it is requested."""
        locator = make_locator(self.public_blob_url, self._held(u)["final"])
        act = OfferData(f"offer-data:{u.unit_id}:{u.attempt}", u.unit_id, locator)
        if await self.executor.execute(act) is not None:
            self.log.info("unit %d: its result was requested; I serve it at %s", u.unit_id, locator)

    async def answer_result(self, u: UnitView) -> None:
        """Answer the request for the unit's result myself: the assignee has not, and an
        unanswered request costs every attestor its lock."""
        held = self._held(u)
        ctx = await self.replay_context(u.job_id)
        if ctx is None:
            return
        rt = ctx.runtime
        roots = [bytes.fromhex(r[2:]) for r in held["roots"]]
        if checkpoint_root(roots) != u.checkpoint_root:
            # I replayed from the published list; after a forced reveal the root is C
            self.log.warning("unit %d: my checkpoint roots are not the unit's: not answering",
                             u.unit_id)  # fmt: skip
            return
        st = kept_state(self.agent.blobs, rt, held["final"], u.final_root)
        if st is None:
            self.log.error("unit %d: my copy of its result is gone: cannot answer", u.unit_id)
            return
        locator = make_locator(self.public_blob_url, held["final"])
        opening = StateOpening(rt.committed(st))
        await answer_request(self.executor, u, opening, roots, locator, self.block_hash, self.log)

    def verdict_roots(self, u: UnitView) -> tuple[list[int], list[bytes]]:
        """The sampled segments and the end roots my replay gave (its stored verdict)."""
        rec = self.agent.store.get_record("verdict", f"{u.unit_id}:{u.attempt}")
        assert rec is not None
        return rec.data["segments"], [bytes.fromhex(r[2:]) for r in rec.data["end_roots"]]

    async def seal(self, act: Seal, u: UnitView) -> None:
        if not await self.still_drawn(u):
            return
        segments, ends = self.verdict_roots(u)
        _, _, seal = sealed_attestation(self.agent.store, u.unit_id, u.attempt, self.me, ends)
        if await self.executor.execute(SealAttestation(act.intent, u.unit_id, seal)) is not None:
            self.log.info("sealed my end roots of unit %d segments %s", u.unit_id, segments)

    async def attest(self, act: Attest, u: UnitView) -> None:
        """Open my seal with the end roots and salt stored when it was made; as the last drawn
        verifier to answer (no seal), attest my end roots in the clear."""
        key = f"{u.unit_id}:{u.attempt}"
        if act.clear:
            if not await self.still_drawn(u):
                return
            _, roots = self.verdict_roots(u)
            clear = AttestRoots(act.intent, u.unit_id, tuple(roots), bytes(32))  # no salt: unused
            if await self.executor.execute(clear) is not None:
                self.log.info("attested unit %d in the clear (the last drawn to answer)", u.unit_id)
            return
        rec = self.agent.store.get_record("seal", key)
        salt = self.agent.store.get_secret(f"seal-salt:{key}")
        if rec is None or salt is None:
            self.log.error("unit %d: sealed on chain but no stored seal: cannot open it", u.unit_id)
            return
        roots = [bytes.fromhex(r[2:]) for r in rec.data["end_roots"]]
        if await self.executor.execute(AttestRoots(act.intent, u.unit_id, tuple(roots), salt)):
            self.log.info("attested unit %d: opened my seal of %d end roots", u.unit_id, len(roots))

    async def replay(self, u: UnitView, now: Now | None = None) -> None:
        """Decide my verdict of the unit's attempt: replay the segments from the solver's
        checkpoints, read off the round loop (this returns at once, deciding nothing, while the
        read runs inside its budget), or from my own replay from step 0 as soon as the data is
        unusable or late."""
        now = now or await self.now()
        ctx = await self.replay_context(u.job_id)
        if ctx is None:
            return
        key = f"{u.unit_id}:{u.attempt}"
        if u.status == UnitStatus.COMMITTED:
            # drawn by simulation: my segments follow from the seed the draw will use
            drawn, seed = await self.simulated_draw(u)
            if not any(a.lower() == self.me.lower() for a in drawn):
                return
            m = await self.segments_per_verifier()
            segments = chain_sample(seed, self.me, m, ctx.segments)
        else:
            seed = u.verify_seed
            sampled = await self.manager.functions.sampledSegments(u.unit_id, self.me).call()
            segments = [int(s) for s in sampled]

        def record(verdict: VerdictRecord) -> None:
            state, data = verdict
            self.agent.store.put_record("verdict", key, state, data | {"verify_seed": seed})

        await self.strategy.judge_unread(
            segments, u.final_root, record, lambda: self._read(u, ctx, segments, now, record)
        )

    async def _read(
        self, u: UnitView, ctx: JobContext, segments: list[int], now: Now,
        record: Callable[[VerdictRecord], None],
    ) -> None:  # fmt: skip
        """Read the solver's checkpoints off the round loop, then judge the unit from them."""
        key = f"{u.unit_id}:{u.attempt}"
        check = list(range(ctx.segments)) if self.config.replay_all else segments
        try:
            # read off the round loop: None while the read runs inside its budget. The final
            # checkpoint is read too: attesting is holding the result (PROTOCOL §6.11).
            reader = self.checkpoints_read(
                f"checkpoints:{key}:", ctx.runtime, u.locator, u.checkpoint_root,
                [*check, ctx.segments], now, u.deadline,
            )  # fmt: skip
        except BadBlob as exc:
            self.log.error(
                "unit %d: checkpoints unusable: %s; replaying the job from step 0", u.unit_id, exc
            )
            self._no_data(u, key, segments, ctx)
            return
        if reader is None:
            return
        await self.strategy.judge_read(
            segments,
            reader.root,
            record,
            lambda: self._replay_read(u, ctx, segments, check, reader),
        )

    async def _replay_read(
        self,
        u: UnitView,
        ctx: JobContext,
        segments: list[int],
        check: list[int],
        reader: Checkpoints,
    ) -> None:
        """Replay the `check` segments from the solver's checkpoints `reader` holds and record
        my verdict on the sampled `segments`."""
        key = f"{u.unit_id}:{u.attempt}"
        starts: dict[str, str] = {}

        def keep(s: int, st: State) -> None:
            if s in segments:  # only an attested segment can be disputed in the court
                address = keep_state(self.agent.blobs, ctx.runtime, st, self.log)
                if address is not None:
                    starts[str(s)] = address

        # the states read are mine to replay now: the read's answer need not hold them longer
        self.reads.forget(f"checkpoints:{key}:")
        mine = replay_segments(ctx, reader, check, self.progress, keep)
        wrong = [s for s in sorted(mine) if mine[s] != reader.root(s + 1)]
        ends = ["0x" + mine[s].hex() for s in segments]
        verdict = Verdict.DISAGREE if wrong else Verdict.AGREE
        data = {"segments": segments, "end_roots": ends, "wrong": wrong, "starts": starts}
        data |= self._held_result(ctx, reader.state(ctx.segments), reader.manifest.roots)
        self.agent.store.put_record("verdict", key, verdict, data)
        if wrong:
            self.log.warning(
                "unit %d: segments %s do not replay to the solver's roots", u.unit_id, wrong
            )
        else:
            self.log.info("unit %d: replayed segments %s: all agree", u.unit_id, sorted(mine))
        # (a unit replayed before its draw has no window yet: its deadline is the commit's)
        late = late_by(await self.now(), u.deadline) if u.status != UnitStatus.COMMITTED else 0
        if late > 0:
            # an operator's machine too slow for the job's window: say so, it costs the lock
            self.log.error(
                "unit %d: replay finished %ds after the verify window closed: no attestation "
                "or challenge can be sent",
                u.unit_id,
                late,
            )

    def _no_data(self, u: UnitView, key: str, segments: list[int], ctx: JobContext) -> None:
        """Withheld, corrupt or late checkpoints: challenge if the roots are wrong, else attest
        from our own replay (the solver's data is not needed to know the right end roots).

        This replays the whole job, at once: waiting for data that may never come (a server
        that accepts connections and never answers) is what let a cheat's window close on a
        silent verifier, and the read's budget (a quarter of the time left) already gave late
        data its chance."""
        comp = self.challenger_comp(ctx)
        # Our own replay from step 0 gives every checkpoint root: we seal what we computed
        # (right or wrong commitment) instead of being penalised as a non-responder for the
        # solver's withholding.
        roots = comp.checkpoint_roots()
        ends = ["0x" + roots[s + 1].hex() for s in segments]
        if comp.checkpoint_commit() != u.checkpoint_root:
            self.agent.store.put_record(
                "verdict",
                key,
                Verdict.DISAGREE,
                {"segments": segments, "end_roots": ends, "wrong": []},
            )
            return
        self.log.warning(
            "unit %d: checkpoints withheld; own replay matches the commitment, attesting from it",
            u.unit_id,
        )
        # my states are the solver's here (same commitment): keep the attested segments' starts
        k = ctx.spec.checkpoint_every
        kept = {
            str(s): keep_state(self.agent.blobs, ctx.runtime, comp.state(s * k), self.log)
            for s in segments
        }
        starts = {s: a for s, a in kept.items() if a is not None}
        data = {"segments": segments, "end_roots": ends, "wrong": [], "starts": starts}
        hexes = ["0x" + r.hex() for r in roots]
        data |= self._held_result(ctx, comp.state(ctx.spec.steps), hexes)
        self.agent.store.put_record("verdict", key, Verdict.AGREE, data)

    def _held_result(self, ctx: JobContext, final: State, roots: list[str]) -> dict:
        """The final state I hold for the unit, kept in my own blob store, and the checkpoint
        roots it closes (`final`, `roots` of my verdict record): what I serve, and prove I hold,
        when the result is requested (PROTOCOL §6.11). Empty when my store refuses it."""
        address = keep_state(self.agent.blobs, ctx.runtime, final, self.log)
        return {} if address is None else {"final": address, "roots": roots}
