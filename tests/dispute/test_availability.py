"""agents.dispute.availability: the arguments that answer a data request (PROTOCOL §6.11) and the
state rebuilt from its DataPosted events. Pure: no chain (the contract side is
tests/contracts/test_data_requests.py)."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from agents.dispute.availability import (
    MAX_DATA_CHUNKS,
    DataMismatch,
    decode_answer,
    encode_answer,
)
from agents.training import merkle


def small_state(seed: int = 0) -> dict[str, torch.Tensor]:
    """Three tensors: a 1-chunk bias, a 65x70 weight (72 chunks: more than one post) and labels."""
    g = torch.Generator().manual_seed(seed)
    return {
        "w0": torch.randn(65, 70, generator=g, dtype=torch.float32),
        "b0": torch.randn(1, 5, generator=g, dtype=torch.float32),
        "y": torch.randint(0, 10, (1, 130), generator=g),
    }


def roots_with(state: dict[str, torch.Tensor], at: int, n: int = 5) -> list[bytes]:
    roots = [bytes([0x40 + i]) * 32 for i in range(n)]
    roots[at] = merkle.state_root(list(state.items()))
    return roots


def events(answer, unit_id: int = 7) -> list[dict]:
    """DataPosted event args as the chain emits them (names of the ABI)."""
    return [
        {
            "unitId": unit_id,
            "tensor": p.tensor,
            "nameHash": p.name_hash,
            "dtype": p.dtype,
            "rows": p.rows,
            "cols": p.cols,
            "firstChunk": p.first_chunk,
            "chunks": p.chunks,
        }
        for p in answer.posts
    ]


def test_round_trip_of_a_state_whose_large_tensor_takes_several_posts():
    state = small_state()
    roots = roots_with(state, 3)
    answer = encode_answer(state, roots, 3)
    assert answer.state_root == roots[3]
    assert answer.open_state.tensor_count == 3
    # the opening proves the state root in the checkpoint list, as openDataState checks
    opened = merkle.keccak256(merkle.STATE_DOMAIN + merkle.u256(3) + answer.open_state.state_tree)
    assert opened == roots[3]
    proof = merkle.ListProof(3, opened, answer.open_state.checkpoint_proof)
    assert merkle.verify_list_proof(
        merkle.CHECKPOINT_DOMAIN, merkle.checkpoint_root(roots), len(roots), proof
    )
    # 65 x 70 = 4,550 elements = 72 chunks: 64 then 8; b0 and y one post each
    assert [(p.tensor, p.first_chunk, len(p.chunks) // 256) for p in answer.posts] == [
        (0, 0, 64),
        (0, 64, 8),
        (1, 0, 1),
        (2, 0, 3),
    ]
    assert all(len(p.chunks) // 256 <= MAX_DATA_CHUNKS for p in answer.posts)
    for p in answer.posts:  # each post's range proof holds against its data root
        rp = merkle.RangeProof(
            p.first_chunk,
            [p.chunks[i : i + 256] for i in range(0, len(p.chunks), 256)],
            p.range_proof,
            merkle.depth_for(-(-(p.rows * p.cols) // 64)),
        )
        assert merkle.verify_range_proof(p.data_root, p.rows * p.cols, rp)
    rebuilt = decode_answer(events(answer), list(state), answer.state_root)
    assert list(rebuilt) == list(state)
    for name, t in state.items():
        assert torch.equal(rebuilt[name], t)
    assert rebuilt["w0"].dtype == torch.float32
    # unitId, TensorHeader(nameHash, dtype, rows, cols, dataRoot), entryProof, firstChunk, chunks,
    # rangeProof
    first = answer.posts[0]
    assert first.args(9) == (
        9, first.header(), first.entry_proof, 0, first.chunks, first.range_proof
    )  # fmt: skip
    assert first.header() == (first.name_hash, first.dtype, first.rows, first.cols, first.data_root)
    assert answer.open_state.args(9) == (9, 3, answer.open_state.state_tree, proof.siblings)


def test_smaller_posts_and_snake_case_args():
    state = small_state(1)
    answer = encode_answer(list(state.items()), roots_with(state, 0), 0, max_chunks=5)
    assert max(len(p.chunks) // 256 for p in answer.posts) == 5
    snake = [
        {**dataclasses.asdict(p), "chunks": p.chunks} for p in answer.posts
    ]  # name_hash, first_chunk: the dataclass's own names
    assert torch.equal(decode_answer(snake, list(state), answer.state_root)["y"], state["y"])


def test_a_tampered_chunk_is_refused():
    state = small_state()
    answer = encode_answer(state, roots_with(state, 4), 4)
    evs = events(answer)
    chunk = bytearray(evs[1]["chunks"])
    chunk[3] ^= 1
    evs[1]["chunks"] = bytes(chunk)
    with pytest.raises(DataMismatch, match="state root"):
        decode_answer(evs, list(state), answer.state_root)


def test_gaps_repeats_names_and_missing_tensors_are_refused():
    state = small_state()
    answer = encode_answer(state, roots_with(state, 4), 4)
    names = list(state)
    evs = events(answer)
    with pytest.raises(DataMismatch, match="expected"):
        decode_answer(evs[1:], names, answer.state_root)  # chunk 64 first
    with pytest.raises(DataMismatch, match="expected"):
        decode_answer([evs[0], evs[0], *evs[1:]], names, answer.state_root)
    with pytest.raises(DataMismatch, match="not posted"):
        decode_answer(evs[:-1], names, answer.state_root)
    with pytest.raises(DataMismatch, match="name hash"):
        decode_answer(evs, ["w1", "b0", "y"], answer.state_root)
    with pytest.raises(DataMismatch, match="state root"):
        decode_answer(evs, names, b"\x01" * 32)


def test_a_state_that_is_not_the_committed_one_is_refused():
    state = small_state()
    with pytest.raises(ValueError, match="committed root"):
        encode_answer(state, roots_with(small_state(2), 1), 1)
    with pytest.raises(ValueError, match="max_chunks"):
        encode_answer(state, roots_with(state, 1), 1, max_chunks=65)
