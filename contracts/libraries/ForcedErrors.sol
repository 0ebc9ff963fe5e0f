// SPDX-License-Identifier: MIT
pragma solidity 0.8.37;

/// @title ForcedErrors
/// @notice Pure arithmetic of forced errors (docs/PROTOCOL.md §8, docs/INCENTIVES.md §2): which
///         rounds are forced and where, the seal a solver commits, and the jackpot's halving
///         split. Agents mirror these helpers (`agents/roles/forced.py`).
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

    /// @notice Whether the round of secret `r` under assignment seed `seed` is forced, and which
    ///         checkpoint is perturbed: `h = keccak256(abi.encode(r, seed))`, forced iff
    ///         `h mod 10⁴ < forcedErrorBps` and the job has at least two segments; the perturbed
    ///         checkpoint is `1 + (h >> 128) mod (segments − 1)`, in 1..segments−1, so neither the
    ///         initial nor the final state root is ever perturbed.
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

    /// @notice A verifier's verdict on forced checkpoint `position` from its sampled `segments`
    ///         and attested end roots `ends`. A segment is perturbed iff it ends at `position`
    ///         (an honest replay ends on the true entry `truth`, not the published one) or starts
    ///         there (an honest replay from the perturbed state cannot end on the published next
    ///         entry `next`). NONE if no sampled segment is perturbed; WRONG if at one of them the
    ///         verifier attested anything but `truth`, or attested `next`; else RIGHT.
    function verdict(uint64[] memory segments, bytes32[] calldata ends, uint64 position, bytes32 truth, bytes32 next)
        internal
        pure
        returns (uint8 result)
    {
        for (uint256 j = 0; j < segments.length; ++j) {
            if (segments[j] + 1 == position) {
                if (ends[j] != truth) return VERDICT_WRONG;
                result = VERDICT_RIGHT;
            } else if (segments[j] == position) {
                if (ends[j] == next) return VERDICT_WRONG;
                result = VERDICT_RIGHT;
            }
        }
    }
}
