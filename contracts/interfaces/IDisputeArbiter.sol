// SPDX-License-Identifier: MIT
pragma solidity 0.8.37;

/// @title IDisputeArbiter
/// @notice The dispute hook, arbiter side (docs/PROTOCOL.md §6.6): the job manager opens one
///         dispute game per challenge through `openGame`; the game runs on its own clocks and ends
///         by calling `IDisputeCallback.onDisputeResolved` on the job manager exactly once.
/// @dev Money never moves through the arbiter: the job manager holds the challenger's bond and the
///      node registry holds the solver's locked collateral. The arbiter only decides who lied.
///      Contract between the two sides:
///      - `openGame` is called only by the job manager wired at deployment; it MUST revert for any
///        other caller and MUST return a game id that it never returned before (ids are nonzero).
///      - The arbiter MUST call `onDisputeResolved(gameId, unitId, challengerWon)` exactly once per
///        game, from the arbiter address, with the `unitId` passed to `openGame`. Silence of a
///        party (a missed move deadline) MUST resolve against that party, so every game ends.
///      - `challengerWon == true` means the solver's commitment (checkpoint root, count or final
///        state root) is wrong: the job manager slashes the solver's collateral, returns the bond
///        to the challenger with a reward, and re-opens the unit for claims.
///        `challengerWon == false` means the challenger failed to show a fault: the bond is
///        forfeited (part to the solver, the rest to the jackpot) and the unit's verification
///        continues, its challenge window extended by the manager's `disputeGrace`.
///      - The arbiter MAY read any commitment it needs through the job manager's views
///        (`IJobManager.getUnit`, `IJobManager.getJob`); the request below carries the values
///        the game needs so that it can run without calling back.
interface IDisputeArbiter {
    /// @notice Everything a game needs about the disputed work unit, fixed when it opens.
    /// @param unitId           The disputed unit (`JobIds.unitId(jobId, index)`).
    /// @param solver           The defender: the unit's assignee, who committed the roots below.
    /// @param challenger       The account that opened the challenge and posted the bond.
    /// @param specHash         keccak256 of the canonical job spec (PROTOCOL §5).
    /// @param datasetRoot      Dataset root list (PROTOCOL §4).
    /// @param initialStateRoot State root at step 0 (PROTOCOL §3), fixed by the submitter.
    /// @param steps            Number of training steps T of the unit.
    /// @param checkpointInterval Checkpoint interval k (k divides T).
    /// @param checkpointRoot   Solver's checkpoint root over state roots at steps 0, k, ..., T.
    /// @param numCheckpoints   Solver's claimed number of state roots in it (T / k + 1).
    /// @param finalStateRoot   Solver's claimed state root at step T.
    /// @param challengerClaim  The challenger's counter-claim: its own checkpoint root for the same
    ///                         steps (PROTOCOL §3), which differs from `checkpointRoot`.
    /// @param configHash       The job's dispute config hash as posted with the job (PROTOCOL
    ///                         §7.2); zero for a job whose config the arbiter registered itself.
    struct GameRequest {
        uint256 unitId;
        address solver;
        address challenger;
        bytes32 specHash;
        bytes32 datasetRoot;
        bytes32 initialStateRoot;
        uint64 steps;
        uint64 checkpointInterval;
        bytes32 checkpointRoot;
        uint64 numCheckpoints;
        bytes32 finalStateRoot;
        bytes32 challengerClaim;
        bytes32 configHash;
    }

    /// @notice Opens a dispute game over `request.unitId`.
    /// @dev Only the wired job manager may call. Must not call back into the job manager.
    /// @return gameId A fresh nonzero identifier, echoed by `onDisputeResolved`.
    function openGame(GameRequest calldata request) external returns (uint256 gameId);
}
