// SPDX-License-Identifier: MIT
pragma solidity 0.8.37;

/// @title JobIds
/// @notice Pure identifier helpers of the job manager (docs/PROTOCOL.md §6.1). Agents compute the
///         same keys off chain: `unitId = jobId << 32 | index`.
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
}
