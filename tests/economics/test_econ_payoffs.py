"""Dominance at the defaults, the dilemma without forced errors, and monotonicity."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agents.economics import analysis, detection, forced, payoffs
from agents.economics.params import Costs, Job, Protocol, covering_fee, reference_jobs

PROTO = Protocol()
JOBS = reference_jobs()


@pytest.mark.parametrize("job,costs", JOBS, ids=[j.name for j, _ in JOBS])
def test_defaults_make_honesty_strictly_dominant(job: Job, costs: Costs) -> None:
    res = analysis.check_dominance(job, costs, PROTO)
    assert res["ok"], res["claims"]
    ver = res["verifier"]
    for dev in ("lazy", "skip_one", "guess_disagree", "abstain"):
        assert ver["honest"] - ver[dev] > 0.05 * res["replay_cost_per_segment"], dev
    honest = res["solver"]["honest"]
    for row in res["solver"]["cheat_grid"]:
        assert row["profit"] < honest
    assert res["solver"]["single_segment"]["profit"] < honest


def test_every_cheat_loses_at_the_defaults() -> None:
    for job, costs in JOBS:
        honest = payoffs.solver_honest(job, costs, PROTO)
        for b in range(1, job.segments + 1):
            assert payoffs.solver_cheat(job, costs, PROTO, b).profit < honest


def test_the_dilemma_without_forced_errors() -> None:
    # p = 0 and an honest solver: laziness pays, and a solver facing lazy verifiers cheats.
    for job, costs in JOBS:
        honest, lazy = payoffs.verifier_without_forced_errors(job, costs)
        assert lazy > honest
        full = payoffs.solver_cheat(job, costs, PROTO, job.segments, detect=0.0)
        assert full.profit > payoffs.solver_honest(job, costs, PROTO)


def test_the_check_can_fail() -> None:
    job, costs = JOBS[1]
    # a tenth of the lazy slash: skipping a segment pays
    weak = PROTO.with_(lock_safety=PROTO.lock_safety / 10)
    assert not analysis.check_dominance(job, costs, weak)["claims"]["verifier_strictly_dominant"]
    # no collateral and training dearer than the payout: skipping everything and being
    # caught (lose nothing) beats training at a loss
    cheap = PROTO.with_(collateral=0.0)
    dear = Costs(train=1.2 * job.payout(PROTO))
    assert not analysis.check_dominance(job, dear, cheap)["claims"][
        "solver_strictly_dominant_all_b"
    ]
    # a fee above tax (1 - p) / p of the reward drains the jackpot
    rich = job.with_(fee=0.5 * job.reward)
    assert not analysis.check_dominance(rich, costs, PROTO)["claims"]["jackpot_self_funding"]


rates = st.floats(min_value=0.005, max_value=0.3)


@given(rates, rates, st.floats(0.0, 1e4))
def test_lazy_profit_decreases_with_p(p1: float, p2: float, slash: float) -> None:
    # at a fixed slash (the lock rule scales S with 1/p, keeping p S about constant)
    lo, hi = sorted((p1, p2))
    for job, costs in JOBS:
        a = payoffs.verifier_payoffs(job, costs, PROTO.with_(forced_error_rate=lo), slash=slash)
        b = payoffs.verifier_payoffs(job, costs, PROTO.with_(forced_error_rate=hi), slash=slash)
        assert b.lazy <= a.lazy + 1e-9
        assert b.honest - b.lazy >= a.honest - a.lazy - 1e-9  # the advantage grows with p


@given(rates)
def test_rule_keeps_lazy_loss_at_least_its_target(p: float) -> None:
    # with the lock rule, p x S stays >= kappa e (2m-1) payout / n whatever p is
    proto = PROTO.with_(forced_error_rate=p)
    for job, _ in JOBS:
        m, n = job.segments_per_verifier, job.segments
        target = proto.lock_safety * 2.718281828 * (2 * m - 1) * job.payout(proto) / n
        assert p * forced.lazy_slash(job, proto) >= target * (1 - 1e-9)


@given(
    st.integers(2, 400),
    st.integers(1, 20),
    st.integers(1, 4),
    st.floats(0.2, 0.9),
    st.floats(0.01, 0.2),
)
def test_dominance_holds_wherever_replay_is_within_the_bound(n, m, v, cost_share, p) -> None:
    """For any job whose replay cost is below kappa x payout / n and whose fee keeps the
    jackpot funded, the lazy slash rule makes every deviation lose (the rule is general)."""
    m = min(m, n)
    reward = 100.0
    costs = Costs(train=cost_share * reward * 0.6)
    job = Job("h", n * 10, 10, reward, 0.0, v, m)
    job = job.with_(fee=covering_fee(job, costs, 0.25))
    proto = PROTO.with_(forced_error_rate=p)
    if job.fee + proto.tax * reward >= reward:
        return
    c_r = costs.replay_segment(job)
    if c_r >= proto.lock_safety * job.payout(proto) / n:
        return
    ver = payoffs.verifier_payoffs(job, costs, proto)
    assert ver.honest > ver.lazy
    assert ver.honest > ver.guess_disagree
    assert ver.honest > ver.abstain
    if ver.skip_one is not None:
        assert ver.honest > ver.skip_one


@given(st.integers(1, 30), st.integers(1, 5))
def test_collusion_detection_between_bounds(m: int, b: int) -> None:
    job = Job("c", 300, 10, 100.0, 5.0, 2, min(m, 30))
    d = payoffs.collusion_detection(job, PROTO, b)
    one = detection.detection_probability(30, job.segments_per_verifier, 1, b)
    two = detection.detection_probability(30, job.segments_per_verifier, 2, b)
    assert one - 1e-12 <= d <= two + 1e-12


def test_reference_numbers_by_hand() -> None:
    job, costs = JOBS[0]  # digits: W 10, fee 2.75, c_t 5, n 10, m 2, v 2
    assert job.fee == pytest.approx(2.75)
    assert job.payout(PROTO) == pytest.approx(7.05)
    assert costs.replay_segment(job) == pytest.approx(0.55)
    assert PROTO.lazy_slash_factor() == 68
    assert forced.lazy_slash(job, PROTO) == pytest.approx(7.05 * 3 * 68 / 10)
    ver = payoffs.verifier_payoffs(job, costs, PROTO)
    # honest = F + p catch_lb J/2 - m c_r;  lazy = F - p catch_lb (F + S)
    assert ver.honest == pytest.approx(1.375 + 0.05 * 5 / 9 * 1.375 - 1.1)
    assert ver.lazy == pytest.approx(1.375 - 0.05 * 5 / 9 * (1.375 + 143.82))
    # skip_one = honest + c_r - p (4/27) (F + S + J/2)
    assert ver.skip_one == pytest.approx(
        ver.honest + 0.55 - 0.05 * 4 / 27 * (1.375 + 143.82 + 1.375)
    )


def test_challenge_bond_isTheChallengersShareOfTheCollateral_atLeastTheFloor() -> None:
    """B = max(floor, challenger share x X), as JobManager.challengeBondOf: the digits job's
    half of 10 is under the 10-token floor, the large job's half of 1 000 is not."""
    (digits, _), (large, _) = JOBS
    assert digits.challenge_bond(PROTO) == PROTO.challenge_bond == 10.0
    assert large.challenge_bond(PROTO) == 500.0


