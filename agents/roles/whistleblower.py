"""The whistleblower: re-check verifiers' attestations (every `Attested` event), report the
false ones, and when a false attestation covers a wrong commitment, challenge the unit itself
and play the dispute game as the challenger; withdraw what it wins.

What the contracts allow today (see the role report in README "Joining as a role"): a
whistleblower may `challenge` a unit like a verifier, so a wrong commitment that a lazy verifier
attested is still caught and the solver slashed. JobManager has no entry yet that opens an
attestation game against the *verifier* (`DisputeGame.openSegmentGame` is manager-only and the
manager never calls it), so a false attestation is detected, logged and recorded here but the
verifier's stake cannot be slashed for it yet.

Persistent memory: kind "cursor" (the last block scanned) and kind "attestation", id
"<unit>:<verifier>:<block>" with the verdict.
"""

from __future__ import annotations

import argparse

from agents.core.blobs import open_blob_store
from agents.roles.artifacts import BadBlob, CheckpointReader
from agents.roles.jobs import JobContext, JobRejected, load_job
from agents.roles.logic import (
    Act,
    AttestationFacts,
    Now,
    UnitStatus,
    UnitView,
    whistleblower_acts,
)
from agents.roles.runner import RoleAgent
from agents.roles.verifier import ChallengerMixin, replay_segments

ROLE_WHISTLEBLOWER = 3
TOKEN = 10**18


class Whistleblower(ChallengerMixin, RoleAgent):
    role = "whistleblower"

    def __init__(self, *a, **kw) -> None:
        super().__init__(*a, **kw)
        self.jobs: dict[int, JobContext] = {}

    async def setup(self) -> None:
        await self.ensure_registered(ROLE_WHISTLEBLOWER, int(self.args.stake * TOKEN), (0, 0, 0))

    def context(self, job_id: int) -> JobContext | None:
        if job_id not in self.jobs:
            job = self.manager.functions.getJob(job_id).call()
            cfg = bytes(self.game.functions.configOf(job_id).call())
            stores = [self.agent.blobs] + [open_blob_store(s) for s in self.args.spec_store or []]
            try:
                self.jobs[job_id] = load_job(job_id, job, stores, cfg)
            except JobRejected as exc:
                self.log.warning("job %d: %s", job_id, exc)
                return None
        return self.jobs[job_id]

    def scan(self, now: Now) -> None:
        """Record every new Attested event (from the persisted cursor to the head)."""
        cur = self.agent.store.get_record("cursor", "attested")
        start = int(cur.data["next"]) if cur is not None else 0
        if start > now.block:
            return
        logs = self.manager.events.Attested().get_logs(from_block=start, to_block=now.block)
        for ev in logs:
            a = ev["args"]
            key = f"{a['unitId']}:{a['verifier']}:{ev['blockNumber']}"
            if self.agent.store.get_record("attestation", key) is None:
                self.agent.store.put_record(
                    "attestation",
                    key,
                    "new",
                    {
                        "unit": int(a["unitId"]),
                        "verifier": a["verifier"],
                        "block": int(ev["blockNumber"]),
                        "segments": [int(s) for s in a["segments"]],
                        "end_roots": ["0x" + bytes(r).hex() for r in a["endRoots"]],
                    },
                )
        self.agent.store.put_record("cursor", "attested", "ok", {"next": now.block + 1})

    async def round(self) -> bool:
        now = self.now()
        await self.heartbeat_if_due(now)
        self.scan(now)
        for rec in self.agent.store.list_records("attestation"):
            u = self.unit(int(rec.data["unit"]))
            facts = AttestationFacts(
                None if rec.state == "new" else rec.state,
                bool(rec.data.get("commitment_wrong")),
                bool(rec.data.get("reported")),
            )
            for act in whistleblower_acts(u, now, rec.record_id, facts):
                await self.execute(act, u, rec.record_id)
        for u in self.units():
            if u.status == UnitStatus.DISPUTED:
                d = self.manager.functions.getDispute(u.unit_id).call()
                ctx = self.context(u.job_id)
                if d[1].lower() == self.me.lower() and ctx is not None:
                    await self.play(int(d[0]), ctx, now)
        await self.withdraw_if_credited(now)
        return False

    async def execute(self, act: Act, u: UnitView, key: str) -> None:
        rec = self.agent.store.get_record("attestation", key)
        assert rec is not None
        data = dict(rec.data)
        if act.kind == "recheck":
            self.recheck(key, data)
        elif act.kind == "report":
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
            self.agent.store.put_record("attestation", key, rec.state, data)
        elif act.kind == "challenge":
            ctx = self.context(u.job_id)
            if ctx is not None:
                await self.open_challenge(act, u, ctx)

    def recheck(self, key: str, data: dict) -> None:
        unit_id, block = int(data["unit"]), int(data["block"])
        ctx = self.context(unit_id >> 32)
        if ctx is None:
            return
        # The unit as it was when the attestation was made (a later attempt overwrites it).
        u = self.manager.functions.getUnit(unit_id).call(block_identifier=block)
        try:
            reader = CheckpointReader(ctx.spec, u[11], bytes(u[9]))
            mine = replay_segments(ctx, reader, data["segments"], self.progress)
        except BadBlob as exc:
            self.log.error("attestation %s: checkpoints unusable: %s", key, exc)
            self.agent.store.put_record("attestation", key, "unavailable", data)
            return
        data["mine"] = ["0x" + mine[s].hex() for s in data["segments"]]
        false = data["mine"] != data["end_roots"]
        data["commitment_wrong"] = any(mine[s] != reader.root(s + 1) for s in data["segments"])
        self.agent.store.put_record("attestation", key, "false" if false else "true", data)
        self.log.info(
            "attestation by %s on unit %d: %s",
            data["verifier"],
            unit_id,
            "FALSE" if false else "true",
        )


def register(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    from agents.roles.runner import role_parser

    p = role_parser(
        sub,
        "whistleblower",
        "run a whistleblower: re-check attestations, "
        "challenge wrong commitments, play dispute games",
    )
    p.add_argument("--stake", type=float, default=20.0, help="tokens to stake on registration")
    p.add_argument(
        "--spec-store",
        action="append",
        metavar="URL",
        help="extra blob store(s) to fetch job specs from (repeatable)",
    )
    return p
