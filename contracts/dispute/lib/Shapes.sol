// SPDX-License-Identifier: MIT
pragma solidity 0.8.37;

/// @title Shapes — row-major index arithmetic of N-d tensors (PROTOCOL §2.5)
/// @notice Flat index ↔ multi-index, NumPy broadcasting, and the 2-D view a tensor is committed
///         as (§2.7). Shapes are a node descriptor's uint32 sizes; every function is O(rank).
library Shapes {
    /// @dev The number of elements of `shape` (1 for a 0-d tensor).
    function numel(uint32[] memory shape) internal pure returns (uint256 n) {
        n = 1;
        for (uint256 d = 0; d < shape.length; ++d) {
            n *= shape[d];
        }
    }

    /// @dev The committed 2-D view (§2.7 `view2d`): () → (1, 1), (n) → (1, n), (d0, …) →
    ///      (d0, d1·…·dr).
    function view2d(uint32[] memory shape) internal pure returns (uint256 rows, uint256 cols) {
        if (shape.length == 0) return (1, 1);
        if (shape.length == 1) return (1, shape[0]);
        cols = 1;
        for (uint256 d = 1; d < shape.length; ++d) {
            cols *= shape[d];
        }
        return (shape[0], cols);
    }

    /// @dev The multi-index of flat element `e` of `shape`.
    function unravel(uint256 e, uint32[] memory shape) internal pure returns (uint256[] memory idx) {
        idx = new uint256[](shape.length);
        for (uint256 d = shape.length; d > 0; --d) {
            idx[d - 1] = e % shape[d - 1];
            e /= shape[d - 1];
        }
    }

    /// @dev The flat element of multi-index `idx` in `shape` (same rank).
    function ravel(uint256[] memory idx, uint32[] memory shape) internal pure returns (uint256 e) {
        for (uint256 d = 0; d < shape.length; ++d) {
            e = e * shape[d] + idx[d];
        }
    }

    /// @dev The flat element of an input of shape `inShape` that NumPy broadcasting reads for
    ///      output multi-index `outIdx`: axes aligned at the last, a size-1 axis reads index 0.
    function broadcastIndex(uint256[] memory outIdx, uint32[] memory inShape) internal pure returns (uint256 e) {
        uint256 lead = outIdx.length - inShape.length;
        for (uint256 d = 0; d < inShape.length; ++d) {
            uint256 i = inShape[d] == 1 ? 0 : outIdx[lead + d];
            e = e * inShape[d] + i;
        }
    }

    /// @dev The elements of one row along the first axis: the product of every size but the
    ///      first (1 for a tensor of rank 0 or 1).
    function rowSize(uint32[] memory shape) internal pure returns (uint256 n) {
        n = 1;
        for (uint256 d = 1; d < shape.length; ++d) {
            n *= shape[d];
        }
    }

    /// @dev The size of the last axis (the reduced one of a `*_last` reduction).
    function last(uint32[] memory shape) internal pure returns (uint256) {
        return shape[shape.length - 1];
    }
}
