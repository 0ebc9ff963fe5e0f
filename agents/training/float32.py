"""binary32 bit helpers shared by the reference, the torch ops and the commitments (PROTOCOL §1).

Constants of the protocol are given as bit patterns, never as decimal literals, so no parser
rounding can ever change them.
"""

from __future__ import annotations

import numpy as np
import torch

CANONICAL_NAN = 0x7FC00000
_TINY, _ONE = np.float32(1.0e-45), np.float32(1.0)  # the smallest subnormal
MIN_NORMAL_BITS = 0x00800000


def f32(bits: int) -> np.float32:
    """The binary32 with the given bit pattern."""
    return np.array([bits & 0xFFFFFFFF], dtype=np.uint32).view(np.float32)[0]


def bits(x: float | np.floating) -> int:
    """Bit pattern of x as binary32 (x must already be exactly representable)."""
    v = np.float32(x)
    if not (np.isnan(v) or float(v) == float(x)):
        raise ValueError(f"{x!r} is not exactly a binary32 value")
    return int(np.array([v], dtype=np.float32).view(np.uint32)[0])


def canonical_bits(x: np.floating) -> int:
    """Bits of a binary32 with every NaN canonicalised to 0x7FC00000 (PROTOCOL §1)."""
    b = bits(x)
    return CANONICAL_NAN if (b & 0x7FFFFFFF) > 0x7F800000 else b


def pow2(n: int) -> np.float32:
    """pow2(n) for n in [-126, 127]: bits (n + 127) << 23."""
    if not -126 <= n <= 127:
        raise ValueError(f"pow2 exponent {n} out of [-126, 127]")
    return f32((n + 127) << 23)


def tensor_bits(t: torch.Tensor) -> np.ndarray:
    """uint32 view of a float32 tensor's elements in row-major order, NaNs canonicalised."""
    a = t.detach().to("cpu").contiguous().view(torch.int32).numpy().view(np.uint32).reshape(-1)
    nan = (a & 0x7FFFFFFF) > 0x7F800000
    if nan.any():
        a = a.copy()
        a[nan] = CANONICAL_NAN
    return a


def check_no_flush_denormal() -> None:
    """Subnormals must survive (PROTOCOL §1); fail loudly if FTZ/DAZ is on in this process."""
    # binary32 scalar arithmetic in this thread, under the same FTZ/DAZ control word as torch's
    # and the C kernels' (torch.set_flush_denormal sets it): every run_graph call checks
    tiny = _TINY
    if (tiny * _ONE).view(np.int32) != 1 or (tiny + tiny).view(np.int32) != 2:
        raise RuntimeError("subnormals are flushed to zero (torch.set_flush_denormal is on)")


# exp32 (PROTOCOL §2.1)
EXP_HI = 0x42B20000  # 89.0: above it exp32 is +inf
EXP_LO = 0xC2D00000  # -104.0: below it exp32 is +0
INV_LN2 = 0x3FB8AA3B
LN2_HI = 0x3F317200
LN2_LO = 0x35BFBE8E
EXP_POLY = (  # C7 first: Horner order
    0x39500D01,
    0x3AB60B61,
    0x3C088889,
    0x3D2AAAAB,
    0x3E2AAAAB,
    0x3F000000,
    0x3F800000,
    0x3F800000,
)
# log32 (PROTOCOL §2.2)
SQRT2 = 0x3FB504F3
LOG_POLY = (0x3F2AAAAB, 0x3ECCCCCD, 0x3E924925, 0x3E638E39)  # L1..L4
