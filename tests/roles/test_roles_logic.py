"""The roles' pure decision logic: chain snapshot + memory -> actions, with intents that name
exactly one logical send (so re-deciding after a restart never sends twice)."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace

import pytest

from agents.dispute.player import Move, Phase
from agents.roles.actions import (
    AnswerData,
    Arena,
    Attest,
    Challenge,
    ClaimTimeout,
    ClaimUnit,
    ClaimWithSecret,
    CloseClaims,
    Commit,
    Defend,
    DrawVerifiers,
    ExpireAssignment,
    ExpireDataRequest,
    Finalize,
    GameMove,
    Offer,
    Play,
    Recheck,
    Replay,
    Report,
    ReportPrematureReveal,
    RequestData,
    Reveal,
    Seal,
    SelectAssignee,
    SettleDispute,
    Train,
)
from agents.roles.logic import (
    CLAIM_MARGIN_S,
    DRAW_FOLD_BLOCKS,
    FALLBACK_RANK,
    KEEPER_GRACE,
    MAX_KEEPER_GRACE,
    MAX_KEEPER_RANK,
    READ_BUDGET_MIN_S,
    READ_BUDGET_S,
    SEND_MARGIN_S,
    AggregateFacts,
    AttestationFacts,
    DataRequest,
    KeeperFacts,
    LeakFacts,
    Now,
    Side,
    SolverFacts,
    UnitStatus,
    UnitView,
    Verdict,
    VerifierFacts,
    VerifierStatus,
    aggregate_acts,
    attestation_done,
    chain_time_since,
    claim_send_refusal,
    claim_turn,
    final_data_acts,
    forced_reveal_open,
    game_act,
    held_result_due,
    keeper_acts,
    keeper_delay,
    keeper_grace,
    keeper_order,
    keeper_rank,
    leak_acts,
    parse_leak,
    premature_reveal_open,
    read_budget_s,
    rendezvous,
    seals_open,
    solver_acts,
    unclaimed_lapsed,
    verifier_acts,
    whistleblower_acts,
)
from agents.roles.solver import Solver

ME = "0x" + "11" * 20
OTHER = "0x" + "22" * 20
ZERO = "0x" + "00" * 20
UID = (7 << 32) | 0


def unit(
    status: UnitStatus,
    deadline: int = 1000,
    seed_block: int = 50,
    attempt: int = 0,
    assignee: str = ZERO,
) -> UnitView:
    return UnitView(
        UID,
        7,
        status,
        deadline,
        seed_block,
        attempt,
        assignee,
        b"\1" * 32,
        b"\2" * 32,
        "dir#0x" + "ab" * 32,
        0,
    )


def kinds(acts) -> list[type]:
    return [type(a) for a in acts]


def test_keeper_steps_follow_the_unit_state_machine():
    assert kinds(keeper_acts(unit(UnitStatus.OPEN), Now(10, 999))) == []
    assert kinds(keeper_acts(unit(UnitStatus.OPEN), Now(10, 1001))) == [CloseClaims]
    assert kinds(keeper_acts(unit(UnitStatus.SELECTING), Now(50, 1))) == []
    assert kinds(keeper_acts(unit(UnitStatus.SELECTING), Now(51, 1))) == [SelectAssignee]
    # a keeper draws only after the fold, in which the drawn verifiers' first answer draws
    committed = unit(UnitStatus.COMMITTED)
    assert keeper_acts(committed, Now(50 + DRAW_FOLD_BLOCKS, 1)) == []
    assert kinds(keeper_acts(committed, Now(51 + DRAW_FOLD_BLOCKS, 1))) == [DrawVerifiers]
    assert kinds(keeper_acts(unit(UnitStatus.VERIFYING), Now(60, 1000))) == []
    assert kinds(keeper_acts(unit(UnitStatus.VERIFYING), Now(60, 1001))) == [Finalize]
    # an assignee past its commit deadline (silent, or its commitment refused) is expired
    assert kinds(keeper_acts(unit(UnitStatus.ASSIGNED), Now(60, 1000))) == []
    assert kinds(keeper_acts(unit(UnitStatus.ASSIGNED), Now(60, 1001))) == [ExpireAssignment]
    for s in (UnitStatus.DISPUTED, UnitStatus.FINALIZED):
        assert keeper_acts(unit(s), Now(10**6, 10**9)) == []


SOLVERS = tuple("0x" + f"{i:02x}" * 20 for i in range(0x31, 0x36))
VERIFIERS = tuple("0x" + f"{i:02x}" * 20 for i in range(0x41, 0x44))


def keeper(me: str, **kw) -> KeeperFacts:
    return KeeperFacts(me, solvers=SOLVERS, verifiers=VERIFIERS, **kw)


def test_every_keeper_has_its_own_rank_and_waits_its_graces():
    """One keeper order per unit and step: each node has its own rank, the rank r keeper takes
    the step r graces after it is due, the submitter after every node."""
    u = unit(UnitStatus.SELECTING)
    ranks = sorted(keeper_rank(u, SelectAssignee, keeper(n)) for n in SOLVERS)
    assert ranks == list(range(len(SOLVERS)))
    for n in SOLVERS:
        rank = keeper_rank(u, SelectAssignee, keeper(n))
        due = 50 + keeper_delay(rank)
        assert keeper_acts(u, Now(due, 1), keeper=keeper(n)) == []
        assert kinds(keeper_acts(u, Now(due + 1, 1), keeper=keeper(n))) == [SelectAssignee]
    submitter = KeeperFacts(ME)
    assert keeper_rank(u, SelectAssignee, submitter) == FALLBACK_RANK
    assert keeper_acts(u, Now(50 + keeper_delay(FALLBACK_RANK), 1), keeper=submitter) == []
    # a node in no order of the step (a verifier, for selection) keeps as the fallback does
    assert keeper_rank(u, SelectAssignee, keeper(VERIFIERS[0])) == FALLBACK_RANK


def test_the_keepers_grace_grows_with_their_rounds():
    """Issue #45's N=200 run: with 4 s graces and rounds of tens of seconds, the first keeper's
    closeClaims and selectAssignee went out when the later ranks' graces were over too, and
    hundreds reverted as lost races. The grace is two of my longest recent rounds (within
    bounds), and the rank r keeper waits r of them."""
    assert keeper_grace([]) == KEEPER_GRACE
    assert keeper_grace([0.4, 1.1]) == KEEPER_GRACE
    assert keeper_grace([3.0, 7.2, 5.0]) == 15
    assert keeper_grace([60.0]) == MAX_KEEPER_GRACE
    # ranks up to MAX_KEEPER_RANK at the longest grace stay inside a seed's 256 blocks
    assert DRAW_FOLD_BLOCKS + keeper_delay(MAX_KEEPER_RANK, MAX_KEEPER_GRACE) < 256
    u = unit(UnitStatus.SELECTING)
    second = rendezvous(u.unit_id, u.attempt, SOLVERS)[1]
    slow = keeper(second, grace=15)
    assert keeper_acts(u, Now(50 + 15, 1), keeper=slow) == []
    assert kinds(keeper_acts(u, Now(50 + 16, 1), keeper=slow)) == [SelectAssignee]
    assert kinds(keeper_acts(u, Now(50 + KEEPER_GRACE + 1, 1), keeper=keeper(second))) == [
        SelectAssignee
    ]


def test_the_parties_of_a_step_keep_it_first():
    """The claimants close and select (in claim order), the assignee draws and finalizes, the
    winning challenger settles its held win, the requester expires its data request; then the
    pool in the unit's own order."""
    claimants = (SOLVERS[3], SOLVERS[1])
    u = unit(UnitStatus.OPEN)
    order = keeper_order(u, CloseClaims, keeper(ME, claimants=claimants))
    assert order[:2] == claimants and sorted(order) == sorted(SOLVERS)
    c = unit(UnitStatus.COMMITTED, assignee=SOLVERS[2])
    assert keeper_order(c, DrawVerifiers, keeper(ME))[0] == SOLVERS[2]
    assert keeper_rank(c, DrawVerifiers, keeper(SOLVERS[2])) == 0
    v = unit(UnitStatus.VERIFYING, assignee=SOLVERS[2])
    assert keeper_order(v, Finalize, keeper(ME)) == (SOLVERS[2],)
    held = replace(unit(UnitStatus.DISPUTED), result_held=True, held_until=500)
    assert keeper_order(held, SettleDispute, keeper(ME, challenger=VERIFIERS[1])) == (VERIFIERS[1],)
    req = DataRequest(VERIFIERS[2], 3, 500)
    asked = replace(unit(UnitStatus.DISPUTED), data_request=req)
    assert keeper_order(asked, ExpireDataRequest, keeper(ME)) == (VERIFIERS[2],)


