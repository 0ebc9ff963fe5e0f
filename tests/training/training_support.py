"""Helpers shared by the engine tests: per-profile example counts and float32 strategies."""

from __future__ import annotations

import os

import numpy as np
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "ci")


def examples(ci: int, fuzz: int | None = None) -> settings:
    """settings() with `ci` examples under the ci profile and `fuzz` (default 50x) under fuzz."""
    n = ci if PROFILE != "fuzz" else (fuzz if fuzz is not None else 50 * ci)
    return settings(max_examples=n, deadline=None, suppress_health_check=list(HealthCheck))


# exactly representable: the smallest subnormal, the largest subnormal, the smallest normal, max
SPECIALS = [
    float(np.float32(v))
    for v in (0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1.1754942e-38, 1.17549435e-38)
] + [float(np.finfo(np.float32).max), -float(np.finfo(np.float32).max)]

# any binary32: random finite values of every magnitude, subnormals, +-0, +-inf, NaN
any_f32 = st.one_of(
    st.floats(width=32, allow_nan=True, allow_infinity=True, allow_subnormal=True),
    st.sampled_from(SPECIALS),
)
# moderate values: products and sums stay finite, so float64 error bounds apply
moderate_f32 = st.floats(min_value=-1e3, max_value=1e3, width=32, allow_subnormal=True)


def f32_arrays(rows, cols, elements=any_f32):
    return hnp.arrays(np.float32, st.tuples(rows, cols), elements=elements)


def canon(a) -> np.ndarray:
    """uint32 bits with NaNs canonicalised (how values are compared and committed)."""
    a = np.ascontiguousarray(np.asarray(a, dtype=np.float32)).view(np.uint32).copy()
    a[(a & 0x7FFFFFFF) > 0x7F800000] = 0x7FC00000
    return a


def assert_bits_equal(x, y) -> None:
    cx, cy = canon(x), canon(y)
    assert cx.shape == cy.shape, (cx.shape, cy.shape)
    bad = np.argwhere(cx != cy)
    if bad.size:
        at = tuple(bad[0])
        raise AssertionError(f"{bad.shape[0]} differ, first at {at}: {cx[at]:#x} vs {cy[at]:#x}")
