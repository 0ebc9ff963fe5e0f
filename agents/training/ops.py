"""The protocol operators on torch float32 tensors (PROTOCOL §2) — the portable path.

Every function does exactly the spec's binary32 operations in the spec's order, using only
torch *elementwise* kernels (one IEEE operation per kernel launch: mul, add, sub, div, where,
bit views). Reductions loop over the reduced index in Python and are vectorised across the
independent outputs, so the order per output element is fixed and no thread count, SIMD width
or device can change a bit. Never use matmul/addmm/sum/softmax/torch.compile here: they
reorder or fuse. The same code runs on CUDA (each op is its own kernel, so nvcc cannot contract
a multiply and an add into an FMA across them).
"""

from __future__ import annotations

import torch

from agents.training import float32 as F

f32 = torch.float32


def const(bits: int, like: torch.Tensor) -> torch.Tensor:
    """A 0-d float32 tensor holding the binary32 with these bits, on like's device."""
    signed = bits - (1 << 32) if bits >= 1 << 31 else bits
    return torch.tensor(signed, dtype=torch.int32).view(f32).to(like.device)


def _pow2(n: torch.Tensor) -> torch.Tensor:
    """pow2 of an int32 tensor with entries in [-126, 127]: bits (n + 127) << 23."""
    return torch.bitwise_left_shift(n + 127, 23).view(f32)


# -- reductions ----------------------------------------------------------------------------


def matmul_nt(a: torch.Tensor, b: torch.Tensor, chunk: int = 0) -> torch.Tensor:
    """C[i,j] = dot(A[i,:], B[j,:]): acc = +0, then acc = fl(acc + fl(a*b)) for k in order.

    Vectorised over all outputs, sequential over k. `chunk` > 0 processes that many output rows
    at a time (keeps the accumulator in cache); it never changes a bit.
    """
    M, K = a.shape
    N, K2 = b.shape
    if K != K2:
        raise ValueError(f"matmul_nt: inner sizes differ ({K} vs {K2})")
    if chunk and chunk < M:
        return torch.cat([matmul_nt(a[i : i + chunk], b) for i in range(0, M, chunk)], dim=0)
    bt = b.t()
    acc = torch.zeros((M, N), dtype=f32, device=a.device)  # +0.0
    prod = torch.empty((M, N), dtype=f32, device=a.device)
    for k in range(K):
        torch.mul(a[:, k : k + 1], bt[k : k + 1, :], out=prod)
        acc.add_(prod)
    return acc


# -- elementwise ---------------------------------------------------------------------------


