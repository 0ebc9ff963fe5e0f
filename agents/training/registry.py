"""The operator registry (PROTOCOL §2, §2.6): every operator of the protocol, once.

`OPS` is the one table: the operators of version-3 graphs (general models, codes 64 and up, the
GraphProver's) and the 2-D operators of version-1/2 MLP step graphs (agents/training/graph.py),
whose node descriptors carry the one-step prover's codes 1..22 (`v1_code`; relu, exp and log
serve both). Both code sets are checked against contracts/dispute/lib/OpCodes.sol.

Each `Op` entry holds everything the protocol knows about one operator:

- `code`: its number in the graph encoding (64 and up for version-3 graphs, `V3_*` in
  `contracts/dispute/lib/OpCodes.sol`; a version-1-only operator's is its `v1_code`, 1..22);
- `shape`: the shape rule (the output shape from the inputs' shapes and the attributes, or a
  check of the shape the node declares);
- `order`: its exact IEEE-754 binary32 evaluation order, the normative text;
- `torch`: the portable kernel (torch elementwise kernels only, reductions sequential over the
  reduced index: no thread count, SIMD width or device changes a bit; the path CUDA runs);
- `native`: the C kernel where one exists (`None`: the portable kernel runs everywhere);
- `scalar`: the scalar reference of one output element on numpy float32 scalars, the oracle the
  kernels are tested against (`None` for data movement, where the dependency rule says which
  input element is copied);
- `deps`: the element-dependency rule: the flat input elements one output element reads.

Tensors are row-major N-d arrays of dtype `f32` (binary32) or `i32` (two's complement; booleans
are 0/1). Elementwise operators broadcast as NumPy does. Adding an operator is adding one entry.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from math import prod

import numpy as np
import torch

from agents.training import fastops, native, ops, reference
from agents.training import fastops as EW
from agents.training import float32 as F

Shape = tuple[int, ...]
f32 = np.float32


class GraphError(ValueError):
    """A graph that breaks an operator's rule (shape, dtype, arity or attribute)."""


@dataclass(frozen=True)
class Node:
    """One graph node: operator name, input value ids, integer attributes, output shape/dtype."""

    op: str
    inputs: tuple[int, ...]
    attrs: tuple[int, ...]
    shape: Shape
    dtype: str  # "f32" | "i32"


Kernel = Callable[[list[torch.Tensor], Node], torch.Tensor]
Deps = Callable[[Node, list[Shape], int], list[tuple[int, list[int]]]]


@dataclass(frozen=True)
class Chain:
    """The accumulator chain of one output element of a reduction (PROTOCOL §7.10), the
    positions a dispute bisects: acc_0 = `init` (binary32 bits); for j = 1 … K,
    acc_j = combine(acc_{j-1}, term_j) with term_j = fl(a_j × b_j) of the element's two
    dependency rows (`product`) or a_j of its one row, combine fl(+) (`"add"`) or Float32.max
    (`"max"`: canonical NaN if either is NaN, else the later term only if strictly greater); the
    element is acc_{K+1} = finish(acc_K): fl(acc_K / K) for `mean`, else acc_K. The chain's
    end is the operator's `order` bit for bit (tested), so no new arithmetic is defined here.
    `indexed` (index_add_rows): K = J + 1 terms from acc_0 = -0; term 1 is dest[e] (-0 + d = d
    bit for bit) and term j + 1 is src row j's element when idx[j] is e's row, else skipped
    (acc_{j+1} = acc_j)."""

    init: int
    combine: str  # "add" | "max"
    product: bool
    mean: bool = False
    indexed: bool = False


@dataclass(frozen=True)
class Op:
    code: int
    name: str
    arity: int  # -1: one or more
    order: str
    shape: Callable[[Node, list[Shape]], Shape | None]
    torch: Kernel
    deps: Deps
    native: Kernel | None = None
    scalar: Callable[..., np.float32] | None = None
    chain: Chain | None = None  # f32 reductions: how a dispute bisects one output element
    # elementwise operators: the instruction of the fused programs the native path runs
    # (fastops.EW_*, kernels.c vtp_ew_run) for f32 and for i32 operands (None: not fusable)
    fused: tuple[int | None, int | None] | None = None
    # the scalar reference also takes (node, e): its element depends on its position (uniform)
    positional: bool = False
    # its code in a version-1/2 step graph's node descriptor (OneStepProver), None if it has none
    v1_code: int | None = None
    # the whole-tensor scalar reference on numpy float32 (version-1 operators: reference.py)
    reference: Callable[[list[np.ndarray], Node], np.ndarray] | None = None


OPS: dict[str, Op] = {}


V3_FIRST_CODE = 64  # version-3 graphs use codes from here; below are the version-1 operators


def _register(op: Op) -> None:
    if op.name in OPS or any(o.code == op.code for o in OPS.values()):
        raise RuntimeError(f"operator {op.name} / code {op.code} registered twice")
    if op.v1_code is not None and any(o.v1_code == op.v1_code for o in OPS.values()):
        raise RuntimeError(f"operator {op.name}: version-1 code {op.v1_code} registered twice")
    OPS[op.name] = op


def op_codes() -> dict[str, int]:
    """The operators of version-3 graphs and their codes."""
    return {name: op.code for name, op in OPS.items() if op.code >= V3_FIRST_CODE}


# -- index helpers ---------------------------------------------------------------------------


def unravel(i: int, shape: Shape) -> list[int]:
    out = []
    for s in reversed(shape):
        out.append(i % s)
        i //= s
    return out[::-1]


def ravel(idx: Sequence[int], shape: Shape) -> int:
    i = 0
    for x, s in zip(idx, shape, strict=True):
        i = i * s + x
    return i


def broadcast_shape(shapes: list[Shape]) -> Shape:
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        raise GraphError(f"shapes {shapes} do not broadcast") from None


def _bcast_index(out_idx: list[int], in_shape: Shape) -> int:
    """The flat element of an input that broadcasts to output index out_idx."""
    lead = len(out_idx) - len(in_shape)
    return ravel([0 if s == 1 else out_idx[lead + d] for d, s in enumerate(in_shape)], in_shape)


