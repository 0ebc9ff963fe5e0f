// SPDX-License-Identifier: MIT
pragma solidity 0.8.37;

import {IGraphInputs} from "./interfaces/IGraphInputs.sol";
import {IOneStepProver} from "./interfaces/IOneStepProver.sol";
import {GraphNode, Opening, Operand, ProofContext, TensorInput} from "./lib/DisputeTypes.sol";
import {OpCodes} from "./lib/OpCodes.sol";
import {Openings} from "./lib/Openings.sol";
import {Shapes} from "./lib/Shapes.sol";

/// @title GraphInputs — the committed tensors of a version-3 node's inputs, their openings verified
/// @notice Created by the GraphProver (its `graphInputs`), which calls it first in every proof.
///         Stateless.
contract GraphInputs is IGraphInputs {
    /// @inheritdoc IGraphInputs
    function verifyAll(ProofContext calldata ctx, bytes calldata nodeDesc, Opening[] calldata openings)
        external
        pure
        returns (Operand[] memory ins)
    {
        GraphNode memory n = abi.decode(nodeDesc, (GraphNode));
        uint256 m = n.inputs.length;
        if (openings.length != m) revert IOneStepProver.BadOperand(openings.length);
        ins = new Operand[](m);
        for (uint256 k = 0; k < m; ++k) {
            ins[k] = _committed(ctx, n.inputs[k], k);
            Openings.verify(ctx, ins[k], openings[k], k);
        }
    }

    /// @dev The tensor input `k` is opened in: its own 2-D view, or for a batch input the
    ///      dataset tensor it is gathered from — X (N, F), Y (1, N), or the token stream
    ///      (1, N + T) whose N = numExamples window starts each read T + 1 tokens. (A unit
    ///      stack's opening names the unit's tensor: `Openings.verify` sets its view.)
    function _committed(ProofContext calldata ctx, TensorInput memory t, uint256 k)
        private
        pure
        returns (Operand memory operand)
    {
        uint8 kind = t.kind;
        (uint256 rows, uint256 cols) = Shapes.view2d(t.shape);
        if (kind == OpCodes.KIND_WORD) {
            // INVARIANT: a hyper-parameter is one word, read by every output element.
            if (t.shape.length != 0) revert IOneStepProver.BadHeader(k);
        } else if (kind == OpCodes.KIND_STEP) {
            // INVARIANT: the step input is the three words (k0, k1, t) the chain derives.
            if (t.shape.length != 1 || t.shape[0] != 3) revert IOneStepProver.BadHeader(k);
        } else if (kind == OpCodes.KIND_UNITS) {
            // INVARIANT: a unit stack is (S, numel); its opening names the unit and its view.
            if (t.shape.length != 2) revert IOneStepProver.BadHeader(k);
        } else if (kind >= OpCodes.KIND_BATCH_X && kind <= OpCodes.KIND_WINDOW_Y) {
            // INVARIANT: a batch input holds the step's B rows, so _pick(b) is defined for each.
            if (t.shape.length == 0 || t.shape[0] != ctx.batchSize) revert IOneStepProver.BadHeader(k);
            if (kind == OpCodes.KIND_BATCH_X) (rows, cols) = (ctx.numExamples, Shapes.rowSize(t.shape));
            else if (kind == OpCodes.KIND_BATCH_Y) (rows, cols) = (1, ctx.numExamples);
            else if (t.shape.length != 2) revert IOneStepProver.BadHeader(k);
            else (rows, cols) = (1, ctx.numExamples + t.shape[1]);
        }
        operand = Operand(kind, t.index, t.key, t.dtype, uint32(rows), uint32(cols));
    }
}
