// SPDX-License-Identifier: MIT
pragma solidity 0.8.37;

import {IJobManager} from "./IJobManager.sol";

/// @title IJobLens
/// @notice Read-only view of a JobManager's units for the agents (PROTOCOL §6.12): everything a
///         role reads about a unit each round — the unit, its job, its open dispute and data
///         request, when a held result applies, its claimants and its drawn verifiers with
///         their responses — in one `eth_call`, or a page of units in one. Without it a unit
///         costs a getter call per item plus one `verifierStatus` per drawn verifier.
/// @dev A view over the manager's public getters only: it holds no state besides the manager's
///      address and changes nothing, so it can be redeployed at will and adds nothing to the
///      manager's code size. Each snapshot is the getters' values at one block.
interface IJobLens {
    /// @notice A drawn verifier of the unit's current attempt and its response
    ///         (`IJobManager.verifierStatus`): its seal once sealed, the hash of its end roots
    ///         once attested.
    struct VerifierView {
        address verifier;
        IJobManager.VerifierStatus status;
        bytes32 attestationHash;
    }

    /// @notice One unit as a role reads it: `getUnit`, `getJob` of its job, `getDispute`,
    ///         `dataRequestOf`, `heldUntil`, `getClaimants` and each of `getVerifiers` with its
    ///         `verifierStatus`, in draw order.
    struct UnitSnapshot {
        uint256 unitId;
        IJobManager.Unit unit;
        IJobManager.Job job;
        IJobManager.Dispute dispute;
        IJobManager.DataRequest dataRequest;
        uint64 heldUntil;
        address[] claimants;
        uint96[] weights;
        VerifierView[] verifiers;
    }

    /// @notice A page asked for more units than `MAX_PAGE` (an `eth_call` has a gas cap).
    /// @param count The number of units asked for.
    /// @param maxCount `MAX_PAGE`.
    error PageTooLarge(uint256 count, uint256 maxCount);

    /// @notice The lens was deployed over the zero address.
    error ZeroManager();

    /// @notice The JobManager this lens reads.
    function manager() external view returns (IJobManager);

    /// @notice The most units one `unitSnapshots` call returns.
    function MAX_PAGE() external view returns (uint256);

    /// @notice Everything a role reads about unit `unitId` (a recycled or unknown unit reads as
    ///         status None with zeros, as `getUnit` does).
    function unitSnapshot(uint256 unitId) external view returns (UnitSnapshot memory);

    /// @notice `unitSnapshot` of each of `unitIds`, in their order; reverts `PageTooLarge` above
    ///         `MAX_PAGE` units.
    function unitSnapshots(uint256[] calldata unitIds) external view returns (UnitSnapshot[] memory);
}
