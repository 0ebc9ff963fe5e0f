"""AttestationCourt (PROTOCOL §6.8): its penalty, its bond and its revert paths.

The penalty: a false attestation costs the job's verifier lock S, at least the court's floor, at
most the verifier's answerable stake (free, then unbonding: recalled and locked); the case keeps
what was locked and the ruling slashes or releases exactly that. The bond: the whistleblower pays
what it stands to win (`rewardBps` of the penalty), at least the court's flat `bond`; the case
keeps it and the ruling credits exactly that to the winner. The whistleblower-only and wiring
guards are in tests/roles/test_attestation_court.py, the court's books over random sequences in
test_invariants.py."""

from __future__ import annotations

import pytest
from ape.exceptions import ContractLogicError
from conftest import (
    COURT_BOND,
    COURT_PENALTY,
    COURT_REWARD_BPS,
    COURT_WINDOW,
    E18,
    MGR_CFG,
    SECRET,
    Protocol,
    advance,
    assign,
    attest,
    by_address,
    deploy_protocol,
    reverts,
    seal_attestation,
    stake_nodes,
)
from eth_utils import keccak

from agents.training.merkle import CHECKPOINT_DOMAIN, checkpoint_root, final_proof, list_proof

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
        unit,
        LIST_ROOT,
        5,
        STATES[-1],
        final_proof(STATES),
        "blob://unit",
        seal,
        sender=d.solvers[0],
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
    reward = free * COURT_REWARD_BPS // 10_000
    assert d.court.bondOf(unit, v) == reward  # 17 tokens: above the floor, scaled with the cap
    game = take_to_court(d, unit, v, ends).events.filter(d.court.AttestationChallenged)[0].gameId
    assert d.registry.freeStake(v) == 0
    stake = d.registry.getNode(v).stake
    jackpot = d.manager.jackpot()
    d.court_game.resolve(game, True, sender=d.other)
    assert d.registry.getNode(v).stake == stake - free
    assert d.court.credits(d.whistleblower) == reward + reward
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
    bond = free * COURT_REWARD_BPS // 10_000  # the scaled bond: rewardBps of it is the verifier's
    assert d.court.credits(v) == bond * COURT_REWARD_BPS // 10_000


def test_challengeAttestation_verifierUnbonding_locksItsUnbondingStake(world, chain):
    """Unbonding is no way out of a case (PROTOCOL §6.8): the free stake the verifier moved to
    unbonding comes back into its stake, locked for the case, and a lost case slashes it."""
    d = world
    _, unit, [(v, ends), _] = attested_unit(d, chain)
    free = d.registry.freeStake(v)  # 100 - S, S locked by the manager while the unit verifies
    d.registry.requestUnbond(free, sender=v)
    assert d.registry.freeStake(v) == 0
    assert d.registry.answerableStake(v) == free
    assert d.court.penaltyOf(unit, v) == free
    tx = take_to_court(d, unit, v, ends)
    recalled = tx.events.filter(d.registry.UnbondingRecalled)[0]
    assert (recalled.node, recalled.slasher) == (v.address, d.court.address)
    assert (recalled.amount, recalled.unbonding) == (free, 0)
    node = d.registry.getNode(v)
    assert (node.stake, node.locked, node.unbonding) == (100 * E18, 100 * E18, 0)
    game = tx.events.filter(d.court.AttestationChallenged)[0].gameId
    d.court_game.resolve(game, True, sender=d.other)
    assert d.registry.getNode(v).stake == 100 * E18 - free


def finalized_and_exited(d: Protocol, chain) -> tuple[int, object, list[bytes]]:
    """An attested unit, finalized (the verifiers' locks released), whose first drawn verifier
    then unbonded all its stake and left its role: (unit, verifier, its end roots)."""
    _, unit, [(v, ends), _] = attested_unit(d, chain)
    chain.pending_timestamp = d.manager.getUnit(unit).deadline + 2 * MGR_CFG["revealWindow"] + 1
    d.manager.finalize(unit, sender=d.other)
    d.registry.requestUnbond(d.registry.getNode(v).stake, sender=v)
    assert d.registry.roleOf(v) == 0
    return unit, v, ends


