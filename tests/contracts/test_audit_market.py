# ruff: noqa: F811  (pytest fixtures imported from the neighbouring test modules)
"""Regressions of the market audit (AUDIT-market F1, F3, F5, F6, F7): forced reveals, premature
reports, the attestation court's start roots, sealing after a lost dispute, the claim horizon.

Reuses the `forced` deployment of test_forced_errors.py (every round of a two-segment job is
forced; checkpoint 1 is perturbed, and each drawn verifier samples both segments)."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import (
    E18,
    MGR_CFG,
    SALT,
    U_ASSIGNED,
    U_DISPUTED,
    U_FINAL,
    U_OPEN,
    U_VERIFYING,
    Protocol,
    advance,
    attest,
    challenger_wins,
    deploy_protocol,
    job_params,
    now,
    reverts,
    seal_attestation,
    stake_nodes,
)
from test_forced_errors import (
    HONEST,
    PUBLISHED,
    PUBLISHED_ROOT,
    SECRET,
    TRUE,
    TRUE_ROOT,
    as_tuple,
    assigned,
    ends,
    forced,  # noqa: F401  (the module fixture)
    forced_unit,
    judge_of,
    lock_of,
    reveal,
    seed_jackpot,
)

from agents.training.merkle import CHECKPOINT_DOMAIN, list_proof

V_PENDING, V_ATTESTED = 1, 2
#: JobManager.MAX_CLAIM_HORIZON: a first claim window closes at most a day after posting.
MAX_CLAIM_HORIZON = 86_400


@pytest.fixture(scope="module")
def forced_court(project, accounts) -> Protocol:
    """The `forced` deployment with an AttestationCourt (its MockSegmentGame)."""
    d = deploy_protocol(
        project, accounts, {**MGR_CFG, "forcedErrorBps": 10_000, "lazySlashFactor": 4}, court=True
    )
    stake_nodes(d)
    for v in d.verifiers:
        d.registry.addStake(2_000 * E18, sender=v)
    return d


# ------------------------------------------------------------------ F1: the reveal's own secret


def test_a_report_of_the_secret_a_reveal_published_is_not_premature(forced, chain, project):
    """A forced round with a silent verifier can be revealed only after the deadline; the reveal
    moves the deadline disputeGrace on, which put the silent verifier 'Pending in the window'
    again: anyone could copy r from the reveal's calldata and slash the honest solver."""
    d = forced
    judge = judge_of(project, d)
    unit, (honest, silent) = forced_unit(d, chain)
    seal_attestation(d, unit, honest, ends(d, unit, honest))
    advance(chain, MGR_CFG["verifyWindow"] + 1)
    d.manager.attest(unit, ends(d, unit, honest), SALT, sender=honest)
    end_roots = [ends(d, unit, honest), []]
    judge.revealForced(unit, as_tuple(reveal(endRoots=end_roots)), sender=d.solvers[0])
    u = d.manager.getUnit(unit)
    assert u.status == U_VERIFYING and u.forcedRevealed and u.deadline >= chain.pending_timestamp
    assert d.manager.verifierStatus(unit, silent)[0] == V_PENDING
    stake = d.registry.getNode(d.solvers[0]).stake
    with reverts(d.manager, "RevealNotPremature", unitId=unit):
        judge.reportPrematureReveal(unit, SECRET, sender=d.other)
    assert d.registry.getNode(d.solvers[0]).stake == stake
    assert d.manager.getUnit(unit).status == U_VERIFYING


# ------------------------------------------------------------------ F2: the reveal's slot


