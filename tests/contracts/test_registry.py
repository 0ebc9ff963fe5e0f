"""NodeRegistry: every external function, its events and each revert path."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import (
    CAP,
    E18,
    REG_CFG,
    REGISTRY_FIELDS,
    SOLVER,
    VERIFIER,
    WHISTLEBLOWER,
    advance,
    reverts,
)
from eth_abi import encode as abi_encode
from eth_utils import keccak
from hexbytes import HexBytes

ZERO = "0x0000000000000000000000000000000000000000"
ALL = 2**64 - 1  # a `joinedBefore` block no entry reaches: every entry counts


def _entry(reg: Any, role: int, index: int) -> tuple[str, int, int, bool]:
    """`poolAt` flattened: (node, addedBlock, joinedBlock, live)."""
    (node, added, joined), live = reg.poolAt(role, index)
    return node, added, joined, live


def _pool(reg: Any, role: int) -> list[tuple[str, bool]]:
    """(node, live) of every entry of `role`'s pool, in index order."""
    return [_entry(reg, role, i)[::3] for i in range(reg.poolSize(role))]


def _registry(project, deployer, token, **cfg: int) -> Any:
    merged = dict(REG_CFG, **cfg)
    return deployer.deploy(project.NodeRegistry, token, tuple(merged[k] for k in REGISTRY_FIELDS))


def _eoa_slasher_registry(project, d) -> Any:
    """A registry whose slasher is the `other` EOA, so lock/release/slash can be driven directly."""
    reg = _registry(project, d.deployer, d.token)
    reg.setSlashers([d.other], sender=d.deployer)
    for acct in (*d.solvers, *d.verifiers):
        d.token.approve(reg, 2**256 - 1, sender=acct)
    return reg


# ------------------------------------------------------------------ constructor and wiring


def test_constructor_zeroToken_reverts(project, deployment):
    d = deployment
    with reverts(d.registry, "ZeroToken"):
        _registry(project, d.deployer, ZERO)


def test_constructor_setsConfig(deployment):
    r = deployment.registry
    assert r.token() == deployment.token.address
    assert r.minStake(SOLVER) == REG_CFG["minSolverStake"]
    assert r.minStake(VERIFIER) == REG_CFG["minVerifierStake"]
    assert r.minStake(WHISTLEBLOWER) == REG_CFG["minWhistleblowerStake"]
    assert r.minStake(0) == 0
    assert r.unbondingDelay() == REG_CFG["unbondingDelay"]
    assert r.heartbeatTtl() == REG_CFG["heartbeatTtl"]
    assert r.isSlasher(deployment.manager)
    assert not r.isSlasher(deployment.other)


def test_setSlashers_notDeployer_reverts(project, deployment):
    d = deployment
    reg = _registry(project, d.deployer, d.token)
    with reverts(reg, "NotDeployer", caller=d.other.address):
        reg.setSlashers([d.other], sender=d.other)


def test_setSlashers_twice_reverts(deployment):
    d = deployment
    with reverts(d.registry, "SlashersAlreadySet"):
        d.registry.setSlashers([d.other], sender=d.deployer)


def test_setSlashers_zeroAddress_reverts(project, deployment):
    d = deployment
    reg = _registry(project, d.deployer, d.token)
    with reverts(reg, "ZeroSlasher", index=1):
        reg.setSlashers([d.other, ZERO], sender=d.deployer)


def test_setSlashers_emitsAndAuthorises(project, deployment):
    d = deployment
    reg = _registry(project, d.deployer, d.token)
    tx = reg.setSlashers([d.other, d.submitter], sender=d.deployer)
    assert len(tx.events.filter(reg.SlashersSet)) == 1
    assert reg.isSlasher(d.other) and reg.isSlasher(d.submitter)


# ------------------------------------------------------------------ register


def test_register_pullsStakeAndEmits(deployment, chain):
    d = deployment
    s = d.solvers[0]
    before = d.token.balanceOf(s)
    tx = d.registry.register(SOLVER, CAP, 150 * E18, sender=s)
    ev = tx.events.filter(d.registry.NodeRegistered)[0]
    assert ev.node == s.address and ev.role == SOLVER and ev.stake == 150 * E18
    assert d.token.balanceOf(s) == before - 150 * E18
    assert d.token.balanceOf(d.registry) == 150 * E18
    node = d.registry.getNode(s)
    assert node.role == SOLVER and node.stake == 150 * E18 and node.locked == 0
    assert (node.deviceClass, node.memoryMiB, node.throughput) == CAP
    assert node.lastHeartbeat == chain.blocks.head.timestamp
    assert d.registry.isOnline(s)
    assert d.registry.roleOf(s) == SOLVER
    assert d.registry.freeStake(s) == 150 * E18
    assert d.registry.poolSize(SOLVER) == 1
    block = tx.block_number
    assert _entry(d.registry, SOLVER, 0) == (s.address, block, block, True)


