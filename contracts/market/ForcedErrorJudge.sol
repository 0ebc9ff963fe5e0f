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
    ///         revealed): checks the secret against the assignee's secret hash, the seal against
    ///         the true root, the forced bit, every checkpoint entry carried against the published
    ///         and the true root, and each attesting drawn verifier's end roots against its
    ///         attestation; then the manager applies the verdicts (`_verdict`: on the sampled
    ///         segments that start or end at a perturbed checkpoint).
    function revealForced(uint256 unitId, IJobManager.ForcedReveal calldata rv) external {
        IJobManager.Unit memory u = manager.getUnit(unitId);
        if (u.status != IJobManager.UnitStatus.Verifying && u.status != IJobManager.UnitStatus.Disputed) {
            revert IJobManager.WrongUnitStatus(unitId, IJobManager.UnitStatus.Verifying, u.status);
        }
        if (u.forcedRevealed) revert IJobManager.ForcedAlreadyRevealed(unitId);
        address[] memory verifiers = manager.getVerifiers(unitId);
        _expectRevealPhase(unitId, u, verifiers);
        ForcedErrors.Round memory round = _check(unitId, u, rv);
        if (rv.endRoots.length != verifiers.length) {
            revert IJobManager.WrongRevealLength(rv.endRoots.length, verifiers.length);
        }
        // The catchers are the RIGHT drawn verifiers only (see `IJobManager.applyForcedReveal`).
        uint8[] memory verdicts = new uint8[](verifiers.length);
        for (uint256 i = 0; i < verifiers.length; ++i) {
            verdicts[i] = _verdict(unitId, verifiers[i], rv, i, round);
        }
        manager.applyForcedReveal(unitId, round.anchor, rv.trueRoot, verdicts);
    }

    /// @notice Shows the assignee's secret before the reveal phase (the unit Assigned before its
    ///         commit deadline, Committed, or Verifying with a drawn verifier still unsealed in the
    ///         window and no reveal yet): the manager slashes the solver, pays the caller, and
    ///         re-opens the unit. Once every seal is in, or the reveal is made, the verdicts are
    ///         fixed and the secret tells nobody anything. Not while Disputed, nor past the commit
    ///         deadline: the game, or `expireAssignment`, takes the whole collateral, which a
    ///         solver reporting itself through a second address would halve.
    function reportPrematureReveal(uint256 unitId, bytes32 secret) external {
        IJobManager.Unit memory u = manager.getUnit(unitId);
        if (u.status < IJobManager.UnitStatus.Assigned || u.status > IJobManager.UnitStatus.Disputed) {
            revert IJobManager.WrongUnitStatus(unitId, IJobManager.UnitStatus.Assigned, u.status);
        }
        // The reveal's calldata shows r: copying it into a report must not slash the solver.
        if (u.forcedRevealed) revert IJobManager.RevealNotPremature(unitId);
        if (u.status == IJobManager.UnitStatus.Disputed) revert IJobManager.RevealNotPremature(unitId);
        bool late = u.status == IJobManager.UnitStatus.Assigned && block.timestamp > u.deadline;
        if (late) revert IJobManager.RevealNotPremature(unitId);
        if (u.status == IJobManager.UnitStatus.Verifying) {
            (address unsealed,) = _awaited(unitId, u, manager.getVerifiers(unitId), false);
            if (unsealed == address(0)) revert IJobManager.RevealNotPremature(unitId);
        }
        bytes32 expected = manager.secretHashOf(unitId, u.assigneeIndex);
        if (ForcedErrors.secretHash(secret) != expected) revert IJobManager.SecretMismatch(unitId, expected);
        manager.applyPrematureReveal(unitId, msg.sender);
    }

    /// @notice Whether the reveal phase of the unit is open: no drawn verifier can still seal
    ///         (Pending while the challenge window runs and no seal is open) or open its seal
    ///         (Sealed while the reveal window runs).
    function revealPhaseOpen(uint256 unitId) public view returns (bool) {
        (address pending,) = _awaited(unitId, manager.getUnit(unitId), manager.getVerifiers(unitId), true);
        return pending == address(0);
    }

    /// @notice Until when a challenger's win over the unit, now, must be held because the round
    ///         may still be shown forced (PROTOCOL §6.6); zero when it applies at once. It may be
    ///         forced while forcedErrorBps > 0, no reveal was made, the job has two segments or
    ///         more (`ForcedErrors.isForced`: a one-segment round never is) and the reveal's slot
    ///         (challenge deadline + 2 · revealWindow) has not ended. The hold lasts to the slot's
    ///         end, or one revealWindow from now if the reveal phase is open already: never less
    ///         than one revealWindow of open reveal phase for the solver. The manager asks it when
    ///         a game ends with the challenger's win.
    function holdEnd(uint256 unitId) external view returns (uint64) {
        // The cheapest reads first: a win past the slot (the usual case with a long game) reads
        // no job.
        IJobManager.Config memory cfg = manager.config();
        if (cfg.forcedErrorBps == 0) return 0;
        IJobManager.Unit memory u = manager.getUnit(unitId);
        if (u.forcedRevealed) return 0;
        uint64 slotEnd = u.deadline + 2 * uint64(cfg.revealWindow);
        if (block.timestamp > slotEnd) return 0;
        IJobManager.Job memory job = manager.getJob(JobIds.jobOf(unitId));
        if (job.steps / job.checkpointInterval < 2) return 0;
        if (!revealPhaseOpen(unitId)) return slotEnd;
        uint64 early = uint64(block.timestamp) + uint64(cfg.revealWindow);
        return early < slotEnd ? early : slotEnd;
    }

    /// @notice `ForcedErrors.isForced` with the manager's `forcedErrorBps`: whether secret `secret`
    ///         under assignment seed `seed` forces a round of a job with `segments` segments, and
    ///         the perturbed checkpoint.
    function isForced(bytes32 secret, uint64 seed, uint256 segments) external view returns (bool, uint64) {
        return ForcedErrors.isForced(secret, seed, manager.config().forcedErrorBps, segments);
    }

    /// @notice The checkpoints a forced round of secret `secret` under assignment seed `seed`
    ///         perturbs in a job of `segments` segments, ascending (the anchor and those
    ///         `ForcedErrors.isPerturbed` adds); empty if the round is not forced. For agents:
    ///         O(segments) hashes.
    function perturbedCheckpoints(bytes32 secret, uint64 seed, uint256 segments)
        external
        view
        returns (uint64[] memory checkpoints)
    {
        ForcedErrors.Round memory round = _round(secret, seed, segments);
        if (round.anchor == 0) return checkpoints;
        // One hash per checkpoint into a buffer of the most there can be, then the found ones.
        uint64[] memory found = new uint64[](segments - 1);
        uint256 count = 0;
        for (uint256 c = 1; c < segments; ++c) {
            // c < segments, a uint64 quotient (T / k).
            if (ForcedErrors.isPerturbed(round, c)) found[count++] = uint64(c);
        }
        checkpoints = new uint64[](count);
        for (uint256 j = 0; j < count; ++j) {
            checkpoints[j] = found[j];
        }
    }

    /// @dev The round's randomness (anchor 0: not forced).
    function _round(bytes32 secret, uint64 seed, uint256 segments) private view returns (ForcedErrors.Round memory) {
        IJobManager.Config memory cfg = manager.config();
        (bool forced, uint64 anchor) = ForcedErrors.isForced(secret, seed, cfg.forcedErrorBps, segments);
        uint256 denominator = ForcedErrors.perturbDenominator(cfg.segmentsPerVerifier, segments);
        return ForcedErrors.Round(secret, seed, forced ? anchor : 0, segments, denominator);
    }

    /// @dev Reverts while a drawn verifier may still seal or open its seal.
    function _expectRevealPhase(uint256 unitId, IJobManager.Unit memory u, address[] memory verifiers)
        private
        view
    {
        (address pending, uint64 until) = _awaited(unitId, u, verifiers, true);
        if (pending != address(0)) revert IJobManager.RevealTooEarly(unitId, pending, until);
    }

    /// @dev The first drawn verifier the reveal must wait for, and until when: one that has not
    ///         sealed while it still may (the challenge window runs, to `deadline`, and no seal is
    ///         open: the manager's `SealingClosed`), or (with `opened`) one that sealed and may
    ///         still open its seal (to `deadline + revealWindow`). Zero if none.
    function _awaited(uint256 unitId, IJobManager.Unit memory u, address[] memory verifiers, bool opened)
        private
        view
        returns (address, uint64)
    {
        uint64 deadline = u.deadline;
        uint64 revealDeadline = deadline + manager.config().revealWindow;
        bool mayStillSeal = block.timestamp <= deadline && u.attestCount == 0;
        for (uint256 i = 0; i < verifiers.length; ++i) {
            (IJobManager.VerifierStatus status, bytes32 seal) = manager.verifierStatus(unitId, verifiers[i]);
            if (status == IJobManager.VerifierStatus.Pending && mayStillSeal) {
                return (verifiers[i], deadline);
            }
            // A sealed verifier's attestation hash is its seal, never zero (`ZeroCommitment`).
            bool sealed_ = status == IJobManager.VerifierStatus.Sealed && seal != bytes32(0);
            if (opened && sealed_ && block.timestamp <= revealDeadline) return (verifiers[i], revealDeadline);
        }
        return (address(0), 0);
    }

    /// @dev Checks the secret, the seal, the forced bit and every checkpoint entry carried;
    ///      returns the round's randomness.
    function _check(uint256 unitId, IJobManager.Unit memory u, IJobManager.ForcedReveal calldata rv)
        private
        view
        returns (ForcedErrors.Round memory round)
    {
        bytes32 expected = manager.secretHashOf(unitId, u.assigneeIndex);
        if (ForcedErrors.secretHash(rv.secret) != expected) revert IJobManager.SecretMismatch(unitId, expected);
        if (ForcedErrors.seal(rv.trueRoot, rv.secret) != u.seal) revert IJobManager.SealMismatch(unitId, u.seal);
        IJobManager.Job memory job = manager.getJob(JobIds.jobOf(unitId));
        round = _round(rv.secret, u.assignSeed, job.steps / job.checkpointInterval);
        if (round.anchor == 0) revert IJobManager.NotForced(unitId);
        uint256 count = round.segments + 1;
        _checkEntries(unitId, u.checkpointRoot, rv, count);
        // INVARIANT: C replaces the published root, and the unit's result stays its last entry
        // (bound to the published list at commit): a C that moves it is refused.
        bool finalHolds = TensorMerkle.verifyListEntry(
            rv.trueRoot, TensorMerkle.CHECKPOINT_DOMAIN, count, count - 1, u.finalStateRoot, rv.finalProof
        );
        if (!finalHolds) revert IJobManager.BadCheckpointProof(unitId, uint64(count - 1), rv.trueRoot);
    }

    /// @dev Each carried checkpoint's published entry against the published root and its true
    ///      entry against C, in a list of `count` entries; strictly ascending (`_entry` searches).
    function _checkEntries(uint256 unitId, bytes32 publishedRoot, IJobManager.ForcedReveal calldata rv, uint256 count)
        private
        pure
    {
        uint256 carried = rv.checkpoints.length;
        _expectLength(rv.publishedEntries.length, carried);
        _expectLength(rv.publishedProofs.length, carried);
        _expectLength(rv.trueEntries.length, carried);
        _expectLength(rv.trueProofs.length, carried);
        bytes32 domain = TensorMerkle.CHECKPOINT_DOMAIN;
        for (uint256 j = 0; j < carried; ++j) {
            uint64 c = rv.checkpoints[j];
            if (j > 0 && c <= rv.checkpoints[j - 1]) revert IJobManager.CheckpointsNotAscending(unitId, c);
            bool published = TensorMerkle.verifyListEntry(
                publishedRoot, domain, count, c, rv.publishedEntries[j], rv.publishedProofs[j]
            );
            if (!published) revert IJobManager.BadCheckpointProof(unitId, c, publishedRoot);
            bool truth =
                TensorMerkle.verifyListEntry(rv.trueRoot, domain, count, c, rv.trueEntries[j], rv.trueProofs[j]);
            if (!truth) revert IJobManager.BadCheckpointProof(unitId, c, rv.trueRoot);
        }
    }

    function _expectLength(uint256 given, uint256 expected) private pure {
        if (given != expected) revert IJobManager.WrongRevealLength(given, expected);
    }

    /// @dev The verdict on drawn verifier `v` (index `i`): NONE unless it attested; its end roots
    ///      must be what it attested. A sampled segment is judged iff it starts at a perturbed
    ///      checkpoint (an honest replay from that state, one bit off, cannot end on the published
    ///      next entry) or else ends at one (an honest replay ends on the true entry). WRONG if it
    ///      failed at one such segment, RIGHT if it passed at all of them (at least one), NONE if
    ///      none was judged.
    function _verdict(
        uint256 unitId,
        address v,
        IJobManager.ForcedReveal calldata rv,
        uint256 i,
        ForcedErrors.Round memory round
    ) private view returns (uint8 result) {
        (IJobManager.VerifierStatus status, bytes32 attestation) = manager.verifierStatus(unitId, v);
        if (status != IJobManager.VerifierStatus.Attested) return ForcedErrors.VERDICT_NONE;
        if (keccak256(abi.encode(rv.endRoots[i])) != attestation) revert IJobManager.AttestationMismatch(unitId, v);
        uint64[] memory segments = manager.sampledSegments(unitId, v);
        for (uint256 j = 0; j < segments.length; ++j) {
            uint64 s = segments[j];
            bytes32 end = rv.endRoots[i][j];
            if (ForcedErrors.isPerturbed(round, s)) {
                _perturbedEntry(unitId, rv, s);
                (bytes32 next,) = _entry(unitId, rv, s + 1);
                if (end == next) return ForcedErrors.VERDICT_WRONG;
                result = ForcedErrors.VERDICT_RIGHT;
            } else if (ForcedErrors.isPerturbed(round, s + 1)) {
                if (end != _perturbedEntry(unitId, rv, s + 1)) return ForcedErrors.VERDICT_WRONG;
                result = ForcedErrors.VERDICT_RIGHT;
            }
        }
    }

    /// @dev The true entry at perturbed checkpoint `c`, which must differ from the published one
    ///      (a solver cannot have verifiers judged on a checkpoint it did not perturb).
    function _perturbedEntry(uint256 unitId, IJobManager.ForcedReveal calldata rv, uint64 c)
        private
        pure
        returns (bytes32 truth)
    {
        bytes32 published;
        (published, truth) = _entry(unitId, rv, c);
        if (published == truth) revert IJobManager.NotPerturbed(unitId, c);
    }

    /// @dev The (published, true) entries the reveal carries for checkpoint `c` (binary search
    ///      over the ascending `checkpoints`).
    function _entry(uint256 unitId, IJobManager.ForcedReveal calldata rv, uint64 c)
        private
        pure
        returns (bytes32 published, bytes32 truth)
    {
        uint256 lo = 0;
        uint256 hi = rv.checkpoints.length;
        while (lo < hi) {
            // lo < hi <= length: the midpoint is a valid index and the loop ends.
            uint256 mid = (lo + hi) / 2;
            uint64 at = rv.checkpoints[mid];
            if (at == c) return (rv.publishedEntries[mid], rv.trueEntries[mid]);
            if (at < c) lo = mid + 1;
            else hi = mid;
        }
        revert IJobManager.MissingCheckpoint(unitId, c);
    }
}