def test_the_pool_order_differs_per_unit_and_attempt():
    """Rendezvous: each node comes first for its share of the units, and every agent computes
    the same order from the same pool (whatever the order it read the pool in)."""
    firsts = {rendezvous(uid << 32, 0, SOLVERS)[0] for uid in range(1, 40)}
    assert len(firsts) == len(SOLVERS)
    assert rendezvous(UID, 0, SOLVERS) == rendezvous(UID, 0, tuple(reversed(SOLVERS)))
    assert rendezvous(UID, 0, SOLVERS) != rendezvous(UID, 1, SOLVERS)


def test_solvers_take_turns_to_claim():
    """The unit's first solver claims at once; the one at rank r only if nobody claimed in r
    graces (its first is down or busy): one claim per unit when every solver is up."""
    u = unit(UnitStatus.OPEN)
    order = rendezvous(u.unit_id, u.attempt, SOLVERS)
    assert claim_turn(u, order[0], SOLVERS, (), 0)
    # claimed by a later rank while the first's round was busy: a second claim adds nothing
    assert not claim_turn(u, order[0], SOLVERS, (order[1],), 0)
    assert not claim_turn(u, order[2], SOLVERS, (), keeper_delay(2) - 1)
    assert claim_turn(u, order[2], SOLVERS, (), keeper_delay(2))
    assert not claim_turn(u, order[2], SOLVERS, (order[0],), 10**6)  # claimed: no need


def test_chain_time_counts_from_the_latest_block_read():
    """Issue #45's N=100 run: 214 claims landed past their window. The round's block, moved on
    by the wall time since it was read, was the check before a claim, but an eligibility check
    read a later block meanwhile and the round's block then counted as fresh: the margin
    was counted from a block read tens of seconds before the send."""
    round_now, latest = Now(10, 1000), Now(14, 1004)
    assert chain_time_since(round_now, latest, 25.2) == Now(14, 1030)
    assert chain_time_since(round_now, round_now, 0.0) == round_now
    assert chain_time_since(latest, round_now, 0.0) == latest  # never earlier than the decision's


def test_a_claim_is_checked_again_on_fresh_reads_right_before_its_send():
    """A claim planned on a round's read is sent only while the unit, read again, is still open
    for that attempt, its window still fits the claim's margin on a fresh block, and nobody
    else claimed it (one claimant per unit: the N=100 run sent 375 claims for 100 units)."""
    planned = replace(unit(UnitStatus.OPEN), claimants=())
    fresh = planned
    assert claim_send_refusal(planned, fresh, Now(20, 1000 - CLAIM_MARGIN_S), ME) is None
    assert "closes" in claim_send_refusal(planned, fresh, Now(20, 1000 - CLAIM_MARGIN_S + 1), ME)
    assert claim_send_refusal(planned, replace(fresh, claimants=(ME,)), Now(20, 900), ME) is None
    taken = claim_send_refusal(planned, replace(fresh, claimants=(OTHER,)), Now(20, 900), ME)
    assert taken == f"{OTHER} claimed it first"
    closed = replace(fresh, status=UnitStatus.SELECTING)
    assert "no longer open" in claim_send_refusal(planned, closed, Now(20, 900), ME)
    reopened = replace(fresh, attempt=1)
    assert "no longer open" in claim_send_refusal(planned, reopened, Now(20, 900), ME)
    # an extended window (closeClaims with no claimant) is checked on its new deadline
    extended = replace(fresh, deadline=2000)
    assert claim_send_refusal(planned, extended, Now(20, 1500), ME) is None


def test_keeper_intents_differ_per_attempt_and_window():
    a = keeper_acts(unit(UnitStatus.OPEN, deadline=1000), Now(1, 2000))[0].intent
    b = keeper_acts(unit(UnitStatus.OPEN, deadline=1500), Now(1, 2000))[0].intent
    c = keeper_acts(unit(UnitStatus.OPEN, deadline=1000, attempt=1), Now(1, 2000))[0].intent
    assert len({a, b, c}) == 3


