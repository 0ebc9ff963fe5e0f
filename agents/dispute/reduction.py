"""The accumulator bisection of a disputed reduction (PROTOCOL §7.10): the chain of one output
element and the span cuts, mirroring `contracts/dispute/lib/Spans.sol` and the one-step prover's
`accumulate`. Pure: numpy in, bits out.

A reduction's element of K terms is the end of the accumulator chain acc_0 … acc_{K+1}
(`registry.Chain`); a game disputing it keeps a span (lo, hi) with acc_lo agreed and acc_hi
disputed, and cuts it into at most FANOUT parts per round until one step is left.
"""

from __future__ import annotations

import numpy as np

from agents.training.float32 import CANONICAL_NAN
from agents.training.registry import OPS, Chain

FANOUT = 16  # Spans.FANOUT


def chain_of(op: str) -> Chain | None:
    """The chain of operator `op` (registry.OPS), or None if it is not a reduction."""
    return OPS[op].chain


def parts(lo: int, hi: int) -> int:
    """Spans.parts: min(FANOUT, hi - lo)."""
    return min(FANOUT, hi - lo)


def cut(lo: int, hi: int, i: int, n: int) -> int:
    """Spans.cut: cut point i of span (lo, hi) cut into n parts."""
    return lo + (hi - lo) * i // n


def cuts(lo: int, hi: int) -> list[int]:
    """The interior cut points of span (lo, hi), in order (the positions a round posts)."""
    n = parts(lo, hi)
    return [cut(lo, hi, i, n) for i in range(1, n)]


def rounds(terms: int) -> int:
    """The most rounds the bisection of a K-term element takes: the span (0, K + 1) shrinks to
    length 1, following the longest part (ceil(length / parts)) each round."""
    length, r = terms + 1, 0
    while length > 1:
        n = min(FANOUT, length)
        length = -(-length // n)
        r += 1
    return r


def _canonical(bits: np.ndarray) -> np.ndarray:
    out = bits.copy()
    out[(bits & 0x7FFFFFFF) > 0x7F800000] = CANONICAL_NAN
    return out


def _max_chain(x: np.ndarray) -> np.ndarray:
    """acc_1 … acc_K of the max chain from acc_0 = -inf, as Float32.max: NaN from the first NaN
    on; otherwise the running maximum by value, ties keeping the earlier element. Only ±0 have
    equal values and different bits, and a running maximum of value 0 is first reached at the
    first zero of the row, so that zero's bits are every such accumulator's bits."""
    with np.errstate(invalid="ignore"):
        vals = np.maximum.accumulate(x)  # np.maximum propagates NaN
    bits = vals.view(np.uint32).copy()
    zeros = np.flatnonzero(x == 0)
    if zeros.size:
        bits[vals == 0] = x[zeros[0]].view(np.uint32)
    return _canonical(bits)


def accumulators(chain: Chain, rows: list[np.ndarray]) -> np.ndarray:
    """acc_0 … acc_{K+1} (uint32 bits, NaNs canonical) of one element whose dependency rows
    (float32, K each) are `rows`: two for a product chain, one otherwise."""
    a = np.ascontiguousarray(rows[0], dtype=np.float32).reshape(-1)
    with np.errstate(all="ignore"):
        terms = a * np.asarray(rows[1], dtype=np.float32).reshape(-1) if chain.product else a
    k = terms.size
    out = np.empty(k + 2, dtype=np.uint32)
    out[0] = chain.init
    if chain.combine == "add":
        # acc_0 (+0, or index_add_rows' -0) is summed explicitly: a row of -0 terms from +0
        # gives +0, as fl(+0 + -0) = +0. ufunc.accumulate adds strictly left to right in float32
        # (no pairwise summation).
        init = np.array([chain.init], np.uint32).view(np.float32)
        with np.errstate(all="ignore"):
            acc = np.add.accumulate(np.concatenate([init, terms]))[1:]
        out[1 : k + 1] = _canonical(acc.view(np.uint32))
    elif chain.combine == "max":
        out[1 : k + 1] = _max_chain(terms)
    else:
        raise ValueError(f"unknown combine {chain.combine!r}")
    last = out[k : k + 1].view(np.float32)
    if chain.mean:
        with np.errstate(all="ignore"):
            last = last / np.float32(k)
    out[k + 1] = _canonical(last.view(np.uint32))[0]
    return out


def scalar_accumulators(chain: Chain, rows: list[np.ndarray]) -> list[int]:
    """The same chain one float32 scalar at a time, as the prover's loop runs it (the oracle
    `accumulators` is tested against)."""
    f32 = np.float32

    def bits(v) -> int:
        b = int(np.array([v], f32).view(np.uint32)[0])
        return CANONICAL_NAN if (b & 0x7FFFFFFF) > 0x7F800000 else b

    def val(b: int):
        return np.array([b], np.uint32).view(f32)[0]

    a = np.asarray(rows[0], f32).reshape(-1)
    b = np.asarray(rows[1], f32).reshape(-1) if chain.product else None
    acc, out = chain.init, [chain.init]
    with np.errstate(all="ignore"):
        for j in range(a.size):
            term = f32(a[j] * b[j]) if b is not None else a[j]
            if chain.combine == "add":
                acc = bits(f32(val(acc) + term))
            elif np.isnan(val(acc)) or np.isnan(term):
                acc = CANONICAL_NAN
            elif term > val(acc):
                acc = bits(term)
            out.append(acc)
        fin = val(acc) / f32(a.size) if chain.mean else val(acc)
    out.append(bits(fin))
    return out