def test_a_lazy_verifier_that_opens_late_cannot_finalize_before_the_reveal(forced, chain, project):
    """A lazy verifier kept its seal closed past the deadline, so the reveal was refused; it then
    opened and finalized back to back (settling on the perturbed root, paid, its lock back). Now
    only the solver may finalize before one more revealWindow: the reveal lands, and the lazy
    verifier is judged WRONG and loses S."""
    d = forced
    judge = judge_of(project, d)
    seed_jackpot(d, chain)
    unit, (honest, lazy) = forced_unit(d, chain)
    seal_attestation(d, unit, honest, ends(d, unit, honest))
    seal_attestation(d, unit, lazy, ends(d, unit, lazy, honest=False))
    d.manager.attest(unit, ends(d, unit, honest), SALT, sender=honest)
    advance(chain, MGR_CFG["verifyWindow"] + 1)
    end_roots = [ends(d, unit, honest), ends(d, unit, lazy, honest=False)]
    with reverts(d.manager, "RevealTooEarly", unitId=unit, pending=lazy.address):
        judge.revealForced(unit, as_tuple(reveal(endRoots=end_roots)), sender=d.solvers[0])
    d.manager.attest(unit, ends(d, unit, lazy, honest=False), SALT, sender=lazy)
    slot_end = d.manager.getUnit(unit).deadline + 2 * MGR_CFG["revealWindow"]
    with reverts(d.manager, "AwaitingReveals", unitId=unit, revealDeadline=slot_end):
        d.manager.finalize(unit, sender=lazy)
    stake = d.registry.getNode(lazy).stake
    tx = judge.revealForced(unit, as_tuple(reveal(endRoots=end_roots)), sender=d.solvers[0])
    assert [e.verifier for e in tx.events.filter(d.manager.AttestationJudgedWrong)] == [
        lazy.address
    ]
    advance(chain, d.manager.getUnit(unit).deadline - chain.pending_timestamp + 1)
    d.manager.finalize(unit, sender=lazy)  # after a reveal anyone may, once C stood its grace
    assert d.registry.getNode(lazy).stake == stake - lock_of(d, unit)


def test_with_a_silent_verifier_the_reveal_keeps_its_slot_after_the_deadline(
    forced, chain, project
):
    """With a drawn verifier silent, the reveal and finalize both opened at deadline + 1, and
    whoever landed first won; a third party's finalize now waits out the reveal's slot, and
    then settles the unrevealed round as it stands."""
    d = forced
    unit, (lazy, silent) = forced_unit(d, chain)
    seal_attestation(d, unit, lazy, ends(d, unit, lazy, honest=False))
    deadline = d.manager.getUnit(unit).deadline
    advance(chain, deadline - chain.pending_timestamp + 1)
    d.manager.attest(unit, ends(d, unit, lazy, honest=False), SALT, sender=lazy)
    slot_end = deadline + 2 * MGR_CFG["revealWindow"]
    for who in (lazy, d.other):
        with reverts(d.manager, "AwaitingReveals", unitId=unit, revealDeadline=slot_end):
            d.manager.finalize(unit, sender=who)
    advance(chain, slot_end - chain.pending_timestamp + 1)
    d.manager.finalize(unit, sender=d.other)
    assert d.manager.getUnit(unit).status == U_FINAL


def test_the_solver_may_finalize_its_unit_once_no_seal_is_left_to_open(forced, chain, project):
    """The solver alone knows whether its round is forced, so it may waive the reveal's slot."""
    d = forced
    unit, drawn = forced_unit(d, chain)
    attest(d, chain, unit, [(v, ends(d, unit, v)) for v in drawn])
    advance(chain, d.manager.getUnit(unit).deadline - chain.pending_timestamp + 1)
    with reverts(d.manager, "AwaitingReveals", unitId=unit):
        d.manager.finalize(unit, sender=d.other)
    d.manager.finalize(unit, sender=d.solvers[0])
    assert d.manager.getUnit(unit).status == U_FINAL


# ------------------------------------------------------------------ F3: the published root


