// SPDX-License-Identifier: MIT
pragma solidity 0.8.37;

import {IDisputeCallback} from "../interfaces/IDisputeCallback.sol";
import {JobIds} from "../libraries/JobIds.sol";
import {IDisputeGame} from "./interfaces/IDisputeGame.sol";
import {IOneStepProver} from "./interfaces/IOneStepProver.sol";
import {Clock, Phase, Side, DisputeConfig, Placement} from "./lib/DisputeTypes.sol";
import {Clocks} from "./lib/Clocks.sol";
import {Positions} from "./lib/Positions.sol";

/// @title DisputeGameBase — the dispute game's storage and the rules every move shares
/// @notice Common to the `DisputeGame` and the `DisputeGameTrace` that runs its trace phase on
///         the same storage (by DELEGATECALL, docs/PROTOCOL.md §7.3): both inherit this layout
///         and nothing else that takes a slot. Errors and events are `IDisputeGame`'s.
abstract contract DisputeGameBase {
    using Clocks for Clock;

    /// @notice The job manager allowed to open games, and told their results.
    address public immutable manager;
    /// @notice Recomputes one element of one node (the last move).
    IOneStepProver public immutable prover;

    /// @notice Number of games opened so far (the latest game id).
    uint256 public gameCount;
    /// @dev Dispute config hash (PROTOCOL §7.2) registered for each job (`configOf`).
    mapping(uint256 jobId => bytes32 configHash) internal _configs;
    /// @dev Where each unit job of a decomposed job sits, zero for version-1 jobs (`placementOf`).
    ///      Written by the DisputeGame (`registerUnitConfig`), read by both halves.
    // slither-disable-next-line uninitialized-state
    mapping(uint256 jobId => Placement) internal _placements;

    mapping(uint256 gameId => IDisputeGame.GameClaim) internal _claims;
    mapping(uint256 gameId => IDisputeGame.GameProgress) internal _progress;

    constructor(address manager_, IOneStepProver prover_) {
        manager = manager_;
        prover = prover_;
    }

    /// @dev Checks that `phase` is expected, that the caller is its mover and that the mover's
    ///      clock has not run out; then stops the mover's clock and starts the other's.
    function _move(uint256 gameId, Phase phase)
        internal
        returns (IDisputeGame.GameClaim storage c, IDisputeGame.GameProgress storage p)
    {
        c = _claims[gameId];
        p = _progress[gameId];
        Phase actual = p.phase;
        if (actual == Phase.None) revert IDisputeGame.UnknownGame(gameId);
        if (actual != phase) revert IDisputeGame.WrongPhase(gameId, phase, actual);
        bool defenderMoves = Positions.mover(phase) == Side.Defender;
        address expected = defenderMoves ? c.defender : c.challenger;
        if (msg.sender != expected) revert IDisputeGame.NotYourTurn(gameId, msg.sender, expected);
        Clock mine = defenderMoves ? p.defenderClock : p.challengerClock;
        if (mine.expired(block.timestamp)) revert IDisputeGame.ClockExpired(gameId, mine.deadline());
        p.moves += 1;
    }

    /// @dev Sets the next phase and hands the clock to its mover (if the mover changes).
    function _advance(IDisputeGame.GameProgress storage p, Phase next) internal {
        Side was = Positions.mover(p.phase);
        Side now_ = Positions.mover(next);
        p.phase = next;
        if (was == now_) return;
        if (was == Side.Defender) {
            p.defenderClock = p.defenderClock.stop(block.timestamp);
            p.challengerClock = p.challengerClock.start(block.timestamp);
        } else {
            p.challengerClock = p.challengerClock.stop(block.timestamp);
            p.defenderClock = p.defenderClock.start(block.timestamp);
        }
    }

    function _resolve(
        uint256 gameId,
        IDisputeGame.GameClaim storage c,
        IDisputeGame.GameProgress storage p,
        bool challengerWon,
        bool byTimeout
    ) internal {
        Side winner = challengerWon ? Side.Challenger : Side.Defender;
        p.phase = Phase.Resolved;
        p.winner = winner;
        p.defenderClock = Clocks.wrap(p.defenderClock.remaining(), 0);
        p.challengerClock = Clocks.wrap(p.challengerClock.remaining(), 0);
        emit IDisputeGame.GameResolved(gameId, winner, challengerWon, byTimeout);
        IDisputeCallback(manager).onDisputeResolved(gameId, c.unitId, challengerWon);
    }

    function _checkConfig(IDisputeGame.GameClaim storage c, DisputeConfig calldata cfg)
        internal
        view
    {
        bytes32 h = keccak256(abi.encode(cfg));
        if (h != c.configHash) revert IDisputeGame.ConfigMismatch(c.configHash, h);
    }

    /// @dev The claim's steps count from its unit's first step; a unit of a decomposed job
    ///      starts at global step `placement.stepOffset` (0 for a version-1 job).
    function _globalStep(IDisputeGame.GameClaim storage c, IDisputeGame.GameProgress storage p)
        internal
        view
        returns (uint256)
    {
        uint256 unitStart = _placements[JobIds.jobOf(c.unitId)].stepOffset;
        return Positions.globalStep(unitStart + c.stepOffset, p.segment, c.interval, p.step);
    }
}
