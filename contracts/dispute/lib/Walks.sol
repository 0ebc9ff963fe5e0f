// SPDX-License-Identifier: MIT
pragma solidity 0.8.37;

import {DisputeMerkle} from "./DisputeMerkle.sol";

/// @title Walks — the subtree walk down a large tree: a tensor's leaves or a trace's entries
/// @notice A tensor's leaf hashes form a padded binary tree (PROTOCOL §3). Up to `POST_LEAVES`
///         leaves are posted whole (`postLeaves`); above that the defender posts, each round, the
///         2^m nodes m = min(STRIDE, h) levels below the disputed subtree's root of height h, and
///         the challenger names one of them, until a leaf is named. A step's trace list (a root
///         list, §3) of more than `POST_LEAVES` nodes is walked the same way (`postTraceRoot`,
///         PROTOCOL §7.3), except that its last round posts the entries themselves (the nodes'
///         output roots) rather than their list leaves (`entriesRoot`), so that the challenger
///         learns the values it must open.
/// @dev Gas: a round posts at most 2^STRIDE = 64 hashes (2 KiB of calldata) and hashes 63 pairs,
///      both moves check the nodes against the subtree root, so every move is bounded whatever
///      the tensor's size; a tree of height D takes ceil(D / 6) rounds (4 for 2^24 leaves).
library Walks {
    /// @notice The most leaves `postLeaves` takes (a 64-leaf tree has height 6 = STRIDE).
    uint256 internal constant POST_LEAVES = 64;
    /// @notice Levels a round descends.
    uint256 internal constant STRIDE = 6;

    /// @notice Levels the next round descends from a subtree of height `height`.
    function stride(uint256 height) internal pure returns (uint256) {
        return height < STRIDE ? height : STRIDE;
    }

    /// @notice Root of the complete subtree whose level `stride(height)` below it is `nodes`.
    function rootOf(bytes32[] calldata nodes) internal pure returns (bytes32) {
        return DisputeMerkle.treeRootCalldata(nodes);
    }

    /// @notice Root of the complete subtree over root-list entries `first` … `first + len - 1`
    ///         of an `n`-entry list under `domain` whose values are `values`: entries past the
    ///         list's end are padding, whose leaves are zero whatever value is posted for them.
    function entriesRoot(bytes32 domain, bytes32[] calldata values, uint256 first, uint256 n)
        internal
        pure
        returns (bytes32)
    {
        bytes32[] memory leaves = new bytes32[](values.length);
        for (uint256 j = 0; j < values.length; ++j) {
            uint256 i = first + j;
            if (i < n) leaves[j] = DisputeMerkle.listLeaf(domain, i, values[j]);
        }
        return DisputeMerkle.treeRoot(leaves);
    }
}