def test_register_roleNone_reverts(deployment):
    d = deployment
    with reverts(d.registry, "InvalidRole"):
        d.registry.register(0, CAP, 150 * E18, sender=d.solvers[0])


def test_register_twice_reverts(deployment):
    d = deployment
    d.registry.register(SOLVER, CAP, 150 * E18, sender=d.solvers[0])
    with reverts(d.registry, "AlreadyRegistered", node=d.solvers[0].address, role=SOLVER):
        d.registry.register(VERIFIER, CAP, 150 * E18, sender=d.solvers[0])


def test_register_belowMinimum_reverts(deployment):
    d = deployment
    with reverts(d.registry, "StakeBelowMinimum", stake=99 * E18, minimum=100 * E18):
        d.registry.register(SOLVER, CAP, 99 * E18, sender=d.solvers[0])


def test_register_zeroAmount_reverts(project, deployment):
    d = deployment
    reg = _registry(project, d.deployer, d.token, minWhistleblowerStake=0)
    d.token.approve(reg, 2**256 - 1, sender=d.whistleblower)
    with reverts(reg, "ZeroAmount"):
        reg.register(WHISTLEBLOWER, CAP, 0, sender=d.whistleblower)


# ------------------------------------------------------------------ addStake, capability, heartbeat


def test_addStake_increasesStake(staked):
    d = staked
    tx = d.registry.addStake(5 * E18, sender=d.solvers[0])
    ev = tx.events.filter(d.registry.StakeAdded)[0]
    assert ev.amount == 5 * E18 and ev.stake == 205 * E18
    assert d.registry.getNode(d.solvers[0]).stake == 205 * E18


def test_addStake_notRegistered_reverts(staked):
    d = staked
    with reverts(d.registry, "NotRegistered", node=d.other.address):
        d.registry.addStake(5 * E18, sender=d.other)


def test_addStake_zero_reverts(staked):
    d = staked
    with reverts(d.registry, "ZeroAmount"):
        d.registry.addStake(0, sender=d.solvers[0])


def test_setCapability_updates(staked):
    d = staked
    tx = d.registry.setCapability((3, 80_000, 999), sender=d.solvers[0])
    assert len(tx.events.filter(d.registry.CapabilityUpdated)) == 1
    node = d.registry.getNode(d.solvers[0])
    assert (node.deviceClass, node.memoryMiB, node.throughput) == (3, 80_000, 999)


def test_setCapability_notRegistered_reverts(staked):
    d = staked
    with reverts(d.registry, "NotRegistered"):
        d.registry.setCapability(CAP, sender=d.other)


def test_setNetwork_records_and_emits(staked):
    d = staked
    s = d.solvers[0]
    node = d.registry.getNode(s)
    assert (node.bandwidthMbps, node.zone) == (0, 0)  # undeclared until setNetwork
    tx = d.registry.setNetwork((1000, 0x0102), sender=s)
    ev = tx.events.filter(d.registry.NetworkDeclared)
    assert len(ev) == 1 and (ev[0].bandwidthMbps, ev[0].zone) == (1000, 0x0102)
    assert ev[0].node == s
    node = d.registry.getNode(s)
    assert (node.bandwidthMbps, node.zone) == (1000, 0x0102)
    # the capability and the record beside it in the slot are untouched
    assert (node.deviceClass, node.memoryMiB, node.throughput) == CAP
    assert d.registry.isOnline(s) and node.poolSlot != 0
    d.registry.setNetwork((1, 0xFFFF), sender=s)  # both bounds are allowed
    d.registry.setNetwork((1_000_000, 0x0001), sender=s)
    assert (d.registry.getNode(s).bandwidthMbps, d.registry.getNode(s).zone) == (1_000_000, 1)


@pytest.mark.parametrize("bandwidth", [0, 1_000_001, 2**32 - 1])
def test_setNetwork_bandwidthOutOfRange_reverts(staked, bandwidth):
    d = staked
    with reverts(d.registry, "BandwidthOutOfRange", bandwidthMbps=bandwidth, min=1, max=1_000_000):
        d.registry.setNetwork((bandwidth, 0x0101), sender=d.solvers[0])


@pytest.mark.parametrize("zone", [0, 0x0100, 0xFF00])
def test_setNetwork_zoneWithoutSite_reverts(staked, zone):
    d = staked
    with reverts(d.registry, "ZoneOutOfRange", zone=zone):
        d.registry.setNetwork((100, zone), sender=d.solvers[0])


