"""Forced errors on chain (PROTOCOL §8): the judge's reveal, the jackpot payout to catchers (at
finalize, once the revealed C has stood), the slash of verifiers that attested the published
(wrong) value, premature reveals, every revert.

The `forced` deployment sets forcedErrorBps = 10 000, so every round of a job with at least two
segments is forced; its jobs have two segments (T = 4, k = 2), so the perturbed checkpoint is 1
and both segments are judged: segment 0 ends there, segment 1 starts there. Its verifiers lock
the lazy-slash S with lazySlashFactor = 4 = ceil(1.25 e / p) at p = 100 %: S = 96 * 3 * 4 / 2 =
576 tokens per unit (payout 96 of the reward 100), so they stake 2 100.
"""

from __future__ import annotations

from typing import Any

import pytest
from conftest import (
    E18,
    MGR_CFG,
    U_ASSIGNED,
    U_COMMITTED,
    U_DISPUTED,
    U_OPEN,
    U_VERIFYING,
    Protocol,
    advance,
    attest,
    by_address,
    deploy_protocol,
    job_params,
    now,
    reverts,
    seal_attestation,
    stake_nodes,
    unit_of,
)
from eth_utils import keccak

from agents.roles.forced_reveal import forced_reveal
from agents.training.merkle import checkpoint_root, final_proof

FEE = 2 * E18  # fee * forcedErrorBps <= reward * taxBps: 2 % of the reward at 100 % forced
SECRET = b"\x5e" * 32
V_ATTESTED, V_SEALED, V_SLASHED = 2, 3, 4
RIGHT, WRONG = 1, 2
TRUE = [b"\x03" * 32, b"\xc1" * 32, b"\xf1" * 32]  # state roots at steps 0, 2, 4
PUBLISHED = [TRUE[0], b"\xe1" * 32, TRUE[2]]  # checkpoint 1 perturbed
# An honest replay ends segment 0 on the true root, and segment 1 (from the perturbed published
# state) on a root that is neither; a lazy verifier copies the published roots.
HONEST = {0: TRUE[1], 1: b"\xd2" * 32}
LAZY = {0: PUBLISHED[1], 1: PUBLISHED[2]}
TRUE_ROOT, PUBLISHED_ROOT = checkpoint_root(TRUE), checkpoint_root(PUBLISHED)


def secret_hash(secret: bytes) -> bytes:
    return keccak(secret)


def seal(root: bytes, secret: bytes) -> bytes:
    return keccak(root + secret)


@pytest.fixture(scope="module")
def forced(project, accounts) -> Protocol:
    d = deploy_protocol(
        project, accounts, {**MGR_CFG, "forcedErrorBps": 10_000, "lazySlashFactor": 4}
    )
    stake_nodes(d)
    for v in d.verifiers:
        d.registry.addStake(2_000 * E18, sender=v)
    return d


def lock_of(d: Protocol, unit: int) -> int:
    """The unit's verifier lock S; every `forced` job has the same: 576 tokens."""
    lock = d.manager.verifierLockOf(d.manager.jobIdOf(unit))
    assert lock == 576 * E18
    return lock


def judge_of(project, d: Protocol) -> Any:
    return project.ForcedErrorJudge.at(d.manager.forcedErrorJudge())


def post2(d: Protocol, chain, **overrides: Any) -> int:
    """Post a two-segment job with the capped fee; return its unit."""
    params = {"steps": 4, "checkpointInterval": 2, "verificationFee": FEE, **overrides}
    tx = d.manager.postJob(job_params(now(chain), **params), sender=d.submitter)
    return unit_of(d.manager, tx.events.filter(d.manager.JobPosted)[0].jobId)


def assigned(d: Protocol, chain, solver: Any, secret: bytes = SECRET, **overrides: Any) -> int:
    unit = post2(d, chain, **overrides)
    d.registry.heartbeat(sender=solver)  # the chain clock moves on between jobs
    d.manager.claim(unit, secret_hash(secret), sender=solver)
    advance(chain, 601)
    d.manager.closeClaims(unit, sender=d.other)
    chain.mine(1)
    d.manager.selectAssignee(unit, sender=d.other)
    return unit


def seed_jackpot(d: Protocol, chain) -> None:
    """A missed commit deadline slashes 100 tokens of collateral into the jackpot."""
    unit = assigned(d, chain, d.solvers[2])
    advance(chain, 3_601)
    d.manager.expireAssignment(unit, sender=d.other)


def forced_unit(
    d: Protocol, chain, secret: bytes = SECRET, **overrides: Any
) -> tuple[int, list[Any]]:
    """A Verifying forced unit whose solver published PUBLISHED and sealed TRUE_ROOT. Returns the
    unit and its drawn verifiers (accounts) in draw order."""
    unit = assigned(d, chain, d.solvers[0], secret, **overrides)
    return unit, publish_and_draw(d, unit, secret)


def publish_and_draw(d: Protocol, unit: int, secret: bytes = SECRET) -> list[Any]:
    """The assignee publishes PUBLISHED sealing TRUE_ROOT; two verifiers are drawn (returned)."""
    d.manager.commitCheckpoints(
        unit, PUBLISHED_ROOT, 3, TRUE[2], final_proof(PUBLISHED), "blob://forced",
        seal(TRUE_ROOT, secret), sender=d.solvers[0],
    )  # fmt: skip
    for v in d.verifiers:
        d.registry.heartbeat(sender=v)
    d.manager.drawVerifiers(unit, sender=d.other)
    drawn = [by_address(d.verifiers, v) for v in d.manager.getVerifiers(unit)]
    assert len(drawn) == 2
    return drawn


def ends(d: Protocol, unit: int, v: Any, honest: bool = True) -> list[bytes]:
    """End roots v attests for its sampled segments: replayed (honest) or copied (lazy)."""
    table = HONEST if honest else LAZY
    return [table[s] for s in d.manager.sampledSegments(unit, v)]


#: The fields of `IJobManager.ForcedReveal`, in order.
REVEAL_KEYS = ["secret", "trueRoot", "checkpoints", "publishedEntries", "publishedProofs"]
REVEAL_KEYS += ["trueEntries", "trueProofs", "endRoots", "finalProof"]


def reveal(
    secret: bytes = SECRET,
    published: list[bytes] = PUBLISHED,
    checkpoints: tuple[int, ...] = (1, 2),
    true: list[bytes] = TRUE,
    **overrides: Any,
) -> dict[str, Any]:
    """The reveal of a unit that published `published` and sealed `true`; by default a `forced`
    unit's: checkpoint 1 (perturbed: both segments are judged on it) and 2 (the end of segment
    1, which starts perturbed), each in both lists with its proof."""
    r = dict(
        zip(REVEAL_KEYS, forced_reveal(secret, published, true, list(checkpoints), []), strict=True)
    )
    r.update(overrides)
    return r


def as_tuple(r: dict[str, Any]) -> tuple:
    return tuple(r[k] for k in REVEAL_KEYS)


