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


def row_sum(a: torch.Tensor) -> torch.Tensor:
    _check(a)
    out = torch.empty((1, a.shape[0]), dtype=torch.float32)
    s = a.stride()
    native.lib().vtp_row_sum(a.data_ptr(), s[0], s[1], out.data_ptr(), a.shape[0], a.shape[1])
    return out


def row_max(a: torch.Tensor) -> torch.Tensor:
    _check(a)
    out = torch.empty((1, a.shape[0]), dtype=torch.float32)
    s = a.stride()
    native.lib().vtp_row_max(a.data_ptr(), s[0], s[1], out.data_ptr(), a.shape[0], a.shape[1])
    return out


def exp(x: torch.Tensor) -> torch.Tensor:
    _check(x)
    x = x.contiguous()
    y = torch.empty_like(x)
    native.lib().vtp_exp32(x.data_ptr(), y.data_ptr(), x.numel())
    return y


def log(x: torch.Tensor) -> torch.Tensor:
    _check(x)
    x = x.contiguous()
    y = torch.empty_like(x)
    native.lib().vtp_log32(x.data_ptr(), y.data_ptr(), x.numel())
    return y


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