def test_setNetwork_notRegistered_reverts(staked):
    d = staked
    with reverts(d.registry, "NotRegistered"):
        d.registry.setNetwork((100, 0x0101), sender=d.other)


def test_heartbeat_keepsNodeOnline(staked, chain):
    d = staked
    s = d.solvers[0]
    advance(chain, REG_CFG["heartbeatTtl"] + 1)
    assert not d.registry.isOnline(s)
    tx = d.registry.heartbeat(sender=s)
    ev = tx.events.filter(d.registry.HeartbeatRecorded)[0]
    assert ev.node == s.address and ev.timestamp == chain.blocks.head.timestamp
    assert d.registry.isOnline(s)


def test_heartbeat_notRegistered_reverts(staked):
    d = staked
    with reverts(d.registry, "NotRegistered"):
        d.registry.heartbeat(sender=d.other)


# ------------------------------------------------------------------ unbonding


def test_requestUnbond_partial_thenWithdraw(staked, chain):
    d = staked
    s = d.solvers[0]
    tx = d.registry.requestUnbond(50 * E18, sender=s)
    ev = tx.events.filter(d.registry.UnbondRequested)[0]
    assert ev.amount == 50 * E18 and ev.unbonding == 50 * E18
    assert ev.readyAt == chain.blocks.head.timestamp + REG_CFG["unbondingDelay"]
    node = d.registry.getNode(s)
    assert node.stake == 150 * E18 and node.unbonding == 50 * E18 and node.role == SOLVER
    with reverts(d.registry, "UnbondingNotReady", node=s.address):
        d.registry.withdrawUnbonded(sender=s)
    advance(chain, REG_CFG["unbondingDelay"])
    before = d.token.balanceOf(s)
    tx = d.registry.withdrawUnbonded(sender=s)
    assert tx.events.filter(d.registry.UnbondWithdrawn)[0].amount == 50 * E18
    assert d.token.balanceOf(s) == before + 50 * E18
    assert d.registry.getNode(s).unbonding == 0
    with reverts(d.registry, "NothingUnbonding", node=s.address):
        d.registry.withdrawUnbonded(sender=s)


def test_requestUnbond_all_exitsPool(staked):
    d = staked
    s = d.solvers[0]
    tx = d.registry.requestUnbond(200 * E18, sender=s)
    ev = tx.events.filter(d.registry.NodeExited)[0]
    assert ev.node == s.address and ev.role == SOLVER
    assert d.registry.roleOf(s) == 0
    # The exited node's entry stays where it was, dead, and no other entry moves (a draw that has
    # seen its seed cannot be steered by exits, PROTOCOL §6.5).
    assert d.registry.poolSize(SOLVER) == 3
    assert _pool(d.registry, SOLVER) == [
        (s.address, False),
        (d.solvers[1].address, True),
        (d.solvers[2].address, True),
    ]
    assert d.registry.deadPoolEntries(SOLVER) == 1
    d.registry.requestUnbond(200 * E18, sender=d.solvers[2])
    assert [live for _, live in _pool(d.registry, SOLVER)] == [False, True, False]
    assert d.registry.deadPoolEntries(SOLVER) == 2
    # an exited node may register again, with another role
    d.registry.register(VERIFIER, CAP, 50 * E18, sender=s)
    assert d.registry.roleOf(s) == VERIFIER


def test_requestUnbond_notRegistered_reverts(staked):
    d = staked
    with reverts(d.registry, "NotRegistered"):
        d.registry.requestUnbond(1, sender=d.other)


def test_requestUnbond_zero_reverts(staked):
    d = staked
    with reverts(d.registry, "ZeroAmount"):
        d.registry.requestUnbond(0, sender=d.solvers[0])


def test_requestUnbond_moreThanFree_reverts(staked):
    d = staked
    with reverts(d.registry, "InsufficientFreeStake", free=200 * E18, amount=201 * E18):
        d.registry.requestUnbond(201 * E18, sender=d.solvers[0])


def test_requestUnbond_leavesBelowMinimum_reverts(staked):
    d = staked
    with reverts(d.registry, "StakeBelowMinimum", stake=99 * E18, minimum=100 * E18):
        d.registry.requestUnbond(101 * E18, sender=d.solvers[0])


# ------------------------------------------------------------------ slasher-only functions


def test_lockEligible_notSlasher_reverts(staked):
    d = staked
    with reverts(d.registry, "NotSlasher", caller=d.other.address):
        d.registry.lockEligible(d.solvers[0], SOLVER, (0, 0, 0), 1, sender=d.other)


