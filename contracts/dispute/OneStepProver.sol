// SPDX-License-Identifier: MIT
pragma solidity 0.8.37;

import {IOneStepProver} from "./interfaces/IOneStepProver.sol";
import {IGraphProver} from "./interfaces/IGraphProver.sol";
import {GraphProver} from "./GraphProver.sol";
import {NodeDesc, Operand, Opening, ProofContext} from "./lib/DisputeTypes.sol";
import {Openings} from "./lib/Openings.sol";
import {Positions} from "./lib/Positions.sol";
import {OpCodes} from "./lib/OpCodes.sol";
import {Float32} from "../libraries/Float32.sol";
import {RepOps} from "../libraries/RepOps.sol";

/// @title OneStepProver — the last move of a dispute: one element of one node, on chain
/// @notice Verifies the openings of the input elements a node's output element depends on
///         against the step's agreed commitments, then recomputes the element with the protocol's
///         float32 references (`RepOps`, `Float32`; PROTOCOL §2). Stateless.
contract OneStepProver is IOneStepProver {
    using Float32 for uint32;

    /// @notice The prover of version-3 graph nodes (operator codes 64 and up), created with this
    ///         contract: a descriptor whose operator code is a version-3 one is forwarded to it.
    IGraphProver public immutable graphProver;

    constructor() {
        graphProver = new GraphProver();
    }

    /// @inheritdoc IOneStepProver
    function evaluate(
        ProofContext calldata ctx,
        bytes calldata nodeDesc,
        uint256 row,
        uint256 col,
        Opening[] calldata openings
    ) external view returns (uint32 bits) {
        if (_isGraphNode(nodeDesc)) return graphProver.evaluate(ctx, nodeDesc, row, col, openings);
        NodeDesc memory d = abi.decode(nodeDesc, (NodeDesc));
        if (row >= d.rows || col >= d.cols) revert OutOfRange(row, col);
        _verifyAll(ctx, d, openings);
        bits = _eval(ctx, d, row, col, openings);
    }

    /// @inheritdoc IOneStepProver
    function reduction(bytes calldata nodeDesc) external view returns (uint256 terms, uint32 init) {
        if (_isGraphNode(nodeDesc)) return graphProver.reduction(nodeDesc);
        NodeDesc memory d = abi.decode(nodeDesc, (NodeDesc));
        return _reduction(d);
    }

    /// @inheritdoc IOneStepProver
    function header(bytes calldata nodeDesc) external view returns (uint8 dtype, uint32 rows, uint32 cols) {
        if (_isGraphNode(nodeDesc)) return graphProver.header(nodeDesc);
        NodeDesc memory d = abi.decode(nodeDesc, (NodeDesc));
        return (d.dtype, d.rows, d.cols);
    }

    /// @dev Both descriptor structs start with `uint8 op` (the word after the tuple's offset),
    ///      so the operator code says which one `nodeDesc` encodes: 64 and up is a GraphNode.
    function _isGraphNode(bytes calldata nodeDesc) internal pure returns (bool) {
        return nodeDesc.length >= 64 && uint256(bytes32(nodeDesc[32:64])) >= OpCodes.FIRST_V3;
    }

    /// @inheritdoc IOneStepProver
    function accumulate(
        ProofContext calldata ctx,
        bytes calldata nodeDesc,
        uint256 row,
        uint256 col,
        uint256 position,
        uint32 acc,
        Opening[] calldata openings
    ) external view returns (uint32 bits) {
        if (_isGraphNode(nodeDesc)) {
            return graphProver.accumulate(ctx, nodeDesc, row, col, position, acc, openings);
        }
        NodeDesc memory d = abi.decode(nodeDesc, (NodeDesc));
        if (row >= d.rows || col >= d.cols) revert OutOfRange(row, col);
        (uint256 terms,) = _reduction(d);
        if (position == 0 || position > terms + 1) revert PositionOutOfRange(position, terms + 1);
        if (position == terms + 1) return _finish(d.op, acc, terms);
        _verifyAll(ctx, d, openings);
        bits = _accumulate(ctx, d, row, col, position - 1, acc, openings);
    }

    // ------------------------------------------------------------------ reductions

    /// @dev The chain of PROTOCOL §7.10 for each reduction, matching `_eval`'s RepOps calls:
    ///      matmul_nt, row_sum and mean start at +0 and add (mean's finish divides by K);
    ///      row_max starts at -inf and takes Float32.max (max(-inf, x) = x bit for bit for every
    ///      non-NaN x, so the chain's end is RepOps.rowMax's m; its finish is canonical()).
    function _reduction(NodeDesc memory d) internal pure returns (uint256 terms, uint32 init) {
        uint8 op = d.op;
        if (op == OpCodes.MATMUL_NT || op == OpCodes.ROW_SUM || op == OpCodes.MEAN) {
            return (d.inputs[0].cols, 0);
        }
        if (op == OpCodes.ROW_MAX) return (d.inputs[0].cols, Float32.NEG_INF);
        revert NotAReduction(op);
    }

    /// @dev One step acc_{k+1} = combine(acc_k, term_{k+1}); term index k is 0-based.
    function _accumulate(
        ProofContext calldata ctx,
        NodeDesc memory d,
        uint256 r,
        uint256 c,
        uint256 k,
        uint32 acc,
        Opening[] calldata o
    ) internal pure returns (uint32) {
        uint8 op = d.op;
        Operand[] memory in_ = d.inputs;
        if (op == OpCodes.MATMUL_NT) return acc.add(_product(ctx, in_, o, r, c, k));
        // row_sum / row_max reduce row c of the input into output (0, c); mean reduces row r.
        uint32 x = _at(ctx, in_[0], o[0], 0, op == OpCodes.MEAN ? r : c, k);
        if (op == OpCodes.ROW_MAX) return acc.max(x);
        return acc.add(x);
    }

    /// @dev Term k of matmul_nt's element (r, c): fl(A[r, k] × B[c, k]) (its own frame: the
    ///      legacy code generator slither compiles with runs out of stack inline).
    function _product(
        ProofContext calldata ctx,
        Operand[] memory in_,
        Opening[] calldata o,
        uint256 r,
        uint256 c,
        uint256 k
    ) internal pure returns (uint32) {
        uint32 a = _at(ctx, in_[0], o[0], 0, r, k);
        return a.mul(_at(ctx, in_[1], o[1], 1, c, k));
    }

    function _finish(uint8 op, uint32 acc, uint256 terms) internal pure returns (uint32) {
        if (op == OpCodes.MEAN) return acc.div(Float32.fromUint(terms));
        if (op == OpCodes.ROW_MAX) return acc.canonical();
        return acc;
    }

    // ------------------------------------------------------------------ evaluation

    function _eval(
        ProofContext calldata ctx,
        NodeDesc memory d,
        uint256 r,
        uint256 c,
        Opening[] calldata o
    ) internal pure returns (uint32) {
        uint8 op = d.op;
        Operand[] memory in_ = d.inputs;
        if (op == OpCodes.MATMUL_NT) {
            uint256 k = in_[0].cols;
            uint32[] memory a = _readRange(ctx, in_[0], o[0], 0, r * k, k);
            uint32[] memory b = _readRange(ctx, in_[1], o[1], 1, c * k, k);
            return RepOps.dot(a, b);
        }
        if (op == OpCodes.TRANSPOSE) return _at(ctx, in_[0], o[0], 0, c, r);
        if (op <= OpCodes.DIV) return _binary(op, _at(ctx, in_[0], o[0], 0, r, c), _at(ctx, in_[1], o[1], 1, r, c));
        if (op == OpCodes.ADD_ROW) {
            return RepOps.addRow(_at(ctx, in_[0], o[0], 0, r, c), _at(ctx, in_[1], o[1], 1, 0, c));
        }
        if (op == OpCodes.SUB_COL) {
            return RepOps.subCol(_at(ctx, in_[0], o[0], 0, r, c), _at(ctx, in_[1], o[1], 1, 0, r));
        }
        if (op == OpCodes.DIV_COL) {
            return RepOps.divCol(_at(ctx, in_[0], o[0], 0, r, c), _at(ctx, in_[1], o[1], 1, 0, r));
        }
        if (op == OpCodes.RELU) return RepOps.relu(_at(ctx, in_[0], o[0], 0, r, c));
        if (op == OpCodes.RELU_BWD) {
            return RepOps.reluBwd(_at(ctx, in_[0], o[0], 0, r, c), _at(ctx, in_[1], o[1], 1, r, c));
        }
        if (op == OpCodes.EXP) return RepOps.exp32(_at(ctx, in_[0], o[0], 0, r, c));
        if (op == OpCodes.LOG) return RepOps.log32(_at(ctx, in_[0], o[0], 0, r, c));
        return _evalRest(ctx, d, r, c, o);
    }

    function _evalRest(
        ProofContext calldata ctx,
        NodeDesc memory d,
        uint256 r,
        uint256 c,
        Opening[] calldata o
    ) internal pure returns (uint32) {
        uint8 op = d.op;
        Operand[] memory in_ = d.inputs;
        if (op == OpCodes.ROW_SUM || op == OpCodes.ROW_MAX || op == OpCodes.MEAN) {
            // (1, M) output: element c reduces row c of the input (row 0 for mean).
            uint256 n = in_[0].cols;
            uint256 which = op == OpCodes.MEAN ? r : c;
            uint32[] memory row = _readRange(ctx, in_[0], o[0], 0, which * n, n);
            if (op == OpCodes.ROW_SUM) return RepOps.rowSum(row);
            if (op == OpCodes.ROW_MAX) return RepOps.rowMax(row);
            return RepOps.mean(row);
        }
        if (op == OpCodes.GATHER_ROWS) {
            uint256 src = _flat(ctx, in_[1], o[1], 1, r);
            return _at(ctx, in_[0], o[0], 0, src, c);
        }
        if (op == OpCodes.GATHER_LABELS) {
            uint256 src = _flat(ctx, in_[1], o[1], 1, c);
            return _at(ctx, in_[0], o[0], 0, r, src);
        }
        if (op == OpCodes.XENT_GRAD) {
            uint256 label = _flat(ctx, in_[1], o[1], 1, r);
            return RepOps.xentGrad(_at(ctx, in_[0], o[0], 0, r, c), c, label, in_[0].rows);
        }
        if (op == OpCodes.NLL) {
            // L:(1,B), S:(B,C), y: B labels; output (1,B), element c = batch row b.
            uint256 label = _flat(ctx, in_[2], o[2], 2, c);
            uint32 l = _at(ctx, in_[0], o[0], 0, 0, c);
            return RepOps.nll(l, _at(ctx, in_[1], o[1], 1, c, label));
        }
        if (op == OpCodes.MOMENTUM) {
            uint32 mu = uint32(d.param);
            return RepOps.momentum(mu, _at(ctx, in_[0], o[0], 0, r, c), _at(ctx, in_[1], o[1], 1, r, c));
        }
        if (op == OpCodes.SGD) {
            uint32 lr = uint32(d.param);
            return RepOps.sgd(lr, _at(ctx, in_[0], o[0], 0, r, c), _at(ctx, in_[1], o[1], 1, r, c));
        }
        revert UnknownOp(op);
    }

    function _binary(uint8 op, uint32 a, uint32 b) internal pure returns (uint32) {
        if (op == OpCodes.ADD) return a.add(b);
        if (op == OpCodes.SUB) return a.sub(b);
        if (op == OpCodes.MUL) return a.mul(b);
        if (op == OpCodes.DIV) return a.div(b);
        revert UnknownOp(op);
    }

    // ------------------------------------------------------------------ reading operands

    /// @dev Element (i, j) of operand `k`.
    function _at(
        ProofContext calldata ctx,
        Operand memory operand,
        Opening calldata o,
        uint256 k,
        uint256 i,
        uint256 j
    ) internal pure returns (uint32) {
        if (i >= operand.rows || j >= operand.cols) revert ElementNotOpened(k, i * operand.cols + j);
        return _word(ctx, operand, o, k, i * operand.cols + j);
    }

    /// @dev Element at row-major index `e` of operand `k`, as an integer (labels, indices).
    function _flat(
        ProofContext calldata ctx,
        Operand memory operand,
        Opening calldata o,
        uint256 k,
        uint256 e
    ) internal pure returns (uint256) {
        if (e >= uint256(operand.rows) * operand.cols) revert ElementNotOpened(k, e);
        return _word(ctx, operand, o, k, e);
    }

    /// @dev `len` consecutive elements of operand `k` from row-major index `start`.
    function _readRange(
        ProofContext calldata ctx,
        Operand memory operand,
        Opening calldata o,
        uint256 k,
        uint256 start,
        uint256 len
    ) internal pure returns (uint32[] memory out) {
        if (start + len > uint256(operand.rows) * operand.cols) revert ElementNotOpened(k, start + len);
        out = new uint32[](len);
        if (operand.kind == OpCodes.KIND_BATCH) {
            for (uint256 i = 0; i < len; ++i) {
                out[i] = _word(ctx, operand, o, k, start + i);
            }
            return out;
        }
        uint256 leaf = type(uint256).max; // no leaf yet: the first element always loads its chunk
        uint256 chunkAt = 0;
        for (uint256 i = 0; i < len; ++i) {
            uint256 e = start + i;
            if (e / Positions.LEAF_ELEMS != leaf) {
                leaf = e / Positions.LEAF_ELEMS;
                chunkAt = Openings.chunkIndex(o, leaf, k, e);
            }
            out[i] = Positions.word(o.chunks[chunkAt].data, e % Positions.LEAF_ELEMS);
        }
    }

    function _word(
        ProofContext calldata ctx,
        Operand memory operand,
        Opening calldata o,
        uint256 k,
        uint256 e
    ) internal pure returns (uint32) {
        if (operand.kind == OpCodes.KIND_BATCH) {
            return uint32(
                RepOps.shardBatchIndex(ctx.seed, ctx.step, e, ctx.numExamples, ctx.shards, ctx.shard)
            );
        }
        return Openings.word(o, k, e);
    }

    // ------------------------------------------------------------------ verifying openings

    /// @dev One opening per input of the node, each verified (`Openings.verify`).
    function _verifyAll(ProofContext calldata ctx, NodeDesc memory d, Opening[] calldata openings)
        internal
        pure
    {
        uint256 n = d.inputs.length;
        if (openings.length != n) revert BadOperand(openings.length);
        for (uint256 k = 0; k < n; ++k) {
            Operand memory operand = d.inputs[k];
            // INVARIANT: the batch indices of a version-1 node are (1, B), computed on chain.
            if (operand.kind == OpCodes.KIND_BATCH && (operand.rows != 1 || operand.cols != ctx.batchSize)) {
                revert BadOperand(k);
            }
            Openings.verify(ctx, operand, openings[k], k);
        }
    }
}
