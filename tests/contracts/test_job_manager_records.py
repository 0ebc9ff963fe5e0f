"""JobManager records (PROTOCOL §6.10): a settled job's storage takes a new job once
`recordRetention` is past its deadline, so a steady market overwrites slots instead of filling
new ones. What must hold: the ids (`generation << 32 | record`), the allocation order (the cursor
waits on a settled record, steps over a live, kept or spent one), that an id whose record was
recycled reads as unknown and moves nothing, that records of contracts and of jobs the court
keeps are never recycled, and that every view of a recycled record shows the new job only.

The stateful test (test_invariants.py) checks the same allocation against its model over random
sequences; these are the single cases, each revert path with its custom error."""

from __future__ import annotations

import pytest
from conftest import (
    CAP,
    E18,
    MGR_CFG,
    SECRET_HASH,
    U_CANCELLED,
    U_OPEN,
    advance,
    assign,
    challenger_wins,
    commit,
    deploy_protocol,
    job_params,
    now,
    post,
    reverts,
    verifying,
)
from eth_utils import keccak
from hexbytes import HexBytes

ZERO = "0x" + "00" * 20

RETENTION = MGR_CFG["recordRetention"]
KEPT = 1 << 31
RECORDS_SLOT = 3  # JobManagerBase: _arbiter/_jobCount/_recordCount/_cursor, _keptCount, _jackpot
GENERATION_BIT = 152  # Record slot 0: status, three counts, flags, deadline, seedBlock, attempt


def job_id(record: int, generation: int) -> int:
    return generation << 32 | record


def settle(d, chain, jid: int) -> int:
    """Cancel the (Open) job and return its deadline: its record is free RETENTION after it."""
    unit = d.manager.unitIdOf(jid, 0)
    d.manager.cancelJob(jid, sender=d.submitter)
    return d.manager.getUnit(unit).deadline


def past_retention(chain, deadline: int) -> None:
    advance(chain, max(0, deadline + RETENTION - chain.pending_timestamp + 1))


def record_slot(record: int) -> int:
    return int.from_bytes(keccak(record.to_bytes(32, "big") + RECORDS_SLOT.to_bytes(32, "big")))


def store(chain, address: str, slot: int, value: int) -> None:
    try:
        chain.provider.set_storage(address, slot, HexBytes(value.to_bytes(32, "big")))
    except NotImplementedError:
        pytest.skip("the provider cannot write storage (Anvil can)")


def load(chain, address: str, slot: int) -> int:
    return int.from_bytes(chain.provider.web3.eth.get_storage_at(address, slot), "big")


def test_postJob_afterRetention_takesTheSettledRecordAsItsNextGeneration(deployment, chain):
    d = deployment
    first, first_unit = post(d, chain)
    assert first == job_id(1, 0)
    assert tuple(d.manager.recordCounts()) == (1, 0)
    past_retention(chain, settle(d, chain, first))
    second, second_unit = post(d, chain, reward=150 * E18)
    assert second == job_id(1, 1)
    assert d.manager.jobAt(1) == second
    assert tuple(d.manager.recordCounts()) == (1, 0)  # no new record
    assert d.manager.jobCount() == 2
    # the old id reads as unknown: nothing of the new job under it
    old = d.manager.getJob(first)
    assert old.status == 0 and old.submitter == "0x" + "00" * 20 and old.reward == 0
    assert d.manager.getUnit(first_unit).status == 0
    new = d.manager.getJob(second)
    assert new.status == 1 and new.reward == 150 * E18 and new.escrow == 150 * E18
    assert d.manager.getUnit(second_unit).status == U_OPEN


def test_postJob_beforeRetention_takesANewRecordAndTheCursorWaits(deployment, chain):
    d = deployment
    first, _ = post(d, chain)
    deadline = settle(d, chain, first)
    advance(chain, deadline + RETENTION - chain.pending_timestamp - 5)  # not yet free
    second, _ = post(d, chain)
    assert second == job_id(2, 0)
    past_retention(chain, deadline)
    third, _ = post(d, chain)  # the cursor waited on record 1: it is free now
    assert third == job_id(1, 1)
    assert tuple(d.manager.recordCounts()) == (2, 0)


