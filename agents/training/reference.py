"""Scalar reference of every operator, step by step on numpy float32 scalars (PROTOCOL §2).

This file is deliberately naive: one IEEE-754 binary32 operation per line, loops in the order
the spec states, no vectorisation. It is the model the Solidity library mirrors and the oracle
the fast paths are tested against, so keep it obviously equal to the spec text, never fast.
Tensors are 2-D numpy float32 arrays; every function returns a new float32 array.
"""

from __future__ import annotations

import numpy as np

from agents.training import float32 as F

f32 = np.float32
_ZERO = f32(0.0)


def _quiet(fn):
    # Overflow / invalid / divide-by-zero are normal IEEE results here, not errors.
    def wrapped(*a, **k):
        with np.errstate(all="ignore"):
            return fn(*a, **k)

    wrapped.__name__ = fn.__name__
    wrapped.__doc__ = fn.__doc__
    return wrapped


@_quiet
def dot(a, b) -> np.float32:
    """acc = +0; acc = fl(acc + fl(a[i] * b[i])) for i = 0..K-1."""
    acc = f32(0.0)
    for x, y in zip(a, b, strict=True):
        p = f32(x) * f32(y)
        acc = f32(acc + p)
    return acc


def matmul_nt(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    M, K = A.shape
    N, K2 = B.shape
    assert K == K2
    C = np.empty((M, N), dtype=np.float32)
    for i in range(M):
        for j in range(N):
            C[i, j] = dot(A[i, :], B[j, :])
    return C


def transpose(A: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(A.T)


@_quiet
def _elementwise(A, B, op) -> np.ndarray:
    out = np.empty(A.shape, dtype=np.float32)
    for idx in np.ndindex(A.shape):
        out[idx] = op(f32(A[idx]), f32(B[idx]))
    return out


def add(A, B):
    return _elementwise(A, B, lambda x, y: x + y)


def sub(A, B):
    return _elementwise(A, B, lambda x, y: x - y)


def mul(A, B):
    return _elementwise(A, B, lambda x, y: x * y)


def div(A, B):
    return _elementwise(A, B, lambda x, y: x / y)


def add_row(A, b):
    return add(A, np.broadcast_to(b, A.shape))


def sub_col(A, c):
    return sub(A, np.broadcast_to(c.reshape(-1, 1), A.shape))


def div_col(A, c):
    return div(A, np.broadcast_to(c.reshape(-1, 1), A.shape))


def relu_scalar(x: np.float32) -> np.float32:
    if x > 0:
        return f32(x)
    return f32(np.nan) if np.isnan(x) else f32(0.0)


def relu(X):
    return _elementwise(X, X, lambda x, _: relu_scalar(x))


def relu_bwd(G, X):
    def one(g, x):
        if x > 0:
            return g
        return f32(np.nan) if np.isnan(x) else f32(0.0)

    return _elementwise(G, X, one)


@_quiet
def row_sum(A) -> np.ndarray:
    out = np.empty((1, A.shape[0]), dtype=np.float32)
    for i in range(A.shape[0]):
        acc = f32(0.0)
        for j in range(A.shape[1]):
            acc = f32(acc + f32(A[i, j]))
        out[0, i] = acc
    return out


def row_max(A) -> np.ndarray:
    out = np.empty((1, A.shape[0]), dtype=np.float32)
    for i in range(A.shape[0]):
        if np.isnan(A[i, :]).any():
            out[0, i] = np.nan
            continue
        m = f32(A[i, 0])
        for j in range(1, A.shape[1]):
            if A[i, j] > m:
                m = f32(A[i, j])
        out[0, i] = m
    return out


@_quiet
def exp32(x: np.float32) -> np.float32:
    """PROTOCOL §2.1, line by line."""
    x = f32(x)
    if np.isnan(x):
        return f32(np.nan)
    if x > F.f32(F.EXP_HI):
        return f32(np.inf)
    if x < F.f32(F.EXP_LO):
        return f32(0.0)
    t = f32(x * F.f32(F.INV_LN2))
    n = f32(np.rint(t))  # ties to even, exact
    r = f32(f32(x - f32(n * F.f32(F.LN2_HI))) - f32(n * F.f32(F.LN2_LO)))
    p = F.f32(F.EXP_POLY[0])
    for c in F.EXP_POLY[1:]:
        p = f32(f32(p * r) + F.f32(c))
    ni = int(n)
    if ni > 127:
        return f32(f32(p * F.pow2(127)) * F.pow2(ni - 127))
    if ni < -126:
        return f32(f32(p * F.pow2(ni + 126)) * F.pow2(-126))
    return f32(p * F.pow2(ni))


@_quiet
def log32(x: np.float32) -> np.float32:
    """PROTOCOL §2.2, line by line."""
    x = f32(x)
    if np.isnan(x) or x < 0:
        return f32(np.nan)
    if x == 0:
        return f32(-np.inf)
    if np.isinf(x):
        return f32(np.inf)
    e = 0
    b = F.bits(x)
    if b < F.MIN_NORMAL_BITS:  # subnormal: scale into the normal range, exactly
        x = f32(x * F.pow2(23))
        e = -23
        b = F.bits(x)
    e = e + ((b >> 23) & 0xFF) - 127
    m = F.f32((b & 0x007FFFFF) | 0x3F800000)
    if m > F.f32(F.SQRT2):
        m = f32(m * f32(0.5))
        e = e + 1
    f = f32(m - f32(1.0))
    s = f32(f / f32(f32(2.0) + f))
    z = f32(s * s)
    L1, L2, L3, L4 = (F.f32(c) for c in F.LOG_POLY)
    R = f32(z * f32(L1 + f32(z * f32(L2 + f32(z * f32(L3 + f32(z * L4)))))))
    lm = f32(s * f32(f32(2.0) + R))
    E = f32(e)
    return f32(f32(E * F.f32(F.LN2_HI)) + f32(lm + f32(E * F.f32(F.LN2_LO))))


def exp(X):
    return _elementwise(X, X, lambda x, _: exp32(x))


def log(X):
    return _elementwise(X, X, lambda x, _: log32(x))


def gather_rows(D, idx) -> np.ndarray:
    return np.ascontiguousarray(D[np.asarray(idx, dtype=np.int64), :])


@_quiet
def xent_grad(P, y) -> np.ndarray:
    B, C = P.shape
    out = np.empty((B, C), dtype=np.float32)
    Bf = f32(B)
    for b in range(B):
        for c in range(C):
            onehot = f32(1.0) if c == int(y[b]) else f32(0.0)
            out[b, c] = f32(f32(P[b, c] - onehot) / Bf)
    return out


@_quiet
def nll(L, S, y) -> np.ndarray:
    out = np.empty((1, S.shape[0]), dtype=np.float32)
    for b in range(S.shape[0]):
        out[0, b] = f32(L[0, b] - S[b, int(y[b])])
    return out


@_quiet
def mean(A) -> np.ndarray:
    return np.array([[f32(row_sum(A)[0, 0] / f32(A.shape[1]))]], dtype=np.float32)


@_quiet
def momentum(V, G, mu: np.float32) -> np.ndarray:
    return _elementwise(V, G, lambda v, g: f32(f32(f32(mu) * v) + g))


@_quiet
def sgd(W, V, lr: np.float32) -> np.ndarray:
    return _elementwise(W, V, lambda w, v: f32(w - f32(f32(lr) * v)))


@_quiet
def average(Ps, w) -> np.ndarray:
    """acc = +0; acc = fl(acc + fl(w_s * P_s)) over s (aggregation)."""
    out = np.empty(Ps[0].shape, dtype=np.float32)
    for idx in np.ndindex(out.shape):
        acc = f32(0.0)
        for s, P in enumerate(Ps):
            acc = f32(acc + f32(f32(w[s]) * f32(P[idx])))
        out[idx] = acc
    return out