def test_lock_notSlasher_reverts(staked):
    d = staked
    with reverts(d.registry, "NotSlasher"):
        d.registry.lock(d.verifiers[0], 1, sender=d.other)


def test_release_notSlasher_reverts(staked):
    d = staked
    with reverts(d.registry, "NotSlasher"):
        d.registry.release(d.solvers[0], 1, False, sender=d.other)


def test_slash_notSlasher_reverts(staked):
    d = staked
    with reverts(d.registry, "NotSlasher"):
        d.registry.slash(d.solvers[0], 1, False, sender=d.other)


def test_lockEligible_checksAndLocks(project, deployment, chain):
    d = deployment
    reg = _eoa_slasher_registry(project, d)
    s, v = d.solvers[0], d.verifiers[0]
    reg.register(SOLVER, CAP, 200 * E18, sender=s)
    reg.register(VERIFIER, CAP, 60 * E18, sender=v)
    with reverts(reg, "WrongRole", node=v.address, required=SOLVER, actual=VERIFIER):
        reg.lockEligible(v, SOLVER, (0, 0, 0), 1, sender=d.other)
    with reverts(reg, "CapabilityTooLow", node=s.address):
        reg.lockEligible(s, SOLVER, (1, 16_385, 0), 1, sender=d.other)
    with reverts(reg, "InsufficientFreeStake", free=200 * E18, amount=201 * E18):
        reg.lockEligible(s, SOLVER, CAP, 201 * E18, sender=d.other)
    tx = reg.lockEligible(s, SOLVER, CAP, 120 * E18, sender=d.other)
    ev = tx.events.filter(reg.StakeLocked)[0]
    assert ev.node == s.address and ev.slasher == d.other.address and ev.amount == 120 * E18
    assert reg.getNode(s).locked == 120 * E18
    assert reg.freeStake(s) == 80 * E18
    # locked stake cannot be unbonded
    with reverts(reg, "InsufficientFreeStake", free=80 * E18, amount=81 * E18):
        reg.requestUnbond(81 * E18, sender=s)
    advance(chain, REG_CFG["heartbeatTtl"] + 1)
    with reverts(reg, "NodeOffline", node=s.address):
        reg.lockEligible(s, SOLVER, CAP, 1, sender=d.other)


def test_release_andSlash_updateRecord(project, deployment):
    d = deployment
    reg = _eoa_slasher_registry(project, d)
    s = d.solvers[0]
    reg.register(SOLVER, CAP, 200 * E18, sender=s)
    reg.lockEligible(s, SOLVER, CAP, 150 * E18, sender=d.other)
    with reverts(reg, "InsufficientLockedStake", locked=150 * E18, amount=151 * E18):
        reg.release(s, 151 * E18, True, sender=d.other)
    with reverts(reg, "InsufficientLockedStake", locked=150 * E18, amount=151 * E18):
        reg.slash(s, 151 * E18, True, sender=d.other)
    tx = reg.release(s, 50 * E18, True, sender=d.other)
    assert tx.events.filter(reg.StakeReleased)[0].completed
    w_before = reg.selectionWeight(s)
    before = d.token.balanceOf(d.other)
    tx = reg.slash(s, 40 * E18, True, sender=d.other)
    ev = tx.events.filter(reg.NodeSlashed)[0]
    assert ev.amount == 40 * E18 and ev.failed
    assert d.token.balanceOf(d.other) == before + 40 * E18
    node = reg.getNode(s)
    assert (node.completed, node.failed, node.slashed) == (1, 1, 1)
    assert node.stake == 160 * E18 and node.locked == 60 * E18
    # weight = stake * (c + 1) / (c + 1 + 2 f + 4 s) = 160 * 2 / 8
    assert reg.selectionWeight(s) == 160 * E18 * 2 // 8 < w_before


def test_slash_wholeStake_exitsPool(project, deployment):
    d = deployment
    reg = _eoa_slasher_registry(project, d)
    s = d.solvers[0]
    reg.register(SOLVER, CAP, 100 * E18, sender=s)
    reg.lockEligible(s, SOLVER, CAP, 100 * E18, sender=d.other)
    tx = reg.slash(s, 100 * E18, False, sender=d.other)
    assert len(tx.events.filter(reg.NodeExited)) == 1
    assert reg.roleOf(s) == 0 and _pool(reg, SOLVER) == [(s.address, False)]
    assert reg.deadPoolEntries(SOLVER) == 1
    assert reg.getNode(s).failed == 0 and reg.getNode(s).slashed == 1


