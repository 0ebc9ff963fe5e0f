"""Shared helpers for the economics tests: seeded Monte-Carlo estimators of the model's
probabilities, independent of the closed forms they check."""

from __future__ import annotations

import math

import numpy as np


def sample_without_replacement(rng: np.random.Generator, trials: int, n: int, m: int) -> np.ndarray:
    """trials x m distinct uniform segments of n (the first m of a random permutation)."""
    keys = rng.random((trials, n))
    return (
        np.argpartition(keys, m - 1, axis=1)[:, :m] if m < n else np.tile(np.arange(n), (trials, 1))
    )


def mc_detection(n: int, m: int, v: int, b: int, trials: int, seed: int) -> float:
    """Share of trials in which some of v verifiers draws one of the b cheated segments.

    The cheated segments are the *last* b (placement does not matter, and a different placement
    from the closed form's derivation makes the check independent of it).
    """
    rng = np.random.default_rng(seed)
    caught = np.zeros(trials, dtype=bool)
    for _ in range(v):
        draws = sample_without_replacement(rng, trials, n, m)
        caught |= (draws >= n - b).any(axis=1)
    return float(caught.mean())


def tolerance(prob: float, trials: int) -> float:
    """5 standard errors of a Monte-Carlo share, plus a floor for probabilities near 0 or 1."""
    return 5.0 * math.sqrt(max(prob * (1 - prob), 1e-4) / trials)
