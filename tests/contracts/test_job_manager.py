"""JobManager: every external function, its events and each revert path."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import (
    CAP,
    E18,
    FINAL,
    FINAL_PROOF,
    J_CANCELLED,
    J_COMPLETED,
    J_OPEN,
    MANAGER_FIELDS,
    MGR_CFG,
    REG_CFG,
    ROOT,
    SALT,
    SEAL,
    SECRET_HASH,
    SOLVER,
    U_ASSIGNED,
    U_CANCELLED,
    U_COMMITTED,
    U_DISPUTED,
    U_FINAL,
    U_OPEN,
    U_SELECTING,
    U_VERIFYING,
    V_ATTESTED,
    V_PENDING,
    V_SEALED,
    VERIFIER,
    advance,
    assign,
    attest,
    attestation_seal,
    by_address,
    challenger_wins,
    checkpoint_list,
    commit,
    deploy_protocol,
    job_params,
    now,
    post,
    reverts,
    seal_attestation,
    stake_nodes,
    verifying,
)
from eth_abi import encode as abi_encode
from eth_utils import keccak

from agents.core.deploy import DEFAULT_MANAGER_CONFIG
from agents.economics.detection import chain_sample
from agents.economics.forced import lazy_slash
from agents.economics.params import Protocol as EconProtocol
from agents.economics.params import reference_jobs
from agents.training.merkle import CHECKPOINT_DOMAIN, checkpoint_root, final_proof, list_proof

ZERO = "0x0000000000000000000000000000000000000000"
REWARD = 100 * E18
FEE = 10 * E18
TAX = REWARD * MGR_CFG["taxBps"] // 10_000
COLLATERAL = REWARD * MGR_CFG["collateralBps"] // 10_000
LOCK = MGR_CFG["verifierLock"]
BOND = MGR_CFG["challengeBond"]  # the floor of challengeBondOf
#: challengeBondOf of the default job: the challenger's share of the collateral
SCALED_BOND = COLLATERAL * MGR_CFG["challengerRewardBps"] // 10_000
VERIFY_WINDOW = MGR_CFG["verifyWindow"]


def _manager(project, d, registry: Any = None, **cfg: int) -> Any:
    """A fresh manager with its extension wired (and no arbiter)."""
    merged = dict(MGR_CFG, **cfg)
    manager = d.deployer.deploy(
        project.JobManager, registry or d.registry, tuple(merged[k] for k in MANAGER_FIELDS)
    )
    ext = d.deployer.deploy(project.JobManagerExtension, manager)
    manager.setExtension(ext, sender=d.deployer)
    return manager


def _selected(d, unit_id: int) -> list[Any]:
    return [by_address(d.verifiers, a) for a in d.manager.getVerifiers(unit_id)]


def _segments(d, unit_id: int, verifier: Any) -> list[int]:
    return list(d.manager.sampledSegments(unit_id, verifier))


# ------------------------------------------------------------------ constructor and wiring


def test_constructor_zeroRegistry_reverts(project, deployment):
    with reverts(deployment.manager, "ZeroAddress"):
        _manager(project, deployment, registry=ZERO)


@pytest.mark.parametrize(
    "bad",
    [
        {"taxBps": 10_000},
        {"challengerRewardBps": 10_001},
        {"claimWindow": 0},
        {"segmentsPerVerifier": 0},
    ],
)
def test_constructor_invalidConfig_reverts(project, deployment, bad):
    with reverts(deployment.manager, "InvalidConfig"):
        _manager(project, deployment, **bad)


def test_constructor_setsViews(deployment):
    d = deployment
    m = d.manager
    assert m.token() == d.token.address
    assert m.registry() == d.registry.address
    assert m.arbiter() == d.arbiter.address
    assert tuple(m.config()) == tuple(MGR_CFG[k] for k in MANAGER_FIELDS)
    assert m.jobCount() == 0 and m.jackpot() == 0
    assert m.MAX_CLAIMANTS() == 16


def test_setArbiter_notDeployer_reverts(project, deployment):
    m = _manager(project, deployment)
    with reverts(m, "NotDeployer", caller=deployment.other.address):
        m.setArbiter(deployment.arbiter, sender=deployment.other)


def test_setArbiter_twice_reverts(deployment):
    d = deployment
    with reverts(d.manager, "ArbiterAlreadySet", arbiter=d.arbiter.address):
        d.manager.setArbiter(d.other, sender=d.deployer)


def test_setArbiter_zero_reverts(project, deployment):
    m = _manager(project, deployment)
    with reverts(m, "ZeroAddress"):
        m.setArbiter(ZERO, sender=deployment.deployer)


def test_setArbiter_emits(project, deployment):
    m = _manager(project, deployment)
    tx = m.setArbiter(deployment.other, sender=deployment.deployer)
    assert tx.events.filter(m.ArbiterSet)[0].arbiter == deployment.other.address
    assert m.arbiter() == deployment.other.address


# ------------------------------------------------------------------ postJob


def test_postJob_escrowsAndEmits(deployment, chain):
    d = deployment
    before = d.token.balanceOf(d.submitter)
    params = job_params(now(chain))
    tx = d.manager.postJob(params, sender=d.submitter)
    ev = tx.events.filter(d.manager.JobPosted)[0]
    assert ev.jobId == 1 and ev.submitter == d.submitter.address and ev.unitCount == 1
    unit_id = d.manager.unitIdOf(1, 0)
    assert unit_id == 1 << 32
    assert d.manager.jobIdOf(unit_id) == 1
    # the first attempt opens with the job: JobPosted says until when (UnitOpened: re-openings)
    assert ev.params[8] == params[8] and not tx.events.filter(d.manager.UnitOpened)
    assert d.token.balanceOf(d.submitter) == before - REWARD
    assert d.token.balanceOf(d.manager) == REWARD
    job = d.manager.getJob(1)
    assert job.submitter == d.submitter.address and job.status == J_OPEN
    assert job.escrow == REWARD and job.reward == REWARD and job.verificationFee == FEE
    assert (job.steps, job.checkpointInterval, job.unitCount) == (8, 2, 1)
    assert (job.deviceClass, job.memoryMiB, job.throughput) == (1, 8_192, 50)
    assert job.specHash == b"\x01" * 32 and job.initialStateRoot == b"\x03" * 32
    # the dispute config is the job's from the posting transaction on (PROTOCOL §7.2)
    assert job.configHash == b"\x04" * 32 and ev.params[-1] == b"\x04" * 32
    unit = d.manager.getUnit(unit_id)
    assert unit.status == U_OPEN and unit.deadline == params[8]
    assert d.manager.jobCount() == 1
    assert d.manager.collateralOf(1) == COLLATERAL
    assert tuple(d.manager.payoutOf(1)) == (REWARD - FEE - TAX, FEE, TAX)


def test_postJob_arbiterNotSet_reverts(project, deployment, chain):
    m = _manager(project, deployment)
    with reverts(m, "ArbiterNotSet"):
        m.postJob(job_params(now(chain)), sender=deployment.submitter)


def test_postJob_zeroSteps_reverts(deployment, chain):
    with reverts(deployment.manager, "ZeroSteps"):
        post(deployment, chain, steps=0)


def test_postJob_zeroCheckpointInterval_reverts(deployment, chain):
    with reverts(deployment.manager, "ZeroCheckpointInterval"):
        post(deployment, chain, checkpointInterval=0)


def test_postJob_intervalNotDividingSteps_reverts(deployment, chain):
    with reverts(deployment.manager, "IntervalDoesNotDivideSteps", steps=10, checkpointInterval=4):
        post(deployment, chain, steps=10, checkpointInterval=4)


@pytest.mark.parametrize("field", ["specHash", "datasetRoot", "initialStateRoot"])
def test_postJob_zeroCommitment_reverts(deployment, chain, field):
    with reverts(deployment.manager, "ZeroCommitment"):
        post(deployment, chain, **{field: b"\x00" * 32})


def test_postJob_claimDeadlineInPast_reverts(deployment, chain):
    t = now(chain)
    with reverts(deployment.manager, "ClaimDeadlineInPast", claimDeadline=t - 1):
        post(deployment, chain, claimDeadline=t - 1)


def test_postJob_zeroComputeTime_reverts(deployment, chain):
    with reverts(deployment.manager, "ZeroComputeTime"):
        post(deployment, chain, computeTime=0)


def test_postJob_rewardBelowFees_reverts(deployment, chain):
    reward, fee = 10 * E18, 10 * E18
    fees = fee + reward * MGR_CFG["taxBps"] // 10_000
    with reverts(deployment.manager, "RewardBelowFees", reward=reward, fees=fees):
        post(deployment, chain, reward=reward, verificationFee=fee)


# ------------------------------------------------------------------ claim


def test_claim_locksCollateralAndRecords(staked, chain):
    d = staked
    _, unit_id = post(d, chain)
    tx = d.manager.claim(unit_id, SECRET_HASH, sender=d.solvers[0])
    ev = tx.events.filter(d.manager.UnitClaimed)[0]
    assert ev.unitId == unit_id and ev.solver == d.solvers[0].address
    assert ev.collateral == COLLATERAL and ev.weight == d.registry.selectionWeight(d.solvers[0])
    assert d.registry.getNode(d.solvers[0]).locked == COLLATERAL
    solvers, weights = d.manager.getClaimants(unit_id)
    assert list(solvers) == [d.solvers[0].address] and weights[0] == ev.weight


def test_claim_unknownUnit_reverts(staked):
    d = staked
    with reverts(d.manager, "WrongUnitStatus", unitId=5 << 32, expected=U_OPEN, actual=0):
        d.manager.claim(5 << 32, SECRET_HASH, sender=d.solvers[0])


def test_claim_afterWindow_reverts(staked, chain):
    d = staked
    _, unit_id = post(d, chain)
    advance(chain, 601)
    with reverts(d.manager, "ClaimWindowClosed", unitId=unit_id):
        d.manager.claim(unit_id, SECRET_HASH, sender=d.solvers[0])


def test_claim_twice_reverts(staked, chain):
    d = staked
    _, unit_id = post(d, chain)
    d.manager.claim(unit_id, SECRET_HASH, sender=d.solvers[0])
    with reverts(d.manager, "AlreadyClaimed", solver=d.solvers[0].address):
        d.manager.claim(unit_id, SECRET_HASH, sender=d.solvers[0])


def _new_nodes(d: Any, accounts: Any, n: int, role: int) -> list[Any]:
    """`n` fresh accounts, funded and registered as `role` with 100 tokens of stake each."""
    nodes = [accounts.generate_test_account() for _ in range(n)]
    for acct in nodes:
        d.deployer.transfer(acct, 10**18)
        d.token.mint(acct, 100 * E18, sender=d.deployer)
        d.token.approve(d.registry, 2**256 - 1, sender=acct)
        d.registry.register(role, CAP, 100 * E18, sender=acct)
    return nodes


def test_claim_tooManyClaimants_reverts(staked, chain, accounts):
    d = staked
    _, unit_id = post(d, chain, reward=20 * E18, verificationFee=E18)
    extra = _new_nodes(d, accounts, 14, SOLVER)
    for acct in [*d.solvers[:2], *extra]:
        d.manager.claim(unit_id, SECRET_HASH, sender=acct)
    with reverts(d.manager, "TooManyClaimants", max=16):
        d.manager.claim(unit_id, SECRET_HASH, sender=d.solvers[2])


def test_claim_notSolver_reverts(staked, chain):
    d = staked
    _, unit_id = post(d, chain)
    v = d.verifiers[0]
    with reverts(d.registry, "WrongRole", node=v.address, required=SOLVER, actual=VERIFIER):
        d.manager.claim(unit_id, SECRET_HASH, sender=v)


def test_claim_offline_reverts(staked, chain):
    d = staked
    _, unit_id = post(d, chain, claimDeadline=now(chain) + 2 * REG_CFG["heartbeatTtl"])
    advance(chain, REG_CFG["heartbeatTtl"] + 1)
    with reverts(d.registry, "NodeOffline", node=d.solvers[0].address):
        d.manager.claim(unit_id, SECRET_HASH, sender=d.solvers[0])
    d.registry.heartbeat(sender=d.solvers[0])
    d.manager.claim(unit_id, SECRET_HASH, sender=d.solvers[0])


def test_claim_capabilityTooLow_reverts(staked, chain):
    d = staked
    _, unit_id = post(d, chain, required=(2, 1, 1))
    with reverts(d.registry, "CapabilityTooLow", node=d.solvers[0].address):
        d.manager.claim(unit_id, SECRET_HASH, sender=d.solvers[0])


def test_claim_insufficientFreeStake_reverts(staked, chain):
    d = staked
    _, unit_id = post(d, chain, reward=300 * E18)
    with reverts(d.registry, "InsufficientFreeStake", free=200 * E18, amount=300 * E18):
        d.manager.claim(unit_id, SECRET_HASH, sender=d.solvers[0])


# ------------------------------------------------------------------ closeClaims, selectAssignee


def test_closeClaims_windowOpen_reverts(staked, chain):
    d = staked
    _, unit_id = post(d, chain)
    with reverts(d.manager, "ClaimWindowStillOpen", unitId=unit_id):
        d.manager.closeClaims(unit_id, sender=d.other)


def test_closeClaims_wrongStatus_reverts(staked, chain):
    d = staked
    _, unit_id = assign(d, chain)
    with reverts(d.manager, "WrongUnitStatus", expected=U_OPEN, actual=U_ASSIGNED):
        d.manager.closeClaims(unit_id, sender=d.other)


def test_closeClaims_noClaimant_extendsWindow(staked, chain):
    d = staked
    _, unit_id = post(d, chain)
    advance(chain, 601)
    tx = d.manager.closeClaims(unit_id, sender=d.other)
    ev = tx.events.filter(d.manager.ClaimWindowExtended)[0]
    assert ev.claimDeadline == chain.blocks.head.timestamp + MGR_CFG["claimWindow"]
    unit = d.manager.getUnit(unit_id)
    assert unit.status == U_OPEN and unit.deadline == ev.claimDeadline
    d.manager.claim(unit_id, SECRET_HASH, sender=d.solvers[0])


def test_closeClaims_fixesSeedBlock(staked, chain):
    d = staked
    _, unit_id = post(d, chain)
    d.manager.claim(unit_id, SECRET_HASH, sender=d.solvers[0])
    d.manager.claim(unit_id, SECRET_HASH, sender=d.solvers[1])
    advance(chain, 601)
    tx = d.manager.closeClaims(unit_id, sender=d.other)
    ev = tx.events.filter(d.manager.ClaimsClosed)[0]
    assert ev.seedBlock == tx.block_number + 1 and ev.claimants == 2
    assert d.manager.getUnit(unit_id).status == U_SELECTING
    # claims are over once the window closed
    with reverts(d.manager, "WrongUnitStatus", expected=U_OPEN, actual=U_SELECTING):
        d.manager.claim(unit_id, SECRET_HASH, sender=d.solvers[2])


def test_selectAssignee_wrongStatus_reverts(staked, chain):
    d = staked
    _, unit_id = post(d, chain)
    with reverts(d.manager, "WrongUnitStatus", expected=U_SELECTING, actual=U_OPEN):
        d.manager.selectAssignee(unit_id, sender=d.other)


def _closed(d, chain, claimants: list[Any]) -> int:
    _, unit_id = post(d, chain)
    for s in claimants:
        d.manager.claim(unit_id, SECRET_HASH, sender=s)
    advance(chain, 601)
    d.manager.closeClaims(unit_id, sender=d.other)
    return unit_id


def test_selectAssignee_seedNotYetAvailable_reverts(staked, chain):
    d = staked
    unit_id = _closed(d, chain, d.solvers[:2])
    seed_block = d.manager.getUnit(unit_id).seedBlock
    with reverts(d.manager, "SeedNotYetAvailable", unitId=unit_id, seedBlock=seed_block):
        d.manager.selectAssignee(unit_id, sender=d.other)


def test_selectAssignee_picksClaimantAndReleasesOthers(staked, chain):
    d = staked
    unit_id = _closed(d, chain, d.solvers)
    chain.mine(1)
    tx = d.manager.selectAssignee(unit_id, sender=d.other)
    ev = tx.events.filter(d.manager.UnitAssigned)[0]
    winner = ev.solver
    assert winner in {s.address for s in d.solvers}
    assert ev.commitDeadline == chain.blocks.head.timestamp + 3_600
    released = {e.solver for e in tx.events.filter(d.manager.ClaimReleased)}
    assert released == {s.address for s in d.solvers} - {winner}
    for s in d.solvers:
        assert d.registry.getNode(s).locked == (COLLATERAL if s.address == winner else 0)
    unit = d.manager.getUnit(unit_id)
    assert unit.status == U_ASSIGNED and unit.assignee == winner


def test_selectAssignee_staleSeed_rearms(staked, chain):
    d = staked
    unit_id = _closed(d, chain, d.solvers[:2])
    chain.mine(300)
    tx = d.manager.selectAssignee(unit_id, sender=d.other)
    ev = tx.events.filter(d.manager.SeedRearmed)[0]
    assert ev.seedBlock == tx.block_number + 1
    assert d.manager.getUnit(unit_id).status == U_SELECTING
    chain.mine(1)
    d.manager.selectAssignee(unit_id, sender=d.other)
    assert d.manager.getUnit(unit_id).status == U_ASSIGNED


# ------------------------------------------------------------------ expireAssignment


def test_expireAssignment_slashesAndReopens(staked, chain):
    d = staked
    _, unit_id = assign(d, chain)
    s = d.solvers[0]
    advance(chain, 3_601)
    tx = d.manager.expireAssignment(unit_id, sender=d.other)
    ev = tx.events.filter(d.manager.AssignmentExpired)[0]
    assert ev.solver == s.address and ev.slashed == COLLATERAL
    reopened = tx.events.filter(d.manager.UnitOpened)[0]
    assert reopened.attempt == 1
    node = d.registry.getNode(s)
    assert node.stake == 200 * E18 - COLLATERAL and node.locked == 0
    assert (node.failed, node.slashed) == (1, 1)
    assert d.manager.jackpot() == COLLATERAL
    assert d.token.balanceOf(d.manager) == REWARD + COLLATERAL
    unit = d.manager.getUnit(unit_id)
    assert unit.status == U_OPEN and unit.assignee == ZERO and unit.claimantCount == 0
    # the unit is claimable again by another (online) solver
    d.registry.heartbeat(sender=d.solvers[1])
    d.manager.claim(unit_id, SECRET_HASH, sender=d.solvers[1])


def test_expireAssignment_beforeDeadline_reverts(staked, chain):
    d = staked
    _, unit_id = assign(d, chain)
    with reverts(d.manager, "DeadlineNotPassed", unitId=unit_id):
        d.manager.expireAssignment(unit_id, sender=d.other)


def test_expireAssignment_wrongStatus_reverts(staked, chain):
    d = staked
    _, unit_id = post(d, chain)
    with reverts(d.manager, "WrongUnitStatus", expected=U_ASSIGNED, actual=U_OPEN):
        d.manager.expireAssignment(unit_id, sender=d.other)


# ------------------------------------------------------------------ commitCheckpoints


def test_commitCheckpoints_storesAndEmits(staked, chain):
    d = staked
    _, unit_id = assign(d, chain)
    tx = d.manager.commitCheckpoints(
        unit_id, ROOT, 5, FINAL, FINAL_PROOF, "blob://unit", SEAL, sender=d.solvers[0]
    )
    ev = tx.events.filter(d.manager.CheckpointsCommitted)[0]
    assert ev.checkpointRoot == ROOT and ev.numCheckpoints == 5
    assert ev.blobLocator == "blob://unit" and ev.seedBlock == tx.block_number + 1
    unit = d.manager.getUnit(unit_id)
    assert unit.status == U_COMMITTED and unit.checkpointRoot == ROOT
    assert unit.finalStateRoot == FINAL
    # the locator is only emitted: the view has no field for it
    assert unit.seal == SEAL
    assert "blobLocator" not in unit.__dict__ and len(unit) == 15


def test_commitCheckpoints_wrongStatus_reverts(staked, chain):
    d = staked
    _, unit_id = post(d, chain)
    with reverts(d.manager, "WrongUnitStatus", expected=U_ASSIGNED, actual=U_OPEN):
        commit(d, chain, unit_id)


def test_commitCheckpoints_notAssignee_reverts(staked, chain):
    d = staked
    _, unit_id = assign(d, chain)
    with reverts(d.manager, "NotAssignee", caller=d.solvers[1].address):
        commit(d, chain, unit_id, solver=d.solvers[1])


def test_commitCheckpoints_afterDeadline_reverts(staked, chain):
    d = staked
    _, unit_id = assign(d, chain)
    advance(chain, 3_601)
    with reverts(d.manager, "CommitDeadlinePassed", unitId=unit_id):
        commit(d, chain, unit_id)


def test_commitCheckpoints_wrongCount_reverts(staked, chain):
    d = staked
    _, unit_id = assign(d, chain)
    with reverts(d.manager, "WrongCheckpointCount", given=4, expected=5):
        d.manager.commitCheckpoints(
            unit_id, ROOT, 4, FINAL, FINAL_PROOF, "b", SEAL, sender=d.solvers[0]
        )


def test_commitCheckpoints_zeroRoot_reverts(staked, chain):
    d = staked
    _, unit_id = assign(d, chain)
    s = d.solvers[0]
    with reverts(d.manager, "ZeroCommitment"):
        d.manager.commitCheckpoints(
            unit_id, b"\x00" * 32, 5, FINAL, FINAL_PROOF, "b", SEAL, sender=s
        )
    with reverts(d.manager, "ZeroCommitment"):
        d.manager.commitCheckpoints(
            unit_id, ROOT, 5, b"\x00" * 32, FINAL_PROOF, "b", SEAL, sender=s
        )


def test_commitCheckpoints_emptyLocator_reverts(staked, chain):
    d = staked
    _, unit_id = assign(d, chain)
    with reverts(d.manager, "EmptyBlobLocator"):
        d.manager.commitCheckpoints(
            unit_id, ROOT, 5, FINAL, FINAL_PROOF, "", SEAL, sender=d.solvers[0]
        )


def test_commitCheckpoints_finalRootNotTheListsLast_reverts(staked, chain):
    """The finding of issue #38: an honest list and another final root (an earlier checkpoint's,
    which every verifier would agree with) is refused, as is a proof of the wrong entry or of
    another list; the unit stays Assigned, and the honest commitment then goes through."""
    d = staked
    _, unit_id = assign(d, chain)
    roots = [keccak(bytes([0x20]) + i.to_bytes(4, "big")) for i in range(5)]
    root = checkpoint_root(roots)
    earlier = list_proof(CHECKPOINT_DOMAIN, roots, 1)
    s = d.solvers[0]
    for final, proof in [
        (roots[1], earlier.siblings),  # entry 1 with its own (valid) proof: not the last entry
        (roots[1], final_proof(roots)),  # entry 1 with the last entry's path
        (b"\x77" * 32, final_proof(roots)),  # any other root
        (roots[4], final_proof(roots)[:-1]),  # the right root, a short proof
        (roots[4], final_proof([b"\x01" * 32, *roots[1:]])),  # the right root, another list's
    ]:
        with reverts(d.manager, "FinalRootNotLast", unitId=unit_id, finalStateRoot=final):
            d.manager.commitCheckpoints(unit_id, root, 5, final, proof, "b", SEAL, sender=s)
    assert d.manager.getUnit(unit_id).status == U_ASSIGNED
    d.manager.commitCheckpoints(unit_id, root, 5, roots[4], final_proof(roots), "b", SEAL, sender=s)
    assert d.manager.getUnit(unit_id).finalStateRoot == roots[4]


# ------------------------------------------------------------------ drawVerifiers


def test_drawVerifiers_selectsAndLocks(staked, chain):
    d = staked
    _, unit_id = assign(d, chain)
    commit(d, chain, unit_id)
    chain.mine(1)
    tx = d.manager.drawVerifiers(unit_id, sender=d.other)
    ev = tx.events.filter(d.manager.VerifiersDrawn)[0]
    drawn = list(ev.verifiers)
    assert 1 <= len(drawn) <= MGR_CFG["verifiersPerUnit"]
    assert len(set(drawn)) == len(drawn)
    assert set(drawn) <= {v.address for v in d.verifiers}
    assert ev.challengeDeadline == chain.blocks.head.timestamp + VERIFY_WINDOW
    assert list(d.manager.getVerifiers(unit_id)) == drawn
    for v in d.verifiers:
        selected = v.address in drawn
        assert d.registry.getNode(v).locked == (LOCK if selected else 0)
        status, _ = d.manager.verifierStatus(unit_id, v)
        assert status == (V_PENDING if selected else 0)
        segs = _segments(d, unit_id, v)
        assert len(segs) == MGR_CFG["segmentsPerVerifier"] and all(0 <= s < 4 for s in segs)
    unit = d.manager.getUnit(unit_id)
    assert unit.status == U_VERIFYING and unit.verifySeed == ev.seed


def test_drawVerifiers_wrongStatus_reverts(staked, chain):
    d = staked
    _, unit_id = assign(d, chain)
    with reverts(d.manager, "WrongUnitStatus", expected=U_COMMITTED, actual=U_ASSIGNED):
        d.manager.drawVerifiers(unit_id, sender=d.other)


def test_drawVerifiers_seedNotYetAvailable_reverts(staked, chain):
    d = staked
    _, unit_id = assign(d, chain)
    commit(d, chain, unit_id)
    with reverts(d.manager, "SeedNotYetAvailable", unitId=unit_id):
        d.manager.drawVerifiers(unit_id, sender=d.other)


def test_drawVerifiers_staleSeed_rearms(staked, chain):
    d = staked
    _, unit_id = assign(d, chain)
    commit(d, chain, unit_id)
    chain.mine(300)
    tx = d.manager.drawVerifiers(unit_id, sender=d.other)
    assert len(tx.events.filter(d.manager.SeedRearmed)) == 1
    assert d.manager.getUnit(unit_id).status == U_COMMITTED


def _committed(d: Any, chain) -> int:
    """A Committed unit whose seed block is in the past of the latest block (a call, run
    against the latest block, sees the seed's hash)."""
    _, unit_id = assign(d, chain)
    commit(d, chain, unit_id)
    chain.mine(2)
    return unit_id


def test_drawVerifiers_returnsTheDraw_soThatASimulationShowsIt(staked, chain):
    """A verifier learns whether it will be drawn by simulating drawVerifiers: the call returns
    the verifiers and the seed, the very ones the transaction then records."""
    d = staked
    unit_id = _committed(d, chain)
    simulated, seed = d.manager.drawVerifiers.call(unit_id, sender=d.other)
    assert simulated and seed & 1
    tx = d.manager.drawVerifiers(unit_id, sender=d.other)
    ev = tx.events.filter(d.manager.VerifiersDrawn)[0]
    assert list(ev.verifiers) == list(simulated) and ev.seed == seed


def test_sealAttestation_onCommitted_drawsTheVerifiersFirst(staked, chain):
    """The first verifier's answer draws the verifiers in its own transaction (PROTOCOL §6.5):
    the same draw as the keeper's drawVerifiers in that block, then its seal."""
    d = staked
    unit_id = _committed(d, chain)
    simulated, seed = d.manager.drawVerifiers.call(unit_id, sender=d.other)
    v = by_address(d.verifiers, simulated[0])
    attempt = d.manager.getUnit(unit_id).attempt
    types = ["uint256", "uint32", "address", "bytes32[]", "bytes32"]
    seal = keccak(abi_encode(types, [unit_id, attempt, v.address, ROOTS, SALT]))
    tx = d.manager.sealAttestation(unit_id, seal, sender=v)
    drawn = tx.events.filter(d.manager.VerifiersDrawn)[0]
    assert list(drawn.verifiers) == list(simulated) and drawn.seed == seed
    assert tx.events.filter(d.manager.AttestationSealed)[0].verifier == v.address
    unit = d.manager.getUnit(unit_id)
    assert unit.status == U_VERIFYING and unit.verifySeed == seed
    assert unit.deadline == chain.blocks.head.timestamp + VERIFY_WINDOW
    assert tuple(d.manager.verifierStatus(unit_id, v)) == (V_SEALED, seal)
    for a in simulated:
        assert d.registry.getNode(a).locked == LOCK
    # the segments the verifier replayed before the draw are the ones the chain now gives
    assert _segments(d, unit_id, v) == chain_sample(seed, v.address, 2, 4)


def test_attest_inTheClear_onCommitted_drawsTheVerifiersFirst(project, accounts, chain):
    """With one verifier per unit its one attestation, in the clear, draws it."""
    d = deploy_protocol(project, accounts, {**MGR_CFG, "verifiersPerUnit": 1})
    stake_nodes(d)
    unit_id = _committed(d, chain)
    (drawn,), _ = d.manager.drawVerifiers.call(unit_id, sender=d.other)
    v = by_address(d.verifiers, drawn)
    tx = d.manager.attest(unit_id, ROOTS, bytes(32), sender=v)
    assert list(tx.events.filter(d.manager.VerifiersDrawn)[0].verifiers) == [drawn]
    assert tx.events.filter(d.manager.Attested)[0].verifier == drawn
    assert d.manager.verifierStatus(unit_id, v)[0] == V_ATTESTED


def test_sealAttestation_onCommitted_notDrawn_revertsAndDrawsNothing(staked, chain):
    d = staked
    unit_id = _committed(d, chain)
    simulated, _ = d.manager.drawVerifiers.call(unit_id, sender=d.other)
    outsider = next(v for v in d.verifiers if v.address not in simulated)
    with reverts(d.manager, "NotSelectedVerifier", unitId=unit_id):
        d.manager.sealAttestation(unit_id, ROOT, sender=outsider)
    assert d.manager.getUnit(unit_id).status == U_COMMITTED


def test_sealAttestation_onCommitted_beforeTheSeedBlock_reverts(staked, chain):
    d = staked
    _, unit_id = assign(d, chain)
    commit(d, chain, unit_id)
    with reverts(d.manager, "SeedNotYetAvailable", unitId=unit_id):
        d.manager.sealAttestation(unit_id, ROOT, sender=d.verifiers[0])


def test_sealAttestation_onCommitted_seedExpired_revertsAndLeavesTheRearmToTheKeeper(staked, chain):
    """An answer never moves the seed: with its hash gone it reverts, and only drawVerifiers
    re-arms (a verifier that could re-arm by answering would pick among seeds)."""
    d = staked
    _, unit_id = assign(d, chain)
    commit(d, chain, unit_id)
    seed_block = d.manager.getUnit(unit_id).seedBlock
    chain.mine(300)
    with reverts(d.manager, "SeedExpired", unitId=unit_id, seedBlock=seed_block):
        d.manager.sealAttestation(unit_id, ROOT, sender=d.verifiers[0])
    assert d.manager.getUnit(unit_id).seedBlock == seed_block
    tx = d.manager.drawVerifiers(unit_id, sender=d.other)
    assert len(tx.events.filter(d.manager.SeedRearmed)) == 1


def _drawn(d: Any, unit_id: int) -> list[str]:
    tx = d.manager.drawVerifiers(unit_id, sender=d.other)
    return list(tx.events.filter(d.manager.VerifiersDrawn)[0].verifiers)


def test_drawVerifiers_joinsAndExitsAfterTheSeed_cannotSteerTheDraw(staked, chain, accounts):
    """Once the seed block exists its hash is public; nodes that join then (changing the pool's
    size, which the old draw used as its modulus) or exit must not change who is drawn."""
    d = staked
    _, unit_id = assign(d, chain)
    commit(d, chain, unit_id)
    chain.mine(1)
    snapshot = chain.snapshot()
    honest = _drawn(d, unit_id)
    assert honest
    chain.restore(snapshot)
    # An undrawn verifier exits (under swap-and-pop the last entry would take its index), then
    # six verifiers join: the first takes the dead entry, the others grow the pool (the modulus
    # of a draw over the live pool).
    idle = next(v for v in d.verifiers if v.address not in honest)
    d.registry.requestUnbond(100 * E18, sender=idle)
    _new_nodes(d, accounts, 6, VERIFIER)
    assert d.registry.poolSize(VERIFIER) == 8
    assert _drawn(d, unit_id) == honest


def test_drawVerifiers_emptyPool_drawsNobody(staked, chain):
    d = staked
    for v in d.verifiers:
        d.registry.requestUnbond(100 * E18, sender=v)
    assert not any(d.registry.poolAt(VERIFIER, i)[1] for i in range(3))
    _, unit_id = verifying(d, chain)
    assert list(d.manager.getVerifiers(unit_id)) == []
    assert d.manager.getUnit(unit_id).status == U_VERIFYING


# ------------------------------------------------------------------ sealAttestation and attest

ROOTS = [b"\x33" * 32, b"\x44" * 32]


def test_sealAttestation_recordsAndEmits(staked, chain):
    d = staked
    _, unit_id = verifying(d, chain)
    v = _selected(d, unit_id)[0]
    seal = attestation_seal(d, unit_id, v, ROOTS)
    tx = d.manager.sealAttestation(unit_id, seal, sender=v)
    ev = tx.events.filter(d.manager.AttestationSealed)[0]
    assert (ev.unitId, ev.verifier, ev.seal) == (unit_id, v.address, seal)
    assert tuple(d.manager.verifierStatus(unit_id, v)) == (V_SEALED, seal)
    assert d.manager.getUnit(unit_id).attestCount == 0  # sealed is not yet attested


def test_sealOf_matchesTheAgentsEncoding(staked, chain):
    d = staked
    _, unit_id = verifying(d, chain)
    v = _selected(d, unit_id)[0]
    attempt = d.manager.getUnit(unit_id).attempt
    expected = attestation_seal(d, unit_id, v, ROOTS, SALT)
    assert d.manager.sealOf(unit_id, attempt, v, ROOTS, SALT) == expected
    # it binds the verifier, the attempt and the salt
    assert d.manager.sealOf(unit_id, attempt, d.other, ROOTS, SALT) != expected
    assert d.manager.sealOf(unit_id, attempt + 1, v, ROOTS, SALT) != expected
    assert d.manager.sealOf(unit_id, attempt, v, ROOTS, b"\x01" * 32) != expected


def test_sealAttestation_wrongStatus_reverts(staked, chain):
    d = staked
    _, unit_id = assign(d, chain)
    with reverts(d.manager, "WrongUnitStatus", expected=U_VERIFYING, actual=U_ASSIGNED):
        d.manager.sealAttestation(unit_id, ROOT, sender=d.verifiers[0])


def test_sealAttestation_afterDeadline_reverts(staked, chain):
    d = staked
    _, unit_id = verifying(d, chain)
    v = _selected(d, unit_id)[0]
    advance(chain, VERIFY_WINDOW + 1)
    with reverts(d.manager, "ChallengeWindowClosed", unitId=unit_id):
        d.manager.sealAttestation(unit_id, ROOT, sender=v)


def test_sealAttestation_notSelected_reverts(staked, chain):
    d = staked
    _, unit_id = verifying(d, chain)
    with reverts(d.manager, "NotSelectedVerifier", caller=d.other.address):
        d.manager.sealAttestation(unit_id, ROOT, sender=d.other)


def test_sealAttestation_twice_reverts(staked, chain):
    d = staked
    _, unit_id = verifying(d, chain)
    v = _selected(d, unit_id)[0]
    seal_attestation(d, unit_id, v, ROOTS)
    with reverts(d.manager, "AlreadyResponded", verifier=v.address, status=V_SEALED):
        seal_attestation(d, unit_id, v, ROOTS, b"\x01" * 32)


def test_sealAttestation_zeroSeal_reverts(staked, chain):
    d = staked
    _, unit_id = verifying(d, chain)
    with reverts(d.manager, "ZeroCommitment"):
        d.manager.sealAttestation(unit_id, b"\x00" * 32, sender=_selected(d, unit_id)[0])


def test_attest_allSealed_opensAtOnce_recordsAndEmits(staked, chain):
    d = staked
    _, unit_id = verifying(d, chain)
    v, other = _selected(d, unit_id)
    seal_attestation(d, unit_id, v, ROOTS)
    seal_attestation(d, unit_id, other, [ROOT, ROOT])
    tx = d.manager.attest(unit_id, ROOTS, SALT, sender=v)  # inside the window: nobody to copy
    ev = tx.events.filter(d.manager.Attested)[0]
    assert ev.verifier == v.address and list(ev.endRoots) == ROOTS
    assert list(ev.segments) == _segments(d, unit_id, v)
    status, h = d.manager.verifierStatus(unit_id, v)
    assert status == V_ATTESTED and h == keccak(abi_encode(["bytes32[]"], [ROOTS]))
    assert d.manager.getUnit(unit_id).attestCount == 1


def test_attest_anotherStillUnsealed_revertsUntilTheDeadline(staked, chain):
    d = staked
    _, unit_id = verifying(d, chain)
    v, _ = _selected(d, unit_id)
    seal_attestation(d, unit_id, v, ROOTS)
    deadline = d.manager.getUnit(unit_id).deadline
    with reverts(d.manager, "RevealNotOpen", unitId=unit_id, deadline=deadline):
        d.manager.attest(unit_id, ROOTS, SALT, sender=v)
    advance(chain, VERIFY_WINDOW + 1)
    d.manager.attest(unit_id, ROOTS, SALT, sender=v)
    assert d.manager.verifierStatus(unit_id, v)[0] == V_ATTESTED


def test_attest_afterRevealWindow_reverts(staked, chain):
    d = staked
    _, unit_id = verifying(d, chain)
    v, _ = _selected(d, unit_id)
    seal_attestation(d, unit_id, v, ROOTS)
    deadline = d.manager.getUnit(unit_id).deadline
    advance(chain, VERIFY_WINDOW + MGR_CFG["revealWindow"] + 1)
    end = deadline + MGR_CFG["revealWindow"]
    with reverts(d.manager, "RevealWindowClosed", unitId=unit_id, revealDeadline=end):
        d.manager.attest(unit_id, ROOTS, SALT, sender=v)


def test_attest_withoutSeal_whileAnotherIsUnsealed_reverts(staked, chain):
    d = staked
    _, unit_id = verifying(d, chain)
    v = _selected(d, unit_id)[0]
    deadline = d.manager.getUnit(unit_id).deadline
    with reverts(d.manager, "RevealNotOpen", unitId=unit_id, deadline=deadline):
        d.manager.attest(unit_id, ROOTS, SALT, sender=v)
    advance(chain, VERIFY_WINDOW + 1)
    with reverts(d.manager, "ChallengeWindowClosed", unitId=unit_id, deadline=deadline):
        d.manager.attest(unit_id, ROOTS, SALT, sender=v)


def test_attest_lastToAnswer_attestsInTheClear(staked, chain):
    """Once every other drawn verifier is bound by its seal, the last one attests in one
    transaction (nobody is left to copy it); the sealed one then opens at once."""
    d = staked
    _, unit_id = verifying(d, chain)
    first, last = _selected(d, unit_id)
    seal_attestation(d, unit_id, first, [ROOT, ROOT])
    tx = d.manager.attest(unit_id, ROOTS, b"\x00" * 32, sender=last)
    assert list(tx.events.filter(d.manager.Attested)[0].endRoots) == ROOTS
    assert d.manager.verifierStatus(unit_id, last)[0] == V_ATTESTED
    d.manager.attest(unit_id, [ROOT, ROOT], SALT, sender=first)
    assert d.manager.getUnit(unit_id).attestCount == 2
    advance(chain, VERIFY_WINDOW + 1)
    d.manager.finalize(unit_id, sender=d.solvers[0])  # no seal left to open: no reveal window wait
    assert d.manager.credits(first) == d.manager.credits(last) == FEE // 2


def test_attest_lastToAnswer_afterTheWindow_reverts(staked, chain):
    d = staked
    _, unit_id = verifying(d, chain)
    first, last = _selected(d, unit_id)
    seal_attestation(d, unit_id, first, [ROOT, ROOT])
    advance(chain, VERIFY_WINDOW + 1)
    with reverts(d.manager, "ChallengeWindowClosed", unitId=unit_id):
        d.manager.attest(unit_id, ROOTS, SALT, sender=last)


def test_attest_notSelected_reverts(staked, chain):
    d = staked
    _, unit_id = verifying(d, chain)
    advance(chain, VERIFY_WINDOW + 1)
    with reverts(d.manager, "NotSelectedVerifier", caller=d.other.address):
        d.manager.attest(unit_id, ROOTS, SALT, sender=d.other)


def test_attest_twice_reverts(staked, chain):
    d = staked
    _, unit_id = verifying(d, chain)
    v = _selected(d, unit_id)[0]
    attest(d, chain, unit_id, [(v, ROOTS)])
    with reverts(d.manager, "NotSealed", verifier=v.address, status=V_ATTESTED):
        d.manager.attest(unit_id, ROOTS, SALT, sender=v)


def test_attest_otherRootsOrSalt_sealMismatch(staked, chain):
    d = staked
    _, unit_id = verifying(d, chain)
    v = _selected(d, unit_id)[0]
    seal = attestation_seal(d, unit_id, v, ROOTS)
    d.manager.sealAttestation(unit_id, seal, sender=v)
    advance(chain, VERIFY_WINDOW + 1)
    with reverts(d.manager, "AttestationSealMismatch", verifier=v.address, seal=seal):
        d.manager.attest(unit_id, [ROOT, ROOT], SALT, sender=v)
    with reverts(d.manager, "AttestationSealMismatch", verifier=v.address, seal=seal):
        d.manager.attest(unit_id, ROOTS, b"\x01" * 32, sender=v)


def test_attest_copiedSeal_cannotBeOpenedByTheCopier(staked, chain):
    """A lazy verifier that copies an honest one's seal cannot open it, even with the honest
    verifier's roots and salt once those are public: the seal binds the verifier's address."""
    d = staked
    _, unit_id = verifying(d, chain)
    honest, lazy = _selected(d, unit_id)
    seal = attestation_seal(d, unit_id, honest, ROOTS)
    d.manager.sealAttestation(unit_id, seal, sender=honest)
    d.manager.sealAttestation(unit_id, seal, sender=lazy)
    d.manager.attest(unit_id, ROOTS, SALT, sender=honest)
    with reverts(d.manager, "AttestationSealMismatch", verifier=lazy.address, seal=seal):
        d.manager.attest(unit_id, ROOTS, SALT, sender=lazy)


def test_attest_wrongLength_reverts(staked, chain):
    d = staked
    _, unit_id = verifying(d, chain)
    v = _selected(d, unit_id)[0]
    seal_attestation(d, unit_id, v, ROOTS)
    advance(chain, VERIFY_WINDOW + 1)
    with reverts(d.manager, "WrongAttestationLength", given=1, expected=2):
        d.manager.attest(unit_id, [ROOT], SALT, sender=v)


# ------------------------------------------------------------------ challenge and the dispute hook


def _challenge_paid(d, unit_id: int, challenger: Any, claim: bytes = b"\x55" * 32) -> tuple:
    """Challenge the unit; check the challenger paid exactly the quoted challengeBondOf and the
    event and the dispute record it: (the transaction, the bond)."""
    quoted = d.manager.challengeBondOf(unit_id)
    before = d.token.balanceOf(challenger)
    held = d.token.balanceOf(d.manager)
    tx = d.manager.challenge(unit_id, claim, sender=challenger)
    ev = tx.events.filter(d.manager.ChallengeOpened)[0]
    assert d.token.balanceOf(challenger) == before - quoted
    assert d.token.balanceOf(d.manager) == held + quoted
    assert ev.bond == quoted
    assert d.manager.getDispute(unit_id).bond == quoted
    return tx, quoted


def test_challenge_pullsBondAndOpensGame(staked, chain):
    d = staked
    _, unit_id = verifying(d, chain)
    v = _selected(d, unit_id)[0]
    claim = b"\x55" * 32
    tx, bond = _challenge_paid(d, unit_id, v, claim)
    # the default job: half its 100-token collateral, above the 10-token floor
    assert bond == SCALED_BOND == 50 * E18
    ev = tx.events.filter(d.manager.ChallengeOpened)[0]
    assert ev.challenger == v.address and ev.gameId == 1 and ev.bond == bond and ev.claim == claim
    game = tx.events.filter(d.arbiter.GameOpened)[0]
    assert game.unitId == unit_id and game.solver == d.solvers[0].address
    assert tuple(d.manager.getDispute(unit_id)) == (1, v.address, bond)
    assert d.manager.unitOfGame(1) == unit_id
    assert d.manager.getUnit(unit_id).status == U_DISPUTED
    # a challenge is public, so it is no verdict: the challenger must still seal and open
    assert d.manager.verifierStatus(unit_id, v)[0] == V_PENDING


def test_challengeBondOf_smallJob_isTheFloor(staked, chain):
    d = staked
    # collateral 15, half of it (7.5) under the 10-token floor
    job_id, unit_id = verifying(d, chain, reward=15 * E18, verificationFee=2 * E18)
    assert d.manager.collateralOf(job_id) == 15 * E18
    assert d.manager.challengeBondOf(unit_id) == BOND
    _, bond = _challenge_paid(d, unit_id, d.whistleblower)
    assert bond == BOND


def test_challengeBondOf_atTheFloor_isTheFlatBond(staked, chain):
    d = staked
    # collateral 20, half of it exactly the 10-token floor
    _, unit_id = post(d, chain, reward=20 * E18, verificationFee=2 * E18)
    assert d.manager.challengeBondOf(unit_id) == BOND
    _, unit_id = post(d, chain, reward=20 * E18 + 2, verificationFee=2 * E18)
    assert d.manager.challengeBondOf(unit_id) == BOND + 1


def test_challengeBondOf_largeJob_isTheChallengersReward(staked, chain):
    d = staked
    d.registry.addStake(300 * E18, sender=d.solvers[0])  # 500 staked: the collateral is 400
    job_id, unit_id = verifying(d, chain, reward=400 * E18, verificationFee=10 * E18)
    collateral = d.manager.collateralOf(job_id)
    assert collateral == 400 * E18
    share = collateral * MGR_CFG["challengerRewardBps"] // 10_000
    assert d.manager.challengeBondOf(unit_id) == share == 200 * E18
    _, bond = _challenge_paid(d, unit_id, d.whistleblower)
    assert bond == share


def test_challengeBondOf_rounding_matchesThePayout(project, deployment, chain):
    d = deployment
    # odd shares: the bond rounds down exactly as _slashAssignee's reward does
    m = _manager(project, d, collateralBps=3_333, challengerRewardBps=3_333, challengeBond=1)
    m.setArbiter(d.arbiter, sender=d.deployer)
    d.token.approve(m, 2**256 - 1, sender=d.submitter)
    tx = m.postJob(job_params(now(chain), reward=10**21 + 7), sender=d.submitter)
    job_id = tx.events.filter(m.JobPosted)[0].jobId
    collateral = m.collateralOf(job_id)
    assert collateral == (10**21 + 7) * 3_333 // 10_000
    assert m.challengeBondOf(m.unitIdOf(job_id, 0)) == collateral * 3_333 // 10_000


def test_challengeBondOf_unknownUnit_isTheFloor(staked):
    assert staked.manager.challengeBondOf(999 << 32) == BOND


def test_challenge_wrongStatus_reverts(staked, chain):
    d = staked
    _, unit_id = verifying(d, chain)
    d.manager.challenge(unit_id, b"\x55" * 32, sender=d.whistleblower)
    with reverts(d.manager, "WrongUnitStatus", expected=U_VERIFYING, actual=U_DISPUTED):
        d.manager.challenge(unit_id, b"\x56" * 32, sender=d.verifiers[0])


def test_challenge_afterDeadline_reverts(staked, chain):
    d = staked
    _, unit_id = verifying(d, chain)
    advance(chain, VERIFY_WINDOW + 1)
    with reverts(d.manager, "ChallengeWindowClosed", unitId=unit_id):
        d.manager.challenge(unit_id, b"\x55" * 32, sender=d.whistleblower)


def test_challenge_bySolverOrStranger_reverts(staked, chain):
    d = staked
    _, unit_id = verifying(d, chain)
    with reverts(d.manager, "NotChallenger", caller=d.solvers[0].address, role=SOLVER):
        d.manager.challenge(unit_id, b"\x55" * 32, sender=d.solvers[0])
    with reverts(d.manager, "NotChallenger", caller=d.other.address, role=0):
        d.manager.challenge(unit_id, b"\x55" * 32, sender=d.other)


def test_challenge_zeroClaim_reverts(staked, chain):
    d = staked
    _, unit_id = verifying(d, chain)
    with reverts(d.manager, "ZeroCommitment"):
        d.manager.challenge(unit_id, b"\x00" * 32, sender=d.whistleblower)


def test_challenge_claimEqualsCommitment_reverts(staked, chain):
    d = staked
    _, unit_id = verifying(d, chain)
    with reverts(d.manager, "ClaimMatchesCommitment", unitId=unit_id, claim=ROOT):
        d.manager.challenge(unit_id, ROOT, sender=d.whistleblower)


def test_onDisputeResolved_challengerWins_slashesAndReopens(staked, chain):
    d = staked
    _, unit_id = verifying(d, chain)
    selected = _selected(d, unit_id)
    seal_attestation(d, unit_id, selected[0], [ROOT, ROOT])
    start = d.token.balanceOf(d.whistleblower)
    _, bond = _challenge_paid(d, unit_id, d.whistleblower)
    assert bond == SCALED_BOND
    # forced errors are on (forcedErrorBps 500): the win is held for the reveal's slot, then
    # settled (test_settleDispute_*)
    tx = challenger_wins(d, chain, 1)
    ev = tx.events.filter(d.manager.DisputeResolved)[0]
    assert ev.unitId == unit_id and ev.gameId == 1 and ev.challengerWon
    reward = COLLATERAL * MGR_CFG["challengerRewardBps"] // 10_000
    assert d.manager.credits(d.whistleblower) == bond + reward
    assert d.manager.jackpot() == COLLATERAL - reward
    d.manager.withdraw(sender=d.whistleblower)
    # net of its bond, the challenger gained exactly the reward
    assert d.token.balanceOf(d.whistleblower) == start + reward
    node = d.registry.getNode(d.solvers[0])
    assert node.stake == 200 * E18 - COLLATERAL and node.locked == 0 and node.failed == 1
    for v in selected:
        assert d.registry.getNode(v).locked == 0
        assert d.manager.verifierStatus(unit_id, v)[0] == 0
    unit = d.manager.getUnit(unit_id)
    assert unit.status == U_OPEN and unit.attempt == 1 and unit.verifierCount == 0
    assert tuple(d.manager.getDispute(unit_id)) == (0, ZERO, 0)
    assert d.manager.unitOfGame(1) == 0
    assert d.manager.getJob(1).escrow == REWARD


def test_onDisputeResolved_zeroForcedBps_appliesAtOnce(project, accounts, chain):
    """With forcedErrorBps 0 no round is forced, so no reveal can void the dispute: the
    challenger's win applies when the game ends, nothing is held."""
    d = deploy_protocol(project, accounts, {**MGR_CFG, "forcedErrorBps": 0})
    stake_nodes(d)
    _, unit_id = verifying(d, chain)
    _, bond = _challenge_paid(d, unit_id, d.whistleblower)
    tx = d.arbiter.resolve(1, True, sender=d.other)
    assert tx.events.filter(d.manager.DisputeResultHeld) == []
    ev = tx.events.filter(d.manager.DisputeResolved)[0]
    assert ev.unitId == unit_id and ev.gameId == 1 and ev.challengerWon
    reward = COLLATERAL * MGR_CFG["challengerRewardBps"] // 10_000
    assert d.manager.credits(d.whistleblower) == bond + reward
    assert d.manager.getUnit(unit_id).status == U_OPEN
    assert tuple(d.manager.getDispute(unit_id)) == (0, ZERO, 0)


def test_onDisputeResolved_challengerWins_withForcedErrors_held(staked, chain):
    """The default deployment (forcedErrorBps 500): the same win is held for the reveal's slot
    (tests/contracts/test_forced_errors.py::test_settleDispute_*)."""
    d = staked
    _, unit_id = verifying(d, chain)
    d.manager.challenge(unit_id, b"\x55" * 32, sender=d.whistleblower)
    tx = d.arbiter.resolve(1, True, sender=d.other)
    assert tx.events.filter(d.manager.DisputeResolved) == []
    until = d.manager.getUnit(unit_id).deadline + 2 * MGR_CFG["revealWindow"]
    assert tx.events.filter(d.manager.DisputeResultHeld)[0].until == until
    assert d.manager.getUnit(unit_id).status == U_DISPUTED


def test_onDisputeResolved_solverWins_forfeitsBondAndResumes(staked, chain):
    d = staked
    _, unit_id = verifying(d, chain)
    v = _selected(d, unit_id)[0]
    _, bond = _challenge_paid(d, unit_id, v)
    assert bond == SCALED_BOND
    advance(chain, VERIFY_WINDOW - 60)
    tx = d.arbiter.resolve(1, False, sender=d.other)
    ev = tx.events.filter(d.manager.DisputeResolved)[0]
    assert not ev.challengerWon
    assert ev.challengeDeadline == chain.blocks.head.timestamp + MGR_CFG["disputeGrace"]
    # the solver is compensated from the recorded (scaled) bond: 25 tokens, not 5
    to_solver = bond * MGR_CFG["challengerRewardBps"] // 10_000
    assert to_solver == 25 * E18
    assert d.manager.credits(d.solvers[0]) == to_solver
    assert d.manager.jackpot() == bond - to_solver
    assert d.manager.credits(v) == 0
    unit = d.manager.getUnit(unit_id)
    assert unit.status == U_VERIFYING and unit.deadline == ev.challengeDeadline
    # the losing challenger still seals its attestation in the extended window
    seal_attestation(d, unit_id, v, ROOTS)
    assert d.manager.verifierStatus(unit_id, v)[0] == V_SEALED


@pytest.mark.parametrize("challenger_won", [True, False])
def test_onDisputeResolved_smallJob_paysFromTheFloorBond(staked, chain, challenger_won):
    d = staked
    job_id, unit_id = verifying(d, chain, reward=15 * E18, verificationFee=2 * E18)
    _, bond = _challenge_paid(d, unit_id, d.whistleblower)
    assert bond == BOND
    game = d.manager.getDispute(unit_id).gameId
    credits = d.manager.credits(d.whistleblower)
    solver_credits = d.manager.credits(d.solvers[0])
    jackpot = d.manager.jackpot()
    if challenger_won:
        challenger_wins(d, chain, game)
    else:
        d.arbiter.resolve(game, False, sender=d.other)
    collateral = d.manager.collateralOf(job_id)
    share = MGR_CFG["challengerRewardBps"]
    if challenger_won:
        reward = collateral * share // 10_000
        assert d.manager.credits(d.whistleblower) == credits + BOND + reward
        assert d.manager.jackpot() == jackpot + collateral - reward
    else:
        to_solver = BOND * share // 10_000
        assert d.manager.credits(d.solvers[0]) == solver_credits + to_solver
        assert d.manager.credits(d.whistleblower) == credits
        assert d.manager.jackpot() == jackpot + BOND - to_solver


def test_onDisputeResolved_notArbiter_reverts(staked, chain):
    d = staked
    with reverts(d.manager, "NotArbiter", caller=d.other.address):
        d.manager.onDisputeResolved(1, 1 << 32, True, sender=d.other)


def test_onDisputeResolved_unknownGame_reverts(project, staked, chain):
    d = staked
    m = _manager(project, d)
    m.setArbiter(d.other, sender=d.deployer)
    with reverts(m, "UnknownGame", gameId=7, unitId=1 << 32):
        m.onDisputeResolved(7, 1 << 32, True, sender=d.other)
    with reverts(m, "UnknownGame", gameId=7, unitId=0):
        m.onDisputeResolved(7, 0, True, sender=d.other)


# ------------------------------------------------------------------ fundJackpot


def test_fundJackpot_pullsAndEmits(staked, chain):
    d = staked
    d.token.mint(d.other, 5 * E18, sender=d.deployer)
    d.token.approve(d.manager, 5 * E18, sender=d.other)
    before = d.manager.jackpot(), d.token.balanceOf(d.manager)
    tx = d.manager.fundJackpot(5 * E18, sender=d.other)
    ev = tx.events.filter(d.manager.JackpotIncreased)[0]
    assert (ev.amount, ev.jackpot) == (5 * E18, before[0] + 5 * E18)
    assert d.manager.jackpot() == before[0] + 5 * E18
    assert d.token.balanceOf(d.manager) == before[1] + 5 * E18


def test_fundJackpot_zero_reverts(staked):
    with reverts(staked.manager, "ZeroAmount"):
        staked.manager.fundJackpot(0, sender=staked.other)


# ------------------------------------------------------------------ finalize


def test_finalize_paysAndPenalises(staked, chain):
    d = staked
    job_id, unit_id = verifying(d, chain)
    selected = _selected(d, unit_id)
    assert len(selected) >= 1
    attest(d, chain, unit_id, [(selected[0], [ROOT, ROOT])])
    advance(chain, VERIFY_WINDOW + 1)
    wallet = d.token.balanceOf(d.solvers[0])
    tx = d.manager.finalize(unit_id, sender=d.solvers[0])
    ev = tx.events.filter(d.manager.UnitFinalized)[0]
    assert ev.solver == d.solvers[0].address
    assert (ev.solverPay, ev.verifierFee, ev.tax) == (REWARD - FEE - TAX, FEE, TAX)
    assert len(tx.events.filter(d.manager.JobCompleted)) == 1
    # the solver finalizing its own unit is paid in that transaction, not credited
    assert d.token.balanceOf(d.solvers[0]) == wallet + REWARD - FEE - TAX
    assert d.manager.credits(d.solvers[0]) == 0
    assert d.manager.credits(selected[0]) == FEE
    silent = selected[1:]
    penalised = {e.verifier for e in tx.events.filter(d.manager.VerifierPenalised)}
    assert penalised == {v.address for v in silent}
    assert d.manager.jackpot() == TAX + LOCK * len(silent)
    for v in silent:
        node = d.registry.getNode(v)
        assert node.stake == 100 * E18 - LOCK and node.locked == 0 and node.failed == 1
    assert d.registry.getNode(selected[0]).locked == 0
    solver = d.registry.getNode(d.solvers[0])
    assert solver.locked == 0 and solver.completed == 1
    assert d.manager.getUnit(unit_id).status == U_FINAL
    job = d.manager.getJob(job_id)
    assert job.status == J_COMPLETED and job.escrow == 0 and job.unitsFinalized == 1


def test_finalize_byAnotherParty_creditsTheSolver(staked, chain):
    """Only the solver's own finalize pays it at once; a keeper's (after the reveal slot)
    credits it, to be pulled with withdraw."""
    d = staked
    _, unit_id = verifying(d, chain)
    advance(chain, VERIFY_WINDOW + 2 * MGR_CFG["revealWindow"] + 1)
    wallet = d.token.balanceOf(d.solvers[0])
    d.manager.finalize(unit_id, sender=d.other)
    assert d.manager.credits(d.solvers[0]) == REWARD - FEE - TAX
    assert d.token.balanceOf(d.solvers[0]) == wallet


def test_finalize_nobodyAttested_feeToJackpot(staked, chain):
    d = staked
    _, unit_id = verifying(d, chain)
    n = len(_selected(d, unit_id))
    advance(chain, VERIFY_WINDOW + 1)
    d.manager.finalize(unit_id, sender=d.solvers[0])
    assert d.manager.jackpot() == TAX + FEE + LOCK * n


def test_finalize_sealNeverOpened_awaitsTheRevealWindow_thenCountsAsSilence(staked, chain):
    d = staked
    _, unit_id = verifying(d, chain)
    opener, closed = _selected(d, unit_id)
    seal_attestation(d, unit_id, closed, [ROOT, ROOT])
    attest(d, chain, unit_id, [(opener, [ROOT, ROOT])])  # opens once both sealed
    deadline = d.manager.getUnit(unit_id).deadline
    advance(chain, VERIFY_WINDOW + 1)
    end = deadline + MGR_CFG["revealWindow"]
    with reverts(d.manager, "AwaitingReveals", unitId=unit_id, revealDeadline=end):
        d.manager.finalize(unit_id, sender=d.other)
    advance(chain, MGR_CFG["revealWindow"])
    # the solver may finalize now; anyone else leaves a forced round's reveal one more window
    slot_end = end + MGR_CFG["revealWindow"]
    with reverts(d.manager, "AwaitingReveals", unitId=unit_id, revealDeadline=slot_end):
        d.manager.finalize(unit_id, sender=d.other)
    tx = d.manager.finalize(unit_id, sender=d.solvers[0])
    penalised = tx.events.filter(d.manager.VerifierPenalised)
    assert [(e.verifier, e.amount) for e in penalised] == [(closed.address, LOCK)]
    assert d.manager.credits(opener) == FEE and d.manager.credits(closed) == 0
    node = d.registry.getNode(closed)
    assert node.stake == 100 * E18 - LOCK and node.locked == 0 and node.failed == 1


def test_finalize_beforeDeadline_reverts(staked, chain):
    d = staked
    _, unit_id = verifying(d, chain)
    with reverts(d.manager, "DeadlineNotPassed", unitId=unit_id):
        d.manager.finalize(unit_id, sender=d.other)


def test_finalize_duringDispute_reverts(staked, chain):
    d = staked
    _, unit_id = verifying(d, chain)
    d.manager.challenge(unit_id, b"\x55" * 32, sender=d.whistleblower)
    advance(chain, VERIFY_WINDOW + 1)
    with reverts(d.manager, "WrongUnitStatus", expected=U_VERIFYING, actual=U_DISPUTED):
        d.manager.finalize(unit_id, sender=d.other)


# ------------------------------------------------------------------ cancelJob


def test_cancelJob_refundsAndReleasesClaimants(staked, chain):
    d = staked
    job_id, unit_id = post(d, chain)
    d.manager.claim(unit_id, SECRET_HASH, sender=d.solvers[0])
    tx = d.manager.cancelJob(job_id, sender=d.submitter)
    ev = tx.events.filter(d.manager.JobCancelled)[0]
    assert ev.jobId == job_id and ev.refund == REWARD
    assert d.manager.credits(d.submitter) == REWARD
    assert d.registry.getNode(d.solvers[0]).locked == 0
    assert d.manager.getJob(job_id).status == J_CANCELLED
    assert d.manager.getUnit(unit_id).status == U_CANCELLED


def test_cancelJob_whileSelecting_refunds(staked, chain):
    d = staked
    job_id, unit_id = post(d, chain)
    d.manager.claim(unit_id, SECRET_HASH, sender=d.solvers[0])
    d.manager.claim(unit_id, SECRET_HASH, sender=d.solvers[1])
    advance(chain, 601)
    d.manager.closeClaims(unit_id, sender=d.other)
    d.manager.cancelJob(job_id, sender=d.submitter)
    assert d.manager.credits(d.submitter) == REWARD
    assert d.registry.getNode(d.solvers[0]).locked == 0
    assert d.registry.getNode(d.solvers[1]).locked == 0


def test_cancelJob_unknownJob_reverts(staked):
    d = staked
    with reverts(d.manager, "UnknownJob", jobId=42):
        d.manager.cancelJob(42, sender=d.submitter)


def test_cancelJob_notSubmitter_reverts(staked, chain):
    d = staked
    job_id, _ = post(d, chain)
    with reverts(d.manager, "NotSubmitter", jobId=job_id, caller=d.other.address):
        d.manager.cancelJob(job_id, sender=d.other)


def test_cancelJob_twice_reverts(staked, chain):
    d = staked
    job_id, _ = post(d, chain)
    d.manager.cancelJob(job_id, sender=d.submitter)
    with reverts(d.manager, "JobNotOpen", jobId=job_id, status=J_CANCELLED):
        d.manager.cancelJob(job_id, sender=d.submitter)


def test_cancelJob_afterAssignment_reverts(staked, chain):
    d = staked
    job_id, unit_id = assign(d, chain)
    with reverts(d.manager, "WrongUnitStatus", expected=U_OPEN, actual=U_ASSIGNED):
        d.manager.cancelJob(job_id, sender=d.submitter)


# ------------------------------------------------------------------ withdraw


def test_withdraw_paysCreditOnce(staked, chain):
    d = staked
    job_id, _ = post(d, chain)
    d.manager.cancelJob(job_id, sender=d.submitter)
    before = d.token.balanceOf(d.submitter)
    tx = d.manager.withdraw(sender=d.submitter)
    assert tx.events.filter(d.manager.Withdrawn)[0].amount == REWARD
    assert d.token.balanceOf(d.submitter) == before + REWARD
    assert d.manager.credits(d.submitter) == 0
    with reverts(d.manager, "NothingToWithdraw", account=d.submitter.address):
        d.manager.withdraw(sender=d.submitter)


def test_withdraw_thenCreditedAgain_owesExactlyTheNewCredit(staked, chain):
    # a withdrawal leaves the credit slot live (Credits.sol stores 1 + what is owed)
    d = staked
    job_id, _ = post(d, chain)
    d.manager.cancelJob(job_id, sender=d.submitter)
    d.manager.withdraw(sender=d.submitter)
    job_id, _ = post(d, chain)
    tx = d.manager.cancelJob(job_id, sender=d.submitter)
    assert tx.events.filter(d.manager.Credited)[0].balance == REWARD
    assert d.manager.credits(d.submitter) == REWARD
    before = d.token.balanceOf(d.submitter)
    assert d.manager.withdraw(sender=d.submitter).events.filter(d.manager.Withdrawn)[0].amount == (
        REWARD
    )
    assert d.token.balanceOf(d.submitter) == before + REWARD
    with reverts(d.manager, "NothingToWithdraw", account=d.submitter.address):
        d.manager.withdraw(sender=d.submitter)


def test_withdraw_nothing_reverts(staked):
    d = staked
    with reverts(d.manager, "NothingToWithdraw", account=d.other.address):
        d.manager.withdraw(sender=d.other)


# ------------------------------------------------------------------ views


def test_sampledSegments_beforeDraw_isEmpty(staked, chain):
    d = staked
    _, unit_id = assign(d, chain)
    assert list(d.manager.sampledSegments(unit_id, d.verifiers[0])) == []


@pytest.fixture(scope="module")
def wide(project, accounts) -> Any:
    """A deployment whose verifiers replay m = 46 segments (the large job's, PROTOCOL §8)."""
    d = deploy_protocol(project, accounts, {**MGR_CFG, "segmentsPerVerifier": 46})
    stake_nodes(d)
    return d


def test_sampledSegments_distinctInRange_matchMirror(wide, chain):
    """min(m, n) distinct segments in [0, n), exactly what the Python mirror computes, for every
    asked verifier of units with n below, at and above m = 46 (m >= n: all the segments)."""
    d = wide
    m = 46
    askers = [*(a.address for a in d.verifiers), *(f"0x{i:040x}" for i in range(1, 31))]
    for n in (1, 2, 7, 46, 47, 120, 1000):
        job = {"steps": 2 * n, "checkpointInterval": 2, "reward": 10 * E18, "verificationFee": E18}
        d.registry.heartbeat(sender=d.solvers[0])  # the chain clock moves on between units
        _, unit_id = assign(d, chain, **job)
        root, final, proof = checkpoint_list(n + 1)
        d.manager.commitCheckpoints(
            unit_id, root, n + 1, final, proof, "blob://unit", SEAL, sender=d.solvers[0]
        )
        chain.mine(1)
        for v in d.verifiers:
            d.registry.heartbeat(sender=v)
        d.manager.drawVerifiers(unit_id, sender=d.other)
        seed = d.manager.getUnit(unit_id).verifySeed
        for who in askers:
            segs = list(d.manager.sampledSegments(unit_id, who))
            assert len(segs) == min(m, n)
            assert len(set(segs)) == len(segs), (n, who, segs)
            assert all(0 <= s < n for s in segs)
            assert segs == chain_sample(seed, who, m, n)
            if n <= m:
                assert sorted(segs) == list(range(n))


# ------------------------------------------------------------------ the lazy-slash verifier lock


@pytest.fixture(scope="module")
def lazy(project, accounts) -> Any:
    """The deployment defaults' lazy-slash lock (lazySlashFactor 68): the default job's S is
    88 * 3 * 68 / 4 = 4 488 tokens, so the verifiers stake 5 100."""
    d = deploy_protocol(project, accounts, {**MGR_CFG, "lazySlashFactor": LAZY_FACTOR})
    stake_nodes(d)
    for v in d.verifiers:
        d.registry.addStake(5_000 * E18, sender=v)
    return d


LAZY_FACTOR = DEFAULT_MANAGER_CONFIG["lazySlashFactor"]
LAZY_LOCK = (REWARD - FEE - TAX) * 3 * LAZY_FACTOR // 4  # m' = 2 of n = 4 segments


def test_verifierLockOf_isTheLazySlashFormula(lazy, chain):
    d = lazy
    assert LAZY_FACTOR == 68 and LAZY_LOCK == 4_488 * E18
    cases = [
        ({}, LAZY_LOCK),
        # n = 1: m' = min(2, 1) = 1
        ({"steps": 2}, (REWARD - FEE - TAX) * 1 * 68 // 1),
        # n = 1000 and a small reward: the formula (0.18 tokens) is below the floor verifierLock
        ({"steps": 2_000, "reward": E18, "verificationFee": E18 // 10}, LOCK),
    ]
    for overrides, want in cases:
        job_id, _ = post(d, chain, **overrides)
        assert d.manager.verifierLockOf(job_id) == want, overrides
    assert d.manager.config().lazySlashFactor == 68


def test_verifierLockOf_equalsTheIncentiveModel(project, lazy, chain):
    """The chain's S for the two reference jobs of docs/INCENTIVES.md §4 is the model's
    `forced.lazy_slash` (digits 143.82, large 5 672.85 tokens)."""
    d = lazy
    for job, _ in reference_jobs():
        m = _manager(project, d, segmentsPerVerifier=job.segments_per_verifier, lazySlashFactor=68)
        m.setArbiter(d.arbiter, sender=d.deployer)
        d.token.approve(m, 2**256 - 1, sender=d.submitter)
        params = {
            "steps": job.steps,
            "checkpointInterval": job.interval,
            "reward": int(job.reward * E18),
            "verificationFee": round(job.fee * 10**6) * 10**12,  # the model's fee, 6 decimals
        }
        m.postJob(job_params(now(chain), **params), sender=d.submitter)
        want = lazy_slash(job, EconProtocol())
        assert m.verifierLockOf(1) / E18 == pytest.approx(want, rel=1e-12), job.name


def test_drawVerifiers_locksS_andSkipsVerifiersThatCannotCoverIt(lazy, chain):
    d = lazy
    short = d.verifiers[2]
    d.registry.requestUnbond(5_000 * E18, sender=short)  # 100 free: less than S
    _, unit_id = assign(d, chain)
    commit(d, chain, unit_id)
    chain.mine(1)
    tx = d.manager.drawVerifiers(unit_id, sender=d.other)
    drawn = list(tx.events.filter(d.manager.VerifiersDrawn)[0].verifiers)
    assert drawn and short.address not in drawn
    locked = tx.events.filter(d.registry.StakeLocked)
    assert [(e.node, e.amount) for e in locked] == [(v, LAZY_LOCK) for v in drawn]
    for v in d.verifiers:
        assert d.registry.getNode(v).locked == (LAZY_LOCK if v.address in drawn else 0)


def test_finalize_silentVerifierLosesS_attesterGetsSBack(lazy, chain):
    d = lazy
    _, unit_id = verifying(d, chain)
    attester, silent = _selected(d, unit_id)
    attest(d, chain, unit_id, [(attester, [ROOT, ROOT])])
    stake = d.registry.getNode(silent).stake
    jackpot = d.manager.jackpot()
    advance(chain, VERIFY_WINDOW + 1)
    tx = d.manager.finalize(unit_id, sender=d.solvers[0])
    penalised = tx.events.filter(d.manager.VerifierPenalised)
    assert [(e.verifier, e.amount) for e in penalised] == [(silent.address, LAZY_LOCK)]
    assert d.manager.jackpot() == jackpot + TAX + LAZY_LOCK  # the attester took the whole fee
    assert d.registry.getNode(silent).stake == stake - LAZY_LOCK
    assert d.registry.getNode(silent).locked == 0
    released = tx.events.filter(d.registry.StakeReleased)
    assert (attester.address, LAZY_LOCK) in [(e.node, e.amount) for e in released]
    assert d.registry.getNode(attester).locked == 0


def test_onDisputeResolved_challengerWins_releasesS(lazy, chain):
    d = lazy
    _, unit_id = verifying(d, chain)
    selected = _selected(d, unit_id)
    d.manager.challenge(unit_id, b"\x55" * 32, sender=d.whistleblower)
    tx = challenger_wins(d, chain, 1)
    released = [(e.node, e.amount) for e in tx.events.filter(d.registry.StakeReleased)]
    for v in selected:
        assert (v.address, LAZY_LOCK) in released
        assert d.registry.getNode(v).locked == 0


def test_unitIdOf_indexTooLarge_reverts(staked):
    d = staked
    with reverts(d.manager, "UnitIndexTooLarge", index=2**32):
        d.manager.unitIdOf(1, 2**32)
