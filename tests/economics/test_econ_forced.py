"""Forced errors: catch and skip probabilities against a simulation of the perturbation, and
the bounds the lazy slash is sized on."""

from __future__ import annotations

import numpy as np
import pytest
from econkit import tolerance
from hypothesis import given
from hypothesis import strategies as st

from agents.economics import forced
from agents.economics.params import Protocol, reference_jobs


def simulate(n: int, sample: list[int], skipped: list[int], rho: float, trials: int, seed: int):
    """Perturb checkpoints 1..n independently with prob. rho; replaying segment s is
    inconsistent iff checkpoint s or s + 1 is perturbed. Returns (P(some sampled segment
    inconsistent), P(some skipped one inconsistent while every replayed one is clean))."""
    rng = np.random.default_rng(seed)
    pert = rng.random((trials, n + 1)) < rho
    pert[:, 0] = False
    bad = pert[:, :-1] | pert[:, 1:]  # bad[:, s]: segment s inconsistent
    any_bad = bad[:, sample].any(axis=1)
    replayed = [s for s in sample if s not in skipped]
    clean = ~bad[:, replayed].any(axis=1) if replayed else np.ones(trials, dtype=bool)
    skip_wrong = clean & bad[:, skipped].any(axis=1)
    return float(any_bad.mean()), float(skip_wrong.mean())


@pytest.mark.parametrize(
    "n,sample,skipped",
    [
        (10, [3, 7], [7]),
        (10, [0, 1], [0]),  # non-generic: segment 0's only checkpoint is shared
        (10, [2, 3, 4], [3]),  # non-generic: both of 3's checkpoints are covered
        (12, [0, 5, 6, 11], [11]),
        (30, [1, 4, 9, 16, 25], [4, 16]),
    ],
)
def test_catch_and_skip_match_simulation(n, sample, skipped) -> None:
    rho = forced.perturb_rate(len(sample))
    trials = 60_000
    catch, skip = simulate(n, sample, skipped, rho, trials, seed=n + len(sample))
    exact_catch = forced.catch_probability(sample, rho)
    exact_skip = forced.skip_risk(sample, skipped, rho)
    assert abs(catch - exact_catch) <= tolerance(catch, trials)
    assert abs(skip - exact_skip) <= tolerance(skip, trials)


def test_non_generic_samples_carry_no_skip_risk() -> None:
    # the documented caveat, as numbers
    assert not forced.is_generic([0, 1])
    assert forced.skip_risk([0, 1], [0], 0.5) == 0.0
    assert not forced.is_generic([2, 3, 4])
    assert forced.skip_risk([2, 3, 4], [3], 0.2) == 0.0
    assert forced.is_generic([3, 7]) and forced.is_generic([1, 2])


@st.composite
def samples(draw):
    n = draw(st.integers(1, 60))
    m = draw(st.integers(1, min(n, 8)))
    sample = draw(st.lists(st.integers(0, n - 1), min_size=m, max_size=m, unique=True))
    return n, sample


@given(samples())
def test_catch_lower_bound_holds(cfg) -> None:
    _, sample = cfg
    rho = forced.perturb_rate(len(sample))
    assert (
        forced.catch_probability(sample, rho) >= forced.catch_lower_bound(len(sample), rho) - 1e-12
    )


@given(samples(), st.data())
def test_skip_risk_lower_bound_holds_for_generic_samples(cfg, data) -> None:
    _, sample = cfg
    m = len(sample)
    if m < 2 or not forced.is_generic(sample):
        return
    rho = forced.perturb_rate(m)
    skipped = data.draw(st.sampled_from(sample))
    assert forced.skip_risk(sample, [skipped], rho) >= forced.skip_risk_lower_bound(m, rho) - 1e-12


@given(st.integers(1, 500))
def test_rho_choice_and_e_bound(m: int) -> None:
    rho = forced.perturb_rate(m)
    assert forced.bound_ratio(m) >= 1.0 - 1e-12
    # rho = 1/(2m-1) maximises rho (1 - rho)^(2m-2) (checked against neighbours)
    best = forced.skip_risk_lower_bound(m, rho)
    for r in (rho * 0.9, min(1.0, rho * 1.1)):
        assert forced.skip_risk_lower_bound(m, r) <= best + 1e-15


