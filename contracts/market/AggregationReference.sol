// SPDX-License-Identifier: MIT
pragma solidity 0.8.37;

import {DisputeMerkle} from "../dispute/lib/DisputeMerkle.sol";
import {IRoundManager} from "../interfaces/IRoundManager.sol";
import {AggregationProof} from "../libraries/AggregationProof.sol";

/// @title AggregationReference — the float32 arithmetic of the aggregation node, as a contract
/// @notice `weights`, `openElement` and `recompute` of `AggregationProof` (PROTOCOL §5.1, §6.9)
///         and the units list U_r behind external pure calls. The RoundManager creates one in
///         its constructor and calls it, because the binary32 division of the weights, the
///         average, the element openings and the units list would otherwise push the
///         RoundManager past the EIP-170 code size limit; the bits are the libraries'.
contract AggregationReference {
    /// @notice The S aggregation weights w_s = fl(fromUint(N_s) / fromUint(N)) as binary32 bits.
    /// @param numExamples N (> 0).
    /// @param shards S (1 … N).
    /// @return The weights, shard order.
    function weights(uint256 numExamples, uint256 shards) external pure returns (uint32[] memory) {
        return AggregationProof.weights(numExamples, shards);
    }

    /// @notice G_{r+1}[n][i] from the unit elements (shard order) and the weights, NaN
    ///         canonicalised.
    /// @param inputs S_{r,s}[n][i] for s = 0 … S−1.
    /// @param w The weights.
    /// @return The binary32 bits of the aggregate element.
    function recompute(uint32[] calldata inputs, uint32[] calldata w) external pure returns (uint32) {
        return AggregationProof.recompute(inputs, w);
    }

    /// @notice U_r: the root list under vtp.units.v1 of the units' final state roots.
    function unitsRoot(bytes32[] calldata finalRoots) external pure returns (bytes32) {
        return DisputeMerkle.rootList(DisputeMerkle.UNITS_DOMAIN, finalRoots);
    }

    /// @notice Opens element `element` of float32 state tensor `tensor` of the state with root
    ///         `root` (`AggregationProof.openElement`): whether the opening verifies, and the
    ///         element's bits.
    function openElement(
        bytes32 root,
        IRoundManager.StateLayout calldata stateLayout,
        uint256 tensor,
        uint256 element,
        IRoundManager.ElementOpening calldata o
    ) external pure returns (bool ok, uint32 value) {
        return AggregationProof.openElement(root, stateLayout, tensor, element, o);
    }
}
