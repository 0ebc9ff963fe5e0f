"""The registry's device kernels in Triton (issue #29): the GPU path, same bits as the CPU.

Each kernel keeps its operator's evaluation order (agents/training/registry.py): an output
element's reduction runs sequentially in one program, in index order; elementwise functions do
exactly the registry's binary32 operations in its order. Tiling and the launch grid choose only
which elements are computed together. Every launch passes `enable_fp_fusion=False`, so no
multiply and add are contracted into an FMA; division and the like use the correctly rounded
forms (`div_rn`), never the fast approximations.

The same kernels run on the CPU under Triton's interpreter (TRITON_INTERPRET=1, numpy float32
underneath): that is how CI tests their algorithms against the scalar reference and the
portable path, bit for bit, on machines without a GPU (tests/model/test_triton_ops.py).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from agents.training import float32 as F


def _c(bits: int) -> tl.constexpr:
    return tl.constexpr(float(F.f32(bits)))


INV_LN2 = _c(F.INV_LN2)
LN2_HI = _c(F.LN2_HI)
LN2_LO = _c(F.LN2_LO)
EXP_HI = _c(F.EXP_HI)
EXP_LO = _c(F.EXP_LO)
E0, E1, E2, E3, E4, E5, E6, E7 = (_c(b) for b in F.EXP_POLY)
L1, L2, L3, L4 = (_c(b) for b in F.LOG_POLY)
SQRT2 = _c(F.SQRT2)
RINT_MAGIC = tl.constexpr(12582912.0)  # 1.5 * 2^23: (t + M) - M is rint(t) for |t| < 2^22
TANH_BIG = _c(0x41100000)
ERF_P = _c(0x3EA7BA05)
A5, A4, A3, A2, A1 = (_c(b) for b in (0x3F87DC22, 0xBFBA00E3, 0x3FB5F0E3, 0xBE91A98E,
                                       0x3E827906))  # fmt: skip
BLOCK = 256
OPTS = {"enable_fp_fusion": False}


# -- elementwise ------------------------------------------------------------------------------


@triton.jit
def _pow2(n):
    """2^n for int32 n in [-126, 127]: the bits (n + 127) << 23."""
    return ((n + 127) << 23).to(tl.float32, bitcast=True)


@triton.jit
def _exp32(x):
    nan = x != x
    big = x > EXP_HI
    small = x < EXP_LO
    xs = tl.where(nan | big | small, 0.0, x)
    t = xs * INV_LN2
    n = (t + RINT_MAGIC) - RINT_MAGIC  # round half to even, as rintf / torch.round
    r = (xs - n * LN2_HI) - n * LN2_LO
    p = E0 * r + E1
    p = p * r + E2
    p = p * r + E3
    p = p * r + E4
    p = p * r + E5
    p = p * r + E6
    p = p * r + E7
    ni = n.to(tl.int32)
    e1 = tl.where(ni > 127, 127, tl.where(ni < -126, ni + 126, ni))
    e2 = tl.where(ni > 127, ni - 127, tl.where(ni < -126, -126, 0))
    y = (p * _pow2(e1)) * _pow2(e2)
    y = tl.where(big, float("inf"), y)
    y = tl.where(small, 0.0, y)
    return tl.where(nan, x, y)


@triton.jit
def _log32(x):
    bad = (x != x) | (x < 0.0)
    zero = x == 0.0
    inf = x == float("inf")
    xs = tl.where(bad | zero | inf, 1.0, x)
    b = xs.to(tl.int32, bitcast=True)
    sub = b < 0x00800000
    xs = tl.where(sub, xs * 8388608.0, xs)  # 2^23: exact
    e = tl.where(sub, -23, 0)
    b = xs.to(tl.int32, bitcast=True)
    e = e + ((b >> 23) & 0xFF) - 127
    m = ((b & 0x007FFFFF) | 0x3F800000).to(tl.float32, bitcast=True)
    hi = m > SQRT2
    m = tl.where(hi, m * 0.5, m)
    e = e + hi.to(tl.int32)
    f = m - 1.0
    s = tl.math.div_rn(f, 2.0 + f)
    z = s * s
    R = z * (L1 + z * (L2 + z * (L3 + z * L4)))
    lm = s * (2.0 + R)
    E = e.to(tl.float32)
    y = E * LN2_HI + (lm + E * LN2_LO)
    y = tl.where(inf, float("inf"), y)
    y = tl.where(zero, float("-inf"), y)
    return tl.where(bad, float("nan"), y)


@triton.jit
def _odd(x, r):
    r = tl.where(x.to(tl.int32, bitcast=True) < 0, -r, r)
    return tl.where(x != x, x, r)


@triton.jit
def _tanh32(x):
    a = tl.abs(x)
    e = _exp32(a + a)
    r = 1.0 - tl.math.div_rn(2.0, e + 1.0)
    return _odd(x, tl.where(a > TANH_BIG, 1.0, r))


@triton.jit
def _erf32(x):
    a = tl.abs(x)
    t = tl.math.div_rn(1.0, 1.0 + ERF_P * a)
    p = A5 * t + A4
    p = p * t + A3
    p = p * t + A2
    p = p * t + A1
    p = p * t
    r = 1.0 - p * _exp32(-(a * a))
    return _odd(x, tl.where(a >= 4.0, 1.0, r))


@triton.jit
def _unary_kernel(x_ptr, y_ptr, n, FN: tl.constexpr, B: tl.constexpr):
    i = tl.program_id(0) * B + tl.arange(0, B)
    x = tl.load(x_ptr + i, mask=i < n, other=0.0)
    if FN == 0:
        y = _exp32(x)
    elif FN == 1:
        y = _log32(x)
    elif FN == 2:
        y = _tanh32(x)
    elif FN == 3:
        y = _erf32(x)
    else:
        y = tl.where(x <= 0.0, 0.0, x)  # relu: NaN <= 0 is false, so NaN stays
    tl.store(y_ptr + i, y, mask=i < n)


_UNARY = {"exp": 0, "log": 1, "tanh": 2, "erf": 3, "relu": 4}


def unary(name: str, x: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    y = torch.empty_like(x)
    n = x.numel()
    if n:
        _unary_kernel[(triton.cdiv(n, BLOCK),)](x, y, n, FN=_UNARY[name], B=BLOCK, **OPTS)
    return y


# -- reductions over the last axis --------------------------------------------------------------


@triton.jit
def _reduce_kernel(x_ptr, y_ptr, R, L, MAX: tl.constexpr, B: tl.constexpr):
    r = tl.program_id(0) * B + tl.arange(0, B)
    live = r < R
    if MAX:
        m = tl.load(x_ptr + r * L, mask=live, other=0.0)
        anynan = m != m
        for j in range(1, L):
            v = tl.load(x_ptr + r * L + j, mask=live, other=0.0)
            anynan = anynan | (v != v)
            m = tl.where(v > m, v, m)
        acc = tl.where(anynan, float("nan"), m)
    else:
        acc = tl.zeros((B,), dtype=tl.float32)
        for j in range(0, L):
            acc = acc + tl.load(x_ptr + r * L + j, mask=live, other=0.0)
    tl.store(y_ptr + r, acc, mask=live)


def reduce_last(x: torch.Tensor, kind: str) -> torch.Tensor:
    """sum_last / max_last of an f32 tensor (the registry's orders)."""
    flat = x.reshape(-1, x.shape[-1]).contiguous()
    R, L = flat.shape
    out = torch.empty(R, dtype=torch.float32, device=x.device)
    if R and L:
        _reduce_kernel[(triton.cdiv(R, 64),)](flat, out, R, L, MAX=kind == "max", B=64, **OPTS)
    elif R:
        out.zero_()
    return out.reshape(x.shape[:-1])


# -- matmul -----------------------------------------------------------------------------------


@triton.jit
def _matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr):
    pm, pn, pb = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    a_ptr += pb * M * K
    b_ptr += pb * K * N
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K):  # each C[i, j]: acc = fl(acc + fl(a * b)), k ascending
        a = tl.load(a_ptr + rm * K + k, mask=rm < M, other=0.0)
        b = tl.load(b_ptr + k * N + rn, mask=rn < N, other=0.0)
        p = a[:, None] * b[None, :]
        acc = acc + p
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    tl.store(c_ptr + pb * M * N + rm[:, None] * N + rn[None, :], acc, mask=mask)


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """(..., M, K) @ (..., K, N), batch dims equal."""
    M, K, N = a.shape[-2], a.shape[-1], b.shape[-1]
    lead = a.shape[:-2]
    a3 = a.reshape(-1, M, K).contiguous()
    b3 = b.reshape(-1, K, N).contiguous()
    c = torch.empty((a3.shape[0], M, N), dtype=torch.float32, device=a.device)
    if c.numel():
        grid = (triton.cdiv(M, 32), triton.cdiv(N, 32), a3.shape[0])
        _matmul_kernel[grid](a3, b3, c, M, N, K, BM=32, BN=32, **OPTS)
    return c.reshape(*lead, M, N)


