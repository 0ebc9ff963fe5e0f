"""Data requests (PROTOCOL §6.11): the arguments of an answer — proof that one checkpoint's state
is held, at a cost bounded whatever the state's size — and the sample draw every party computes.

An answer opens the state (`openDataState`: its root against the checkpoint root), then its tensor
headers part by part (`openDataHeaders`: at most DATA_OPEN_PART a call, each part's subtree proved
under the state tree; the layout follows: each tensor's first global chunk and chunk count), then
proves DATA_SAMPLES chunks (`proveDataSamples`), drawn by the hash of the block after the request
uniformly over every 256-byte chunk of the state. The state itself travels off chain, from any
holder's blob store (`DataOffered`, `DataRequestAnswered`). Pure: no chain access; the Merkle code
is agents.training.merkle's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import torch

from agents.training import merkle
from agents.training.keccak import keccak256

#: IJobManager.sol's DATA_SAMPLES: the chunks an answer proves.
DATA_SAMPLES = 64
#: IJobManager.sol's DATA_OPEN_PART: the headers one openDataHeaders call opens at most.
DATA_OPEN_PART = 256
PART_DEPTH = 8  # log2(DATA_OPEN_PART)
LAYOUT_DOMAIN = keccak256(b"vtp.layout.v1")

NamedState = Mapping[str, torch.Tensor] | Sequence[tuple[str, torch.Tensor]]


@dataclass(frozen=True)
class Header:
    """`IJobManager.TensorHeader`: a tensor as the state root's entry commits it."""

    name_hash: bytes
    dtype: int
    rows: int
    cols: int
    data_root: bytes

    def args(self) -> tuple[bytes, int, int, int, bytes]:
        return (self.name_hash, self.dtype, self.rows, self.cols, self.data_root)


@dataclass(frozen=True)
class OpenState:
    """`openDataState`'s arguments after the unit id."""

    tensor_count: int
    state_tree: bytes
    checkpoint_proof: tuple[bytes, ...]


@dataclass(frozen=True)
class HeaderPart:
    """`openDataHeaders`' arguments after the unit id: tensors `first_tensor`, …"""

    first_tensor: int
    headers: tuple[Header, ...]
    part_proof: tuple[bytes, ...]

    def args(self) -> tuple[int, list[tuple], list[bytes]]:
        return (self.first_tensor, [h.args() for h in self.headers], list(self.part_proof))


@dataclass(frozen=True)
class Sample:
    """`IJobManager.DataSample`: one drawn chunk, its tensor's place in the layout and its proof."""

    tensor: int
    start: int
    leaves: int
    data_root: bytes
    layout_proof: tuple[bytes, ...]
    chunk: bytes
    chunk_proof: tuple[bytes, ...]

    def args(self) -> tuple[Any, ...]:
        return (self.tensor, self.start, self.leaves, self.data_root, list(self.layout_proof),
                self.chunk, list(self.chunk_proof))  # fmt: skip


def sample_index(seed: bytes, j: int, total_leaves: int) -> int:
    """Sample `j`'s global chunk: uint256(keccak256(abi.encode(seed, j))) mod total_leaves."""
    return int.from_bytes(keccak256(bytes(seed) + merkle.u256(j)), "big") % total_leaves


def layout_leaf(tensor: int, start: int, leaves: int, data_root: bytes) -> bytes:
    """keccak256(abi.encode(LAYOUT_DOMAIN, tensor, start, leaves, dataRoot))."""
    return keccak256(
        LAYOUT_DOMAIN + merkle.u256(tensor) + merkle.u256(start) + merkle.u256(leaves) + data_root
    )


def _siblings(levels: list[np.ndarray], index: int, depth: int) -> tuple[bytes, ...]:
    """The first `depth` siblings, bottom-up, of leaf `index` in a tree's `levels`."""
    out = []
    for level in levels[:depth]:
        out.append(level[index ^ 1].tobytes())
        index //= 2
    return tuple(out)