def test_challengeAttestation_exitedVerifier_caseStands_returnsTheStakeToUnbonding(world, chain):
    """A verifier that left its role still answers with its unbonding stake; when its
    attestation stands, the stake goes back to unbonding, withdrawable as before."""
    d = world
    unit, v, ends = finalized_and_exited(d, chain)
    unbonding = d.registry.getNode(v).unbonding
    ready = d.registry.getNode(v).unbondReadyAt
    tx = take_to_court(d, unit, v, ends)
    case = tx.events.filter(d.court.AttestationChallenged)[0]
    assert case.penalty == S_DEFAULT
    node = d.registry.getNode(v)
    assert (node.role, node.stake, node.locked) == (0, S_DEFAULT, S_DEFAULT)
    assert node.unbonding == unbonding - S_DEFAULT
    with reverts(d.registry, "NotRegistered", node=v.address):
        d.registry.requestUnbond(1, sender=v)  # the recalled stake cannot leave another way
    tx = d.court_game.resolve(case.gameId, False, sender=d.other)
    back = tx.events.filter(d.registry.StakeReturnedToUnbonding)[0]
    assert (back.node, back.amount, back.unbonding) == (v.address, S_DEFAULT, unbonding)
    node = d.registry.getNode(v)
    assert (node.stake, node.locked, node.unbonding) == (0, 0, unbonding)
    assert node.unbondReadyAt == ready
    chain.pending_timestamp = ready
    before = d.token.balanceOf(v)
    d.registry.withdrawUnbonded(sender=v)
    assert d.token.balanceOf(v) == before + unbonding


def test_challengeAttestation_exitedVerifier_falseAttestation_slashesTheRecalledStake(world, chain):
    d = world
    unit, v, ends = finalized_and_exited(d, chain)
    unbonding = d.registry.getNode(v).unbonding
    case = take_to_court(d, unit, v, ends).events.filter(d.court.AttestationChallenged)[0]
    tx = d.court_game.resolve(case.gameId, True, sender=d.other)
    assert not tx.events.filter(d.registry.NodeExited)  # it had left already
    node = d.registry.getNode(v)
    assert (node.role, node.stake, node.locked) == (0, 0, 0)
    assert node.unbonding == unbonding - S_DEFAULT
    assert d.court.credits(d.whistleblower) > 0


def test_challengeAttestation_nothingAnswerable_reverts(world, chain):
    """The first case locked all the verifier's free stake and nothing is unbonding: a second
    entry cannot be taken to court."""
    d = world
    _, unit, [(v, ends), _] = attested_unit(d, chain)
    take_to_court(d, unit, v, ends)
    assert d.registry.answerableStake(v) == 0
    assert d.court.penaltyOf(unit, v) == 0
    assert d.court.bondOf(unit, v) == COURT_BOND  # the quote stands; the challenge does not
    seg = d.manager.sampledSegments(unit, v)[1]
    proof = list_proof(CHECKPOINT_DOMAIN, STATES, seg).siblings
    with reverts(d.court, "NoAnswerableStake", verifier=v.address):
        d.court.challengeAttestation(unit, v, 1, ends, STATES[seg], proof, sender=d.whistleblower)


# ------------------------------------------------------------------ the bond


def challenge_paid(d: Protocol, unit: int, v, ends: list[bytes]) -> tuple[int, int, int]:
    """Take (v, ends) to court; check the whistleblower paid exactly the quoted bondOf and the
    event and the case record it: (game id, penalty, bond)."""
    quoted = d.court.bondOf(unit, v)
    before = d.token.balanceOf(d.whistleblower)
    held = d.token.balanceOf(d.court)
    ev = take_to_court(d, unit, v, ends).events.filter(d.court.AttestationChallenged)[0]
    assert d.token.balanceOf(d.whistleblower) == before - quoted
    assert d.token.balanceOf(d.court) == held + quoted
    assert ev.bond == quoted
    assert d.court.cases(ev.gameId).bond == quoted
    return ev.gameId, ev.penalty, quoted


def large_s_unit(d: Protocol, chain) -> tuple[int, int, list]:
    """An attested unit of a 400-token job: S = (400 - 10 - 8) * 3 / 4 = 286.5 tokens. Its
    verifiers staked 600: the manager locks S while the unit is Verifying, and the 313.5 left
    free cover the court's S too (its solver staked 400, its collateral)."""
    for v in d.verifiers:
        d.registry.addStake(500 * E18, sender=v)
    d.registry.addStake(200 * E18, sender=d.solvers[0])
    job_id, unit, pairs = attested_unit(d, chain, reward=400 * E18)
    assert d.manager.verifierLockOf(job_id) == 2865 * E18 // 10
    return job_id, unit, pairs