def facts(**kw) -> SolverFacts:
    base = {"me": ME, "claimed": False, "eligible": True, "trained": False, "game_id": 0}
    base.update(kw)
    return SolverFacts(**base)


def test_solver_claims_once_while_the_window_is_open_with_margin():
    u = unit(UnitStatus.OPEN)
    assert kinds(solver_acts(u, Now(1, 900), facts())) == [ClaimUnit]
    assert solver_acts(u, Now(1, 900), facts(claimed=True)) == []
    assert solver_acts(u, Now(1, 900), facts(eligible=False)) == []
    assert solver_acts(u, Now(1, 1000 - SEND_MARGIN_S + 1), facts()) == []
    # a claim keeps the wider CLAIM_MARGIN_S: one planned closer to the deadline landed past it
    assert kinds(solver_acts(u, Now(1, 1000 - CLAIM_MARGIN_S), facts())) == [ClaimUnit]
    assert solver_acts(u, Now(1, 1000 - CLAIM_MARGIN_S + 1), facts()) == []
    # a re-opened unit (next attempt) is a new claim
    first = solver_acts(u, Now(1, 900), facts())[0].intent
    again = solver_acts(unit(UnitStatus.OPEN, attempt=1), Now(1, 900), facts())[0].intent
    assert first != again


def test_only_a_solver_that_will_claim_extends_an_unclaimed_window():
    """Issue #45's N=200 run: with every solver busy, keepers extended the windows of 114
    waiting units over and over (5,157 closeClaims in 30 minutes). An Open unit whose window
    passed with no claimant is extended by the solver eligible to claim it (which then claims),
    by no other keeper, nor by the submitter; a unit with claimants is closed as before."""
    lapsed = unit(UnitStatus.OPEN)
    now = Now(1, 1000 + KEEPER_GRACE * FALLBACK_RANK + 1)  # every keeper's graces are over
    me = keeper(SOLVERS[0])
    assert kinds(solver_acts(lapsed, now, facts(keeper=me))) == [CloseClaims]
    assert solver_acts(lapsed, now, facts(keeper=me, eligible=False)) == []
    claimed = replace(me, claimants=(OTHER,))
    assert kinds(solver_acts(lapsed, now, facts(keeper=claimed, eligible=False))) == [CloseClaims]
    assert unclaimed_lapsed(lapsed, ()) and not unclaimed_lapsed(lapsed, (OTHER,))
    assert not unclaimed_lapsed(lapsed, None)  # claimants not known: kept as before


def test_solver_trains_then_commits_only_its_own_assignment():
    mine = unit(UnitStatus.ASSIGNED, assignee=ME)
    assert kinds(solver_acts(mine, Now(1, 900), facts())) == [Train]
    assert kinds(solver_acts(mine, Now(1, 900), facts(trained=True))) == [Commit]
    assert solver_acts(mine, Now(1, 999), facts(trained=True)) == []  # too late to be mined
    theirs = unit(UnitStatus.ASSIGNED, assignee=OTHER)
    assert solver_acts(theirs, Now(1, 900), facts()) == []


def test_solver_defends_its_disputed_unit_and_finalizes_it():
    d = unit(UnitStatus.DISPUTED, assignee=ME)
    assert kinds(solver_acts(d, Now(1, 1), facts(game_id=3))) == [Defend]
    assert solver_acts(unit(UnitStatus.DISPUTED, assignee=OTHER), Now(1, 1), facts(game_id=3)) == []
    v = unit(UnitStatus.VERIFYING, assignee=ME)
    # the assignee is the first keeper of its finalize
    assert kinds(solver_acts(v, Now(1, 1001), facts(keeper=KeeperFacts(ME)))) == [Finalize]
    other = unit(UnitStatus.VERIFYING, assignee=OTHER)
    assert solver_acts(other, Now(1, 1000 + KEEPER_GRACE + 1), facts()) == []


def vfacts(**kw) -> VerifierFacts:
    base = {
        "me": ME,
        "status": VerifierStatus.PENDING,
        "verdict": None,
        "game_id": 0,
        "my_challenge": False,
    }
    base.update(kw)
    return VerifierFacts(**base)


def test_verifier_replays_then_seals_or_challenges_and_seals():
    u = unit(UnitStatus.VERIFYING)
    assert kinds(verifier_acts(u, Now(1, 900), vfacts())) == [Replay]
    seal = verifier_acts(u, Now(1, 900), vfacts(verdict=Verdict.AGREE))
    assert kinds(seal) == [Seal] and seal[0].intent == f"seal:{UID}:0"
    # a dissenter challenges (publicly) and seals its own roots too
    assert kinds(verifier_acts(u, Now(1, 900), vfacts(verdict=Verdict.DISAGREE))) == [
        Challenge,
        Seal,
    ]
    assert verifier_acts(u, Now(1, 900), vfacts(status=VerifierStatus.NONE)) == []
    assert verifier_acts(u, Now(1, 900), vfacts(status=VerifierStatus.ATTESTED)) == []
    assert verifier_acts(u, Now(1, 1000), vfacts(verdict=Verdict.AGREE)) == []  # window closing
    # no seal after a forced reveal (the true root is public)
    revealed = replace(u, forced_revealed=True)
    assert verifier_acts(revealed, Now(1, 900), vfacts(verdict=Verdict.AGREE)) == []


def test_the_last_verifier_to_answer_attests_in_the_clear():
    u = unit(UnitStatus.VERIFYING)
    last = vfacts(verdict=Verdict.AGREE, last_to_answer=True)
    acts = verifier_acts(u, Now(1, 900), last)
    assert kinds(acts) == [Attest] and acts[0].intent == f"attest-clear:{UID}:0"
    both = verifier_acts(u, Now(1, 900), replace(last, verdict=Verdict.DISAGREE))
    assert kinds(both) == [Challenge, Attest]  # the challenge first: no finalize before it
    assert verifier_acts(u, Now(1, 1000), last) == []  # only in the window
    assert verifier_acts(replace(u, forced_revealed=True), Now(1, 900), last) == []
    assert kinds(verifier_acts(u, Now(1, 900), replace(last, verdict=None))) == [Replay]


