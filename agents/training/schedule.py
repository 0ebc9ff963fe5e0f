"""The keccak-seeded streams every party derives alike, bit for bit (and Solidity too): the
words of a tag and a seed, their exact unit floats (initial states, PROTOCOL §3; synthetic
datasets), and each step's batch indices (PROTOCOL §4.1). Integer-only, so every machine
derives the same numbers. The datasets (agents/data) and the engine both read them here: the
engine imports no dataset code, it is handed a dataset."""

from __future__ import annotations

import numpy as np

from agents.training.keccak import keccak256, keccak256_batch


def stream_words(tag: bytes, seed: int, n: int) -> np.ndarray:
    """n uint32 words: block c = keccak(abi.encode(keccak(tag), seed, c)), 8 big-endian words
    per block."""
    blocks = -(-n // 8)
    head = keccak256(tag) + int(seed).to_bytes(32, "big")
    msgs = b"".join(head + c.to_bytes(32, "big") for c in range(blocks))
    return keccak256_batch(msgs, 96).view(">u4").reshape(-1)[:n].astype(np.uint32)


def unit_floats(words: np.ndarray) -> np.ndarray:
    """Top 24 bits of each word as k in [-2^23, 2^23), returned as k * 2^-23 (exact)."""
    k = (words >> 8).astype(np.int64) - (1 << 23)
    return (k.astype(np.float32) * np.float32(2.0**-23)).astype(np.float32)


def batch_indices(seed: int, t: int, batch: int, n: int) -> np.ndarray:
    """idx(seed, t, j) = uint256(keccak256(abi.encode(seed, t, j))) mod N for j < batch."""
    msgs = np.zeros((batch, 96), dtype=np.uint8)
    msgs[:, :32] = np.frombuffer(int(seed).to_bytes(32, "big"), np.uint8)
    msgs[:, 32:64] = np.frombuffer(int(t).to_bytes(32, "big"), np.uint8)
    msgs[:, 88:96] = np.arange(batch, dtype=">u8").view(np.uint8).reshape(batch, 8)
    b = keccak256_batch(msgs, 96).tobytes()
    return np.array([int.from_bytes(b[i : i + 32], "big") % n for i in range(0, len(b), 32)],
                    dtype=np.int64)  # fmt: skip
