// SPDX-License-Identifier: MIT
pragma solidity 0.8.37;

import {IOneStepProver} from "../interfaces/IOneStepProver.sol";
import {Operand, Opening, ProofContext} from "./DisputeTypes.sol";
import {DisputeMerkle} from "./DisputeMerkle.sol";
import {OpCodes} from "./OpCodes.sol";
import {Positions} from "./Positions.sol";

/// @title Openings — verifying an input tensor's opening and reading its opened elements
/// @notice Shared by both provers (version-1 nodes and version-3 graph nodes). An opening names
///         the tensor's root, proves it is in the list its kind says (state S_t, the op trace
///         before the disputed node, the dataset, or — for a constant — the descriptor itself),
///         gives the data root behind it and some 256-byte leaves with their Merkle paths.
///         `operand` is the tensor as committed: its 2-D view (rows, cols) and dtype (§3).
/// @dev Gas: one keccak per list level and per leaf level of each opened chunk; reading an
///      element scans the opening's chunk list (a proof opens a handful of chunks per input).
library Openings {
    /// @dev Reverts `BadOpening(k)` unless opening `o` of input `k` verifies (see the title).
    ///      Kinds without a tensor to open (the on-chain batch indices, a hyper-parameter word,
    ///      the step input) are checked by their callers and skipped here.
    function verify(ProofContext calldata ctx, Operand memory operand, Opening calldata o, uint256 k)
        internal
        pure
    {
        uint8 kind = operand.kind;
        if (kind == OpCodes.KIND_BATCH || kind == OpCodes.KIND_WORD || kind == OpCodes.KIND_STEP) return;
        if (!_inList(ctx, operand, o)) revert IOneStepProver.BadOpening(k);
        _verifyChunks(operand, o, k);
    }

    /// @dev The opening's tensor root is the operand's header over its data root, and every
    ///      chunk is a leaf of that data root.
    function _verifyChunks(Operand memory operand, Opening calldata o, uint256 k) private pure {
        bytes32 root = DisputeMerkle.tensorRoot(operand.dtype, operand.rows, operand.cols, o.dataRoot);
        if (root != o.tensorRoot) revert IOneStepProver.BadOpening(k);
        uint256 numLeaves = Positions.leafCount(uint256(operand.rows) * operand.cols);
        for (uint256 i = 0; i < o.chunks.length; ++i) {
            bytes calldata data = o.chunks[i].data;
            if (data.length != Positions.LEAF_BYTES) revert IOneStepProver.BadOpening(k);
            bytes32 leafHash = keccak256(data);
            uint256 leaf = o.chunks[i].leaf;
            if (!DisputeMerkle.verifyLeaf(o.dataRoot, numLeaves, leaf, leafHash, o.chunks[i].siblings)) {
                revert IOneStepProver.BadOpening(k);
            }
        }
    }

    /// @dev The words before the siblings in the list proof of a KIND_UNITS opening: the unit's
    ///      final state root, its tensor count, the tensor's rows (its 2-D view, §2.7) and the
    ///      unit's shard s. The roots commit each of them (a root list commits its count, a
    ///      tensor root its shape), so a wrong word fails the proofs.
    uint256 internal constant UNIT_WORDS = 4;

    /// @dev Element `e` (row-major) of input `k` from its opened chunks; reverts
    ///      `ElementNotOpened(k, e)` when no opened chunk holds it.
    function word(Opening calldata o, uint256 k, uint256 e) internal pure returns (uint32) {
        uint256 at = chunkIndex(o, e / Positions.LEAF_ELEMS, k, e);
        return Positions.word(o.chunks[at].data, e % Positions.LEAF_ELEMS);
    }

    /// @dev The position in `o.chunks` of leaf `leaf` (element `e` of input `k`, for the error).
    function chunkIndex(Opening calldata o, uint256 leaf, uint256 k, uint256 e) internal pure returns (uint256) {
        uint256 n = o.chunks.length;
        for (uint256 i = 0; i < n; ++i) {
            if (o.chunks[i].leaf == leaf) return i;
        }
        revert IOneStepProver.ElementNotOpened(k, e);
    }

    function _inList(ProofContext calldata ctx, Operand memory operand, Opening calldata o)
        private
        pure
        returns (bool)
    {
        uint8 kind = operand.kind;
        if (kind == OpCodes.KIND_UNITS) return _inUnits(ctx, operand, o);
        if (kind == OpCodes.KIND_STATE) {
            bytes32 entry = DisputeMerkle.stateEntry(operand.name, o.tensorRoot);
            return DisputeMerkle.verifyListEntry(
                ctx.stateRoot, DisputeMerkle.STATE_DOMAIN, ctx.numState, operand.index, entry, o.listProof
            );
        }
        if (kind == OpCodes.KIND_NODE) {
            // INVARIANT: a node reads only earlier nodes, so the defender's own claim about the
            // disputed node (or a later one) can never be an agreed input of its proof.
            if (operand.index >= ctx.node) return false;
            return DisputeMerkle.verifyListEntry(
                ctx.traceRoot, DisputeMerkle.TRACE_DOMAIN, ctx.numNodes, operand.index, o.tensorRoot, o.listProof
            );
        }
        if (kind == OpCodes.KIND_CONST) return o.tensorRoot == operand.name;
        (uint256 index, uint256 entries) = _datasetEntry(kind);
        if (entries == 0) return false;
        return DisputeMerkle.verifyListEntry(
            ctx.datasetRoot, DisputeMerkle.DATASET_DOMAIN, entries, index, o.tensorRoot, o.listProof
        );
    }

    /// @dev Row s of an aggregation's unit stack (operand header (S, numel)): the opening's list
    ///      proof is [unit root F_s, its tensor count n, rows, s, the depth(S) siblings of entry
    ///      s of the units list `ctx.datasetRoot`, the depth(n) siblings of the tensor's entry
    ///      `index` in F_s], and its chunks are leaves of that unit's tensor. On success the
    ///      operand becomes that tensor as committed, its `index` the shard s (read by `word`'s
    ///      caller to check each element's row).
    function _inUnits(ProofContext calldata ctx, Operand memory operand, Opening calldata o)
        private
        pure
        returns (bool)
    {
        bytes32[] calldata p = o.listProof;
        if (p.length < UNIT_WORDS) return false;
        uint256 n = uint256(p[1]);
        uint256 rows = uint256(p[2]);
        // n, rows and s are bound by the roots below; the bounds keep the arithmetic exact.
        if (rows == 0 || rows > type(uint32).max || operand.cols % rows != 0) return false;
        if (n > type(uint32).max) return false;
        uint256 outer = UNIT_WORDS + Positions.depth(operand.rows);
        if (p.length != outer + Positions.depth(n)) return false;
        if (!_unitInList(ctx.datasetRoot, operand.rows, p, outer)) return false;
        bytes32 entry = DisputeMerkle.stateEntry(operand.name, o.tensorRoot);
        if (!DisputeMerkle.verifyListEntry(p[0], DisputeMerkle.STATE_DOMAIN, n, operand.index, entry, p[outer:])) {
            return false;
        }
        operand.index = uint32(uint256(p[3])); // s < S (verified in the units list)
        operand.cols = uint32(operand.cols / rows); // numel / rows, before rows is replaced
        operand.rows = uint32(rows);
        return true;
    }

    /// @dev The unit root p[0] is entry s = p[3] of the units list `units` of `shards` entries,
    ///      by the siblings p[UNIT_WORDS:outer].
    function _unitInList(bytes32 units, uint256 shards, bytes32[] calldata p, uint256 outer)
        private
        pure
        returns (bool)
    {
        return DisputeMerkle.verifyListEntry(
            units, DisputeMerkle.UNITS_DOMAIN, shards, uint256(p[3]), p[0], p[UNIT_WORDS:outer]
        );
    }

    /// @dev Which entry of the dataset root list a dataset kind opens, of how many: X and Y of a
    ///      classification dataset are entries 0 and 1 of 2 (§4.2); a token stream is entry 0 of
    ///      1 (§4.3). (0, 0) for a kind that is not a dataset's.
    function _datasetEntry(uint8 kind) private pure returns (uint256 index, uint256 entries) {
        if (kind == OpCodes.KIND_DATA_X || kind == OpCodes.KIND_BATCH_X) return (0, 2);
        if (kind == OpCodes.KIND_DATA_Y || kind == OpCodes.KIND_BATCH_Y) return (1, 2);
        if (kind == OpCodes.KIND_WINDOW_X || kind == OpCodes.KIND_WINDOW_Y) return (0, 1);
        return (0, 0);
    }
}
