// SPDX-License-Identifier: MIT
pragma solidity 0.8.37;

import {IGraphInputs} from "./interfaces/IGraphInputs.sol";
import {IGraphProver} from "./interfaces/IGraphProver.sol";
import {IOneStepProver} from "./interfaces/IOneStepProver.sol";
import {GraphInputs} from "./GraphInputs.sol";
import {GraphNode, Opening, Operand, ProofContext, TensorInput} from "./lib/DisputeTypes.sol";
import {OpCodes} from "./lib/OpCodes.sol";
import {Openings} from "./lib/Openings.sol";
import {Shapes} from "./lib/Shapes.sol";
import {GraphOps} from "./lib/GraphOps.sol";
import {Float32} from "../libraries/Float32.sol";
import {RepOps} from "../libraries/RepOps.sol";

/// @title GraphProver — the one-step proof of one element of a version-3 graph node
/// @notice A version-3 node (`GraphNode`, PROTOCOL §2.6, §7.2) is an operator of the registry
///         over N-d tensors. The prover verifies the openings of the node's inputs (as the
///         OneStepProver does, plus the batch, hyper-parameter and constant kinds), finds the
///         input elements output element e depends on by the operator's dependency rule, and
///         recomputes e with the operator's evaluation order (`GraphOps`, `Float32`, `RepOps`).
///         An f32 result is returned canonical (NaN → 0x7FC00000), as it is committed (§1).
///         Stateless; reached through the OneStepProver. The openings are verified by
///         `graphInputs`, created with it (the two halves stay under the code size limit).
contract GraphProver is IGraphProver {
    using Float32 for uint32;

    /// @notice Verifies each input's opening and names its committed tensor.
    IGraphInputs public immutable graphInputs;

    constructor() {
        graphInputs = new GraphInputs();
    }

    /// @dev The node and its inputs' committed headers, one memory word on the stack (the legacy
    ///      code generator slither compiles with runs out of stack with them apart).
    struct Frame {
        GraphNode n;
        Operand[] ins;
    }

    /// @inheritdoc IOneStepProver
    function evaluate(
        ProofContext calldata ctx,
        bytes calldata nodeDesc,
        uint256 row,
        uint256 col,
        Opening[] calldata openings
    ) external view returns (uint32) {
        GraphNode memory n = abi.decode(nodeDesc, (GraphNode));
        uint256 e = _element(n, row, col);
        Frame memory f = Frame(n, graphInputs.verifyAll(ctx, nodeDesc, openings));
        return _commit(n, _eval(ctx, f, openings, e));
    }

    /// @inheritdoc IOneStepProver
    function header(bytes calldata nodeDesc) external pure returns (uint8 dtype, uint32 rows, uint32 cols) {
        GraphNode memory n = abi.decode(nodeDesc, (GraphNode));
        (uint256 r, uint256 c) = Shapes.view2d(n.shape);
        return (n.dtype, uint32(r), uint32(c));
    }

    /// @inheritdoc IOneStepProver
    function reduction(bytes calldata nodeDesc) external pure returns (uint256 terms, uint32 init) {
        GraphNode memory n = abi.decode(nodeDesc, (GraphNode));
        return GraphOps.chain(n);
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
    ) external view returns (uint32) {
        GraphNode memory n = abi.decode(nodeDesc, (GraphNode));
        return _accumulate(ctx, nodeDesc, n, _element(n, row, col), position, acc, openings);
    }

    // ------------------------------------------------------------------ evaluation

    /// @dev Accumulation step `position` (1 … K + 1) of element e (its own frame: the legacy
    ///      code generator slither compiles with runs out of stack inline).
    function _accumulate(
        ProofContext calldata ctx,
        bytes calldata nodeDesc,
        GraphNode memory n,
        uint256 e,
        uint256 position,
        uint32 acc,
        Opening[] calldata openings
    ) internal view returns (uint32) {
        uint256 terms = GraphOps.chainTerms(n);
        if (position == 0 || position > terms + 1) revert PositionOutOfRange(position, terms + 1);
        if (position == terms + 1) return _commit(n, acc);
        Frame memory f = Frame(n, graphInputs.verifyAll(ctx, nodeDesc, openings));
        return _step(ctx, f, openings, e, position - 1, acc);
    }

    function _element(GraphNode memory n, uint256 row, uint256 col) internal pure returns (uint256) {
        (uint256 rows, uint256 cols) = Shapes.view2d(n.shape);
        if (row >= rows || col >= cols) revert OutOfRange(row, col);
        return row * cols + col;
    }

    function _commit(GraphNode memory n, uint32 bits) internal pure returns (uint32) {
        return n.dtype == OpCodes.DTYPE_F32 ? bits.canonical() : bits;
    }

    function _eval(
        ProofContext calldata ctx,
        Frame memory f,
        Opening[] calldata o,
        uint256 e
    ) internal pure returns (uint32) {
        uint8 op = f.n.op;
        if (op <= OpCodes.V3_WHERE || (op >= OpCodes.V3_NEG && op <= OpCodes.V3_LOGICAL_NOT)) {
            return _elementwise(ctx, f, o, e);
        }
        if (op >= OpCodes.V3_SUM_LAST && op <= OpCodes.V3_MATMUL) return _reduce(ctx, f, o, e);
        if (op >= OpCodes.V3_CONST && op <= OpCodes.V3_CAT) {
            (uint256 k, uint256 src) = GraphOps.moved(f.n, e);
            return _in(ctx, f, o, k, src);
        }
        if (op == OpCodes.V3_UNIFORM) {
            return GraphOps.uniform(_in(ctx, f, o, 0, 0), _in(ctx, f, o, 0, 1), _in(ctx, f, o, 0, 2), f.n.attrs[0], e);
        }
        return _indexing(ctx, f, o, e);
    }

    /// @dev Codes 64–89: each input's broadcast element, then the scalar rule.
    function _elementwise(
        ProofContext calldata ctx,
        Frame memory f,
        Opening[] calldata o,
        uint256 e
    ) internal pure returns (uint32) {
        uint32[] memory v = _broadcastInputs(ctx, f, o, Shapes.unravel(e, f.n.shape));
        uint8 dt = f.n.inputs[0].dtype;
        if (f.n.op == OpCodes.V3_WHERE) return v[0] != 0 ? v[1] : v[2];
        if (f.n.op < OpCodes.V3_NEG) return GraphOps.binary(f.n.op, dt, v[0], v[1]);
        return GraphOps.unary(f.n.op, dt, v[0]);
    }

    /// @dev The element of each input that NumPy broadcasting reads for output index `idx`.
    function _broadcastInputs(ProofContext calldata ctx, Frame memory f, Opening[] calldata o, uint256[] memory idx)
        internal
        pure
        returns (uint32[] memory v)
    {
        v = new uint32[](f.n.inputs.length);
        for (uint256 k = 0; k < v.length; ++k) {
            uint256 src = Shapes.broadcastIndex(idx, f.n.inputs[k].shape);
            v[k] = _in(ctx, f, o, k, src);
        }
    }

    /// @dev sum_last, max_last, argmax_last and matmul, evaluated whole: the chain's terms in
    ///      order (a long one is disputed through `accumulate` instead, §7.10).
    function _reduce(
        ProofContext calldata ctx,
        Frame memory f,
        Opening[] calldata o,
        uint256 e
    ) internal pure returns (uint32) {
        if (f.n.op == OpCodes.V3_ARGMAX_LAST) return _argmax(ctx, f, o, e);
        (uint256 terms, uint32 acc) = GraphOps.chain(f.n);
        for (uint256 j = 0; j < terms; ++j) {
            acc = _step(ctx, f, o, e, j, acc);
        }
        return acc;
    }

    /// @dev One accumulation step acc_{j+1} = combine(acc_j, term_{j+1}) (term index j 0-based).
    function _step(
        ProofContext calldata ctx,
        Frame memory f,
        Opening[] calldata o,
        uint256 e,
        uint256 j,
        uint32 acc
    ) internal pure returns (uint32) {
        if (f.n.op == OpCodes.V3_MATMUL) return acc.add(_product(ctx, f, o, e, j));
        if (f.n.op == OpCodes.V3_INDEX_ADD_ROWS) return GraphOps.add(f.n.dtype, acc, _indexAddTerm(ctx, f, o, e, j));
        return GraphOps.combine(f.n.op, f.n.inputs[0].dtype, acc, _lastTerm(ctx, f, o, e, j));
    }

    /// @dev Term j of a `*_last` reduction's element e: x[e, j] of its one input.
    function _lastTerm(ProofContext calldata ctx, Frame memory f, Opening[] calldata o, uint256 e, uint256 j)
        internal
        pure
        returns (uint32)
    {
        return _in(ctx, f, o, 0, e * Shapes.last(f.n.inputs[0].shape) + j);
    }

    /// @dev Term j of matmul's element e: fl(A[…, i, j] × B[…, j, c]).
    function _product(ProofContext calldata ctx, Frame memory f, Opening[] calldata o, uint256 e, uint256 j)
        internal
        pure
        returns (uint32)
    {
        (uint256 a, uint256 b) = GraphOps.matmulTerm(f.n, e, j);
        return _in(ctx, f, o, 0, a).mul(_in(ctx, f, o, 1, b));
    }

    /// @dev Term j of index_add_rows' element e: dest[e] for j = 0; then src row j - 1's element
    ///      when idx[j - 1] names e's row, else -0 (fl(acc + -0) = acc bit for bit: the step is
    ///      skipped; i32: 0).
    function _indexAddTerm(ProofContext calldata ctx, Frame memory f, Opening[] calldata o, uint256 e, uint256 j)
        internal
        pure
        returns (uint32)
    {
        if (j == 0) return _in(ctx, f, o, 0, e);
        uint256 rowSize = Shapes.rowSize(f.n.shape);
        if (_in(ctx, f, o, 1, j - 1) != e / rowSize) return f.n.dtype == OpCodes.DTYPE_F32 ? GraphOps.NEG_ZERO : 0;
        return _in(ctx, f, o, 2, (j - 1) * rowSize + e % rowSize);
    }

    function _argmax(
        ProofContext calldata ctx,
        Frame memory f,
        Opening[] calldata o,
        uint256 e
    ) internal pure returns (uint32 best) {
        uint256 len = Shapes.last(f.n.inputs[0].shape);
        uint8 dt = f.n.inputs[0].dtype;
        uint32 m = _in(ctx, f, o, 0, e * len);
        for (uint256 j = 1; j < len; ++j) {
            uint32 v = _in(ctx, f, o, 0, e * len + j);
            if (GraphOps.argmaxTakes(dt, m, v)) {
                m = v;
                best = uint32(j);
            }
        }
    }

    /// @dev index_rows, index_add_rows (whole chain), gather and scatter_value.
    function _indexing(
        ProofContext calldata ctx,
        Frame memory f,
        Opening[] calldata o,
        uint256 e
    ) internal pure returns (uint32) {
        uint8 op = f.n.op;
        if (op == OpCodes.V3_INDEX_ROWS) {
            uint256 rowSize = Shapes.rowSize(f.n.inputs[0].shape);
            uint256 r = _in(ctx, f, o, 1, e / rowSize);
            return _in(ctx, f, o, 0, r * rowSize + e % rowSize);
        }
        if (op == OpCodes.V3_INDEX_ADD_ROWS) return _reduce(ctx, f, o, e);
        if (op == OpCodes.V3_GATHER) {
            uint256[] memory p = Shapes.unravel(e, f.n.shape);
            p[f.n.attrs[0]] = _in(ctx, f, o, 1, e);
            return _in(ctx, f, o, 0, Shapes.ravel(p, f.n.inputs[0].shape));
        }
        if (op == OpCodes.V3_SCATTER_VALUE) return _scatter(ctx, f, o, e);
        revert UnknownOp(op);
    }

    /// @dev out = x, and out[p with axis dim = idx[p]] = the word attrs[1] for every position p
    ///      of idx: element e is written iff some p on e's line along `dim` names e's index.
    function _scatter(
        ProofContext calldata ctx,
        Frame memory f,
        Opening[] calldata o,
        uint256 e
    ) internal pure returns (uint32) {
        uint256 dim = f.n.attrs[0];
        uint32[] memory ishape = f.n.inputs[1].shape;
        uint256[] memory c = Shapes.unravel(e, f.n.shape);
        uint256 target = c[dim];
        for (uint256 d = 0; d < c.length; ++d) {
            if (d != dim && c[d] >= ishape[d]) return _in(ctx, f, o, 0, e);
        }
        for (uint256 q = 0; q < ishape[dim]; ++q) {
            c[dim] = q;
            if (_in(ctx, f, o, 1, Shapes.ravel(c, ishape)) == target) return uint32(f.n.attrs[1]);
        }
        return _in(ctx, f, o, 0, e);
    }

    // ------------------------------------------------------------------ inputs

    /// @dev Element `e` (row-major over the input's own shape) of input `k`.
    function _in(
        ProofContext calldata ctx,
        Frame memory f,
        Opening[] calldata o,
        uint256 k,
        uint256 e
    ) internal pure returns (uint32) {
        TensorInput memory t = f.n.inputs[k];
        if (t.kind == OpCodes.KIND_WORD) return uint32(uint256(t.key));
        if (e >= Shapes.numel(t.shape)) revert ElementNotOpened(k, e);
        if (t.kind == OpCodes.KIND_STEP) return GraphOps.stepWord(ctx.seed, ctx.step, e);
        if (t.kind == OpCodes.KIND_UNITS) {
            // Row e / numel is the unit whose state the opening is of (its shard, `index`).
            uint256 numel = t.shape[1];
            if (e / numel != f.ins[k].index) revert ElementNotOpened(k, e);
            return Openings.word(o[k], k, e % numel);
        }
        return Openings.word(o[k], k, _sourceElement(ctx, f.ins[k].cols, t, e));
    }

    /// @dev The element of the opened tensor that element e of input `t` is: e itself, or for
    ///      a batch input the dataset's element at the step's draw (`cols`: X's row width).
    function _sourceElement(ProofContext calldata ctx, uint256 cols, TensorInput memory t, uint256 e)
        internal
        pure
        returns (uint256)
    {
        uint8 kind = t.kind;
        if (kind == OpCodes.KIND_BATCH_X) return _pick(ctx, e / cols) * cols + e % cols;
        if (kind == OpCodes.KIND_BATCH_Y) return _pick(ctx, e);
        if (kind == OpCodes.KIND_WINDOW_X) return _pick(ctx, e / t.shape[1]) + e % t.shape[1];
        if (kind == OpCodes.KIND_WINDOW_Y) return _pick(ctx, e / t.shape[1]) + e % t.shape[1] + 1;
        return e;
    }

    /// @dev The dataset position of batch row b at the disputed step (§4, the unit's shard).
    function _pick(ProofContext calldata ctx, uint256 b) internal pure returns (uint256) {
        return RepOps.shardBatchIndex(ctx.seed, ctx.step, b, ctx.numExamples, ctx.shards, ctx.shard);
    }
}
