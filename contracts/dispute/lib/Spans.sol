// SPDX-License-Identifier: MIT
pragma solidity 0.8.37;

/// @title Spans — the accumulator bisection of a disputed reduction (docs/PROTOCOL.md §7.10)
/// @notice A reduction's output element is the end of a chain of accumulators at positions
///         0 … K + 1: acc_0 is the operator's start value, acc_j = combine(acc_{j-1}, term_j)
///         for j = 1 … K, and acc_{K+1} = finish(acc_K) is the element. A disputed span (lo, hi)
///         has acc_lo agreed and acc_hi disputed; each round the defender posts the accumulators
///         at the `parts(lo, hi) - 1` interior cut points and the challenger names one part,
///         which becomes the span. When hi = lo + 1 one step is left and the chain recomputes it.
/// @dev Gas: a round posts at most FANOUT - 1 = 15 words (about 500 bytes of calldata) and keeps
///      one hash of them, so no move grows with K; the rounds are ceil(log_16(K + 1)). Sixteen
///      parts rather than two trade 4× fewer rounds (each two moves, ~45k gas of overhead) for
///      calldata that stays far below any single move's proof cost.
library Spans {
    /// @notice Parts a span is cut into per round (the span's length when shorter).
    uint256 internal constant FANOUT = 16;

    /// @notice The number of parts span (lo, hi) is cut into: min(FANOUT, hi - lo).
    /// @dev hi > lo always holds for a live span (the game opens (0, K + 1) with K >= 1, and a
    ///      part of a span longer than one is never empty), so this is at least 1.
    function parts(uint64 lo, uint64 hi) internal pure returns (uint256) {
        uint256 n = hi - lo;
        return n < FANOUT ? n : FANOUT;
    }

    /// @notice Cut point i (0 … n) of span (lo, hi) cut into n parts: lo + floor((hi - lo)·i / n).
    /// @dev Strictly increasing in i when n <= hi - lo, so every part holds at least one step.
    function cut(uint64 lo, uint64 hi, uint256 i, uint256 n) internal pure returns (uint64) {
        return lo + uint64((uint256(hi - lo) * i) / n);
    }

    /// @notice The commitment the defender's posted cut values are held under.
    function commit(uint32[] calldata values) internal pure returns (bytes32) {
        return keccak256(abi.encodePacked(values));
    }
}