def test_postJob_liveRecordUnderTheCursor_isSteppedOver(staked, chain):
    """A live record under the cursor costs the post a new record, and the cursor moves on: the
    next post looks at the next record (it does not wait on a job that may never settle)."""
    d = staked
    live, _ = assign(d, chain)  # record 1: assigned, it does not settle here
    settled, _ = post(d, chain)  # record 2: the cursor looked at 1 (live) and moved on
    deadline = settle(d, chain, settled)
    past_retention(chain, deadline)
    third, _ = post(d, chain)  # the cursor looked at 1 again (it wrapped around two records)
    assert third == job_id(3, 0)
    fourth, _ = post(d, chain)  # and now at 2, settled and free
    assert fourth == job_id(2, 1)
    assert d.manager.getJob(live).status == 1  # the live job is untouched


def test_postJob_byAContract_getsAKeptRecordThatIsNeverRecycled(deployment, chain, project):
    d = deployment
    attacker = d.deployer.deploy(project.ReentrantAttacker)  # any contract that can call
    d.token.mint(attacker, 1_000 * E18, sender=d.deployer)
    attacker.exec(d.token, d.token.approve.encode_input(d.manager, 2**256 - 1), sender=d.deployer)
    tx = attacker.exec(
        d.manager, d.manager.postJob.encode_input(job_params(now(chain))), sender=d.deployer
    )
    kept = tx.events.filter(d.manager.JobPosted)[0].jobId
    assert kept == KEPT + 1 == d.manager.KEPT_RECORDS() + 1
    assert tuple(d.manager.recordCounts()) == (0, 1)
    deadline = d.manager.getUnit(d.manager.unitIdOf(kept, 0)).deadline
    attacker.exec(d.manager, d.manager.cancelJob.encode_input(kept), sender=d.deployer)
    past_retention(chain, deadline)
    other, _ = post(d, chain)
    assert other == job_id(1, 0)  # a recycled record of its own, not the kept one
    assert d.manager.getJob(kept).status == 3  # Cancelled, still readable


@pytest.fixture(scope="module")
def keeper_market(project, accounts):
    """A deployment whose registry lists the whistleblower account as a slasher beside the
    manager, standing in for a protocol contract (the attestation court keeps records this way,
    test_court.py)."""
    return deploy_protocol(project, accounts, MGR_CFG, slashers=(accounts[8],))


def test_keepRecord_byAProtocolContract_keepsTheRecordFromBeingRecycled(keeper_market, chain):
    d = keeper_market
    keeper = d.whistleblower  # the registry's second slasher
    first, _ = post(d, chain)
    deadline = settle(d, chain, first)
    tx = d.manager.keepRecord(first, sender=keeper)
    assert [(e.jobId, e.by) for e in tx.events.filter(d.manager.RecordKept)] == [
        (first, keeper.address)
    ]
    again = d.manager.keepRecord(first, sender=keeper)
    assert not again.events.filter(d.manager.RecordKept)  # kept already: nothing changes
    past_retention(chain, deadline)
    second, _ = post(d, chain)
    assert second == job_id(2, 0)  # record 1 is kept: a new record
    assert d.manager.getJob(first).status == 3  # Cancelled, still readable
    third, _ = post(d, chain)
    assert third == job_id(3, 0)  # the cursor stepped over the kept record


def test_keepRecord_byAnyoneElse_reverts(keeper_market, chain):
    d = keeper_market
    job, _ = post(d, chain)
    with reverts(d.manager, "NotProtocolContract", caller=d.other.address):
        d.manager.keepRecord(job, sender=d.other)


def test_keepRecord_unknownOrStaleJob_reverts(keeper_market, chain):
    d = keeper_market
    with reverts(d.manager, "UnknownJob", jobId=job_id(7, 0)):
        d.manager.keepRecord(job_id(7, 0), sender=d.whistleblower)
    first, _ = post(d, chain)
    past_retention(chain, settle(d, chain, first))
    second, _ = post(d, chain)
    assert second == job_id(1, 1)
    with reverts(d.manager, "UnknownJob", jobId=first):
        d.manager.keepRecord(first, sender=d.whistleblower)


def test_postJob_tooManySteps_reverts(deployment, chain):
    d = deployment
    steps = 2**32
    with reverts(d.manager, "TooManySteps", steps=steps, max=2**32 - 1):
        d.manager.postJob(
            job_params(now(chain), steps=steps, checkpointInterval=2), sender=d.submitter
        )


