"""What a role reads of the chain each round (RoleAgent.units): every live job's unit, a settled
one (Finalized, Cancelled) once, so that a long-running agent's reads per round grow with the
jobs still live, not with every job ever posted.

No chain: the job manager is a fake that counts its getUnit reads.
"""

from __future__ import annotations

import asyncio
import logging
from types import SimpleNamespace

from hypothesis import given, settings
from hypothesis import strategies as st
from rolefakes import Call, FakeEth, decoded, ready
from web3.exceptions import BadFunctionCallOutput

from agents.core.enums import RoundJobStatus
from agents.core.fetches import Reads
from agents.roles.aggregator import Aggregator
from agents.roles.logic import SettledJobs, SettledRecords, UnitStatus
from agents.roles.runner import POSTED_SCAN_BLOCKS, RoleAgent
from agents.roles.verifier import Verifier


class Manager:
    """getUnit of job j's unit returns `status[j]`, or `confirmed[j]` when read at a past block
    (the same status unless the test says otherwise); a job missing from `status` reads as
    unknown (its record was recycled, PROTOCOL §6.10). `posted[j]` is the block of job j's
    JobPosted (1 unless the test says otherwise; jobCount counts them); `reads` counts the
    latest-block getUnit calls and `scans` the JobPosted ranges read."""

    def __init__(self, status: dict[int, UnitStatus]) -> None:
        self.status = status
        self.posted: dict[int, int] = dict.fromkeys(status, 1)  # jobs ever posted, by block
        self.confirmed: dict[int, UnitStatus] = {}
        self.no_code_then: set[int] = set()  # jobs whose past-block read finds no manager
        self.reads: list[int] = []
        self.scans: list[tuple[int, int]] = []
        self.functions = SimpleNamespace(jobCount=self._count, getUnit=self._unit)
        self.events = SimpleNamespace(JobPosted=lambda: SimpleNamespace(get_logs=self._logs))

    def _count(self):
        return Call(lambda: len(set(self.status) | set(self.posted)))  # monotone

    async def _logs(self, from_block: int, to_block: int) -> list[dict]:
        self.scans.append((from_block, to_block))
        jobs = sorted(set(self.status) | set(self.posted))
        return [
            {"args": {"jobId": j}} for j in jobs if from_block <= self.posted.get(j, 1) <= to_block
        ]

    def _unit(self, unit_id: int):
        async def call(block_identifier: int | None = None) -> tuple:
            j = unit_id >> 32
            if block_identifier is None:
                self.reads.append(j)
                status = self.status.get(j, UnitStatus.NONE)
            else:
                assert block_identifier == HEAD - CONFIRMATIONS
                if j in self.no_code_then:
                    raise BadFunctionCallOutput("Could not decode contract function call")
                status = self.confirmed.get(j, self.status.get(j, UnitStatus.NONE))
            u = [0] * 15
            u[0], u[9], u[10] = int(status), "0x" + "00" * 20, 1
            u[12], u[13] = b"\x01" * 32, b"\x02" * 32
            return decoded("getUnit", u)

        return SimpleNamespace(call=call)


HEAD, CONFIRMATIONS = 100, 2


def role(manager: Manager) -> RoleAgent:
    r = object.__new__(RoleAgent)
    r.manager, r.log = manager, logging.getLogger("test.role_reads")
    r.w3 = SimpleNamespace(eth=FakeEth(head=HEAD))
    r.agent = SimpleNamespace(config=SimpleNamespace(confirmations=CONFIRMATIONS))
    r._locators, r.settled = {}, SettledRecords()
    r.live_jobs, r._posted_from, r._posted_count = set(), 0, -1
    r.commitment = lambda unit_id: ready((f"http://blobs/{unit_id}", b"\x01" * 32))
    return r


def test_a_settled_unit_is_seen_once_then_no_longer_read():
    status = {j: UnitStatus.FINALIZED for j in range(1, 41)}
    status.update({7: UnitStatus.VERIFYING, 30: UnitStatus.OPEN, 41: UnitStatus.CANCELLED})
    chain = Manager(status)
    r = role(chain)
    first = asyncio.run(r.units())
    assert [u.job_id for u in first] == list(range(1, 42))  # every job, settled ones too
    chain.reads.clear()
    second = asyncio.run(r.units())
    assert chain.reads == [7, 30]  # only the live ones are read again
    assert [u.job_id for u in second] == [7, 30]
    assert r.settled.records() == 39 and r.live_jobs == {7, 30}
    assert set(r._locators) == {7 << 32}  # the settled ones' locators were let go

    chain.status[7] = UnitStatus.FINALIZED  # it settles: seen once more, then never read
    assert [u.job_id for u in asyncio.run(r.units())] == [7, 30]
    chain.status[42] = UnitStatus.OPEN  # a new job is read from its first round
    chain.posted[42] = HEAD
    chain.reads.clear()
    assert [u.job_id for u in asyncio.run(r.units())] == [30, 42]
    assert chain.reads == [30, 42]