def _wrap_i32(bits: int) -> int:
    return bits - (1 << 32) if bits >= 1 << 31 else bits


# -- shape rules -----------------------------------------------------------------------------


def _same_as_broadcast(n: Node, s: list[Shape]) -> Shape:
    return broadcast_shape(s)


def _reduce_last(n: Node, s: list[Shape]) -> Shape:
    if not s[0]:
        raise GraphError(f"{n.op} needs at least one dimension")
    return s[0][:-1]


def _free(n: Node, s: list[Shape]) -> None:
    return None


# -- elementwise -----------------------------------------------------------------------------


def _elementwise_deps(n: Node, s: list[Shape], e: int) -> list[tuple[int, list[int]]]:
    idx = unravel(e, n.shape)
    return [(k, [_bcast_index(idx, sh)]) for k, sh in enumerate(s)]


def _v1_ref(v1) -> Callable | None:
    """A version-1 operator's whole-tensor reference (reference.py) from (code, function)."""
    return None if v1 is None else (lambda a, n: v1[1](*a))


def _binary(code: int, name: str, order: str, fn, scalar, fused=None, v1=None) -> None:
    _register(Op(code, name, 2, order, _same_as_broadcast, lambda a, n: fn(a[0], a[1]),
                 _elementwise_deps, None, scalar, fused=fused, v1_code=v1 and v1[0],
                 reference=_v1_ref(v1)))  # fmt: skip


def _unary(code: int, name: str, order: str, fn, scalar, native=None, fused=None,
           v1=None) -> None:  # fmt: skip
    kernel = None if native is None else (lambda a, n: native(a[0].contiguous()))
    _register(Op(code, name, 1, order, lambda n, s: s[0], lambda a, n: fn(a[0]),
                 _elementwise_deps, kernel, scalar, fused=fused, v1_code=v1 and v1[0],
                 reference=_v1_ref(v1)))  # fmt: skip


def _s(fn):
    """Scalar reference wrapper: IEEE overflow / invalid are results here, not errors."""

    def wrapped(*a):
        with np.errstate(all="ignore"):
            return fn(*a)

    return wrapped


