// SPDX-License-Identifier: MIT
pragma solidity 0.8.37;

import {IRoundManager} from "../interfaces/IRoundManager.sol";
import {Float32} from "./Float32.sol";
import {RepOps} from "./RepOps.sol";
import {TensorMerkle} from "./TensorMerkle.sol";

/// @title AggregationProof — the aggregation node's one-element reference (PROTOCOL §5.1, §6.9)
/// @notice G_{r+1}[n][i] = average(S_{r,0}[n][i], …, S_{r,S−1}[n][i]; w) with
///         w_s = fl(f32(N_s) / f32(N)), N_s = ceil((N − s) / S). The helpers open one element of
///         one state tensor against a state root (state-list entry, then tensor element) and
///         recompute the element with RepOps.average, so a wrong aggregate is caught by one
///         element without replaying anything.
library AggregationProof {
    using Float32 for uint32;

    /// @notice The S aggregation weights as binary32 bits, shard order.
    /// @param numExamples N (> 0).
    /// @param shards S (1 … N).
    /// @return w The weights w_s = fl(fromUint(N_s) / fromUint(N)).
    function weights(uint256 numExamples, uint256 shards) internal pure returns (uint32[] memory w) {
        w = new uint32[](shards);
        uint32 n = Float32.fromUint(numExamples);
        for (uint256 s = 0; s < shards; ++s) {
            // s < shards <= numExamples, so N − s + S − 1 does not underflow
            uint256 size = (numExamples - s + shards - 1) / shards;
            w[s] = Float32.fromUint(size).div(n);
        }
    }

    /// @notice State root (PROTOCOL §3) of float32 tensors with the given names, shapes and data
    ///         roots, in stateLayout order.
    /// @param names keccak256(name) of each tensor.
    /// @param rows Row counts.
    /// @param cols Column counts.
    /// @param dataRoots Data (element tree) roots.
    /// @return The state root.
    function stateRoot(
        bytes32[] calldata names,
        uint32[] calldata rows,
        uint32[] calldata cols,
        bytes32[] calldata dataRoots
    ) internal pure returns (bytes32) {
        uint256 n = names.length;
        bytes32[] memory entries = new bytes32[](n);
        for (uint256 i = 0; i < n; ++i) {
            bytes32 root = TensorMerkle.tensorRoot(TensorMerkle.DTYPE_F32, rows[i], cols[i], dataRoots[i]);
            entries[i] = keccak256(abi.encode(names[i], root));
        }
        return TensorMerkle.listRootOf(TensorMerkle.STATE_DOMAIN, entries);
    }

    /// @notice Opens element `element` (row-major) of float32 state tensor `tensor` of the state
    ///         with root `root` and the given stateLayout: the state-list entry of the opening's tensor
    ///         root under the stateLayout's name, then the element under the stateLayout's shape.
    /// @param root The state root.
    /// @param stateLayout The state tensors' names and shapes (state order).
    /// @param tensor The tensor's state position (< stateLayout length).
    /// @param element The element's index.
    /// @param o The opening.
    /// @return ok Whether both proofs verify.
    /// @return value The element's bits (meaningful only if ok).
    function openElement(
        bytes32 root,
        IRoundManager.StateLayout calldata stateLayout,
        uint256 tensor,
        uint256 element,
        IRoundManager.ElementOpening calldata o
    ) internal pure returns (bool ok, uint32 value) {
        bytes32 entry = keccak256(abi.encode(stateLayout.names[tensor], o.tensorRoot));
        uint256 numState = stateLayout.names.length;
        if (!TensorMerkle.verifyListEntry(root, TensorMerkle.STATE_DOMAIN, numState, tensor, entry, o.listProof)) {
            return (false, 0);
        }
        uint256 rows = stateLayout.rows[tensor];
        uint256 cols = stateLayout.cols[tensor];
        uint256 f32 = TensorMerkle.DTYPE_F32;
        return TensorMerkle.verifyElement(o.tensorRoot, f32, rows, cols, element, o.chunk, o.siblings);
    }

    /// @notice The aggregate element from the unit elements (shard order), NaN canonicalised
    ///         as committed (PROTOCOL §3).
    /// @param inputs S_{r,s}[n][i] for s = 0 … S−1.
    /// @param w The weights.
    /// @return The binary32 bits of G_{r+1}[n][i].
    function recompute(uint32[] memory inputs, uint32[] memory w) internal pure returns (uint32) {
        return RepOps.average(inputs, w).canonical();
    }
}
