"""keccak-256 (Ethereum's, = Solidity keccak256): C batch hasher with a pycryptodome fallback.

Both paths are tested to agree; the C one (native.py) hashes many equal-length messages per call
and whole Merkle trees in one call, which is what makes commitments fast.
"""

from __future__ import annotations

import ctypes

import numpy as np
from Crypto.Hash import keccak as _pyk

from agents.training import native


def keccak256_py(data: bytes) -> bytes:
    return _pyk.new(digest_bits=256, data=data).digest()


def keccak256(data: bytes) -> bytes:
    """keccak-256 of one message (pycryptodome is already C and has no per-call overhead)."""
    return keccak256_py(data)


def keccak256_batch(
    messages: bytes | np.ndarray, length: int, use_native: bool = True
) -> np.ndarray:
    """Hashes of n back-to-back messages of `length` bytes each -> (n, 32) uint8 array."""
    buf = np.frombuffer(messages, dtype=np.uint8) if isinstance(messages, bytes) else messages
    buf = np.ascontiguousarray(buf, dtype=np.uint8).reshape(-1)
    if length <= 0 or buf.size % length:
        raise ValueError("keccak256_batch: buffer is not a whole number of messages")
    n = buf.size // length
    out = np.empty((n, 32), dtype=np.uint8)
    if use_native and native.available():
        native.lib().vtp_keccak256_batch(buf.ctypes.data, n, length, out.ctypes.data)
        return out
    for i in range(n):
        out[i] = np.frombuffer(keccak256_py(buf[i * length : (i + 1) * length].tobytes()), np.uint8)
    return out


def keccak256_stream_native(data: bytes) -> bytes:
    """The C single-stream hasher (benchmark baseline)."""
    out = ctypes.create_string_buffer(32)
    native.lib().vtp_keccak256(data, len(data), out)
    return out.raw
