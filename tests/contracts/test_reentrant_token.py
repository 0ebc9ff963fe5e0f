"""A payment token with transfer callbacks (ERC-777-style) cannot be used to re-enter the
market: an attacker contract paid by `JobManager.withdraw`, `NodeRegistry.withdrawUnbonded` or
(as the solver) `JobManager.finalize` tries, from inside the token's hook, to call the same
function again. The re-entry reverts,
the attacker receives exactly what it was owed once, and both contracts' books still balance
(token balance == what they owe)."""

from __future__ import annotations

import pytest
from conftest import (
    CAP,
    E18,
    FINAL,
    FINAL_PROOF,
    MANAGER_FIELDS,
    MGR_CFG,
    REG_CFG,
    REGISTRY_FIELDS,
    ROOT,
    SEAL,
    SECRET_HASH,
    SOLVER,
    advance,
    job_params,
    now,
)
from eth_utils import keccak

REENTRANT_CALL = keccak(text="ReentrancyGuardReentrantCall()")[:4]


@pytest.fixture(scope="module")
def market(project, accounts):
    deployer = accounts[0]
    token = deployer.deploy(project.ReentrantToken)
    registry = deployer.deploy(
        project.NodeRegistry, token, tuple(REG_CFG[k] for k in REGISTRY_FIELDS)
    )
    manager = deployer.deploy(
        project.JobManager, registry, tuple(MGR_CFG[k] for k in MANAGER_FIELDS)
    )
    manager.setExtension(deployer.deploy(project.JobManagerExtension, manager), sender=deployer)
    arbiter = deployer.deploy(project.MockArbiter)
    registry.setSlashers([manager], sender=deployer)
    arbiter.wire(manager, sender=deployer)
    manager.setArbiter(arbiter, sender=deployer)
    attacker = deployer.deploy(project.ReentrantAttacker)
    token.mint(attacker, 1_000 * E18, sender=deployer)
    for spender in (manager, registry):
        attacker.exec(token, token.approve.encode_input(spender, 2**256 - 1), sender=deployer)
    attacker.exec(token, token.setHook.encode_input(True), sender=deployer)
    return token, registry, manager, attacker, deployer


def _attack(attacker, target, fn_name: str, deployer) -> None:
    call = getattr(target, fn_name).encode_input()
    attacker.arm(target, call, sender=deployer)
    attacker.exec(target, call, sender=deployer)


def test_withdraw_reentered_from_the_token_hook_pays_once(market, chain):
    token, _, manager, attacker, deployer = market
    # the attacker is owed a refund: it posts a job and cancels it
    params = job_params(now(chain), reward=100 * E18, verificationFee=10 * E18)
    attacker.exec(manager, manager.postJob.encode_input(params), sender=deployer)
    # a contract's job gets a kept record (PROTOCOL §6.10): the first one
    job_id = manager.KEPT_RECORDS() + 1
    assert manager.getJob(job_id).submitter == attacker.address
    attacker.exec(manager, manager.cancelJob.encode_input(job_id), sender=deployer)
    owed = manager.credits(attacker)
    assert owed == 100 * E18
    before = token.balanceOf(attacker)
    _attack(attacker, manager, "withdraw", deployer)
    assert attacker.attempts() == 1
    assert attacker.reentered() is False
    assert bytes(attacker.lastError())[:4] == REENTRANT_CALL
    assert token.balanceOf(attacker) - before == owed  # paid exactly once
    assert manager.credits(attacker) == 0
    assert token.balanceOf(manager) == manager.jackpot()  # nothing else is owed


def test_withdraw_unbonded_reentered_from_the_token_hook_pays_once(market, chain):
    token, registry, _, attacker, deployer = market
    stake = 200 * E18
    attacker.exec(registry, registry.register.encode_input(SOLVER, CAP, stake), sender=deployer)
    attacker.exec(registry, registry.requestUnbond.encode_input(stake), sender=deployer)
    advance(chain, REG_CFG["unbondingDelay"] + 1)
    before = token.balanceOf(attacker)
    _attack(attacker, registry, "withdrawUnbonded", deployer)
    assert attacker.reentered() is False
    assert bytes(attacker.lastError())[:4] == REENTRANT_CALL
    assert token.balanceOf(attacker) - before == stake
    assert registry.getNode(attacker).unbonding == 0
    assert token.balanceOf(registry) == 0  # the only node left with nothing staked


WRONG_UNIT_STATUS = keccak(text="WrongUnitStatus(uint256,uint8,uint8)")[:4]


def test_finalize_reentered_from_the_token_hook_pays_the_solver_once(market, chain, accounts):
    """The solver that finalizes its own unit is paid in that transaction (PROTOCOL §6.7), and
    finalize has no reentrancy guard: its payment is its last step. A solver contract whose
    token hook re-enters finalize from inside the payment finds the unit Finalized, and is paid
    once; the books still balance."""
    token, registry, manager, attacker, deployer = market
    submitter = accounts[1]
    token.mint(submitter, 1_000 * E18, sender=deployer)
    token.approve(manager, 2**256 - 1, sender=submitter)
    stake = registry.register.encode_input(SOLVER, CAP, 200 * E18)
    attacker.exec(registry, stake, sender=deployer)  # the attacker is the solver
    tx = manager.postJob(job_params(now(chain)), sender=submitter)
    job_id = tx.events.filter(manager.JobPosted)[0].jobId
    unit = manager.unitIdOf(job_id, 0)
    attacker.exec(manager, manager.claim.encode_input(unit, SECRET_HASH), sender=deployer)
    advance(chain, 601)
    manager.closeClaims(unit, sender=deployer)
    chain.mine(1)
    manager.selectAssignee(unit, sender=deployer)
    commit = manager.commitCheckpoints.encode_input(
        unit, ROOT, 5, FINAL, FINAL_PROOF, "blob://unit", SEAL
    )
    attacker.exec(manager, commit, sender=deployer)
    chain.mine(1)
    manager.drawVerifiers(unit, sender=deployer)  # no verifier registered: none drawn
    advance(chain, MGR_CFG["verifyWindow"] + 1)
    pay = manager.payoutOf(job_id)[0]
    before = token.balanceOf(attacker)
    call = manager.finalize.encode_input(unit)
    attacker.arm(manager, call, sender=deployer)
    attacker.exec(manager, call, sender=deployer)
    assert attacker.attempts() == 1 and attacker.reentered() is False
    assert bytes(attacker.lastError())[:4] == WRONG_UNIT_STATUS
    assert token.balanceOf(attacker) - before == pay  # paid exactly once
    assert manager.credits(attacker) == 0
    assert manager.getUnit(unit).status == 7  # Finalized
    owed = manager.jackpot() + sum(manager.credits(a) for a in (submitter, attacker))
    assert token.balanceOf(manager) == owed  # nothing else is owed
