"""The reductions, exp/log and relu of ops.py on the C kernels (CPU only) — same bits, faster.

Only the operators whose portable form loops in Python (or is slow in torch: relu selects) live
here; arithmetic elementwise ops are already one IEEE operation per torch kernel and are shared
with ops.py. Inputs may be strided views
(e.g. `x.t()`), so the transposes of the backward pass cost nothing on this path.
"""

from __future__ import annotations

import torch

from agents.training import native


def _check(t: torch.Tensor) -> None:
    if t.dtype != torch.float32 or t.device.type != "cpu":
        raise TypeError("native kernels take CPU float32 tensors")


def matmul_nt(a: torch.Tensor, b: torch.Tensor, threads: int = 1) -> torch.Tensor:
    _check(a)
    _check(b)
    M, K = a.shape
    N, K2 = b.shape
    if K != K2:
        raise ValueError(f"matmul_nt: inner sizes differ ({K} vs {K2})")
    c = torch.empty((M, N), dtype=torch.float32)
    sa, sb = a.stride(), b.stride()
    native.lib().vtp_matmul_nt(
        a.data_ptr(), sa[0], sa[1], b.data_ptr(), sb[0], sb[1], c.data_ptr(), M, N, K, threads
    )
    return c


def matmul_batch(a: torch.Tensor, b: torch.Tensor, threads: int = 1) -> torch.Tensor:
    """(batch, M, K) @ (batch, K, N): each product as matmul_nt, B read through its strides."""
    _check(a)
    _check(b)
    batch, M, K = a.shape
    batch2, K2, N = b.shape
    if K != K2 or batch != batch2:
        raise ValueError(f"matmul_batch: shapes {tuple(a.shape)} @ {tuple(b.shape)}")
    c = torch.empty((batch, M, N), dtype=torch.float32)
    sa, sb = a.stride(), b.stride()
    native.lib().vtp_matmul_nt_batch(
        a.data_ptr(), batch, sa[0], sa[1], sa[2], b.data_ptr(), sb[0], sb[2], sb[1],
        c.data_ptr(), M, N, K, threads,
    )  # fmt: skip
    return c


def matmul_strided(a: torch.Tensor, b: torch.Tensor, threads: int = 1) -> torch.Tensor:
    """(..., M, K) @ (..., K, N) with up to two leading axes, every operand read through its own
    strides (transposed and permuted views cost no copy); each product as matmul_nt."""
    _check(a)
    _check(b)
    lead = tuple(a.shape[:-2])
    if a.dim() > 4:
        a = a.reshape(-1, *a.shape[-3:])
        b = b.reshape(-1, *b.shape[-3:])
    a4 = a.reshape(1, 1, *a.shape[-2:]) if a.dim() == 2 else a
    b4 = b.reshape(1, 1, *b.shape[-2:]) if b.dim() == 2 else b
    if a4.dim() == 3:
        a4, b4 = a4.unsqueeze(0), b4.unsqueeze(0)
    nb0, nb1, M, K = a4.shape
    N = b4.shape[-1]
    if tuple(b4.shape) != (nb0, nb1, K, N):
        raise ValueError(f"matmul: shapes {tuple(a.shape)} @ {tuple(b.shape)}")
    c = torch.empty((*lead, M, N), dtype=torch.float32)
    sa, sb = a4.stride(), b4.stride()
    native.lib().vtp_matmul_nt_batch2(
        a4.data_ptr(), nb0, nb1, sa[0], sa[1], sa[2], sa[3],
        b4.data_ptr(), sb[0], sb[1], sb[3], sb[2], c.data_ptr(), M, N, K, threads,
    )  # fmt: skip
    return c


def index_add_rows(dest: torch.Tensor, idx: torch.Tensor, src: torch.Tensor) -> torch.Tensor:
    """dest with src's rows added to rows idx, in source order (one sequential pass)."""
    _check(dest)
    _check(src)
    rows = dest.shape[0]
    i = idx.reshape(-1).to(torch.int32).contiguous()
    if i.numel() and (int(i.min()) < 0 or int(i.max()) >= rows):
        raise IndexError(f"index_add_rows: an index is outside [0, {rows})")
    out = dest.contiguous().clone()
    s = src.contiguous()
    D = out.numel() // max(1, rows)
    native.lib().vtp_index_add_rows(out.data_ptr(), i.data_ptr(), s.data_ptr(), i.numel(), D)
    return out


