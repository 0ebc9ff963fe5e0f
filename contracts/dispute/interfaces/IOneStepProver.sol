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

    function evaluate(
        ProofContext calldata ctx,
        bytes calldata nodeDesc,
        uint256 row,
        uint256 col,
        Opening[] calldata openings
    ) external view returns (uint32 bits);
}