def test_postJob_recordsExhausted_reverts(deployment, chain):
    d = deployment
    post(d, chain)
    slot0 = load(chain, d.manager.address, 0)
    # every job id spent: _jobCount (bits 160..191) at 2^32 - 1
    store(chain, d.manager.address, 0, slot0 | (0xFFFFFFFF << 160))
    with reverts(d.manager, "RecordsExhausted"):
        d.manager.postJob(job_params(now(chain)), sender=d.submitter)
    # every recycled record spent: _recordCount (bits 192..223) at KEPT_RECORDS - 1, the cursor
    # on a live record (1: still Open)
    store(chain, d.manager.address, 0, slot0 | ((KEPT - 1) << 192))
    with reverts(d.manager, "RecordsExhausted"):
        d.manager.postJob(job_params(now(chain)), sender=d.submitter)


def test_postJob_aRecordOfTheLastGeneration_isRetired(deployment, chain):
    d = deployment
    first, _ = post(d, chain)
    deadline = settle(d, chain, first)
    slot = record_slot(1)
    store(chain, d.manager.address, slot, load(chain, d.manager.address, slot) | (0xFF << 152))
    assert d.manager.jobAt(1) == job_id(1, 255)
    past_retention(chain, deadline)
    second, _ = post(d, chain)
    assert second == job_id(2, 0)  # generation 255 is the last: record 1 takes no more jobs
    third, _ = post(d, chain)
    assert third == job_id(3, 0)  # and the cursor moved past it


def test_staleIds_readAsUnknown_andMoveNothing(staked, chain):
    d = staked
    job, unit = verifying(d, chain)
    v = d.manager.getVerifiers(unit)
    assert v
    advance(chain, MGR_CFG["verifyWindow"] + 2 * MGR_CFG["revealWindow"] + 1)
    d.manager.finalize(unit, sender=d.other)
    deadline = d.manager.getUnit(unit).deadline
    past_retention(chain, deadline)
    new_job, new_unit = post(d, chain)
    assert new_job == job_id(1, 1)
    m = d.manager
    assert [list(x) for x in m.getClaimants(unit)] == [[], []]
    assert m.getVerifiers(unit) == []
    assert tuple(m.verifierStatus(unit, v[0])) == (0, b"\x00" * 32)
    assert m.sampledSegments(unit, v[0]) == []
    assert m.publishedRootOf(unit) == b"\x00" * 32
    assert tuple(m.getDispute(unit)) == (0, "0x" + "00" * 20, 0)
    assert m.heldUntil(unit) == 0
    assert m.secretHashOf(unit, 0) == b"\x00" * 32
    assert m.collateralOf(job) == 0
    assert m.challengeBondOf(unit) == MGR_CFG["challengeBond"]
    assert tuple(m.payoutOf(job)) == (0, 0, 0)
    with reverts(m, "UnknownJob", jobId=job):
        m.verifierLockOf(job)
    # an action on the old id is refused as on an unknown unit, the new job untouched
    for call in (
        lambda: m.claim(unit, SECRET_HASH, sender=d.solvers[1]),
        lambda: m.closeClaims(unit, sender=d.other),
        lambda: m.finalize(unit, sender=d.other),
    ):
        with reverts(m, "WrongUnitStatus", unitId=unit, actual=0):
            call()
    with reverts(m, "UnknownJob", jobId=job):
        m.cancelJob(job, sender=d.submitter)
    assert m.getUnit(new_unit).status == U_OPEN
    d.registry.heartbeat(sender=d.solvers[1])
    m.claim(new_unit, SECRET_HASH, sender=d.solvers[1])  # the new job's id works


def test_getUnit_aReopenedUnit_showsNoEarlierAssignmentOrCommitment(staked, chain):
    d = staked
    _, unit = assign(d, chain)
    commit(d, chain, unit)
    chain.mine(1)
    d.manager.drawVerifiers(unit, sender=d.other)
    u = d.manager.getUnit(unit)
    assert u.assignee == d.solvers[0].address and u.checkpointRoot != b"\x00" * 32
    game = d.manager.challenge(unit, b"\x55" * 32, sender=d.whistleblower)
    gid = game.events.filter(d.manager.ChallengeOpened)[0].gameId
    challenger_wins(d, chain, gid)
    u = d.manager.getUnit(unit)
    assert u.status == U_OPEN and u.attempt == 1
    assert u.assignee == "0x" + "00" * 20 and u.assigneeIndex == 0 and u.assignSeed == 0
    assert u.checkpointRoot == b"\x00" * 32 and u.finalStateRoot == b"\x00" * 32
    assert u.seal == b"\x00" * 32 and u.seedBlock == 0 and u.verifySeed == 0


