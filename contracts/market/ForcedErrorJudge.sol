// SPDX-License-Identifier: MIT
pragma solidity 0.8.37;

import {IJobManager} from "../interfaces/IJobManager.sol";
import {ForcedErrors} from "../libraries/ForcedErrors.sol";
import {JobIds} from "../libraries/JobIds.sol";
import {TensorMerkle} from "../libraries/TensorMerkle.sol";

/// @title ForcedErrorJudge
/// @notice Entry points of forced errors (docs/PROTOCOL.md §8): a solver proves a forced error
///         (`revealForced`), anyone reports a secret shown before the reveal phase
///         (`reportPrematureReveal`). The judge checks everything against the manager's views and
///         has the manager apply the result (`applyForcedReveal`, `applyPrematureReveal`, which
///         only this judge may call).
/// @dev Stateless. The JobManager creates its own judge in its constructor: the checks would push
///      the manager past the 24 KiB contract size limit, and this way no deployment step changes.
///      Reverts with `IJobManager`'s errors.
contract ForcedErrorJudge {
    /// @notice The manager that created this judge.
    IJobManager public immutable manager;

    constructor() {
        manager = IJobManager(msg.sender);
    }

    /// @notice In the reveal phase of a forced round (every drawn verifier sealed and opened its
    ///         seal, or the windows for each are over; the unit Verifying or Disputed, not yet
    ///         revealed): checks
    ///         the secret against the assignee's secret hash, the seal against the true root, the
    ///         forced bit and position, the perturbed entry against the published and the true
    ///         root (and the next published entry), and each attesting drawn verifier's end roots
    ///         against its attestation; then the manager applies the verdicts
    ///         (`ForcedErrors.verdict` on the segments that end or start at the perturbed
    ///         checkpoint).
    function revealForced(uint256 unitId, IJobManager.ForcedReveal calldata rv) external {
        IJobManager.Unit memory u = manager.getUnit(unitId);
        if (u.status != IJobManager.UnitStatus.Verifying && u.status != IJobManager.UnitStatus.Disputed) {
            revert IJobManager.WrongUnitStatus(unitId, IJobManager.UnitStatus.Verifying, u.status);
        }
        if (u.forcedRevealed) revert IJobManager.ForcedAlreadyRevealed(unitId);
        address[] memory verifiers = manager.getVerifiers(unitId);
        _expectRevealPhase(unitId, u.deadline, verifiers);
        uint64 position = _check(unitId, u, rv);
        if (rv.endRoots.length != verifiers.length) {
            revert IJobManager.WrongRevealLength(rv.endRoots.length, verifiers.length);
        }
        // The catchers are the RIGHT drawn verifiers only (see `IJobManager.applyForcedReveal`).
        uint8[] memory verdicts = new uint8[](verifiers.length);
        for (uint256 i = 0; i < verifiers.length; ++i) {
            verdicts[i] = _verdict(unitId, verifiers[i], rv, i, position);
        }
        manager.applyForcedReveal(unitId, position, rv.trueRoot, verdicts);
    }

    /// @notice Shows the assignee's secret before the reveal phase (the unit Assigned or Committed,
    ///         or Verifying/Disputed with a drawn verifier still unsealed in the window): the
    ///         manager slashes the solver, pays the caller, and re-opens the unit. Once every seal
    ///         is in, the verdicts are fixed and the secret tells nobody anything.
    function reportPrematureReveal(uint256 unitId, bytes32 secret) external {
        IJobManager.Unit memory u = manager.getUnit(unitId);
        if (u.status < IJobManager.UnitStatus.Assigned || u.status > IJobManager.UnitStatus.Disputed) {
            revert IJobManager.WrongUnitStatus(unitId, IJobManager.UnitStatus.Assigned, u.status);
        }
        if (u.status >= IJobManager.UnitStatus.Verifying) {
            (address unsealed,) = _awaited(unitId, u.deadline, manager.getVerifiers(unitId), false);
            if (unsealed == address(0)) {
                revert IJobManager.RevealNotPremature(unitId);
            }
        }
        bytes32 expected = manager.secretHashOf(unitId, u.assigneeIndex);
        if (ForcedErrors.secretHash(secret) != expected) revert IJobManager.SecretMismatch(unitId, expected);
        manager.applyPrematureReveal(unitId, msg.sender);
    }

    /// @notice `ForcedErrors.isForced` with the manager's `forcedErrorBps`: whether secret `secret`
    ///         under assignment seed `seed` forces a round of a job with `segments` segments, and
    ///         the perturbed checkpoint.
    function isForced(bytes32 secret, uint64 seed, uint256 segments) external view returns (bool, uint64) {
        return ForcedErrors.isForced(secret, seed, manager.config().forcedErrorBps, segments);
    }

    /// @dev Reverts while a drawn verifier may still seal or open its seal.
    function _expectRevealPhase(uint256 unitId, uint64 deadline, address[] memory verifiers) private view {
        (address pending, uint64 until) = _awaited(unitId, deadline, verifiers, true);
        if (pending != address(0)) revert IJobManager.RevealTooEarly(unitId, pending, until);
    }

    /// @dev The first drawn verifier the reveal must wait for, and until when: one that has not
    ///         sealed while the challenge window runs (to `deadline`), or (with `opened`) one that
    ///         sealed and may still open its seal (to `deadline + revealWindow`). Zero if none.
    function _awaited(uint256 unitId, uint64 deadline, address[] memory verifiers, bool opened)
        private
        view
        returns (address, uint64)
    {
        uint64 revealDeadline = deadline + manager.config().revealWindow;
        for (uint256 i = 0; i < verifiers.length; ++i) {
            (IJobManager.VerifierStatus status, bytes32 seal) = manager.verifierStatus(unitId, verifiers[i]);
            if (status == IJobManager.VerifierStatus.Pending && block.timestamp <= deadline) {
                return (verifiers[i], deadline);
            }
            // A sealed verifier's attestation hash is its seal, never zero (`ZeroCommitment`).
            bool sealed_ = status == IJobManager.VerifierStatus.Sealed && seal != bytes32(0);
            if (opened && sealed_ && block.timestamp <= revealDeadline) return (verifiers[i], revealDeadline);
        }
        return (address(0), 0);
    }

    /// @dev Checks the secret, the seal, the forced bit and the perturbed entry; returns the
    ///      perturbed checkpoint.
    function _check(uint256 unitId, IJobManager.Unit memory u, IJobManager.ForcedReveal calldata rv)
        private
        view
        returns (uint64 position)
    {
        bytes32 expected = manager.secretHashOf(unitId, u.assigneeIndex);
        if (ForcedErrors.secretHash(rv.secret) != expected) revert IJobManager.SecretMismatch(unitId, expected);
        if (ForcedErrors.seal(rv.trueRoot, rv.secret) != u.seal) revert IJobManager.SealMismatch(unitId, u.seal);
        IJobManager.Job memory job = manager.getJob(JobIds.jobOf(unitId));
        uint256 segments = job.steps / job.checkpointInterval;
        bool forced;
        (forced, position) = ForcedErrors.isForced(rv.secret, u.assignSeed, manager.config().forcedErrorBps, segments);
        if (!forced) revert IJobManager.NotForced(unitId);
        if (rv.publishedEntry == rv.trueEntry) revert IJobManager.NotPerturbed(unitId, position);
        bytes32 domain = TensorMerkle.CHECKPOINT_DOMAIN;
        bool published = TensorMerkle.verifyListEntry(
            u.checkpointRoot, domain, segments + 1, position, rv.publishedEntry, rv.publishedProof
        );
        if (!published) revert IJobManager.BadCheckpointProof(unitId, position, u.checkpointRoot);
        bool truth =
            TensorMerkle.verifyListEntry(rv.trueRoot, domain, segments + 1, position, rv.trueEntry, rv.trueProof);
        if (!truth) revert IJobManager.BadCheckpointProof(unitId, position, rv.trueRoot);
        // position <= segments - 1, so entry position + 1 exists.
        bool next = TensorMerkle.verifyListEntry(
            u.checkpointRoot, domain, segments + 1, position + 1, rv.nextEntry, rv.nextProof
        );
        if (!next) revert IJobManager.BadCheckpointProof(unitId, position + 1, u.checkpointRoot);
    }

    /// @dev The verdict on drawn verifier `v` (index `i`): NONE unless it attested; its end roots
    ///      must be what it attested.
    function _verdict(
        uint256 unitId,
        address v,
        IJobManager.ForcedReveal calldata rv,
        uint256 i,
        uint64 position
    ) private view returns (uint8) {
        (IJobManager.VerifierStatus status, bytes32 attestation) = manager.verifierStatus(unitId, v);
        if (status != IJobManager.VerifierStatus.Attested) return ForcedErrors.VERDICT_NONE;
        if (keccak256(abi.encode(rv.endRoots[i])) != attestation) revert IJobManager.AttestationMismatch(unitId, v);
        uint64[] memory segments = manager.sampledSegments(unitId, v);
        return ForcedErrors.verdict(segments, rv.endRoots[i], position, rv.trueEntry, rv.nextEntry);
    }
}