# -- index_add_rows ---------------------------------------------------------------------------


@triton.jit
def _index_add_kernel(out_ptr, idx_ptr, src_ptr, n, D, B: tl.constexpr):
    d = tl.program_id(0) * B + tl.arange(0, B)
    live = d < D
    for j in range(0, n):  # one program owns these columns for every j: source order kept
        row = tl.load(idx_ptr + j)
        cur = tl.load(out_ptr + row * D + d, mask=live, other=0.0)
        add = tl.load(src_ptr + j * D + d, mask=live, other=0.0)
        tl.store(out_ptr + row * D + d, cur + add, mask=live)


def index_add_rows(dest: torch.Tensor, idx: torch.Tensor, src: torch.Tensor) -> torch.Tensor:
    out = dest.contiguous().clone()
    i = idx.reshape(-1).to(torch.int32).contiguous()
    rows = dest.shape[0]
    if i.numel() and (int(i.min()) < 0 or int(i.max()) >= rows):
        raise IndexError(f"index_add_rows: an index is outside [0, {rows})")
    D = out.numel() // max(1, rows)
    if i.numel() and D:
        s = src.contiguous()
        _index_add_kernel[(triton.cdiv(D, 64),)](out, i, s, i.numel(), D, B=64, **OPTS)
    return out
