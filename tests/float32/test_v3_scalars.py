"""The version-3 elementwise scalars on chain (Float32.sqrt / toI32 / fromI32 / maximum / minimum
and the comparisons, RepOps.tanh32 / erf32) bit for bit against the operator registry
(agents/training/registry.py): its scalar reference `OPS[name].scalar`, its torch kernel
`OPS[name].torch` and, where one exists, its C kernel `OPS[name].native`, on the same arrays,
with NaN canonicalised as the commitments do (PROTOCOL §1). sqrt is also checked against an
exact integer oracle: the correctly rounded root from math.isqrt, and the bracket test that the
result's half-ulp neighbours square to either side of the operand.

One eth_call evaluates a batch of BATCH values; the CI profile runs a handful of batches per
property, `HYPOTHESIS_PROFILE=fuzz` twenty times as many (f32_strategies.examples).
"""

from __future__ import annotations

from fractions import Fraction
from math import isqrt

import numpy as np
import pytest
import torch
from f32_strategies import SIGN, examples, u32, value
from f32ref import NAN, POS_INF, canon, is_nan, is_zero, np_arr, round_fraction, to_fraction
from hypothesis import given, settings
from hypothesis import strategies as st

from agents.training import native
from agents.training.registry import OPS

BATCH = 256  # values per eth_call
EXAMPLES = 4  # hypothesis examples per property in the CI profile (fuzz: 80)

F32_UNARY = {"sqrt": 9, "cast_i32": 10, "cast_f32": 11}  # Float32Harness.unaryMany selectors
OPS_UNARY = {"tanh": 3, "erf": 4}  # OpHarness.unaryMany selectors
F32_BINARY = {"gt": 5, "lt": 6, "ge": 7, "le": 8, "eq": 9, "maximum": 10, "minimum": 11}


def bits32(x: float) -> int:
    return int(np.array([x], dtype=np.float32).view(np.uint32)[0])


# -- the registry's three implementations, on bit patterns ----------------------------------


def _to_tensor(words: list[int], dtype: str) -> torch.Tensor:
    u = np.array(words, dtype=np.uint32)
    return torch.from_numpy(u.view(np.float32 if dtype == "f32" else np.int32).copy())


def _tensor_words(t: torch.Tensor) -> list[int]:
    a = t.detach().contiguous().numpy()
    if a.dtype == np.float32:
        return [canon(int(w)) for w in a.view(np.uint32)]
    assert a.dtype == np.int32, a.dtype
    return [int(w) for w in a.view(np.uint32)]


def _scalar_word(r) -> int:
    if isinstance(r, np.float32):
        return canon(int(np.array([r]).view(np.uint32)[0]))
    assert isinstance(r, np.int32), type(r)
    return int(r) & 0xFFFFFFFF


def _scalar_arg(w: int, dtype: str):
    u = np.array([w], dtype=np.uint32)
    return (u.view(np.float32) if dtype == "f32" else u.view(np.int32))[0]


def registry_results(name: str, args: list[list[int]], dtype: str = "f32") -> list[list[int]]:
    """The scalar reference's, the torch kernel's and (if any) the C kernel's output words."""
    op = OPS[name]
    tensors = [_to_tensor(a, dtype) for a in args]
    with np.errstate(all="ignore"):  # cast_i32's reference casts NaN / out-of-range values
        ref = [
            _scalar_word(op.scalar(*(_scalar_arg(w, dtype) for w in ws)))
            for ws in zip(*args, strict=True)
        ]
        outs = [ref, _tensor_words(op.torch(tensors, None))]
    if op.native is not None and native.available():
        outs.append(_tensor_words(op.native(tensors, None)))
    return outs