def reduce_last(x: torch.Tensor, kind: str) -> torch.Tensor:
    """sum_last / max_last (f32 or i32) over the last axis of an N-d tensor, read through its
    strides where its leading axes flatten without a copy."""
    if x.device.type != "cpu" or x.dtype not in (torch.float32, torch.int32):
        raise TypeError("native kernels take CPU float32 or int32 tensors")
    flat = x.reshape(-1, x.shape[-1])  # a view where the leading axes collapse, else a copy
    M, N = flat.shape
    out = torch.empty(M, dtype=x.dtype)
    suffix = "" if x.dtype == torch.float32 else "_i32"
    fn = getattr(native.lib(), f"vtp_row_{kind}{suffix}")
    s = flat.stride()
    fn(flat.data_ptr(), s[0], s[1], out.data_ptr(), M, N)
    return out.reshape(x.shape[:-1])


def _elementwise(kernel: str, x: torch.Tensor) -> torch.Tensor:
    """y[i] = kernel(x[i]) over a contiguous copy of x (one C loop, no arithmetic here)."""
    _check(x)
    x = x.contiguous()
    y = torch.empty_like(x)
    getattr(native.lib(), kernel)(x.data_ptr(), y.data_ptr(), x.numel())
    return y


def exp(x: torch.Tensor) -> torch.Tensor:
    return _elementwise("vtp_exp32", x)


def log(x: torch.Tensor) -> torch.Tensor:
    return _elementwise("vtp_log32", x)


def tanh(x: torch.Tensor) -> torch.Tensor:
    return _elementwise("vtp_tanh32", x)


def erf(x: torch.Tensor) -> torch.Tensor:
    return _elementwise("vtp_erf32", x)


def relu(x: torch.Tensor) -> torch.Tensor:
    _check(x)
    x = x.contiguous()
    y = torch.empty_like(x)
    native.lib().vtp_relu(x.data_ptr(), y.data_ptr(), x.numel())
    return y


def relu_bwd(g: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    _check(g)
    _check(x)
    g, x = g.contiguous(), x.contiguous()
    y = torch.empty_like(x)
    native.lib().vtp_relu_bwd(g.data_ptr(), x.data_ptr(), y.data_ptr(), x.numel())
    return y


# -- fused elementwise programs (kernels.c vtp_ew_run) ------------------------------------------
# Instruction codes, as kernels.c's enum: an operator's registry entry names its code(s)
# (`Op.fused`: for f32 operands, for i32 operands).
EW_LOAD, EW_STORE = 0, 1
EW_ADD, EW_SUB, EW_MUL, EW_DIV, EW_MAX, EW_MIN = 2, 3, 4, 5, 6, 7
EW_GT, EW_GE, EW_LT, EW_LE, EW_EQ, EW_NE = 8, 9, 10, 11, 12, 13
EW_IADD, EW_ISUB, EW_IMUL, EW_IMAX, EW_IMIN = 14, 15, 16, 17, 18
EW_IGT, EW_IGE, EW_ILT, EW_ILE, EW_IEQ, EW_INE = 19, 20, 21, 22, 23, 24
EW_WHERE, EW_NEG, EW_INEG, EW_EXP, EW_LOG, EW_SQRT, EW_RELU, EW_TANH, EW_ERF = range(25, 34)
EW_CAST_I32, EW_CAST_F32, EW_NOT = 34, 35, 36


def ew_run(header: int, ptrs, threads: int = 1) -> None:
    """Run one fused elementwise program: `header` the address of its int64 header (kernels.c
    describes it; the caller keeps the array alive), `ptrs` a ctypes array of its input and
    output addresses."""
    native.lib().vtp_ew_run(header, ptrs, threads)


def scalar_kernel(name: str, x: torch.Tensor) -> torch.Tensor:
    """exp32/log32/tanh32/erf32 through the scalar C transcription (tests compare the SIMD
    kernels against it)."""
    return _elementwise(f"vtp_{name}32_scalar", x)