def test_bondOf_smallPenalty_isTheFlatFloor(world, chain):
    d = world
    _, unit, [(v, ends), _] = attested_unit(d, chain)
    # 6 tokens answerable (the rest unbonded and withdrawn, inside the court's window): the
    # penalty is capped at 6, half of it (3) is under the 10-token floor
    d.registry.requestUnbond(d.registry.freeStake(v) - 6 * E18, sender=v)
    advance(chain, d.registry.unbondingDelay())
    d.registry.withdrawUnbonded(sender=v)
    assert d.court.penaltyOf(unit, v) == 6 * E18
    assert d.court.bondOf(unit, v) == COURT_BOND
    game, penalty, bond = challenge_paid(d, unit, v, ends)
    assert (penalty, bond) == (6 * E18, COURT_BOND)
    jackpot = d.manager.jackpot()
    d.court_game.resolve(game, False, sender=d.other)
    kept = COURT_BOND * COURT_REWARD_BPS // 10_000
    assert d.court.credits(v) == kept
    assert d.manager.jackpot() == jackpot + COURT_BOND - kept  # the rest of the failed bond


def test_bondOf_sAtTheFloor_isTheFlatBond(world, chain):
    d = world
    # S = 13.2 tokens is under the 20-token penalty floor, whose half is the 10-token bond
    _, unit, [(v, _), _] = attested_unit(d, chain, reward=20 * E18, verificationFee=2 * E18)
    assert d.court.penaltyOf(unit, v) == COURT_PENALTY
    assert d.court.bondOf(unit, v) == COURT_BOND