def test_verifier_challenges_once_per_attempt_whatever_its_seal():
    u = unit(UnitStatus.VERIFYING)
    sealed = vfacts(status=VerifierStatus.SEALED, verdict=Verdict.DISAGREE)
    assert kinds(verifier_acts(u, Now(1, 900), sealed)) == [Challenge]
    assert verifier_acts(u, Now(1, 900), replace(sealed, challenged=True)) == []
    assert verifier_acts(u, Now(1, 1000), sealed) == []  # window closing


def test_verifier_opens_its_seal_once_seals_are_open_and_before_the_reveal_window_closes():
    u = unit(UnitStatus.VERIFYING)  # deadline 1000
    sealed = vfacts(status=VerifierStatus.SEALED, verdict=Verdict.AGREE, reveal_window=60)
    # another drawn verifier has not sealed and the window runs: wait
    assert verifier_acts(u, Now(1, 900), sealed) == []
    # every drawn verifier sealed: open now, inside the window
    acts = verifier_acts(u, Now(1, 900), replace(sealed, seals_open=True))
    assert kinds(acts) == [Attest] and acts[0].intent == f"attest:{UID}:0"
    # the window closed: open, until deadline + revealWindow (less the send margin)
    late = replace(sealed, seals_open=True)
    assert kinds(verifier_acts(u, Now(1, 1001), late)) == [Attest]
    assert kinds(verifier_acts(u, Now(1, 1060 - SEND_MARGIN_S), late)) == [Attest]
    assert verifier_acts(u, Now(1, 1060 - SEND_MARGIN_S + 1), late) == []
    assert verifier_acts(u, Now(1, 1061), late) == []
    # a seal is opened during a dispute too; an opened one is not opened again
    d = unit(UnitStatus.DISPUTED)
    assert kinds(verifier_acts(d, Now(1, 900), replace(sealed, seals_open=True))) == [Attest]
    attested = replace(sealed, status=VerifierStatus.ATTESTED, seals_open=True)
    assert verifier_acts(u, Now(1, 1001), attested) == []
    # a seal still closed at a forced reveal was judged silent: it is not opened after it
    revealed = replace(u, forced_revealed=True)
    assert verifier_acts(revealed, Now(1, 1001), late) == []


def test_seals_open_when_nobody_is_left_to_seal_or_the_window_closed():
    P, S, A = VerifierStatus.PENDING, VerifierStatus.SEALED, VerifierStatus.ATTESTED
    assert not seals_open([S, P], Now(1, 1000), 1000)
    assert seals_open([S, A], Now(1, 900), 1000)
    assert seals_open([S, S], Now(1, 900), 1000)
    assert seals_open([S, P], Now(1, 1001), 1000)


def test_forced_reveal_waits_for_every_seal_and_every_opening():
    P, S, A = VerifierStatus.PENDING, VerifierStatus.SEALED, VerifierStatus.ATTESTED
    N = VerifierStatus.NONE
    # deadline 1000, reveal window 60
    assert not forced_reveal_open([A, P], Now(1, 900), 1000, 60)  # one can still seal
    assert not forced_reveal_open([A, S], Now(1, 900), 1000, 60)  # one can still open
    assert not forced_reveal_open([A, S], Now(1, 1060), 1000, 60)
    assert forced_reveal_open([A, A], Now(1, 900), 1000, 60)  # every seal opened
    assert forced_reveal_open([A, P], Now(1, 1001), 1000, 60)  # silent past the window
    assert forced_reveal_open([A, S], Now(1, 1061), 1000, 60)  # a seal never opened
    assert forced_reveal_open([N], Now(1, 900), 1000, 60)


def test_verifier_plays_only_its_own_dispute():
    d = unit(UnitStatus.DISPUTED)
    mine = vfacts(status=VerifierStatus.ATTESTED, game_id=4, my_challenge=True, challenged=True)
    assert kinds(verifier_acts(d, Now(1, 1), mine)) == [Play]
    assert verifier_acts(d, Now(1, 1), vfacts(status=VerifierStatus.NONE, game_id=4)) == []


def test_verifier_seals_during_a_dispute_but_does_not_challenge():
    d = unit(UnitStatus.DISPUTED)
    assert kinds(verifier_acts(d, Now(1, 900), vfacts(game_id=4))) == [Replay]
    assert kinds(verifier_acts(d, Now(1, 900), vfacts(verdict=Verdict.AGREE))) == [Seal]
    assert kinds(verifier_acts(d, Now(1, 900), vfacts(verdict=Verdict.DISAGREE))) == [Seal]


def test_solver_reveals_its_forced_round_before_defending():
    for status in (UnitStatus.VERIFYING, UnitStatus.DISPUTED):
        u = unit(status, assignee=ME)
        acts = solver_acts(u, Now(1, 900), facts(trained=True, game_id=3, reveal_due=True))
        assert kinds(acts)[0] == Reveal
        assert Defend not in kinds(acts)
    u = unit(UnitStatus.VERIFYING, assignee=ME)
    assert Reveal not in kinds(solver_acts(u, Now(1, 900), facts(trained=True)))


def test_whistleblower_rechecks_reports_and_challenges_wrong_commitments():
    u = unit(UnitStatus.VERIFYING)
    key = f"{UID}:{OTHER}:9"
    assert kinds(whistleblower_acts(u, Now(1, 1), key, AttestationFacts(None, False, False))) == [
        Recheck
    ]
    assert whistleblower_acts(u, Now(1, 1), key, AttestationFacts("true", False, False)) == []
    f = AttestationFacts("false", True, False)
    assert kinds(whistleblower_acts(u, Now(1, 1), key, f)) == [Report, Challenge]
    f = AttestationFacts("false", True, True)
    done = unit(UnitStatus.DISPUTED)
    assert whistleblower_acts(done, Now(1, 1), key, f) == []


WINDOW = 7 * 86_400


