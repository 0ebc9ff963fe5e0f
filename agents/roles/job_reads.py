"""The chain reads behind `job status`, `job fetch` and `submit`'s view: a job's record, its
units, their disputes (from events) and the final checkpoint's commitment, read by field name.
A thin layer: what is shown is decided in agents/roles/job_view.py. Async, over an AsyncWeb3: the
followed submitter reads it through its agent's one client; the one-shot `job` commands open
their own (agents/cli/job_chain.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from eth_utils import event_abi_to_log_topic
from web3 import AsyncWeb3
from web3.contract import AsyncContract

from agents.core.enums import JobStatus, UnitStatus
from agents.roles.errors import RoleError
from agents.roles.job_view import (
    DISPUTE_EVENTS,
    JobFacts,
    UnitFacts,
    disputes_from_events,
)

#: Blocks per eth_getLogs: within the ranges RPC providers serve.
LOG_SCAN_BLOCKS = 2_000


class UnknownJob(RoleError):
    """No job under that id on this JobManager (never posted, or its record was recycled)."""


@dataclass(frozen=True)
class Commitment:
    """The unit's latest commitment as the chain holds it: where its checkpoints are (only the
    CheckpointsCommitted event carries the locator), the root that data was published under
    (after a forced error's reveal the unit's checkpoint root is the true one) and the final
    state root the solver committed to."""

    locator: str
    published_root: bytes
    final_root: bytes
    # where the holders of the attempt's result say they serve it (PROTOCOL §6.11: answers to a
    # request for it, and DataOffered), in chain order: read when the solver's copy is not
    holders: tuple[str, ...] = ()


class JobReader:
    """Reads one job; keeps the dispute events already scanned, so that a reader asked again
    (a followed job) reads only the blocks added since."""

    def __init__(
        self, w3: AsyncWeb3, manager: AsyncContract, job_id: int, from_block: int = 0
    ) -> None:
        """`manager` is bound by agents.core.bindings.bind (results decoded by name)."""
        self.w3, self.manager, self.job_id = w3, manager, job_id
        self.from_block = from_block
        self._next_block = from_block
        self._events: list[tuple[tuple[int, int], str, dict[str, Any]]] = []
        self._unit_ids: list[int] = []
        abis = {e["name"]: e for e in manager.abi if e["type"] == "event"}
        self._topics = {"0x" + event_abi_to_log_topic(abis[n]).hex(): n for n in DISPUTE_EVENTS}

    async def job(self) -> Any:
        """IJobManager.Job, decoded by name; UnknownJob when there is none."""
        job = await self.manager.functions.getJob(self.job_id).call()
        if job.status == JobStatus.NONE:
            raise UnknownJob(f"no job {self.job_id} on JobManager {self.manager.address}")
        return job

    async def unit_ids(self, unit_count: int) -> list[int]:
        while len(self._unit_ids) < unit_count:
            index = len(self._unit_ids)
            uid = await self.manager.functions.unitIdOf(self.job_id, index).call()
            self._unit_ids.append(int(uid))
        return self._unit_ids

    async def unit(self, unit_id: int) -> UnitFacts:
        f = self.manager.functions
        u = await f.getUnit(unit_id).call()
        status = UnitStatus(u.status)
        held, answer = 0, 0
        if status == UnitStatus.DISPUTED:
            held = int(await f.heldUntil(unit_id).call())
            req = await f.dataRequestOf(unit_id).call()
            if int(req.requester, 16):
                answer = int(req.answerDeadline)
        return UnitFacts(
            unit_id=unit_id,
            status=status,
            attempt=int(u.attempt),
            assignee=u.assignee,
            deadline=int(u.deadline),
            seed_block=int(u.seedBlock),
            final_root=bytes(u.finalStateRoot),
            held_until=held,
            answer_deadline=answer,
        )

    async def read(self) -> JobFacts:
        head = await self.w3.eth.get_block("latest")
        job = await self.job()
        ids = await self.unit_ids(int(job.unitCount))
        units = tuple([await self.unit(uid) for uid in ids])
        await self._scan(ids, int(head["number"]))
        disputes = disputes_from_events((name, args) for _, name, args in sorted(self._events))
        return JobFacts(
            job_id=self.job_id,
            status=JobStatus(job.status),
            submitter=job.submitter,
            reward=int(job.reward),
            verification_fee=int(job.verificationFee),
            escrow=int(job.escrow),
            steps=int(job.steps),
            checkpoint_every=int(job.checkpointInterval),
            spec_hash=bytes(job.specHash),
            units=units,
            disputes=tuple(disputes),
            block=int(head["number"]),
            now=int(head["timestamp"]),
        )

    async def _scan(self, unit_ids: list[int], head: int) -> None:
        """The dispute events of the job's units in [next block, head]."""
        logs = await self._logs(list(self._topics), unit_ids, self._next_block, head)
        for log in logs:
            name = self._topics["0x" + bytes(log["topics"][0]).hex()]
            ev = getattr(self.manager.events, name)().process_log(log)
            order = (int(log["blockNumber"]), int(log["logIndex"]))
            self._events.append((order, name, dict(ev["args"])))
        self._next_block = max(self._next_block, head + 1)

    async def _logs(self, topic0s: list[str], unit_ids: list[int], start: int, end: int) -> list:
        """The manager's logs of these event topics and units (topic 1) in [start, end], read
        LOG_SCAN_BLOCKS at a time."""
        out: list = []
        units = ["0x" + uid.to_bytes(32, "big").hex() for uid in unit_ids]
        while start <= end:
            stop = min(end, start + LOG_SCAN_BLOCKS - 1)
            out += await self.w3.eth.get_logs({
                "address": self.manager.address,
                "fromBlock": start,
                "toBlock": stop,
                "topics": [topic0s, units],
            })  # fmt: skip
            start = stop + 1
        return out

    async def commitment(self, unit_id: int) -> Commitment:
        """The unit's latest commitment; RoleError when it has none."""
        u = await self.manager.functions.getUnit(unit_id).call()
        event = self.manager.events.CheckpointsCommitted
        topic = "0x" + event_abi_to_log_topic(event().abi).hex()
        head = await self.w3.eth.block_number
        logs = await self._logs([topic], [unit_id], self.from_block, head)
        if not logs:
            raise RoleError(f"unit {unit_id} of job {self.job_id} has no commitment")
        last = event().process_log(logs[-1])["args"]
        return Commitment(
            locator=str(last["blobLocator"]),
            published_root=bytes(last["checkpointRoot"]),
            final_root=bytes(u.finalStateRoot),
            holders=await self._holders(
                unit_id, int(u.attempt), int(logs[-1]["blockNumber"]), head
            ),  # fmt: skip
        )

    async def _holders(self, unit_id: int, attempt: int, start: int, head: int) -> tuple[str, ...]:
        """The locators of the attempt's result its holders gave since its commitment (block
        `start`): answers to requests for it, then offers of the attempt."""
        answered, offered = self.manager.events.DataRequestAnswered, self.manager.events.DataOffered
        topics = {"0x" + event_abi_to_log_topic(e().abi).hex(): e for e in (answered, offered)}
        out = []
        for log in await self._logs(list(topics), [unit_id], start, head):
            event = topics["0x" + bytes(log["topics"][0]).hex()]
            args = event().process_log(log)["args"]
            if event is offered and int(args["attempt"]) != attempt:
                continue
            out.append(str(args["locator"]))
        return tuple(dict.fromkeys(out))