def test_bondOf_largeS_isTheRewardAtStake(world, chain):
    d = world
    job_id, unit, [(v, ends), _] = large_s_unit(d, chain)
    s = d.manager.verifierLockOf(job_id)
    assert d.court.penaltyOf(unit, v) == s
    assert d.court.bondOf(unit, v) == s * COURT_REWARD_BPS // 10_000 == 14325 * E18 // 100
    _, penalty, bond = challenge_paid(d, unit, v, ends)
    assert (penalty, bond) == (s, s * COURT_REWARD_BPS // 10_000)


def test_bondOf_largeS_attestationStands_verifierCreditedItsShareOfTheScaledBond(world, chain):
    """A failed bond is split: `rewardBps` of it to the verifier whose stake the case held, the
    rest to the jackpot, so that a verifier's sybil pays for every losing case it opens to hold
    the entry (PROTOCOL §6.8)."""
    d = world
    _, unit, [(v, ends), _] = large_s_unit(d, chain)
    game, penalty, bond = challenge_paid(d, unit, v, ends)
    assert bond > COURT_BOND
    jackpot = d.manager.jackpot()
    d.court_game.resolve(game, False, sender=d.other)
    kept = bond * COURT_REWARD_BPS // 10_000
    assert d.court.credits(v) == kept
    assert d.manager.jackpot() == jackpot + bond - kept
    assert d.court.credits(d.whistleblower) == 0
    before = d.token.balanceOf(v)
    d.court.withdraw(sender=v)
    assert d.token.balanceOf(v) == before + kept


def test_bondOf_largeS_falseAttestation_whistleblowerGetsBondPlusReward(world, chain):
    d = world
    _, unit, [(v, ends), _] = large_s_unit(d, chain)
    start = d.token.balanceOf(d.whistleblower)
    game, penalty, bond = challenge_paid(d, unit, v, ends)
    jackpot = d.manager.jackpot()
    d.court_game.resolve(game, True, sender=d.other)
    reward = penalty * COURT_REWARD_BPS // 10_000
    assert d.court.credits(d.whistleblower) == bond + reward
    assert d.court.credits(v) == 0
    assert d.manager.jackpot() == jackpot + penalty - reward
    d.court.withdraw(sender=d.whistleblower)
    # net of its bond, the whistleblower gained exactly the reward
    assert d.token.balanceOf(d.whistleblower) == start + reward


def test_bondOf_unknownUnit_revertsAsPenaltyOf(world):
    d = world
    unit = 999 << 32  # no such job: the manager's lock divides by its zero checkpoint interval
    with pytest.raises(ContractLogicError) as penalty:
        d.court.penaltyOf(unit, d.verifiers[0])
    with pytest.raises(ContractLogicError) as bond:
        d.court.bondOf(unit, d.verifiers[0])
    assert str(bond.value) == str(penalty.value)


# ------------------------------------------------------------------ revert paths


def test_challengeAttestation_beforeSetGame_gameNotSet(world, chain, project, accounts):
    d = world
    court = accounts[0].deploy(
        project.AttestationCourt,
        d.manager,
        d.registry,
        COURT_BOND,
        COURT_PENALTY,
        5_000,
        COURT_WINDOW,
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


# ------------------------------------------------------------------ the job's dispute config


def test_challengeAttestation_configOnlyWithTheManagersGame_isCopiedToTheCourtsGame(world, chain):
    # a submitter that registered its config with the job manager's game only: the court copies
    # it, so the verifiers of its job stay within the court's reach
    d = world
    job_id, unit, [(v, ends), _] = attested_unit(d, chain)
    d.arbiter.registerConfig(job_id, b"\xc1" * 32, sender=d.submitter)
    assert d.court_game.configOf(job_id) == b"\x00" * 32
    take_to_court(d, unit, v, ends)
    assert d.court_game.configOf(job_id) == b"\xc1" * 32
    assert d.court_game.placementOf(job_id).shards == 0


def test_challengeAttestation_unitJobConfig_isCopiedWithItsPlacement(world, chain):
    d = world
    job_id, unit, [(v, ends), _] = attested_unit(d, chain)
    d.arbiter.registerUnitConfig(job_id, b"\xc2" * 32, (400, 3, 2), sender=d.submitter)
    take_to_court(d, unit, v, ends)
    assert d.court_game.configOf(job_id) == b"\xc2" * 32
    placement = d.court_game.placementOf(job_id)
    assert (placement.stepOffset, placement.shards, placement.shard) == (400, 3, 2)


def test_challengeAttestation_courtsGameHasAConfig_keepsIt(world, chain):
    d = world
    job_id, unit, [(v, ends), _] = attested_unit(d, chain)
    d.arbiter.registerConfig(job_id, b"\xc1" * 32, sender=d.submitter)
    d.court_game.registerConfig(job_id, b"\xc3" * 32, sender=d.submitter)
    take_to_court(d, unit, v, ends)
    assert d.court_game.configOf(job_id) == b"\xc3" * 32


def test_challengeAttestation_noConfigAnywhere_copiesNothing(world, chain):
    # the real court's game then refuses with ConfigNotRegistered (tests/dispute); this one
    # records whatever it is told, so nothing registered means nothing was copied
    d = world
    job_id, unit, [(v, ends), _] = attested_unit(d, chain)
    take_to_court(d, unit, v, ends)
    assert d.court_game.configOf(job_id) == b"\x00" * 32


def test_challengeAttestation_keepsTheUnitsRecord_soLaterCasesStillReadIt(world, chain):
    """The court's first case over a job keeps its record (`keepRecord`, PROTOCOL §6.10): a later
    case may come at any time (`window` after a case in which the attestation stood), after the
    job's record would otherwise have been recycled."""
    d = world
    for v in d.verifiers:
        d.registry.addStake(100 * E18, sender=v)
    job_id, unit, [(v, ends), _] = attested_unit(d, chain)
    tx = take_to_court(d, unit, v, ends)
    kept = tx.events.filter(d.manager.RecordKept)
    assert [(e.jobId, e.by) for e in kept] == [(job_id, d.court.address)]
    game = tx.events.filter(d.court.AttestationChallenged)[0].gameId
    d.court_game.resolve(game, False, sender=d.other)  # the attestation stands
    advance(chain, MGR_CFG["verifyWindow"] + 2 * MGR_CFG["revealWindow"] + 1)
    d.manager.finalize(unit, sender=d.solvers[0])
    deadline = d.manager.getUnit(unit).deadline
    advance(chain, deadline + MGR_CFG["recordRetention"] - chain.pending_timestamp + 1)
    d.manager.postJob(
        (b"\x01" * 32, b"\x02" * 32, b"\x03" * 32, 8, 2, (1, 8_192, 50), 100 * E18, 10 * E18,
         chain.pending_timestamp + 600, 3_600, b"\x04" * 32),
        sender=d.submitter,
    )  # fmt: skip
    assert d.manager.getUnit(unit).status == 7  # still Finalized: the record took no new job
    assert d.manager.getJob(job_id).submitter == d.submitter.address
