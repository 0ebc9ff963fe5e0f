"""Data requests (PROTOCOL §6.11): the arguments that post one checkpoint's whole state on chain,
and the state rebuilt from the posted chunks.

A data request demands the state at checkpoint `checkpoint` of a unit: whoever holds it calls
`JobManager.openDataState(unitId, tensorCount, stateTree, checkpointProof)` once, then
`JobManager.postData(unitId, (nameHash, dtype, rows, cols, dataRoot), entryProof, firstChunk,
chunks, rangeProof)` for each run of at most MAX_DATA_CHUNKS 256-byte chunks of each tensor, in
state order. `encode_answer` builds those arguments from the state (named tensors in state-root
order, as agents.training.state keeps them); `decode_answer` rebuilds the state from the
`DataPosted` events' arguments and checks it against the state root. Pure: no chain access; the
Merkle code is agents.training.merkle's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from agents.training import merkle
from agents.training.keccak import keccak256

#: At most this many 256-byte chunks per postData call (IJobManager.sol's MAX_DATA_CHUNKS).
MAX_DATA_CHUNKS = 64

NamedState = Mapping[str, torch.Tensor] | Sequence[tuple[str, torch.Tensor]]


class DataMismatch(ValueError):
    """Posted data that does not rebuild the committed state."""


@dataclass(frozen=True)
class OpenDataStateArgs:
    """`openDataState`'s arguments after the unit id."""

    tensor_count: int
    state_tree: bytes
    checkpoint_proof: list[bytes]

    def args(self, unit_id: int) -> tuple[Any, ...]:
        return (unit_id, self.tensor_count, self.state_tree, self.checkpoint_proof)


@dataclass(frozen=True)
class PostDataArgs:
    """`postData`'s arguments after the unit id: chunks `first_chunk`, ... of tensor `tensor`."""

    tensor: int
    name_hash: bytes
    dtype: int
    rows: int
    cols: int
    data_root: bytes
    entry_proof: list[bytes]
    first_chunk: int
    chunks: bytes
    range_proof: list[bytes]

    def header(self) -> tuple[bytes, int, int, int, bytes]:
        """`IJobManager.TensorHeader`: the tensor as the state root's entry commits it."""
        return (self.name_hash, self.dtype, self.rows, self.cols, self.data_root)

    def args(self, unit_id: int) -> tuple[Any, ...]:
        return (
            unit_id,
            self.header(),
            self.entry_proof,
            self.first_chunk,
            self.chunks,
            self.range_proof,
        )


@dataclass(frozen=True)
class DataAnswer:
    """Everything that answers a data request: the state root, the opening, the posts in order."""

    state_root: bytes
    open_state: OpenDataStateArgs
    posts: list[PostDataArgs]


def _items(state: NamedState) -> list[tuple[str, torch.Tensor]]:
    return list(state.items()) if isinstance(state, Mapping) else list(state)


