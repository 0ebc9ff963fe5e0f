// SPDX-License-Identifier: MIT
pragma solidity 0.8.37;

import {IJobManager, DATA_OPEN_PART} from "../interfaces/IJobManager.sol";
import {TensorMerkle} from "./TensorMerkle.sol";

/// @title DataRequests — the proofs of a data request's answer (docs/PROTOCOL.md §6.11)
/// @notice A data request is answered by proof that the requested state is held, at a cost
///         bounded whatever the state's size: its state root proved against the checkpoint root
///         (`stateHolds`), its tensor headers opened part by part, each part's subtree proved
///         under the state tree (`partTrees`, `rootFromPart`), which fixes the state's layout
///         (each tensor's first global chunk and chunk count, in state order, as a tree of
///         `layoutLeaf`s), then `DATA_SAMPLES` chunks drawn uniformly over the whole state by a
///         block hash (`sampleIndex`), each proved in the layout and under its tensor's data root
///         (`sampleHolds`).
/// @dev Gas: a header part of p ≤ 256 tensors hashes 4 words per tensor and ~2p tree nodes; a
///      sample hashes its 256-byte chunk, ⌈log2 T⌉ layout and ⌈log2 L⌉ data-tree nodes (T
///      tensors, L the tensor's chunks). Calldata dominates: ~160 bytes a header, ~0.3 + 32·(log2 T
///      + log2 L) / 1,000 KiB a sample.
library DataRequests {
    /// @notice keccak256("vtp.layout.v1"): the domain of the layout's leaves.
    bytes32 internal constant LAYOUT_DOMAIN = keccak256("vtp.layout.v1");
    /// @notice log2(DATA_OPEN_PART): the depth of one part's subtree.
    uint256 internal constant PART_DEPTH = 8;

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

    /// @notice The depth of one part's subtree: the whole tree's for a state of at most
    ///         `DATA_OPEN_PART` tensors, else `PART_DEPTH`.
    function partDepth(uint256 tensorCount) internal pure returns (uint256) {
        return tensorCount <= DATA_OPEN_PART ? TensorMerkle.depthFor(tensorCount) : PART_DEPTH;
    }

    /// @notice The layout's leaf of tensor `tensor`: its first global chunk `start`, its chunk
    ///         count `leaves` and its data root.
    function layoutLeaf(uint256 tensor, uint256 start, uint256 leaves, bytes32 dataRoot)
        internal
        pure
        returns (bytes32)
    {
        return keccak256(abi.encode(LAYOUT_DOMAIN, tensor, start, leaves, dataRoot));
    }

    /// @notice The subtrees of `depth` (zero-padded, §3) that the headers of tensors
    ///         `firstTensor`, … make in the state tree and in the layout tree, the first of them
    ///         starting at global chunk `start`; `end` is the chunk after the last one.
    function partTrees(
        IJobManager.TensorHeader[] calldata headers,
        uint256 firstTensor,
        uint256 start,
        uint256 depth
    ) internal pure returns (bytes32 stateTree, bytes32 layoutTree, uint256 end) {
        uint256 width = uint256(1) << depth;
        bytes32[] memory states = new bytes32[](width); // zero-initialised padding
        bytes32[] memory layouts = new bytes32[](width);
        end = start;
        for (uint256 i = 0; i < headers.length; ++i) {
            IJobManager.TensorHeader calldata h = headers[i];
            bytes32 entry = keccak256(
                abi.encode(h.nameHash, TensorMerkle.tensorRoot(h.dtype, h.rows, h.cols, h.dataRoot))
            );
            states[i] = TensorMerkle.listLeaf(TensorMerkle.STATE_DOMAIN, firstTensor + i, entry);
            // rows, cols < 2^32: no overflow; an empty tensor has no leaf and is never committed
            uint256 leaves = TensorMerkle.leafCount(uint256(h.rows) * h.cols);
            layouts[i] = layoutLeaf(firstTensor + i, end, leaves, h.dataRoot);
            end += leaves;
        }
        stateTree = _reduce(states, width);
        layoutTree = _reduce(layouts, width);
    }

    /// @notice The root of the tree that places subtree `subtree` at index `part` among the
    ///         subtrees of its depth, with `siblings` bottom-up (none: it is the root).
    function rootFromPart(bytes32 subtree, uint256 part, bytes32[] calldata siblings)
        internal
        pure
        returns (bytes32)
    {
        return TensorMerkle.rootFromPath(subtree, part, siblings);
    }

    /// @notice The root of a tree of `depth` levels over `subtrees` (in order), padded with the
    ///         all-zero subtree of `PART_DEPTH` (§3 padding: zero leaves under every missing one).
    function combineParts(bytes32[] memory subtrees, uint256 depth) internal pure returns (bytes32) {
        bytes32 pad = bytes32(0);
        for (uint256 l = 0; l < PART_DEPTH; ++l) {
            pad = TensorMerkle.hashPair(pad, pad);
        }
        uint256 width = uint256(1) << depth;
        bytes32[] memory level = new bytes32[](width);
        for (uint256 i = 0; i < width; ++i) {
            level[i] = i < subtrees.length ? subtrees[i] : pad;
        }
        return _reduce(level, width);
    }

    /// @notice Sample `j`'s global chunk: `uint256(keccak256(abi.encode(seed, j))) mod totalLeaves`.
    function sampleIndex(bytes32 seed, uint256 j, uint256 totalLeaves) internal pure returns (uint256) {
        return uint256(keccak256(abi.encode(seed, j))) % totalLeaves;
    }

    /// @notice Whether sample `s` names a tensor of the layout `layoutRoot` (of `tensorCount`
    ///         tensors) with its start, chunk count and data root.
    function layoutHolds(bytes32 layoutRoot, uint256 tensorCount, IJobManager.DataSample calldata s)
        internal
        pure
        returns (bool)
    {
        if (s.tensor >= tensorCount) return false;
        if (s.layoutProof.length != TensorMerkle.depthFor(tensorCount)) return false;
        bytes32 leaf = layoutLeaf(s.tensor, s.start, s.leaves, s.dataRoot);
        return TensorMerkle.rootFromPath(leaf, s.tensor, s.layoutProof) == layoutRoot;
    }

    /// @notice Whether sample `s`'s chunk is leaf `leaf` of its tensor's data tree.
    function chunkHolds(IJobManager.DataSample calldata s, uint256 leaf) internal pure returns (bool) {
        if (s.chunk.length != TensorMerkle.LEAF_BYTES) return false;
        if (s.chunkProof.length != TensorMerkle.depthFor(s.leaves)) return false;
        bytes32 h = keccak256(s.chunk);
        return TensorMerkle.rootFromPath(h, leaf, s.chunkProof) == s.dataRoot;
    }

    /// @dev Reduces `level` (of `width`, a power of two, leaves) to its root, in place.
    function _reduce(bytes32[] memory level, uint256 width) private pure returns (bytes32) {
        while (width > 1) {
            width >>= 1;
            for (uint256 i = 0; i < width; ++i) {
                level[i] = TensorMerkle.hashPair(level[2 * i], level[2 * i + 1]);
            }
        }
        return level[0];
    }
}