def test_lock_locksFreeStakeOnly(project, deployment):
    d = deployment
    reg = _eoa_slasher_registry(project, d)
    v = d.verifiers[0]
    reg.register(VERIFIER, CAP, 60 * E18, sender=v)
    with reverts(reg, "InsufficientFreeStake", free=60 * E18, amount=61 * E18):
        reg.lock(v, 61 * E18, sender=d.other)
    tx = reg.lock(v, 10 * E18, sender=d.other)
    assert tx.events.filter(reg.StakeLocked)[0].node == v.address
    assert reg.getNode(v).locked == 10 * E18


def test_lockAnswerable_notSlasher_reverts(staked):
    d = staked
    with reverts(d.registry, "NotSlasher", caller=d.other.address):
        d.registry.lockAnswerable(d.verifiers[0], 1, sender=d.other)


def test_lockAnswerable_freeFirst_thenRecallsUnbonding(project, deployment):
    d = deployment
    reg = _eoa_slasher_registry(project, d)
    v = d.verifiers[0]
    reg.register(VERIFIER, CAP, 100 * E18, sender=v)
    reg.requestUnbond(40 * E18, sender=v)  # 60 staked, 40 unbonding
    ready = reg.getNode(v).unbondReadyAt
    assert (reg.freeStake(v), reg.answerableStake(v)) == (60 * E18, 100 * E18)
    tx = reg.lockAnswerable(v, 50 * E18, sender=d.other)  # free stake covers it
    assert not tx.events.filter(reg.UnbondingRecalled)
    assert reg.getNode(v).unbonding == 40 * E18
    with reverts(reg, "InsufficientAnswerableStake", answerable=50 * E18, amount=51 * E18):
        reg.lockAnswerable(v, 51 * E18, sender=d.other)
    tx = reg.lockAnswerable(v, 35 * E18, sender=d.other)  # 10 free, 25 from unbonding
    ev = tx.events.filter(reg.UnbondingRecalled)[0]
    assert (ev.node, ev.slasher, ev.amount, ev.unbonding) == (
        v.address,
        d.other.address,
        25 * E18,
        15 * E18,
    )
    node = reg.getNode(v)
    assert (node.stake, node.locked, node.unbonding) == (85 * E18, 85 * E18, 15 * E18)
    assert node.unbondReadyAt == ready
    # a registered node's release leaves the stake free (it may unbond it again)
    tx = reg.release(v, 35 * E18, False, sender=d.other)
    assert not tx.events.filter(reg.StakeReturnedToUnbonding)
    assert reg.freeStake(v) == 35 * E18 and reg.getNode(v).unbonding == 15 * E18


def test_lockAnswerable_goneNode_registerAgain_addsToTheLockedStake(project, deployment):
    """A node that left its role with stake recalled for a case registers again: its new stake
    is added to the locked one (register does not overwrite it), and the case's release then
    leaves the stake free, as for any registered node."""
    d = deployment
    reg = _eoa_slasher_registry(project, d)
    v = d.verifiers[0]
    reg.register(VERIFIER, CAP, 100 * E18, sender=v)
    reg.requestUnbond(100 * E18, sender=v)  # leaves its role
    reg.lockAnswerable(v, 30 * E18, sender=d.other)
    assert reg.roleOf(v) == 0
    reg.register(VERIFIER, CAP, 60 * E18, sender=v)
    node = reg.getNode(v)
    assert (node.stake, node.locked, node.unbonding) == (90 * E18, 30 * E18, 70 * E18)
    tx = reg.release(v, 30 * E18, False, sender=d.other)
    assert not tx.events.filter(reg.StakeReturnedToUnbonding)
    assert reg.freeStake(v) == 90 * E18


def test_pickPoolMember_skipsIneligible(project, deployment, chain):
    d = deployment
    reg = _eoa_slasher_registry(project, d)
    v, w = d.verifiers[0], d.verifiers[1]
    assert reg.pickPoolMember(VERIFIER, 0, ALL, [], 1) == ZERO
    reg.register(VERIFIER, CAP, 60 * E18, sender=v)
    reg.register(VERIFIER, CAP, 60 * E18, sender=w)
    assert reg.pickPoolMember(VERIFIER, 0, ALL, [], 1) == v.address
    assert reg.pickPoolMember(VERIFIER, 3, ALL, [], 1) == w.address
    assert reg.pickPoolMember(VERIFIER, 0, ALL, [d.other, v], 1) == ZERO
    assert reg.pickPoolMember(VERIFIER, 0, ALL, [], 61 * E18) == ZERO
    reg.lock(v, 55 * E18, sender=d.other)
    assert reg.pickPoolMember(VERIFIER, 0, ALL, [], 10 * E18) == ZERO
    advance(chain, REG_CFG["heartbeatTtl"] + 1)
    reg.heartbeat(sender=v)
    assert reg.pickPoolMember(VERIFIER, 0, ALL, [], 5 * E18) == v.address
    assert reg.pickPoolMember(VERIFIER, 1, ALL, [], 1) == ZERO  # w is offline


