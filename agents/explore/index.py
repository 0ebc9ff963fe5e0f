"""The explorer's live index: every job on the deployment as the jobs page lists it, kept up to
date by the agents' event stream (agents/core/events.py, from the deployment's block, then
following the head), and the fan-out of what changed to the open pages (server-sent events).

Each poll's events only mark what they touch (a job, a decomposed job, a game, a node); the
touched jobs are then read again through the JobLens, a page of units per call, and one message
per touched thing goes to every subscriber. A reorg retracts events the same way (the touched
jobs are read again), so the index is always the chain's at the block it last read. The jobs
page renders from memory: its cost does not grow with chain reads. The model kind of each spec
is read from its published blobs in the background, once per spec (again when a new commitment
names another store).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agents.core.enums import JobStatus, RoundJobStatus, UnitStatus
from agents.core.events import Event, EventStream
from agents.core.rpc_errors import transport_errors
from agents.core.store import Store
from agents.explore.published import ModelKind, Published, Unpublished
from agents.explore.reads import ChainDown, ChainReads, down_message

log = logging.getLogger(__name__)

#: Messages a slow page may fall behind by before the oldest are dropped (it then reloads
#: what it shows: every message only says what changed, not how).
QUEUE = 256
#: Contracts the index follows.
FOLLOWED = ("JobManager", "RoundManager", "DisputeGame", "NodeRegistry", "AttestationCourt")
STATUSES = ("open", "disputed", "completed", "cancelled")


@dataclass(frozen=True)
class UnitOf:
    """Where a unit job sits in its decomposed job."""

    job_id: int
    round: int
    shard: int


@dataclass(frozen=True)
class JobRow:
    """A JobManager job as the jobs page lists it (its one unit's phase included)."""

    job_id: int
    status: JobStatus
    phase: UnitStatus
    attempt: int
    assignee: str
    submitter: str
    reward: int
    verification_fee: int
    escrow: int
    steps: int
    checkpoint_every: int
    units: int
    finalized: int
    spec_hash: bytes
    parent: UnitOf | None = None

    @property
    def status_name(self) -> str:
        if self.status == JobStatus.OPEN and self.phase == UnitStatus.DISPUTED:
            return "disputed"
        return self.status.name.lower()

    @property
    def progress(self) -> str:
        """Units finalized of all, and while open the unit's phase and attempt."""
        text = f"{self.finalized}/{self.units} units"
        if self.status == JobStatus.OPEN:
            text += f" · {self.phase.name.lower()}, attempt {self.attempt + 1}"
        return text


@dataclass(frozen=True)
class DecomposedRow:
    """A RoundManager job: R rounds × S shards of unit jobs (PROTOCOL §6.9)."""

    job_id: int
    status: RoundJobStatus
    submitter: str
    rounds: int
    shards: int
    current_round: int
    escrow: int
    unit_reward: int
    verification_fee: int
    aggregator_reward: int
    local_steps: int
    checkpoint_every: int
    spec_hash: bytes

    @property
    def status_name(self) -> str:
        return "completed" if self.status == RoundJobStatus.COMPLETED else "open"


@dataclass
class Hub:
    """The open pages' queues; a message is a small dict (`kind`, `id`)."""

    queues: set[asyncio.Queue] = field(default_factory=set)

    def publish(self, message: dict[str, Any]) -> None:
        for q in list(self.queues):
            if q.full():
                with contextlib.suppress(asyncio.QueueEmpty):
                    q.get_nowait()
            q.put_nowait(message)

    @contextlib.asynccontextmanager
    async def subscribe(self) -> AsyncIterator[asyncio.Queue]:
        q: asyncio.Queue = asyncio.Queue(QUEUE)
        self.queues.add(q)
        try:
            yield q
        finally:
            self.queues.discard(q)


@dataclass
class Touched:
    """What one poll's events touched."""

    jobs: set[int] = field(default_factory=set)
    decomposed: set[int] = field(default_factory=set)
    games: set[int] = field(default_factory=set)
    nodes: set[str] = field(default_factory=set)

    def __bool__(self) -> bool:
        return bool(self.jobs or self.decomposed or self.games or self.nodes)


class Index:
    """Every job of the deployment, followed live (`run`)."""

    def __init__(self, reads: ChainReads, published: Published, poll_interval: float) -> None:
        self.reads, self.published = reads, published
        self.poll_interval = poll_interval
        self.hub = Hub()
        self.rows: dict[int, JobRow] = {}
        self.decomposed: dict[int, DecomposedRow] = {}
        self.parents: dict[int, UnitOf] = {}
        self.unit_jobs: dict[int, dict[tuple[int, int], int]] = {}  # decomposed -> (r, s) -> job
        self.game_units: dict[int, int] = {}  # JobManager game id -> unit id
        self.locators: dict[int, set[str]] = {}  # job id -> its commitments' locators
        self.kinds: dict[bytes, ModelKind | str] = {}  # spec hash -> kind, or why it is unknown
        self._kind_tried: dict[bytes, int] = {}  # spec hash -> locators known when last tried
        self.head: tuple[int, int] = (0, 0)
        self.error: str | None = None  # the chain's last failure, while it lasts
        self.synced = False  # the backfill reached the head once
        self._touched = Touched()
        self._tmp = tempfile.TemporaryDirectory(prefix="vtp-explore-")
        self.store = Store(Path(self._tmp.name) / "stream.db")
        addresses = [c.address for n, c in reads.contracts.items() if n in FOLLOWED]
        self.stream = EventStream(
            "explore",
            reads.source,
            self.store,
            reads.decoder,
            addresses=addresses,
            confirmations=0,
            start_block=reads.from_block,
            poll_interval=poll_interval,
        )
        self.stream.subscribe("index", self._on_event, self._on_event)
        self._kind_task: asyncio.Task | None = None

    def close(self) -> None:
        self.store.close()
        self._tmp.cleanup()

    # --- following ---------------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        """Poll until `stop`: each poll's touched jobs read again and announced."""
        backoff = 1.0
        while not stop.is_set():
            try:
                result = await self.stream.poll_once()
                await self._flush()
                self.head = await self.reads.head()
                if self.error is not None:
                    self.error = None
                    self.hub.publish({"kind": "chain", "id": "up"})
                backoff = 1.0
            except (ChainDown, *transport_errors()) as exc:
                self._touched = Touched()  # read again from the stream's cursor on recovery
                if self.error is None:
                    self.hub.publish({"kind": "chain", "id": "down"})
                self.error = str(exc) if isinstance(exc, ChainDown) else down_message(exc)
                await _sleep(stop, backoff)
                backoff = min(30.0, backoff * 2)
                continue
            if result.caught_up:
                if not self.synced:
                    self.synced = True
                    self.hub.publish({"kind": "jobs", "id": "synced"})
                self._start_kinds()
                await _sleep(stop, self.poll_interval)

    def _on_event(self, event: Event) -> None:
        """Mark what the event touches (a retracted one touches the same)."""
        a, t = event.args, self._touched
        name = event.name
        contract = self._contract_of(event.address)
        if contract == "RoundManager":
            if "jobId" in a:
                t.decomposed.add(int(a["jobId"]))
            if name == "UnitJobPosted":
                ref = UnitOf(int(a["jobId"]), int(a["round"]), int(a["shard"]))
                self.parents[int(a["unitJobId"])] = ref
                self.unit_jobs.setdefault(ref.job_id, {})[(ref.round, ref.shard)] = int(
                    a["unitJobId"]
                )
                t.jobs.add(int(a["unitJobId"]))
        elif contract == "JobManager":
            if "unitId" in a:
                t.jobs.add(int(a["unitId"]) >> 32)
            if "jobId" in a:
                t.jobs.add(int(a["jobId"]))
            if name == "ChallengeOpened":
                self.game_units[int(a["gameId"])] = int(a["unitId"])
                t.games.add(int(a["gameId"]))
            if name == "CheckpointsCommitted":
                job_id = int(a["unitId"]) >> 32
                self.locators.setdefault(job_id, set()).add(str(a["blobLocator"]))
        elif contract in ("DisputeGame",) and "gameId" in a:
            t.games.add(int(a["gameId"]))
            unit = self.game_units.get(int(a["gameId"]))
            if unit is not None:
                t.jobs.add(unit >> 32)
        for key in ("node", "solver", "verifier", "challenger", "account", "catcher"):
            if isinstance(a.get(key), str):
                t.nodes.add(a[key])

    def _contract_of(self, address: str) -> str | None:
        for name, c in self.reads.contracts.items():
            if c.address == address:
                return name
        return None

    async def _flush(self) -> None:
        """Read the touched jobs again and announce everything touched."""
        t, self._touched = self._touched, Touched()
        if not t:
            return
        jobs = sorted(t.jobs)
        snaps = await self.reads.snapshots([j << 32 for j in jobs])
        for job_id, s in zip(jobs, snaps, strict=True):
            row = _row(job_id, s, self.parents.get(job_id))
            if row is None:
                self.rows.pop(job_id, None)  # retracted
            else:
                self.rows[job_id] = row
        for job_id in sorted(t.decomposed):
            rm = self.reads.contract("RoundManager")
            if rm is None:
                continue
            j = await self.reads.call(rm.functions.getJob(job_id))
            if j.status == RoundJobStatus.NONE:
                self.decomposed.pop(job_id, None)
                continue
            self.decomposed[job_id] = _decomposed_row(job_id, j)
        for job_id in jobs:
            self.hub.publish({"kind": "job", "id": job_id})
            parent = self.parents.get(job_id)
            if parent is not None:
                t.decomposed.add(parent.job_id)
        for job_id in sorted(t.decomposed):
            self.hub.publish({"kind": "decomposed", "id": job_id})
        for game_id in sorted(t.games):
            self.hub.publish({"kind": "game", "id": game_id})
        for node in sorted(t.nodes):
            self.hub.publish({"kind": "node", "id": node.lower()})
        self.hub.publish({"kind": "jobs", "id": "changed"})

    # --- model kinds, from published blobs -------------------------------------------------------

    def _start_kinds(self) -> None:
        if self._kind_task is None or self._kind_task.done():
            self._kind_task = asyncio.create_task(self._read_kinds())

    async def _read_kinds(self) -> None:
        """Read the model kind of every spec not read yet (again once a new commitment names
        another store), one at a time in a worker thread."""
        specs: dict[bytes, set[str]] = {}
        for r in self.rows.values():
            key = r.spec_hash if r.parent is None else self.decomposed_spec(r.parent.job_id)
            if key is not None:
                specs.setdefault(key, set()).update(self.locators.get(r.job_id, ()))
        for spec_hash, found in sorted(specs.items()):
            if isinstance(self.kinds.get(spec_hash), ModelKind):
                continue
            locators = sorted(found)
            if self._kind_tried.get(spec_hash) == len(locators) and spec_hash in self.kinds:
                continue
            self._kind_tried[spec_hash] = len(locators)
            what = f"spec 0x{spec_hash.hex()[:12]}…"
            try:
                kind: ModelKind | str = await asyncio.to_thread(
                    self.published.kind, spec_hash, locators, what
                )
            except Unpublished as exc:
                kind = str(exc)
            if self.kinds.get(spec_hash) != kind:
                self.kinds[spec_hash] = kind
                self.hub.publish({"kind": "jobs", "id": "kinds"})

    # --- what the pages read -----------------------------------------------------------------

    def decomposed_spec(self, job_id: int) -> bytes | None:
        row = self.decomposed.get(job_id)
        return None if row is None else row.spec_hash

    def kind_of(self, spec_hash: bytes) -> ModelKind | str:
        return self.kinds.get(spec_hash, "reading the spec…")

    def listing(self, status: str | None = None) -> list[JobRow | DecomposedRow]:
        """Every job, newest first: JobManager jobs that are not unit jobs, and decomposed
        jobs (their units are on their own page); `status` one of STATUSES, or None."""
        out: list[JobRow | DecomposedRow] = [r for r in self.rows.values() if r.parent is None]
        out += list(self.decomposed.values())
        if status is not None:
            out = [r for r in out if r.status_name == status]
        return sorted(out, key=lambda r: (isinstance(r, DecomposedRow), r.job_id), reverse=True)

    def decomposed_progress(self, job_id: int) -> tuple[int, int]:
        """(units finalized, units posted) of a decomposed job."""
        jobs = self.unit_jobs.get(job_id, {}).values()
        rows = [self.rows[j] for j in jobs if j in self.rows]
        return sum(r.finalized for r in rows), len(rows)


def _row(job_id: int, s: Any, parent: UnitOf | None) -> JobRow | None:
    job, unit = s.job, s.unit
    if job.status == JobStatus.NONE:
        return None
    return JobRow(
        job_id=job_id,
        status=JobStatus(job.status),
        phase=UnitStatus(unit.status),
        attempt=int(unit.attempt),
        assignee=unit.assignee,
        submitter=job.submitter,
        reward=int(job.reward),
        verification_fee=int(job.verificationFee),
        escrow=int(job.escrow),
        steps=int(job.steps),
        checkpoint_every=int(job.checkpointInterval),
        units=int(job.unitCount),
        finalized=int(job.unitsFinalized),
        spec_hash=bytes(job.specHash),
        parent=parent,
    )


def _decomposed_row(job_id: int, j: Any) -> DecomposedRow:
    p = j.params
    return DecomposedRow(
        job_id=job_id,
        status=RoundJobStatus(j.status),
        submitter=j.submitter,
        rounds=int(p.rounds),
        shards=int(p.shards),
        current_round=int(j.currentRound),
        escrow=int(j.escrow),
        unit_reward=int(p.unitReward),
        verification_fee=int(p.verificationFee),
        aggregator_reward=int(p.aggregatorReward),
        local_steps=int(p.localSteps),
        checkpoint_every=int(p.checkpointInterval),
        spec_hash=bytes(p.specHash),
    )


async def _sleep(stop: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), seconds)


def message_json(message: dict[str, Any]) -> str:
    return json.dumps(message, separators=(",", ":"))
