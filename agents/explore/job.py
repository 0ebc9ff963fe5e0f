"""A job as its page shows it: the facts `job status` reads (agents/roles/job_reads.py: the
units, their phases and windows, the disputes and their winners), who holds each unit and who
was drawn to verify it (the JobLens), every commitment (where its checkpoints are published),
and the job's history from its events: attestations, forced rounds, payouts and slashes.

A slash or a credit is not indexed by unit on chain; it is the job's when it happened in the
transaction of one of the job's own events (a lost dispute slashes in the game's last move, a
finalize credits the solver and verifiers).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agents.core.enums import UnitStatus, VerifierStatus
from agents.core.events import Event
from agents.explore.dispute import moved_words, tokens
from agents.explore.reads import ChainReads
from agents.roles.job_reads import JobReader
from agents.roles.job_view import JobFacts

#: Events of the job's transactions that say where money and stake went.
MONEY_EVENTS = ("NodeSlashed", "Credited", "JackpotIncreased", "StakeReleased")


@dataclass(frozen=True)
class Commitment:
    """One attempt's commitment (CheckpointsCommitted): where its checkpoints are."""

    unit_id: int
    attempt: int
    solver: str
    locator: str
    checkpoint_root: bytes
    checkpoints: int
    final_root: bytes
    block: int


@dataclass(frozen=True)
class HistoryRow:
    block: int
    time: int
    event: str
    words: str
    tx_hash: str


@dataclass(frozen=True)
class Drawn:
    verifier: str
    status: VerifierStatus


@dataclass
class JobPage:
    facts: JobFacts
    commitments: list[Commitment] = field(default_factory=list)
    history: list[HistoryRow] = field(default_factory=list)
    drawn: dict[int, list[Drawn]] = field(default_factory=dict)  # unit id -> drawn verifiers
    claimants: dict[int, list[str]] = field(default_factory=dict)
    slashes: list[tuple[str, int, str]] = field(default_factory=list)  # (node, amount, why)
    credits: dict[str, int] = field(default_factory=dict)  # account -> credited by this job
    attempts: int = 1

    @property
    def final(self) -> Commitment | None:
        """The commitment the job completed with (its unit's last), once completed."""
        if not self.facts.done or not self.commitments:
            return None
        return self.commitments[-1]


async def read_job(reads: ChainReads, reader: JobReader) -> JobPage:
    """The page of `reader`'s job (UnknownJob when there is none)."""
    facts = await reader.read()
    page = JobPage(facts)
    ids = [u.unit_id for u in facts.units]
    for s in await reads.snapshots(ids):
        uid = int(s.unitId)
        page.drawn[uid] = [
            Drawn(v.verifier, VerifierStatus(v.status)) for v in getattr(s, "verifiers", ())
        ]
        page.claimants[uid] = list(getattr(s, "claimants", ()))
    page.attempts = max((u.attempt for u in facts.units), default=0) + 1
    events = [
        e
        for e in await reads.events(["JobManager"], None, topic1=[*ids, facts.job_id])
        if _of_job(e, facts.job_id, ids)
    ]
    attempt: dict[int, int] = {}
    for e in events:
        a = e.args
        if e.name == "UnitOpened":
            attempt[int(a["unitId"])] = int(a["attempt"])
        if e.name == "CheckpointsCommitted":
            uid = int(a["unitId"])
            page.commitments.append(
                Commitment(
                    uid,
                    attempt.get(uid, 0),
                    a["solver"],
                    str(a["blobLocator"]),
                    bytes(a["checkpointRoot"]),
                    int(a["numCheckpoints"]),
                    bytes(a["finalStateRoot"]),
                    e.raw.block_number,
                )
            )
    money = await _money(reads, events)
    for e in sorted(events + money, key=lambda e: (e.raw.block_number, e.raw.log_index)):
        page.history.append(
            HistoryRow(
                e.raw.block_number,
                await reads.block_time(e.raw.block_number),
                e.name,
                history_words(e),
                e.raw.tx_hash,
            )
        )
        if e.name == "NodeSlashed":
            page.slashes.append((e.args["node"], int(e.args["amount"]), _why(e, events)))
        if e.name == "Credited":
            account = e.args["account"]
            page.credits[account] = page.credits.get(account, 0) + int(e.args["amount"])
    return page


def _of_job(e: Event, job_id: int, unit_ids: list[int]) -> bool:
    a = e.args
    if "unitId" in a:
        return int(a["unitId"]) in unit_ids
    return "jobId" in a and int(a["jobId"]) == job_id