def test_lazy_slash_makes_skipping_unprofitable_at_the_cost_bound() -> None:
    proto = Protocol()
    for job, _ in reference_jobs():
        m, n = job.segments_per_verifier, job.segments
        rho = forced.perturb_rate(m)
        risk = proto.forced_error_rate * forced.skip_risk_lower_bound(m, rho)
        bound = proto.lock_safety * job.payout(proto) / n
        assert risk * forced.lazy_slash(job, proto) >= bound


def test_forced_rounds_per_unit() -> None:
    assert forced.forced_rounds_per_unit(0.05) == 0.05
    with pytest.raises(ValueError):
        forced.forced_rounds_per_unit(1.0)


@pytest.mark.parametrize("n,m,v,cheated", [(20, 3, 2, [2, 6, 11]), (40, 5, 2, [1, 9, 17, 30])])
def test_forced_detection_spread_matches_simulation(n, m, v, cheated) -> None:
    # cheated segments pairwise >= 2 apart and not segment 0: the closed form is exact
    rho = forced.perturb_rate(m)
    trials = 60_000
    est = forced.forced_detection_mc(n, m, v, cheated, rho, np.random.default_rng(n), trials)
    exact = forced.forced_detection_spread(n, m, v, len(cheated), rho)
    assert abs(est - exact) <= tolerance(est, trials)


def test_forced_round_detection_below_normal() -> None:
    from agents.economics import detection

    for n, m, v, b in ((10, 2, 2, 1), (1000, 46, 2, 50)):
        rho = forced.perturb_rate(m)
        normal = detection.detection_probability(n, m, v, b)
        assert forced.forced_detection_spread(n, m, v, b, rho) < normal


# ------------------------------------------------------------------ the deployed mechanism


def simulate_anchored(n: int, touched: list[int], skipped: int, rho: float, trials: int, seed: int):
    """Anchor uniform over 1..n-1, every other checkpoint perturbed with probability rho.
    Returns (P(a touched checkpoint perturbed), P(`skipped` perturbed, the others clean))."""
    rng = np.random.default_rng(seed)
    pert = rng.random((trials, n + 1)) < rho
    pert[np.arange(trials), rng.integers(1, n, size=trials)] = True
    pert[:, 0] = pert[:, n] = False
    replayed = [c for c in touched if c != skipped]
    clean = ~pert[:, replayed].any(axis=1)
    return float(pert[:, touched].any(axis=1).mean()), float((clean & pert[:, skipped]).mean())


@pytest.mark.parametrize(
    "n,touched,skipped", [(10, [1, 2, 5], 5), (6, [2, 3, 4, 5], 3), (40, [7], 7)]
)
def test_anchored_probabilities_match_simulation(n, touched, skipped) -> None:
    rho, trials = 1 / 3, 200_000
    catch, skip = simulate_anchored(n, touched, skipped, rho, trials, seed=n)
    assert catch == pytest.approx(
        forced.anchored_catch_probability(n, len(touched), rho), abs=tolerance(catch, trials)
    )
    expected = forced.anchored_skip_risk(n, len(touched) - 1, rho)
    assert skip == pytest.approx(expected, abs=tolerance(skip, trials))


@given(m=st.integers(1, 60), extra=st.integers(0, 2_000))
def test_the_anchor_keeps_the_models_bounds(m: int, extra: int) -> None:
    """With rho = 1/(2m - 1): the skip risk at the most replayed checkpoints (2m - 2) equals the
    model's rho (1 - rho)^(2m - 2) for every n, is larger for fewer, and the catch probability
    is at least the model's 1 - (1 - rho)^t."""
    rho = forced.perturb_rate(m)
    n = 2 * m + extra  # room for 2m - 2 replayed checkpoints and a private one
    bound = forced.skip_risk_lower_bound(m, rho)
    assert forced.anchored_skip_risk(n, 2 * m - 2, rho) == pytest.approx(bound, rel=1e-9)
    for r in range(2 * m - 2):
        assert forced.anchored_skip_risk(n, r, rho) >= bound
    for t in (1, m, min(2 * m, n - 1)):
        assert forced.anchored_catch_probability(n, t, rho) >= 1 - (1 - rho) ** t - 1e-12
