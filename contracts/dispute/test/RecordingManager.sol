// SPDX-License-Identifier: MIT
pragma solidity 0.8.37;

import {IDisputeArbiter} from "../../interfaces/IDisputeArbiter.sol";
import {IDisputeCallback} from "../../interfaces/IDisputeCallback.sol";
import {IDisputeGame} from "../interfaces/IDisputeGame.sol";
import {IJobManager} from "../../interfaces/IJobManager.sol";

/// @title RecordingManager — test stand-in for the job manager side of the dispute hook
/// @notice Opens games on an arbiter and records each result, enforcing the hook's contract:
///         only the arbiter reports, once per game, with the unit it was opened for.
/// @dev Test fixture only (tests/dispute, bench/dispute_bench.py).
contract RecordingManager is IDisputeCallback {
    IDisputeArbiter public arbiter;
    mapping(uint256 gameId => uint256 unitId) public unitOf;
    mapping(uint256 gameId => bool) public resolved;
    mapping(uint256 gameId => bool) public challengerWon;

    mapping(uint256 jobId => address) public submitterOf;

    event Resolved(uint256 indexed gameId, uint256 indexed unitId, bool challengerWon);

    /// @notice Job `jobId` already has a submitter recorded.
    error JobExists(uint256 jobId, address submitter);
    /// @notice The arbiter is already wired.
    error AlreadyWired(address arbiter);

    /// @notice Records `submitter` as job `jobId`'s submitter (the real manager: `postJob`).
    function setSubmitter(uint256 jobId, address submitter) external {
        if (submitterOf[jobId] != address(0)) revert JobExists(jobId, submitterOf[jobId]);
        submitterOf[jobId] = submitter;
    }

    /// @notice The job as `IJobManager.getJob` returns it (only `submitter` is kept here).
    function getJob(uint256 jobId) external view returns (IJobManager.Job memory job) {
        job.submitter = submitterOf[jobId];
    }

    /// @notice Registers a config with the arbiter as its manager (the attestation court does so
    ///         for a submitter, AttestationCourt._adoptConfig).
    function registerConfig(uint256 jobId, bytes32 configHash) external {
        IDisputeGame(address(arbiter)).registerConfig(jobId, configHash);
    }

    /// @notice Wires the arbiter (once).
    function setArbiter(IDisputeArbiter arbiter_) external {
        if (address(arbiter) != address(0)) revert AlreadyWired(address(arbiter));
        arbiter = arbiter_;
    }

    /// @notice Opens a game as the job manager would.
    function open(IDisputeArbiter.GameRequest calldata request) external returns (uint256 gameId) {
        gameId = arbiter.openGame(request);
        unitOf[gameId] = request.unitId;
    }

    /// @notice Opens a segment (attestation) game as the job manager would.
    function openSegment(
        uint256 unitId,
        address defender,
        address challenger,
        bytes32 datasetRoot,
        uint64 stepOffset,
        uint64 steps,
        bytes32[2] calldata roots
    ) external returns (uint256 gameId) {
        gameId = IDisputeGame(address(arbiter)).openSegmentGame(
            unitId, defender, challenger, datasetRoot, stepOffset, steps, roots
        );
        unitOf[gameId] = unitId;
    }

    /// @inheritdoc IDisputeCallback
    function onDisputeResolved(uint256 gameId, uint256 unitId, bool challengerWon_) external {
        if (msg.sender != address(arbiter)) revert NotArbiter(msg.sender);
        if (resolved[gameId] || unitOf[gameId] != unitId) revert UnknownGame(gameId, unitId);
        resolved[gameId] = true;
        challengerWon[gameId] = challengerWon_;
        emit Resolved(gameId, unitId, challengerWon_);
    }
}