# ------------------------------------------------------------------ the append-only pool


def test_register_takesTheLastDeadEntry_thenAppends(staked):
    d = staked
    reg = d.registry
    s0, s1, _ = d.solvers
    added = [_entry(reg, SOLVER, i)[1] for i in range(3)]
    reg.requestUnbond(200 * E18, sender=s0)
    reg.requestUnbond(200 * E18, sender=s1)
    # Last in, first out: the newcomer takes entry 1, s0 (back again) entry 0. Each keeps the
    # entry's addedBlock, so poolSizeBefore of every past block is unchanged.
    tx = reg.register(SOLVER, CAP, 150 * E18, sender=d.other)
    assert _entry(reg, SOLVER, 1) == (
        d.other.address,
        added[1],
        tx.block_number,
        True,
    )
    tx = reg.register(SOLVER, CAP, 150 * E18, sender=s0)
    assert _entry(reg, SOLVER, 0) == (
        s0.address,
        added[0],
        tx.block_number,
        True,
    )
    assert reg.poolSize(SOLVER) == 3 and reg.deadPoolEntries(SOLVER) == 0
    tx = reg.register(SOLVER, CAP, 150 * E18, sender=d.submitter)
    assert _entry(reg, SOLVER, 3) == (
        d.submitter.address,
        tx.block_number,
        tx.block_number,
        True,
    )


def test_poolAt_noSuchEntry_reverts(staked):
    d = staked
    with reverts(d.registry, "NoSuchPoolEntry", role=VERIFIER, index=3, size=3):
        d.registry.poolAt(VERIFIER, 3)


def test_poolSizeBefore_countsEntriesJoinedBeforeTheBlock(project, deployment):
    d = deployment
    reg = _eoa_slasher_registry(project, d)
    assert reg.poolSizeBefore(VERIFIER, ALL) == 0
    joined = [
        reg.register(VERIFIER, CAP, 60 * E18, sender=n).block_number
        for n in (*d.verifiers, *d.solvers)
    ]
    # Every boundary, so the binary search's both branches and both ends are exercised.
    for k, block in enumerate(joined):
        assert reg.poolSizeBefore(VERIFIER, block) == k
        assert reg.poolSizeBefore(VERIFIER, block + 1) == k + 1
    assert reg.poolSizeBefore(VERIFIER, 0) == 0
    assert reg.poolSizeBefore(VERIFIER, ALL) == len(joined) == reg.poolSize(VERIFIER)


def test_pickPoolMember_lateJoinerNeitherPickedNorMovesTheModulus(project, deployment):
    d = deployment
    reg = _eoa_slasher_registry(project, d)
    v, w, late = d.verifiers
    reg.register(VERIFIER, CAP, 60 * E18, sender=v)
    cutoff = reg.register(VERIFIER, CAP, 60 * E18, sender=w).block_number + 1
    reg.register(VERIFIER, CAP, 60 * E18, sender=late)
    # word 2 picks entry 2 (`late`) of all three, but entry 2 % 2 = 0 (`v`) of the two that
    # joined before the cutoff: a node that joins after a seed is known cannot steer the draw.
    assert reg.pickPoolMember(VERIFIER, 2, ALL, [], 1) == late.address
    for word in range(6):
        expected = (v, w)[word % 2].address
        assert reg.pickPoolMember(VERIFIER, word, cutoff, [], 1) == expected


def test_pickPoolMember_deadEntry_returnsNobody_othersStay(staked):
    d = staked
    reg = d.registry
    v0, v1, v2 = d.verifiers
    reg.requestUnbond(100 * E18, sender=v1)
    assert [reg.pickPoolMember(VERIFIER, i, ALL, [], 1) for i in range(3)] == [
        v0.address,
        ZERO,
        v2.address,
    ]


