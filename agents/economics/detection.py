"""Probability that sampled replays catch a cheating solver, and what the sampling costs.

A solver cheats in b of the n segments of a unit (it publishes end roots it did not compute).
Each of v verifiers replays m *distinct* segments drawn uniformly (without replacement), the
verifiers' draws independent of each other (each verifier's segments come from its own hash of
the verification seed, PROTOCOL §6.5). A cheat is caught iff some verifier draws a cheated
segment (one honest replay of a cheated segment suffices: the dispute game then proves it).

    miss one verifier   = C(n - b, m) / C(n, m)              (hypergeometric, zero successes)
    detection           = 1 - (C(n - b, m) / C(n, m)) ** v

The placement of the b cheated segments does not matter (the draw is exchangeable), so a
solver cannot hide by choosing *which* segments to skip, only how many.
"""

from __future__ import annotations

import math
from fractions import Fraction

from eth_abi import encode
from eth_utils import keccak


def cheated_segments(fraction: float, n: int) -> int:
    """b for a solver that cheats in a fraction f of n segments: ceil(f n), at least 1."""
    if not 0.0 < fraction <= 1.0:
        raise ValueError(f"cheat fraction {fraction} not in (0, 1]")
    return max(1, min(n, math.ceil(fraction * n - 1e-9)))


def miss_probability(n: int, m: int, b: int) -> float:
    """P(one verifier's m distinct uniform draws from n avoid all b cheated segments).

    Exact: C(n - b, m) / C(n, m), computed as a ratio of integers (no cancellation error).
    """
    _check(n, m, b)
    if m > n - b:
        return 0.0
    return float(Fraction(math.comb(n - b, m), math.comb(n, m)))


def detection_probability(n: int, m: int, v: int, b: int) -> float:
    """P(at least one of v independent verifiers draws a cheated segment)."""
    if v < 0:
        raise ValueError("v >= 0")
    return 1.0 - miss_probability(n, m, b) ** v


def detection_with_replacement(n: int, m: int, v: int, b: int) -> float:
    """The same with each of the v*m draws independent and uniform (with replacement).

    The contracts sampled this way until `MarketMath.sampleSegments` switched to distinct draws
    (`chain_sample`); kept as the comparison: it is always <= `detection_probability`, and the
    gap is the work a repeated draw wastes.
    """
    _check(n, m, b)
    return 1.0 - (1.0 - b / n) ** (m * v)


def chain_sample(seed: int, verifier: str, m: int, n: int) -> list[int]:
    """The segments `JobManager.sampledSegments` gives verifier `verifier` (PROTOCOL §6.5).

    Robert Floyd's algorithm over min(m, n) steps j = n - m' ... n - 1: t = keccak256(abi.encode(
    uint256 seed, address verifier, uint256 j)) mod (j + 1), taken unless already taken, else j.
    Distinct, uniform over the m'-subsets, in the contract's order; `seed` is the unit's
    verifySeed.
    """
    count = min(m, n)
    out: list[int] = []
    for j in range(n - count, n):
        t = int.from_bytes(keccak(encode(["uint256", "address", "uint256"], [seed, verifier, j])))
        t %= j + 1
        out.append(j if t in out else t)
    return out


def replay_fraction(n: int, m: int, v: int) -> float:
    """Total replay work as a fraction of the training: v * m / n."""
    return v * m / n


def coverage_fraction(n: int, m: int, v: int) -> float:
    """Expected fraction of distinct segments replayed by someone: 1 - (1 - m/n) ** v.

    Less than the replay fraction when verifiers' draws overlap: the overlap is the price of
    drawing independently (no verifier can learn another's segments, so none can collude on
    a partition).
    """
    return 1.0 - (1.0 - m / n) ** v


def min_segments_for(n: int, v: int, b: int, target: float) -> int | None:
    """Smallest m (per verifier) whose detection of b cheated segments reaches `target`."""
    if detection_probability(n, n, v, b) < target:
        return None
    lo, hi = 1, n
    while lo < hi:  # detection is non-decreasing in m (a superset of draws misses less)
        mid = (lo + hi) // 2
        if detection_probability(n, mid, v, b) >= target:
            hi = mid
        else:
            lo = mid + 1
    return lo


def _check(n: int, m: int, b: int) -> None:
    if n < 1 or not 0 <= m <= n or not 0 <= b <= n:
        raise ValueError(f"need 1 <= n, 0 <= m <= n, 0 <= b <= n (n={n}, m={m}, b={b})")