@pytest.mark.parametrize(
    ("status", "verdict", "extra", "after_deadline", "court", "done"),
    [
        # a unit that may still change keeps every record open
        (UnitStatus.VERIFYING, "true", {}, 10**9, True, False),
        (UnitStatus.DISPUTED, "true", {}, 10**9, True, False),
        (UnitStatus.OPEN, "unavailable", {}, 10**9, False, False),
        # confirmed: nothing to do
        (UnitStatus.FINALIZED, "true", {}, 0, True, True),
        (UnitStatus.CANCELLED, "true", {}, 0, False, True),
        # not checked yet: the check is next
        (UnitStatus.FINALIZED, None, {}, 10**9, False, False),
        # unavailable: chased while the court may take it
        (UnitStatus.FINALIZED, "unavailable", {}, WINDOW, True, False),
        (UnitStatus.FINALIZED, "unavailable", {}, WINDOW + 1, True, True),
        (UnitStatus.FINALIZED, "unavailable", {}, 0, False, True),
        (UnitStatus.CANCELLED, "unavailable", {}, 0, True, True),
        # false: reported, and its court case resolved (or none opened and the window over)
        (UnitStatus.FINALIZED, "false", {"reported": False}, WINDOW + 1, False, False),
        (UnitStatus.FINALIZED, "false", {"reported": True}, 0, False, True),
        (UnitStatus.FINALIZED, "false", {"reported": True}, WINDOW, True, False),
        (UnitStatus.FINALIZED, "false", {"reported": True}, WINDOW + 1, True, True),
        (UnitStatus.FINALIZED, "false", {"reported": True, "court_game": 3}, 10**9, True, False),
        (
            UnitStatus.FINALIZED,
            "false",
            {"reported": True, "court_game": 3, "court_done": True},
            0,
            True,
            True,
        ),
    ],
)
def test_an_attestation_record_is_done_only_when_nothing_more_can_come_of_it(
    status, verdict, extra, after_deadline, court, done
):
    u = unit(status, deadline=1_000)
    facts = AttestationFacts(verdict, False, extra.get("reported", False), court=court,
                             court_game=extra.get("court_game", 0),
                             court_done=extra.get("court_done", False))  # fmt: skip
    now = Now(1, 1_000 + after_deadline)
    assert attestation_done(u, now, facts, WINDOW if court else None) is done


def test_game_acts_move_on_my_turn_and_claim_timeouts_on_theirs():
    move = Move("postCheckpoints", ([b"\0" * 32],))
    act = game_act(5, Side.DEFENDER, Phase.POST_CHECKPOINTS, 0, 100, Now(1, 50), move)
    assert act == GameMove("game:5:move:0", 5, move)
    assert game_act(5, Side.DEFENDER, Phase.POST_CHECKPOINTS, 0, 100, Now(1, 101), move) is None
    assert game_act(5, Side.DEFENDER, Phase.PICK_SEGMENT, 1, 100, Now(1, 50), None) is None
    act = game_act(5, Side.DEFENDER, Phase.PICK_SEGMENT, 1, 100, Now(1, 101), None)
    assert act == ClaimTimeout("game:5:timeout", 5)
    # the court's game: its own intents, its own contract (agents/roles/actions.py)
    court = game_act(5, Side.DEFENDER, Phase.PICK_SEGMENT, 1, 100, Now(1, 101), None, Arena.COURT)
    assert court == ClaimTimeout("court-game:5:timeout", 5, Arena.COURT)
    assert game_act(5, Side.CHALLENGER, Phase.RESOLVED, 9, 100, Now(1, 101), None) is None
    # each move number is its own intent: a restarted player resumes, never re-sends
    a = game_act(5, Side.CHALLENGER, Phase.PICK_SEGMENT, 1, 100, Now(1, 50), move)
    b = game_act(5, Side.CHALLENGER, Phase.PICK_STEP, 3, 100, Now(1, 50), move)
    assert a is not None and b is not None and a.intent != b.intent


# --- premature reveals (whistleblower --leaked-secrets) -----------------------------------------

SECRET = b"\x5a" * 32


def test_premature_reveal_open_while_a_seal_can_still_depend_on_the_secret():
    p, s, a = VerifierStatus.PENDING, VerifierStatus.SEALED, VerifierStatus.ATTESTED
    now = Now(100, 500)
    assert premature_reveal_open(unit(UnitStatus.COMMITTED, deadline=10), now, [])
    # Assigned: only before the commit deadline (after it, expireAssignment takes it all)
    assert premature_reveal_open(unit(UnitStatus.ASSIGNED), now, [])
    assert not premature_reveal_open(unit(UnitStatus.ASSIGNED, deadline=10), now, [])
    assert premature_reveal_open(unit(UnitStatus.VERIFYING), now, [s, p])
    # every drawn verifier sealed or attested: the verdicts are fixed, nothing to report
    assert not premature_reveal_open(unit(UnitStatus.VERIFYING), now, [s, a])
    # one seal opened: nobody may seal any more, so the secret decides nothing
    assert not premature_reveal_open(unit(UnitStatus.VERIFYING), now, [a, p])
    # the challenge window is over (with the send margin): an unsealed one can seal no more
    late = Now(100, 1000 - SEND_MARGIN_S + 1)
    assert not premature_reveal_open(unit(UnitStatus.VERIFYING), late, [p])
    assert premature_reveal_open(unit(UnitStatus.VERIFYING), Now(100, 1000 - SEND_MARGIN_S), [p])
    # revealed (the secret is in the reveal's calldata) or disputed (the game decides): refused
    revealed = replace(unit(UnitStatus.VERIFYING), forced_revealed=True)
    assert not premature_reveal_open(revealed, now, [p])
    assert not premature_reveal_open(unit(UnitStatus.DISPUTED), now, [s, p])
    for status in (UnitStatus.NONE, UnitStatus.OPEN, UnitStatus.SELECTING, UnitStatus.FINALIZED):
        assert not premature_reveal_open(unit(status), now, [p])


def test_a_third_party_finalizes_only_after_the_reveal_slot_the_assignee_at_once():
    """The job manager keeps 2 · revealWindow after the deadline for a forced round's reveal:
    the submitter's keeper waits it out (or until a reveal), the assignee need not."""
    u = unit(UnitStatus.VERIFYING)  # deadline 1000
    assert kinds(keeper_acts(u, Now(60, 1001))) == [Finalize]
    assert kinds(keeper_acts(u, Now(60, 1200), reveal_slot=200)) == []
    assert kinds(keeper_acts(u, Now(60, 1201), reveal_slot=200)) == [Finalize]
    revealed = replace(u, forced_revealed=True)
    assert kinds(keeper_acts(revealed, Now(60, 1001), reveal_slot=200)) == [Finalize]


