"""The whistleblower: re-check verifiers' attestations (every `Attested` event) by replaying
the attested segments; dispute a false one through the AttestationCourt (a segment game with
the verifier as defender; the verifier's stake is slashed if it loses); when a false
attestation covers a wrong commitment, also challenge the unit itself like a verifier; play
every game as the challenger; withdraw what it wins (JobManager and court credits). With
--leaked-secrets DIR, also report a solver's forced-error secret leaked before its time (files
`<unitId>.hex` in DIR stand for an off-chain leak channel): the solver's collateral is slashed,
half of it to the whistleblower, and the unit re-opens (PROTOCOL §8.1).

Attested events are read through the core's reorg-safe event stream (`--confirmations` deep,
block-hash checkpoints, persisted cursor). Data that fails its checks is re-fetched with backoff
while the unit is live or the court can still take the attestation; from the
FULL_REPLAY_AFTER_TRIES-th failed try on, the attestation is checked against my own replay from
step 0 instead, when that replay is the published commitment (a solver that withholds its data
does not shield its verifiers). The start states of a false attestation's segments and the
checkpoint roots are kept in my own blob store, so a court case goes on after the solver's data
is gone.

Persistent memory: kind "attestation", id "<unit>:<verifier>:<block>" with the verdict (and
the kept data's addresses), and kind "leak", id "<unit>:<attempt>" for a reported premature
reveal; the event stream's cursor and checkpoints.
"""

from __future__ import annotations

import json
from typing import Any

from eth_abi import encode
from eth_utils import keccak
from web3.logs import DISCARD

from agents.core.blobs import BlobError
from agents.core.bounded import SaidOnce
from agents.core.enums import Role
from agents.core.events import AbiDecoder, Event, EventStream
from agents.core.store import Record
from agents.dispute.player import Challenger, Phase
from agents.dispute.trace import drop_computation
from agents.roles.actions import (
    Arena,
    Challenge,
    ChallengeAttestation,
    CourtChallenge,
    PlayCourt,
    Recheck,
    Report,
    WithdrawCourt,
)
from agents.roles.artifacts import BadBlob, Checkpoints
from agents.roles.challenge import ChallengerMixin, replay_segments
from agents.roles.config import WhistleblowerConfig
from agents.roles.games import take_turn
from agents.roles.jobs import JobContext
from agents.roles.logic import (
    Act,
    AttestationFacts,
    AttestationVerdict,
    LeakFacts,
    Now,
    Side,
    UnitStatus,
    UnitView,
    attestation_done,
    held_result_due,
    leak_acts,
    parse_leak,
    recheck_due,
    settle_act,
    whistleblower_acts,
)
from agents.roles.runner import RoleAgent
from agents.roles.runtime import Claim
from agents.training import merkle
from agents.training.state import State

TOKEN = 10**18
#: failed fetches of an attestation's data after which it is checked from my own replay from
#: step 0 (a whole job's training, once per job: late data gets a few backoff rounds first)
FULL_REPLAY_AFTER_TRIES = 3
#: The state of an attestation record nothing more can come of (logic.attestation_done): kept,
#: with its verdict in its data, but not read each round.
CLOSED = "closed"