def test_jobs_are_found_through_JobPosted_from_where_the_last_scan_left_off():
    """Job ids are not dense once records are recycled (`generation << 32 | record`): new jobs
    come from JobPosted, read only when jobCount moved, each scan from `--confirmations` below
    the head the last one reached, in ranges of POSTED_SCAN_BLOCKS."""
    chain = Manager({1: UnitStatus.OPEN})
    r = role(chain)
    asyncio.run(r.units())
    assert chain.scans == [(0, HEAD)]
    asyncio.run(r.units())
    assert chain.scans == [(0, HEAD)]  # jobCount did not move: no scan
    recycled = 1 << 32 | 2  # record 2's second job
    chain.status[recycled] = UnitStatus.OPEN
    chain.posted[recycled] = HEAD
    assert [u.job_id for u in asyncio.run(r.units())] == [1, recycled]
    assert chain.scans[-1] == (HEAD + 1 - CONFIRMATIONS, HEAD)
    long = role(Manager({1: UnitStatus.OPEN}))
    long.w3.eth.head = 2 * POSTED_SCAN_BLOCKS + 5
    asyncio.run(long.units())
    assert long.manager.scans == [
        (0, POSTED_SCAN_BLOCKS - 1),
        (POSTED_SCAN_BLOCKS, 2 * POSTED_SCAN_BLOCKS - 1),
        (2 * POSTED_SCAN_BLOCKS, 2 * POSTED_SCAN_BLOCKS + 5),
    ]


def test_a_job_whose_record_took_another_job_is_dropped_unread():
    """A job reads as unknown once its record was recycled (it settled long before): it is not
    handed to the role, and never read again; the record's new job is."""
    chain = Manager({1: UnitStatus.VERIFYING, 2: UnitStatus.OPEN})
    r = role(chain)
    asyncio.run(r.units())
    del chain.status[1]  # record 1 took another job, whose JobPosted comes next
    chain.status[1 << 32 | 1] = UnitStatus.OPEN
    chain.posted[1 << 32 | 1] = HEAD
    assert [u.job_id for u in asyncio.run(r.units())] == [2, 1 << 32 | 1]
    assert 1 in r.settled and 1 not in r.live_jobs
    chain.reads.clear()
    asyncio.run(r.units())
    assert chain.reads == [2, 1 << 32 | 1]


def test_a_settlement_a_reorg_could_undo_is_read_again_until_it_is_deep_enough():
    """Finalized at the head but not yet --confirmations deep: a shallow reorg may undo the
    finalize, and nobody else may take it again, so the unit stays read until it is deep."""
    chain = Manager({1: UnitStatus.FINALIZED, 2: UnitStatus.OPEN})
    chain.confirmed[1] = UnitStatus.VERIFYING
    r = role(chain)
    asyncio.run(r.units())
    chain.reads.clear()
    assert [u.job_id for u in asyncio.run(r.units())] == [1, 2]
    assert chain.reads == [1, 2]
    del chain.confirmed[1]  # now settled deep enough
    asyncio.run(r.units())
    chain.reads.clear()
    assert [u.job_id for u in asyncio.run(r.units())] == [2]


def test_a_settlement_that_cannot_be_read_at_depth_is_read_again():
    """On a young chain the block `--confirmations` deep may predate the manager: not known to
    be settled, so the unit is read again, and the round goes on."""
    chain = Manager({1: UnitStatus.FINALIZED, 2: UnitStatus.OPEN})
    chain.no_code_then.add(1)
    r = role(chain)
    assert [u.job_id for u in asyncio.run(r.units())] == [1, 2]
    assert [u.job_id for u in asyncio.run(r.units())] == [1, 2]
    chain.no_code_then.clear()
    asyncio.run(r.units())
    assert [u.job_id for u in asyncio.run(r.units())] == [2]


