"""AttestationCourt (PROTOCOL §6.8): its penalty and its revert paths.

The penalty: a false attestation costs the job's verifier lock S, at least the court's floor, at
most the verifier's free stake; the case keeps what was locked and the ruling slashes or releases
exactly that. The whistleblower-only and wiring guards are in tests/roles/test_attestation_court.py,
the court's books over random sequences in test_invariants.py."""

from __future__ import annotations

import pytest
from conftest import (
    COURT_BOND,
    COURT_PENALTY,
    COURT_REWARD_BPS,
    E18,
    MGR_CFG,
    SECRET,
    Protocol,
    assign,
    attest,
    by_address,
    deploy_protocol,
    reverts,
    seal_attestation,
    stake_nodes,
)
from eth_utils import keccak

from agents.training.merkle import CHECKPOINT_DOMAIN, checkpoint_root, list_proof

# Jobs of T = 8, k = 2: five checkpoints, four segments; a real list, so that the court can check
# a segment's start root against the committed root.
STATES = [bytes([0x60 + i]) * 32 for i in range(5)]
LIST_ROOT = checkpoint_root(STATES)
# S = max(verifierLock, pay (2m - 1) factor / n) at factor 1: 88 * 3 / 4 = 66 tokens for the
# default 100-token job, above the court's 20-token floor and below a 100-token verifier's stake
S_DEFAULT = 66 * E18


@pytest.fixture(scope="module")
def world(project, accounts) -> Protocol:
    d = deploy_protocol(project, accounts, {**MGR_CFG, "lazySlashFactor": 1}, court=True)
    stake_nodes(d)  # verifiers stake 100 tokens each
    return d


def drawn_unit(d: Protocol, chain, **overrides) -> tuple[int, int, list]:
    """A unit committed with STATES' list root and its verifiers drawn: (job, unit, [(v, ends)]),
    `ends` the end roots each would attest."""
    job_id, unit = assign(d, chain, **overrides)
    seal = keccak(LIST_ROOT + SECRET)
    d.manager.commitCheckpoints(
        unit, LIST_ROOT, 5, STATES[-1], "blob://unit", seal, sender=d.solvers[0]
    )
    chain.mine(1)
    d.manager.drawVerifiers(unit, sender=d.other)
    drawn = [by_address(d.verifiers, a) for a in d.manager.getVerifiers(unit)]
    return (
        job_id,
        unit,
        [(v, [b"\x44" * 32] * len(d.manager.sampledSegments(unit, v))) for v in drawn],
    )


def attested_unit(d: Protocol, chain, **overrides) -> tuple[int, int, list]:
    """A unit whose two drawn verifiers attested (sealed, then opened): (job, unit, [(v, ends)])."""
    job_id, unit, pairs = drawn_unit(d, chain, **overrides)
    attest(d, chain, unit, pairs)
    return job_id, unit, pairs


def take_to_court(d: Protocol, unit: int, verifier, ends: list[bytes]):
    seg = d.manager.sampledSegments(unit, verifier)[0]
    proof = list_proof(CHECKPOINT_DOMAIN, STATES, seg).siblings
    return d.court.challengeAttestation(
        unit, verifier, 0, ends, STATES[seg], proof, sender=d.whistleblower
    )


def test_penaltyOf_freeStakeCoversS_locksS(world, chain):
    d = world
    for v in d.verifiers:
        d.registry.addStake(100 * E18, sender=v)
    job_id, unit, [(v, ends), _] = attested_unit(d, chain)
    assert d.manager.verifierLockOf(job_id) == S_DEFAULT
    assert d.registry.freeStake(v) == 200 * E18 - S_DEFAULT
    assert d.court.penaltyOf(unit, v) == S_DEFAULT
    locked = d.registry.getNode(v).locked
    tx = take_to_court(d, unit, v, ends)
    game = tx.events.filter(d.court.AttestationChallenged)[0]
    assert game.penalty == S_DEFAULT
    assert d.court.cases(game.gameId).penalty == S_DEFAULT
    assert d.registry.getNode(v).locked == locked + S_DEFAULT


def test_penaltyOf_freeStakeShortOfS_isCappedAndSlashedWhole(world, chain):
    d = world
    _, unit, [(v, ends), _] = attested_unit(d, chain)
    # 100 staked, S = 66 locked by the manager while the unit is Verifying: 34 free
    free = d.registry.freeStake(v)
    assert free == 100 * E18 - S_DEFAULT
    assert d.court.penaltyOf(unit, v) == free
    game = take_to_court(d, unit, v, ends).events.filter(d.court.AttestationChallenged)[0].gameId
    assert d.registry.freeStake(v) == 0
    stake = d.registry.getNode(v).stake
    jackpot = d.manager.jackpot()
    d.court_game.resolve(game, True, sender=d.other)
    reward = free * COURT_REWARD_BPS // 10_000
    assert d.registry.getNode(v).stake == stake - free
    assert d.court.credits(d.whistleblower) == COURT_BOND + reward
    assert d.manager.jackpot() == jackpot + free - reward


