"""Detection probability: the closed form against brute force and a seeded Monte-Carlo, and its
monotonicity (hypothesis)."""

from __future__ import annotations

import itertools
import math

import pytest
from econkit import mc_detection, tolerance
from hypothesis import given
from hypothesis import strategies as st

from agents.economics import detection

CASES = [(10, 2, 2, 1), (10, 5, 1, 1), (20, 3, 3, 2), (40, 4, 2, 2), (50, 5, 2, 3), (30, 1, 4, 5)]
TRIALS = 40_000


def agrees_with_monte_carlo(formula) -> bool:
    """True iff `formula(n, m, v, b)` is within 5 standard errors of the simulation everywhere."""
    for i, (n, m, v, b) in enumerate(CASES):
        est = mc_detection(n, m, v, b, TRIALS, seed=1000 + i)
        if abs(est - formula(n, m, v, b)) > tolerance(est, TRIALS):
            return False
    return True


def test_detection_matches_monte_carlo() -> None:
    assert agrees_with_monte_carlo(detection.detection_probability)


def test_with_replacement_formula_is_distinguished_by_the_simulation() -> None:
    # The check above can fail: the with-replacement formula (a different, plausible model)
    # does not pass it.
    assert not agrees_with_monte_carlo(detection.detection_with_replacement)


@pytest.mark.parametrize("n,m,b", [(6, 2, 1), (7, 3, 2), (8, 4, 3), (5, 5, 1), (9, 1, 4)])
def test_miss_probability_matches_enumeration(n: int, m: int, b: int) -> None:
    subsets = list(itertools.combinations(range(n), m))
    misses = sum(1 for s in subsets if all(x >= b for x in s))
    assert detection.miss_probability(n, m, b) == pytest.approx(misses / len(subsets), abs=1e-15)


def test_known_values() -> None:
    # digits job at the protocol's 2 x 2 sampling: 1 - (C(9,2)/C(10,2))^2 = 1 - 0.8^2
    assert detection.detection_probability(10, 2, 2, 1) == pytest.approx(0.36, abs=1e-12)
    # every segment replayed by someone: certain
    assert detection.detection_probability(10, 10, 1, 1) == 1.0
    assert detection.cheated_segments(0.05, 1000) == 50
    assert detection.cheated_segments(0.05, 10) == 1
    assert detection.coverage_fraction(10, 2, 2) == pytest.approx(0.36)


sizes = st.integers(min_value=1, max_value=200)


@st.composite
def configs(draw):
    n = draw(sizes)
    m = draw(st.integers(min_value=1, max_value=n))
    b = draw(st.integers(min_value=1, max_value=n))
    v = draw(st.integers(min_value=1, max_value=5))
    return n, m, v, b


@given(configs())
def test_detection_increases_with_m_v_b(cfg) -> None:
    n, m, v, b = cfg
    d = detection.detection_probability(n, m, v, b)
    assert 0.0 <= d <= 1.0
    if m < n:
        assert detection.detection_probability(n, m + 1, v, b) >= d
    assert detection.detection_probability(n, m, v + 1, b) >= d
    if b < n:
        assert detection.detection_probability(n, m, v, b + 1) >= d
    # a strict gain while a miss is still possible
    if m < n - b and d < 1.0:
        assert detection.detection_probability(n, m + 1, v, b) > d


@given(configs())
def test_without_replacement_beats_with_replacement(cfg) -> None:
    n, m, v, b = cfg
    assert (
        detection.detection_probability(n, m, v, b)
        >= detection.detection_with_replacement(n, m, v, b) - 1e-12
    )


@given(configs())
def test_miss_bounded_by_independent_draws(cfg) -> None:
    # C(n-b, m)/C(n, m) = prod (n-b-i)/(n-i) <= (1 - b/n)^m
    n, m, _, b = cfg
    assert detection.miss_probability(n, m, b) <= (1 - b / n) ** m + 1e-12


@given(st.integers(2, 400), st.integers(1, 3))
def test_min_segments_is_least(n: int, v: int) -> None:
    b = detection.cheated_segments(0.05, n)
    m = detection.min_segments_for(n, v, b, 0.9)
    if m is None:
        assert detection.detection_probability(n, n, v, b) < 0.9
        return
    assert detection.detection_probability(n, m, v, b) >= 0.9
    if m > 1:
        assert detection.detection_probability(n, m - 1, v, b) < 0.9


def test_large_job_reaches_target_within_budget() -> None:
    # n = 1000, 5 % cheat, v = 2: m = 44 is the least m with >= 99 %, at 8.8 % replay
    b = detection.cheated_segments(0.05, 1000)
    assert detection.min_segments_for(1000, 2, b, 0.99) == 44
    assert detection.detection_probability(1000, 46, 2, b) >= 0.99
    assert detection.replay_fraction(1000, 46, 2) <= 0.10
    assert math.isclose(detection.replay_fraction(1000, 46, 2), 0.092)


def test_chain_sampler_is_uniform_over_distinct_subsets() -> None:
    # The model assumes each verifier's m segments are a uniform m-subset; `chain_sample` is the
    # contract's sampler (tests/contracts/test_job_manager.py checks it against the chain). Over
    # 6 000 (seed, verifier) pairs every 2-subset of 6 segments (15) comes up 400 times within 5
    # standard errors, and no draw repeats a segment (a with-replacement sampler would).
    n, m, trials = 6, 2, 6_000
    counts: dict[tuple[int, ...], int] = {}
    for i in range(trials):
        segs = detection.chain_sample(1 + 2 * (i // 3), f"0x{i % 3 + 1:040x}", m, n)
        assert len(set(segs)) == m and all(0 <= s < n for s in segs)
        key = tuple(sorted(segs))
        counts[key] = counts.get(key, 0) + 1
    assert len(counts) == math.comb(n, m)
    expected = trials / math.comb(n, m)
    sd = math.sqrt(expected * (1 - 1 / math.comb(n, m)))
    assert all(abs(c - expected) <= 5 * sd for c in counts.values()), counts
    assert detection.chain_sample(7, f"0x{1:040x}", 9, 4) == [0, 1, 2, 3]  # m >= n: all