def agree(name: str, args: list[list[int]], got: list[int], dtype: str = "f32") -> None:
    ref, *kernels = registry_results(name, args, dtype)
    for k in kernels:
        assert k == ref, f"{name}: the registry's kernels disagree with its scalar reference"
    assert len(got) == len(ref), f"{name}: {len(got)} results for {len(ref)} operands"
    for i, ws in enumerate(zip(*args, strict=True)):
        operands = ", ".join(f"{w:#010x}" for w in ws)
        assert got[i] == ref[i], f"{name}({operands}) = {got[i]:#010x}, want {ref[i]:#010x}"


# -- sqrt: the exact integer oracle ----------------------------------------------------------


def exact_sqrt(a: int) -> int:
    """IEEE sqrt of a binary32 pattern from math.isqrt: the root scaled by 2^64, doubled, with a
    sticky bit for an inexact root, rounded once by round_fraction (NaN canonical)."""
    if is_nan(a) or (a & SIGN and not is_zero(a)):
        return NAN
    if is_zero(a) or a == POS_INF:
        return a
    v = to_fraction(a)  # num / den with den a power of two
    s = v.numerator * v.denominator << 128  # sqrt(v) * 2^64 * den = sqrt(s)
    q = isqrt(s)
    return round_fraction(Fraction(2 * q + (q * q != s), v.denominator << 65))


def sqrt_bracket_ok(a: int, r: int) -> bool:
    """r is sqrt(a) correctly rounded: the midpoints between r and its neighbours square to
    either side of a (a tie, impossible for a square root, would need an even r)."""
    if not 0 < r < POS_INF:
        return False
    v, c = to_fraction(a), to_fraction(r)
    lo = (to_fraction(r - 1) + c) / 2
    hi = (c + to_fraction(r + 1)) / 2
    return (lo * lo < v or (lo * lo == v and r % 2 == 0)) and (
        v < hi * hi or (v == hi * hi and r % 2 == 0)
    )


def _sqrt_midpoint_case(c: int, d: int) -> int:
    """An operand whose root lies next to the midpoint between c and c + 1 (d ulps from m²)."""
    m = (to_fraction(c) + to_fraction(c + 1)) / 2
    return max(1, min(0x7F7FFFFF, round_fraction(m * m) + d))


positive_normal_root = st.integers(0x1A000000, 0x5F7FFFFE)  # roots of finite binary32 operands
sqrt_arg = st.one_of(
    value,
    st.integers(1, 0x7FFFFF),  # positive subnormals
    st.builds(_sqrt_midpoint_case, positive_normal_root, st.integers(-1, 1)),
    st.builds(lambda k: round_fraction(Fraction(k * k)), st.integers(1, 1 << 12)),  # squares
)


def sqrt_edges() -> list[int]:
    """Every subnormal edge (2^k, 2^k ± 1 for k < 23, and the largest), both signs, the
    smallest normals, the largest finite and the specials."""
    out = [0x7FFFFF, 0x7FFFFE, 0x800000, 0x800001, 0x7F7FFFFF, 0x7F7FFFFE, 0x3F800000, 0x40000000]
    for k in range(23):
        out += [1 << k, (1 << k) + 1, max(1, (1 << k) - 1)]
    out += [w | SIGN for w in out]
    return out + [0, SIGN, POS_INF, POS_INF | SIGN, NAN, 0xFFC00000, 0x7F800001, 0xFFFFFFFF]


def _check_sqrt(f32h, a: list[int]) -> None:
    got = list(f32h.unaryMany(F32_UNARY["sqrt"], a))
    agree("sqrt", [a], got)
    for x, r in zip(a, got, strict=True):
        want = exact_sqrt(x)
        assert r == want, f"sqrt({x:#010x}) = {r:#010x}, exact {want:#010x}"
        if want not in (NAN, POS_INF) and not is_zero(x):
            assert sqrt_bracket_ok(x, r), f"sqrt({x:#010x}) = {r:#010x} is not the nearest"


def test_sqrt_edges(f32h) -> None:
    _check_sqrt(f32h, sqrt_edges())


