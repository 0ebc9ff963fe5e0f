"""Merkle commitments of PROTOCOL §3: tensor roots, root lists (state, checkpoints, op trace,
dataset) and element / range / list-entry proofs with their verifiers.

Layout recap: a tensor's 32-bit elements (big-endian, NaN -> 0x7FC00000) are cut into 256-byte
leaves (64 elements, last one zero padded), leaf = keccak(chunk); the leaves are padded with
bytes32(0) to a power of two and node = keccak(left || right). The C path (kernels.c) hashes the
whole tree in one call; the pure-Python path here (pycryptodome) is the readable reference and
the fallback, and tests check the two agree.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from agents.training import native
from agents.training.float32 import CANONICAL_NAN
from agents.training.keccak import keccak256, keccak256_batch

LEAF_ELEMS = 64
LEAF_BYTES = 256
ZERO32 = bytes(32)

DTYPE_F32 = 1
DTYPE_U32 = 2

TENSOR_DOMAIN = keccak256(b"vtp.tensor.v1")
STATE_DOMAIN = keccak256(b"vtp.state.v1")
CHECKPOINT_DOMAIN = keccak256(b"vtp.checkpoints.v1")
TRACE_DOMAIN = keccak256(b"vtp.trace.v1")
DATASET_DOMAIN = keccak256(b"vtp.dataset.v1")


def u256(x: int) -> bytes:
    return int(x).to_bytes(32, "big")


# -- element encoding ----------------------------------------------------------------------


def words(t: torch.Tensor | np.ndarray) -> tuple[np.ndarray, int, int, int]:
    """(uint32 words row-major with NaNs canonicalised, dtype code, rows, cols) of a 2-D tensor.

    float32 -> dtype 1; integer tensors (labels) -> dtype 2 (values must fit uint32).
    """
    if isinstance(t, torch.Tensor):
        t = t.detach().to("cpu")
        if t.dtype == torch.float32:
            t = t.contiguous().view(torch.int32)
            a, code = t.numpy().view(np.uint32), DTYPE_F32
        else:
            a, code = t.to(torch.int64).numpy(), DTYPE_U32
    else:
        a = np.asarray(t)
        code = DTYPE_F32 if a.dtype == np.float32 else DTYPE_U32
        a = a.view(np.uint32) if code == DTYPE_F32 else a
    if a.ndim != 2:
        raise ValueError(f"tensors are 2-D, got shape {a.shape}")
    rows, cols = a.shape
    if rows * cols == 0:
        raise ValueError("cannot commit an empty tensor")
    if code == DTYPE_U32:
        if a.min() < 0 or a.max() > 0xFFFFFFFF:
            raise ValueError("uint32 tensor value out of range")
        w = np.ascontiguousarray(a, dtype=np.uint32).reshape(-1)
    else:
        w = np.ascontiguousarray(a).reshape(-1)
    return w, code, rows, cols


def encode_chunk(w: np.ndarray, is_f32: bool) -> bytes:
    """Big-endian bytes of up to 64 words, NaNs canonicalised, zero padded to 256 bytes."""
    w = w.copy()
    if is_f32:
        w[(w & 0x7FFFFFFF) > 0x7F800000] = CANONICAL_NAN
    b = w.astype(">u4").tobytes()
    return b + bytes(LEAF_BYTES - len(b))


# -- trees ---------------------------------------------------------------------------------


def depth_for(n_leaves: int) -> int:
    return max(0, (n_leaves - 1).bit_length())


def leaves_py(w: np.ndarray, is_f32: bool) -> np.ndarray:
    n_leaves = -(-w.size // LEAF_ELEMS)
    out = np.empty((n_leaves, 32), dtype=np.uint8)
    for i in range(n_leaves):
        chunk = encode_chunk(w[i * LEAF_ELEMS : (i + 1) * LEAF_ELEMS], is_f32)
        out[i] = np.frombuffer(keccak256(chunk), np.uint8)
    return out


def leaves(w: np.ndarray, is_f32: bool, use_native: bool = True) -> np.ndarray:
    """(L, 32) leaf hashes of a word array."""
    if use_native and native.available():
        w = np.ascontiguousarray(w, dtype=np.uint32)
        out = np.empty((-(-w.size // LEAF_ELEMS), 32), dtype=np.uint8)
        native.lib().vtp_tensor_leaves(w.ctypes.data, w.size, int(is_f32), out.ctypes.data)
        return out
    return leaves_py(w, is_f32)


def levels(leaf_hashes: np.ndarray, use_native: bool = True) -> list[np.ndarray]:
    """All levels of the padded tree, bottom (padded leaves) first, root level last."""
    n = leaf_hashes.shape[0]
    width = 1 << depth_for(n)
    if use_native and native.available():
        buf = np.zeros((2 * width - 1, 32), dtype=np.uint8)
        buf[:n] = leaf_hashes
        native.lib().vtp_merkle_levels(buf.ctypes.data, width)
        out, off = [], 0
        while width >= 1:
            out.append(buf[off : off + width])
            off += width
            width //= 2
        return out
    cur = np.zeros((width, 32), dtype=np.uint8)
    cur[:n] = leaf_hashes
    out = [cur]
    while cur.shape[0] > 1:
        pairs = cur.reshape(-1, 64)
        cur = np.stack([np.frombuffer(keccak256(p.tobytes()), np.uint8) for p in pairs])
        out.append(cur)
    return out


def root_of_leaves(leaf_hashes: np.ndarray, use_native: bool = True) -> bytes:
    return levels(leaf_hashes, use_native)[-1][0].tobytes()


def data_root(t: torch.Tensor | np.ndarray, use_native: bool = True) -> bytes:
    """Merkle root of a tensor's element data (no shape binding; see tensor_root)."""
    w, code, _, _ = words(t)
    return _data_root_words(w, code == DTYPE_F32, use_native)