def t_maximum(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    if not a.is_floating_point():
        return torch.where(a > b, a, b)
    nan = torch.isnan(a) | torch.isnan(b)
    return torch.where(nan, torch.full_like(a, float("nan")), torch.where(a > b, a, b))


def t_minimum(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    if not a.is_floating_point():
        return torch.where(a < b, a, b)
    nan = torch.isnan(a) | torch.isnan(b)
    return torch.where(nan, torch.full_like(a, float("nan")), torch.where(a < b, a, b))


def _cmp(fn):
    return lambda a, b: fn(a, b).to(torch.int32)


_binary(64, "add", "fl(a + b)", torch.add, _s(lambda a, b: a + b), (EW.EW_ADD, EW.EW_IADD),
        (3, reference.add))  # fmt: skip
_binary(65, "sub", "fl(a - b)", torch.sub, _s(lambda a, b: a - b), (EW.EW_SUB, EW.EW_ISUB),
        (4, reference.sub))  # fmt: skip
_binary(66, "mul", "fl(a * b)", torch.mul, _s(lambda a, b: a * b), (EW.EW_MUL, EW.EW_IMUL),
        (5, reference.mul))  # fmt: skip
_binary(67, "div", "fl(a / b) (f32 only)", torch.div, _s(lambda a, b: a / b), (EW.EW_DIV, None),
        (6, reference.div))  # fmt: skip
_binary(
    68,
    "maximum",
    "NaN if a or b is NaN; else a > b ? a : b (a tie gives b)",
    t_maximum,
    _s(lambda a, b: f32("nan") if np.isnan(a) or np.isnan(b) else (a if a > b else b)),
    (EW.EW_MAX, EW.EW_IMAX),
)
_binary(
    69,
    "minimum",
    "NaN if a or b is NaN; else a < b ? a : b (a tie gives b)",
    t_minimum,
    _s(lambda a, b: f32("nan") if np.isnan(a) or np.isnan(b) else (a if a < b else b)),
    (EW.EW_MIN, EW.EW_IMIN),
)
for _code, _name, _fn, _py, _fused in (
    (70, "gt", torch.gt, lambda a, b: a > b, (EW.EW_GT, EW.EW_IGT)),
    (71, "ge", torch.ge, lambda a, b: a >= b, (EW.EW_GE, EW.EW_IGE)),
    (72, "lt", torch.lt, lambda a, b: a < b, (EW.EW_LT, EW.EW_ILT)),
    (73, "le", torch.le, lambda a, b: a <= b, (EW.EW_LE, EW.EW_ILE)),
    (74, "eq", torch.eq, lambda a, b: a == b, (EW.EW_EQ, EW.EW_IEQ)),
    (75, "ne", torch.ne, lambda a, b: a != b, (EW.EW_NE, EW.EW_INE)),
):
    _binary(
        _code,
        _name,
        f"i32 1 if IEEE a {_name} b else 0 (NaN compares unordered)",
        _cmp(_fn),
        (lambda p: _s(lambda a, b: np.int32(1 if p(a, b) else 0)))(_py),
        _fused,
    )


def t_where(c: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.where(c != 0, a, b)


_register(Op(76, "where", 3, "c != 0 ? a : b (a bit copy)", _same_as_broadcast,
             lambda a, n: t_where(a[0], a[1], a[2]), _elementwise_deps, None,
             lambda c, a, b: a if c != 0 else b, fused=(EW.EW_WHERE, EW.EW_WHERE)))  # fmt: skip


def t_relu(x: torch.Tensor) -> torch.Tensor:
    return ops.relu(x)


_unary(80, "neg", "flip the sign bit (NaN payloads too)", torch.neg, lambda a: -a,
       fused=(EW.EW_NEG, EW.EW_INEG))  # fmt: skip
_unary(81, "exp", "exp32 (PROTOCOL §2.1)", ops.exp, lambda a: F_exp32(a), fastops.exp,
       (EW.EW_EXP, None), (14, reference.exp))  # fmt: skip
_unary(82, "log", "log32 (PROTOCOL §2.2)", ops.log, lambda a: F_log32(a), fastops.log,
       (EW.EW_LOG, None), (15, reference.log))  # fmt: skip
_unary(83, "sqrt", "IEEE square root, correctly rounded", lambda x: t_sqrt(x), _s(np.sqrt),
       fused=(EW.EW_SQRT, None))  # fmt: skip
_unary(
    84,
    "relu",
    "x <= 0 ? +0 : x (NaN stays NaN; -0 becomes +0)",
    t_relu,
    lambda a: a if (np.isnan(a) or a > 0) else f32(0.0),
    fastops.relu,
    (EW.EW_RELU, None),
    (10, reference.relu),
)


def t_sqrt(x: torch.Tensor) -> torch.Tensor:
    # torch's float32 CPU sqrt is not correctly rounded (about 1 in 6 results is one ulp off,
    # measured on torch 2.13); the binary64 square root rounded once to binary32 is (53 >= 2*24+2
    # bits), on every CPU and on CUDA.
    return torch.sqrt(x.double()).float()


def F_exp32(a: np.float32) -> np.float32:
    return reference.exp32(f32(a))


def F_log32(a: np.float32) -> np.float32:
    return reference.log32(f32(a))


# tanh32 and erf32 are built from exp32 and single IEEE operations only (no library call), so
# the C, torch and Solidity paths agree bit for bit. Their constants, as binary32 bits:
TANH_BIG = F.bits(f32(9.0))  # |x| > 9: tanh rounds to +-1 in binary32
ERF_P = F.bits(f32(0.3275911))  # Abramowitz & Stegun 7.1.26, |error| <= 1.5e-7
ERF_A = tuple(
    F.bits(f32(c)) for c in (1.061405429, -1.453152027, 1.421413741, -0.284496736, 0.254829592)
)  # a5 first: Horner order
ERF_BIG = F.bits(f32(4.0))  # |x| >= 4: erf rounds to +-1


def _odd(x: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
    """An odd function's value r at |x|, given x's sign; a NaN x stays itself."""
    r = torch.where(torch.signbit(x), torch.neg(r), r)
    return torch.where(torch.isnan(x), x, r)


def t_tanh(x: torch.Tensor) -> torch.Tensor:
    c = lambda b: ops.const(b, x)  # noqa: E731
    a = torch.abs(x)  # clears the sign bit: exact
    e = ops.exp(torch.add(a, a))
    r = torch.sub(c(0x3F800000), torch.div(c(0x40000000), torch.add(e, c(0x3F800000))))
    return _odd(x, torch.where(a > c(TANH_BIG), c(0x3F800000).expand_as(x), r))


def s_tanh(x: np.float32) -> np.float32:
    with np.errstate(all="ignore"):
        if np.isnan(x):
            return x
        a = f32(abs(x))
        if a > F.f32(TANH_BIG):
            r = f32(1.0)
        else:
            e = F_exp32(f32(a + a))
            r = f32(f32(1.0) - f32(f32(2.0) / f32(e + f32(1.0))))
        return f32(-r) if np.signbit(x) else r


def t_erf(x: torch.Tensor) -> torch.Tensor:
    c = lambda b: ops.const(b, x)  # noqa: E731
    a = torch.abs(x)
    t = torch.div(c(0x3F800000), torch.add(c(0x3F800000), torch.mul(c(ERF_P), a)))
    p = c(ERF_A[0]).expand_as(x)
    for k in ERF_A[1:]:
        p = torch.add(torch.mul(p, t), c(k))
    p = torch.mul(p, t)
    e = ops.exp(torch.neg(torch.mul(a, a)))
    r = torch.sub(c(0x3F800000), torch.mul(p, e))
    return _odd(x, torch.where(a >= c(ERF_BIG), c(0x3F800000).expand_as(x), r))


def s_erf(x: np.float32) -> np.float32:
    with np.errstate(all="ignore"):
        if np.isnan(x):
            return x
        a = f32(abs(x))
        if a >= F.f32(ERF_BIG):
            r = f32(1.0)
        else:
            t = f32(f32(1.0) / f32(f32(1.0) + f32(F.f32(ERF_P) * a)))
            p = F.f32(ERF_A[0])
            for k in ERF_A[1:]:
                p = f32(f32(p * t) + F.f32(k))
            p = f32(p * t)
            e = F_exp32(f32(-f32(a * a)))
            r = f32(f32(1.0) - f32(p * e))
        return f32(-r) if np.signbit(x) else r


_unary(
    85,
    "tanh",
    "a = |x|; a > 9 ? 1 : fl(1 - fl(2 / fl(exp32(fl(a + a)) + 1))); the sign of x "
    "copied on; NaN stays",
    t_tanh,
    s_tanh,
    fastops.tanh,
    (EW.EW_TANH, None),
)
_unary(
    86,
    "erf",
    "a = |x|; a >= 4 ? 1 : t = fl(1 / fl(1 + fl(p * a))), poly = Horner over "
    "a5..a1 in t times t, fl(1 - fl(poly * exp32(-fl(a * a)))); sign of x copied on; NaN "
    "stays (ERF_P, ERF_A)",
    t_erf,
    s_erf,
    fastops.erf,
    (EW.EW_ERF, None),
)
_unary(
    87,
    "cast_f32",
    "i32 -> f32, round to nearest even",
    lambda x: x.to(torch.float32),
    lambda a: f32(a),
    fused=(None, EW.EW_CAST_F32),
)
_unary(
    88,
    "cast_i32",
    "f32 -> i32, toward zero (the value must be finite and in range)",
    lambda x: x.to(torch.int32),
    lambda a: np.int32(np.trunc(a)),
    fused=(EW.EW_CAST_I32, None),
)
_unary(
    89,
    "logical_not",
    "i32 x == 0 ? 1 : 0",
    lambda x: (x == 0).to(torch.int32),
    lambda a: np.int32(1 if a == 0 else 0),
    fused=(None, EW.EW_NOT),
)


# -- reductions over the last axis ------------------------------------------------------------


def _last_deps(n: Node, s: list[Shape], e: int) -> list[tuple[int, list[int]]]:
    k = s[0][-1]
    return [(0, list(range(e * k, (e + 1) * k)))]


def t_sum_last(x: torch.Tensor) -> torch.Tensor:
    acc = torch.zeros(x.shape[:-1], dtype=x.dtype, device=x.device)
    for j in range(x.shape[-1]):
        acc.add_(x[..., j])
    return acc


def n_sum_last(x: torch.Tensor) -> torch.Tensor:
    if x.device.type != "cpu" or x.dim() == 0 or 0 in x.shape:
        return t_sum_last(x)
    return fastops.reduce_last(x, "sum")


def t_max_last(x: torch.Tensor) -> torch.Tensor:
    m = x[..., 0].clone()
    for j in range(1, x.shape[-1]):
        v = x[..., j]
        m = torch.where(v > m, v, m)
    if x.is_floating_point():
        m = torch.where(torch.isnan(x).any(dim=-1), torch.full_like(m, float("nan")), m)
    return m


def n_max_last(x: torch.Tensor) -> torch.Tensor:
    if x.device.type != "cpu" or x.dim() == 0 or 0 in x.shape:
        return t_max_last(x)
    return fastops.reduce_last(x, "max")


def t_argmax_last(x: torch.Tensor) -> torch.Tensor:
    m = x[..., 0].clone()
    i = torch.zeros(x.shape[:-1], dtype=torch.int32, device=x.device)
    for j in range(1, x.shape[-1]):
        v = x[..., j]
        take = v > m
        if x.is_floating_point():  # the first NaN wins and then nothing replaces it
            take = (take & ~torch.isnan(m)) | (torch.isnan(v) & ~torch.isnan(m))
        m = torch.where(take, v, m)
        i = torch.where(take, j, i)
    return i


def s_sum(*xs):
    with np.errstate(all="ignore"):
        acc = xs[0].dtype.type(0)
        for v in xs:
            acc = xs[0].dtype.type(acc + v)
        return acc


def s_dot(*xs):
    """The first half of xs is A's row, the second B's column (the dependency rule's order)."""
    k = len(xs) // 2
    with np.errstate(all="ignore"):
        acc = f32(0.0)
        for a, b in zip(xs[:k], xs[k:], strict=True):
            acc = f32(acc + f32(a * b))
        return acc


def s_max(*xs):
    if any(np.isnan(v) for v in xs):
        return f32("nan")
    m = xs[0]
    for v in xs[1:]:
        m = v if v > m else m
    return m


def s_argmax(*xs):
    m, i = xs[0], 0
    for j, v in enumerate(xs[1:], 1):
        if not np.isnan(m) and (v > m or np.isnan(v)):
            m, i = v, j
    return np.int32(i)


_register(Op(96, "sum_last", 1, "acc = 0; acc = fl(acc + x[..., j]) for j ascending",
             _reduce_last, lambda a, n: t_sum_last(a[0]), _last_deps,
             lambda a, n: n_sum_last(a[0]), s_sum, Chain(0x00000000, "add", False)))  # fmt: skip
_register(
    Op(
        97,
        "max_last",
        1,
        "NaN if the row holds a NaN; else m = x[0]; m = x[j] > m ? "
        "x[j] : m for j ascending (the first of equal maxima)",
        _reduce_last,
        lambda a, n: t_max_last(a[0]),
        _last_deps,
        lambda a, n: n_max_last(a[0]),
        s_max,
        Chain(init=0xFF800000, combine="max", product=False),
    )
)
_register(
    Op(
        98,
        "argmax_last",
        1,
        "i32 index of the first NaN, else of the first maximum",
        _reduce_last,
        lambda a, n: t_argmax_last(a[0]),
        _last_deps,
        None,
        s_argmax,
    )
)


# -- matmul ----------------------------------------------------------------------------------


def _matmul_shape(n: Node, s: list[Shape]) -> Shape:
    a, b = s
    if len(a) < 2 or len(a) != len(b) or a[:-2] != b[:-2] or a[-1] != b[-2]:
        raise GraphError(f"matmul needs (..., M, K) @ (..., K, N), got {a} @ {b}")
    return (*a[:-1], b[-1])


def _matmul_deps(n: Node, s: list[Shape], e: int) -> list[tuple[int, list[int]]]:
    a, b = s
    idx = unravel(e, n.shape)
    K, N = a[-1], b[-1]
    batch = ravel(idx[:-2], a[:-2]) if len(a) > 2 else 0
    row = (batch * a[-2] + idx[-2]) * K
    col0 = batch * K * N + idx[-1]
    return [(0, list(range(row, row + K))), (1, [col0 + k * N for k in range(K)])]


def t_matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    acc = torch.zeros((*a.shape[:-1], b.shape[-1]), dtype=torch.float32, device=a.device)
    prod_ = torch.empty_like(acc)
    for k in range(a.shape[-1]):
        torch.mul(a[..., :, k : k + 1], b[..., k : k + 1, :], out=prod_)
        acc.add_(prod_)
    return acc


def n_matmul(a: torch.Tensor, b: torch.Tensor, threads: int = 1) -> torch.Tensor:
    return fastops.matmul_strided(a, b, threads)


_register(
    Op(
        100,
        "matmul",
        2,
        "C[..., i, j]: acc = +0; acc = fl(acc + fl(A[..., i, k] * B[..., k, j])) for k ascending",
        _matmul_shape,
        lambda a, n: t_matmul(a[0], a[1]),
        _matmul_deps,
        lambda a, n, th=1: n_matmul(a[0], a[1], th),
        s_dot,
        Chain(init=0x00000000, combine="add", product=True),
    )
)


# -- data movement (bit copies: no arithmetic, so no scalar reference) ------------------------


def _reshape_shape(n: Node, s: list[Shape]) -> None:
    if prod(n.shape) != prod(s[0]):
        raise GraphError(f"reshape {s[0]} -> {n.shape} changes the element count")


def _copy_deps(n: Node, s: list[Shape], e: int) -> list[tuple[int, list[int]]]:
    return [(0, [e])]


def _permute_shape(n: Node, s: list[Shape]) -> Shape:
    if sorted(n.attrs) != list(range(len(s[0]))):
        raise GraphError(f"permute dims {n.attrs} are not a permutation of {len(s[0])} axes")
    return tuple(s[0][d] for d in n.attrs)


def _permute_deps(n: Node, s: list[Shape], e: int) -> list[tuple[int, list[int]]]:
    idx = unravel(e, n.shape)
    src = [0] * len(idx)
    for out_axis, in_axis in enumerate(n.attrs):
        src[in_axis] = idx[out_axis]
    return [(0, [ravel(src, s[0])])]


def _expand_shape(n: Node, s: list[Shape]) -> None:
    if broadcast_shape([s[0], n.shape]) != n.shape:
        raise GraphError(f"cannot expand {s[0]} to {n.shape}")


def _expand_deps(n: Node, s: list[Shape], e: int) -> list[tuple[int, list[int]]]:
    return [(0, [_bcast_index(unravel(e, n.shape), s[0])])]


def _slice_shape(n: Node, s: list[Shape]) -> None:
    dim, start, step = n.attrs
    size = s[0][dim]
    last = start + step * (n.shape[dim] - 1)
    if (
        step < 1
        or start < 0
        or last >= size
        or n.shape[:dim] + n.shape[dim + 1 :] != (s[0][:dim] + s[0][dim + 1 :])
    ):
        raise GraphError(f"slice {n.attrs} of {s[0]} cannot give {n.shape}")


def _slice_deps(n: Node, s: list[Shape], e: int) -> list[tuple[int, list[int]]]:
    dim, start, step = n.attrs
    idx = unravel(e, n.shape)
    idx[dim] = start + step * idx[dim]
    return [(0, [ravel(idx, s[0])])]


def t_slice(x: torch.Tensor, n: Node) -> torch.Tensor:
    dim, start, step = n.attrs
    end = start + step * (n.shape[dim] - 1) + 1
    return x.narrow(dim, start, end - start)[(slice(None),) * dim + (slice(None, None, step),)]


def _cat_shape(n: Node, s: list[Shape]) -> Shape:
    (dim,) = n.attrs
    for sh in s[1:]:
        if len(sh) != len(s[0]) or sh[:dim] + sh[dim + 1 :] != s[0][:dim] + s[0][dim + 1 :]:
            raise GraphError(f"cat along {dim}: shapes {s} differ off that axis")
    return (*s[0][:dim], sum(sh[dim] for sh in s), *s[0][dim + 1 :])


def _cat_deps(n: Node, s: list[Shape], e: int) -> list[tuple[int, list[int]]]:
    (dim,) = n.attrs
    idx = unravel(e, n.shape)
    for k, sh in enumerate(s):
        if idx[dim] < sh[dim]:
            return [(k, [ravel(idx, sh)])]
        idx[dim] -= sh[dim]
    raise IndexError(e)


def _const_shape(n: Node, s: list[Shape]) -> None:
    if len(n.attrs) not in (1, prod(n.shape)):
        raise GraphError(f"const of shape {n.shape} needs 1 or {prod(n.shape)} words")


def t_const(n: Node, device) -> torch.Tensor:
    words = np.array(n.attrs, dtype=np.uint32).view(np.int32)
    t = torch.from_numpy(words.copy())
    if n.dtype == "f32":
        t = t.view(torch.float32)
    if len(words) == 1:
        return t.reshape(()).to(device).expand(n.shape).contiguous()
    return t.reshape(n.shape).to(device)


_register(
    Op(
        112,
        "const",
        0,
        "the node's words (binary32 bits or i32), one word repeated when only one is given",
        _const_shape,
        lambda a, n: t_const(n, "cpu"),
        lambda n, s, e: [],
    )
)
_register(
    Op(
        113,
        "reshape",
        1,
        "the same row-major elements under a new shape",
        _reshape_shape,
        lambda a, n: a[0].reshape(n.shape),
        _copy_deps,
    )
)
_register(
    Op(
        114,
        "permute",
        1,
        "out[i_p0, i_p1, ...] = x[i_0, i_1, ...] (attrs: the dims)",
        _permute_shape,
        lambda a, n: a[0].permute(*n.attrs).contiguous(),
        _permute_deps,
    )
)
_register(
    Op(
        115,
        "expand",
        1,
        "broadcast to the node's shape (a bit copy)",
        _expand_shape,
        lambda a, n: a[0].expand(n.shape).contiguous(),
        _expand_deps,
    )
)
_register(
    Op(
        116,
        "slice",
        1,
        "attrs (dim, start, step): out[.., i, ..] = x[.., start + step * i, ..]",
        _slice_shape,
        lambda a, n: t_slice(a[0], n).contiguous(),
        _slice_deps,
    )
)
_register(
    Op(
        117,
        "cat",
        -1,
        "concatenation along attrs[0], inputs in order",
        _cat_shape,
        lambda a, n: torch.cat(a, dim=n.attrs[0]),
        _cat_deps,
    )
)


# -- indexing --------------------------------------------------------------------------------


def _rows_shape(n: Node, s: list[Shape]) -> Shape:
    return (*s[1], *s[0][1:])


def t_index_rows(w: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    return w.index_select(0, idx.reshape(-1).to(torch.int64)).reshape(*idx.shape, *w.shape[1:])


_register(
    Op(
        121,
        "index_rows",
        2,
        "out[i, ...] = W[idx[i], ...] (embedding lookup)",
        _rows_shape,
        lambda a, n: t_index_rows(a[0], a[1]),
        lambda n, s, e: [(1, [e // max(1, prod(s[0][1:]))])],
    )
)


def _index_add_shape(n: Node, s: list[Shape]) -> Shape:
    dest, idx, src = s
    if tuple(src) != (*idx, *dest[1:]):
        raise GraphError(f"index_add_rows: src {src} must be idx {idx} + dest rows {dest[1:]}")
    return dest


def t_index_add_rows(dest: torch.Tensor, idx: torch.Tensor, src: torch.Tensor) -> torch.Tensor:
    out = dest.clone()
    i = idx.reshape(-1).to(torch.int64)
    rows = src.reshape(i.shape[0], *dest.shape[1:])
    # Sequential in j: two rows of the same index add in source order (index_add_ may not).
    order = torch.argsort(i, stable=True)
    si, sr = i[order], rows[order]
    if si.numel():
        # rank of each j among the entries of its index: pass r adds every index's r-th entry
        first = torch.ones_like(si, dtype=torch.bool)
        first[1:] = si[1:] != si[:-1]
        pos = torch.arange(si.numel(), device=si.device)
        start = torch.cummax(torch.where(first, pos, 0), 0).values
        rank = pos - start
        for r in range(int(rank.max()) + 1):
            sel = rank == r
            out[si[sel]] = torch.add(out[si[sel]], sr[sel])
    return out


_register(
    Op(
        122,
        "index_add_rows",
        3,
        "out = dest; out[idx[j], ...] = fl(out[idx[j], ...] + "
        "src[j, ...]) for j ascending (embedding gradient)",
        _index_add_shape,
        lambda a, n: t_index_add_rows(a[0], a[1], a[2]),
        lambda n, s, e: [(0, [e]), (1, list(range(prod(s[1]))))],
        lambda a, n: fastops.index_add_rows(a[0], a[1], a[2]),
        chain=Chain(init=0x80000000, combine="add", product=False, indexed=True),
    )
)


def _gather_deps(n: Node, s: list[Shape], e: int) -> list[tuple[int, list[int]]]:
    return [(1, [e])]  # and x at the gathered position: data-dependent


_register(
    Op(
        123,
        "gather",
        2,
        "torch.gather along attrs[0]: out[.., i, ..] = x[.., idx[.., i, ..], ..]",
        lambda n, s: s[1],
        lambda a, n: torch.gather(a[0], n.attrs[0], a[1].to(torch.int64)),
        _gather_deps,
    )
)


def t_scatter_value(x: torch.Tensor, idx: torch.Tensor, n: Node) -> torch.Tensor:
    dim, bits = n.attrs
    v = torch.tensor(_wrap_i32(bits), dtype=torch.int32)
    v = float(v.view(torch.float32)) if x.dtype == torch.float32 else int(v)
    return x.scatter(dim, idx.to(torch.int64), v)


_register(
    Op(
        124,
        "scatter_value",
        2,
        "out = x; out[.., idx[.., i, ..], ..] = the word attrs[1] along attrs[0]",
        lambda n, s: s[0],
        lambda a, n: t_scatter_value(a[0], a[1], n),
        lambda n, s, e: [(0, [e]), (1, list(range(prod(s[1]))))],
    )
)


# -- the committed random stream --------------------------------------------------------------

# Philox4x32-10 (Salmon, Moraes, Dror & Shaw, SC'11; Random123's constants): 10 rounds of two
# 32x32 -> 64-bit multiplications, the key bumped by the Weyl constants between rounds.
PHILOX_M = (0xD2511F53, 0xCD9E8D57)
PHILOX_W = (0x9E3779B9, 0xBB67AE85)
_M32 = 0xFFFFFFFF


def philox4x32_10(ctr: Sequence[int], key: Sequence[int]) -> tuple[int, int, int, int]:
    """One Philox4x32-10 block on Python ints (the scalar reference; Random123's known answers
    are tested)."""
    c0, c1, c2, c3 = (int(c) & _M32 for c in ctr)
    k0, k1 = (int(k) & _M32 for k in key)
    for r in range(10):
        if r:
            k0, k1 = (k0 + PHILOX_W[0]) & _M32, (k1 + PHILOX_W[1]) & _M32
        p0, p1 = PHILOX_M[0] * c0, PHILOX_M[1] * c2
        c0, c1, c2, c3 = (p1 >> 32) ^ c1 ^ k0, p1 & _M32, (p0 >> 32) ^ c3 ^ k1, p0 & _M32
    return c0, c1, c2, c3


def uniform_word(k0: int, k1: int, t: int, site: int, e: int) -> int:
    """The binary32 bits of element e of `uniform`: (x0 >> 8) * 2^-24 with x0 the first word of
    Philox4x32-10 on counter (e, site, t, 0) and key (k0, k1). Exact: a 24-bit integer times a
    power of two."""
    x0 = philox4x32_10((e, site, t, 0), (k0, k1))[0]
    return F.bits(f32(x0 >> 8) * f32(2.0**-24))


def _mulhilo(m: int, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(hi, lo) 32-bit halves of m * x for a 32-bit constant m and int64 x in [0, 2^32), with no
    intermediate above 2^49 (int64 never overflows, so every device computes the same words)."""
    hi_part = x * (m >> 16)
    mid = x * (m & 0xFFFF) + ((hi_part & 0xFFFF) << 16)
    return (hi_part >> 16) + (mid >> 32), mid & _M32


def t_uniform(step: torch.Tensor, n: Node) -> torch.Tensor:
    k0, k1, t = (int(w) & _M32 for w in step.reshape(-1)[:3].tolist())
    c0 = torch.arange(prod(n.shape), dtype=torch.int64, device=step.device)
    c1 = torch.full_like(c0, n.attrs[0] & _M32)
    c2 = torch.full_like(c0, t)
    c3 = torch.zeros_like(c0)
    for r in range(10):
        if r:
            k0, k1 = (k0 + PHILOX_W[0]) & _M32, (k1 + PHILOX_W[1]) & _M32
        hi0, lo0 = _mulhilo(PHILOX_M[0], c0)
        hi1, lo1 = _mulhilo(PHILOX_M[1], c2)
        c0, c1, c2, c3 = hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0
    # a 24-bit integer converts to binary32 exactly; the power of two scales it exactly
    return ((c0 >> 8).to(torch.float32) * (2.0**-24)).reshape(n.shape)


def s_uniform(node: Node, e: int, k0, k1, t) -> np.float32:
    w = uniform_word(*(int(np.int64(v)) & _M32 for v in (k0, k1, t)), node.attrs[0], e)
    return F.f32(w)


def _uniform_shape(n: Node, s: list[Shape]) -> None:
    if tuple(s[0]) != (3,) or len(n.attrs) != 1 or not 0 <= n.attrs[0] <= _M32:
        raise GraphError(f"uniform reads a (3,) step input with one attr (site), got {s[0]}, "
                         f"{n.attrs}")  # fmt: skip
    if n.dtype != "f32":
        raise GraphError("uniform is f32")


_register(
    Op(
        125,
        "uniform",
        1,
        "step = (k0, k1, t) i32 words, attrs (site): x0 = the first word of Philox4x32-10 on "
        "counter (e, site, t, 0) under key (k0, k1); out = (x0 >> 8) * 2^-24 (exact, in [0, 1))",
        _uniform_shape,
        lambda a, n: t_uniform(a[0], n),
        lambda n, s, e: [(0, [0, 1, 2])],
        None,
        s_uniform,
        positional=True,
    )
)


# -- the version-1 MLP step's operators (2-D, PROTOCOL §2; the one-step prover's codes 1..22) --
#
# A version-1/2 step graph (agents/training/graph.py) is 2-D: its nodes use these operators and
# relu / exp / log above (their `v1_code` is what a version-1 node descriptor carries). The
# hyper-parameter an update reads is its node's attribute: momentum's mu, sgd's lr (binary32
# bits, the `param` of its descriptor on chain). `reference` is the whole-tensor scalar reference
# of agents/training/reference.py, which the Solidity one-step prover mirrors.


def _row_deps(n: Node, s: list[Shape], e: int) -> list[tuple[int, list[int]]]:
    """(1, M) out of an (M, N) input: element e reads row e."""
    k = s[0][1]
    return [(0, list(range(e * k, (e + 1) * k)))]


def _v1(code: int, name: str, arity: int, order: str, torch_kernel: Kernel, deps: Deps,
        reference: Callable[[list[np.ndarray], Node], np.ndarray], native: Kernel | None = None,
        chain: Chain | None = None) -> None:  # fmt: skip
    _register(Op(code, name, arity, order, _free, torch_kernel, deps, native, chain=chain,
                 v1_code=code, reference=reference))  # fmt: skip


def _hyper(n: Node, like: torch.Tensor) -> torch.Tensor:
    return ops.const(n.attrs[0], like)


def _row_sum(x: torch.Tensor, kernel=t_sum_last) -> torch.Tensor:
    return kernel(x).reshape(1, -1)


def _flat(t: torch.Tensor) -> torch.Tensor:
    return t.reshape(-1)


def _row_chunk(b: torch.Tensor) -> int:
    """The portable matmul_nt's output rows per slice: an accumulator of at most 64 Ki floats
    (256 KiB) stays in cache; whole when it fits. Speed only: each element's sum is the same."""
    return max(1, (1 << 16) // max(1, b.shape[0]))


def _cols(n: Node, s: list[Shape], e: int, row: bool) -> list[tuple[int, list[int]]]:
    """An (M, N) input's element e and the (1, M) / (1, N) vector's entry of its row / col."""
    r, c = divmod(e, n.shape[1])
    return [(0, [e]), (1, [r if row else c])]


_SUM_CHAIN = Chain(init=0x00000000, combine="add", product=False)
_ref = reference
# fmt: off
_v1(1, "matmul_nt", 2, "C[i,j]: acc = +0; acc = fl(acc + fl(A[i,k] * B[j,k])), k ascending",
    lambda a, n: ops.matmul_nt(a[0], a[1], _row_chunk(a[1])),
    lambda n, s, e: [(k, list(range(i * s[0][1], (i + 1) * s[0][1])))
                     for k, i in enumerate(divmod(e, n.shape[1]))],
    lambda a, n: _ref.matmul_nt(*a), lambda a, n, threads=1: fastops.matmul_nt(a[0], a[1], threads),
    Chain(init=0x00000000, combine="add", product=True))
_v1(2, "transpose", 1, "out[j,i] = A[i,j] (a bit copy)", lambda a, n: a[0].t(),
    lambda n, s, e: [(0, [(e % n.shape[1]) * n.shape[0] + e // n.shape[1]])],
    lambda a, n: _ref.transpose(a[0]))
_v1(7, "add_row", 2, "fl(A[i,j] + b[0,j])", lambda a, n: ops.add_row(*a),
    lambda n, s, e: _cols(n, s, e, False), lambda a, n: _ref.add_row(*a))
_v1(8, "sub_col", 2, "fl(A[i,j] - c[0,i])", lambda a, n: ops.sub_col(*a),
    lambda n, s, e: _cols(n, s, e, True), lambda a, n: _ref.sub_col(*a))
_v1(9, "div_col", 2, "fl(A[i,j] / c[0,i])", lambda a, n: ops.div_col(*a),
    lambda n, s, e: _cols(n, s, e, True), lambda a, n: _ref.div_col(*a))
_v1(11, "relu_bwd", 2, "x > 0 ? g : relu(x)", lambda a, n: ops.relu_bwd(*a), _elementwise_deps,
    lambda a, n: _ref.relu_bwd(*a), lambda a, n: fastops.relu_bwd(*a))
# the row reductions are sum_last / max_last (the same kernels) with the result as a (1, M) row
_v1(12, "row_sum", 1, "(M,N) -> (1,M): acc = +0; acc = fl(acc + A[i,j]), j ascending",
    lambda a, n: _row_sum(a[0]), _row_deps, lambda a, n: _ref.row_sum(a[0]),
    lambda a, n: _row_sum(a[0], n_sum_last), _SUM_CHAIN)
_v1(13, "row_max", 1, "(M,N) -> (1,M): NaN if the row has one, else the first maximum",
    lambda a, n: t_max_last(a[0]).reshape(1, -1), _row_deps, lambda a, n: _ref.row_max(a[0]),
    lambda a, n: n_max_last(a[0]).reshape(1, -1),
    Chain(init=0xFF800000, combine="max", product=False))
# the data-dependent reads (the gathered row, the label's logit) are resolved from the step's
# values by the dispute trace; these rules name the batch index / label they go through
_v1(16, "gather_rows", 2, "out[b,:] = D[idx[b],:]", lambda a, n: ops.gather_rows(a[0], _flat(a[1])),
    lambda n, s, e: [(1, [e // n.shape[1]])],
    lambda a, n: _ref.gather_rows(a[0], a[1].reshape(-1)))
_v1(17, "gather_labels", 2, "out[0,b] = Y[0, idx[b]]",
    lambda a, n: a[0].reshape(-1).index_select(0, _flat(a[1])).reshape(1, -1),
    lambda n, s, e: [(1, [e])], lambda a, n: a[0].reshape(-1)[a[1].reshape(-1)].reshape(1, -1))
_v1(18, "xent_grad", 2, "fl(fl(P[b,c] - onehot(y)[b,c]) / B)",
    lambda a, n: ops.xent_grad(a[0], _flat(a[1])), lambda n, s, e: _cols(n, s, e, True),
    lambda a, n: _ref.xent_grad(a[0], a[1].reshape(-1)))
_v1(19, "nll", 3, "fl(L[0,b] - S[b, y[b]])", lambda a, n: ops.nll(a[0], a[1], _flat(a[2])),
    lambda n, s, e: [(0, [e]), (2, [e])], lambda a, n: _ref.nll(a[0], a[1], a[2].reshape(-1)))
_v1(20, "mean", 1, "fl(row_sum(A) / N) over a (1,N) row", lambda a, n: ops.mean(a[0], _row_sum),
    lambda n, s, e: [(0, list(range(s[0][1])))], lambda a, n: _ref.mean(a[0]),
    lambda a, n: ops.mean(a[0], lambda x: _row_sum(x, n_sum_last)),
    Chain(init=0x00000000, combine="add", product=False, mean=True))
_v1(21, "momentum", 2, "fl(fl(mu * v) + g), mu = attrs[0] (binary32 bits)",
    lambda a, n: ops.momentum(a[0], a[1], _hyper(n, a[0])), _elementwise_deps,
    lambda a, n: _ref.momentum(a[0], a[1], F.f32(n.attrs[0])))
_v1(22, "sgd", 2, "fl(w - fl(lr * v)), lr = attrs[0] (binary32 bits)",
    lambda a, n: ops.sgd(a[0], a[1], _hyper(n, a[0])), _elementwise_deps,
    lambda a, n: _ref.sgd(a[0], a[1], F.f32(n.attrs[0])))
# fmt: on


def v1_codes() -> dict[str, int]:
    """The operators of version-1/2 graphs and the codes their node descriptors carry."""
    return {name: op.v1_code for name, op in OPS.items() if op.v1_code is not None}


# -- running one node ------------------------------------------------------------------------


MAX_ELEMENTS = 1 << 28  # the largest tensor a node may declare (a graph is anyone's data)


def check_node(n: Node, in_shapes: list[Shape], in_dtypes: list[str]) -> None:
    """Raise GraphError unless the node obeys its operator's arity and shape rules."""
    op = OPS.get(n.op)
    if op is None:
        raise GraphError(f"unknown operator {n.op!r}")
    if op.code < V3_FIRST_CODE:  # the GraphProver does not evaluate them
        raise GraphError(f"{n.op} is an operator of version-1 MLP graphs only")
    if any(d < 0 for d in n.shape) or prod(n.shape) > MAX_ELEMENTS:
        raise GraphError(f"{n.op}: shape {n.shape} is negative or over {MAX_ELEMENTS} elements")
    if n.dtype not in ("f32", "i32"):
        raise GraphError(f"{n.op}: dtype must be f32 or i32, got {n.dtype!r}")
    if (op.arity >= 0 and len(in_shapes) != op.arity) or (op.arity < 0 and not in_shapes):
        raise GraphError(f"{n.op} takes {op.arity} inputs, got {len(in_shapes)}")
    want = op.shape(n, in_shapes)
    if want is not None and tuple(want) != tuple(n.shape):
        raise GraphError(f"{n.op} of {in_shapes} gives {tuple(want)}, node says {n.shape}")


def run_node(
    n: Node,
    args: list[torch.Tensor],
    use_native: bool,
    device,
    threads: int = 1,
    use_gpu: bool = False,
) -> torch.Tensor:
    op = OPS[n.op]
    if n.op == "const":
        return t_const(n, device)
    if use_gpu:
        kernel = gpu_kernels().get(n.op)
        if kernel is not None:
            return kernel(args, n)
    if use_native and op.native is not None and native.available():
        threaded = n.op in ("matmul", "matmul_nt")
        return op.native(args, n, threads) if threaded else op.native(args, n)
    return op.torch(args, n)


class TritonUnavailable(RuntimeError):
    """The Triton kernels cannot run here (no triton, or no GPU and no TRITON_INTERPRET=1)."""


def triton_problem(device: str) -> str | None:
    """Why the Triton kernels cannot run on `device`, or None when they can."""
    import os

    try:
        import triton  # noqa: F401
    except ImportError:
        return "the triton package is not installed"
    interpreted = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")
    if str(device).startswith("cuda") or interpreted:
        return None
    return "Triton kernels need a CUDA device (or TRITON_INTERPRET=1 to interpret on the CPU)"


@functools.cache
def gpu_kernels() -> dict[str, Kernel]:
    """The Triton kernel of each operator that has one (agents/training/triton_ops.py): the
    device path, with the registry's evaluation orders. Operators without one run portable."""
    from agents.training import triton_ops as T

    def f32_only(kernel, fallback):
        return lambda a, n: kernel(a) if a[0].dtype == torch.float32 else fallback(a, n)

    table: dict[str, Kernel] = {
        name: (lambda fn: lambda a, n: T.unary(fn, a[0]))(name)
        for name in ("exp", "log", "tanh", "erf", "relu")
    }
    table["sum_last"] = f32_only(lambda a: T.reduce_last(a[0], "sum"), OPS["sum_last"].torch)
    table["max_last"] = f32_only(lambda a: T.reduce_last(a[0], "max"), OPS["max_last"].torch)
    table["matmul"] = lambda a, n: T.matmul(a[0], a[1])
    table["index_add_rows"] = lambda a, n: T.index_add_rows(a[0], a[1], a[2])
    # the version-1 step's reductions: the same kernels on 2-D operands
    table["matmul_nt"] = lambda a, n: T.matmul(a[0], a[1].t())
    table["row_sum"] = lambda a, n: T.reduce_last(a[0], "sum").reshape(1, -1)
    table["row_max"] = lambda a, n: T.reduce_last(a[0], "max").reshape(1, -1)
    table["mean"] = lambda a, n: ops.mean(
        a[0], lambda x: T.reduce_last(x, "sum").reshape(1, -1)
    )  # fmt: skip
    return table
