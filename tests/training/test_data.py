"""Data (PROTOCOL §4): batch schedule against a literal abi.encode/keccak, digits split and
normalisation, synthetic data and init determinism."""

from __future__ import annotations

import numpy as np
import pytest
from eth_abi import encode
from hypothesis import given
from hypothesis import strategies as st
from training_support import examples

from agents.data import builtin as data
from agents.training import merkle, schedule
from agents.training.keccak import keccak256
from agents.training.state import init_state, state_names


@pytest.mark.fuzz
@examples(30)
@given(st.integers(0, 2**256 - 1), st.integers(0, 2**40), st.integers(1, 20), st.integers(1, 10**6))
def test_batch_indices_match_abi_encode(seed, t, b, n):
    got = schedule.batch_indices(seed, t, b, n)
    want = [
        int.from_bytes(keccak256(encode(["uint256"] * 3, [seed, t, j])), "big") % n
        for j in range(b)
    ]
    assert got.tolist() == want


def test_digits_split_and_values():
    tr, te = data.load_dataset(data.DIGITS_TRAIN), data.load_dataset(data.DIGITS_TEST)
    assert tr.x.shape == (1438, 64) and te.x.shape == (359, 64)
    assert tr.y.shape == (1, 1438) and tr.classes == 10
    px = tr.x.numpy() * 16
    assert np.array_equal(px, np.round(px)) and px.max() == 16 and px.min() == 0
    from sklearn.datasets import load_digits

    d = load_digits()
    assert np.array_equal(te.x.numpy()[0] * 16, d.data[4]) and te.y[0, 0] == d.target[4]
    assert tr.root() == merkle.dataset_root(tr.x, tr.y) != te.root()


def test_synthetic_is_deterministic_and_named():
    a = data.load_dataset("synthetic/n=100,f=8,c=4,seed=3")
    b = data.synthetic(100, 8, 4, 3)
    assert a.root() == b.root() and a.name == b.name
    assert a.root() != data.synthetic(100, 8, 4, 4).root()
    assert a.x.abs().max() <= 1 and len(set(a.y.reshape(-1).tolist())) > 1
    with pytest.raises(data.DatasetError):
        data.load_dataset("mnist")


def test_init_state_is_deterministic_and_bounded():
    s1, s2 = init_state((64, 100, 10), 5), init_state((64, 100, 10), 5)
    assert (
        list(s1)
        == state_names((64, 100, 10))
        == ["w0", "b0", "w1", "b1", "m.w0", "m.b0", "m.w1", "m.b1"]
    )
    for k in s1:
        assert np.array_equal(s1[k].numpy().view(np.uint32), s2[k].numpy().view(np.uint32))
    assert s1["w0"].abs().max() <= 1 / 8 and s1["w1"].abs().max() <= 1 / 8  # fan-in 64, 100
    assert s1["w0"].std() > 0.03 and not s1["b0"].any() and not s1["m.w0"].any()
    assert not np.array_equal(init_state((64, 100, 10), 6)["w0"].numpy(), s1["w0"].numpy())
    # recompute w1[1, 9] straight from the PROTOCOL §5 text with literal abi.encode
    layer, e = 1, 1 * 100 + 9
    sub = int.from_bytes(keccak256(encode(["uint256", "uint256"], [5, layer])), "big")
    blk = keccak256(
        encode(["bytes32", "uint256", "uint256"], [keccak256(b"vtp.init.v1"), sub, e // 8])
    )
    word = int.from_bytes(blk[4 * (e % 8) : 4 * (e % 8) + 4], "big")
    want = np.float32(((word >> 8) - 2**23) * 2.0**-23) * np.float32(2.0**-3)  # s = 7 // 2
    assert s1["w1"][1, 9].item() == float(want)
