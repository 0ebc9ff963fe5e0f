"""The built-in classification datasets and the `Dataset` every classification split is
(PROTOCOL §4); the batch schedule is agents/training/schedule.py's.

Built-in datasets are named, deterministic functions of their name: `sklearn-digits/train` and
`sklearn-digits/test` (scikit-learn's bundled digits, 1797 x 64, pixels 0..16 divided by 16 —
exact in binary32 — split by example index: i % 5 == 4 is test), and
`synthetic/n=N,f=F,c=C,seed=S` (integer-only generation, identical on every machine). A job
spec names one and carries its root; the engine recomputes the root and refuses a mismatch.
`manifest:0x<address>` names a packed user dataset (PROTOCOL §4.4), fetched and checked by
agents/data/chunks.py; agents/data/datasets.py resolves every name (this module does no I/O).

A name is anyone's (a job spec's), so `shape` answers (N, F) without building anything, and a
synthetic set is bounded in total, not only per dimension: N·F + F·C + N·C words at most
MAX_SYNTHETIC_WORDS and N·F·C at most MAX_SYNTHETIC_WORK (the teacher's products).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

import numpy as np
import torch

from agents.training import merkle
from agents.training.schedule import stream_words, unit_floats

DIGITS_TRAIN = "sklearn-digits/train"
DIGITS_TEST = "sklearn-digits/test"
_SYN = re.compile(r"^synthetic/n=(\d+),f=(\d+),c=(\d+),seed=(\d+)$")
MAX_SYNTHETIC_WORDS = 1 << 26  # features, teacher and scores: at most 2^26 words (~1 GiB)
MAX_SYNTHETIC_WORK = 1 << 32  # integer multiply-adds of the teacher's scores (seconds)


class DatasetError(ValueError):
    pass


@dataclass(frozen=True)
class Dataset:
    name: str
    x: torch.Tensor  # (N, F) float32
    y: torch.Tensor  # (1, N) int64 holding uint32 labels

    @property
    def n(self) -> int:
        return self.x.shape[0]

    @property
    def features(self) -> int:
        return self.x.shape[1]

    @property
    def classes(self) -> int:
        return int(self.y.max()) + 1

    def root(self) -> bytes:
        return merkle.dataset_root(self.x, self.y)


@cache
def _digits() -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import load_digits

    d = load_digits()
    x = (d.data.astype(np.float32) / np.float32(16.0)).astype(np.float32)  # k/16: exact
    return x, d.target.astype(np.int64)


def _digits_split(test: bool) -> Dataset:
    x, y = _digits()
    sel = (np.arange(x.shape[0]) % 5 == 4) == test
    name = DIGITS_TEST if test else DIGITS_TRAIN
    return Dataset(name, torch.from_numpy(x[sel].copy()), torch.from_numpy(y[sel].reshape(1, -1)))


def check_synthetic(n: int, f: int, c: int) -> None:
    """Refuse sizes whose generation would not fit one machine, before generating anything."""
    if not (1 <= n <= 1 << 24 and 1 <= f <= 1 << 16 and 2 <= c <= 1 << 16):
        raise DatasetError(f"synthetic dataset sizes out of range: n={n} f={f} c={c}")
    if n * f + f * c + n * c > MAX_SYNTHETIC_WORDS or n * f * c > MAX_SYNTHETIC_WORK:
        raise DatasetError(
            f"synthetic dataset too large: n={n} f={f} c={c} needs {n * f + f * c + n * c} words "
            f"(at most {MAX_SYNTHETIC_WORDS}) and {n * f * c} products (at most "
            f"{MAX_SYNTHETIC_WORK})"
        )


def synthetic(n: int, f: int, c: int, seed: int) -> Dataset:
    """Features uniform in [-1, 1) on a 2^-23 grid; label = argmax of an integer teacher
    (exact int64 scores, first maximum), so the task is learnable and bit-reproducible."""
    check_synthetic(n, f, c)
    w = stream_words(b"vtp.synthetic.x.v1", seed, n * f)
    x = unit_floats(w).reshape(n, f)
    k = (w >> 8).astype(np.int64).reshape(n, f) - (1 << 23)
    teacher = (stream_words(b"vtp.synthetic.teacher.v1", seed, f * c) % 17).astype(np.int64) - 8
    scores = k @ teacher.reshape(f, c)  # |score| < 2^23 * 8 * 2^16: exact in int64
    y = np.argmax(scores, axis=1).astype(np.int64)
    name = f"synthetic/n={n},f={f},c={c},seed={seed}"
    return Dataset(name, torch.from_numpy(x), torch.from_numpy(y.reshape(1, -1)))


def shape(name: str) -> tuple[int, int]:
    """(examples N, features F) of a named dataset, without building it; DatasetError for a
    name that is unknown or too large to build."""
    if name in (DIGITS_TRAIN, DIGITS_TEST):
        n = _digits()[0].shape[0]
        test = len(range(4, n, 5))
        return (test if name == DIGITS_TEST else n - test), _digits()[0].shape[1]
    m = _SYN.match(name)
    if m:
        n, f, c, _ = (int(g) for g in m.groups())
        check_synthetic(n, f, c)
        return n, f
    raise _unknown(name)


def _unknown(name: str) -> DatasetError:
    return DatasetError(
        f"unknown dataset {name[:200]!r} (known: {DIGITS_TRAIN}, {DIGITS_TEST}, "
        "synthetic/n=N,f=F,c=C,seed=S, manifest:0x<address> of a packed dataset)"
    )


def load_dataset(name: str) -> Dataset:
    """A built-in dataset by name (agents/data/datasets.py resolves every other name)."""
    if name == DIGITS_TRAIN:
        return _digits_split(test=False)
    if name == DIGITS_TEST:
        return _digits_split(test=True)
    m = _SYN.match(name)
    if m:
        return synthetic(*(int(g) for g in m.groups()))
    raise _unknown(name)


def item_shape(name: str) -> tuple[int, ...]:
    """One example as a model reads it: digits are 1 x 8 x 8 images (channels first), a
    synthetic set's examples are vectors of its F features."""
    if name in (DIGITS_TRAIN, DIGITS_TEST):
        return (1, 8, 8)
    return (shape(name)[1],)


def test_split_for(name: str) -> Dataset | None:
    """The held-out split that goes with a training set, if it has one."""
    return _digits_split(test=True) if name == DIGITS_TRAIN else None
