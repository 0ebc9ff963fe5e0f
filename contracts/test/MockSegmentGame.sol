// SPDX-License-Identifier: MIT
pragma solidity 0.8.37;

import {IDisputeCallback} from "../interfaces/IDisputeCallback.sol";
import {Placement} from "../dispute/lib/DisputeTypes.sol";

/// @title MockSegmentGame
/// @notice Test-only stand-in for the AttestationCourt's segment game: records each game the court
///         opens and reports the outcome it is told to.
/// @dev Offers only what the court calls: `openSegmentGame` and the config registry (recorded, not
///      checked: any caller, any number of times). Anyone may call `resolve`: never wire it on a
///      chain where the outcome matters.
contract MockSegmentGame {
    /// @notice `openSegmentGame` was called by someone other than the wired court.
    error NotManager(address caller);
    /// @notice The court was already wired.
    error AlreadyWired();
    /// @notice The game does not exist or was already resolved.
    error GameNotOpen(uint256 gameId);

    /// @notice The court opened a game over `unitId` by `challenger` against `defender`.
    event GameOpened(uint256 indexed gameId, uint256 indexed unitId, address defender, address challenger);
    /// @notice A game was resolved on command.
    event GameResolved(uint256 indexed gameId, uint256 indexed unitId, bool challengerWon);

    /// @notice The court allowed to open games (set once by `wire`).
    address public manager;
    /// @notice Number of games opened so far; the last game id.
    uint256 public gameCount;
    /// @notice Unit of each open game (0 once resolved).
    mapping(uint256 gameId => uint256 unitId) public unitOf;
    /// @notice Config hash registered for each job (the real game: `DisputeGame.configOf`).
    mapping(uint256 jobId => bytes32 configHash) public configOf;
    /// @notice Placement registered for each unit job.
    mapping(uint256 jobId => Placement) public placementOf;

    /// @notice Records a job's config hash.
    function registerConfig(uint256 jobId, bytes32 configHash) external {
        configOf[jobId] = configHash;
    }

    /// @notice Records a unit job's config hash and placement.
    function registerUnitConfig(uint256 jobId, bytes32 configHash, Placement calldata placement) external {
        configOf[jobId] = configHash;
        placementOf[jobId] = placement;
    }

    /// @notice Sets the court; callable once.
    function wire(address manager_) external {
        if (manager != address(0)) revert AlreadyWired();
        manager = manager_;
    }

    /// @notice Opens a game; the segment, its roots and the dataset are not played here.
    function openSegmentGame(
        uint256 unitId,
        address defender,
        address challenger,
        bytes32, /* datasetRoot */
        uint64, /* stepOffset */
        uint64, /* steps */
        bytes32[2] calldata /* roots */
    ) external returns (uint256 gameId) {
        if (msg.sender != manager) revert NotManager(msg.sender);
        gameId = ++gameCount;
        unitOf[gameId] = unitId;
        emit GameOpened(gameId, unitId, defender, challenger);
    }

    /// @notice Resolves `gameId` with the given outcome and reports it to the court.
    function resolve(uint256 gameId, bool challengerWon) external {
        uint256 unitId = unitOf[gameId];
        if (unitId == 0) revert GameNotOpen(gameId);
        delete unitOf[gameId];
        emit GameResolved(gameId, unitId, challengerWon);
        IDisputeCallback(manager).onDisputeResolved(gameId, unitId, challengerWon);
    }
}