def encode_answer(
    state: NamedState,
    checkpoint_roots: Sequence[bytes],
    checkpoint: int,
    max_chunks: int = MAX_DATA_CHUNKS,
) -> DataAnswer:
    """The openDataState and postData arguments that post `state`, the state at `checkpoint` of
    a unit whose commitment's state roots are `checkpoint_roots` (steps 0, k, ..., T).

    Raises ValueError if the state's root is not `checkpoint_roots[checkpoint]`, or for a
    `max_chunks` outside 1..MAX_DATA_CHUNKS."""
    if not 1 <= max_chunks <= MAX_DATA_CHUNKS:
        raise ValueError(f"max_chunks must be in 1..{MAX_DATA_CHUNKS}, got {max_chunks}")
    if not 0 <= checkpoint < len(checkpoint_roots):
        raise ValueError(f"checkpoint {checkpoint} out of range for {len(checkpoint_roots)}")
    items = _items(state)
    if not items:
        raise ValueError("a state has at least one tensor")
    shapes = [merkle.words(t) for _, t in items]
    data_roots = [merkle.data_root(t) for _, t in items]
    entries = [
        merkle.state_entry(name, merkle.tensor_root_from(code, rows, cols, droot))
        for (name, _), (_, code, rows, cols), droot in zip(items, shapes, data_roots, strict=True)
    ]
    state_root = merkle.root_list(merkle.STATE_DOMAIN, entries)
    if state_root != bytes(checkpoint_roots[checkpoint]):
        raise ValueError(f"the state's root is not checkpoint {checkpoint}'s committed root")
    state_tree = merkle.root_of_leaves(merkle.list_leaves(merkle.STATE_DOMAIN, entries))
    roots = [bytes(r) for r in checkpoint_roots]
    cproof = merkle.list_proof(merkle.CHECKPOINT_DOMAIN, roots, checkpoint)
    opening = OpenDataStateArgs(len(items), state_tree, list(cproof.siblings))
    posts: list[PostDataArgs] = []
    for i, ((name, t), (w, code, rows, cols), droot) in enumerate(
        zip(items, shapes, data_roots, strict=True)
    ):
        entry_proof = list(merkle.list_proof(merkle.STATE_DOMAIN, entries, i).siblings)
        n_leaves = -(-w.size // merkle.LEAF_ELEMS)
        for first in range(0, n_leaves, max_chunks):
            rp = merkle.range_proof(t, first, min(max_chunks, n_leaves - first))
            posts.append(
                PostDataArgs(
                    tensor=i,
                    name_hash=keccak256(name.encode()),
                    dtype=code,
                    rows=rows,
                    cols=cols,
                    data_root=droot,
                    entry_proof=entry_proof,
                    first_chunk=first,
                    chunks=b"".join(rp.chunks),
                    range_proof=list(rp.siblings),
                )
            )
    return DataAnswer(state_root, opening, posts)


def _field(event: Mapping[str, Any], *names: str) -> Any:
    for n in names:
        if n in event:
            return event[n]
    raise DataMismatch(f"DataPosted args lack {names[0]!r}")


def _tensor(dtype: int, rows: int, cols: int, data: bytes) -> torch.Tensor:
    numel = rows * cols
    w = np.frombuffer(data[: 4 * numel], dtype=">u4").astype(np.uint32)
    if dtype == merkle.DTYPE_F32:
        return torch.from_numpy(w.view(np.float32).reshape(rows, cols).copy())
    if dtype == merkle.DTYPE_U32:
        return torch.from_numpy(w.astype(np.int64).reshape(rows, cols))
    raise DataMismatch(f"unknown dtype {dtype}")


def decode_answer(
    posted: Iterable[Mapping[str, Any]], names: Sequence[str], state_root: bytes
) -> dict[str, torch.Tensor]:
    """The state rebuilt from `DataPosted` event args (dicts, in log order; keys as in the ABI:
    tensor, nameHash, dtype, rows, cols, firstChunk, chunks; snake_case is accepted too), given
    the state's tensor names in order, checked against `state_root`.

    Raises DataMismatch on a gap, a repeat, a name, shape or length that does not fit, a missing
    tensor, or a rebuilt state whose root is not `state_root`. float32 tensors come back as
    float32, uint32 ones (labels) as int64, as agents.training.merkle.words reads them."""
    parts: list[list[bytes]] = [[] for _ in names]
    shapes: list[tuple[int, int, int] | None] = [None] * len(names)
    next_chunk = [0] * len(names)
    for ev in posted:
        i = int(_field(ev, "tensor"))
        if not 0 <= i < len(names):
            raise DataMismatch(f"tensor {i} out of range for {len(names)} names")
        name_hash = bytes(_field(ev, "nameHash", "name_hash"))
        if name_hash != keccak256(names[i].encode()):
            raise DataMismatch(f"tensor {i}: name hash does not match {names[i]!r}")
        shape = (int(_field(ev, "dtype")), int(_field(ev, "rows")), int(_field(ev, "cols")))
        if shapes[i] is not None and shapes[i] != shape:
            raise DataMismatch(f"tensor {i}: shape {shape} differs from {shapes[i]}")
        shapes[i] = shape
        first = int(_field(ev, "firstChunk", "first_chunk"))
        if first != next_chunk[i]:
            raise DataMismatch(f"tensor {i}: chunk {first} posted, {next_chunk[i]} expected")
        chunks = bytes(_field(ev, "chunks"))
        if not chunks or len(chunks) % merkle.LEAF_BYTES:
            raise DataMismatch(f"tensor {i}: {len(chunks)} bytes is not whole chunks")
        parts[i].append(chunks)
        next_chunk[i] += len(chunks) // merkle.LEAF_BYTES
    named: list[tuple[str, torch.Tensor]] = []
    for i, name in enumerate(names):
        shape = shapes[i]
        if shape is None:
            raise DataMismatch(f"tensor {i} ({name!r}) was not posted")
        dtype, rows, cols = shape
        leaves = -(-(rows * cols) // merkle.LEAF_ELEMS)
        if next_chunk[i] != leaves:
            raise DataMismatch(f"tensor {i}: {next_chunk[i]} chunks posted, {leaves} expected")
        named.append((name, _tensor(dtype, rows, cols, b"".join(parts[i]))))
    if merkle.state_root(named) != bytes(state_root):
        raise DataMismatch("the posted data does not rebuild the state root")
    return dict(named)