def test_a_held_result_is_due_after_the_reveal_slot_only_when_its_game_is_over():
    """JobManager.settleDispute: Disputed, the dispute's game over (the challenger's win held
    for a forced round's reveal), after the challenge deadline + 2 · revealWindow."""
    held = replace(unit(UnitStatus.DISPUTED), result_held=True)  # deadline 1000
    assert not held_result_due(held, Now(60, 1200), 200)
    assert held_result_due(held, Now(60, 1201), 200)
    assert not held_result_due(held, Now(60, 1300), 200, delay=KEEPER_GRACE * 50)
    # the game still runs, or the unit is no longer Disputed (settled, or voided by the reveal)
    assert not held_result_due(unit(UnitStatus.DISPUTED), Now(60, 10**9), 200)
    for status in (UnitStatus.VERIFYING, UnitStatus.OPEN):
        assert not held_result_due(replace(held, status=status), Now(60, 10**9), 200)
    # a hold the manager ended early (the reveal phase was open at the win: one revealWindow)
    early = replace(held, held_until=1050)
    assert not held_result_due(early, Now(60, 1050), 200)
    assert held_result_due(early, Now(60, 1051), 200)


def test_keepers_and_the_winning_challenger_settle_a_held_result_once_due():
    held = replace(unit(UnitStatus.DISPUTED, attempt=3), result_held=True)
    # the submitter's keeper (every step, reveal_slot = 2 · revealWindow)
    assert keeper_acts(held, Now(60, 1200), reveal_slot=200) == []
    (act,) = keeper_acts(held, Now(60, 1201), reveal_slot=200)
    assert act == SettleDispute(f"settle:{UID}:3", UID)
    assert keeper_acts(unit(UnitStatus.DISPUTED), Now(60, 1201), reveal_slot=200) == []
    # the verifier that won it (reveal window 100) stops playing the ended game and settles
    mine = vfacts(status=VerifierStatus.ATTESTED, game_id=4, my_challenge=True, challenged=True)
    mine = replace(mine, reveal_window=100)
    assert verifier_acts(held, Now(1, 1200), mine) == []
    assert kinds(verifier_acts(held, Now(1, 1201), mine)) == [SettleDispute]
    other = replace(mine, my_challenge=False)
    assert verifier_acts(held, Now(1, 1201), other) == []
    # the solver does not defend the ended game; it may still reveal (that voids the dispute)
    solver_held = replace(held, assignee=ME)
    assert solver_acts(solver_held, Now(1, 1100), facts(trained=True, game_id=4)) == []
    acts = solver_acts(solver_held, Now(1, 1100), facts(trained=True, game_id=4, reveal_due=True))
    assert kinds(acts) == [Reveal]


def test_leak_reported_once_per_attempt_and_only_when_the_secret_matches():
    u = unit(UnitStatus.ASSIGNED, assignee=OTHER, attempt=2)
    now = Now(100, 500)
    (act,) = leak_acts(u, now, [], LeakFacts(SECRET, True, False))
    assert act == ReportPrematureReveal(f"premature:{UID}:2", UID, SECRET)
    assert leak_acts(u, now, [], LeakFacts(SECRET, False, False)) == []  # not the claim's secret
    assert leak_acts(u, now, [], LeakFacts(SECRET, True, True)) == []  # reported already
    # re-opened after the report: the next attempt is a new intent, once assigned again
    assert (
        leak_acts(replace(u, status=UnitStatus.OPEN), now, [], LeakFacts(SECRET, True, False)) == []
    )
    (again,) = leak_acts(replace(u, attempt=3), now, [], LeakFacts(SECRET, True, False))
    assert again.intent == f"premature:{UID}:3"


def test_parse_leak_accepts_a_32_byte_hex_secret():
    assert parse_leak(f"{UID}.hex", "0x" + "5a" * 32 + "\n") == (UID, SECRET)
    assert parse_leak(f"{hex(UID)}.hex", "5a" * 32) == (UID, SECRET)


@pytest.mark.parametrize(
    ("name", "text"),
    [
        (f"{UID}.txt", "5a" * 32),
        ("unit.hex", "5a" * 32),
        ("0.hex", "5a" * 32),
        (f"{2**256}.hex", "5a" * 32),
        (f"{UID}.hex", "5a" * 31),
        (f"{UID}.hex", "zz" * 32),
        (f"{UID}.hex", ""),
    ],
)
def test_parse_leak_refuses_a_bad_file(name: str, text: str):
    with pytest.raises(ValueError):
        parse_leak(name, text)


def test_verifier_judged_wrong_on_its_replay_challenges_the_revealed_root_once():
    # a forced reveal judged my replayed attestation WRONG: its lock is slashed at finalize
    # unless a dispute overturns C, and my replay says C is wrong, so I challenge C
    u = replace(unit(UnitStatus.VERIFYING), forced_revealed=True)
    wronged = vfacts(status=VerifierStatus.SLASHED, verdict=Verdict.DISAGREE, replayed=True)
    acts = verifier_acts(u, Now(1, 900), wronged)
    assert kinds(acts) == [Challenge] and acts[0].intent == f"challenge-revealed:{UID}:0"
    # even if it already challenged the published root before the reveal
    assert kinds(verifier_acts(u, Now(1, 900), replace(wronged, challenged=True))) == [Challenge]
    assert verifier_acts(u, Now(1, 900), replace(wronged, contested=True)) == []  # once
    assert verifier_acts(u, Now(1, 900), replace(wronged, replayed=False)) == []  # --lazy
    assert verifier_acts(u, Now(1, 1000), wronged) == []  # the window is closing
    not_revealed = unit(UnitStatus.VERIFYING)
    assert verifier_acts(not_revealed, Now(1, 900), wronged) == []
    right = replace(wronged, status=VerifierStatus.ATTESTED, challenged=True)
    assert verifier_acts(u, Now(1, 900), right) == []
    # during the dispute it plays its game
    d = replace(unit(UnitStatus.DISPUTED), forced_revealed=True)
    playing = replace(wronged, contested=True, game_id=9, my_challenge=True)
    assert kinds(verifier_acts(d, Now(1, 900), playing)) == [Play]


