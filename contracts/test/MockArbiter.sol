// SPDX-License-Identifier: MIT
pragma solidity 0.8.37;

import {IDisputeArbiter} from "../interfaces/IDisputeArbiter.sol";
import {IDisputeCallback} from "../interfaces/IDisputeCallback.sol";
import {Placement} from "../dispute/lib/DisputeTypes.sol";

/// @title MockArbiter
/// @notice Test-only arbiter: records each opened game and resolves it when told to.
/// @dev Stands in for the real dispute game in contract tests and dev deployments. Anyone may call
///      `resolve`: never wire it on a chain where the outcome matters.
contract MockArbiter is IDisputeArbiter {
    /// @notice `openGame` was called by someone other than the wired job manager.
    error NotJobManager(address caller);
    /// @notice The job manager was already wired.
    error AlreadyWired();
    /// @notice The game does not exist or was already resolved.
    error GameNotOpen(uint256 gameId);

    /// @notice A game was opened for `unitId` by `challenger` against `solver`.
    event GameOpened(
        uint256 indexed gameId, uint256 indexed unitId, address solver, address challenger
    );
    /// @notice A unit job's dispute config was registered (recorded, as the real game would).
    event UnitConfigRegistered(
        uint256 indexed jobId,
        bytes32 indexed configHash,
        address submitter,
        uint64 stepOffset,
        uint32 shards,
        uint32 shard
    );
    /// @notice A game was resolved on command.
    event GameResolved(uint256 indexed gameId, uint256 indexed unitId, bool challengerWon);

    /// @notice The job manager allowed to open games (set once by `wire`).
    address public jobManager;
    /// @notice Number of games opened so far; the last game id.
    uint256 public gameCount;
    /// @notice Unit of each open game (0 once resolved).
    mapping(uint256 gameId => uint256 unitId) public unitOf;
    /// @notice Config hash registered for each unit job (the real game: `DisputeGame.configOf`).
    mapping(uint256 jobId => bytes32 configHash) public configOf;
    /// @notice Placement registered for each unit job.
    mapping(uint256 jobId => Placement) public placementOf;

    /// @notice Sets the job manager; callable once.
    function wire(address manager) external {
        if (jobManager != address(0)) revert AlreadyWired();
        jobManager = manager;
    }

    /// @inheritdoc IDisputeArbiter
    function openGame(GameRequest calldata request) external returns (uint256 gameId) {
        if (msg.sender != jobManager) revert NotJobManager(msg.sender);
        gameId = ++gameCount;
        unitOf[gameId] = request.unitId;
        emit GameOpened(gameId, request.unitId, request.solver, request.challenger);
    }

    /// @notice Records a job's config (no submitter check: test stand-in).
    function registerConfig(uint256 jobId, bytes32 configHash) external {
        configOf[jobId] = configHash;
    }

    /// @notice Records a unit job's config and placement (no submitter check: test stand-in).
    function registerUnitConfig(uint256 jobId, bytes32 configHash, Placement calldata placement)
        external
    {
        configOf[jobId] = configHash;
        placementOf[jobId] = placement;
        emit UnitConfigRegistered(
            jobId, configHash, msg.sender, placement.stepOffset, placement.shards, placement.shard
        );
    }

    /// @notice Resolves `gameId` with the given outcome and reports it to the job manager.
    function resolve(uint256 gameId, bool challengerWon) external {
        uint256 unitId = unitOf[gameId];
        if (unitId == 0) revert GameNotOpen(gameId);
        delete unitOf[gameId];
        emit GameResolved(gameId, unitId, challengerWon);
        IDisputeCallback(jobManager).onDisputeResolved(gameId, unitId, challengerWon);
    }
}
