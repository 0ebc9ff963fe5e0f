// SPDX-License-Identifier: MIT
pragma solidity 0.8.37;

import {IOneStepProver} from "./IOneStepProver.sol";

/// @title IGraphProver — the one-step proof of a version-3 graph node (PROTOCOL §7.2, §7.5)
/// @notice `evaluate`, `reduction` and `accumulate` as IOneStepProver, for descriptors that are
///         `abi.encode(GraphNode)` (operator code 64 and up, `agents/training/registry.py`).
///         The OneStepProver forwards such descriptors here.
interface IGraphProver is IOneStepProver {
    // Its errors are IOneStepProver's (UnsupportedDtype and BadHeader are raised only here), so
    // the OneStepProver's ABI, which forwards to it, decodes every revert of a proof.
}
