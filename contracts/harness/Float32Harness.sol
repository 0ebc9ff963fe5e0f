// SPDX-License-Identifier: MIT
pragma solidity 0.8.37;

import {Float32} from "../libraries/Float32.sol";
import {RepOps} from "../libraries/RepOps.sol";

/// @title Float32Harness — external entry points to the Float32 library for tests and benches
/// @notice Arguments and results are binary32 bit patterns as uint32. Batch forms apply the
///         operation element-wise so that one eth_call checks many cases.
contract Float32Harness {
    // Array length mismatches revert with RepOps.LengthMismatch(lengthA, lengthB).

    /// @notice An operation selector outside the documented range.
    /// @param op The selector that was given.
    error UnknownOp(uint256 op);

    /// @notice fl(a + b).
    /// @param a Left operand.
    /// @param b Right operand.
    /// @return The binary32 sum.
    function add(uint32 a, uint32 b) external pure returns (uint32) {
        return Float32.add(a, b);
    }

    /// @notice fl(a − b).
    /// @param a Left operand.
    /// @param b Right operand.
    /// @return The binary32 difference.
    function sub(uint32 a, uint32 b) external pure returns (uint32) {
        return Float32.sub(a, b);
    }

    /// @notice fl(a × b).
    /// @param a Left operand.
    /// @param b Right operand.
    /// @return The binary32 product.
    function mul(uint32 a, uint32 b) external pure returns (uint32) {
        return Float32.mul(a, b);
    }

    /// @notice fl(a ÷ b).
    /// @param a Dividend.
    /// @param b Divisor.
    /// @return The binary32 quotient.
    function div(uint32 a, uint32 b) external pure returns (uint32) {
        return Float32.div(a, b);
    }

    /// @notice Element-wise fl(a[i] + b[i]).
    /// @param a Left operands.
    /// @param b Right operands (same length).
    /// @return r The sums.
    function addMany(uint32[] calldata a, uint32[] calldata b)
        external
        pure
        returns (uint32[] memory r)
    {
        return _binaryMany(0, a, b);
    }

    /// @notice Element-wise fl(a[i] − b[i]).
    /// @param a Left operands.
    /// @param b Right operands (same length).
    /// @return r The differences.
    function subMany(uint32[] calldata a, uint32[] calldata b)
        external
        pure
        returns (uint32[] memory r)
    {
        return _binaryMany(1, a, b);
    }

    /// @notice Element-wise fl(a[i] × b[i]).
    /// @param a Left operands.
    /// @param b Right operands (same length).
    /// @return r The products.
    function mulMany(uint32[] calldata a, uint32[] calldata b)
        external
        pure
        returns (uint32[] memory r)
    {
        return _binaryMany(2, a, b);
    }

    /// @notice Element-wise fl(a[i] ÷ b[i]).
    /// @param a Dividends.
    /// @param b Divisors (same length).
    /// @return r The quotients.
    function divMany(uint32[] calldata a, uint32[] calldata b)
        external
        pure
        returns (uint32[] memory r)
    {
        return _binaryMany(3, a, b);
    }

    /// @notice dot(a, b) in the protocol order: acc = +0; acc = fl(acc + fl(a[i] × b[i])).
    /// @param a Left vector.
    /// @param b Right vector (same length).
    /// @return The binary32 dot product.
    function dot(uint32[] calldata a, uint32[] calldata b) external pure returns (uint32) {
        if (a.length != b.length) revert RepOps.LengthMismatch(a.length, b.length);
        return RepOps.dot(a, b);
    }

    /// @notice Element-wise binary library function selected by `op`: 0 add, 1 sub, 2 mul,
    ///         3 div, 4 max (row_max step), 5 gt, 6 lt, 7 ge, 8 le, 9 eq (booleans as 0/1),
    ///         10 maximum, 11 minimum (the v3 operators).
    /// @param op The function selector.
    /// @param a Left operands.
    /// @param b Right operands (same length).
    /// @return r The results.
    function binaryMany(uint256 op, uint32[] calldata a, uint32[] calldata b)
        external
        pure
        returns (uint32[] memory r)
    {
        return _binaryMany(op, a, b);
    }

    /// @notice Element-wise unary library function selected by `op`: 0 isNaN, 1 isInf,
    ///         2 isSubnormal, 3 canonical, 4 neg, 5 abs, 6 rint, 7 exponentField,
    ///         8 mantissaField (booleans as 0/1), 9 sqrt, 10 toI32, 11 fromI32.
    /// @param op The function selector.
    /// @param a Operands.
    /// @return r The results.
    function unaryMany(uint256 op, uint32[] calldata a) external pure returns (uint32[] memory r) {
        if (op > 11) revert UnknownOp(op);
        r = new uint32[](a.length);
        for (uint256 i = 0; i < a.length; ++i) {
            uint32 x = a[i];
            uint32 y;
            if (op == 0) y = Float32.isNaN(x) ? 1 : 0;
            else if (op == 1) y = Float32.isInf(x) ? 1 : 0;
            else if (op == 2) y = Float32.isSubnormal(x) ? 1 : 0;
            else if (op == 3) y = Float32.canonical(x);
            else if (op == 4) y = Float32.neg(x);
            else if (op == 5) y = Float32.abs(x);
            else if (op == 6) y = Float32.rint(x);
            else if (op == 7) y = Float32.exponentField(x);
            else if (op == 8) y = Float32.mantissaField(x);
            else if (op == 9) y = Float32.sqrt(x);
            else if (op == 10) y = Float32.toI32(x);
            else y = Float32.fromI32(x);
            r[i] = y;
        }
    }

    /// @notice Element-wise Float32.toInt (exact integer value, truncated toward zero).
    /// @param a Operands.
    /// @return r The integers.
    function toIntMany(uint32[] calldata a) external pure returns (int256[] memory r) {
        r = new int256[](a.length);
        for (uint256 i = 0; i < a.length; ++i) {
            r[i] = Float32.toInt(a[i]);
        }
    }

    /// @notice Element-wise Float32.fromInt (correctly rounded int → binary32).
    /// @param n Integers.
    /// @return r The binary32 patterns.
    function fromIntMany(int256[] calldata n) external pure returns (uint32[] memory r) {
        r = new uint32[](n.length);
        for (uint256 i = 0; i < n.length; ++i) {
            r[i] = Float32.fromInt(n[i]);
        }
    }

    /// @notice Element-wise Float32.pow2 (exact 2^n).
    /// @param n Exponents.
    /// @return r The binary32 patterns.
    function pow2Many(int256[] calldata n) external pure returns (uint32[] memory r) {
        r = new uint32[](n.length);
        for (uint256 i = 0; i < n.length; ++i) {
            r[i] = Float32.pow2(n[i]);
        }
    }

    /// @notice Gas used by each call of a binary library function (op as in binaryMany,
    ///         0..3, 10, 11), measured with gasleft() immediately around the library call, minus
    ///         the cost of an empty gasleft() pair measured in the same loop (see bench/).
    /// @param op 0 add, 1 sub, 2 mul, 3 div, 10 maximum, 11 minimum.
    /// @param a Left operands.
    /// @param b Right operands (same length).
    /// @return gasUsed The per-call gas.
    /// @return sink XOR of all results (keeps the calls observable to the optimizer).
    function gasOfMany(uint256 op, uint32[] calldata a, uint32[] calldata b)
        external
        view
        returns (uint256[] memory gasUsed, uint32 sink)
    {
        if (a.length != b.length) revert RepOps.LengthMismatch(a.length, b.length);
        if (op > 3 && op != 10 && op != 11) revert UnknownOp(op);
        gasUsed = new uint256[](a.length);
        for (uint256 i = 0; i < a.length; ++i) {
            uint32 x = a[i];
            uint32 y = b[i];
            uint32 r;
            uint256 g0;
            uint256 g1;
            uint256 g2;
            if (op == 0) {
                g0 = gasleft();
                g1 = gasleft();
                r = Float32.add(x, y);
                g2 = gasleft();
            } else if (op == 1) {
                g0 = gasleft();
                g1 = gasleft();
                r = Float32.sub(x, y);
                g2 = gasleft();
            } else if (op == 2) {
                g0 = gasleft();
                g1 = gasleft();
                r = Float32.mul(x, y);
                g2 = gasleft();
            } else if (op == 3) {
                g0 = gasleft();
                g1 = gasleft();
                r = Float32.div(x, y);
                g2 = gasleft();
            } else if (op == 10) {
                g0 = gasleft();
                g1 = gasleft();
                r = Float32.maximum(x, y);
                g2 = gasleft();
            } else {
                g0 = gasleft();
                g1 = gasleft();
                r = Float32.minimum(x, y);
                g2 = gasleft();
            }
            // (g1 - g2) includes one gasleft() plus the call; (g0 - g1) is one bare gasleft().
            gasUsed[i] = (g1 - g2) - (g0 - g1);
            sink ^= r;
        }
    }

    /// @notice Gas used by each call of a unary library function (op as in unaryMany: 9 sqrt,
    ///         10 toI32, 11 fromI32), measured as gasOfMany does.
    /// @param op The function selector (9..11).
    /// @param a Operands.
    /// @return gasUsed The per-call gas.
    /// @return sink XOR of all results (keeps the calls observable to the optimizer).
    function gasOfUnaryMany(uint256 op, uint32[] calldata a)
        external
        view
        returns (uint256[] memory gasUsed, uint32 sink)
    {
        if (op < 9 || op > 11) revert UnknownOp(op);
        gasUsed = new uint256[](a.length);
        for (uint256 i = 0; i < a.length; ++i) {
            uint32 x = a[i];
            uint32 r;
            uint256 g0;
            uint256 g1;
            uint256 g2;
            if (op == 9) {
                g0 = gasleft();
                g1 = gasleft();
                r = Float32.sqrt(x);
                g2 = gasleft();
            } else if (op == 10) {
                g0 = gasleft();
                g1 = gasleft();
                r = Float32.toI32(x);
                g2 = gasleft();
            } else {
                g0 = gasleft();
                g1 = gasleft();
                r = Float32.fromI32(x);
                g2 = gasleft();
            }
            gasUsed[i] = (g1 - g2) - (g0 - g1);
            sink ^= r;
        }
    }

    /// @notice Gas of RepOps.dot over the given vectors, measured with gasleft() around the call
    ///         minus one bare gasleft(). The figure includes copying both calldata vectors into
    ///         memory (RepOps.dot takes memory arrays), about 2·K words.
    /// @param a Left vector.
    /// @param b Right vector (same length).
    /// @return gasUsed The gas of the dot call.
    /// @return result The dot product.
    function gasOfDot(uint32[] calldata a, uint32[] calldata b)
        external
        view
        returns (uint256 gasUsed, uint32 result)
    {
        if (a.length != b.length) revert RepOps.LengthMismatch(a.length, b.length);
        uint256 g0 = gasleft();
        uint256 g1 = gasleft();
        result = RepOps.dot(a, b);
        uint256 g2 = gasleft();
        gasUsed = (g1 - g2) - (g0 - g1);
    }

    function _binaryMany(uint256 op, uint32[] calldata a, uint32[] calldata b)
        private
        pure
        returns (uint32[] memory r)
    {
        if (a.length != b.length) revert RepOps.LengthMismatch(a.length, b.length);
        if (op > 11) revert UnknownOp(op);
        r = new uint32[](a.length);
        for (uint256 i = 0; i < a.length; ++i) {
            uint32 x = a[i];
            uint32 y = b[i];
            uint32 z;
            if (op == 0) z = Float32.add(x, y);
            else if (op == 1) z = Float32.sub(x, y);
            else if (op == 2) z = Float32.mul(x, y);
            else if (op == 3) z = Float32.div(x, y);
            else if (op == 4) z = Float32.max(x, y);
            else if (op == 5) z = Float32.gt(x, y) ? 1 : 0;
            else if (op == 6) z = Float32.lt(x, y) ? 1 : 0;
            else if (op == 7) z = Float32.ge(x, y) ? 1 : 0;
            else if (op == 8) z = Float32.le(x, y) ? 1 : 0;
            else if (op == 9) z = Float32.eq(x, y) ? 1 : 0;
            else if (op == 10) z = Float32.maximum(x, y);
            else z = Float32.minimum(x, y);
            r[i] = z;
        }
    }
}
