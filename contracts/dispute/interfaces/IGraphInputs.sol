// SPDX-License-Identifier: MIT
pragma solidity 0.8.37;

import {Operand, Opening, ProofContext} from "../lib/DisputeTypes.sol";

/// @title IGraphInputs — a version-3 node's input openings, verified (PROTOCOL §7.2, §7.5)
/// @notice The GraphProver's first half, a contract of its own so that each stays under the
///         24 KiB code size limit: the committed tensor of each input of a `GraphNode`
///         descriptor, and its opening verified against the claim's commitments. Reverts with
///         IOneStepProver's errors (`BadOperand`, `BadHeader`, `BadOpening`).
interface IGraphInputs {
    /// @notice Each input's committed tensor (its 2-D view; the dataset's for a batch input; the
    ///         unit's tensor, `index` its shard, for a unit stack) with its opening verified.
    function verifyAll(ProofContext calldata ctx, bytes calldata nodeDesc, Opening[] calldata openings)
        external
        pure
        returns (Operand[] memory ins);
}