# ------------------------------------------------------------------ the jackpot game


def test_revealForced_honestPaidFromJackpotAtFinalize_lazySlashedAtFinalize_solverKeepsStake(
    forced, chain, project
):
    d = forced
    seed_jackpot(d, chain)
    unit, drawn = forced_unit(d, chain)
    lazy, honest = drawn
    # the honest verifier replays from the true state, disputes the published root and seals the
    # roots it computed; the lazy one seals the published roots without replaying
    d.manager.challenge(unit, TRUE_ROOT, sender=honest)
    bond = d.manager.getDispute(unit).bond
    assert bond == d.manager.challengeBondOf(unit) > MGR_CFG["challengeBond"]  # the scaled bond
    game = d.arbiter.gameCount()
    attest(d, chain, unit, [(honest, ends(d, unit, honest)), (lazy, ends(d, unit, lazy, False))])
    solver_node = d.registry.getNode(d.solvers[0])
    lazy_stake = d.registry.getNode(lazy).stake
    jackpot = d.manager.jackpot()
    honest_credit = d.manager.credits(honest)
    end_roots = [ends(d, unit, v, v == honest) for v in drawn]

    tx = judge_of(project, d).revealForced(
        unit, as_tuple(reveal(endRoots=end_roots)), sender=d.solvers[0]
    )

    ev = tx.events.filter(d.manager.ForcedErrorRevealed)[0]
    assert ev.position == 1 and ev.trueRoot == TRUE_ROOT
    assert ev.catchers == 1 and ev.slashed == 1
    right = tx.events.filter(d.manager.AttestationJudgedRight)
    assert [(e.unitId, e.verifier) for e in right] == [(unit, honest.address)]
    # nothing is paid yet (the verdict trusts C, which can still be disputed); the honest
    # verifier's bond comes back: its challenge earns no share, its sealed RIGHT attestation does
    assert tx.events.filter(d.manager.JackpotPaid) == []
    assert tx.events.filter(d.manager.DisputeVoided)[0].challenger == honest.address
    assert d.manager.credits(honest) == honest_credit + bond
    assert d.manager.jackpot() == jackpot
    assert d.manager.verifierStatus(unit, lazy)[0] == V_SLASHED
    assert tx.events.filter(d.manager.AttestationJudgedWrong)[0].amount == lock_of(d, unit)
    # judged WRONG, but its lock S stays locked until finalize: the verdict trusts C, which can
    # still be disputed
    assert d.registry.getNode(lazy).stake == lazy_stake
    assert d.registry.getNode(lazy).locked >= lock_of(d, unit)
    # the solver proved its forced error: nothing of its stake is touched
    assert d.registry.getNode(d.solvers[0]) == solver_node
    u = d.manager.getUnit(unit)
    assert u.status == U_VERIFYING and u.forcedRevealed and u.checkpointRoot == TRUE_ROOT
    # the voided game's later result changes nothing
    tx = d.arbiter.resolve(game, True, sender=d.other)
    assert tx.events.filter(d.manager.VoidedGameEnded)[0].unitId == unit
    assert d.manager.getUnit(unit).status == U_VERIFYING
    assert d.registry.getNode(d.solvers[0]) == solver_node
    # normal settlement follows with the true root; the slashed verifier gets no fee
    advance(chain, MGR_CFG["verifyWindow"] + 1)
    lazy_credit, honest_credit = d.manager.credits(lazy), d.manager.credits(honest)
    jackpot = d.manager.jackpot()
    tx = d.manager.finalize(unit, sender=d.other)
    assert tx.events.filter(d.manager.UnitFinalized)[0].solver == d.solvers[0].address
    assert d.manager.credits(lazy) == lazy_credit
    # C stood: the catcher is paid J (k = 1) on top of the whole fee (the one paid attester) ...
    paid = tx.events.filter(d.manager.JackpotPaid)
    assert [(p.unitId, p.catcher, p.amount) for p in paid] == [(unit, honest.address, FEE)]
    assert d.manager.credits(honest) == honest_credit + FEE + FEE
    # ... and the WRONG verifier's S is slashed into the jackpot (with the unit's tax)
    penalised = tx.events.filter(d.manager.VerifierPenalised)
    assert [(e.verifier, e.amount) for e in penalised] == [(lazy.address, lock_of(d, unit))]
    assert d.registry.getNode(lazy).stake == lazy_stake - lock_of(d, unit)
    tax = tx.events.filter(d.manager.UnitFinalized)[0].tax
    assert d.manager.jackpot() == jackpot + tax + lock_of(d, unit) - FEE
    assert d.registry.getNode(d.solvers[0]).locked == solver_node.locked - 100 * E18