@pytest.mark.parametrize("job,costs", JOBS, ids=[j.name for j, _ in JOBS])
def test_guess_disagree_forfeitsTheScaledBond(job: Job, costs: Costs) -> None:
    """Outside forced rounds a guessing challenger loses B, the scaled bond: raising the floor
    above the scaled bond lowers the guess by (1 - p) x the difference, and no less."""
    base = payoffs.verifier_payoffs(job, costs, PROTO).guess_disagree
    floor = job.challenge_bond(PROTO) + 7.0
    raised = payoffs.verifier_payoffs(job, costs, PROTO.with_(challenge_bond=floor))
    assert raised.guess_disagree == pytest.approx(base - (1 - PROTO.forced_error_rate) * 7.0)


def test_deployed_mechanism_keeps_honesty_strictly_dominant() -> None:
    """What the contracts deploy (an anchor checkpoint besides the rho draws, PROTOCOL §8.1)
    keeps replaying every sampled segment strictly dominant for both reference jobs, with an
    empty jackpot too; its honest-vs-lazy margin is at least the model's (the anchor only adds
    catches). A tenth of the lock breaks it (so the check can fail)."""
    for job, costs in JOBS:
        for jackpot_available in (True, False):
            deployed = payoffs.verifier_payoffs(job, costs, PROTO, jackpot_available, anchored=True)
            model = payoffs.verifier_payoffs(job, costs, PROTO, jackpot_available)
            assert deployed.advantage > 0, (job.name, jackpot_available)
            assert deployed.honest - deployed.lazy >= model.honest - model.lazy - 1e-9
        tenth = forced.lazy_slash(job, PROTO) / 10
        weak = payoffs.verifier_payoffs(job, costs, PROTO, slash=tenth, anchored=True)
        assert weak.advantage < 0
