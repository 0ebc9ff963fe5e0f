// SPDX-License-Identifier: MIT
pragma solidity 0.8.37;

import {IOneStepProver} from "../interfaces/IOneStepProver.sol";
import {GraphNode} from "./DisputeTypes.sol";
import {OpCodes} from "./OpCodes.sol";
import {Shapes} from "./Shapes.sol";
import {Float32} from "../../libraries/Float32.sol";
import {RepOps} from "../../libraries/RepOps.sol";

/// @title GraphOps — the version-3 operators of the registry, one element at a time
/// @notice The scalar rule of every elementwise operator (the registry's `order` text, on
///         binary32 bits or two's-complement words), the accumulator chain of every reduction
///         (PROTOCOL §7.10) and the source element of every data-movement operator. Words of
///         dtype i32 wrap modulo 2^32 (add, sub, mul, neg, sum) and compare signed.
/// @dev Pure and O(rank) per call, except the reductions' chains, which the prover walks.
library GraphOps {
    using Float32 for uint32;

    uint32 internal constant NEG_ZERO = 0x80000000;
    uint32 internal constant INT_MIN = 0x80000000;

    // ------------------------------------------------------------------ elementwise

    /// @dev Codes 64–75 on two words of dtype `dt` (the inputs'; a comparison's output is i32).
    function binary(uint8 op, uint8 dt, uint32 a, uint32 b) internal pure returns (uint32) {
        bool f = dt == OpCodes.DTYPE_F32;
        if (op == OpCodes.V3_ADD) return f ? a.add(b) : _wrap(uint256(a) + b);
        if (op == OpCodes.V3_SUB) return f ? a.sub(b) : _wrap(uint256(a) + (uint256(1) << 32) - b);
        if (op == OpCodes.V3_MUL) return f ? a.mul(b) : _wrap(uint256(a) * b);
        if (op == OpCodes.V3_DIV) {
            if (!f) revert IOneStepProver.UnsupportedDtype(op, dt);
            return a.div(b);
        }
        if (op == OpCodes.V3_MAXIMUM) return f ? Float32.maximum(a, b) : (_sgt(a, b) ? a : b);
        if (op == OpCodes.V3_MINIMUM) return f ? Float32.minimum(a, b) : (_sgt(b, a) ? a : b);
        return _compare(op, f, a, b) ? 1 : 0;
    }

    /// @dev Codes 80–89 on one word of dtype `dt` (the input's). exp, log, sqrt, relu, tanh and
    ///      erf are defined on binary32 only.
    function unary(uint8 op, uint8 dt, uint32 x) internal pure returns (uint32) {
        bool f = dt == OpCodes.DTYPE_F32;
        if (op == OpCodes.V3_NEG) return f ? x.neg() : _wrap((uint256(1) << 32) - x);
        if (op == OpCodes.V3_CAST_F32) return f ? x : Float32.fromI32(x);
        if (op == OpCodes.V3_CAST_I32) return f ? Float32.toI32(x) : x;
        if (op == OpCodes.V3_LOGICAL_NOT) return x == 0 ? 1 : 0;
        if (!f) revert IOneStepProver.UnsupportedDtype(op, dt);
        if (op == OpCodes.V3_EXP) return RepOps.exp32(x);
        if (op == OpCodes.V3_LOG) return RepOps.log32(x);
        if (op == OpCodes.V3_RELU) return RepOps.relu(x);
        if (op == OpCodes.V3_SQRT) return Float32.sqrt(x);
        if (op == OpCodes.V3_TANH) return RepOps.tanh32(x);
        if (op == OpCodes.V3_ERF) return RepOps.erf32(x);
        revert IOneStepProver.UnknownOp(op);
    }

    /// @dev IEEE comparisons (false with NaN; +0 == -0) on binary32, signed on i32; ne = !eq.
    function _compare(uint8 op, bool f, uint32 a, uint32 b) private pure returns (bool) {
        if (op == OpCodes.V3_GT) return f ? a.gt(b) : _sgt(a, b);
        if (op == OpCodes.V3_GE) return f ? a.ge(b) : !_sgt(b, a);
        if (op == OpCodes.V3_LT) return f ? a.lt(b) : _sgt(b, a);
        if (op == OpCodes.V3_LE) return f ? a.le(b) : !_sgt(a, b);
        if (op == OpCodes.V3_EQ) return f ? a.eq(b) : a == b;
        if (op == OpCodes.V3_NE) return f ? !a.eq(b) : a != b;
        revert IOneStepProver.UnknownOp(op);
    }

    function _sgt(uint32 a, uint32 b) private pure returns (bool) {
        return int32(a) > int32(b);
    }

    function _wrap(uint256 x) private pure returns (uint32) {
        return uint32(x & 0xFFFFFFFF);
    }

    // ------------------------------------------------------------------ reductions

    /// @dev The accumulator chain of an output element (PROTOCOL §7.10): K terms from acc_0 =
    ///      `init`. sum_last and matmul add from +0 (matmul's term is a product);
    ///      max_last takes the maximum from -inf (f32, Float32.max) or INT_MIN (i32);
    ///      index_add_rows starts at -0 (i32: 0), whose term 1 is dest[e] (-0 + d = d bit for
    ///      bit) and term j + 1 src row j's element when idx[j] is e's row (skipped otherwise).
    function chain(GraphNode memory n) internal pure returns (uint256 terms, uint32 init) {
        return (chainTerms(n), _init(n));
    }

    /// @dev K of the chain (`chain`); reverts NotAReduction for an operator without one.
    function chainTerms(GraphNode memory n) internal pure returns (uint256) {
        uint8 op = n.op;
        if (op == OpCodes.V3_SUM_LAST || op == OpCodes.V3_MATMUL || op == OpCodes.V3_MAX_LAST) {
            return Shapes.last(n.inputs[0].shape);
        }
        if (op == OpCodes.V3_INDEX_ADD_ROWS) return Shapes.numel(n.inputs[1].shape) + 1;
        revert IOneStepProver.NotAReduction(op);
    }

    function _init(GraphNode memory n) private pure returns (uint32) {
        bool f = n.dtype == OpCodes.DTYPE_F32;
        if (n.op == OpCodes.V3_MAX_LAST) return f ? Float32.NEG_INF : INT_MIN;
        if (n.op == OpCodes.V3_INDEX_ADD_ROWS) return f ? NEG_ZERO : 0;
        return 0;
    }

    /// @dev One step of sum_last / max_last: combine(acc, x) in dtype `dt`.
    function combine(uint8 op, uint8 dt, uint32 acc, uint32 x) internal pure returns (uint32) {
        bool f = dt == OpCodes.DTYPE_F32;
        if (op == OpCodes.V3_MAX_LAST) return f ? acc.max(x) : (_sgt(x, acc) ? x : acc);
        return add(dt, acc, x);
    }

    /// @dev fl(a + b) on binary32, a + b mod 2^32 on i32.
    function add(uint8 dt, uint32 a, uint32 b) internal pure returns (uint32) {
        return dt == OpCodes.DTYPE_F32 ? a.add(b) : _wrap(uint256(a) + b);
    }

    /// @dev argmax_last's rule: does v (a later element) replace the running maximum m? The
    ///      first NaN wins and nothing replaces it; else only a strictly greater value.
    function argmaxTakes(uint8 dt, uint32 m, uint32 v) internal pure returns (bool) {
        if (dt != OpCodes.DTYPE_F32) return _sgt(v, m);
        if (m.isNaN()) return false;
        return v.isNaN() || v.gt(m);
    }

    /// @dev The flat elements of A and B in term j of matmul's output element e:
    ///      A[..., i, j] and B[..., j, c] for e = (..., i, c).
    function matmulTerm(GraphNode memory n, uint256 e, uint256 j) internal pure returns (uint256 a, uint256 b) {
        uint32[] memory as_ = n.inputs[0].shape;
        uint256 r = as_.length;
        uint256[] memory idx = Shapes.unravel(e, n.shape);
        uint256 batch = 0;
        for (uint256 d = 0; d + 2 < r; ++d) {
            batch = batch * as_[d] + idx[d];
        }
        uint256 m = as_[r - 2];
        uint256 k = as_[r - 1];
        uint256 cols = n.shape[r - 1];
        a = (batch * m + idx[r - 2]) * k + j;
        b = (batch * k + j) * cols + idx[r - 1];
    }

    // ------------------------------------------------------------------ random stream

    /// @dev The domain of a job's random-stream key (PROTOCOL §2.6, `uniform`).
    bytes32 internal constant RANDOM_DOMAIN = keccak256("vtp.random.v1");
    uint256 private constant M32 = 0xFFFFFFFF;

    /// @dev Element `k` of the step input (k0, k1, t) at global step `step` of a job seeded
    ///      `seed`: (k0, k1) the low 64 bits of keccak256(abi.encode(RANDOM_DOMAIN, seed)), k0
    ///      the lowest 32; t the step's low 32 bits.
    function stepWord(uint256 seed, uint256 step, uint256 k) internal pure returns (uint32) {
        if (k == 2) return uint32(step & M32);
        uint256 key = uint256(keccak256(abi.encode(RANDOM_DOMAIN, seed)));
        return uint32((key >> (32 * k)) & M32);
    }

    /// @dev `uniform`: (x0 >> 8) * 2^-24 with x0 the first word of Philox4x32-10 on counter
    ///      (e, site, t, 0) under key (k0, k1). Exact: a 24-bit integer times a power of two.
    function uniform(uint32 k0, uint32 k1, uint32 t, uint256 site, uint256 e) internal pure returns (uint32) {
        uint256 m = philox(e & M32, site & M32, t, k0, k1) >> 8;
        if (m == 0) return 0;
        // m * 2^-24 with m = 1.f * 2^b: exponent field 127 - 24 + b, mantissa f (exact)
        uint256 b = 0;
        while (m >> (b + 1) != 0) {
            ++b;
        }
        return uint32(((103 + b) << 23) | ((m << (23 - b)) & 0x7FFFFF));
    }

    /// @dev The first output word of Philox4x32-10 (Random123) on counter (c0, c1, c2, 0) and
    ///      key (k0, k1): 10 rounds of two 32x32 -> 64-bit products, the key bumped by the Weyl
    ///      constants between rounds.
    function philox(uint256 c0, uint256 c1, uint256 c2, uint256 k0, uint256 k1) internal pure returns (uint256) {
        uint256 c3 = 0;
        for (uint256 r = 0; r < 10; ++r) {
            if (r != 0) {
                k0 = (k0 + 0x9E3779B9) & M32;
                k1 = (k1 + 0xBB67AE85) & M32;
            }
            uint256 p0 = 0xD2511F53 * c0;
            uint256 p1 = 0xCD9E8D57 * c2;
            (c0, c1, c2, c3) = ((p1 >> 32) ^ c1 ^ k0, p1 & M32, (p0 >> 32) ^ c3 ^ k1, p0 & M32);
        }
        return c0;
    }

    // ------------------------------------------------------------------ data movement

    /// @dev Codes 112–117: the input and its flat element that output element e copies.
    function moved(GraphNode memory n, uint256 e) internal pure returns (uint256 k, uint256 src) {
        uint8 op = n.op;
        if (op == OpCodes.V3_CONST || op == OpCodes.V3_RESHAPE) return (0, e);
        uint32[] memory ishape = n.inputs[0].shape;
        uint256[] memory idx = Shapes.unravel(e, n.shape);
        if (op == OpCodes.V3_EXPAND) return (0, Shapes.broadcastIndex(idx, ishape));
        if (op == OpCodes.V3_PERMUTE) {
            uint256[] memory from = new uint256[](idx.length);
            for (uint256 d = 0; d < idx.length; ++d) {
                from[n.attrs[d]] = idx[d];
            }
            return (0, Shapes.ravel(from, ishape));
        }
        uint256 dim = n.attrs[0];
        if (op == OpCodes.V3_SLICE) {
            idx[dim] = n.attrs[1] + n.attrs[2] * idx[dim];
            return (0, Shapes.ravel(idx, ishape));
        }
        if (op != OpCodes.V3_CAT) revert IOneStepProver.UnknownOp(op);
        for (k = 0; k < n.inputs.length; ++k) {
            uint32[] memory s = n.inputs[k].shape;
            if (idx[dim] < s[dim]) return (k, Shapes.ravel(idx, s));
            idx[dim] -= s[dim];
        }
        revert IOneStepProver.OutOfRange(e, 0);
    }
}
