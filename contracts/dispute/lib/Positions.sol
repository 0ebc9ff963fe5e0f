// SPDX-License-Identifier: MIT
pragma solidity 0.8.37;

import {Phase, Side} from "./DisputeTypes.sol";

/// @title Positions — pure helpers that locate a dispute: who moves, which step, which element
/// @notice Game ids are 1, 2, 3, ... in opening order (`nextId`); steps are global step numbers
///         of the batch schedule (PROTOCOL §4); elements are row-major indices cut into leaves of
///         64 (PROTOCOL §3).
library Positions {
    uint256 internal constant LEAF_ELEMS = 64;
    uint256 internal constant LEAF_BYTES = 256;

    /// @notice The id following `last` (ids start at 1; 0 means "no game").
    function nextId(uint256 last) internal pure returns (uint256) {
        return last + 1;
    }

    /// @notice The side that must make the move a game in `phase` expects.
    function mover(Phase phase) internal pure returns (Side) {
        if (phase == Phase.None || phase == Phase.Resolved) return Side.None;
        if (
            phase == Phase.PostCheckpoints || phase == Phase.OpenSegment || phase == Phase.PostTrace
                || phase == Phase.PostTraceSubtree || phase == Phase.PostStateSubtree
                || phase == Phase.PostLeaves
                || phase == Phase.RevealChunk || phase == Phase.PostAccumulators
        ) return Side.Defender;
        return Side.Challenger;
    }

    /// @notice Number of checkpoint segments of a claim of `steps` steps, interval `interval`.
    function segments(uint256 steps, uint256 interval) internal pure returns (uint256) {
        return steps / interval;
    }

    /// @notice Global step number of step `step` of segment `segment`.
    function globalStep(uint256 stepOffset, uint256 segment, uint256 interval, uint256 step)
        internal
        pure
        returns (uint256)
    {
        return stepOffset + segment * interval + step;
    }

    /// @notice Leaves of a tensor of `numel` elements: ceil(numel / 64).
    function leafCount(uint256 numel) internal pure returns (uint256) {
        return (numel + LEAF_ELEMS - 1) / LEAF_ELEMS;
    }

    /// @notice Depth of a Merkle tree over `n` leaves: ceil(log2 n), 0 for n <= 1.
    function depth(uint256 n) internal pure returns (uint256 d) {
        while ((uint256(1) << d) < n) {
            ++d;
        }
    }

    /// @notice Row-major element index of offset `offset` inside leaf `leaf`.
    function elementIndex(uint256 leaf, uint256 offset) internal pure returns (uint256) {
        return leaf * LEAF_ELEMS + offset;
    }

    /// @notice Reads the big-endian 32-bit word at element offset `offset` of a 256-byte chunk.
    function word(bytes calldata chunk, uint256 offset) internal pure returns (uint32 w) {
        uint256 at = offset * 4;
        w = uint32(bytes4(chunk[at:at + 4]));
    }
}
