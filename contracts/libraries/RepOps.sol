// SPDX-License-Identifier: MIT
pragma solidity 0.8.37;

import {Float32} from "./Float32.sol";

/// @title RepOps — one-element references of every training-step operator (PROTOCOL §2, §4)
/// @notice Each function recomputes ONE output element of one engine operator from the input
///         elements it depends on, with exactly the protocol's evaluation order, so the chain can
///         compare it bit-for-bit with a committed value. Values are binary32 bit patterns
///         (uint32); NaN results are the canonical 0x7FC00000.
/// @dev `transpose` and `gather_rows` are bit copies (T[j,i] = A[i,j], G[r,c] = D[idx[r],c]):
///      their reference is the element itself, so they have no function here; the element's
///      position is what a dispute checks (TensorMerkle) and `batchIndex` gives idx[r].
library RepOps {
    using Float32 for uint32;

    /// @notice Two operand vectors of one reduction have different lengths.
    /// @param lengthA Length of the first vector.
    /// @param lengthB Length of the second vector.
    error LengthMismatch(uint256 lengthA, uint256 lengthB);

    /// @notice row_max or mean of an empty row (no initial element defined).
    error EmptyRow();

    /// @notice idx(seed, t, j) with N = 0 examples.
    error EmptyDataset();

    /// @notice Shard `shard` of `shards` does not exist (s ≥ S, or S = 0).
    /// @param shards S.
    /// @param shard  s.
    error InvalidShard(uint256 shards, uint256 shard);

    // exp32 constants (PROTOCOL §2.1), bit patterns
    uint32 internal constant EXP_HI = 0x42B20000; // 89.0
    uint32 internal constant EXP_LO = 0xC2D00000; // −104.0
    uint32 internal constant INV_LN2 = 0x3FB8AA3B;
    uint32 internal constant LN2_HI = 0x3F317200;
    uint32 internal constant LN2_LO = 0x35BFBE8E;
    uint32 internal constant C0 = 0x3F800000;
    uint32 internal constant C1 = 0x3F800000;
    uint32 internal constant C2 = 0x3F000000;
    uint32 internal constant C3 = 0x3E2AAAAB;
    uint32 internal constant C4 = 0x3D2AAAAB;
    uint32 internal constant C5 = 0x3C088889;
    uint32 internal constant C6 = 0x3AB60B61;
    uint32 internal constant C7 = 0x39500D01;
    // log32 constants (PROTOCOL §2.2)
    uint32 internal constant SQRT2 = 0x3FB504F3;
    uint32 internal constant L1 = 0x3F2AAAAB;
    uint32 internal constant L2 = 0x3ECCCCCD;
    uint32 internal constant L3 = 0x3E924925;
    uint32 internal constant L4 = 0x3E638E39;
    // tanh32 / erf32 constants (agents/training/registry.py TANH_BIG, ERF_*), bit patterns
    uint32 internal constant TANH_BIG = 0x41100000; // 9.0
    uint32 internal constant ERF_BIG = 0x40800000; // 4.0
    uint32 internal constant ERF_P = 0x3EA7BA05; // 0.3275911
    uint32 internal constant ERF_A5 = 0x3F87DC22; // 1.061405429
    uint32 internal constant ERF_A4 = 0xBFBA00E3; // −1.453152027
    uint32 internal constant ERF_A3 = 0x3FB5F0E3; // 1.421413741
    uint32 internal constant ERF_A2 = 0xBE91A98E; // −0.284496736
    uint32 internal constant ERF_A1 = 0x3E827906; // 0.254829592

    // ---------------------------------------------------------------------------------------
    // Reductions
    // ---------------------------------------------------------------------------------------

    /// @notice dot(a, b): acc = +0; for i in order: acc = fl(acc + fl(a[i] × b[i])) (no FMA).
    ///         One element of matmul_nt: C[i,j] = dot(A[i,:], B[j,:]).
    /// @param a Left vector (a row of A).
    /// @param b Right vector (a row of B), same length.
    /// @return acc The binary32 dot product (+0 for K = 0).
    function dot(uint32[] memory a, uint32[] memory b) internal pure returns (uint32 acc) {
        uint256 n = a.length;
        if (n != b.length) revert LengthMismatch(n, b.length);
        for (uint256 i = 0; i < n;) {
            acc = acc.add(a[i].mul(b[i]));
            unchecked {
                ++i; // i < n <= memory size, cannot overflow
            }
        }
    }

    /// @notice One element of row_sum: acc = +0; for j in order: acc = fl(acc + row[j]).
    /// @param row The row A[i,:].
    /// @return acc The binary32 sum (+0 for an empty row).
    function rowSum(uint32[] memory row) internal pure returns (uint32 acc) {
        uint256 n = row.length;
        for (uint256 j = 0; j < n;) {
            acc = acc.add(row[j]);
            unchecked {
                ++j; // j < n, cannot overflow
            }
        }
    }

    /// @notice One element of row_max: NaN if any element is NaN; else m = row[0] and
    ///         m = row[j] whenever row[j] > m (so ties, including ±0, keep the earlier one).
    /// @param row The row A[i,:]; must not be empty.
    /// @return m The maximum.
    function rowMax(uint32[] memory row) internal pure returns (uint32 m) {
        uint256 n = row.length;
        if (n == 0) revert EmptyRow();
        m = row[0];
        for (uint256 j = 1; j < n;) {
            m = m.max(row[j]); // NaN-propagating, keeps m on ties
            unchecked {
                ++j; // j < n, cannot overflow
            }
        }
        m = m.canonical(); // a lone NaN row[0] with n = 1
    }

    /// @notice mean over a (1,B) row: fl(row_sum(row) / B), B = row length as binary32.
    /// @param row The row; must not be empty.
    /// @return The mean.
    function mean(uint32[] memory row) internal pure returns (uint32) {
        if (row.length == 0) revert EmptyRow();
        return rowSum(row).div(Float32.fromUint(row.length));
    }

    /// @notice One element of average(P_1..P_S, w): acc = +0; acc = fl(acc + fl(w_s × P_s)).
    /// @param p The S values P_s[i,j] in aggregation order.
    /// @param w The S weights w_s (binary32).
    /// @return acc The weighted sum.
    function average(uint32[] memory p, uint32[] memory w) internal pure returns (uint32 acc) {
        uint256 n = p.length;
        if (n != w.length) revert LengthMismatch(n, w.length);
        for (uint256 s = 0; s < n;) {
            acc = acc.add(w[s].mul(p[s]));
            unchecked {
                ++s; // s < n, cannot overflow
            }
        }
    }

    // ---------------------------------------------------------------------------------------
    // Element-wise operators
    // ---------------------------------------------------------------------------------------

    /// @notice add_row element: fl(A[i,j] + b[0,j]).
    /// @param a A[i,j].
    /// @param bj b[0,j].
    /// @return The sum.
    function addRow(uint32 a, uint32 bj) internal pure returns (uint32) {
        return a.add(bj);
    }

    /// @notice sub_col element: fl(A[i,j] − c[0,i]).
    /// @param a A[i,j].
    /// @param ci c[0,i].
    /// @return The difference.
    function subCol(uint32 a, uint32 ci) internal pure returns (uint32) {
        return a.sub(ci);
    }

    /// @notice div_col element: fl(A[i,j] / c[0,i]).
    /// @param a A[i,j].
    /// @param ci c[0,i].
    /// @return The quotient.
    function divCol(uint32 a, uint32 ci) internal pure returns (uint32) {
        return a.div(ci);
    }

    /// @notice relu element: x > 0 ? x : (x is NaN ? NaN : +0).
    /// @param x X[i,j].
    /// @return The activation.
    function relu(uint32 x) internal pure returns (uint32) {
        if (x.isNaN()) return Float32.NAN;
        return x.gt(Float32.ZERO) ? x : Float32.ZERO;
    }

    /// @notice relu_bwd element: x > 0 ? g : (x is NaN ? NaN : +0).
    /// @param g G[i,j] (incoming gradient).
    /// @param x X[i,j] (pre-activation).
    /// @return The gradient (canonical NaN if g is a NaN passed through).
    function reluBwd(uint32 g, uint32 x) internal pure returns (uint32) {
        if (x.isNaN()) return Float32.NAN;
        return x.gt(Float32.ZERO) ? g.canonical() : Float32.ZERO;
    }

    /// @notice xent_grad element: fl(fl(P[b,c] − (c == y[b] ? 1 : 0)) / B).
    /// @param p P[b,c] (softmax probability).
    /// @param c The class index of the element.
    /// @param label y[b].
    /// @param batch B, the batch size (rows of P), converted to binary32.
    /// @return The gradient element.
    function xentGrad(uint32 p, uint256 c, uint256 label, uint256 batch)
        internal
        pure
        returns (uint32)
    {
        return p.sub(c == label ? Float32.ONE : Float32.ZERO).div(Float32.fromUint(batch));
    }

    /// @notice nll element: fl(L[0,b] − S[b, y[b]]).
    /// @param l L[0,b], the log of row b's sum.
    /// @param s S[b, y[b]], the shifted logit of the label.
    /// @return The loss element.
    function nll(uint32 l, uint32 s) internal pure returns (uint32) {
        return l.sub(s);
    }

    /// @notice momentum element: fl(fl(μ × V) + G).
    /// @param mu The job's momentum μ (binary32).
    /// @param v V[i,j], the old momentum buffer.
    /// @param g G[i,j], the gradient.
    /// @return The new momentum buffer element V'.
    function momentum(uint32 mu, uint32 v, uint32 g) internal pure returns (uint32) {
        return mu.mul(v).add(g);
    }

    /// @notice sgd element: fl(W − fl(η × V')).
    /// @param lr The job's learning rate η (binary32).
    /// @param w W[i,j].
    /// @param vNew V'[i,j], the new momentum buffer.
    /// @return The new weight.
    function sgd(uint32 lr, uint32 w, uint32 vNew) internal pure returns (uint32) {
        return w.sub(lr.mul(vNew));
    }

    // ---------------------------------------------------------------------------------------
    // exp32 / log32
    // ---------------------------------------------------------------------------------------

    /// @notice exp32(x) exactly as PROTOCOL §2.1.
    /// @param x Operand.
    /// @return The binary32 result.
    function exp32(uint32 x) internal pure returns (uint32) {
        if (x.isNaN()) return Float32.NAN;
        if (x.gt(EXP_HI)) return Float32.POS_INF;
        if (x.lt(EXP_LO)) return Float32.ZERO;
        uint32 nf = x.mul(INV_LN2).rint(); // integral, |n| <= 151
        uint32 r = x.sub(nf.mul(LN2_HI)).sub(nf.mul(LN2_LO));
        uint32 p = C7;
        p = p.mul(r).add(C6);
        p = p.mul(r).add(C5);
        p = p.mul(r).add(C4);
        p = p.mul(r).add(C3);
        p = p.mul(r).add(C2);
        p = p.mul(r).add(C1);
        p = p.mul(r).add(C0);
        int256 n = nf.toInt(); // exact: nf is integral and finite here
        if (n > 127) return p.mul(Float32.pow2(127)).mul(Float32.pow2(n - 127));
        if (n < -126) return p.mul(Float32.pow2(n + 126)).mul(Float32.pow2(-126));
        return p.mul(Float32.pow2(n));
    }

    /// @notice log32(x) exactly as PROTOCOL §2.2.
    /// @param x Operand.
    /// @return The binary32 result.
    function log32(uint32 x) internal pure returns (uint32) {
        if (x.isNaN() || x.lt(Float32.ZERO)) return Float32.NAN;
        if (x & Float32.ABS_MASK == 0) return Float32.NEG_INF;
        if (x == Float32.POS_INF) return Float32.POS_INF;
        int256 e = 0;
        if (x.exponentField() == 0) {
            x = x.mul(Float32.pow2(23)); // subnormal: exact scaling into the normal range
            e = -23;
        }
        // exponentField <= 254 here: the sum stays tiny, no overflow in int256
        e = e + int256(uint256(x.exponentField())) - 127;
        uint32 m = x.mantissaField() | Float32.ONE; // m in [1, 2), exact
        if (m.gt(SQRT2)) {
            m = m.mul(Float32.HALF);
            e = e + 1;
        }
        uint32 f = m.sub(Float32.ONE);
        // Soft-float ops, not integer arithmetic: the protocol fixes this order (PROTOCOL §2.2).
        // slither-disable-start divide-before-multiply
        uint32 s = f.div(Float32.TWO.add(f));
        uint32 z = s.mul(s);
        uint32 rr = z.mul(L1.add(z.mul(L2.add(z.mul(L3.add(z.mul(L4)))))));
        uint32 lm = s.mul(Float32.TWO.add(rr));
        // slither-disable-end divide-before-multiply
        uint32 ef = Float32.fromInt(e); // |e| <= 150: exact
        return ef.mul(LN2_HI).add(lm.add(ef.mul(LN2_LO)));
    }

    /// @notice The v3 `tanh` operator exactly as the registry's order (PROTOCOL §2.6):
    ///         a = |x|; a > 9 ? 1 : fl(1 − fl(2 / fl(exp32(fl(a + a)) + 1))); the sign of x
    ///         copied on (tanh(−0) = −0); NaN gives the canonical NaN.
    /// @param x Operand.
    /// @return The binary32 result.
    function tanh32(uint32 x) internal pure returns (uint32) {
        if (x.isNaN()) return Float32.NAN;
        uint32 a = x & Float32.ABS_MASK;
        uint32 r = Float32.ONE;
        if (!a.gt(TANH_BIG)) {
            // a <= 9: exp32(2a) is in [1, 6.6e7], so r is finite
            r = Float32.ONE.sub(Float32.TWO.div(exp32(a.add(a)).add(Float32.ONE)));
        }
        return r ^ (x & Float32.SIGN_MASK); // −r for a negative x (r is never NaN here)
    }

    /// @notice The v3 `erf` operator exactly as the registry's order (PROTOCOL §2.6,
    ///         Abramowitz & Stegun 7.1.26): a = |x|; a >= 4 ? 1 :
    ///         t = fl(1 / fl(1 + fl(p · a))), poly = Horner over a5..a1 in t, times t,
    ///         fl(1 − fl(poly · exp32(−fl(a · a)))); the sign of x copied on; NaN gives the
    ///         canonical NaN.
    /// @param x Operand.
    /// @return The binary32 result.
    function erf32(uint32 x) internal pure returns (uint32) {
        if (x.isNaN()) return Float32.NAN;
        uint32 a = x & Float32.ABS_MASK;
        uint32 r = Float32.ONE;
        if (a.lt(ERF_BIG)) {
            // Soft-float ops, not integer arithmetic: the registry fixes this order.
            // slither-disable-next-line divide-before-multiply
            uint32 t = Float32.ONE.div(Float32.ONE.add(ERF_P.mul(a)));
            uint32 p = ERF_A5.mul(t).add(ERF_A4);
            p = p.mul(t).add(ERF_A3);
            p = p.mul(t).add(ERF_A2);
            p = p.mul(t).add(ERF_A1);
            p = p.mul(t);
            // a < 4: t in (0.43, 1] and exp32 in (0, 1]: r is finite
            r = Float32.ONE.sub(p.mul(exp32(a.mul(a) ^ Float32.SIGN_MASK)));
        }
        return r ^ (x & Float32.SIGN_MASK); // −r for a negative x (r is never NaN here)
    }

    // ---------------------------------------------------------------------------------------
    // Batch schedule (PROTOCOL §4)
    // ---------------------------------------------------------------------------------------

    /// @notice idx(seed, t, j) = uint256(keccak256(abi.encode(seed, t, j))) mod N.
    /// @param seed The job's data seed.
    /// @param t The step (0-based: the step from S_t to S_{t+1}).
    /// @param j The position in the batch, 0..B−1.
    /// @param n N, the number of training examples (> 0).
    /// @return The example index.
    function batchIndex(uint256 seed, uint256 t, uint256 j, uint256 n)
        internal
        pure
        returns (uint256)
    {
        if (n == 0) revert EmptyDataset();
        return uint256(keccak256(abi.encode(seed, t, j))) % n;
    }

    /// @notice idx_s(seed, t, j) of PROTOCOL §4: the example index at batch position j of step
    ///         t for shard `shard` of `shards` (examples i with i mod S = s, N_s of them):
    ///         `S · batchIndex(seed, t, j·S + s, N_s) + s`. With S = 1 this is `batchIndex`.
    /// @param shards S ≥ 1.
    /// @param shard  s < S.
    function shardBatchIndex(uint256 seed, uint256 t, uint256 j, uint256 n, uint256 shards, uint256 shard)
        internal
        pure
        returns (uint256)
    {
        if (shard >= shards) revert InvalidShard(shards, shard);
        // N_s = ceil((N − s) / S); a shard without examples has no batch.
        if (shard >= n) revert EmptyDataset();
        uint256 shardSize = (n - shard + shards - 1) / shards;
        return shards * batchIndex(seed, t, j * shards + shard, shardSize) + shard;
    }
}