def _data_root_words(w: np.ndarray, is_f32: bool, use_native: bool) -> bytes:
    if use_native and native.available():
        out = np.empty(32, dtype=np.uint8)
        native.lib().vtp_tensor_data_root(w.ctypes.data, w.size, int(is_f32), out.ctypes.data)
        return out.tobytes()
    return root_of_leaves(leaves_py(w, is_f32), use_native=False)


def tensor_root_from(code: int, rows: int, cols: int, droot: bytes) -> bytes:
    return keccak256(TENSOR_DOMAIN + u256(code) + u256(rows) + u256(cols) + droot)


def tensor_root(t: torch.Tensor | np.ndarray, use_native: bool = True) -> bytes:
    """keccak(abi.encode(TENSOR_DOMAIN, dtype, rows, cols, dataRoot))."""
    w, code, rows, cols = words(t)
    return tensor_root_from(code, rows, cols, _data_root_words(w, code == DTYPE_F32, use_native))


# -- root lists ----------------------------------------------------------------------------


def list_leaves(domain: bytes, values: list[bytes]) -> np.ndarray:
    msgs = b"".join(domain + u256(i) + v for i, v in enumerate(values))
    return keccak256_batch(msgs, 96)


def root_list(domain: bytes, values: list[bytes]) -> bytes:
    """keccak(abi.encode(D, n, treeRoot)), leaves keccak(abi.encode(D, i, value_i))."""
    if not values:
        raise ValueError("a root list has at least one value")
    return keccak256(domain + u256(len(values)) + root_of_leaves(list_leaves(domain, values)))


def state_entry(name: str, troot: bytes) -> bytes:
    return keccak256(keccak256(name.encode()) + troot)


def state_root(named: list[tuple[str, torch.Tensor]]) -> bytes:
    """Root list under vtp.state.v1 of keccak(abi.encode(keccak(name), tensorRoot))."""
    return root_list(STATE_DOMAIN, [state_entry(n, tensor_root(t)) for n, t in named])


def checkpoint_root(state_roots: list[bytes]) -> bytes:
    return root_list(CHECKPOINT_DOMAIN, state_roots)


def trace_root(tensor_roots: list[bytes]) -> bytes:
    return root_list(TRACE_DOMAIN, tensor_roots)


def dataset_root(x: torch.Tensor | np.ndarray, y: torch.Tensor | np.ndarray) -> bytes:
    """Root list under vtp.dataset.v1 of [tensorRoot(X: f32 N x F), tensorRoot(Y: u32 1 x N)]."""
    return root_list(DATASET_DOMAIN, [tensor_root(x), tensor_root(y)])


# -- proofs --------------------------------------------------------------------------------


@dataclass(frozen=True)
class ElementProof:
    """Opens one 256-byte leaf of a tensor: siblings bottom-up, depth = len(siblings)."""

    leaf_index: int
    chunk: bytes
    siblings: list[bytes]


@dataclass(frozen=True)
class RangeProof:
    """Opens leaves first..first+len(chunks)-1. `siblings` is, level by level bottom-up, the left
    neighbour of the covered interval (if its left end is a right child) and then the right
    neighbour (if its right end is a left child)."""

    first_leaf: int
    chunks: list[bytes]
    siblings: list[bytes]
    depth: int


def _hash2(a: bytes, b: bytes) -> bytes:
    return keccak256(a + b)


