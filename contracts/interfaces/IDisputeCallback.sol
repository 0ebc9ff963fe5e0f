// SPDX-License-Identifier: MIT
pragma solidity 0.8.37;

/// @title IDisputeCallback
/// @notice The dispute hook, job-manager side (docs/PROTOCOL.md §6.6): how a dispute game
///         reports its result. Implemented by `JobManager`.
interface IDisputeCallback {
    /// @notice The caller is not the arbiter wired at deployment.
    error NotArbiter(address caller);
    /// @notice No open dispute has this game id, or it belongs to another unit.
    error UnknownGame(uint256 gameId, uint256 unitId);

    /// @notice Records the result of game `gameId` over unit `unitId` and settles the bonds.
    /// @dev Only the arbiter. Each game resolves once (a second call reverts `UnknownGame`).
    ///      `challengerWon`: the solver's commitment was shown wrong. Then the solver's locked
    ///      collateral is slashed (`challengerRewardBps` of it credited to the challenger, the rest
    ///      to the jackpot), the challenger's bond is credited back, the verifiers' locks are
    ///      released, and the unit re-opens for claims with a fresh claim window — except while
    ///      the round may be forced and its reveal slot runs (forcedErrorBps > 0, no forced error
    ///      revealed, at most challenge deadline + 2 · revealWindow): then the result is held
    ///      (`DisputeResultHeld`) and applied by `settleDispute` after the slot, unless the reveal
    ///      voids the dispute first.
    ///      Otherwise the challenger's bond is forfeited (`challengerRewardBps` of it credited to
    ///      the solver, the rest to the jackpot) and the unit returns to verification with its
    ///      challenge deadline at least `disputeGrace` seconds away.
    function onDisputeResolved(uint256 gameId, uint256 unitId, bool challengerWon) external;
}
