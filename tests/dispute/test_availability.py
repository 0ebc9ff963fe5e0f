"""agents.dispute.availability: the arguments of a data request's answer (PROTOCOL §6.11) — the
opening, the header parts and the samples — checked here by a Python mirror of the contract's
checks (`JobManagerExtension.openDataHeaders`, `_checkSample`). Pure: no chain (the contract side
is tests/contracts/test_data_requests.py)."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import pytest
import torch

from agents.dispute.availability import (
    DATA_OPEN_PART,
    DATA_SAMPLES,
    PART_DEPTH,
    StateOpening,
    layout_leaf,
    sample_index,
)
from agents.training import merkle
from agents.training.keccak import keccak256


def small_state(seed: int = 0) -> dict[str, torch.Tensor]:
    """Three tensors: a 65x70 weight (72 chunks), a 1-chunk bias and labels (u32)."""
    g = torch.Generator().manual_seed(seed)
    return {
        "w0": torch.randn(65, 70, generator=g, dtype=torch.float32),
        "b0": torch.randn(1, 5, generator=g, dtype=torch.float32),
        "y": torch.randint(0, 10, (1, 130), generator=g),
    }


def many_tensors(n: int = 300) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    return {f"t{k}": torch.randn(1, 3 + 70 * (k % 3), generator=g) for k in range(n)}


def path_root(leaf: bytes, index: int, siblings) -> bytes:
    h = leaf
    for s in siblings:
        h = keccak256(s + h) if index & 1 else keccak256(h + s)
        index //= 2
    return h


def headers_hold(o: StateOpening, part) -> bool:
    """openDataHeaders' check: the part's subtree, placed by its proof, is the state tree."""
    depth = merkle.depth_for(o.tensor_count)
    part_depth = depth if o.tensor_count <= DATA_OPEN_PART else PART_DEPTH
    leaves = [
        keccak256(
            merkle.STATE_DOMAIN
            + merkle.u256(part.first_tensor + i)
            + keccak256(h.name_hash + merkle.tensor_root_from(h.dtype, h.rows, h.cols, h.data_root))
        )
        for i, h in enumerate(part.headers)
    ]
    leaves += [bytes(32)] * ((1 << part_depth) - len(leaves))
    while len(leaves) > 1:
        leaves = [keccak256(leaves[i] + leaves[i + 1]) for i in range(0, len(leaves), 2)]
    return path_root(leaves[0], part.first_tensor >> part_depth, part.part_proof) == o.state_tree


def sample_holds(o: StateOpening, seed: bytes, j: int, s) -> bool:
    """`_checkSample`: the tensor in the layout, the drawn chunk in it, the chunk's proof."""
    depth = merkle.depth_for(o.tensor_count)
    leaf = layout_leaf(s.tensor, s.start, s.leaves, s.data_root)
    if len(s.layout_proof) != depth or path_root(leaf, s.tensor, s.layout_proof) != o.layout_root:
        return False
    index = sample_index(seed, j, o.total_leaves)
    if not s.start <= index < s.start + s.leaves:
        return False
    proof = merkle.ElementProof(index - s.start, s.chunk, list(s.chunk_proof))
    return merkle.verify_element_proof(s.data_root, s.leaves * merkle.LEAF_ELEMS, proof)


@pytest.mark.parametrize("state", [small_state(), many_tensors(), {"only": torch.ones(1, 1)}])
def test_the_opening_parts_and_samples_check_as_the_contract_checks_them(state):
    o = StateOpening(state)
    assert o.state_root == merkle.state_root(list(state.items()))
    roots = [bytes([0x40 + i]) * 32 for i in range(5)]
    roots[3] = o.state_root
    opened = o.open_state(roots, 3)
    assert opened.tensor_count == len(state)
    proof = merkle.ListProof(3, o.state_root, list(opened.checkpoint_proof))
    assert merkle.verify_list_proof(merkle.CHECKPOINT_DOMAIN, merkle.checkpoint_root(roots), 5,
                                    proof)  # fmt: skip
    parts = o.header_parts()
    assert [p.first_tensor for p in parts] == list(range(0, len(state), DATA_OPEN_PART))
    assert sum(len(p.headers) for p in parts) == len(state)
    assert all(headers_hold(o, p) for p in parts)
    assert o.total_leaves == sum(-(-t.numel() // 64) for t in state.values())
    seed = keccak256(b"seed")
    samples = o.samples(seed, 0, DATA_SAMPLES)
    assert all(sample_holds(o, seed, j, s) for j, s in enumerate(samples))


def test_a_changed_header_chunk_or_place_does_not_check():
    o = StateOpening(small_state())
    part = o.header_parts()[0]
    h = part.headers[1]
    changed = replace(h, rows=h.rows + 1)
    bad = replace(part, headers=(part.headers[0], changed, part.headers[2]))
    assert headers_hold(o, part) and not headers_hold(o, bad)
    seed = keccak256(b"x")
    s = o.sample(seed, 0)
    assert sample_holds(o, seed, 0, s)
    flipped = bytearray(s.chunk)
    flipped[0] ^= 1
    assert not sample_holds(o, seed, 0, replace(s, chunk=bytes(flipped)))
    assert not sample_holds(o, seed, 0, replace(s, start=s.start + 1))
    other = o.sample_at(1, 0)  # a real chunk of another tensor than the drawn one
    assert s.tensor == 1 or not sample_holds(o, seed, 0, other)


def test_a_state_that_is_not_the_checkpoints_is_refused():
    o = StateOpening(small_state())
    with pytest.raises(ValueError, match="not checkpoint 2's committed root"):
        o.open_state([bytes(32)] * 5, 2)
    with pytest.raises(ValueError, match="out of range"):
        o.open_state([o.state_root], 1)


def test_the_draw_is_uniform_over_every_chunk_of_the_state():
    """The samples land on chunks in proportion to their tensors' sizes: a holder that dropped a
    fraction f of the state passes all 64 with probability (1 - f)^64 (PROTOCOL §6.11)."""
    o = StateOpening(small_state())
    assert o.total_leaves == 72 + 1 + 3
    hits = Counter(o.chunk_at(sample_index(keccak256(b"d"), j, o.total_leaves))[0]
                   for j in range(7600))  # fmt: skip
    assert 7000 < hits[0] < 7400 and 30 < hits[1] < 200 and 200 < hits[2] < 420
    assert o.chunk_at(0) == (0, 0) and o.chunk_at(71) == (0, 71) and o.chunk_at(72) == (1, 0)
    assert o.chunk_at(75) == (2, 2)
    with pytest.raises(IndexError):
        o.chunk_at(76)