def test_penaltyOf_sBelowFloor_locksTheFloor(world, chain):
    d = world
    # pay 20 - 2 - 0.4 = 17.6 tokens: S = 17.6 * 3 / 4 = 13.2 tokens, under the 20-token floor
    job_id, unit, [(v, ends), _] = attested_unit(d, chain, reward=20 * E18, verificationFee=2 * E18)
    assert d.manager.verifierLockOf(job_id) < COURT_PENALTY
    assert d.court.penaltyOf(unit, v) == COURT_PENALTY
    game = take_to_court(d, unit, v, ends).events.filter(d.court.AttestationChallenged)[0]
    assert game.penalty == COURT_PENALTY


def test_onDisputeResolved_attestationStands_releasesWhatWasLocked(world, chain):
    d = world
    _, unit, [(v, ends), _] = attested_unit(d, chain)
    free = d.registry.freeStake(v)
    game = take_to_court(d, unit, v, ends).events.filter(d.court.AttestationChallenged)[0].gameId
    d.court_game.resolve(game, False, sender=d.other)
    assert d.registry.freeStake(v) == free
    assert d.registry.getNode(v).stake == 100 * E18
    assert d.court.credits(v) == COURT_BOND


def test_challengeAttestation_noFreeStake_reverts(world, chain):
    d = world
    _, unit, [(v, ends), _] = attested_unit(d, chain)
    d.registry.requestUnbond(d.registry.freeStake(v), sender=v)
    assert d.court.penaltyOf(unit, v) == 0
    with reverts(d.court, "NoFreeStake", verifier=v.address):
        take_to_court(d, unit, v, ends)


# ------------------------------------------------------------------ revert paths


def test_challengeAttestation_beforeSetGame_gameNotSet(world, chain, project, accounts):
    d = world
    court = accounts[0].deploy(
        project.AttestationCourt, d.manager, d.registry, COURT_BOND, COURT_PENALTY, 5_000
    )
    with reverts(court, "GameNotSet"):
        court.challengeAttestation(
            1 << 32, d.verifiers[0], 0, [], STATES[0], [], sender=d.whistleblower
        )


def test_challengeAttestation_indexPastTheSample_noSuchSegment(world, chain):
    d = world
    _, unit, [(v, ends), _] = attested_unit(d, chain)
    n = len(d.manager.sampledSegments(unit, v))
    with reverts(d.court, "NoSuchSegment", index=n, count=n):
        d.court.challengeAttestation(unit, v, n, ends, STATES[0], [], sender=d.whistleblower)


def test_challengeAttestation_startRootNotInTheCommitment_badStartRoot(world, chain):
    d = world
    _, unit, [(v, ends), _] = attested_unit(d, chain)
    seg = d.manager.sampledSegments(unit, v)[0]
    proof = list_proof(CHECKPOINT_DOMAIN, STATES, seg).siblings
    with reverts(d.court, "BadStartRoot", unitId=unit, segment=seg):
        d.court.challengeAttestation(unit, v, 0, ends, b"\x99" * 32, proof, sender=d.whistleblower)


def test_challengeAttestation_verifierOnlySealed_notAttested(world, chain):
    d = world
    _, unit, [(v, ends), _] = drawn_unit(d, chain)
    seal_attestation(d, unit, v, ends)
    with reverts(d.court, "NotAttested", unitId=unit, verifier=v.address):
        take_to_court(d, unit, v, ends)


def test_challengeAttestation_otherEndRoots_attestationMismatch(world, chain):
    d = world
    _, unit, [(v, ends), _] = attested_unit(d, chain)
    other = [b"\x45" * 32] * len(ends)
    with reverts(d.court, "AttestationMismatch", unitId=unit, verifier=v.address):
        take_to_court(d, unit, v, other)


def test_challengeAttestation_sameEntryTwice_alreadyChallenged(world, chain):
    d = world
    for v in d.verifiers:
        d.registry.addStake(100 * E18, sender=v)
    _, unit, [(v, ends), _] = attested_unit(d, chain)
    take_to_court(d, unit, v, ends)
    with reverts(d.court, "AlreadyChallenged", unitId=unit, verifier=v.address, index=0):
        take_to_court(d, unit, v, ends)