def test_a_locator_is_looked_up_again_for_a_new_attempt_only():
    chain = Manager({1: UnitStatus.VERIFYING})
    r = role(chain)
    looked: list[int] = []
    r.commitment = lambda unit_id: looked.append(unit_id) or ready(("http://x", b"\x01" * 32))
    asyncio.run(r.units())
    asyncio.run(r.units())
    assert looked == [1 << 32]
    r._locators[1 << 32] = ((0, b"\x01" * 32), r._locators[1 << 32][1])  # as if attempt 0's
    asyncio.run(r.units())
    assert looked == [1 << 32, 1 << 32]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(1, 60), max_size=80))
def test_settled_jobs_hold_exactly_what_was_added(added):
    """Against a plain set: the same members, every one of 1..floor added, and only the ones
    above the floor kept one by one."""
    settled, model = SettledJobs(), set()
    for job_id in added:
        settled.add(job_id)
        model.add(job_id)
        assert all((j in settled) == (j in model) for j in range(0, 62))
        assert len(settled) == len(model)
        assert set(range(1, settled.floor + 1)) <= model
        assert settled.floor + 1 not in model
        assert settled.kept() == len(model) - settled.floor


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 6), st.integers(0, 4)), max_size=60))
def test_settled_records_hold_a_record_s_generations_up_to_the_newest_added(added):
    """A record takes its next job only once the last one settled, so a settled generation
    means every older one of the record is settled: against a model of exactly that."""
    settled, newest = SettledRecords(), {}
    for record, generation in added:
        settled.add(generation << 32 | record)
        newest[record] = max(newest.get(record, -1), generation)
        for r in range(0, 8):
            for g in range(0, 6):
                job = g << 32 | r
                assert (job in settled) == (job > 0 and g <= newest.get(r, -1)), (r, g)
        assert settled.records() == len(newest)


def test_a_verifier_forgets_a_units_bookkeeping_once_it_is_settled_for_good():
    """What the verifier keeps per unit attempt (the answers of its checkpoint reads, a verdict
    it does not contest) goes when the unit settles for good; other units' stay."""
    chain = Manager({1: UnitStatus.FINALIZED, 2: UnitStatus.VERIFYING})
    v = object.__new__(Verifier)
    v.__dict__.update(role(chain).__dict__)
    one, two = 1 << 32, 2 << 32
    v.reads = Reads(1)
    keys = [f"checkpoints:{one}:1:", f"checkpoints:{one}:2:", f"checkpoints:{two}:1:"]
    for key in keys:
        v.reads.ask(key, lambda: "old", 60)
    assert v.reads.wait(10)
    v._no_contest = {f"{one}:1", f"{two}:1"}
    asyncio.run(v.units())
    # unit one's answers are gone (asked again, read again); unit two's stay
    assert [v.reads.ask(key, lambda: "new", 60) for key in keys[2:]] == ["old"]
    for key in keys[:2]:
        v.reads.ask(key, lambda: "new", 60)
    assert v.reads.wait(10)
    assert [v.reads.ask(key, lambda: "none", 60) for key in keys[:2]] == ["new", "new"]
    assert v._no_contest == {f"{two}:1"}


def test_an_aggregator_reads_a_completed_decomposed_job_no_more_once_it_is_deep():
    """The aggregator's rounds read every decomposed job not known Completed for good."""
    status = {1: RoundJobStatus.COMPLETED, 2: RoundJobStatus.RUNNING, 3: RoundJobStatus.COMPLETED}
    confirmed = {3: RoundJobStatus.RUNNING}  # completed in the newest blocks only
    reads: list[int] = []

    def get_job(dj: int):
        async def call(block_identifier: int | None = None) -> tuple:
            if block_identifier is None:
                reads.append(dj)
                return SimpleNamespace(status=status[dj], currentRound=0)
            assert block_identifier == HEAD - CONFIRMATIONS
            return SimpleNamespace(status=confirmed.get(dj, status[dj]), currentRound=0)

        return SimpleNamespace(call=call)

    rm = SimpleNamespace(functions=SimpleNamespace(
        jobCount=lambda: Call(lambda: len(status)), getJob=get_job))  # fmt: skip
    a = object.__new__(Aggregator)
    a.__dict__.update(role(Manager({})).__dict__)
    a.rm, a.completed = rm, SettledJobs()
    assert [dj for dj, _ in asyncio.run(a.unfinished_jobs())] == [2, 3]
    reads.clear()
    assert [dj for dj, _ in asyncio.run(a.unfinished_jobs())] == [2, 3] and reads == [2, 3]
    del confirmed[3]
    asyncio.run(a.unfinished_jobs())
    reads.clear()
    assert [dj for dj, _ in asyncio.run(a.unfinished_jobs())] == [2] and reads == [2]
    assert a.completed.floor == 1
