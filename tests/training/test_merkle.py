"""Commitments (PROTOCOL §3): C and Python paths agree, encodings match Solidity's abi.encode,
proofs verify and tampering is caught."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch
from eth_abi import encode
from hypothesis import given
from hypothesis import strategies as st
from training_support import examples

from agents.training import merkle, native
from agents.training.keccak import keccak256, keccak256_batch

needs_native = pytest.mark.skipif(not native.available(), reason="no C compiler")


def _words(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)


@needs_native
@pytest.mark.fuzz
@examples(20)
@given(st.integers(1, 300), st.integers(1, 9), st.integers(0, 2**31))
def test_c_keccak_batch_matches_pycryptodome(length, n, seed):
    msgs = np.random.default_rng(seed).integers(0, 256, length * n, dtype=np.uint8).tobytes()
    got = keccak256_batch(msgs, length)
    for i in range(n):
        assert got[i].tobytes() == keccak256(msgs[i * length : (i + 1) * length])


@needs_native
def test_c_keccak_stream_matches_pycryptodome():
    from agents.training.keccak import keccak256_stream_native

    for n in (0, 1, 135, 136, 137, 272, 1000, 100_000):
        m = os.urandom(n)
        assert keccak256_stream_native(m) == keccak256(m)


@needs_native
@pytest.mark.parametrize(
    "n", [1, 2, 63, 64, 65, 127, 128, 129, 500, 4096, 4097, 64 * 64 + 1, 70_001]
)
def test_native_and_python_roots_agree(n):
    w = _words(n, n)
    w[: min(n, 3)] = [0x7FC00001, 0xFFFFFFFF, 0x7F800000][: min(n, 3)]  # NaNs and +inf
    t = torch.from_numpy(w.view(np.float32).reshape(1, n))
    assert merkle.data_root(t, use_native=True) == merkle.data_root(t, use_native=False)
    lv_c = merkle.levels(merkle.leaves(w, True, True), True)
    lv_p = merkle.levels(merkle.leaves(w, True, False), False)
    assert all(np.array_equal(a, b) for a, b in zip(lv_c, lv_p, strict=True))
    assert lv_c[-1][0].tobytes() == merkle.data_root(t)


def test_encodings_match_abi_encode():
    t = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    droot = merkle.data_root(t)
    want = keccak256(
        encode(
            ["bytes32", "uint256", "uint256", "uint256", "bytes32"],
            [merkle.TENSOR_DOMAIN, 1, 3, 4, droot],
        )
    )
    assert merkle.tensor_root(t) == want
    # one leaf: the 12 big-endian floats, zero padded to 256 bytes
    chunk = np.arange(12, dtype=">f4").tobytes() + bytes(256 - 48)
    assert droot == keccak256(chunk)
    vals = [keccak256(bytes([i])) for i in range(3)]
    leaves = [
        keccak256(encode(["bytes32", "uint256", "bytes32"], [merkle.STATE_DOMAIN, i, v]))
        for i, v in enumerate(vals)
    ]
    l2 = [leaves[0], leaves[1], leaves[2], bytes(32)]
    tree = keccak256(keccak256(l2[0] + l2[1]) + keccak256(l2[2] + l2[3]))
    want = keccak256(encode(["bytes32", "uint256", "bytes32"], [merkle.STATE_DOMAIN, 3, tree]))
    assert merkle.root_list(merkle.STATE_DOMAIN, vals) == want
    assert keccak256(b"vtp.tensor.v1") == merkle.TENSOR_DOMAIN
    entry = merkle.state_entry("w0", vals[0])
    assert entry == keccak256(encode(["bytes32", "bytes32"], [keccak256(b"w0"), vals[0]]))


def test_roots_bind_shape_dtype_and_canonicalise_nan():
    a = torch.arange(64, dtype=torch.float32)
    assert merkle.tensor_root(a.reshape(1, 64)) != merkle.tensor_root(a.reshape(2, 32))
    labels = torch.arange(64).reshape(1, 64)
    assert merkle.data_root(labels) != merkle.data_root(a.reshape(1, 64))
    assert merkle.tensor_root(labels) != merkle.tensor_root(a.reshape(1, 64))
    n1 = torch.tensor([[0x7FC00000, 0x7FC00001, -1]], dtype=torch.int32).view(torch.float32)
    n2 = torch.tensor([[0x7FC00000, 0x7FC00000, 0x7FC00000]], dtype=torch.int32).view(torch.float32)
    assert merkle.tensor_root(n1) == merkle.tensor_root(n2)
    z1 = torch.tensor([[0.0]])
    assert merkle.tensor_root(z1) != merkle.tensor_root(-z1)  # -0 is a different value
    with pytest.raises(ValueError):
        merkle.tensor_root(torch.zeros(0, 3))


@pytest.mark.fuzz
@examples(25)
@given(st.integers(1, 3000), st.data())
def test_element_and_range_proofs(n, data):
    w = _words(n, n + 1)
    t = torch.from_numpy(w.view(np.float32).reshape(1, n))
    droot = merkle.data_root(t)
    e = data.draw(st.integers(0, n - 1))
    p = merkle.element_proof(t, e)
    assert merkle.verify_element_proof(droot, n, p)
    got = merkle.element_value_bits(p, e)
    want = int(w[e]) if (w[e] & 0x7FFFFFFF) <= 0x7F800000 else 0x7FC00000
    assert got == want
    bad = bytearray(p.chunk)
    bad[data.draw(st.integers(0, 255))] ^= 1 << data.draw(st.integers(0, 7))
    assert not merkle.verify_element_proof(
        droot, n, merkle.ElementProof(p.leaf_index, bytes(bad), p.siblings)
    )
    n_leaves = -(-n // 64)
    if n_leaves > 1:
        other = (p.leaf_index + 1) % n_leaves
        assert not merkle.verify_element_proof(
            droot, n, merkle.ElementProof(other, p.chunk, p.siblings)
        )
    first = data.draw(st.integers(0, n_leaves - 1))
    cnt = data.draw(st.integers(1, n_leaves - first))
    rp = merkle.range_proof(t, first, cnt)
    assert merkle.verify_range_proof(droot, n, rp)
    assert rp.chunks[0] == merkle.element_proof(t, first * 64).chunk
    bad = list(rp.chunks)
    bad[-1] = bytes(255) + b"\x01"
    assert not merkle.verify_range_proof(
        droot, n, merkle.RangeProof(first, bad, rp.siblings, rp.depth)
    )
    if rp.siblings:
        sib = list(rp.siblings)
        sib[0] = bytes(32) if sib[0] != bytes(32) else b"\x01" * 32
        assert not merkle.verify_range_proof(
            droot, n, merkle.RangeProof(first, rp.chunks, sib, rp.depth)
        )


def test_list_proofs():
    vals = [keccak256(bytes([i])) for i in range(11)]
    root = merkle.root_list(merkle.TRACE_DOMAIN, vals)
    for i in range(11):
        p = merkle.list_proof(merkle.TRACE_DOMAIN, vals, i)
        assert merkle.verify_list_proof(merkle.TRACE_DOMAIN, root, 11, p)
        assert not merkle.verify_list_proof(merkle.STATE_DOMAIN, root, 11, p)
        assert not merkle.verify_list_proof(merkle.TRACE_DOMAIN, root, 12, p)
        forged = merkle.ListProof(i, vals[(i + 1) % 11], p.siblings)
        assert not merkle.verify_list_proof(merkle.TRACE_DOMAIN, root, 11, forged)
