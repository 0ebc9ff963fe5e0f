// SPDX-License-Identifier: MIT
pragma solidity 0.8.37;

import {TensorMerkle} from "./TensorMerkle.sol";

/// @title DataRequests — the proofs of a data request's answer (docs/PROTOCOL.md §6.11)
/// @notice A data request makes the solver (or anyone holding the data) post one checkpoint's
///         whole state on chain: first its state root, proved against the checkpoint root
///         (`stateHolds`), then each tensor's 256-byte chunks in state order, at most
///         `MAX_DATA_CHUNKS` per call, each call proving its tensor's entry in the state root
///         (`entryHolds`) and its chunks against the tensor's data root (`rangeHolds`).
/// @dev Gas per post is bounded whatever the tensor's size: with c ≤ 64 chunks, a state of n
///      tensors and a tensor of L leaves, a post hashes c chunks (c · 256 bytes, ≈ 2.1 k gas for
///      64 chunks), at most c + 2·ceil(log2 L) nodes for the range (a 2^32-leaf tensor: ≤ 128
///      nodes, ≈ 5 k gas), ceil(log2 n) + 3 hashes for the entry, and copies the chunks once
///      into memory (16 KiB: ≈ 2 k gas of expansion); calldata (16 gas a byte, ≈ 262 k for
///      16 KiB) and the event's data (8 gas a byte, ≈ 131 k) dominate. The entry is proved
///      again by every post of a large tensor (a few hundred gas) rather than stored (a 20 k
///      slot), so a post writes one storage slot (the cursor) whatever it carries.
library DataRequests {
    /// @notice The state root of `tensorCount` tensors whose padded tree of list leaves has root
    ///         `stateTree` (§3): `keccak256(abi.encode(STATE_DOMAIN, tensorCount, stateTree))`.
    function stateRootOf(uint256 tensorCount, bytes32 stateTree) internal pure returns (bytes32) {
        return TensorMerkle.listRoot(TensorMerkle.STATE_DOMAIN, tensorCount, stateTree);
    }

    /// @notice Whether `stateRoot` is entry `checkpoint` of the `numCheckpoints`-entry checkpoint
    ///         root `checkpointRoot` (root-list proof `proof`, siblings bottom-up).
    function stateHolds(
        bytes32 checkpointRoot,
        uint256 numCheckpoints,
        uint256 checkpoint,
        bytes32 stateRoot,
        bytes32[] calldata proof
    ) internal pure returns (bool) {
        return TensorMerkle.verifyListEntry(
            checkpointRoot, TensorMerkle.CHECKPOINT_DOMAIN, numCheckpoints, checkpoint, stateRoot, proof
        );
    }

    /// @notice The state-list value of the tensor (`nameHash`, `dtype`, `rows`, `cols`, `dataRoot`):
    ///         `keccak256(abi.encode(nameHash, tensorRoot(dtype, rows, cols, dataRoot)))`.
    function entryOf(bytes32 nameHash, uint256 dtype, uint256 rows, uint256 cols, bytes32 dataRoot)
        internal
        pure
        returns (bytes32)
    {
        return keccak256(abi.encode(nameHash, TensorMerkle.tensorRoot(dtype, rows, cols, dataRoot)));
    }

    /// @notice Whether `entry` (`entryOf` a tensor) is entry `tensor` of the `tensorCount`-entry
    ///         state root `stateRoot`.
    function entryHolds(bytes32 stateRoot, uint256 tensorCount, uint256 tensor, bytes32 entry, bytes32[] calldata proof)
        internal
        pure
        returns (bool)
    {
        return TensorMerkle.verifyListEntry(stateRoot, TensorMerkle.STATE_DOMAIN, tensorCount, tensor, entry, proof);
    }

    /// @notice Whether `chunks` (whole 256-byte chunks, checked by the caller) are leaves
    ///         `firstChunk`, … of the data tree of `leafCount` leaves with root `dataRoot`
    ///         (§3 range proof `proof`). The caller checks the range lies within the leaves.
    function rangeHolds(
        bytes32 dataRoot,
        uint256 leaves,
        uint256 firstChunk,
        bytes calldata chunks,
        bytes32[] calldata proof
    ) internal pure returns (bool) {
        (bool ok, bytes32 root) = TensorMerkle.rangeRoot(firstChunk, chunks, proof, TensorMerkle.depthFor(leaves));
        return ok && root == dataRoot;
    }

    /// @notice The tensor's leaf count: `ceil(rows · cols / 64)` (at most 2^58: no overflow).
    function leafCount(uint256 rows, uint256 cols) internal pure returns (uint256) {
        return TensorMerkle.leafCount(rows * cols);
    }
}
