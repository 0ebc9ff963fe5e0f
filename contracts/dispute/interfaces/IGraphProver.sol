// SPDX-License-Identifier: MIT
pragma solidity 0.8.37;

import {IOneStepProver} from "./IOneStepProver.sol";

/// @title IGraphProver — the one-step proof of a version-3 graph node (PROTOCOL §7.2, §7.5)
/// @notice `evaluate`, `reduction` and `accumulate` as IOneStepProver, for descriptors that are
///         `abi.encode(GraphNode)` (operator code 64 and up, `agents/training/registry.py`).
///         The OneStepProver forwards such descriptors here.
interface IGraphProver is IOneStepProver {
    /// @notice Operator `op` is not defined on elements of dtype `dtype` (e.g. `div` on i32).
    error UnsupportedDtype(uint8 op, uint8 dtype);
    /// @notice Input `operand`'s header does not fit its kind (a batch input whose first axis is
    ///         not the batch size, a hyper-parameter word that is not a 0-d tensor).
    error BadHeader(uint256 operand);
}
