"""Hypothesis strategies for binary32 bit patterns, weighted toward the hard classes."""

from __future__ import annotations

import os

from hypothesis import strategies as st

PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "ci")
# Scale of every example count: `fuzz` runs 20x the CI budget.
SCALE = 20 if PROFILE == "fuzz" else 1
BATCH = 128  # cases per hypothesis example (one eth_call)
# py-evm (ape's `test` network) executes EVM code ~50x slower than Anvil: there the suite runs
# 1/8 of the examples (>= 1,280 cases per function) so that both providers stay practical.
PYEVM_FACTOR = 1 / 8


def on_pyevm() -> bool:
    from ape import chain

    return chain.provider.name == "test"


def examples(n: int) -> int:
    """Hypothesis example count for a test whose CI budget on Anvil is n."""
    return max(1, round(n * SCALE * (PYEVM_FACTOR if on_pyevm() else 1)))


def min_cases() -> int:
    """Cases every per-function differential test must reach (10,000 on Anvil, CI profile)."""
    return 10_000 if not on_pyevm() else round(10_000 * PYEVM_FACTOR)


SIGN = 0x80000000

u32 = st.integers(0, 0xFFFFFFFF)
sign = st.sampled_from([0, SIGN])
mant = st.integers(0, 0x7FFFFF)
# mantissas with long runs of zeros or ones: they create exact ties and carries
mant_edge = st.one_of(
    st.sampled_from([0, 1, 2, 0x400000, 0x7FFFFF, 0x7FFFFE, 0x3FFFFF, 0x400001]),
    st.integers(0, 23).map(lambda k: (1 << k) - 1),
    st.integers(0, 22).map(lambda k: 1 << k),
    st.integers(0, 0xFFF).map(lambda k: k << 11),  # few significant bits
)
specials = st.sampled_from(
    [
        0x00000000,
        0x80000000,
        0x7F800000,
        0xFF800000,
        0x7FC00000,
        0xFFC00000,
        0x7F800001,
        0xFFFFFFFF,
        0x7FBFFFFF,
        0x00000001,
        0x80000001,
        0x007FFFFF,
        0x807FFFFF,
        0x00800000,
        0x80800000,
        0x7F7FFFFF,
        0xFF7FFFFF,
        0x3F800000,
        0xBF800000,
    ]
)
nan = st.builds(lambda s, m: s | 0x7F800000 | m, sign, st.integers(1, 0x7FFFFF))
subnormal = st.builds(lambda s, m: s | m, sign, st.one_of(mant, mant_edge))
tiny = st.builds(lambda s, e, m: s | (e << 23) | m, sign, st.integers(0, 30), mant)
huge = st.builds(lambda s, e, m: s | (e << 23) | m, sign, st.integers(200, 254), mant)
moderate = st.builds(lambda s, e, m: s | (e << 23) | m, sign, st.integers(100, 154), mant)
edge_mant = st.builds(lambda s, e, m: s | (e << 23) | m, sign, st.integers(0, 254), mant_edge)


def small_int_float(lo_bits: int = 1, hi_bits: int = 13) -> st.SearchStrategy[int]:
    """Floats k * 2^e with k a small odd integer: products/sums of these round at ties."""

    def build(s: int, k: int, e: int) -> int:
        k |= 1
        n = k.bit_length()
        # value k * 2^(e) with k < 2^24 is exact: mantissa = k << (24 - n), exponent = e + n - 1
        biased = e + n - 1 + 127
        if not 1 <= biased <= 254:
            biased = max(1, min(254, biased))
        return s | (biased << 23) | ((k << (24 - n)) & 0x7FFFFF)

    return st.builds(
        build,
        sign,
        st.integers(1 << (lo_bits - 1), (1 << hi_bits) - 1),
        st.integers(-140, 120),
    )


value = st.one_of(
    u32,
    specials,
    nan,
    subnormal,
    tiny,
    huge,
    moderate,
    edge_mant,
    small_int_float(),
)


def _near(base: int, delta: int, flip: int) -> int:
    """A pattern a few ulps from base (same binade region), with an optional sign flip."""
    mag = base & 0x7FFFFFFF
    mag = min(max(mag + delta, 0), 0x7F7FFFFF)
    return ((base & SIGN) ^ flip) | mag


def _half_ulp(a: int, k: int, s: int) -> int:
    """A value whose exponent is k binades below a's last bit: k = 0 is exactly half an ulp."""
    e = (a >> 23) & 0xFF
    be = e - 24 - k
    if be < 1:
        return s | 1
    return s | (be << 23)


# pairs built to hit the hard cases of addition/subtraction
add_pair = st.one_of(
    st.tuples(value, value),
    # cancellation: nearby magnitudes, opposite signs (or same, for sub)
    st.builds(
        lambda a, d, f: (a, _near(a, d, f)), value, st.integers(-4, 4), st.sampled_from([0, SIGN])
    ),
    # exact half-ulp and near-half-ulp addends: ties to even
    st.builds(
        lambda a, k, s, m: (a, _half_ulp(a, k, s) | m),
        st.one_of(moderate, edge_mant),
        st.integers(-1, 2),
        sign,
        st.sampled_from([0, 0, 1, 0x7FFFFF, 0x400000]),
    ),
    st.tuples(subnormal, subnormal),
    st.tuples(huge, huge),
    st.tuples(small_int_float(), small_int_float()),
)

mul_pair = st.one_of(
    st.tuples(value, value),
    st.tuples(small_int_float(8, 16), small_int_float(8, 16)),  # products with ties
    st.tuples(tiny, tiny),  # underflow
    st.tuples(subnormal, st.one_of(moderate, huge)),  # subnormal inputs and results
    st.tuples(huge, huge),  # overflow
    st.tuples(huge, st.one_of(tiny, subnormal)),
    st.tuples(st.one_of(specials, nan), value),
)

div_pair = st.one_of(
    st.tuples(value, value),
    st.tuples(small_int_float(1, 24), small_int_float(1, 12)),
    st.tuples(tiny, huge),  # underflow
    st.tuples(huge, tiny),  # overflow
    st.tuples(subnormal, st.one_of(moderate, subnormal)),
    st.tuples(value, st.one_of(specials, subnormal)),  # x/0, x/inf, NaN
)

PAIRS = {"add": add_pair, "sub": add_pair, "mul": mul_pair, "div": div_pair}


def batch_of(pair: st.SearchStrategy[tuple[int, int]]) -> st.SearchStrategy:
    return st.lists(pair, min_size=BATCH, max_size=BATCH)