def test_cancelJob_showsNoCommitment(deployment, chain):
    d = deployment
    job, unit = post(d, chain)
    d.manager.cancelJob(job, sender=d.submitter)
    u = d.manager.getUnit(unit)
    assert u.status == U_CANCELLED and u.assignee == "0x" + "00" * 20
    assert d.manager.getJob(job).escrow == 0


def test_extension_calledDirectly_reverts(deployment, chain, project):
    d = deployment
    ext = project.JobManagerExtension.at(d.manager.extension())
    assert ext.manager() == d.manager.address
    assert ext.MAX_CLAIMANTS() == 16  # it is the extension
    job, _ = post(d, chain)
    with reverts(ext, "NotDelegated"):
        ext.cancelJob(job, sender=d.submitter)
    with reverts(ext, "NotDelegated"):
        ext.keepRecord(job, sender=d.other)
    # through the manager the same call works
    d.manager.cancelJob(job, sender=d.submitter)


def test_setExtension_deployerOnce_thisManagersOnly(deployment, project):
    """The extension is deployed for one manager (it reads that manager's registry, parameters
    and judge) and wired once by its deployer; until then the rare paths refuse to run."""
    d = deployment
    cfg = tuple(d.manager.config())
    fresh = d.deployer.deploy(project.JobManager, d.registry, cfg)
    with reverts(fresh, "ExtensionNotSet"):
        fresh.cancelJob(1 << 32, sender=d.submitter)
    assert fresh.extension() == ZERO
    with reverts(fresh, "ExtensionOfAnotherManager", extension=d.manager.extension(),
                 manager=d.manager.address):  # fmt: skip
        fresh.setExtension(d.manager.extension(), sender=d.deployer)
    ext = d.deployer.deploy(project.JobManagerExtension, fresh)
    assert ext.manager() == fresh.address
    with reverts(fresh, "NotDeployer", caller=d.other.address):
        fresh.setExtension(ext, sender=d.other)
    with reverts(fresh, "ZeroAddress"):
        fresh.setExtension(ZERO, sender=d.deployer)
    tx = fresh.setExtension(ext, sender=d.deployer)
    assert tx.events.filter(fresh.ExtensionSet)[0].extension == ext.address
    assert fresh.extension() == ext.address
    with reverts(fresh, "ExtensionAlreadySet", extension=ext.address):
        fresh.setExtension(ext, sender=d.deployer)


def test_courtConstructor_windowBeyondRetention_reverts(project, deployment):
    d = deployment
    with reverts(project.AttestationCourt, "WindowBeyondRetention", window=RETENTION + 1):
        d.deployer.deploy(
            project.AttestationCourt, d.manager, d.registry, 10 * E18, 20 * E18, 5_000,
            RETENTION + 1,
        )  # fmt: skip


def test_claim_onARecycledRecord_locksTheNewJobsCollateral(staked, chain):
    """The recycled record's old claimant list is not the new job's: counts start from zero."""
    d = staked
    first, first_unit = post(d, chain)
    d.manager.claim(first_unit, SECRET_HASH, sender=d.solvers[0])
    d.manager.claim(first_unit, SECRET_HASH, sender=d.solvers[1])
    deadline = settle(d, chain, first)
    past_retention(chain, deadline)
    for s in d.solvers:
        d.registry.heartbeat(sender=s)
    _, unit = post(d, chain, required=CAP)
    solvers, _ = d.manager.getClaimants(unit)
    assert solvers == []
    d.manager.claim(unit, SECRET_HASH, sender=d.solvers[1])  # not AlreadyClaimed
    assert d.manager.getClaimants(unit)[0] == [d.solvers[1].address]
    assert d.manager.secretHashOf(unit, 1) == b"\x00" * 32  # beyond the count: nothing