def test_pickPoolMember_takenEntry_notPickedForEarlierSeeds(staked, chain):
    """A node that takes a dead entry below a draw's modulus after the seed block must not be
    drawn by that seed: its entry was dead when the seed was fixed."""
    d = staked
    reg = d.registry
    v1 = d.verifiers[1]
    reg.requestUnbond(100 * E18, sender=v1)
    seed_block = chain.blocks.head.number + 1
    chain.mine(1)
    joined = reg.register(VERIFIER, CAP, 60 * E18, sender=d.other).block_number
    assert _entry(reg, VERIFIER, 1)[0] == d.other.address
    assert reg.pickPoolMember(VERIFIER, 1, seed_block, [], 1) == ZERO
    assert reg.pickPoolMember(VERIFIER, 1, joined, [], 1) == ZERO
    assert reg.pickPoolMember(VERIFIER, 1, joined + 1, [], 1) == d.other.address


# ------------------------------------------------------------------ the manager's batched calls


def _expected_draw(reg: Any, seed: bytes, wanted: int, tries: int, exclude: str, amount: int):
    """pickPoolMembers computed from pickPoolMember, try by try (PROTOCOL §6.5)."""
    picked: list[str] = []

    def word(t: int) -> int:
        return int.from_bytes(keccak(abi_encode(["bytes32", "uint256"], [seed, t])), "big")

    for t in range(tries):
        if len(picked) == wanted:
            break
        node = reg.pickPoolMember(VERIFIER, word(t), ALL, [exclude, *picked], amount)
        if node != ZERO:
            picked.append(node)
    # a pool of at most `tries` entries is walked once from a drawn start to fill empty seats
    size = reg.poolSize(VERIFIER)
    if len(picked) < wanted and 0 < size <= tries:
        start = word(tries) % size
        for i in range(size):
            if len(picked) == wanted:
                break
            # pickPoolMember reads entry `randomWord mod size`: pass the entry's index itself
            node = reg.pickPoolMember(VERIFIER, (start + i) % size, ALL, [exclude, *picked], amount)
            if node != ZERO:
                picked.append(node)
    return picked


def test_pickPoolMembers_isTheDrawOfPickPoolMember(project, deployment, chain):
    d = deployment
    reg = _eoa_slasher_registry(project, d)
    assert reg.pickPoolMembers(VERIFIER, b"\x01" * 32, 2, 8, ALL, ZERO, 1) == []  # empty pool
    for v in d.verifiers:
        reg.register(VERIFIER, CAP, 60 * E18, sender=v)
    reg.register(VERIFIER, CAP, 60 * E18, sender=d.solvers[0])  # a fourth entry
    reg.lock(d.verifiers[1], 55 * E18, sender=d.other)  # short of the amount below
    for n in range(12):
        seed = n.to_bytes(32, "big")
        for wanted, tries in ((2, 8), (3, 12), (4, 4), (1, 1)):
            exclude = d.verifiers[n % 3].address
            got = reg.pickPoolMembers(VERIFIER, seed, wanted, tries, ALL, exclude, 10 * E18)
            want = _expected_draw(reg, seed, wanted, tries, exclude, 10 * E18)
            assert got == want, (n, wanted, tries)
            assert len(got) <= wanted and len(set(got)) == len(got)
            assert exclude not in got and d.verifiers[1].address not in got
            if tries >= 4:
                # four entries, verifiers[1] short of stake: a small pool fills its seats with
                # whoever is eligible, whatever the seed (PROTOCOL §6.5)
                eligible = 3 if exclude == d.verifiers[1].address else 2
                assert len(got) == min(wanted, eligible), (n, wanted, tries, got)


def test_pickPoolMembers_aSmallPoolFillsEverySeatWhateverTheSeed(project, deployment):
    """Two eligible verifiers, two seats, eight tries: with replacement alone one seed in 128
    leaves a seat empty (every try the same entry); the walk of a small pool fills both."""
    d = deployment
    reg = _eoa_slasher_registry(project, d)
    for v in d.verifiers[:2]:
        reg.register(VERIFIER, CAP, 60 * E18, sender=v)
    both = {d.verifiers[0].address, d.verifiers[1].address}
    short = 0
    for n in range(400):
        seed = n.to_bytes(32, "big")
        words = [
            int.from_bytes(keccak(abi_encode(["bytes32", "uint256"], [seed, t])), "big") % 2
            for t in range(8)
        ]
        short += len(set(words)) == 1  # the random tries alone would leave a seat empty
        assert set(reg.pickPoolMembers(VERIFIER, seed, 2, 8, ALL, ZERO, 10 * E18)) == both, n
    assert short >= 1  # the seeds include ones the walk rescues (about 400 / 128)


