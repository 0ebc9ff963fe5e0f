// SPDX-License-Identifier: MIT
pragma solidity 0.8.37;

import {Positions} from "./Positions.sol";

/// @title DisputeMerkle — the PROTOCOL §3 commitments a dispute game builds and opens
/// @notice Root lists (build from values, verify one entry), tensor roots and leaf paths.
///         Domains are those of PROTOCOL §3 plus the three of §7 (`STEPS`, `GRAPH`,
///         `STATE_CONFIG`) and the units list of an aggregation claim (`UNITS`, §6.9).
library DisputeMerkle {
    bytes32 internal constant TENSOR_DOMAIN = keccak256("vtp.tensor.v1");
    bytes32 internal constant STATE_DOMAIN = keccak256("vtp.state.v1");
    bytes32 internal constant CHECKPOINT_DOMAIN = keccak256("vtp.checkpoints.v1");
    bytes32 internal constant TRACE_DOMAIN = keccak256("vtp.trace.v1");
    bytes32 internal constant DATASET_DOMAIN = keccak256("vtp.dataset.v1");
    bytes32 internal constant STEPS_DOMAIN = keccak256("vtp.steps.v1");
    bytes32 internal constant GRAPH_DOMAIN = keccak256("vtp.graph.v1");
    bytes32 internal constant STATE_CONFIG_DOMAIN = keccak256("vtp.stateconfig.v1");
    /// @notice The units list of an aggregation claim: the round's S unit final state roots.
    bytes32 internal constant UNITS_DOMAIN = keccak256("vtp.units.v1");

    /// @notice keccak256(a ‖ b) in scratch space.
    function hashPair(bytes32 a, bytes32 b) internal pure returns (bytes32 h) {
        assembly ("memory-safe") {
            mstore(0x00, a)
            mstore(0x20, b)
            h := keccak256(0x00, 0x40)
        }
    }

    /// @notice Root of the padded binary tree over `leaves`.
    /// @dev Hashes level by level in place in a zero-padded copy (assembly: the pairs are
    ///      adjacent words, so each parent is keccak256 of 64 bytes read where they lie; a
    ///      Solidity loop with bounds checks cost ~1.5 k gas per list entry, bench §7.7).
    function treeRoot(bytes32[] memory leaves) internal pure returns (bytes32 root) {
        uint256 n = leaves.length;
        uint256 width = uint256(1) << Positions.depth(n);
        bytes32[] memory level = new bytes32[](width);
        assembly ("memory-safe") {
            let src := add(leaves, 0x20)
            let dst := add(level, 0x20)
            for { let i := 0 } lt(i, n) { i := add(i, 1) } {
                mstore(add(dst, shl(5, i)), mload(add(src, shl(5, i))))
            }
            for {} gt(width, 1) {} {
                width := shr(1, width)
                for { let i := 0 } lt(i, width) { i := add(i, 1) } {
                    mstore(add(dst, shl(5, i)), keccak256(add(dst, shl(6, i)), 0x40))
                }
            }
            root := mload(dst)
        }
    }

    /// @notice Root of the padded tree over calldata leaves.
    function treeRootCalldata(bytes32[] calldata leaves) internal pure returns (bytes32) {
        return treeRoot(leaves);
    }

    /// @notice Hash of entry `i` of a root list under `domain`: keccak256(abi.encode(domain, i,
    ///         value)), hashed past the free memory pointer without allocating.
    function listLeaf(bytes32 domain, uint256 i, bytes32 value) internal pure returns (bytes32 h) {
        assembly ("memory-safe") {
            let ptr := mload(0x40)
            mstore(ptr, domain)
            mstore(add(ptr, 0x20), i)
            mstore(add(ptr, 0x40), value)
            h := keccak256(ptr, 0x60)
        }
    }

    /// @notice Commitment of a root list of `n` values whose tree root is `root`.
    function listCommit(bytes32 domain, uint256 n, bytes32 root) internal pure returns (bytes32) {
        return keccak256(abi.encode(domain, n, root));
    }

    /// @notice Root list commitment of `values` under `domain`.
    function rootList(bytes32 domain, bytes32[] memory values) internal pure returns (bytes32) {
        bytes32[] memory leaves = new bytes32[](values.length);
        for (uint256 i = 0; i < values.length; ++i) {
            leaves[i] = listLeaf(domain, i, values[i]);
        }
        return listCommit(domain, values.length, treeRoot(leaves));
    }

    /// @notice Folds a leaf up its path (siblings bottom-up; the index bits choose the side).
    function fold(bytes32 leaf, uint256 index, bytes32[] calldata siblings)
        internal
        pure
        returns (bytes32 h)
    {
        h = leaf;
        for (uint256 i = 0; i < siblings.length; ++i) {
            h = (index & 1) == 1 ? hashPair(siblings[i], h) : hashPair(h, siblings[i]);
            index >>= 1;
        }
    }

    /// @notice Whether `value` is entry `index` of the `n`-entry root list `commit`.
    function verifyListEntry(
        bytes32 commit,
        bytes32 domain,
        uint256 n,
        uint256 index,
        bytes32 value,
        bytes32[] calldata siblings
    ) internal pure returns (bool) {
        if (index >= n) return false;
        if (siblings.length != Positions.depth(n)) return false;
        bytes32 root = fold(listLeaf(domain, index, value), index, siblings);
        return listCommit(domain, n, root) == commit;
    }

    /// @notice Whether `leaf` is leaf `index` of a `numLeaves`-leaf tree with root `root`.
    function verifyLeaf(
        bytes32 root,
        uint256 numLeaves,
        uint256 index,
        bytes32 leaf,
        bytes32[] calldata siblings
    ) internal pure returns (bool) {
        if (index >= numLeaves) return false;
        if (siblings.length != Positions.depth(numLeaves)) return false;
        return fold(leaf, index, siblings) == root;
    }

    /// @notice Tensor root of PROTOCOL §3.
    function tensorRoot(uint256 dtype, uint256 rows, uint256 cols, bytes32 dataRoot)
        internal
        pure
        returns (bytes32)
    {
        return keccak256(abi.encode(TENSOR_DOMAIN, dtype, rows, cols, dataRoot));
    }

    /// @notice Entry of the dispute config's state list: tensor `nameHash`, produced by `node`.
    function stateConfigEntry(bytes32 nameHash, uint256 node) internal pure returns (bytes32) {
        return hashPair(nameHash, bytes32(node)); // keccak256(abi.encode(nameHash, node))
    }

    /// @notice State-list value of tensor `nameHash` with root `root`.
    function stateEntry(bytes32 nameHash, bytes32 root) internal pure returns (bytes32) {
        return hashPair(nameHash, root); // keccak256(abi.encode(nameHash, root))
    }
}