@pytest.mark.fuzz
def test_sqrt(f32h) -> None:
    @settings(max_examples=examples(EXAMPLES))
    @given(st.lists(sqrt_arg, min_size=BATCH, max_size=BATCH))
    def prop(a: list[int]) -> None:
        _check_sqrt(f32h, a)

    prop()


# -- tanh32 / erf32 ----------------------------------------------------------------------------


def _near(x: float, ulps: int) -> int:
    return bits32(x) + ulps


transcendental_arg = st.one_of(
    value,
    st.floats(-12, 12, width=32).map(bits32),
    st.floats(-(2.0**-12), 2.0**-12, width=32).map(bits32),
    # the cut-overs to ±1 (|x| > 9 for tanh, |x| >= 4 for erf), a few ulps either side
    st.builds(
        lambda x, d, s: _near(x, d) | s,
        st.sampled_from([9.0, 4.0]),
        st.integers(-3, 3),
        st.sampled_from([0, SIGN]),
    ),
)


@pytest.mark.fuzz
@pytest.mark.parametrize("name", sorted(OPS_UNARY))
def test_tanh_erf(ops_h, name: str) -> None:
    @settings(max_examples=examples(EXAMPLES))
    @given(st.lists(transcendental_arg, min_size=BATCH, max_size=BATCH))
    def prop(a: list[int]) -> None:
        got = list(ops_h.unaryMany(OPS_UNARY[name], a))
        agree(name, [a], got)

    prop()


def test_tanh_erf_specials(ops_h) -> None:
    a = [0, SIGN, POS_INF, POS_INF | SIGN, NAN, 0xFFC00000, 0x7F800001, 1, SIGN | 1]
    a += [_near(9.0, d) | s for d in (-1, 0, 1) for s in (0, SIGN)]
    a += [_near(4.0, d) | s for d in (-1, 0, 1) for s in (0, SIGN)]
    for name, op in OPS_UNARY.items():
        got = list(ops_h.unaryMany(op, a))
        agree(name, [a], got)
        assert got[:2] == [0, SIGN], f"{name}(±0) must be ±0"
        assert got[2:4] == [0x3F800000, 0xBF800000], f"{name}(±inf) must be ±1"
        assert got[4:7] == [NAN] * 3, f"{name}(NaN) must be the canonical NaN"
    # the single-value entry points are the same functions
    for x in (bits32(0.5), bits32(-0.5)):
        assert ops_h.tanh32(x) == registry_results("tanh", [[x]])[0][0]
        assert ops_h.erf32(x) == registry_results("erf", [[x]])[0][0]


# -- cast_i32 / cast_f32 -----------------------------------------------------------------------


def exact_to_i32(a: int) -> int:
    """cast_i32 by exact rationals: truncation toward zero; 0x80000000 where it is not an int32."""
    if is_nan(a) or (a & 0x7FFFFFFF) == POS_INF:
        return SIGN
    n = int(to_fraction(a))  # int(Fraction) truncates toward zero
    return n & 0xFFFFFFFF if -(2**31) <= n < 2**31 else SIGN


cast_i32_arg = st.one_of(
    value,
    st.floats(-1e10, 1e10, width=32).map(bits32),
    st.floats(-100, 100, width=32).map(bits32),
    # the ends of the i32 range: ±2^31 and their neighbours, ±2^32
    st.builds(
        lambda x, d, s: _near(x, d) | s,
        st.sampled_from([2.0**31, 2.0**32, 2.0**30]),
        st.integers(-2, 2),
        st.sampled_from([0, SIGN]),
    ),
)
i32_word = st.one_of(
    u32,
    st.integers(-(2**24) - 4, 2**24 + 4).map(lambda n: n & 0xFFFFFFFF),  # the exact range's ends
    # ties and near-ties of the 24-bit significand: k * 2^s + 2^(s - 1) + d
    st.builds(
        lambda k, s, d, neg: ((-1 if neg else 1) * ((k << s) + (1 << (s - 1)) + d)) & 0xFFFFFFFF,
        st.integers(1 << 23, (1 << 24) - 1),
        st.integers(1, 7),
        st.integers(-1, 1),
        st.booleans(),
    ),
    st.sampled_from([0, 1, 0xFFFFFFFF, 0x7FFFFFFF, 0x80000000, 0x80000001]),
)


