"""Malformed arguments revert with the documented custom errors (and their arguments)."""

from __future__ import annotations

import ape
import pytest

ONE = 0x3F800000


@pytest.mark.parametrize("fn", ["addMany", "subMany", "mulMany", "divMany", "dot"])
def test_float32_harness_length_mismatch(f32h, fn: str) -> None:
    with ape.reverts(f32h.LengthMismatch, lengthA=2, lengthB=3):
        getattr(f32h, fn)([ONE, ONE], [ONE, ONE, ONE])
    with ape.reverts(f32h.LengthMismatch, lengthA=1, lengthB=0):
        getattr(f32h, fn)([ONE], [])


def test_float32_harness_selectors(f32h) -> None:
    with ape.reverts(f32h.UnknownOp, op=12):
        f32h.binaryMany(12, [ONE], [ONE])
    with ape.reverts(f32h.UnknownOp, op=12):
        f32h.unaryMany(12, [ONE])
    with ape.reverts(f32h.UnknownOp, op=4):
        f32h.gasOfMany(4, [ONE], [ONE])
    with ape.reverts(f32h.UnknownOp, op=12):
        f32h.gasOfMany(12, [ONE], [ONE])
    with ape.reverts(f32h.UnknownOp, op=8):
        f32h.gasOfUnaryMany(8, [ONE])
    with ape.reverts(f32h.UnknownOp, op=12):
        f32h.gasOfUnaryMany(12, [ONE])
    with ape.reverts(f32h.LengthMismatch, lengthA=1, lengthB=2):
        f32h.binaryMany(0, [ONE], [ONE, ONE])


def test_empty_inputs_are_fine_where_defined(f32h, ops_h) -> None:
    assert list(f32h.addMany([], [])) == []
    assert f32h.dot([], []) == 0  # +0.0: the sum's initial value
    assert ops_h.rowSum([]) == 0


def test_repops_errors(ops_h) -> None:
    with ape.reverts(ops_h.LengthMismatch, lengthA=1, lengthB=2):
        ops_h.dot([ONE], [ONE, ONE])
    with ape.reverts(ops_h.LengthMismatch, lengthA=3, lengthB=1):
        ops_h.average([ONE, ONE, ONE], [ONE])
    with ape.reverts(ops_h.LengthMismatch, lengthA=2, lengthB=1):
        ops_h.momentumMany(ONE, [ONE, ONE], [ONE])
    with ape.reverts(ops_h.LengthMismatch, lengthA=1, lengthB=2):
        ops_h.sgdMany(ONE, [ONE], [ONE, ONE])
    with ape.reverts(ops_h.LengthMismatch, lengthA=1, lengthB=0):
        ops_h.binaryMany(0, [ONE], [])
    with ape.reverts(ops_h.LengthMismatch, lengthA=3, lengthB=2):
        ops_h.matmulNt([ONE] * 3, [ONE] * 2, 2)
    with ape.reverts(ops_h.UnknownOp, op=5):
        ops_h.unaryMany(5, [ONE])
    with ape.reverts(ops_h.UnknownOp, op=5):
        ops_h.gasOfUnaryMany(5, [ONE])
    with ape.reverts(ops_h.UnknownOp, op=5):
        ops_h.binaryMany(5, [ONE], [ONE])
    with ape.reverts(ops_h.EmptyRow):
        ops_h.rowMax([])
    with ape.reverts(ops_h.EmptyRow):
        ops_h.mean([])
    with ape.reverts(ops_h.EmptyDataset):
        ops_h.batchIndex(1, 2, 3, 0)
    with ape.reverts(ops_h.InvalidShard, shards=3, shard=3):
        ops_h.shardBatchIndices(1, 2, 3, 10, 3, 3)
    with ape.reverts(ops_h.InvalidShard, shards=0, shard=0):
        ops_h.shardBatchIndices(1, 2, 3, 10, 0, 0)
    with ape.reverts(ops_h.EmptyDataset):  # shard 4 of 6 over 4 examples has none
        ops_h.shardBatchIndices(1, 2, 3, 4, 6, 4)


def test_merkle_errors(ops_h) -> None:
    chunk = bytes(256)
    with ape.reverts(ops_h.BadChunkLength, length=255):
        ops_h.leafHash(bytes(255))
    with ape.reverts(ops_h.PositionOutOfRange, position=64, limit=64):
        ops_h.elementAt(chunk, 64)
    with ape.reverts(ops_h.BadChunkLength, length=8):
        ops_h.elementAt(bytes(8), 2)
    with ape.reverts(ops_h.PositionOutOfRange, position=6, limit=6):
        ops_h.verifyElement(bytes(32), 1, 2, 3, 6, chunk, [])
    with ape.reverts(ops_h.EmptyCommitment):
        ops_h.verifyElement(bytes(32), 1, 0, 3, 0, chunk, [])
    with ape.reverts(ops_h.BadChunkLength, length=300):
        ops_h.verifyRange(bytes(32), 1, 1, 64, 0, bytes(300), [])
    with ape.reverts(ops_h.EmptyCommitment):
        ops_h.verifyListEntry(bytes(32), bytes(32), 0, 0, bytes(32), [])
    with ape.reverts(ops_h.EmptyCommitment):
        ops_h.listRootOf(bytes(32), [])
    # a wrong-length chunk in a leaf proof is an argument error, a wrong proof just fails
    with ape.reverts(ops_h.BadChunkLength, length=64):
        ops_h.verifyLeaf(bytes(32), 10, 0, bytes(64), [])
    assert not ops_h.verifyLeaf(bytes(32), 10, 1, chunk, [])
