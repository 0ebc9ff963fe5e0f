// SPDX-License-Identifier: MIT
pragma solidity 0.8.37;

/// @title MarketMath
/// @notice Pure arithmetic of the job manager: payout split, weighted draw, segment sampling
///         (docs/PROTOCOL.md §6.3–§6.5).
library MarketMath {
    uint256 internal constant BPS = 10_000;

    /// @notice Splits a unit's `reward`: the verifiers' `fee`, the protocol `tax`, the rest to the
    ///         solver. The caller guarantees `reward > fee + tax` (checked when the job is posted).
    function payout(uint256 reward, uint256 fee, uint256 taxBps)
        internal
        pure
        returns (uint256 solverPay, uint256 tax)
    {
        tax = reward * taxBps / BPS;
        solverPay = reward - fee - tax;
    }

    /// @notice `amount * bps / 10_000`.
    function share(uint256 amount, uint256 bps) internal pure returns (uint256) {
        return amount * bps / BPS;
    }

    /// @notice The per-unit verifier lock S (PROTOCOL §8, INCENTIVES §3.2): `max(floor, solverPay ·
    ///         (2m' − 1) · lazySlashFactor / n)`, m' = min(m, n) the segments each verifier replays
    ///         of the n. Skipping one of them then risks more than a replay costs (forced errors).
    ///         The caller guarantees m >= 1 and n >= 1 (checked at deployment and posting).
    /// @dev solverPay < 2^96, 2m' − 1 < 2^9 and lazySlashFactor < 2^16: the product cannot overflow.
    function verifierLock(uint256 solverPay, uint256 m, uint256 n, uint256 lazySlashFactor, uint256 floor)
        internal
        pure
        returns (uint256)
    {
        uint256 sampled = m < n ? m : n;
        uint256 lazy = solverPay * (2 * sampled - 1) * lazySlashFactor / n;
        return lazy > floor ? lazy : floor;
    }

    /// @notice Index drawn from `weights` with probability proportional to its weight, using the
    ///         uniform word `rand`; uniform over the indices if every weight is zero.
    /// @dev The modulo bias is below total / 2^256, negligible.
    function pickWeighted(uint96[] memory weights, uint256 rand) internal pure returns (uint256) {
        uint256 total = 0;
        for (uint256 i = 0; i < weights.length; ++i) {
            total += weights[i];
        }
        if (total == 0) return rand % weights.length;
        uint256 r = rand % total;
        uint256 acc = 0;
        for (uint256 i = 0; i < weights.length; ++i) {
            acc += weights[i];
            if (r < acc) return i;
        }
        // Unreachable: r < total == acc after the loop.
        return weights.length - 1;
    }

    /// @notice The segments verifier `verifier` replays: `count` DISTINCT segments of
    ///         `numSegments` (the caller guarantees `count <= numSegments`), drawn uniformly by
    ///         Robert Floyd's algorithm: for `j = numSegments − count … numSegments − 1`,
    ///         `t = uint256(keccak256(abi.encode(uint256(seed), verifier, j))) % (j + 1)`; take t
    ///         unless an earlier step took it, else take j (never taken: earlier steps took values
    ///         <= their own j < this j). Segment i runs from checkpoint i (step i*k) to i+1.
    /// @dev O(count²) comparisons, no numSegments-sized array, no rejection loop. Every count-subset
    ///      is equally likely (Floyd); the modulo bias is below (j + 1) / 2^256, negligible.
    function sampleSegments(uint64 seed, address verifier, uint256 count, uint256 numSegments)
        internal
        pure
        returns (uint64[] memory segments)
    {
        segments = new uint64[](count);
        uint256 j = numSegments - count;
        for (uint256 i = 0; i < count; ++i) {
            uint256 t = uint256(keccak256(abi.encode(uint256(seed), verifier, j))) % (j + 1);
            for (uint256 q = 0; q < i; ++q) {
                if (segments[q] == t) {
                    t = j;
                    break;
                }
            }
            // t <= j < numSegments <= 2^64 - 1 (a uint64 count), so t fits uint64.
            segments[i] = uint64(t);
            ++j;
        }
    }
}
