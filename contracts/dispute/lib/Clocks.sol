// SPDX-License-Identifier: MIT
pragma solidity 0.8.37;

import {Clock} from "./DisputeTypes.sol";

/// @title Clocks — chess clocks of a dispute game (docs/PROTOCOL.md §7.4)
/// @notice Each side holds a time budget. While a side is to move its clock runs from the
///         moment the other side moved; moving stops it (deducting the time used) and starts the
///         opponent's. A side whose running clock passes zero has lost.
library Clocks {
    /// @notice Packs `remaining` seconds and a turn start time into a clock.
    function wrap(uint64 remaining, uint64 startedAt) internal pure returns (Clock) {
        return Clock.wrap((uint128(remaining) << 64) | uint128(startedAt));
    }

    /// @notice Seconds left on the clock when its current turn started.
    function remaining(Clock c) internal pure returns (uint64) {
        return uint64(Clock.unwrap(c) >> 64);
    }

    /// @notice Start of the running turn (0 while the clock is stopped).
    function startedAt(Clock c) internal pure returns (uint64) {
        return uint64(Clock.unwrap(c));
    }

    /// @notice Whether the clock is running (its side is to move).
    function running(Clock c) internal pure returns (bool) {
        return startedAt(c) != 0;
    }

    /// @notice The last second at which a running clock's side may still move.
    function deadline(Clock c) internal pure returns (uint256) {
        return uint256(startedAt(c)) + uint256(remaining(c));
    }

    /// @notice Whether a running clock has run out at time `nowTs`.
    function expired(Clock c, uint256 nowTs) internal pure returns (bool) {
        return running(c) && nowTs > deadline(c);
    }

    /// @notice Starts a stopped clock at `nowTs`.
    function start(Clock c, uint256 nowTs) internal pure returns (Clock) {
        return wrap(remaining(c), uint64(nowTs));
    }

    /// @notice Stops a running clock at `nowTs` (not past its deadline), deducting the time used.
    function stop(Clock c, uint256 nowTs) internal pure returns (Clock) {
        uint256 used = nowTs - uint256(startedAt(c));
        return wrap(uint64(uint256(remaining(c)) - used), 0);
    }
}