class Whistleblower(ChallengerMixin, RoleAgent):
    role = "whistleblower"
    config: WhistleblowerConfig

    def __init__(self, *a, **kw) -> None:
        super().__init__(*a, **kw)
        self.court_comps: dict[int, Claim] = {}
        self.bad_leaks = SaidOnce()  # (file, contents) warned about once
        self._attested_stream: EventStream | None = None
        self._no_start = SaidOnce()  # court games whose missing start state I logged

    async def setup(self) -> None:
        await self.ensure_registered(Role.WHISTLEBLOWER, int(self.config.stake * TOKEN), (0, 0, 0))

    def attested_events(self) -> EventStream:
        """The manager's Attested events, read `--confirmations` blocks deep through the core's
        reorg-safe stream: an attestation re-mined in a reorg below the last block read is
        still seen, one reorged away is retracted, and a restart resumes where it stopped."""
        if self._attested_stream is None:
            decoder = AbiDecoder(self.manager.abi)
            stream = self.agent.stream(
                f"attested:{self.manager.address.lower()}",
                decoder,
                [self.manager.address],
                decoder.topic0(["Attested"]),
            )
            stream.subscribe(
                "whistleblower", self._on_attested, self._on_attested_retracted, ["Attested"]
            )
            self._attested_stream = stream
        return self._attested_stream

    @staticmethod
    def _attestation_key(ev: Event) -> str:
        return f"{ev.args['unitId']}:{ev.args['verifier']}:{ev.block_number}"

    def _on_attested(self, ev: Event) -> None:
        a, key = ev.args, self._attestation_key(ev)
        rec = self.agent.store.get_record("attestation", key)
        if rec is not None:  # delivered again (a reorg back, or a rescan after an upgrade)
            if rec.data.get("retracted"):
                data = {k: v for k, v in rec.data.items() if k != "retracted"}
                self.agent.store.put_record("attestation", key, rec.state, data)
            return
        data = {
            "unit": int(a["unitId"]),
            "verifier": a["verifier"],
            "block": ev.block_number,
            "segments": [int(s) for s in a["segments"]],
            "end_roots": ["0x" + bytes(r).hex() for r in a["endRoots"]],
        }
        self.agent.store.put_record("attestation", key, "new", data)

    def _on_attested_retracted(self, ev: Event) -> None:
        """A reorg took the attestation away: stop acting on it (a court case I already opened
        goes on: its game is the court's record, not this event's)."""
        key = self._attestation_key(ev)
        rec = self.agent.store.get_record("attestation", key)
        if rec is not None and not rec.data.get("court_game"):
            self.agent.store.put_record("attestation", key, rec.state, rec.data | {"retracted": 1})

    async def scan(self) -> None:
        """Record every new Attested event that is `--confirmations` deep."""
        await self.attested_events().catch_up()

    def attestations(self) -> list:
        """The attestation records to act on (not reorged away, not closed)."""
        records = self.agent.store.list_records("attestation", not_state=CLOSED)
        return [r for r in records if not r.data.get("retracted")]

    async def round(self) -> bool:
        now = await self.now()
        await self.heartbeat_if_due(now)
        await self.scan()
        for rec in self.attestations():
            with self.isolated(f"attestation {rec.record_id}"):
                await self.follow(rec, now)
        for u in await self.units():
            if u.status == UnitStatus.DISPUTED:
                with self.isolated(f"unit {u.unit_id}"):
                    d = await self.dispute(u)
                    mine = d.challenger.lower() == self.me.lower()
                    if mine and held_result_due(u, now, 2 * await self.reveal_window()):
                        # my win was held for a forced round's reveal that did not come: I am
                        # owed my bond and the reward
                        await self.executor.execute(settle_act(u))
                    ctx = await self.context(u.job_id)
                    if mine and not u.result_held and ctx is not None:
                        await self.play(int(d.gameId), ctx, now)
        if self.config.leaked_secrets:
            with self.isolated("leaked secrets"):
                await self.report_leaks(now)
        await self.withdraw_if_credited(now)
        if self.court is not None:
            credits = await self.court.functions.credits(self.me).call()
            if credits > 0:
                act = WithdrawCourt(f"court-withdraw:{credits}:{now.block}")
                if await self.executor.execute(act) is not None:
                    self.log.info("withdrew %g tokens from the attestation court", credits / 1e18)
        return False

    async def follow(self, rec: Record, now: Now) -> None:
        """One round of my record of an attestation: close it when nothing more can come of it
        (logic.attestation_done: its unit settled for good), else take its next actions."""
        u = await self.unit(int(rec.data["unit"]))
        facts = AttestationFacts(
            None if rec.state == "new" else AttestationVerdict(rec.state),
            bool(rec.data.get("commitment_wrong")),
            bool(rec.data.get("reported")),
            self.court is not None,
            int(rec.data.get("court_game", 0)),
            bool(rec.data.get("court_done")),
            int(rec.data.get("tries", 0)),
            int(rec.data.get("last_try", 0)),
            await self.court_open_for_recheck(u, rec.state, rec.data, now),
            rec.data.get("attempt"),
            self.dropped(f"challenge:{u.unit_id}:{u.attempt}"),
        )
        window = await self.court_window() if self.court is not None else None
        if u.job_id in self.settled and attestation_done(u, now, facts, window):
            # kept with its verdict, and no longer read each round (nor its unit)
            data = rec.data | {"verdict": rec.state}
            self.agent.store.put_record("attestation", rec.record_id, CLOSED, data)
            return
        for act in whistleblower_acts(u, now, rec.record_id, facts):
            await self.handle(act, u, rec.record_id)

    async def court_open_for_recheck(self, u: UnitView, state: str, data: dict, now: Now) -> bool:
        """court_open, asked only where it can matter: an "unavailable" attestation of a unit
        that is no longer live, whose next re-check is due (it reads the unit as attested,
        an archive read, so not every round)."""
        if state != AttestationVerdict.UNAVAILABLE or u.status in (
            UnitStatus.VERIFYING,
            UnitStatus.DISPUTED,
        ):
            return False
        if not recheck_due(int(data.get("tries", 0)), int(data.get("last_try", 0)), now):
            return False
        return await self.court_open(u, data, now)

    async def court_open(self, u: UnitView, data: dict, now: Now) -> bool:
        """The court still takes this attestation: a court is deployed, the unit is final in the
        attempt attested (a re-opened unit's attestations leave the court's reach) and its
        window after the challenge deadline runs (a stood case's later window is not counted:
        the re-check only needs the first)."""
        if self.court is None or u.status != UnitStatus.FINALIZED:
            return False
        if int((await self.unit_at(u.unit_id, int(data["block"]))).attempt) != u.attempt:
            return False
        return now.timestamp <= u.deadline + await self.court_window()

    async def unit_at(self, unit_id: int, block: int) -> Any:
        """IJobManager.getUnit as it was at `block` (decoded by name, agents/core/bindings)."""
        return await self.manager.functions.getUnit(unit_id).call(block_identifier=block)

    async def court_window(self) -> int:
        """The court's window (seconds after a unit's challenge deadline), read once."""
        if "_court_window" not in self.__dict__:
            self._court_window = int(await self.court.functions.window().call())
        return self._court_window

    async def handle(self, act: Act, u: UnitView, key: str) -> None:
        rec = self.agent.store.get_record("attestation", key)
        assert rec is not None
        data = dict(rec.data)
        match act:
            case Recheck():
                await self.recheck(key, data)
            case Report():
                self.report(key, rec.state, data)
            case Challenge():
                ctx = await self.context(u.job_id)
                if ctx is not None and not await self.open_challenge(act, u, ctx):
                    self.roots_are_right(u, act.intent)
            case CourtChallenge():
                await self.court_challenge(act, key, data)
            case PlayCourt():
                await self.play_court(key, data)

    def report(self, key: str, state: str, data: dict) -> None:
        """Say that the attestation `key` is false (once: the record remembers it)."""
        self.log.warning(
            "FALSE ATTESTATION by verifier %s on unit %d (block %d): segments %s, "
            "attested %s, replay gives %s",
            data["verifier"],
            data["unit"],
            data["block"],
            data["segments"],
            [r[:12] for r in data["end_roots"]],
            [r[:12] for r in data["mine"]],
        )
        data["reported"] = True
        self.agent.store.put_record("attestation", key, state, data)

    # --- premature reveals (--leaked-secrets) ---------------------------------------------

    def leaks(self) -> dict[int, bytes]:
        """The leak folder's candidate secrets by unit; a bad file is warned about once."""
        out: dict[int, bytes] = {}
        try:
            files = sorted(self.config.leaked_secrets.iterdir())
        except OSError as exc:
            self.log.error("--leaked-secrets: %s (will retry)", exc)
            return out
        for path in files:
            try:
                text = path.read_text(errors="replace")
            except OSError as exc:
                text = f"unreadable: {exc}"
            try:
                unit_id, secret = parse_leak(path.name, text)
            except ValueError as exc:
                if self.bad_leaks.first((path.name, text)):
                    self.log.warning("leaked secret file %s ignored: %s", path.name, exc)
                continue
            out[unit_id] = secret
        return out

    async def report_leaks(self, now: Now) -> None:
        """Report each leaked secret that is the current assignee's, while that is premature."""
        for unit_id, secret in self.leaks().items():
            u = await self.unit(unit_id)
            if not UnitStatus.ASSIGNED <= u.status <= UnitStatus.DISPUTED:
                continue  # no assignee whose claim the secret could match
            key = f"{unit_id}:{u.attempt}"
            fn = self.manager.functions.secretHashOf(unit_id, u.assignee_index)
            expected = bytes(await fn.call())
            statuses = [d.status for d in await self.drawn(u)]
            # ForcedErrors.secretHash: keccak256(abi.encode(r))
            matches = keccak(encode(["bytes32"], [secret])) == expected
            reported = self.agent.store.get_record("leak", key) is not None
            for act in leak_acts(u, now, statuses, LeakFacts(secret, matches, reported)):
                if await self.executor.execute(act) is None:
                    continue
                self.agent.store.put_record("leak", key, "reported", {"solver": u.assignee})
                self.log.warning(
                    "PREMATURE REVEAL reported: unit %d attempt %d, the leaked secret is solver "
                    "%s's; its collateral is slashed (half to me) and the unit re-opens",
                    unit_id,
                    u.attempt,
                    u.assignee,
                )

    # --- attestation disputes (AttestationCourt) -------------------------------------------

    async def read_then(
        self, key: str, data: dict, indices: list[int], now: Now | None = None
    ) -> Checkpoints | None:
        """The solver's checkpoints (`indices`' states) of the attestation's unit as it was when
        attested, read off the round loop under `key` (`RoleAgent.checkpoints_read`: None while
        the read runs, BadBlob when it failed or is late); its budget is a share of the time
        left to dispute the attestation (the unit's window, and the court's after it)."""
        unit_id, block = int(data["unit"]), int(data["block"])
        ctx = await self.context(unit_id >> 32)
        if ctx is None:
            raise BadBlob(f"job {unit_id >> 32} is not one I take part in")
        u = await self.unit_at(unit_id, block)
        deadline = int(u.deadline) + (await self.court_window() if self.court is not None else 0)
        locator = await self.locator(unit_id, block)
        return self.checkpoints_read(
            f"{key}:", ctx.runtime, locator, bytes(u.checkpointRoot), indices,
            now or await self.now(), deadline,
        )  # fmt: skip

    async def checkpoint_roots(self, data: dict) -> list[bytes] | None:
        """The solver's checkpoint roots the attestation was made against: my copy, kept when
        the re-check found it false, else the solver's manifest (BadBlob when that is gone too);
        None when I take no part in the job."""
        kept = data.get("roots")
        if kept:
            unit_id, block = int(data["unit"]), int(data["block"])
            u = await self.unit_at(unit_id, block)
            try:
                roots = [bytes.fromhex(r[2:]) for r in json.loads(self.agent.blobs.get(kept))]
            except (BlobError, ValueError, TypeError) as exc:
                self.log.warning("unit %d: my copy of its checkpoint roots: %s", unit_id, exc)
            else:
                if merkle.checkpoint_root(roots) == bytes(u.checkpointRoot):
                    return roots
        if await self.context(int(data["unit"]) >> 32) is None:
            return None
        reader = await self.read_then(f"roots:{data['unit']}:{data['block']}", data, [])
        if reader is None:
            return None  # still being read: asked again next round
        return [bytes.fromhex(r[2:]) for r in reader.manifest.roots]

    def keep_case(self, roots: list[str], starts: dict[int, bytes]) -> dict:
        """What a court case over a false attestation needs, copied into my own blob store: the
        checkpoint roots ("0x…") and the attested segments' start states (their state blobs);
        a copy my store refuses is logged and left out (the case then falls back to the
        solver's data, or to my replay from step 0)."""
        out: dict = {"starts": {}}
        try:
            out["roots"] = self.agent.blobs.put(json.dumps(roots).encode())
            for s, blob in starts.items():
                out["starts"][str(s)] = self.agent.blobs.put(blob)
        except (BlobError, OSError) as exc:
            self.log.warning("could not keep the case's data in my blob store: %s", exc)
        return out

    async def court_challenge(self, act: CourtChallenge, key: str, data: dict) -> None:
        """Dispute the first false entry of the attestation through the court."""
        assert self.court is not None
        roots = await self.checkpoint_roots(data)
        if roots is None:
            return
        j = next(
            i
            for i, (a, b) in enumerate(zip(data["end_roots"], data["mine"], strict=True))
            if a != b
        )
        s = int(data["segments"][j])
        proof = merkle.list_proof(merkle.CHECKPOINT_DOMAIN, roots, s).siblings
        ends = [bytes.fromhex(r[2:]) for r in data["end_roots"]]
        # The bond scales with the penalty the challenge locks (at least the flat `bond`); the
        # penalty reads the verifier's free stake, so quote it now, just before the challenge.
        bond = int(await self.court.functions.bondOf(int(data["unit"]), data["verifier"]).call())
        await self.approve_at_least(act.intent, self.court.address, bond)
        challenge = ChallengeAttestation(
            act.intent, int(data["unit"]), data["verifier"], j, tuple(ends), roots[s], tuple(proof)
        )
        out = await self.executor.execute(challenge)
        if out is None:
            return
        receipt = await self.w3.eth.get_transaction_receipt(out.tx_hash)
        ev = self.court.events.AttestationChallenged().process_receipt(receipt, errors=DISCARD)[0][
            "args"
        ]
        data.update(court_game=int(ev["gameId"]), court_segment=s)
        rec = self.agent.store.get_record("attestation", key)
        assert rec is not None
        self.agent.store.put_record("attestation", key, rec.state, data)
        self.log.info(
            "disputed the attestation of %s (segment %d) in court game %d, penalty %d locked, "
            "bond %d paid",
            data["verifier"],
            s,
            data["court_game"],
            int(ev["penalty"]),
            int(ev["bond"]),
        )

    async def play_court(self, key: str, data: dict) -> None:
        assert self.court_game is not None
        gid = int(data["court_game"])
        view = await self.court_game_reader.view(gid)
        if view.phase == Phase.RESOLVED:
            drop_computation(self.court_comps, gid)  # done with its states
            data["court_done"] = True
            rec = self.agent.store.get_record("attestation", key)
            assert rec is not None
            self.agent.store.put_record("attestation", key, rec.state, data)
            self.log.info(
                "court game %d resolved: %s",
                gid,
                "the attestation was false"
                if view.winner == Side.CHALLENGER
                else "the attestation stood",
            )
            return
        unit_id = int(data["unit"])
        ctx = await self.context(unit_id >> 32)
        if ctx is None:
            return
        s = int(data["court_segment"])
        if gid not in self.court_comps:
            root = bytes((await self.court_game.functions.claimOf(gid).call()).initialStateRoot)

            async def solver() -> State | None:
                got = await self.read_then(f"court:{gid}", data, [s])
                return None if got is None else got.state(s)

            kept = data.get("starts", {}).get(str(s))
            start = await self.court_start(ctx, s, root, kept, solver)
            if start is None:
                if self._no_start.first(gid):
                    self.log.error(
                        "court game %d: no state of segment %d has the game's start root: "
                        "cannot play (will retry)",
                        gid,
                        s,
                    )
                return
            self.court_comps[gid] = self.court_comp(ctx, s, start)
            self.reads.forget(f"court:{gid}:")  # the start state lives in the computation now
        player = Challenger(self.court_comps[gid], ctx.jg)
        taken = await take_turn(
            self.executor, self.court_game_reader, gid, Side.CHALLENGER, player, await self.now(),
            arena=Arena.COURT, view=view,
        )  # fmt: skip
        if taken is None:
            await self.mine_if_idle()  # let the silent side's clock run out on an automining chain

    async def recheck(self, key: str, data: dict, now: Now | None = None) -> None:
        """Replay the attested segments from the solver's checkpoints, read off the round loop
        (this returns at once, deciding nothing, while the read runs inside its budget); data
        that failed or is late counts a try (logic.recheck_due's backoff) and, after
        FULL_REPLAY_AFTER_TRIES, is checked from my own replay from step 0."""
        unit_id, block = int(data["unit"]), int(data["block"])
        ctx = await self.context(unit_id >> 32)
        if ctx is None:
            return
        # The unit as it was when the attestation was made (a later attempt overwrites it); my
        # verdict is about that attempt (logic.AttestationFacts.attested_attempt).
        u = await self.unit_at(unit_id, block)
        data["attempt"] = int(u.attempt)
        starts: dict[int, bytes] = {}  # each attested segment's start, as a state blob

        def keep(s: int, st: State) -> None:
            starts[s] = ctx.runtime.encode_state(st)

        try:
            reader = await self.read_then(f"recheck:{key}", data, data["segments"], now)
            if reader is None:
                return
            self.reads.forget(f"recheck:{key}:")  # its states are replayed now
            mine = replay_segments(ctx, reader, data["segments"], self.progress, keep)
        except BadBlob as exc:
            # retried with backoff while the unit is live (logic.recheck_due)
            data["tries"] = int(data.get("tries", 0)) + 1
            data["last_try"] = (await self.now()).timestamp
            if data["tries"] >= FULL_REPLAY_AFTER_TRIES and self.check_from_own_replay(
                key, data, ctx, bytes(u.checkpointRoot)
            ):
                return
            self.log.error(
                "attestation %s: checkpoints unusable (try %d, will retry): %s",
                key,
                data["tries"],
                exc,
            )
            self.agent.store.put_record("attestation", key, AttestationVerdict.UNAVAILABLE, data)
            return
        data["mine"] = ["0x" + mine[s].hex() for s in data["segments"]]
        false = data["mine"] != data["end_roots"]
        data["commitment_wrong"] = any(mine[s] != reader.root(s + 1) for s in data["segments"])
        if false:
            data.update(self.keep_case(reader.manifest.roots, starts))
        self.agent.store.put_record(
            "attestation", key, AttestationVerdict.FALSE if false else AttestationVerdict.TRUE, data
        )
        self.log.info(
            "attestation by %s on unit %d: %s",
            data["verifier"],
            unit_id,
            "FALSE" if false else "true",
        )

    def check_from_own_replay(
        self, key: str, data: dict, ctx: JobContext, published_root: bytes
    ) -> bool:
        """Check the attestation against my own replay of the job from step 0, when that replay's
        checkpoint list is the published root the verifier replayed from (then my states are
        the solver's and the court can prove my start roots against it). False (logged once)
        when it is not: a wrong commitment or a forced round's perturbed one, whose published
        entries only the solver's data has."""
        comp = self.challenger_comp(ctx)
        roots = comp.checkpoint_roots()
        if merkle.checkpoint_root(roots) != published_root:
            # the commitment is not my replay's: challenge the unit while its window is open
            # (logic.whistleblower_acts), and keep chasing the data for the attestation
            data["commitment_wrong"] = True
            if not data.get("own_replay_differs"):
                data["own_replay_differs"] = True
                self.log.warning(
                    "attestation %s: my replay from step 0 is not the published commitment; "
                    "challenging the unit while it may be, and only the solver's data can check "
                    "the attestation (will retry the fetch)",
                    key,
                )
            return False
        k = ctx.spec.checkpoint_every
        data["mine"] = ["0x" + roots[s + 1].hex() for s in data["segments"]]
        data["commitment_wrong"] = False
        data["from_own_replay"] = True
        false = data["mine"] != data["end_roots"]
        if false:
            starts = {s: ctx.runtime.encode_state(comp.state(s * k)) for s in set(data["segments"])}
            data.update(self.keep_case(["0x" + r.hex() for r in roots], starts))
        self.agent.store.put_record(
            "attestation", key, AttestationVerdict.FALSE if false else AttestationVerdict.TRUE, data
        )
        self.log.info(
            "attestation by %s on unit %d: %s (from my own replay: the solver's data is "
            "unavailable)",
            data["verifier"],
            int(data["unit"]),
            "FALSE" if false else "true",
        )
        return True
