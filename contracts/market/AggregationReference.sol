// SPDX-License-Identifier: MIT
pragma solidity 0.8.37;

import {AggregationProof} from "../libraries/AggregationProof.sol";

/// @title AggregationReference — the float32 arithmetic of the aggregation node, as a contract
/// @notice `weights` and `recompute` of `AggregationProof` (PROTOCOL §5.1, §6.9) behind external
///         pure calls. The RoundManager creates one in its constructor and calls it, because the
///         binary32 division of the weights and the average would otherwise push the RoundManager past
///         the EIP-170 code size limit; the bits are the library's.
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
}