def test_judged_checkpoints_are_each_perturbed_touch_and_the_end_of_a_perturbed_start():
    from agents.roles.forced_reveal import judged_checkpoints

    # segment 2 starts at perturbed checkpoint 2 (judged against entry 3 too), segment 4 ends at
    # perturbed checkpoint 5, segments 0 and 7 touch nothing perturbed
    assert judged_checkpoints([[0, 2], [4, 7]], {2, 5}) == [2, 3, 5]
    assert judged_checkpoints([[1], [1]], {1, 2}) == [1, 2]  # twice drawn, read once
    assert judged_checkpoints([[], [0]], {3}) == []


def test_a_read_of_a_peers_data_gets_a_quarter_of_the_window_left_within_its_bounds():
    """The budget leaves three quarters of the window for the fallback (my own replay) and its
    send; never more than READ_BUDGET_S, never less than READ_BUDGET_MIN_S (a read made at or
    past the deadline still gets a healthy server's time)."""
    deadline = 1_000
    at = lambda left: read_budget_s(Now(1, deadline - SEND_MARGIN_S - left), deadline)  # noqa: E731
    assert at(20) == 5.0
    assert at(40) == READ_BUDGET_S == 10.0
    assert at(400) == READ_BUDGET_S
    assert at(8) == READ_BUDGET_MIN_S == 2.0
    assert at(0) == at(-50) == READ_BUDGET_MIN_S


# --- data requests (PROTOCOL §6.11) --------------------------------------------------------------


def _requested(answer_deadline: int = 1100, **kw) -> UnitView:
    req = DataRequest(requester=OTHER, checkpoint=10, answer_deadline=answer_deadline)
    return replace(unit(UnitStatus.DISPUTED, assignee=ME, **kw), data_request=req)


def test_the_assignee_answers_a_data_request_until_its_deadline_and_never_expires_it():
    u = _requested()
    assert kinds(solver_acts(u, Now(1, 1000), facts())) == [AnswerData]
    assert solver_acts(u, Now(1, 1100 - SEND_MARGIN_S + 1), facts()) == []  # too late to land
    assert solver_acts(u, Now(1, 1101), facts()) == []  # the solver never expires its own
    # not mine, or a game's dispute (no data request): nothing to post
    assert AnswerData not in kinds(solver_acts(u, Now(1, 1000), facts(me=OTHER)))
    plain = unit(UnitStatus.DISPUTED, assignee=ME)
    assert kinds(solver_acts(plain, Now(1, 1000), facts(game_id=5))) == [Defend]


def test_a_keeper_expires_an_unanswered_data_request_once_per_requester():
    u = _requested()
    assert keeper_acts(u, Now(1, 1100)) == []
    (act,) = keeper_acts(u, Now(1, 1101))
    assert act == ExpireDataRequest(f"expire-data:{UID}:0:{OTHER.lower()}", UID)
    # a keeper other than the requester waits its rank's graces
    fallback = KeeperFacts(ME)
    assert keeper_acts(u, Now(1, 1101), keeper=fallback) == []
    assert keeper_acts(u, Now(1, 1101 + keeper_delay(FALLBACK_RANK)), keeper=fallback) != []
    # the verifier's keeper steps do not include it: the submitter's keeper and anyone else do
    assert keeper_acts(u, Now(1, 1101), frozenset({DrawVerifiers})) == []
    again = _requested(attempt=1)
    assert keeper_acts(again, Now(1, 1101))[0].intent != act.intent


def test_a_drawn_verifier_holding_the_result_offers_it_and_answers_for_a_silent_assignee():
    """Attesting is holding the result (PROTOCOL §6.11): when the result is requested, a drawn
    verifier that holds it says where it serves it (once), and one that attested also answers
    once half the answer window (revealWindow 100) has passed without the assignee's answer, up
    to the answer deadline. Without the result, or for another checkpoint, it does neither."""
    u = replace(_requested(answer_deadline=1100), assignee=OTHER)
    holder = vfacts(status=VerifierStatus.ATTESTED, verdict=Verdict.AGREE, reveal_window=100,
                    result_requested=True, holds_result=True)  # fmt: skip
    assert Offer in kinds(verifier_acts(u, Now(1, 1000), holder))
    assert AnswerData not in kinds(verifier_acts(u, Now(1, 1049), holder))
    assert {Offer, AnswerData} <= set(kinds(verifier_acts(u, Now(1, 1050), holder)))
    offered = replace(holder, offered=True)
    assert kinds(verifier_acts(u, Now(1, 1060), offered)).count(Offer) == 0
    assert AnswerData not in kinds(verifier_acts(u, Now(1, 1101), offered))  # past the deadline
    sealed = replace(holder, status=VerifierStatus.SEALED)  # holds it, has not attested yet
    assert Offer in kinds(verifier_acts(u, Now(1, 1060), sealed))
    assert AnswerData not in kinds(verifier_acts(u, Now(1, 1060), sealed))
    for f in (
        replace(holder, holds_result=False),  # a lazy attestor: nothing to offer or answer with
        replace(holder, result_requested=False),  # another checkpoint asked for
        replace(holder, status=VerifierStatus.NONE),  # not drawn
    ):
        assert not {Offer, AnswerData} & set(kinds(verifier_acts(u, Now(1, 1060), f)))


def test_the_submitter_demands_the_final_checkpoint_only_when_its_read_failed_in_the_window():
    u = unit(UnitStatus.VERIFYING)
    (act,) = final_data_acts(u, Now(1, 900), "failed", 11)
    assert act == RequestData(f"request-data:{UID}:0:1000", UID, 10)  # the last of 11 checkpoints
    for read in ("ok", "pending", "requested", ""):
        assert final_data_acts(u, Now(1, 900), read, 11) == []
    assert final_data_acts(u, Now(1, 1000 - SEND_MARGIN_S + 1), "failed", 11) == []
    for s in (UnitStatus.COMMITTED, UnitStatus.DISPUTED, UnitStatus.FINALIZED):
        assert final_data_acts(unit(s), Now(1, 900), "failed", 11) == []
    other = final_data_acts(unit(UnitStatus.VERIFYING, attempt=1), Now(1, 900), "failed", 11)
    assert other[0].intent != act.intent


