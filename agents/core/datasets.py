"""Datasets by name, wherever they live: the built-in ones (agents/training/data.py, pure
functions of their name) and packed user datasets (`manifest:0x<address>`, PROTOCOL §4.4),
whose manifest and chunks agents/core/chunks.py fetches from the configured stores and checks
chunk by chunk. The one place a dataset name is resolved, so that the training engine does no
I/O (the layering `make lint` checks)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from agents.core import chunks
from agents.core.blobs import BlobStore
from agents.training import data
from agents.training.data import Dataset, DatasetError

__all__ = [
    "Dataset",
    "DatasetError",
    "is_packed",
    "item_shape",
    "load_dataset",
    "open_dataset",
    "shape",
]


def is_packed(name: str) -> bool:
    return chunks.is_packed_ref(name)


def load_dataset(name: str):
    """A named dataset: a built-in one, or a packed one's training split (a token stream's
    comes back as a tokens.TokenDataset), fetched and checked chunk by chunk."""
    return chunks.load_named(name) if is_packed(name) else data.load_dataset(name)


def open_dataset(name: str, extra_stores: Sequence[BlobStore] = ()):
    """A named dataset as a role's runtime reads it: a built-in one built whole, a packed one's
    training split opened without fetching anything (chunks.ChunkFetcher.open_split: each
    step's batch fetches the chunks it reads, checked, from the configured stores and then
    `extra_stores`)."""
    return chunks.open_named(name, extra_stores=extra_stores) if is_packed(name) else (
        data.load_dataset(name))  # fmt: skip


def shape(name: str) -> tuple[int, int]:
    """(examples N, features F) of a named dataset, without building it (a packed one: from
    its manifest alone)."""
    if not is_packed(name):
        return data.shape(name)
    m = chunks.open_packed(name).manifest
    return m.splits[0].n, int(np.prod(m.item_shape, dtype=np.int64)) if m.item_shape else 1


def item_shape(name: str) -> tuple[int, ...]:
    """One example as a model reads it."""
    return (
        chunks.open_packed(name).manifest.item_shape if is_packed(name) else data.item_shape(name)
    )


def test_split_for(name: str) -> Dataset | None:
    """The held-out split that goes with a training set, if it has one."""
    if not is_packed(name):
        return data.test_split_for(name)
    fetcher = chunks.open_packed(name)
    return fetcher.load("validation") if fetcher.manifest.split("validation") else None
