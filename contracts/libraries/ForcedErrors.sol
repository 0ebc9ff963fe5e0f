// SPDX-License-Identifier: MIT
pragma solidity 0.8.37;

/// @title ForcedErrors
/// @notice Pure arithmetic of forced errors (docs/PROTOCOL.md §8, docs/INCENTIVES.md §2): which
///         rounds are forced and where, the seal a solver commits, and the jackpot's halving
///         split. Agents call them through the judge's views (`isForced`, `perturbedCheckpoints`).
/// @dev A solver commits `keccak256(abi.encode(r))` with its claim, so its secret r is fixed
///      before the assignment seed exists; the seed (drawn after the claims closed) and r then
///      decide the round, which only the solver can compute until it reveals r.
library ForcedErrors {
    uint256 internal constant BPS = 10_000;
    /// @notice Verdicts on a drawn verifier in a forced round (`verdict`).
    uint8 internal constant VERDICT_NONE = 0;
    uint8 internal constant VERDICT_RIGHT = 1;
    uint8 internal constant VERDICT_WRONG = 2;

    /// @notice `keccak256(abi.encode(r))`: what a claim commits.
    function secretHash(bytes32 r) internal pure returns (bytes32) {
        return keccak256(abi.encode(r));
    }

    /// @notice `keccak256(abi.encode(trueRoot, r))`: what a commitment seals (the true checkpoint
    ///         root C, whatever root was published).
    function seal(bytes32 trueRoot, bytes32 r) internal pure returns (bytes32) {
        return keccak256(abi.encode(trueRoot, r));
    }

    /// @notice Whether the round of secret `r` under assignment seed `seed` is forced, and its
    ///         anchor, a checkpoint it always perturbs (`isPerturbed` adds others):
    ///         `h = keccak256(abi.encode(r, seed))`, forced iff `h mod 10⁴ < forcedErrorBps` and
    ///         the job has at least two segments; the anchor is `1 + (h >> 128) mod (segments − 1)`,
    ///         in 1..segments−1, so neither the initial nor the final state root is perturbed.
    function isForced(bytes32 r, uint64 seed, uint256 forcedErrorBps, uint256 segments)
        internal
        pure
        returns (bool forced, uint64 position)
    {
        if (segments < 2) return (false, 0);
        uint256 h = uint256(keccak256(abi.encode(r, seed)));
        if (h % BPS >= forcedErrorBps) return (false, 0);
        // position <= segments - 1 < 2^64 (segments is T/k, a uint64 quotient).
        return (true, uint64(1 + (h >> 128) % (segments - 1)));
    }

    /// @notice What each of `catchers` catchers of a forced error is paid from a jackpot holding
    ///         `balance`: `J / 2^(catchers − 1)` (the halving split, so more identities never pay
    ///         more in total), at most an equal share of the balance.
    function catcherShare(uint256 j, uint256 catchers, uint256 balance) internal pure returns (uint256) {
        if (catchers == 0) return 0;
        uint256 share = catchers > 255 ? 0 : j >> (catchers - 1);
        uint256 cap = balance / catchers;
        return share < cap ? share : cap;
    }

    /// @notice The jackpot self-funding bound checked by `postJob`: the expected payout per unit,
    ///         `fee · forcedErrorBps / 10⁴` (J = the fee), must not exceed the tax it brings in,
    ///         `reward · taxBps / 10⁴`.
    function feeWithinJackpotCap(uint256 fee, uint256 reward, uint256 forcedErrorBps, uint256 taxBps)
        internal
        pure
        returns (bool)
    {
        return fee * forcedErrorBps <= reward * taxBps;
    }

    /// @notice One forced round's randomness: the solver's secret r, the assignment seed, the
    ///         anchor checkpoint `isForced` returns, the job's segment count n, and the
    ///         denominator 2m' − 1 of the perturbation rate ρ = 1 / (2m' − 1) (`perturbDenominator`).
    struct Round {
        bytes32 secret;
        uint64 seed;
        uint64 anchor;
        uint256 segments;
        uint256 rhoDenominator;
    }

    /// @notice 2m' − 1 with m' = min(segmentsPerVerifier, segments) the segments a verifier
    ///         samples: ρ = 1 / (2m' − 1) maximises the risk of skipping one (INCENTIVES §3.2).
    /// @dev m' >= 1: the config refuses segmentsPerVerifier = 0 and a job has a segment.
    function perturbDenominator(uint256 segmentsPerVerifier, uint256 segments) internal pure returns (uint256) {
        uint256 m = segmentsPerVerifier < segments ? segmentsPerVerifier : segments;
        return 2 * m - 1;
    }

    /// @notice Whether a forced round perturbs `checkpoint`: the anchor always, each other one of
    ///         1..n−1 iff `keccak256(abi.encode(r, seed, checkpoint)) mod (2m' − 1) = 0`. The
    ///         initial and the final root never are. With the anchor the risk of skipping a
    ///         segment is exactly the model's ρ(1 − ρ)^(2m − 2) bound (INCENTIVES §3.7).
    function isPerturbed(Round memory round, uint256 checkpoint) internal pure returns (bool) {
        if (checkpoint == 0 || checkpoint >= round.segments) return false;
        if (checkpoint == round.anchor) return true;
        return uint256(keccak256(abi.encode(round.secret, round.seed, checkpoint))) % round.rhoDenominator == 0;
    }
}