def test_lockAll_locksEachAndEmits(project, deployment):
    d = deployment
    reg = _eoa_slasher_registry(project, d)
    v, w = d.verifiers[0], d.verifiers[1]
    reg.register(VERIFIER, CAP, 60 * E18, sender=v)
    reg.register(VERIFIER, CAP, 60 * E18, sender=w)
    tx = reg.lockAll([v, w], 20 * E18, sender=d.other)
    assert [(e.node, e.slasher, e.amount) for e in tx.events.filter(reg.StakeLocked)] == [
        (v.address, d.other.address, 20 * E18),
        (w.address, d.other.address, 20 * E18),
    ]
    assert reg.getNode(v).locked == reg.getNode(w).locked == 20 * E18
    with reverts(reg, "InsufficientFreeStake", node=w.address, free=40 * E18, amount=41 * E18):
        reg.lockAll([w], 41 * E18, sender=d.other)


def test_lockAll_notSlasher_reverts(staked):
    d = staked
    with reverts(d.registry, "NotSlasher", caller=d.other.address):
        d.registry.lockAll([d.verifiers[0]], 1, sender=d.other)


def test_settleUnit_releasesTheSolverAndReleasesOrSlashesEachVerifier(project, deployment):
    d = deployment
    reg = _eoa_slasher_registry(project, d)
    s, (v, w, x) = d.solvers[0], d.verifiers
    reg.register(SOLVER, CAP, 200 * E18, sender=s)
    for node in (v, w, x):
        reg.register(VERIFIER, CAP, 60 * E18, sender=node)
    reg.lockEligible(s, SOLVER, CAP, 100 * E18, sender=d.other)
    reg.lockAll([v, w, x], 30 * E18, sender=d.other)
    before = d.token.balanceOf(d.other)
    tx = reg.settleUnit(s, 100 * E18, [v, w, x], 30 * E18, 0b101, sender=d.other)
    assert d.token.balanceOf(d.other) == before + 60 * E18  # one transfer of both slashed locks
    released = [(e.node, e.amount, e.completed) for e in tx.events.filter(reg.StakeReleased)]
    assert released == [(s.address, 100 * E18, True), (w.address, 30 * E18, False)]
    slashed = [(e.node, e.amount, e.failed) for e in tx.events.filter(reg.NodeSlashed)]
    assert slashed == [(v.address, 30 * E18, True), (x.address, 30 * E18, True)]
    assert reg.getNode(s).completed == 1 and reg.getNode(s).locked == 0
    for node, stake in ((v, 30 * E18), (w, 60 * E18), (x, 30 * E18)):
        n = reg.getNode(node)
        assert (n.stake, n.locked) == (stake, 0)
    assert (reg.getNode(v).failed, reg.getNode(v).slashed) == (1, 1)
    with reverts(reg, "InsufficientLockedStake", node=s.address, locked=0, amount=1):
        reg.settleUnit(s, 1, [], 0, 0, sender=d.other)


def test_settleUnit_notSlasher_reverts(staked):
    d = staked
    with reverts(d.registry, "NotSlasher", caller=d.other.address):
        d.registry.settleUnit(d.solvers[0], 0, [], 0, 0, sender=d.other)


def test_trackRecord_atItsMaximum_saturatesInsteadOfReverting(project, deployment, chain):
    """A settlement never reverts on a full counter: completed (24 bits), failed and slashed
    (16 bits) stop at their maximum (the selection weight then stays as it is)."""
    d = deployment
    reg = _eoa_slasher_registry(project, d)
    s = d.solvers[0]
    reg.register(SOLVER, CAP, 200 * E18, sender=s)
    reg.lockEligible(s, SOLVER, CAP, 100 * E18, sender=d.other)
    # NodeRecord's second slot (mapping `_nodes` at slot 2): stake 96 | locked 96 | completed 24
    # | failed 16 | slashed 16 | roleless 8
    base = int.from_bytes(keccak(bytes(12) + bytes.fromhex(s.address[2:]) + (2).to_bytes(32)))
    slot = base + 1
    word = int.from_bytes(chain.provider.web3.eth.get_storage_at(reg.address, slot), "big")
    full = word | ((2**24 - 1) << 192) | ((2**16 - 1) << 216) | ((2**16 - 1) << 232)
    try:
        chain.provider.set_storage(reg.address, slot, HexBytes(full.to_bytes(32, "big")))
    except NotImplementedError:
        pytest.skip("the provider cannot write storage (Anvil can)")
    node = reg.getNode(s)
    assert (node.completed, node.failed, node.slashed) == (2**24 - 1, 2**16 - 1, 2**16 - 1)
    reg.release(s, 10 * E18, True, sender=d.other)
    reg.slash(s, 10 * E18, True, sender=d.other)
    node = reg.getNode(s)
    assert (node.completed, node.failed, node.slashed) == (2**24 - 1, 2**16 - 1, 2**16 - 1)
    assert node.locked == 80 * E18 and node.stake == 190 * E18
