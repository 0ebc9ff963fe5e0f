"""Datasets by name, wherever they live: the built-in classification sets (builtin.py), the
token corpora (tokens.py), both pure functions of their name, and packed user datasets
(`manifest:0x<address>` or a manifest file, PROTOCOL §4.4), whose manifest and chunks
chunks.py fetches, as the caller's `FetchConfig` says, and checks chunk by chunk. The one place
a dataset name is resolved: the training engine is handed a dataset and does no I/O."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from agents.core.blobs import BlobStore
from agents.data import builtin, chunks, tokens
from agents.data.builtin import Dataset
from agents.data.chunks import FetchConfig


def is_packed(name: str) -> bool:
    return chunks.is_packed_ref(name)


def load_dataset(name: str, fetch: FetchConfig = FetchConfig()):
    """A named dataset, whole: a built-in classification set, a token corpus
    (tokens.TokenDataset), or a packed one's training split, fetched and checked chunk by
    chunk."""
    if is_packed(name):
        return chunks.open_packed(name, fetch).load()
    if tokens.is_token_dataset(name):
        return tokens.load_tokens(name)
    return builtin.load_dataset(name)


def open_dataset(name: str, fetch: FetchConfig, extra_stores: Sequence[BlobStore] = ()):
    """A named dataset as a role's runtime reads it: a built-in one whole, a packed one's
    training split opened without fetching anything (chunks.ChunkFetcher.open_split: each
    step's batch fetches the chunks it reads, checked, from `fetch`'s stores and then
    `extra_stores`)."""
    if is_packed(name):
        return chunks.open_packed(name, fetch, extra_stores).open_split()
    return load_dataset(name)


def shape(name: str, fetch: FetchConfig = FetchConfig()) -> tuple[int, int]:
    """(examples N, features F) of a named classification dataset, without building it (a
    packed one: from its manifest alone)."""
    if not is_packed(name):
        return builtin.shape(name)
    m = chunks.open_packed(name, fetch).manifest
    return m.splits[0].n, int(np.prod(m.item_shape, dtype=np.int64)) if m.item_shape else 1


def item_shape(name: str, fetch: FetchConfig = FetchConfig()) -> tuple[int, ...]:
    """One example as a model reads it."""
    if is_packed(name):
        return chunks.open_packed(name, fetch).manifest.item_shape
    return builtin.item_shape(name)


def held_out(ds) -> Dataset | tokens.TokenDataset | None:
    """The held-out split that goes with the training set `ds`, if it has one: a packed one's
    validation split from the stores `ds` came from, a token corpus's validation part, a
    built-in set's test split."""
    source = getattr(ds, "source", None)
    if source is not None:
        return source.held_out()
    if ds.name == tokens.TRAIN:
        return tokens.load_tokens(tokens.VAL)
    return builtin.test_split_for(ds.name)