def test_a_later_block_read_does_not_reset_the_clock_of_a_claims_check():
    """The agent side of `chain_time_since`: a round reads its block, an eligibility check reads
    a later one, and the claim's check 30 s after the round's read counts from the later read
    (before the fix it fell back to the round's block unmoved: 1000, not 1030)."""
    from types import SimpleNamespace

    clock = SimpleNamespace(t=0.0)
    blocks = iter([{"number": 10, "timestamp": 1000}, {"number": 14, "timestamp": 1004}])

    async def get_block(tag):
        return next(blocks)

    solver = object.__new__(Solver)
    solver.w3 = SimpleNamespace(eth=SimpleNamespace(get_block=get_block))
    solver.agent = SimpleNamespace(clock=SimpleNamespace(monotonic=lambda: clock.t))
    round_now = asyncio.run(solver.now())
    clock.t = 4.0
    asyncio.run(solver.now())  # the eligibility check's read
    clock.t = 30.0
    assert solver.chain_time(round_now) == Now(14, 1030)


def stub_solver(units: list[UnitView], sent: list) -> Solver:
    """A Solver without its agent: the chain reads its claim path makes, answered from `units`
    (one per read) at block 20 (t=1000-ish), every send recorded in `sent` and mined."""
    from types import SimpleNamespace

    reads = iter(units)

    async def get_block(tag):
        return {"number": 20, "timestamp": 900}

    async def execute(act):
        sent.append(act)
        return object()

    async def read_unit(unit_id):
        return next(reads)

    solver = object.__new__(Solver)
    solver.me, solver.held = ME, None
    solver.w3 = SimpleNamespace(eth=SimpleNamespace(get_block=get_block))
    solver.agent = SimpleNamespace(clock=SimpleNamespace(monotonic=lambda: 0.0), account=None)
    solver.executor = SimpleNamespace(execute=execute)
    solver.log = logging.getLogger("test")
    solver.unit = read_unit
    solver.secret = lambda u: b"\1" * 32
    return solver


def test_the_solver_that_extends_an_unclaimed_window_claims_in_it_at_once():
    """Issue #45's N=100 run: 778 closeClaims, windows extended again and again. The eligible
    solver's extension is the claim's first step: it claims in the window it opened in the same
    act, instead of planning the claim a round later, when that window may have lapsed too."""
    lapsed = replace(unit(UnitStatus.OPEN, deadline=800), claimants=())
    extended = replace(lapsed, deadline=920)
    sent: list = []
    solver = stub_solver([extended, extended], sent)
    act = keeper_acts(lapsed, Now(20, 900))[0]

    async def handle(u: UnitView) -> None:
        await solver.handle(act, u, Now(20, 900))
        await solver.sends_landed()

    asyncio.run(handle(lapsed))
    assert kinds(sent) == [CloseClaims, ClaimWithSecret]
    assert sent[1].intent == f"claim:{UID}:0:920"
    # a unit with claimants is closed, not claimed
    sent.clear()
    asyncio.run(handle(replace(lapsed, claimants=(OTHER,))))
    assert kinds(sent) == [CloseClaims]


def test_an_extended_window_starts_the_claim_turns_again():
    """The turns count from the first sight of each window, not of the attempt: after an
    extension the later ranks wait their graces again (before, every solver had waited long
    enough and all claimed the extended window)."""
    from types import SimpleNamespace

    order = rendezvous(UID, 0, SOLVERS)
    solver = object.__new__(Solver)
    solver.me = order[1]

    async def live_pool(role):
        return tuple(SOLVERS)

    solver.live_pool = live_pool
    solver.manager = SimpleNamespace()
    first = replace(unit(UnitStatus.OPEN, deadline=1000), claimants=())
    assert not asyncio.run(solver.claim_turn(first, Now(1, 980)))
    assert asyncio.run(solver.claim_turn(first, Now(1, 980 + keeper_delay(1))))
    extended = replace(first, deadline=1030)
    assert not asyncio.run(solver.claim_turn(extended, Now(1, 1010)))
    assert asyncio.run(solver.claim_turn(extended, Now(1, 1010 + keeper_delay(1))))


# --- the aggregation game of version-3 rounds (logic.aggregate_acts) ---------------------------

AGG, CHAL, ME = "0x" + "aa" * 20, "0x" + "cc" * 20, "0x" + "ee" * 20
NOBODY = "0x" + "00" * 20


def agg_facts(status, aggregator=AGG, challenger=NOBODY, differs=True, game=0) -> AggregateFacts:
    return AggregateFacts(4, 1, 0, status, 100, aggregator, challenger, ME, differs, game)


def test_a_wrong_aggregate_is_challenged_in_its_window_and_no_other():
    from agents.core.enums import RoundStatus
    from agents.roles.actions import ChallengeAggregate

    committed = RoundStatus.COMMITTED
    assert aggregate_acts(agg_facts(committed), Now(1, 100)) == [
        ChallengeAggregate("challenge-aggregate:4:1:0", 4)
    ]
    assert aggregate_acts(agg_facts(committed), Now(1, 101)) == []  # the window closed
    assert aggregate_acts(agg_facts(committed, differs=False), Now(1, 50)) == []  # right
    assert aggregate_acts(agg_facts(committed, differs=None), Now(1, 50)) == []  # units not in
    assert aggregate_acts(agg_facts(committed, aggregator=ME.upper()), Now(1, 50)) == []  # mine
    assert aggregate_acts(agg_facts(RoundStatus.TRAINING), Now(1, 50)) == []
    assert aggregate_acts(agg_facts(RoundStatus.FINAL), Now(1, 50)) == []


def test_a_disputed_aggregate_is_played_by_its_aggregator_and_its_challenger_only():
    from agents.core.enums import RoundStatus
    from agents.roles.actions import PlayAggregate

    disputed = RoundStatus.DISPUTED
    mine = agg_facts(disputed, aggregator=ME, challenger=CHAL, game=9)
    assert aggregate_acts(mine, Now(1, 500)) == [PlayAggregate(4, 1, 9, Side.DEFENDER)]
    theirs = agg_facts(disputed, challenger=ME, game=9)
    assert aggregate_acts(theirs, Now(1, 500)) == [PlayAggregate(4, 1, 9, Side.CHALLENGER)]
    assert aggregate_acts(agg_facts(disputed, challenger=CHAL, game=9), Now(1, 5)) == []
    assert aggregate_acts(agg_facts(disputed, challenger=ME), Now(1, 5)) == []  # no game found
