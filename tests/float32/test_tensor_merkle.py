"""TensorMerkle on chain vs the engine's commitment code (agents/training/merkle.py)."""

from __future__ import annotations

import pytest
import torch
from f32_strategies import examples, value
from f32ref import np_arr
from hypothesis import given, settings
from hypothesis import strategies as st

from agents.data import builtin as data
from agents.training import merkle
from agents.training.keccak import keccak256

EX = 15


def _flip(b: bytes, i: int) -> bytes:
    return b[:i] + bytes([b[i] ^ 1]) + b[i + 1 :]


def test_domains_match_engine(ops_h) -> None:
    got = ops_h.domains()
    want = [
        merkle.TENSOR_DOMAIN,
        merkle.STATE_DOMAIN,
        merkle.CHECKPOINT_DOMAIN,
        merkle.TRACE_DOMAIN,
        merkle.DATASET_DOMAIN,
    ]
    assert [bytes(x) for x in got] == want


def test_depth_for_matches_engine(ops_h) -> None:
    for n in [*range(1, 70), 127, 128, 129, 1023, 1024, 1025, 2**40 + 1]:
        assert ops_h.depthFor(n) == merkle.depth_for(n)


tensors = st.one_of(
    # float32 tensors with every value class (NaNs must be committed canonical)
    st.tuples(st.integers(1, 12), st.integers(1, 70)).flatmap(
        lambda rc: st.tuples(
            st.just(rc),
            st.just(True),
            st.lists(value, min_size=rc[0] * rc[1], max_size=rc[0] * rc[1]),
        )
    ),
    # uint32 label tensors (1, N)
    st.integers(1, 300).flatmap(
        lambda n: st.tuples(
            st.just((1, n)),
            st.just(False),
            st.lists(st.integers(0, 2**32 - 1), min_size=n, max_size=n),
        )
    ),
)


def _tensor(rc: tuple[int, int], is_f32: bool, vals: list[int]):
    if is_f32:
        return np_arr(vals).reshape(rc).copy()
    return torch.tensor(vals, dtype=torch.int64).reshape(rc)