def test_revealForced_twoAttestingCatchers_splitHalving(forced, chain, project):
    d = forced
    seed_jackpot(d, chain)
    unit, drawn = forced_unit(d, chain)
    attest(d, chain, unit, [(v, ends(d, unit, v)) for v in drawn])
    end_roots = [ends(d, unit, v) for v in drawn]
    tx = judge_of(project, d).revealForced(
        unit, as_tuple(reveal(endRoots=end_roots)), sender=d.other
    )
    right = tx.events.filter(d.manager.AttestationJudgedRight)
    assert [e.verifier for e in right] == [v.address for v in drawn]
    assert tx.events.filter(d.manager.ForcedErrorRevealed)[0].slashed == 0
    for v in drawn:
        assert d.manager.verifierStatus(unit, v)[0] == V_ATTESTED
    advance(chain, MGR_CFG["verifyWindow"] + 1)
    tx = d.manager.finalize(unit, sender=d.other)
    paid = tx.events.filter(d.manager.JackpotPaid)
    # k = 2 catchers: J / 2 each
    assert sorted((p.catcher, p.amount) for p in paid) == sorted(
        (v.address, FEE // 2) for v in drawn
    )


def test_revealForced_honestAndLazyAttesters_feeToTheHonestOnly(forced, chain, project):
    d = forced
    seed_jackpot(d, chain)
    unit, (honest, lazy) = forced_unit(d, chain)
    attest(d, chain, unit, [(honest, ends(d, unit, honest)), (lazy, ends(d, unit, lazy, False))])
    end_roots = [ends(d, unit, honest), ends(d, unit, lazy, honest=False)]
    tx = judge_of(project, d).revealForced(
        unit, as_tuple(reveal(endRoots=end_roots)), sender=d.other
    )
    assert [e.verifier for e in tx.events.filter(d.manager.AttestationJudgedRight)] == [
        honest.address
    ]
    assert [e.verifier for e in tx.events.filter(d.manager.AttestationJudgedWrong)] == [
        lazy.address
    ]
    assert d.manager.getUnit(unit).attestCount == 1
    advance(chain, MGR_CFG["verifyWindow"] + 1)
    before = d.manager.credits(honest), d.manager.credits(lazy)
    tx = d.manager.finalize(unit, sender=d.other)
    assert [(p.catcher, p.amount) for p in tx.events.filter(d.manager.JackpotPaid)] == [
        (honest.address, FEE)
    ]
    # the whole fee (one paid attester) and its catcher share J
    assert d.manager.credits(honest) == before[0] + FEE + FEE
    assert d.manager.credits(lazy) == before[1]
    assert d.registry.getNode(lazy).locked == 0  # its lock was slashed, nothing left to release


def test_finalize_catcherShareCappedByTheJackpot(project, accounts, chain):
    """At p = 50 % the fee may be 4 % of the reward, twice the tax. On a fresh deployment the
    jackpot holds, at finalize, only this unit's tax, J / 2: two catchers get J / 4 each (an equal
    share of the balance) instead of J / 2, and the jackpot is emptied, never overdrawn."""
    cfg = {**MGR_CFG, "forcedErrorBps": 5_000, "lazySlashFactor": 4}
    d = deploy_protocol(project, accounts, cfg)
    stake_nodes(d)
    d.registry.addStake(1_000 * E18, sender=d.solvers[0])  # collateral for the unforced tries
    for v in d.verifiers:
        d.registry.addStake(2_000 * E18, sender=v)
    judge, fee = judge_of(project, d), 4 * E18
    for attempt in range(1, 9):  # each assignment is forced with probability 1/2
        secret = bytes([attempt]) * 32
        unit = assigned(d, chain, d.solvers[0], secret, verificationFee=fee)
        if judge.isForced(secret, d.manager.getUnit(unit).assignSeed, 2)[0]:
            break  # (an unforced unit stays assigned: the solver staked for it)
    else:
        pytest.fail("no forced assignment in 8 tries")
    drawn = publish_and_draw(d, unit, secret)
    attest(d, chain, unit, [(v, ends(d, unit, v)) for v in drawn])
    end_roots = [ends(d, unit, v) for v in drawn]
    judge.revealForced(unit, as_tuple(reveal(secret, endRoots=end_roots)), sender=d.other)
    assert d.manager.jackpot() == 0
    advance(chain, MGR_CFG["verifyWindow"] + 1)
    tx = d.manager.finalize(unit, sender=d.other)
    tax = tx.events.filter(d.manager.UnitFinalized)[0].tax
    assert tax == fee // 2
    paid = [p.amount for p in tx.events.filter(d.manager.JackpotPaid)]
    assert paid == [tax // 2] * 2 and tax // 2 < fee // 2  # the cap binds
    assert d.manager.jackpot() == 0


def test_finalize_catcherPaidAfterTheWrongLocksArrive(forced, chain, project):
    """The catchers are paid last at finalize, from a jackpot that by then holds the unit's tax
    and the WRONG verifiers' locks S (slashed once C has stood): with an empty jackpot before,
    the one catcher still gets all of J."""
    d = forced
    reward, fee = 1_000 * E18, 20 * E18  # fee at the jackpot cap: 2 % of the reward
    d.registry.addStake(1_000 * E18, sender=d.solvers[0])  # collateral = the reward
    for v in d.verifiers:
        d.registry.addStake(4_000 * E18, sender=v)
    assert d.manager.jackpot() == 0
    unit, (honest, lazy) = forced_unit(d, chain, reward=reward, verificationFee=fee)
    lock = d.manager.verifierLockOf(d.manager.jobIdOf(unit))
    assert lock == (reward - fee - reward * 200 // 10_000) * 3 * 4 // 2 == 5_760 * E18
    for v in (honest, lazy):
        assert d.registry.getNode(v).locked == lock
    attest(d, chain, unit, [(honest, ends(d, unit, honest)), (lazy, ends(d, unit, lazy, False))])
    end_roots = [ends(d, unit, honest), ends(d, unit, lazy, honest=False)]
    tx = judge_of(project, d).revealForced(
        unit, as_tuple(reveal(endRoots=end_roots)), sender=d.other
    )
    assert tx.events.filter(d.manager.JackpotPaid) == []
    assert d.manager.jackpot() == 0
    advance(chain, MGR_CFG["verifyWindow"] + 1)
    tx = d.manager.finalize(unit, sender=d.other)
    tax = tx.events.filter(d.manager.UnitFinalized)[0].tax
    assert tax == reward * 200 // 10_000
    assert [(p.catcher, p.amount) for p in tx.events.filter(d.manager.JackpotPaid)] == [
        (honest.address, fee)
    ]
    assert d.manager.jackpot() == lock + tax - fee
    assert d.registry.getNode(lazy).locked == 0


def test_revealForced_wrongVerdict_lockReleasedWhenCIsOverturned(forced, chain, project):
    """A verdict trusts the solver's C. When a dispute then proves C wrong (here: the mock
    arbiter's ruling), the unit re-opens and the verifier judged WRONG keeps its whole stake,
    while the solver loses its collateral: a solver whose sealed C is itself wrong cannot get an
    honest verifier slashed, nor have the verifier that attested its C paid from the jackpot."""
    d = forced
    seed_jackpot(d, chain)
    unit, (right, wronged) = forced_unit(d, chain)
    attest(
        d, chain, unit, [(right, ends(d, unit, right)), (wronged, ends(d, unit, wronged, False))]
    )
    stake = d.registry.getNode(wronged).stake
    solver_stake = d.registry.getNode(d.solvers[0]).stake
    right_credit = d.manager.credits(right)
    end_roots = [ends(d, unit, right), ends(d, unit, wronged, honest=False)]
    judge_of(project, d).revealForced(unit, as_tuple(reveal(endRoots=end_roots)), sender=d.other)
    assert d.manager.verifierStatus(unit, wronged)[0] == V_SLASHED
    jackpot = d.manager.jackpot()
    # the verifier judged WRONG disputes the revealed C and wins
    d.manager.challenge(unit, b"\x66" * 32, sender=wronged)
    tx = d.arbiter.resolve(d.arbiter.gameCount(), True, sender=d.other)
    assert tx.events.filter(d.manager.DisputeResolved)[0].challengerWon
    assert d.manager.getUnit(unit).status == U_OPEN
    # the verifier judged RIGHT on the fallen C is not paid: no share, no fee
    assert tx.events.filter(d.manager.JackpotPaid) == []
    assert d.manager.credits(right) == right_credit
    node = d.registry.getNode(wronged)
    assert node.stake == stake and node.locked == 0
    assert d.registry.getNode(d.solvers[0]).stake == solver_stake - 100 * E18
    # the jackpot gets the solver's collateral less the challenger's share, no verifier lock
    collateral = 100 * E18
    assert d.manager.jackpot() == jackpot + collateral - collateral * 5_000 // 10_000


# ------------------------------------------------------------------ held dispute results


def held_unit(d: Protocol, chain, attested: bool = True) -> tuple[int, Any, int, Any]:
    """A forced unit whose honest drawn verifier challenged P (with the true root it replayed)
    and won before the reveal's slot ended: the win is held. With `attested` both drawn
    verifiers opened their seals first, so the reveal phase is open. Returns (unit, challenger,
    game, the receipt of the game's result)."""
    unit, drawn = forced_unit(d, chain)
    honest = drawn[1]
    d.manager.challenge(unit, TRUE_ROOT, sender=honest)
    game = d.arbiter.gameCount()
    if attested:
        attest(d, chain, unit, [(v, ends(d, unit, v)) for v in drawn])
    return unit, honest, game, d.arbiter.resolve(game, True, sender=d.other)


def test_onDisputeResolved_challengerWonBeforeRevealSlot_holdsResult(forced, chain):
    """The honest challenger of a forced round's P wins its game before the solver may reveal
    (here: within the challenge window): nothing moves yet, the unit stays Disputed with its
    dispute, and the result waits for the end of the reveal's slot."""
    d = forced
    seed_jackpot(d, chain)
    unit, drawn = forced_unit(d, chain)
    honest = drawn[1]
    d.manager.challenge(unit, TRUE_ROOT, sender=honest)
    game = d.arbiter.gameCount()
    dispute = tuple(d.manager.getDispute(unit))
    solver_node = d.registry.getNode(d.solvers[0])
    credit, jackpot = d.manager.credits(honest), d.manager.jackpot()
    deadline = d.manager.getUnit(unit).deadline

    tx = d.arbiter.resolve(game, True, sender=d.other)

    held = tx.events.filter(d.manager.DisputeResultHeld)
    until = deadline + 2 * MGR_CFG["revealWindow"]
    assert [(e.unitId, e.gameId, e.until) for e in held] == [(unit, game, until)]
    assert d.manager.heldUntil(unit) == until
    assert tx.events.filter(d.manager.DisputeResolved) == []
    u = d.manager.getUnit(unit)
    assert u.status == U_DISPUTED and u.deadline == deadline and u.attempt == 0
    assert tuple(d.manager.getDispute(unit)) == dispute  # the challenger and its bond stay
    assert d.manager.unitOfGame(game) == 0  # the game is gone: that marks the held result
    assert d.registry.getNode(d.solvers[0]) == solver_node
    assert d.manager.credits(honest) == credit and d.manager.jackpot() == jackpot
    # the drawn verifiers still seal and open their attestations (the reveal phase needs them)
    attest(d, chain, unit, [(v, ends(d, unit, v)) for v in drawn])
    assert d.manager.getUnit(unit).status == U_DISPUTED


def test_onDisputeResolved_revealPhaseOpen_holdsOneRevealWindow(forced, chain, project):
    """Every drawn verifier sealed and opened before the win: the solver could reveal already,
    so the hold lasts one revealWindow from the win, not until the end of the reveal's slot
    (a caught cheater's unit re-opens about a revealWindow after its game, not a day later)."""
    d = forced
    unit, drawn = forced_unit(d, chain)
    d.manager.challenge(unit, TRUE_ROOT, sender=drawn[1])
    game = d.arbiter.gameCount()
    attest(d, chain, unit, [(v, ends(d, unit, v)) for v in drawn])
    assert judge_of(project, d).revealPhaseOpen(unit)
    tx = d.arbiter.resolve(game, True, sender=d.other)
    until = tx.timestamp + MGR_CFG["revealWindow"]
    slot_end = d.manager.getUnit(unit).deadline + 2 * MGR_CFG["revealWindow"]
    assert until < slot_end
    assert tx.events.filter(d.manager.DisputeResultHeld)[0].until == until
    assert d.manager.heldUntil(unit) == until
    advance(chain, until - chain.pending_timestamp - 1)  # the next block is at `until`
    with reverts(d.manager, "ResultHeldUntil", unitId=unit, until=until):
        d.manager.settleDispute(unit, sender=d.other)
    advance(chain, until - chain.pending_timestamp + 1)
    tx = d.manager.settleDispute(unit, sender=d.other)
    assert tx.events.filter(d.manager.DisputeResolved)[0].challengerWon
    assert d.manager.getUnit(unit).status == U_OPEN


def test_settleDispute_beforeUntil_reverts(forced, chain):
    d = forced
    unit, _, game, tx = held_unit(d, chain, attested=False)
    until = tx.events.filter(d.manager.DisputeResultHeld)[0].until
    with reverts(d.manager, "ResultHeldUntil", unitId=unit, until=until):
        d.manager.settleDispute(unit, sender=d.other)
    advance(chain, until - chain.pending_timestamp - 1)  # the next block is at `until`
    with reverts(d.manager, "ResultHeldUntil", unitId=unit, until=until):
        d.manager.settleDispute(unit, sender=d.other)
    assert d.manager.getUnit(unit).status == U_DISPUTED


def test_settleDispute_afterUntil_slashesAndReopens(forced, chain):
    """No reveal came in the reveal's slot: anyone applies the held win, exactly as the game's
    result would have been applied at once (DisputeResolved, the same books)."""
    d = forced
    unit, honest, game, tx = held_unit(d, chain)
    until = tx.events.filter(d.manager.DisputeResultHeld)[0].until
    bond = d.manager.getDispute(unit).bond
    drawn = d.manager.getVerifiers(unit)
    stake = d.registry.getNode(d.solvers[0]).stake
    credit, jackpot = d.manager.credits(honest), d.manager.jackpot()
    advance(chain, until - chain.pending_timestamp + 1)

    tx = d.manager.settleDispute(unit, sender=d.other)

    ev = tx.events.filter(d.manager.DisputeResolved)
    assert [(e.unitId, e.gameId, e.challengerWon, e.challengeDeadline) for e in ev] == [
        (unit, game, True, 0)
    ]
    collateral = d.manager.collateralOf(d.manager.jobIdOf(unit))
    reward = collateral * MGR_CFG["challengerRewardBps"] // 10_000
    assert d.manager.credits(honest) == credit + bond + reward
    assert d.manager.jackpot() == jackpot + collateral - reward
    assert d.registry.getNode(d.solvers[0]).stake == stake - collateral
    u = d.manager.getUnit(unit)
    assert u.status == U_OPEN and u.attempt == 1
    assert tuple(d.manager.getDispute(unit)) == (0, "0x" + "00" * 20, 0)
    assert d.manager.heldUntil(unit) == 0
    for v in drawn:  # the verifier locks are released (the unit re-opened)
        assert d.registry.getNode(v).locked == 0
    # once only
    with reverts(d.manager, "WrongUnitStatus", expected=U_DISPUTED, actual=U_OPEN):
        d.manager.settleDispute(unit, sender=d.other)


def test_forcedReveal_duringHeldResult_voidsDispute(forced, chain, project):
    """The honest solver of a forced round reveals its forced error while the challenger's win
    is held: it keeps its collateral, the challenger gets its bond back, the unit returns to
    Verifying with the true root C, which then settles normally."""
    d = forced
    seed_jackpot(d, chain)
    unit, honest, game, _ = held_unit(d, chain)
    bond = d.manager.getDispute(unit).bond
    solver_node = d.registry.getNode(d.solvers[0])
    credit = d.manager.credits(honest)
    drawn = [by_address(d.verifiers, v) for v in d.manager.getVerifiers(unit)]

    tx = judge_of(project, d).revealForced(
        unit, as_tuple(reveal(endRoots=[ends(d, unit, v) for v in drawn])), sender=d.solvers[0]
    )

    voided = tx.events.filter(d.manager.DisputeVoided)
    assert [(e.unitId, e.gameId, e.challenger) for e in voided] == [(unit, game, honest.address)]
    assert d.manager.credits(honest) == credit + bond
    assert d.registry.getNode(d.solvers[0]) == solver_node
    u = d.manager.getUnit(unit)
    assert u.status == U_VERIFYING and u.forcedRevealed and u.checkpointRoot == TRUE_ROOT
    assert tuple(d.manager.getDispute(unit)) == (0, "0x" + "00" * 20, 0)
    assert d.manager.heldUntil(unit) == 0
    # nothing is left to settle, and the voided game ended already (no VoidedGameEnded to come)
    with reverts(d.manager, "WrongUnitStatus", expected=U_DISPUTED, actual=U_VERIFYING):
        d.manager.settleDispute(unit, sender=d.other)
    # C stands: the solver is paid and its collateral released
    advance(chain, u.deadline - chain.pending_timestamp + 1)
    tx = d.manager.finalize(unit, sender=d.other)
    assert tx.events.filter(d.manager.UnitFinalized)[0].solver == d.solvers[0].address
    node = d.registry.getNode(d.solvers[0])
    assert node.stake == solver_node.stake and node.locked == solver_node.locked - 100 * E18


def test_settleDispute_gameRunning_reverts(forced, chain):
    d = forced
    unit, drawn = forced_unit(d, chain)
    with reverts(d.manager, "WrongUnitStatus", expected=U_DISPUTED, actual=U_VERIFYING):
        d.manager.settleDispute(unit, sender=d.other)
    d.manager.challenge(unit, TRUE_ROOT, sender=drawn[1])
    game = d.arbiter.gameCount()
    advance(chain, MGR_CFG["verifyWindow"] + 2 * MGR_CFG["revealWindow"] + 1)
    with reverts(d.manager, "NoHeldResult", unitId=unit, gameId=game):
        d.manager.settleDispute(unit, sender=d.other)


def test_onDisputeResolved_challengerWonAfterRevealSlot_appliesAtOnce(forced, chain):
    """A game that outlasts the reveal's slot: the solver could have revealed before it ended,
    so the win applies at once."""
    d = forced
    unit, drawn = forced_unit(d, chain)
    d.manager.challenge(unit, TRUE_ROOT, sender=drawn[1])
    game = d.arbiter.gameCount()
    until = d.manager.getUnit(unit).deadline + 2 * MGR_CFG["revealWindow"]
    advance(chain, until - chain.pending_timestamp + 1)
    tx = d.arbiter.resolve(game, True, sender=d.other)
    assert tx.events.filter(d.manager.DisputeResultHeld) == []
    assert tx.events.filter(d.manager.DisputeResolved)[0].challengerWon
    assert d.manager.getUnit(unit).status == U_OPEN


def test_onDisputeResolved_oneSegmentJob_appliesAtOnce(forced, chain, project):
    """A one-segment round can never be forced (`ForcedErrors.isForced`): nothing could void
    the dispute, so a challenger's win applies at once, even within the challenge window."""
    d = forced
    unit = assigned(d, chain, d.solvers[0], steps=2)
    root = checkpoint_root(TRUE[:2])
    published = [b"\x66" * 32, TRUE[1]]  # wrong at step 0: the challenger's root differs
    d.manager.commitCheckpoints(
        unit, checkpoint_root(published), 2, TRUE[1], final_proof(published), "blob://one",
        seal(root, SECRET), sender=d.solvers[0],
    )  # fmt: skip
    for v in d.verifiers:
        d.registry.heartbeat(sender=v)
    d.manager.drawVerifiers(unit, sender=d.other)
    challenger = by_address(d.verifiers, d.manager.getVerifiers(unit)[0])
    d.manager.challenge(unit, root, sender=challenger)
    game = d.arbiter.gameCount()
    assert chain.pending_timestamp <= d.manager.getUnit(unit).deadline
    assert judge_of(project, d).holdEnd(unit) == 0
    tx = d.arbiter.resolve(game, True, sender=d.other)
    assert tx.events.filter(d.manager.DisputeResultHeld) == []
    assert tx.events.filter(d.manager.DisputeResolved)[0].challengerWon
    assert d.manager.heldUntil(unit) == 0
    assert d.manager.getUnit(unit).status == U_OPEN


def test_holdEnd_twoSegmentJob_isTheSlotEndWhileVerifiersMayStillSeal(forced, chain, project):
    """The same challenge over a two-segment job: held to the reveal slot's end."""
    d = forced
    unit, drawn = forced_unit(d, chain)
    d.manager.challenge(unit, TRUE_ROOT, sender=drawn[1])
    slot_end = d.manager.getUnit(unit).deadline + 2 * MGR_CFG["revealWindow"]
    assert judge_of(project, d).holdEnd(unit) == slot_end


def test_onDisputeResolved_solverWon_neverHeld(forced, chain):
    d = forced
    unit, drawn = forced_unit(d, chain)
    d.manager.challenge(unit, b"\x66" * 32, sender=drawn[1])
    tx = d.arbiter.resolve(d.arbiter.gameCount(), False, sender=d.other)
    assert tx.events.filter(d.manager.DisputeResultHeld) == []
    assert not tx.events.filter(d.manager.DisputeResolved)[0].challengerWon
    assert d.manager.getUnit(unit).status == U_VERIFYING


# ------------------------------------------------------------------ premature reveal


def test_reportPrematureReveal_beforeDraw_slashesSolver(forced, chain, project):
    d = forced
    unit = assigned(d, chain, d.solvers[0])
    d.manager.commitCheckpoints(
        unit,
        PUBLISHED_ROOT,
        3,
        TRUE[2],
        final_proof(PUBLISHED),
        "blob://forced",
        seal(TRUE_ROOT, SECRET),
        sender=d.solvers[0],
    )
    stake = d.registry.getNode(d.solvers[0]).stake
    credit = d.manager.credits(d.other)
    tx = judge_of(project, d).reportPrematureReveal(unit, SECRET, sender=d.other)
    ev = tx.events.filter(d.manager.PrematureRevealReported)[0]
    assert ev.solver == d.solvers[0].address and ev.reporter == d.other.address
    assert ev.slashed == 100 * E18
    assert d.registry.getNode(d.solvers[0]).stake == stake - 100 * E18
    assert d.manager.credits(d.other) == credit + 50 * E18  # challengerRewardBps of the collateral
    u = d.manager.getUnit(unit)
    assert u.status == U_OPEN and u.attempt == 1


def test_reportPrematureReveal_whileAssigned_slashes(forced, chain, project):
    d = forced
    unit = assigned(d, chain, d.solvers[0])
    judge_of(project, d).reportPrematureReveal(unit, SECRET, sender=d.whistleblower)
    assert d.manager.getUnit(unit).status == U_OPEN


def test_reportPrematureReveal_afterAllSealed_reverts(forced, chain, project):
    """Once every drawn verifier sealed, the verdicts are fixed: the secret helps nobody."""
    d = forced
    unit, drawn = forced_unit(d, chain)
    for v in drawn:
        seal_attestation(d, unit, v, ends(d, unit, v))
    with reverts(d.manager, "RevealNotPremature", unitId=unit):
        judge_of(project, d).reportPrematureReveal(unit, SECRET, sender=d.other)


def test_reportPrematureReveal_oneStillUnsealed_slashes(forced, chain, project):
    d = forced
    unit, drawn = forced_unit(d, chain)
    seal_attestation(d, unit, drawn[0], ends(d, unit, drawn[0]))
    judge_of(project, d).reportPrematureReveal(unit, SECRET, sender=d.other)
    assert d.manager.getUnit(unit).status == U_OPEN


def test_reportPrematureReveal_wrongSecret_reverts(forced, chain, project):
    d = forced
    unit = assigned(d, chain, d.solvers[0])
    with reverts(d.manager, "SecretMismatch", unitId=unit, expected=secret_hash(SECRET)):
        judge_of(project, d).reportPrematureReveal(unit, b"\x01" * 32, sender=d.other)


def test_reportPrematureReveal_openUnit_reverts(forced, chain, project):
    d = forced
    unit = post2(d, chain)
    with reverts(d.manager, "WrongUnitStatus", expected=U_ASSIGNED, actual=U_OPEN):
        judge_of(project, d).reportPrematureReveal(unit, SECRET, sender=d.other)


# ------------------------------------------------------------------ reveal reverts


def _responded(d: Protocol, chain) -> tuple[int, list[Any], list[list[bytes]]]:
    unit, drawn = forced_unit(d, chain)
    attest(d, chain, unit, [(v, ends(d, unit, v)) for v in drawn])
    return unit, drawn, [ends(d, unit, v) for v in drawn]


def test_revealForced_pendingVerifier_revealTooEarly(forced, chain, project):
    d = forced
    unit, drawn = forced_unit(d, chain)
    with reverts(d.manager, "RevealTooEarly", unitId=unit, pending=drawn[0].address):
        judge_of(project, d).revealForced(unit, as_tuple(reveal()), sender=d.solvers[0])


def test_revealForced_sealNotYetOpened_revealTooEarly(forced, chain, project):
    """Sealed is not enough: the reveal waits until each seal is opened or the reveal window is
    over, since the verdicts are judged on the opened roots."""
    d = forced
    unit, drawn = forced_unit(d, chain)
    for v in drawn:
        seal_attestation(d, unit, v, ends(d, unit, v))
    d.manager.attest(unit, ends(d, unit, drawn[1]), b"\x5a" * 32, sender=drawn[1])
    until = d.manager.getUnit(unit).deadline + MGR_CFG["revealWindow"]
    with reverts(
        d.manager, "RevealTooEarly", unitId=unit, pending=drawn[0].address, deadline=until
    ):
        judge_of(project, d).revealForced(unit, as_tuple(reveal()), sender=d.solvers[0])
    # after the reveal window the unopened seal counts as silence (verdict NONE)
    advance(chain, MGR_CFG["verifyWindow"] + MGR_CFG["revealWindow"] + 1)
    end_roots = [[], ends(d, unit, drawn[1])]
    tx = judge_of(project, d).revealForced(
        unit, as_tuple(reveal(endRoots=end_roots)), sender=d.solvers[0]
    )
    assert tx.events.filter(d.manager.ForcedErrorRevealed)[0].catchers == 1
    # the reveal re-opened the challenge window (disputeGrace), but not that seal: opened now,
    # with the verdict known, it would earn the fee without the risk
    assert d.manager.getUnit(unit).deadline >= chain.pending_timestamp
    with reverts(d.manager, "SealingClosed", unitId=unit):
        d.manager.attest(unit, ends(d, unit, drawn[0]), b"\x5a" * 32, sender=drawn[0])


def test_revealForced_whistleblowerChallenger_getsOnlyItsBondBack(forced, chain, project):
    """A challenge is public, so it earns no jackpot share (a copier would take it): the voided
    dispute's challenger gets its bond back, the sealed RIGHT verifiers are the catchers."""
    d = forced
    seed_jackpot(d, chain)
    unit, drawn = forced_unit(d, chain)
    d.manager.challenge(unit, TRUE_ROOT, sender=d.whistleblower)
    bond = d.manager.getDispute(unit).bond
    assert bond == d.manager.challengeBondOf(unit) > MGR_CFG["challengeBond"]  # the scaled bond
    credit = d.manager.credits(d.whistleblower)
    attest(d, chain, unit, [(v, ends(d, unit, v)) for v in drawn])
    tx = judge_of(project, d).revealForced(
        unit, as_tuple(reveal(endRoots=[ends(d, unit, v) for v in drawn])), sender=d.other
    )
    catchers = {e.verifier for e in tx.events.filter(d.manager.AttestationJudgedRight)}
    assert catchers == {v.address for v in drawn}
    assert d.manager.credits(d.whistleblower) == credit + bond


def test_sealAttestation_afterForcedReveal_sealingClosed(forced, chain, project):
    """Revealed after the window (both verifiers silent), the unit returns to Verifying for
    disputeGrace; a silent verifier cannot seal then, when the true root is public."""
    d = forced
    unit, drawn = forced_unit(d, chain)
    advance(chain, MGR_CFG["verifyWindow"] + 1)
    judge_of(project, d).revealForced(unit, as_tuple(reveal(endRoots=[[], []])), sender=d.other)
    assert d.manager.getUnit(unit).deadline >= chain.pending_timestamp
    with reverts(d.manager, "SealingClosed", unitId=unit):
        seal_attestation(d, unit, drawn[0], ends(d, unit, drawn[0]))
    with reverts(d.manager, "SealingClosed", unitId=unit):  # nor attest in the clear
        d.manager.attest(unit, ends(d, unit, drawn[0]), b"\x00" * 32, sender=drawn[0])


def test_revealForced_afterWindow_withSilentVerifier_allowed(forced, chain, project):
    d = forced
    unit, drawn = forced_unit(d, chain)
    advance(chain, MGR_CFG["verifyWindow"] + 1)
    tx = judge_of(project, d).revealForced(
        unit, as_tuple(reveal(endRoots=[[], []])), sender=d.other
    )
    assert tx.events.filter(d.manager.ForcedErrorRevealed)[0].catchers == 0


BAD_PROOF = [b"\x00" * 32] * 2


@pytest.mark.parametrize(
    ("overrides", "error", "args"),
    [
        ({"secret": b"\x01" * 32}, "SecretMismatch", {}),
        ({"trueRoot": b"\x02" * 32}, "SealMismatch", {}),
        ({"publishedProofs": [BAD_PROOF, BAD_PROOF]}, "BadCheckpointProof", {"position": 1}),
        ({"trueProofs": [BAD_PROOF, BAD_PROOF]}, "BadCheckpointProof", {"root": TRUE_ROOT}),
        # C's last entry must be the committed final root: a proof of another entry fails
        ({"finalProof": BAD_PROOF}, "BadCheckpointProof", {"position": 2, "root": TRUE_ROOT}),
        ({"endRoots": [[]]}, "WrongRevealLength", {"given": 1, "expected": 2}),
        ({"trueEntries": [TRUE[1]]}, "WrongRevealLength", {"given": 1, "expected": 2}),
        ({"checkpoints": (1, 1)}, "CheckpointsNotAscending", {"position": 1}),
        # segment 1 starts at the perturbed checkpoint 1: its judgement reads entry 2
        ({"checkpoints": (1,)}, "MissingCheckpoint", {"position": 2}),
    ],
)
def test_revealForced_badReveal_reverts(forced, chain, project, overrides, error, args):
    d = forced
    unit, _, end_roots = _responded(d, chain)
    shape = {k: overrides.pop(k) for k in ("checkpoints",) if k in overrides}
    r = reveal(**shape, **{"endRoots": end_roots, **overrides})
    with reverts(d.manager, error, **args):
        judge_of(project, d).revealForced(unit, as_tuple(r), sender=d.other)


def test_revealForced_trueListWithAnotherFinalRoot_reverts(forced, chain, project):
    """Issue #38 through a forced reveal: the solver publishes a list whose last entry is the
    committed final root but seals a C that ends elsewhere (honest up to checkpoint 2, then
    another root). C would replace the published root and a verifier agreeing with C could not
    challenge it, so the reveal is refused whatever proof it carries."""
    d = forced
    unit = assigned(d, chain, d.solvers[0])
    moved = [TRUE[0], TRUE[1], b"\x99" * 32]  # C ends on another root than the committed one
    d.manager.commitCheckpoints(
        unit, PUBLISHED_ROOT, 3, TRUE[2], final_proof(PUBLISHED), "blob://x",
        seal(checkpoint_root(moved), SECRET), sender=d.solvers[0],
    )  # fmt: skip
    for v in d.verifiers:
        d.registry.heartbeat(sender=v)
    d.manager.drawVerifiers(unit, sender=d.other)
    drawn = [by_address(d.verifiers, v) for v in d.manager.getVerifiers(unit)]
    attest(d, chain, unit, [(v, ends(d, unit, v)) for v in drawn])
    end_roots = [ends(d, unit, v) for v in drawn]
    for proof in (final_proof(moved), final_proof(TRUE)):
        r = reveal(true=moved, endRoots=end_roots, finalProof=proof)
        with reverts(d.manager, "BadCheckpointProof", position=2, root=checkpoint_root(moved)):
            judge_of(project, d).revealForced(unit, as_tuple(r), sender=d.other)
    assert not d.manager.getUnit(unit).forcedRevealed


def test_revealForced_checkpointNotPerturbed_reverts(forced, chain, project):
    """A forced round whose solver published the truth at its perturbed checkpoint: judging
    verifiers there would pay copiers, so the reveal is refused (its C stands as published)."""
    d = forced
    unit = assigned(d, chain, d.solvers[0])
    d.manager.commitCheckpoints(
        unit,
        TRUE_ROOT,
        3,
        TRUE[2],
        final_proof(TRUE),
        "blob://x",
        seal(TRUE_ROOT, SECRET),
        sender=d.solvers[0],
    )
    for v in d.verifiers:
        d.registry.heartbeat(sender=v)
    d.manager.drawVerifiers(unit, sender=d.other)
    drawn = [by_address(d.verifiers, v) for v in d.manager.getVerifiers(unit)]
    attest(d, chain, unit, [(v, ends(d, unit, v)) for v in drawn])
    r = reveal(published=TRUE, endRoots=[ends(d, unit, v) for v in drawn])
    with reverts(d.manager, "NotPerturbed", unitId=unit, position=1):
        judge_of(project, d).revealForced(unit, as_tuple(r), sender=d.other)


def test_revealForced_wrongEndRoots_attestationMismatch(forced, chain, project):
    d = forced
    unit, drawn, end_roots = _responded(d, chain)
    end_roots[0] = [b"\x09" * 32] * len(end_roots[0])
    with reverts(d.manager, "AttestationMismatch", unitId=unit, verifier=drawn[0].address):
        judge_of(project, d).revealForced(
            unit, as_tuple(reveal(endRoots=end_roots)), sender=d.other
        )


def test_revealForced_twice_reverts(forced, chain, project):
    d = forced
    unit, _, end_roots = _responded(d, chain)
    judge = judge_of(project, d)
    judge.revealForced(unit, as_tuple(reveal(endRoots=end_roots)), sender=d.other)
    with reverts(d.manager, "ForcedAlreadyRevealed", unitId=unit):
        judge.revealForced(unit, as_tuple(reveal(endRoots=end_roots)), sender=d.other)


def test_revealForced_committedUnit_reverts(forced, chain, project):
    d = forced
    unit = assigned(d, chain, d.solvers[0])
    d.manager.commitCheckpoints(
        unit,
        PUBLISHED_ROOT,
        3,
        TRUE[2],
        final_proof(PUBLISHED),
        "blob://forced",
        seal(TRUE_ROOT, SECRET),
        sender=d.solvers[0],
    )
    with reverts(d.manager, "WrongUnitStatus", expected=U_VERIFYING, actual=U_COMMITTED):
        judge_of(project, d).revealForced(unit, as_tuple(reveal()), sender=d.other)


def test_revealForced_oneSegmentJob_notForced(forced, chain, project):
    d = forced
    unit = assigned(d, chain, d.solvers[0], steps=2)
    root = checkpoint_root(TRUE[:2])
    d.manager.commitCheckpoints(
        unit,
        root,
        2,
        TRUE[1],
        final_proof(TRUE[:2]),
        "blob://one",
        seal(root, SECRET),
        sender=d.solvers[0],
    )
    chain.mine(1)
    d.manager.drawVerifiers(unit, sender=d.other)
    advance(chain, MGR_CFG["verifyWindow"] + 1)
    with reverts(d.manager, "NotForced", unitId=unit):
        judge_of(project, d).revealForced(unit, as_tuple(reveal(trueRoot=root)), sender=d.other)


def test_applyForcedReveal_notJudge_reverts(forced, chain):
    d = forced
    with reverts(d.manager, "NotJudge", caller=d.other.address):
        d.manager.applyForcedReveal(1 << 32, 1, TRUE_ROOT, [], sender=d.other)
    with reverts(d.manager, "NotJudge", caller=d.other.address):
        d.manager.applyPrematureReveal(1 << 32, d.other, sender=d.other)


def test_isForced_mirrorsLibrary(forced, project):
    d = forced
    judge = judge_of(project, d)
    assert judge.isForced(SECRET, 7, 1) == (False, 0)  # one segment: never forced
    forced_bit, position = judge.isForced(SECRET, 7, 5)
    h = int.from_bytes(keccak(SECRET + (7).to_bytes(32, "big")), "big")
    assert forced_bit is True  # forcedErrorBps = 10 000
    assert position == 1 + (h >> 128) % 4


def test_revealForced_segmentBetweenTwoPerturbedCheckpoints_isJudgedOnItsStart(
    project, accounts, chain
):
    """With one segment per verifier, rho = 1 and every checkpoint 1..n-1 is perturbed: in a
    three-segment job segment 1 runs from perturbed P_1 to perturbed P_2. An honest replay from
    P_1 ends on neither C_2 nor P_2, and is RIGHT (judged on its start); a lazy copy of P_2 is
    WRONG. (Judged on its end instead, the honest replay would be WRONG.)"""
    cfg = {**MGR_CFG, "forcedErrorBps": 10_000, "segmentsPerVerifier": 1, "lazySlashFactor": 4}
    d = deploy_protocol(project, accounts, cfg)
    stake_nodes(d)
    d.registry.addStake(1_000 * E18, sender=d.solvers[0])
    for v in d.verifiers:
        d.registry.addStake(2_000 * E18, sender=v)
    judge = judge_of(project, d)
    true3 = [b"\x03" * 32, b"\xc1" * 32, b"\xc2" * 32, b"\xf1" * 32]
    pub3 = [true3[0], b"\xe1" * 32, b"\xe2" * 32, true3[3]]
    replayed = b"\xd2" * 32  # an honest replay's end from a perturbed start
    for _ in range(8):  # a drawn verifier samples segment 1 with probability 1/3
        unit = assigned(d, chain, d.solvers[0], steps=6, checkpointInterval=2)
        assert list(judge.perturbedCheckpoints(SECRET, d.manager.getUnit(unit).assignSeed, 3)) == [
            1,
            2,
        ]
        d.manager.commitCheckpoints(
            unit, checkpoint_root(pub3), 4, true3[3], final_proof(pub3), "blob://x",
            seal(checkpoint_root(true3), SECRET), sender=d.solvers[0],
        )  # fmt: skip
        for v in d.verifiers:
            d.registry.heartbeat(sender=v)
        d.manager.drawVerifiers(unit, sender=d.other)
        drawn = [by_address(d.verifiers, v) for v in d.manager.getVerifiers(unit)]
        sampled = {v: d.manager.sampledSegments(unit, v)[0] for v in drawn}
        if 1 in sampled.values():
            break
    else:
        pytest.fail("no drawn verifier sampled segment 1 in 8 units")
    between = next(v for v in drawn if sampled[v] == 1)
    others = [v for v in drawn if v != between]
    # the verifier between two perturbed checkpoints replays honestly; the others copy P
    ends = {v: [pub3[sampled[v] + 1]] for v in others} | {between: [replayed]}
    attest(d, chain, unit, [(v, ends[v]) for v in drawn])
    r = reveal(published=pub3, true=true3, checkpoints=(1, 2, 3), endRoots=[ends[v] for v in drawn])
    tx = judge.revealForced(unit, as_tuple(r), sender=d.other)
    right = [e.verifier for e in tx.events.filter(d.manager.AttestationJudgedRight)]
    wrong = [e.verifier for e in tx.events.filter(d.manager.AttestationJudgedWrong)]
    assert right == [between.address]
    assert sorted(wrong) == sorted(v.address for v in others)


@pytest.mark.parametrize("segments", [2, 3, 40])
def test_perturbedCheckpoints_areTheAnchorAndEveryThirdHash(forced, project, segments):
    """The anchor, and each other checkpoint 1..n-1 whose keccak(r, seed, c) is 0 mod 2m' - 1
    (m' = 2 here: rho = 1/3), ascending; never the initial or the final root."""
    judge = judge_of(project, forced)
    _, anchor = judge.isForced(SECRET, 7, segments)
    m = min(MGR_CFG["segmentsPerVerifier"], segments)

    def hashed(c: int) -> int:
        word = SECRET + (7).to_bytes(32, "big") + c.to_bytes(32, "big")
        return int.from_bytes(keccak(word), "big")

    expected = [c for c in range(1, segments) if c == anchor or hashed(c) % (2 * m - 1) == 0]
    assert list(judge.perturbedCheckpoints(SECRET, 7, segments)) == expected
    if segments == 40:
        assert 2 < len(expected) < 39  # more than the anchor, not all of them
    assert list(judge.perturbedCheckpoints(SECRET, 7, 1)) == []  # one segment: not forced


# ------------------------------------------------------------------ posting and committing


def test_postJob_feeAboveJackpotCap_reverts(forced, chain):
    d = forced
    params = job_params(now(chain), verificationFee=FEE + 1)
    with reverts(d.manager, "FeeAboveJackpotCap", fee=FEE + 1, cap=FEE):
        d.manager.postJob(params, sender=d.submitter)


def test_claim_zeroSecretHash_reverts(forced, chain):
    d = forced
    unit = post2(d, chain)
    with reverts(d.manager, "ZeroCommitment"):
        d.manager.claim(unit, b"\x00" * 32, sender=d.solvers[0])


def test_claimAndCommit_recordSecretAndSeal(forced, chain):
    d = forced
    unit = post2(d, chain)
    tx = d.manager.claim(unit, secret_hash(SECRET), sender=d.solvers[0])
    assert tx.events.filter(d.manager.UnitClaimed)[0].secretHash == secret_hash(SECRET)
    assert d.manager.secretHashOf(unit, 0) == secret_hash(SECRET)
    advance(chain, 601)
    d.manager.closeClaims(unit, sender=d.other)
    chain.mine(1)
    tx = d.manager.selectAssignee(unit, sender=d.other)
    seed = tx.events.filter(d.manager.UnitAssigned)[0].seed
    assert d.manager.getUnit(unit).assignSeed == int.from_bytes(seed, "big") % 2**64
    with reverts(d.manager, "ZeroCommitment"):
        d.manager.commitCheckpoints(
            unit,
            PUBLISHED_ROOT,
            3,
            TRUE[2],
            final_proof(PUBLISHED),
            "b",
            b"\x00" * 32,
            sender=d.solvers[0],
        )
    tx = d.manager.commitCheckpoints(
        unit,
        PUBLISHED_ROOT,
        3,
        TRUE[2],
        final_proof(PUBLISHED),
        "b",
        seal(TRUE_ROOT, SECRET),
        sender=d.solvers[0],
    )
    assert tx.events.filter(d.manager.CheckpointsCommitted)[0].seal == seal(TRUE_ROOT, SECRET)
    assert d.manager.getUnit(unit).seal == seal(TRUE_ROOT, SECRET)