def add_row(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.add(a, b.reshape(1, -1))


def sub_col(a: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    return torch.sub(a, c.reshape(-1, 1))


def div_col(a: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    return torch.div(a, c.reshape(-1, 1))


def relu(x: torch.Tensor) -> torch.Tensor:
    # x > 0 ? x : (NaN ? NaN : +0) in one select: NaN <= 0 is false, so NaN keeps itself,
    # and every x <= 0 (including -0) becomes +0.
    return torch.where(x <= 0, 0.0, x)


def relu_bwd(g: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    # x > 0 ? g : relu(x), and relu(x) is +0 or NaN exactly where x > 0 is false.
    return torch.where(x > 0, g, relu(x))


def exp(x: torch.Tensor) -> torch.Tensor:
    """exp32 (PROTOCOL §2.1) elementwise."""
    hi, lo = const(F.EXP_HI, x), const(F.EXP_LO, x)
    nan = torch.isnan(x)
    big, small = x > hi, x < lo
    xs = torch.where(nan | big | small, torch.zeros_like(x), x)  # keep rint/casts in range
    t = torch.mul(xs, const(F.INV_LN2, x))
    n = torch.round(t)  # half to even, exact
    r = torch.sub(torch.sub(xs, torch.mul(n, const(F.LN2_HI, x))), torch.mul(n, const(F.LN2_LO, x)))
    p = const(F.EXP_POLY[0], x).expand_as(x)
    for c in F.EXP_POLY[1:]:
        p = torch.add(torch.mul(p, r), const(c, x))
    ni = n.to(torch.int32)
    # n > 127: p * 2^127 * 2^(n-127); n < -126: p * 2^(n+126) * 2^-126; else p * 2^n * 1 (the
    # trailing multiply by 1.0 is exact, so this is the spec's single multiply).
    e1 = torch.where(ni > 127, 127, torch.where(ni < -126, ni + 126, ni))
    e2 = torch.where(ni > 127, ni - 127, torch.where(ni < -126, -126, 0))
    y = torch.mul(torch.mul(p, _pow2(e1)), _pow2(e2.to(torch.int32)))
    y = torch.where(big, torch.full_like(x, float("inf")), y)
    y = torch.where(small, torch.zeros_like(x), y)
    return torch.where(nan, x, y)


def log(x: torch.Tensor) -> torch.Tensor:
    """log32 (PROTOCOL §2.2) elementwise."""
    one = torch.ones_like(x)
    bad = torch.isnan(x) | (x < 0)
    zero = x == 0
    inf = torch.isinf(x) & (x > 0)
    xs = torch.where(bad | zero | inf, one, x)
    sub_ = xs.view(torch.int32) < F.MIN_NORMAL_BITS
    xs = torch.where(sub_, torch.mul(xs, _pow2(torch.full_like(xs, 23, dtype=torch.int32))), xs)
    e = torch.where(sub_, -23, 0).to(torch.int32)
    b = xs.view(torch.int32)
    e = e + (torch.bitwise_right_shift(b, 23) & 0xFF) - 127
    m = ((b & 0x007FFFFF) | 0x3F800000).view(f32)
    big = m > const(F.SQRT2, x)
    m = torch.where(big, torch.mul(m, const(0x3F000000, x)), m)
    e = e + big.to(torch.int32)
    two = const(0x40000000, x)
    f = torch.sub(m, const(0x3F800000, x))
    s = torch.div(f, torch.add(two, f))
    z = torch.mul(s, s)
    L1, L2, L3, L4 = (const(c, x) for c in F.LOG_POLY)
    R = torch.mul(
        z, torch.add(L1, torch.mul(z, torch.add(L2, torch.mul(z, torch.add(L3, torch.mul(z, L4))))))
    )  # noqa: E501
    lm = torch.mul(s, torch.add(two, R))
    E = e.to(f32)  # |e| <= 149: exact
    y = torch.add(torch.mul(E, const(F.LN2_HI, x)), torch.add(lm, torch.mul(E, const(F.LN2_LO, x))))
    y = torch.where(inf, torch.full_like(x, float("inf")), y)
    y = torch.where(zero, torch.full_like(x, float("-inf")), y)
    return torch.where(bad, torch.full_like(x, float("nan")), y)


def gather_rows(d: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    return d.index_select(0, idx.to(torch.int64)).contiguous()


def xent_grad(p: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """fl(fl(P[b,c] - onehot) / B)."""
    B = p.shape[0]
    onehot = torch.zeros_like(p)
    onehot[torch.arange(B, device=p.device), y.to(torch.int64)] = 1.0
    return torch.div(torch.sub(p, onehot), torch.full_like(p, float(B)))


def nll(l: torch.Tensor, s: torch.Tensor, y: torch.Tensor) -> torch.Tensor:  # noqa: E741
    picked = s.gather(1, y.to(torch.int64).reshape(-1, 1)).reshape(1, -1)
    return torch.sub(l.reshape(1, -1), picked)


def mean(a: torch.Tensor, row_sum_fn) -> torch.Tensor:
    """fl(row_sum(A) / B) over a (1,B) row."""
    s = row_sum_fn(a)
    return torch.div(s, torch.full_like(s, float(a.shape[1])))


def momentum(v: torch.Tensor, g: torch.Tensor, mu: torch.Tensor) -> torch.Tensor:
    return torch.add(torch.mul(mu, v), g)


def sgd(w: torch.Tensor, v: torch.Tensor, lr: torch.Tensor) -> torch.Tensor:
    return torch.sub(w, torch.mul(lr, v))


def average(ps: list[torch.Tensor], w: list[torch.Tensor]) -> torch.Tensor:
    """acc = +0; acc = fl(acc + fl(w_s * P_s)) over s (aggregation of S shards)."""
    acc = torch.zeros_like(ps[0])
    for p, ws in zip(ps, w, strict=True):
        acc = torch.add(acc, torch.mul(ws, p))
    return acc