@pytest.mark.fuzz
def test_element_and_leaf_proofs(ops_h) -> None:
    @settings(max_examples=examples(EX))
    @given(tensors, st.data())
    def prop(t, d) -> None:
        (rows, cols), is_f32, vals = t
        x = _tensor((rows, cols), is_f32, vals)
        dtype = merkle.DTYPE_F32 if is_f32 else merkle.DTYPE_U32
        root = merkle.tensor_root(x)
        droot = merkle.data_root(x)
        numel = rows * cols
        assert bytes(ops_h.tensorRoot(dtype, rows, cols, droot)) == root
        for e in {0, numel - 1, d.draw(st.integers(0, numel - 1))}:
            p = merkle.element_proof(x, e)
            assert merkle.verify_element_proof(droot, numel, p)
            assert bytes(ops_h.leafHash(p.chunk)) == keccak256(p.chunk)
            ok, v = ops_h.verifyElement(root, dtype, rows, cols, e, p.chunk, p.siblings)
            assert ok and v == merkle.element_value_bits(p, e)
            assert ops_h.elementAt(p.chunk, e % 64) == v
            assert ops_h.verifyLeaf(droot, numel, p.leaf_index, p.chunk, p.siblings)
            # tampering with anything makes the proof fail
            bad_chunk = _flip(p.chunk, d.draw(st.integers(0, 255)))
            assert not ops_h.verifyElement(root, dtype, rows, cols, e, bad_chunk, p.siblings)[0]
            assert not ops_h.verifyElement(root, 3 - dtype, rows, cols, e, p.chunk, p.siblings)[0]
            if p.siblings:
                j = d.draw(st.integers(0, len(p.siblings) - 1))
                sib = list(p.siblings)
                sib[j] = _flip(sib[j], 0)
                assert not ops_h.verifyElement(root, dtype, rows, cols, e, p.chunk, sib)[0]
                short = p.siblings[:-1]
                assert not ops_h.verifyElement(root, dtype, rows, cols, e, p.chunk, short)[0]
                other = (e + 64) % (((numel + 63) // 64) * 64)
                if other < numel and other // 64 != e // 64:
                    # the chunk opened at another leaf's index: engine and chain agree
                    q = merkle.ElementProof(other // 64, p.chunk, p.siblings)
                    res = ops_h.verifyElement(root, dtype, rows, cols, other, p.chunk, p.siblings)
                    assert res[0] == merkle.verify_element_proof(droot, numel, q)
            assert not ops_h.verifyLeaf(droot, numel, p.leaf_index, bad_chunk, p.siblings)

    prop()


@pytest.mark.fuzz
def test_range_proofs(ops_h) -> None:
    @settings(max_examples=examples(EX))
    @given(st.integers(1, 40), st.data())
    def prop(n_leaves: int, d) -> None:
        numel = 64 * (n_leaves - 1) + d.draw(st.integers(1, 64))
        rows = d.draw(st.sampled_from([r for r in (1, 2, 4, 8) if numel % r == 0]))
        vals = d.draw(st.lists(value, min_size=numel, max_size=numel))
        x = np_arr(vals).reshape(rows, numel // rows).copy()
        root = merkle.tensor_root(x)
        first = d.draw(st.integers(0, n_leaves - 1))
        count = d.draw(st.integers(1, n_leaves - first))
        p = merkle.range_proof(x, first, count)
        assert merkle.verify_range_proof(merkle.data_root(x), numel, p)
        chunks = b"".join(p.chunks)
        args = (root, 1, rows, numel // rows, first)
        assert ops_h.verifyRange(*args, chunks, p.siblings)
        assert not ops_h.verifyRange(
            *args, _flip(chunks, d.draw(st.integers(0, len(chunks) - 1))), p.siblings
        )
        if p.siblings:
            assert not ops_h.verifyRange(*args, chunks, p.siblings[:-1])
            sib = list(p.siblings)
            sib[0] = _flip(sib[0], 31)
            assert not ops_h.verifyRange(*args, chunks, sib)
        assert not ops_h.verifyRange(*args, chunks, [*p.siblings, bytes(32)])
        if first + count < n_leaves or first > 0:
            # a shifted range: on chain and engine verifiers must agree (equal chunks can make
            # it valid, e.g. all-zero data)
            shifted = first + 1 if first + count < n_leaves else first - 1
            q = merkle.RangeProof(shifted, p.chunks, p.siblings, p.depth)
            want = merkle.verify_range_proof(merkle.data_root(x), numel, q)
            got = ops_h.verifyRange(root, 1, rows, numel // rows, shifted, chunks, p.siblings)
            assert got == want

    prop()


@pytest.mark.fuzz
def test_root_lists_state_entries_and_dataset(ops_h) -> None:
    domains = [
        merkle.STATE_DOMAIN,
        merkle.CHECKPOINT_DOMAIN,
        merkle.TRACE_DOMAIN,
        merkle.DATASET_DOMAIN,
    ]

    @settings(max_examples=examples(EX))
    @given(
        st.sampled_from(domains),
        st.lists(st.binary(min_size=32, max_size=32), min_size=1, max_size=40),
        st.data(),
    )
    def prop(dom: bytes, values: list[bytes], d) -> None:
        root = merkle.root_list(dom, values)
        assert bytes(ops_h.listRootOf(dom, values)) == root
        i = d.draw(st.integers(0, len(values) - 1))
        p = merkle.list_proof(dom, values, i)
        n = len(values)
        assert merkle.verify_list_proof(dom, root, n, p)
        assert ops_h.verifyListEntry(root, dom, n, i, p.value, p.siblings)
        assert not ops_h.verifyListEntry(root, dom, n, i, _flip(p.value, 5), p.siblings)
        assert not ops_h.verifyListEntry(root, dom, n + 1, i, p.value, p.siblings)
        other = domains[(domains.index(dom) + 1) % len(domains)]
        assert not ops_h.verifyListEntry(root, other, n, i, p.value, p.siblings)
        name = d.draw(st.text(min_size=1, max_size=12))
        assert bytes(ops_h.stateEntry(name, values[0])) == merkle.state_entry(name, values[0])

    prop()


def test_dataset_root_of_digits(ops_h) -> None:
    ds = data.load_dataset(data.DIGITS_TRAIN)
    xr, yr = merkle.tensor_root(ds.x), merkle.tensor_root(ds.y)
    assert bytes(ops_h.datasetRoot(xr, yr)) == ds.root() == merkle.dataset_root(ds.x, ds.y)
