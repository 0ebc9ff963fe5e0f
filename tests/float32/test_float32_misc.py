"""Float32 comparisons, classification, rint, int conversions and pow2 against numpy float32 and
exact rationals; every NaN result is the canonical 0x7FC00000."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from f32_strategies import BATCH, add_pair, examples, min_cases, u32, value
from f32ref import (
    ABS,
    NAN,
    POS_INF,
    SIGN,
    canon,
    is_inf,
    is_nan,
    np_arr,
    np_arr_bits,
    round_fraction,
    to_fraction,
)
from hypothesis import given, settings
from hypothesis import strategies as st

EXAMPLES = 80  # x 128 cases = 10,240 per function (ci, Anvil)

BINARY = {"max": 4, "gt": 5, "lt": 6, "ge": 7, "le": 8, "eq": 9}
UNARY = {
    "isNaN": 0,
    "isInf": 1,
    "isSubnormal": 2,
    "canonical": 3,
    "neg": 4,
    "abs": 5,
    "rint": 6,
    "exponentField": 7,
    "mantissaField": 8,
}


def _np_binary(name: str, a: list[int], b: list[int]) -> list[int]:
    x, y = np_arr(a), np_arr(b)
    with np.errstate(all="ignore"):
        if name == "max":  # row_max step: NaN if either is NaN, else b > m ? b : m
            r = np.where(np.isnan(x) | np.isnan(y), np.float32(np.nan), np.where(y > x, y, x))
            return np_arr_bits(r.astype(np.float32))
        op = {"gt": np.greater, "lt": np.less, "ge": np.greater_equal, "le": np.less_equal}
        r = op[name](x, y) if name != "eq" else np.equal(x, y)
    return [int(v) for v in r]


def _exact_binary(name: str, a: int, b: int) -> int:
    if is_nan(a) or is_nan(b):
        return NAN if name == "max" else 0

    def val(v: int) -> Fraction | float:
        if is_inf(v):
            return float("inf") if not v & SIGN else float("-inf")
        return to_fraction(v)

    x, y = val(a), val(b)
    if name == "max":
        return b if y > x else a
    return int({"gt": x > y, "lt": x < y, "ge": x >= y, "le": x <= y, "eq": x == y}[name])


@pytest.mark.fuzz
def test_comparisons_and_max(f32h) -> None:
    checked = []

    @settings(max_examples=examples(EXAMPLES))
    @given(st.lists(st.one_of(add_pair, st.tuples(value, value)), min_size=BATCH, max_size=BATCH))
    def prop(pairs: list[tuple[int, int]]) -> None:
        # equal and sign-flipped pairs make the ±0 and tie cases frequent
        pairs = pairs + [(x, x) for x, _ in pairs[:16]] + [(x, x ^ SIGN) for x, _ in pairs[:16]]
        a = [p[0] for p in pairs]
        b = [p[1] for p in pairs]
        for name, op in BINARY.items():
            got = list(f32h.binaryMany(op, a, b))
            want_np = _np_binary(name, a, b)
            for i, (x, y) in enumerate(pairs):
                want = _exact_binary(name, x, y)
                assert want_np[i] == want, f"references disagree: {name}({x:#x}, {y:#x})"
                assert got[i] == want, f"{name}({x:#010x}, {y:#010x}) = {got[i]:#x}, want {want:#x}"
        checked.append(1)

    prop()
    assert BATCH * len(checked) >= min_cases(), f"only {len(checked)} batches ran"


def _np_unary(name: str, a: list[int]) -> list[int]:
    x = np_arr(a)
    u = np.array(a, dtype=np.uint32)
    tiny = np.finfo(np.float32).tiny
    with np.errstate(all="ignore"):
        if name == "isNaN":
            return [int(v) for v in np.isnan(x)]
        if name == "isInf":
            return [int(v) for v in np.isinf(x)]
        if name == "isSubnormal":
            return [int(v) for v in (x != 0) & (np.abs(x) < tiny)]
        if name == "canonical":
            return np_arr_bits(x)
        if name == "neg":
            return np_arr_bits(-x)
        if name == "abs":
            return np_arr_bits(np.abs(x))
        if name == "rint":
            return np_arr_bits(np.rint(x))
        if name == "exponentField":
            return [int(v) for v in (u >> 23) & 0xFF]
        return [int(v) for v in u & 0x7FFFFF]


def _exact_unary(name: str, a: int) -> int:
    if name == "isNaN":
        return int(is_nan(a))
    if name == "isInf":
        return int(is_inf(a))
    if name == "exponentField":
        return (a >> 23) & 0xFF
    if name == "mantissaField":
        return a & 0x7FFFFF
    if is_nan(a):
        return NAN if name in ("canonical", "neg", "abs", "rint") else 0
    if name == "canonical":
        return a
    if name == "neg":
        return a ^ SIGN
    if name == "abs":
        return a & ABS
    if is_inf(a):
        return 0 if name == "isSubnormal" else a
    v = to_fraction(a)
    if name == "isSubnormal":
        return int(v != 0 and abs(v) < Fraction(1, 2**126))
    assert name == "rint"
    return round_fraction(Fraction(round(v)), a)  # round(Fraction) is half-to-even


@pytest.mark.fuzz
def test_unary_functions(f32h) -> None:
    halves = st.builds(
        lambda k, s: round_fraction(Fraction(2 * k + 1, 2)) | s,
        st.integers(0, 1 << 22),
        st.sampled_from([0, SIGN]),
    )  # exact .5 ties for rint

    checked = []

    @settings(max_examples=examples(EXAMPLES))
    @given(st.lists(st.one_of(value, halves), min_size=BATCH, max_size=BATCH))
    def prop(a: list[int]) -> None:
        for name, op in UNARY.items():
            got = list(f32h.unaryMany(op, a))
            want_np = _np_unary(name, a)
            for i, x in enumerate(a):
                want = _exact_unary(name, x)
                assert want_np[i] == want, f"references disagree: {name}({x:#x})"
                assert got[i] == want, f"{name}({x:#010x}) = {got[i]:#x}, want {want:#x}"
        checked.append(1)

    prop()
    assert BATCH * len(checked) >= min_cases(), f"only {len(checked)} batches ran"


def _exact_to_int(a: int) -> int:
    if is_nan(a):
        return 0
    if is_inf(a):
        return -(2**128) if a & SIGN else 2**128
    return int(to_fraction(a))  # int(Fraction) truncates toward zero


@pytest.mark.fuzz
def test_to_int(f32h) -> None:
    checked = []

    @settings(max_examples=examples(EXAMPLES))
    @given(st.lists(value, min_size=BATCH, max_size=BATCH))
    def prop(a: list[int]) -> None:
        got = list(f32h.toIntMany(a))
        x = np_arr(a)
        with np.errstate(all="ignore"):
            trunc = np.trunc(x)  # numpy: exact integral value (float32), then to Python int
        for i, v in enumerate(a):
            want = _exact_to_int(v)
            if np.isfinite(x[i]):
                assert int(trunc[i]) == want
            assert got[i] == want, f"toInt({v:#010x}) = {got[i]}, want {want}"
        checked.append(1)

    prop()
    assert BATCH * len(checked) >= min_cases(), f"only {len(checked)} batches ran"


ints = st.one_of(
    st.integers(-(2**255), 2**255 - 1),
    st.integers(-(2**30), 2**30),
    st.integers(-(2**63) + 1, 2**63 - 1),
    # ties and near-ties of the 24-bit significand: k * 2^s + 2^(s-1) + {-1, 0, 1}
    st.builds(
        lambda k, s, d, neg: (-1 if neg else 1) * ((k << s) + (1 << (s - 1)) + d),
        st.integers(1 << 23, (1 << 24) - 1),
        st.integers(1, 110),
        st.integers(-1, 1),
        st.booleans(),
    ),
    st.sampled_from([0, 1, -1, 2**128, 2**128 - 2**103, 2**128 - 2**104, -(2**255)]),
)


@pytest.mark.fuzz
def test_from_int(f32h) -> None:
    checked = []

    @settings(max_examples=examples(EXAMPLES))
    @given(st.lists(ints, min_size=BATCH, max_size=BATCH))
    def prop(n: list[int]) -> None:
        got = list(f32h.fromIntMany(n))
        for i, v in enumerate(n):
            want = round_fraction(Fraction(v))
            if abs(v) < 2**63:  # numpy int64 -> float32 is one correctly rounded conversion
                assert np_arr_bits(np.array([v], dtype=np.int64).astype(np.float32))[0] == want
            assert got[i] == want, f"fromInt({v}) = {got[i]:#x}, want {want:#x}"
        checked.append(1)

    prop()
    assert BATCH * len(checked) >= min_cases(), f"only {len(checked)} batches ran"


def test_pow2_every_exponent(f32h) -> None:
    """pow2(n) for every n in [-400, 400] plus extremes: exact 2^n rounded (0 / inf outside)."""
    n = list(range(-400, 401)) + [-(2**255), 2**255 - 1]
    got = list(f32h.pow2Many(n))
    for i, e in enumerate(n):
        if -1000 < e < 1000:
            want = round_fraction(Fraction(2) ** e)
            with np.errstate(all="ignore"):
                assert np_arr_bits(np.ldexp(np.float32(1.0), e).astype(np.float32))[0] == want
        else:
            want = POS_INF if e > 0 else 0
        if -126 <= e <= 127:
            assert want == (e + 127) << 23  # PROTOCOL §1's definition
        assert got[i] == want, f"pow2({e}) = {got[i]:#x}, want {want:#x}"


#: Float32Harness.unaryMany's toI32: its results are integers (checked for reverts only).
TO_I32 = 10


@pytest.mark.fuzz
def test_random_patterns_never_revert_and_nan_is_canonical(f32h, ops_h) -> None:
    """Every function of Float32 and RepOps on uniformly random 32-bit patterns: no revert, and
    every NaN result is exactly 0x7FC00000."""

    def no_odd_nan(vals) -> None:
        for v in vals:
            assert canon(int(v)) == int(v), f"non-canonical NaN {int(v):#x}"

    @settings(max_examples=examples(8))
    @given(
        st.lists(u32, min_size=BATCH, max_size=BATCH), st.lists(u32, min_size=BATCH, max_size=BATCH)
    )
    def prop(a: list[int], b: list[int]) -> None:
        for op in ("addMany", "subMany", "mulMany", "divMany"):
            no_odd_nan(getattr(f32h, op)(a, b))
        for op in range(12):
            no_odd_nan(f32h.binaryMany(op, a, b))
        for op in range(12):
            out = f32h.unaryMany(op, a)
            # op 10 is toI32: an int32, not a binary32 (-104 is 0xFFFFFF98, a NaN's pattern)
            no_odd_nan(out if op != TO_I32 else [])
        f32h.toIntMany(a)
        no_odd_nan([f32h.dot(a, b)])
        for op in range(5):
            no_odd_nan(ops_h.unaryMany(op, a))
        for op in range(5):
            no_odd_nan(ops_h.binaryMany(op, a, b))
        no_odd_nan([ops_h.rowSum(a), ops_h.rowMax(a), ops_h.mean(a), ops_h.average(a, b)])
        no_odd_nan(ops_h.xentGradRow(a, b[0] % len(a), 1 + b[1] % 1024))
        no_odd_nan(ops_h.momentumMany(b[0], a, b))
        no_odd_nan(ops_h.sgdMany(b[0], a, b))

    prop()
