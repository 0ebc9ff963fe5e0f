// SPDX-License-Identifier: MIT
pragma solidity 0.8.37;

/// @title JobIds
/// @notice Pure identifier helpers of the job manager (docs/PROTOCOL.md §6.1). Agents compute the
///         same keys off chain: `unitId = jobId << 32 | index`, and `jobId = generation << 32 |
///         record`, where `record` names the storage the job lives in and `generation` counts the
///         jobs that lived there before it (records are recycled, §6.10).
library JobIds {
    /// @notice The unit index does not fit 32 bits.
    error UnitIndexTooLarge(uint256 index);

    /// @notice Id of unit `index` of job `jobId`. Nonzero for every job id >= 1.
    function unitId(uint256 jobId, uint256 index) internal pure returns (uint256) {
        if (index > type(uint32).max) revert UnitIndexTooLarge(index);
        return (jobId << 32) | index;
    }

    /// @notice Job that owns `unitId`.
    function jobOf(uint256 unitId_) internal pure returns (uint256) {
        return unitId_ >> 32;
    }

    /// @notice Index of `unitId` within its job.
    function indexOf(uint256 unitId_) internal pure returns (uint256) {
        return unitId_ & type(uint32).max;
    }

    /// @notice Id of the job of generation `generation` in record `record` (record < 2^32).
    function fromRecord(uint256 record, uint256 generation) internal pure returns (uint256) {
        return (generation << 32) | record;
    }

    /// @notice The record job `jobId_` lives in.
    function recordOf(uint256 jobId_) internal pure returns (uint256) {
        return jobId_ & type(uint32).max;
    }
}
