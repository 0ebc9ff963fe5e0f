"""Independent references for binary32 arithmetic: exact rationals and numpy.

`round_fraction` implements IEEE-754 round-to-nearest-even of an exact rational to binary32
(subnormals, overflow to inf) from first principles with `fractions.Fraction`; the `exact_*`
functions apply IEEE-754's special-value rules and round the exact real result once. The `np_*`
functions are numpy float32 (correctly rounded on x86-64 SSE). Every result is a bit pattern with
NaN canonicalised to 0x7FC00000 (PROTOCOL §1).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

NAN = 0x7FC00000
POS_INF = 0x7F800000
NEG_INF = 0xFF800000
SIGN = 0x80000000
ABS = 0x7FFFFFFF


def is_nan(b: int) -> bool:
    return (b & ABS) > POS_INF


def is_inf(b: int) -> bool:
    return (b & ABS) == POS_INF


def is_zero(b: int) -> bool:
    return (b & ABS) == 0


def canon(b: int) -> int:
    return NAN if is_nan(b) else b


def to_fraction(b: int) -> Fraction:
    """Exact value of a finite binary32 pattern."""
    assert not is_nan(b) and not is_inf(b)
    e = (b >> 23) & 0xFF
    m = b & 0x7FFFFF
    v = Fraction(m, 1 << 149) if e == 0 else Fraction(m | 0x800000) * Fraction(2) ** (e - 150)
    return -v if b & SIGN else v


def round_fraction(q: Fraction, zero_sign: int = 0) -> int:
    """binary32 bits of q rounded to nearest, ties to even; q == 0 gives a zero of zero_sign."""
    if q == 0:
        return zero_sign & SIGN
    sign = SIGN if q < 0 else 0
    q = abs(q)
    # e = floor(log2 q)
    e = q.numerator.bit_length() - q.denominator.bit_length()
    if Fraction(2) ** e > q:
        e -= 1
    assert Fraction(2) ** e <= q < Fraction(2) ** (e + 1)
    quantum = max(e, -126) - 23  # weight of the last significand bit
    scaled = q / Fraction(2) ** quantum
    n = int(scaled)  # floor (scaled > 0)
    rem = scaled - n
    if rem > Fraction(1, 2) or (rem == Fraction(1, 2) and n % 2 == 1):
        n += 1
    if n == 0:
        return sign  # underflow to a signed zero
    if n == 1 << 24:  # rounding carried into the next binade
        n >>= 1
        quantum += 1
    if n < 1 << 23:  # subnormal (quantum is -149 here)
        assert quantum == -149
        return sign | n
    biased = quantum + 150
    if biased >= 255:
        return sign | POS_INF
    return sign | (biased << 23) | (n - (1 << 23))


def exact_add(a: int, b: int) -> int:
    if is_nan(a) or is_nan(b):
        return NAN
    if is_inf(a) or is_inf(b):
        if is_inf(a) and is_inf(b):
            return a if a == b else NAN
        return a if is_inf(a) else b
    s = to_fraction(a) + to_fraction(b)
    if s == 0:
        # IEEE 754 §6.3: exact zero sum is +0 in round-to-nearest, unless both are −0
        return SIGN if (a & SIGN) and (b & SIGN) else 0
    return round_fraction(s)


def exact_sub(a: int, b: int) -> int:
    if is_nan(b):
        return NAN
    return exact_add(a, b ^ SIGN)


def exact_mul(a: int, b: int) -> int:
    if is_nan(a) or is_nan(b):
        return NAN
    sign = (a ^ b) & SIGN
    if is_inf(a) or is_inf(b):
        if is_zero(a) or is_zero(b):
            return NAN
        return sign | POS_INF
    return round_fraction(to_fraction(a) * to_fraction(b), sign)


def exact_div(a: int, b: int) -> int:
    if is_nan(a) or is_nan(b):
        return NAN
    sign = (a ^ b) & SIGN
    if is_inf(a):
        return NAN if is_inf(b) else sign | POS_INF
    if is_inf(b):
        return sign
    if is_zero(b):
        return NAN if is_zero(a) else sign | POS_INF
    return round_fraction(to_fraction(a) / to_fraction(b), sign)


# --- numpy -------------------------------------------------------------------------------------


def np_f32(b: int) -> np.float32:
    return np.array([b & 0xFFFFFFFF], dtype=np.uint32).view(np.float32)[0]


def np_bits(x: np.float32) -> int:
    return canon(int(np.array([x], dtype=np.float32).view(np.uint32)[0]))


def np_arr(bits: list[int]) -> np.ndarray:
    return np.array(bits, dtype=np.uint32).view(np.float32)


def np_arr_bits(x: np.ndarray) -> list[int]:
    return [canon(int(v)) for v in np.asarray(x, dtype=np.float32).view(np.uint32).reshape(-1)]


def np_binary(op: str, a: list[int], b: list[int]) -> list[int]:
    """Vectorised numpy float32 op over bit lists (NaN canonicalised)."""
    x, y = np_arr(a), np_arr(b)
    with np.errstate(all="ignore"):
        r = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide}[op](x, y)
    assert r.dtype == np.float32
    return np_arr_bits(r)


EXACT = {"add": exact_add, "sub": exact_sub, "mul": exact_mul, "div": exact_div}