@pytest.mark.fuzz
def test_cast_i32(f32h) -> None:
    @settings(max_examples=examples(EXAMPLES))
    @given(st.lists(cast_i32_arg, min_size=BATCH, max_size=BATCH))
    def prop(a: list[int]) -> None:
        got = list(f32h.unaryMany(F32_UNARY["cast_i32"], a))
        agree("cast_i32", [a], got)
        for x, r in zip(a, got, strict=True):
            assert r == exact_to_i32(x), f"toI32({x:#010x}) = {r:#010x}"

    prop()


@pytest.mark.fuzz
def test_cast_f32(f32h) -> None:
    @settings(max_examples=examples(EXAMPLES))
    @given(st.lists(i32_word, min_size=BATCH, max_size=BATCH))
    def prop(w: list[int]) -> None:
        got = list(f32h.unaryMany(F32_UNARY["cast_f32"], w))
        agree("cast_f32", [w], got, dtype="i32")
        for x, r in zip(w, got, strict=True):
            n = x - (1 << 32) if x >= 1 << 31 else x
            assert r == round_fraction(Fraction(n)), f"fromI32({x:#010x}) = {r:#010x}"

    prop()


# -- maximum / minimum and the comparisons --------------------------------------------------


def _pairs_with_ties(pairs: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The pairs plus equal and sign-flipped ones, so that ties and ±0 are frequent."""
    head = [p[0] for p in pairs[:32]]
    return pairs + [(x, x) for x in head] + [(x, x ^ SIGN) for x in head]


@pytest.mark.fuzz
def test_maximum_minimum_comparisons(f32h) -> None:
    @settings(max_examples=examples(EXAMPLES))
    @given(st.lists(st.tuples(value, value), min_size=BATCH, max_size=BATCH))
    def prop(pairs: list[tuple[int, int]]) -> None:
        pairs = _pairs_with_ties(pairs)
        a = [p[0] for p in pairs]
        b = [p[1] for p in pairs]
        for name, op in F32_BINARY.items():
            agree(name, [a, b], list(f32h.binaryMany(op, a, b)))
        # ne has no function of its own: it is !eq, NaN operands included
        agree("ne", [a, b], [1 - v for v in f32h.binaryMany(F32_BINARY["eq"], a, b)])

    prop()


def test_maximum_minimum_signed_zeros(f32h) -> None:
    """A tie gives b: +0 vs −0 picks the second operand for both operators."""
    a = [0, SIGN, 0x3F800000, NAN, 0x3F800000, 0xFFC00001]
    b = [SIGN, 0, 0x3F800000, 0x3F800000, 0x7F800001, 0]
    want = [SIGN, 0, 0x3F800000, NAN, NAN, NAN]
    for name in ("maximum", "minimum"):
        got = list(f32h.binaryMany(F32_BINARY[name], a, b))
        agree(name, [a, b], got)
        assert got == want, f"{name}: {[hex(g) for g in got]}"


def test_sqrt_oracle_is_exact() -> None:
    """The oracle itself: it agrees with binary64 sqrt rounded once (53 >= 2·24 + 2 bits, so that
    is correctly rounded too) and the bracket test rejects both neighbours of the root."""
    rng = np.random.default_rng(7)
    words = [int(w) for w in rng.integers(1, 0x7F800000, 2000)] + sqrt_edges()[:60]
    for a in words:
        x = np_arr([a])[0]
        want = bits32(float(np.sqrt(np.float64(x)).astype(np.float32)))
        assert exact_sqrt(a) == want, f"oracle sqrt({a:#010x})"
        assert sqrt_bracket_ok(a, want)
        assert not sqrt_bracket_ok(a, want + 1) and not sqrt_bracket_ok(a, want - 1)
