"""Shared helpers of the model tests: random float32 tensors with the special values, bits."""

from __future__ import annotations

from math import prod

import numpy as np
import torch

SPECIALS = np.array(
    [0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1e-38, 3.4e38, -3.4e38,
     88.7, -103.9, 0.5, 2.0, 1e-7, 9.0, 9.5, 3.99, 4.0],
    dtype=np.float32,
)  # fmt: skip


def _f32(shape, seed, specials=True) -> torch.Tensor:
    rng = np.random.default_rng(seed)
    a = (rng.standard_normal(prod(shape)) * rng.choice([0.01, 1, 5, 50], prod(shape))).astype(
        np.float32
    )
    if specials and a.size >= SPECIALS.size:
        pos = rng.choice(a.size, SPECIALS.size, replace=False)
        a[pos] = SPECIALS
    return torch.from_numpy(a.reshape(shape))


def _i32(shape, seed, hi=2) -> torch.Tensor:
    rng = np.random.default_rng(seed)
    return torch.from_numpy(rng.integers(0, hi, prod(shape)).astype(np.int32).reshape(shape))


def _bits(t: torch.Tensor) -> np.ndarray:
    a = t.contiguous().numpy()
    return a.view(np.uint32) if a.dtype == np.float32 else a.astype(np.int64)