class StateOpening:
    """One state as a data request's answer opens it: its headers and layout, its trees, and
    the proofs of any chunk. `named`: the state's tensors in state-root order (2-D, as
    committed: a runtime's `committed(state)`)."""

    def __init__(self, named: NamedState) -> None:
        items = list(named.items()) if isinstance(named, Mapping) else list(named)
        if not items:
            raise ValueError("a state has at least one tensor")
        self.names = [n for n, _ in items]
        self.tensors = [t for _, t in items]
        self.words = [merkle.words(t) for t in self.tensors]
        self.headers = tuple(
            Header(keccak256(name.encode()), code, rows, cols, merkle.data_root(t))  # fmt: skip
            for name, t, (_, code, rows, cols) in zip(
                self.names, self.tensors, self.words, strict=True
            )  # fmt: skip
        )
        self.leaf_counts = [-(-w.size // merkle.LEAF_ELEMS) for w, *_ in self.words]
        self.starts = [int(x) for x in np.cumsum([0, *self.leaf_counts[:-1]])]
        self.total_leaves = sum(self.leaf_counts)
        self._data_levels: dict[int, list[np.ndarray]] = {}

    @property
    def tensor_count(self) -> int:
        return len(self.headers)

    @cached_property
    def entries(self) -> list[bytes]:
        return [
            merkle.state_entry(name, merkle.tensor_root_from(h.dtype, h.rows, h.cols, h.data_root))
            for name, h in zip(self.names, self.headers, strict=True)
        ]

    @cached_property
    def state_levels(self) -> list[np.ndarray]:
        return merkle.levels(merkle.list_leaves(merkle.STATE_DOMAIN, self.entries))

    @cached_property
    def layout_levels(self) -> list[np.ndarray]:
        leaves = [
            np.frombuffer(layout_leaf(i, s, n, h.data_root), np.uint8)
            for i, (s, n, h) in enumerate(
                zip(self.starts, self.leaf_counts, self.headers, strict=True)
            )  # fmt: skip
        ]
        return merkle.levels(np.stack(leaves))

    @property
    def state_tree(self) -> bytes:
        return self.state_levels[-1][0].tobytes()

    @property
    def state_root(self) -> bytes:
        return keccak256(merkle.STATE_DOMAIN + merkle.u256(self.tensor_count) + self.state_tree)

    @property
    def layout_root(self) -> bytes:
        return self.layout_levels[-1][0].tobytes()

    def open_state(self, checkpoint_roots: Sequence[bytes], checkpoint: int) -> OpenState:
        """openDataState's arguments for the state at `checkpoint` of a commitment over
        `checkpoint_roots`; ValueError if this state is not that entry."""
        roots = [bytes(r) for r in checkpoint_roots]
        if not 0 <= checkpoint < len(roots):
            raise ValueError(f"checkpoint {checkpoint} out of range for {len(roots)}")
        if self.state_root != roots[checkpoint]:
            raise ValueError(f"the state's root is not checkpoint {checkpoint}'s committed root")
        proof = merkle.list_proof(merkle.CHECKPOINT_DOMAIN, roots, checkpoint).siblings
        return OpenState(self.tensor_count, self.state_tree, tuple(proof))

    def header_parts(self) -> list[HeaderPart]:
        """openDataHeaders' arguments, in order: whole subtrees of DATA_OPEN_PART tensors (the
        whole tree when the state has at most that many), each with its place under the tree."""
        n = self.tensor_count
        depth = merkle.depth_for(n)
        part_depth = depth if n <= DATA_OPEN_PART else PART_DEPTH
        parts = []
        for first in range(0, n, DATA_OPEN_PART):
            headers = self.headers[first : first + DATA_OPEN_PART]
            # the part's subtree root sits at level part_depth; its siblings climb from there
            proof = _siblings(self.state_levels[part_depth:], first >> part_depth,
                              depth - part_depth)  # fmt: skip
            parts.append(HeaderPart(first, headers, proof))
        return parts

    def _levels(self, tensor: int) -> list[np.ndarray]:
        if tensor not in self._data_levels:
            w, code, _, _ = self.words[tensor]
            self._data_levels[tensor] = merkle.levels(merkle.leaves(w, code == merkle.DTYPE_F32))
        return self._data_levels[tensor]

    def chunk_at(self, index: int) -> tuple[int, int]:
        """(tensor, leaf) of global chunk `index`."""
        if not 0 <= index < self.total_leaves:
            raise IndexError(f"chunk {index} out of range for {self.total_leaves}")
        tensor = int(np.searchsorted(self.starts, index, side="right")) - 1
        return tensor, index - self.starts[tensor]

    def sample_at(self, tensor: int, leaf: int) -> Sample:
        """Chunk `leaf` of tensor `tensor` as a sample: its place in the layout and its proof."""
        w, code, _, _ = self.words[tensor]
        chunk = merkle.encode_chunk(w[leaf * merkle.LEAF_ELEMS : (leaf + 1) * merkle.LEAF_ELEMS],
                                    code == merkle.DTYPE_F32)  # fmt: skip
        levels = self._levels(tensor)
        return Sample(
            tensor=tensor,
            start=self.starts[tensor],
            leaves=self.leaf_counts[tensor],
            data_root=self.headers[tensor].data_root,
            layout_proof=_siblings(self.layout_levels, tensor, len(self.layout_levels) - 1),
            chunk=chunk,
            chunk_proof=_siblings(levels, leaf, len(levels) - 1),
        )

    def sample(self, seed: bytes, j: int) -> Sample:
        """Sample `j` of the answer whose samples `seed` draws."""
        return self.sample_at(*self.chunk_at(sample_index(seed, j, self.total_leaves)))

    def samples(self, seed: bytes, first: int, count: int) -> list[Sample]:
        """Samples `first`, … (`count` of them) of the answer whose samples `seed` draws."""
        return [self.sample(seed, j) for j in range(first, first + count)]
