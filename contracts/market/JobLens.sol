// SPDX-License-Identifier: MIT
pragma solidity 0.8.37;

import {IJobManager} from "../interfaces/IJobManager.sol";
import {IJobLens} from "../interfaces/IJobLens.sol";

/// @title JobLens — a role's reads of a unit in one call
/// @notice See IJobLens: the JobManager's public getters of a unit (or a page of units) gathered
///         into one struct, so an agent's round costs a bounded number of RPC calls whatever the
///         number of verifiers drawn per unit.
contract JobLens is IJobLens {
    /// @inheritdoc IJobLens
    uint256 public constant MAX_PAGE = 64;

    /// @inheritdoc IJobLens
    IJobManager public immutable manager;

    constructor(IJobManager manager_) {
        if (address(manager_) == address(0)) revert ZeroManager();
        manager = manager_;
    }

    /// @inheritdoc IJobLens
    function unitSnapshot(uint256 unitId) external view returns (UnitSnapshot memory) {
        return _snapshot(unitId);
    }

    /// @inheritdoc IJobLens
    function unitSnapshots(uint256[] calldata unitIds) external view returns (UnitSnapshot[] memory out) {
        if (unitIds.length > MAX_PAGE) revert PageTooLarge(unitIds.length, MAX_PAGE);
        out = new UnitSnapshot[](unitIds.length);
        for (uint256 i = 0; i < unitIds.length; ++i) {
            out[i] = _snapshot(unitIds[i]);
        }
    }

    function _snapshot(uint256 unitId) private view returns (UnitSnapshot memory s) {
        s.unitId = unitId;
        s.unit = manager.getUnit(unitId);
        s.job = manager.getJob(manager.jobIdOf(unitId));
        s.dispute = manager.getDispute(unitId);
        s.dataRequest = manager.dataRequestOf(unitId);
        s.heldUntil = manager.heldUntil(unitId);
        (s.claimants, s.weights) = manager.getClaimants(unitId);
        s.verifiers = _verifiers(unitId);
    }

    function _verifiers(uint256 unitId) private view returns (VerifierView[] memory out) {
        address[] memory drawn = manager.getVerifiers(unitId);
        out = new VerifierView[](drawn.length);
        for (uint256 i = 0; i < drawn.length; ++i) {
            (IJobManager.VerifierStatus status, bytes32 attestationHash) = manager.verifierStatus(unitId, drawn[i]);
            out[i] = VerifierView(drawn[i], status, attestationHash);
        }
    }
}