def test_after_a_forced_reveal_the_court_proves_start_roots_against_the_published_root(
    forced_court, chain, project
):
    """The reveal replaces the unit's root with C; the drawn verifiers replayed from P, so the
    court must keep proving start roots against P: a case from C_1 (which would put an honest
    catcher's step(P_1) to a game it cannot win) is refused, a case from the published data (the
    whistleblower agent's proofs) is still accepted."""
    d = forced_court
    judge = judge_of(project, d)
    unit, drawn = forced_unit(d, chain)
    assert (
        d.manager.publishedRootOf(unit) == PUBLISHED_ROOT == d.manager.getUnit(unit).checkpointRoot
    )
    attest(d, chain, unit, [(v, ends(d, unit, v)) for v in drawn])
    tx = judge.revealForced(
        unit, as_tuple(reveal(endRoots=[ends(d, unit, v) for v in drawn])), sender=d.other
    )
    honest = drawn[0]
    assert honest.address in [
        e.verifier for e in tx.events.filter(d.manager.AttestationJudgedRight)
    ]
    assert d.manager.getUnit(unit).checkpointRoot == TRUE_ROOT
    assert d.manager.publishedRootOf(unit) == PUBLISHED_ROOT

    segments = list(d.manager.sampledSegments(unit, honest))
    attested = ends(d, unit, honest)
    starts_perturbed = segments.index(1)
    assert attested[starts_perturbed] == HONEST[1]
    with reverts(d.court, "BadStartRoot", unitId=unit, segment=1):
        d.court.challengeAttestation(
            unit, honest, starts_perturbed, attested, TRUE[1],
            list_proof(CHECKPOINT_DOMAIN, TRUE, 1).siblings, sender=d.whistleblower,
        )  # fmt: skip
    # a start root proved against the published list, as the whistleblower agent builds it
    tx = d.court.challengeAttestation(
        unit, honest, segments.index(0), attested, PUBLISHED[0],
        list_proof(CHECKPOINT_DOMAIN, PUBLISHED, 0).siblings, sender=d.whistleblower,
    )  # fmt: skip
    assert tx.events.filter(d.court.AttestationChallenged)[0].startRoot == PUBLISHED[0]


def test_a_re_opened_units_next_commitment_is_its_published_root(forced, chain, project):
    """`publishedRootOf` reads the stored P only while this attempt's reveal stands: a re-opened
    unit (the premature report here) and its next commitment read the new root."""
    d = forced
    unit = assigned(d, chain, d.solvers[0])
    judge_of(project, d).reportPrematureReveal(unit, SECRET, sender=d.other)
    assert d.manager.getUnit(unit).status == U_OPEN
    assert d.manager.publishedRootOf(unit) == d.manager.getUnit(unit).checkpointRoot


# ------------------------------------------------------------------ F5: self-reports


def test_a_premature_report_after_the_commit_deadline_is_refused(forced, chain, project):
    """Past the commit deadline expireAssignment takes the whole collateral; a report through
    the solver's second address would have handed it challengerRewardBps of it back."""
    d = forced
    unit = assigned(d, chain, d.solvers[0])
    advance(chain, d.manager.getUnit(unit).deadline - chain.pending_timestamp + 1)
    with reverts(d.manager, "RevealNotPremature", unitId=unit):
        judge_of(project, d).reportPrematureReveal(unit, SECRET, sender=d.other)
    assert d.manager.getUnit(unit).status == U_ASSIGNED
    stake = d.registry.getNode(d.solvers[0]).stake
    collateral = d.manager.collateralOf(d.manager.jobIdOf(unit))
    d.manager.expireAssignment(unit, sender=d.other)
    assert d.registry.getNode(d.solvers[0]).stake == stake - collateral