def element_proof(t: torch.Tensor | np.ndarray, element: int) -> ElementProof:
    w, code, _, _ = words(t)
    if not 0 <= element < w.size:
        raise IndexError(f"element {element} out of range for {w.size} elements")
    li = element // LEAF_ELEMS
    lv = levels(leaves(w, code == DTYPE_F32))
    sib, idx = [], li
    for level in lv[:-1]:
        sib.append(level[idx ^ 1].tobytes())
        idx //= 2
    chunk = encode_chunk(w[li * LEAF_ELEMS : (li + 1) * LEAF_ELEMS], code == DTYPE_F32)
    return ElementProof(li, chunk, sib)


def verify_element_proof(droot: bytes, numel: int, proof: ElementProof) -> bool:
    """True iff proof's chunk is leaf `leaf_index` of a tensor of numel elements with this root."""
    n_leaves = -(-numel // LEAF_ELEMS)
    if not 0 <= proof.leaf_index < n_leaves or len(proof.siblings) != depth_for(n_leaves):
        return False
    if len(proof.chunk) != LEAF_BYTES:
        return False
    h, idx = keccak256(proof.chunk), proof.leaf_index
    for s in proof.siblings:
        h = _hash2(s, h) if idx & 1 else _hash2(h, s)
        idx //= 2
    return h == droot


def element_value_bits(proof: ElementProof, element: int) -> int:
    """The committed 32-bit word of `element` inside an opened chunk."""
    off = element - proof.leaf_index * LEAF_ELEMS
    if not 0 <= off < LEAF_ELEMS:
        raise IndexError("element is not in the opened leaf")
    return int.from_bytes(proof.chunk[4 * off : 4 * off + 4], "big")


def range_proof(t: torch.Tensor | np.ndarray, first_leaf: int, n: int) -> RangeProof:
    w, code, _, _ = words(t)
    is_f32 = code == DTYPE_F32
    n_leaves = -(-w.size // LEAF_ELEMS)
    if n < 1 or first_leaf < 0 or first_leaf + n > n_leaves:
        raise IndexError("leaf range out of bounds")
    lv = levels(leaves(w, is_f32))
    sib, lo, hi = [], first_leaf, first_leaf + n - 1
    for level in lv[:-1]:
        if lo & 1:
            sib.append(level[lo - 1].tobytes())
        if not hi & 1:
            sib.append(level[hi + 1].tobytes())
        lo, hi = lo // 2, hi // 2
    chunks = [
        encode_chunk(w[i * LEAF_ELEMS : (i + 1) * LEAF_ELEMS], is_f32)
        for i in range(first_leaf, first_leaf + n)
    ]
    return RangeProof(first_leaf, chunks, sib, depth_for(n_leaves))


def verify_range_proof(droot: bytes, numel: int, proof: RangeProof) -> bool:
    n_leaves = -(-numel // LEAF_ELEMS)
    lo, hi = proof.first_leaf, proof.first_leaf + len(proof.chunks) - 1
    if not proof.chunks or lo < 0 or hi >= n_leaves or proof.depth != depth_for(n_leaves):
        return False
    if any(len(c) != LEAF_BYTES for c in proof.chunks):
        return False
    cur = [keccak256(c) for c in proof.chunks]
    sib = list(proof.siblings)
    for _ in range(proof.depth):
        try:
            if lo & 1:
                cur.insert(0, sib.pop(0))
                lo -= 1
            if not hi & 1:
                cur.append(sib.pop(0))
                hi += 1
        except IndexError:
            return False
        cur = [_hash2(cur[i], cur[i + 1]) for i in range(0, len(cur), 2)]
        lo, hi = lo // 2, hi // 2
    return not sib and len(cur) == 1 and cur[0] == droot


@dataclass(frozen=True)
class ListProof:
    """Opens entry `index` of a root list: its value and the tree siblings bottom-up."""

    index: int
    value: bytes
    siblings: list[bytes]


def list_proof(domain: bytes, values: list[bytes], index: int) -> ListProof:
    lv = levels(list_leaves(domain, values))
    sib, idx = [], index
    for level in lv[:-1]:
        sib.append(level[idx ^ 1].tobytes())
        idx //= 2
    return ListProof(index, values[index], sib)


def final_proof(state_roots: list[bytes]) -> list[bytes]:
    """The siblings that open the last entry of the checkpoint list over `state_roots`:
    `commitCheckpoints`' and a forced reveal's `finalProof` (PROTOCOL §6.5, §8.1)."""
    return list_proof(CHECKPOINT_DOMAIN, state_roots, len(state_roots) - 1).siblings


def verify_list_proof(domain: bytes, root: bytes, n: int, proof: ListProof) -> bool:
    if not 0 <= proof.index < n or len(proof.siblings) != depth_for(n):
        return False
    h, idx = keccak256(domain + u256(proof.index) + proof.value), proof.index
    for s in proof.siblings:
        h = _hash2(s, h) if idx & 1 else _hash2(h, s)
        idx //= 2
    return keccak256(domain + u256(n) + h) == root