async def _money(reads: ChainReads, events: list[Event]) -> list[Event]:
    """The slashes and credits in the transactions of the job's events."""
    if not events:
        return []
    txs = {e.raw.tx_hash for e in events}
    first, last = events[0].raw.block_number, events[-1].raw.block_number
    found = await reads.events(["JobManager", "NodeRegistry"], MONEY_EVENTS, start=first, end=last)
    return [e for e in found if e.raw.tx_hash in txs]


def _why(slash: Event, events: list[Event]) -> str:
    """The job's event in the slash's transaction that explains it."""
    for e in events:
        if e.raw.tx_hash != slash.raw.tx_hash:
            continue
        if e.name == "DisputeResolved" and e.args["challengerWon"]:
            return f"lost dispute game {e.args['gameId']}"
        if e.name == "AssignmentExpired":
            return "missed its commit deadline"
        if e.name == "DataRequestExpired":
            return "did not answer a data request"
        if e.name == "PrematureRevealReported":
            return "revealed its forced-error secret early"
        if e.name in ("VerifierPenalised", "AttestationJudgedWrong"):
            return "silent or wrong at a forced error"
    return "slashed in this job's transaction"


def history_words(e: Event) -> str:
    """One event of a job, in words."""
    a, n = e.args, e.name
    if n in MONEY_EVENTS:
        return moved_words(e)
    if n == "JobPosted":
        # the unit's first attempt opens for claims with the job (UnitOpened: the re-openings)
        return f"posted by {a['submitter']} ({a['unitCount']} unit), open for claims"
    if n == "UnitOpened":
        return f"re-opened for claims until {a['claimDeadline']} (attempt {int(a['attempt']) + 1})"
    if n == "UnitClaimed":
        return f"claimed by {a['solver']} (collateral {tokens(a['collateral'])})"
    if n == "UnitAssigned":
        return f"assigned to {a['solver']}, commit by {a['commitDeadline']}"
    if n == "CheckpointsCommitted":
        return (
            f"{a['solver']} committed {a['numCheckpoints']} checkpoints "
            f"(root 0x{bytes(a['checkpointRoot']).hex()[:12]}…)"
        )
    if n == "VerifiersDrawn":
        return f"drew {len(a['verifiers'])} verifier(s), challenge by {a['challengeDeadline']}"
    if n == "AttestationSealed":
        return f"{a['verifier']} sealed its attestation"
    if n == "Attested":
        return f"{a['verifier']} attested segments {list(a['segments'])}"
    if n == "ChallengeOpened":
        return (
            f"{a['challenger']} challenged (bond {tokens(a['bond'])}): dispute game {a['gameId']}"
        )
    if n == "DisputeResolved":
        who = "the challenger" if a["challengerWon"] else "the solver"
        return f"dispute game {a['gameId']} resolved: {who} won"
    if n == "DisputeResultHeld":
        return f"dispute game {a['gameId']}: the challenger's win held until {a['until']}"
    if n == "DisputeVoided":
        return f"dispute game {a['gameId']} voided (a forced error was revealed)"
    if n == "UnitFinalized":
        return (
            f"finalized: solver {a['solver']} paid {tokens(a['solverPay'])}, verifiers "
            f"{tokens(a['verifierFee'])}, tax {tokens(a['tax'])}"
        )
    if n == "ForcedErrorRevealed":
        return (
            f"forced round revealed by {a['solver']} at checkpoint {a['position']}: "
            f"{a['catchers']} catcher(s), {a['slashed']} wrong"
        )
    if n == "JackpotPaid":
        return f"{a['catcher']} paid {tokens(a['amount'])} from the jackpot"
    if n == "AttestationJudgedRight":
        return f"{a['verifier']} caught the forced error"
    if n == "AttestationJudgedWrong":
        return f"{a['verifier']} attested the forced error as right (loses {tokens(a['amount'])})"
    if n == "VerifierPenalised":
        return f"{a['verifier']} penalised {tokens(a['amount'])} (silent)"
    if n == "AssignmentExpired":
        return f"{a['solver']} missed its commit deadline (slashed {tokens(a['slashed'])})"
    if n == "ClaimReleased":
        return f"{a['solver']}'s claim released"
    if n == "ClaimsClosed":
        n_claimants, seed = a["claimants"], a["seedBlock"]
        return f"claims closed ({n_claimants} claimant(s)), assignee drawn after block {seed}"
    if n == "JobCompleted":
        return "completed"
    if n == "JobCancelled":
        return f"cancelled, {tokens(a['refund'])} refunded"
    if n == "DataRequested":
        return f"{a['requester']} requested checkpoint {a['checkpoint']}'s data on chain"
    return n


def holder(u: Any) -> str:
    """Who holds a unit (its assignee), or who may take it."""
    if u.status in (UnitStatus.OPEN, UnitStatus.SELECTING) or int(u.assignee, 16) == 0:
        return ""
    return u.assignee