def test_a_premature_report_while_disputed_is_refused_and_the_game_decides(forced, chain, project):
    """A solver being rightly disputed could void the dispute by reporting itself (the
    challenger then got only its bond back) and keep half its collateral."""
    d = forced
    unit, (challenger, _) = forced_unit(d, chain)
    d.manager.challenge(unit, b"\x77" * 32, sender=challenger)
    game = d.arbiter.gameCount()
    with reverts(d.manager, "RevealNotPremature", unitId=unit):
        judge_of(project, d).reportPrematureReveal(unit, SECRET, sender=d.other)
    assert d.manager.getUnit(unit).status == U_DISPUTED
    bond = d.manager.getDispute(unit).bond
    collateral = d.manager.collateralOf(d.manager.jobIdOf(unit))
    credit = d.manager.credits(challenger)
    challenger_wins(d, chain, game)
    assert d.manager.credits(challenger) == credit + bond + collateral * 5_000 // 10_000


# ------------------------------------------------------------------ F6: sealing after a dispute


def test_a_silent_verifier_cannot_copy_opened_roots_after_a_lost_dispute(forced, chain, project):
    """A dispute the solver wins extends the deadline after the other drawn verifier opened its
    seal (past the original deadline): the silent verifier may neither attest in the clear with
    the public roots nor seal them, and still loses its lock S at finalize."""
    d = forced
    unit, (honest, silent) = forced_unit(d, chain)
    seal_attestation(d, unit, honest, ends(d, unit, honest))
    d.manager.challenge(unit, b"\x99" * 32, sender=d.whistleblower)
    game = d.arbiter.gameCount()
    advance(chain, MGR_CFG["verifyWindow"] + 1)
    tx = d.manager.attest(unit, ends(d, unit, honest), SALT, sender=honest)
    public_roots = list(tx.events.filter(d.manager.Attested)[0].endRoots)
    d.arbiter.resolve(game, False, sender=d.other)
    assert d.manager.getUnit(unit).deadline >= chain.pending_timestamp  # the grace
    with reverts(d.manager, "SealingClosed", unitId=unit):
        d.manager.attest(unit, public_roots, SALT, sender=silent)
    with reverts(d.manager, "SealingClosed", unitId=unit):
        seal_attestation(d, unit, silent, public_roots)
    # nor does the reveal wait for it, nor is a report of the secret premature now
    judge = judge_of(project, d)
    with reverts(d.manager, "RevealNotPremature", unitId=unit):
        judge.reportPrematureReveal(unit, SECRET, sender=d.other)
    judge.revealForced(
        unit, as_tuple(reveal(endRoots=[ends(d, unit, honest), []])), sender=d.solvers[0]
    )
    stake = d.registry.getNode(silent).stake
    advance(chain, d.manager.getUnit(unit).deadline - chain.pending_timestamp + 1)
    d.manager.finalize(unit, sender=d.other)
    assert d.registry.getNode(silent).stake == stake - lock_of(d, unit)


# ------------------------------------------------------------------ F7: the claim horizon


def _post_at(d: Protocol, chain, claim_deadline: int) -> Any:
    params = {"steps": 4, "checkpointInterval": 2, "verificationFee": 2 * E18}
    return d.manager.postJob(
        job_params(now(chain), claimDeadline=claim_deadline, **params), sender=d.submitter
    )


def test_a_claim_deadline_beyond_the_horizon_is_refused(forced, chain):
    """No claim can be withdrawn before the window closes, so a far claimDeadline would lock every
    claimant's collateral for as long as the submitter liked, at no cost to it."""
    d = forced
    assert d.manager.MAX_CLAIM_HORIZON() == MAX_CLAIM_HORIZON
    far = now(chain) + 10 * 365 * 86_400
    with reverts(d.manager, "ClaimDeadlineTooFar", claimDeadline=far):
        _post_at(d, chain, far)
    # a few seconds either side of the horizon (the next block's timestamp is not exact)
    with reverts(d.manager, "ClaimDeadlineTooFar"):
        _post_at(d, chain, now(chain) + MAX_CLAIM_HORIZON + 5)
    tx = _post_at(d, chain, now(chain) + MAX_CLAIM_HORIZON - 5)
    assert tx.events.filter(d.manager.JobPosted)
