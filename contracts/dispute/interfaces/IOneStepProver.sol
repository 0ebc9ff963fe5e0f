// SPDX-License-Identifier: MIT
pragma solidity 0.8.37;

import {ProofContext, Opening} from "../lib/DisputeTypes.sol";

/// @title IOneStepProver — recomputes one element of one node of a training step
/// @notice Given the node's descriptor and openings of the input elements it depends on, each
///         proved against the agreed commitments of the step (state S_t, earlier nodes of the
///         trace, the dataset), returns the element's correct value (binary32 or uint32 bits).
///         Reverts when an opening does not verify or does not cover an element it needs.
interface IOneStepProver {
    /// @notice The node's operator code is not one of PROTOCOL §7.2.
    error UnknownOp(uint8 op);
    /// @notice Input `operand` of the node has no opening of the right kind.
    error BadOperand(uint256 operand);
    /// @notice The opening of input `operand` does not verify against its commitment.
    error BadOpening(uint256 operand);
    /// @notice Element `element` of input `operand` is not among its opened chunks.
    error ElementNotOpened(uint256 operand, uint256 element);
    /// @notice The element (row, col) is outside the node's output.
    error OutOfRange(uint256 row, uint256 col);
    /// @notice The node's operator is not a reduction (no accumulator chain, PROTOCOL §7.10).
    error NotAReduction(uint8 op);
    /// @notice An accumulation step outside 1 … terms + 1.
    error PositionOutOfRange(uint256 position, uint256 last);
    /// @notice (Version-3 nodes) operator `op` is not defined on elements of dtype `dtype` (e.g. `div` on i32).
    error UnsupportedDtype(uint8 op, uint8 dtype);
    /// @notice (Version-3 nodes) input `operand`'s header does not fit its kind (a batch input whose first axis is
    ///         not the batch size, a hyper-parameter word that is not a 0-d tensor).
    error BadHeader(uint256 operand);

    function evaluate(
        ProofContext calldata ctx,
        bytes calldata nodeDesc,
        uint256 row,
        uint256 col,
        Opening[] calldata openings
    ) external view returns (uint32 bits);

    /// @notice The accumulator chain of a reduction node's output elements (PROTOCOL §7.10):
    ///         `terms` = K and acc_0 = `init`. Reverts `NotAReduction` for other operators.
    function reduction(bytes calldata nodeDesc) external view returns (uint256 terms, uint32 init);

    /// @notice The node's output as committed: its dtype (1 float32, 2 uint32) and its 2-D view
    ///         (rows, cols) (§3; a version-3 node's N-d shape viewed as in §2.7).
    function header(bytes calldata nodeDesc) external view returns (uint8 dtype, uint32 rows, uint32 cols);

    /// @notice Accumulation step `position` of output element (row, col): for 1 <= position <= K,
    ///         combine(`acc`, term_position) with the term's input elements opened (each input
    ///         in `openings` as for `evaluate`); for position = K + 1, finish(`acc`), which reads
    ///         no input (`openings` is ignored).
    function accumulate(
        ProofContext calldata ctx,
        bytes calldata nodeDesc,
        uint256 row,
        uint256 col,
        uint256 position,
        uint32 acc,
        Opening[] calldata openings
    ) external view returns (uint32 bits);
}
