// SPDX-License-Identifier: MIT
pragma solidity 0.8.37;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";
import {ReentrancyGuard} from "@openzeppelin/contracts/utils/ReentrancyGuard.sol";
import {IJobManager} from "../interfaces/IJobManager.sol";
import {INodeRegistry} from "../interfaces/INodeRegistry.sol";
import {IDisputeArbiter} from "../interfaces/IDisputeArbiter.sol";
import {IDisputeCallback} from "../interfaces/IDisputeCallback.sol";
import {Credits} from "../libraries/Credits.sol";
import {JobIds} from "../libraries/JobIds.sol";
import {MarketMath} from "../libraries/MarketMath.sol";
import {ForcedErrors} from "../libraries/ForcedErrors.sol";
import {ForcedErrorJudge} from "./ForcedErrorJudge.sol";

/// @title JobManager
/// @notice Job escrow, scheduling, checkpoint commitments, verification and settlement
///         (docs/PROTOCOL.md §6).
/// @dev Token balance == Σ job escrow + Σ open dispute bonds + Σ credits + jackpot.
///      Checks-effects-interactions throughout: every state change precedes the calls to the
///      registry, the token and the arbiter (all fixed at deployment), except the game id that
///      `openGame` returns. The entry points that move tokens or call the arbiter (postJob,
///      challenge, withdraw) are also `nonReentrant`.
contract JobManager is IJobManager, ReentrancyGuard {
    using SafeERC20 for IERC20;
    using Credits for Credits.Ledger;

    /// @notice At most this many solvers claim one unit (bounds the selection loop).
    uint256 public constant MAX_CLAIMANTS = 16;
    /// @notice A job's first claim window closes at most this long after posting: claims lock
    ///         collateral until it closes and cannot be withdrawn (PROTOCOL §6.3).
    uint256 public constant MAX_CLAIM_HORIZON = 1 days;
    /// @dev `_findVerifier`'s answer for an account that was not drawn.
    uint256 private constant NOT_DRAWN = type(uint256).max;

    struct Claimant {
        address solver;
        uint96 weight;
    }

    /// @dev One slot per drawn verifier; its seal, then its attestation hash, lives in `_attestations`.
    struct VerifierSlot {
        address verifier;
        VerifierStatus status;
        // judged RIGHT at a forced reveal: paid its catcher share at finalize (same slot)
        bool caught;
    }

    IERC20 private immutable _token;
    INodeRegistry private immutable _registry;
    address private immutable _deployer;

    uint32 private immutable _claimWindow;
    uint32 private immutable _verifyWindow;
    uint32 private immutable _disputeGrace;
    uint16 private immutable _taxBps;
    uint16 private immutable _challengerRewardBps;
    uint16 private immutable _collateralBps;
    uint8 private immutable _verifiersPerUnit;
    uint8 private immutable _segmentsPerVerifier;
    uint96 private immutable _verifierLock;
    uint96 private immutable _challengeBond;
    uint16 private immutable _forcedErrorBps;
    uint16 private immutable _lazySlashFactor;
    uint32 private immutable _revealWindow;
    ForcedErrorJudge private immutable _judge;

    address private _arbiter;
    uint256 private _jobCount;
    uint256 private _jackpot;

    mapping(uint256 jobId => Job) private _jobs;
    mapping(uint256 unitId => Unit) private _units;
    mapping(uint256 unitId => mapping(uint256 index => Claimant)) private _claimants;
    mapping(uint256 unitId => mapping(uint256 index => bytes32)) private _secretHashes;
    mapping(uint256 unitId => mapping(uint256 index => VerifierSlot)) private _verifiers;
    mapping(uint256 unitId => mapping(uint256 index => bytes32)) private _attestations;
    mapping(uint256 unitId => Dispute) private _disputes;
    mapping(uint256 gameId => uint256 unitId) private _gameUnits;
    /// @dev When a challenger's win is held (`DisputeResultHeld`), the time after which
    ///      `settleDispute` applies it.
    mapping(uint256 unitId => uint64 until) private _holdEnds;
    /// @dev The published root P of a unit whose forced error was revealed (its checkpointRoot
    ///      is then C); read through `publishedRootOf` only while `forcedRevealed`.
    mapping(uint256 unitId => bytes32) private _publishedRoots;
    Credits.Ledger private _credits;

    constructor(address registry_, Config memory cfg) {
        if (registry_ == address(0)) revert ZeroAddress();
        if (cfg.taxBps + uint256(cfg.challengerRewardBps) > 2 * MarketMath.BPS) revert InvalidConfig();
        if (cfg.taxBps >= MarketMath.BPS) revert InvalidConfig();
        if (cfg.challengerRewardBps > MarketMath.BPS) revert InvalidConfig();
        if (cfg.claimWindow == 0) revert InvalidConfig();
        if (cfg.verifyWindow == 0) revert InvalidConfig();
        if (cfg.revealWindow == 0) revert InvalidConfig();
        if (cfg.forcedErrorBps > MarketMath.BPS) revert InvalidConfig();
        if (cfg.segmentsPerVerifier == 0) revert InvalidConfig();
        _registry = INodeRegistry(registry_);
        _token = IERC20(INodeRegistry(registry_).token());
        _deployer = msg.sender;
        _claimWindow = cfg.claimWindow;
        _verifyWindow = cfg.verifyWindow;
        _disputeGrace = cfg.disputeGrace;
        _taxBps = cfg.taxBps;
        _challengerRewardBps = cfg.challengerRewardBps;
        _collateralBps = cfg.collateralBps;
        _verifiersPerUnit = cfg.verifiersPerUnit;
        _segmentsPerVerifier = cfg.segmentsPerVerifier;
        _verifierLock = cfg.verifierLock;
        _challengeBond = cfg.challengeBond;
        _forcedErrorBps = cfg.forcedErrorBps;
        _lazySlashFactor = cfg.lazySlashFactor;
        _revealWindow = cfg.revealWindow;
        // Its own instance, so that no deployment step changes (see ForcedErrorJudge).
        _judge = new ForcedErrorJudge();
    }

    // ------------------------------------------------------------------ wiring

    /// @inheritdoc IJobManager
    function setArbiter(address newArbiter) external {
        if (msg.sender != _deployer) revert NotDeployer(msg.sender);
        if (_arbiter != address(0)) revert ArbiterAlreadySet(_arbiter);
        if (newArbiter == address(0)) revert ZeroAddress();
        _arbiter = newArbiter;
        emit ArbiterSet(newArbiter);
    }

    // ------------------------------------------------------------------ submitter

    /// @inheritdoc IJobManager
    function postJob(JobParams calldata p) external nonReentrant returns (uint256 jobId) {
        if (_arbiter == address(0)) revert ArbiterNotSet();
        if (p.steps == 0) revert ZeroSteps();
        if (p.checkpointInterval == 0) revert ZeroCheckpointInterval();
        if (p.steps % p.checkpointInterval != 0) revert IntervalDoesNotDivideSteps(p.steps, p.checkpointInterval);
        if (p.specHash == bytes32(0)) revert ZeroCommitment();
        if (p.datasetRoot == bytes32(0)) revert ZeroCommitment();
        if (p.initialStateRoot == bytes32(0)) revert ZeroCommitment();
        if (p.claimDeadline <= block.timestamp) revert ClaimDeadlineInPast(p.claimDeadline, uint64(block.timestamp));
        uint256 latest = block.timestamp + MAX_CLAIM_HORIZON;
        if (p.claimDeadline > latest) revert ClaimDeadlineTooFar(p.claimDeadline, uint64(latest));
        if (p.computeTime == 0) revert ZeroComputeTime();
        uint256 fees = uint256(p.verificationFee) + MarketMath.share(p.reward, _taxBps);
        if (p.reward <= fees) revert RewardBelowFees(p.reward, fees);
        // forcedErrorBps > 0 here: with 0 every fee is within the cap.
        if (!ForcedErrors.feeWithinJackpotCap(p.verificationFee, p.reward, _forcedErrorBps, _taxBps)) {
            revert FeeAboveJackpotCap(p.verificationFee, uint256(p.reward) * _taxBps / _forcedErrorBps);
        }

        jobId = ++_jobCount;
        Job storage job = _jobs[jobId];
        job.submitter = msg.sender;
        job.steps = p.steps;
        job.unitCount = 1;
        job.status = JobStatus.Open;
        job.reward = p.reward;
        job.verificationFee = p.verificationFee;
        job.computeTime = p.computeTime;
        job.deviceClass = p.required.deviceClass;
        job.checkpointInterval = p.checkpointInterval;
        job.memoryMiB = p.required.memoryMiB;
        job.throughput = p.required.throughput;
        job.specHash = p.specHash;
        job.datasetRoot = p.datasetRoot;
        job.initialStateRoot = p.initialStateRoot;

        uint256 unitId = JobIds.unitId(jobId, 0);
        Unit storage unit = _units[unitId];
        unit.status = UnitStatus.Open;
        unit.deadline = p.claimDeadline;
        emit JobPosted(jobId, msg.sender, p.specHash, p, 1);
        emit UnitOpened(unitId, jobId, p.claimDeadline, 0);
        _token.safeTransferFrom(msg.sender, address(this), p.reward);
    }

    /// @inheritdoc IJobManager
    function cancelJob(uint256 jobId) external {
        Job storage job = _jobs[jobId];
        if (job.status == JobStatus.None) revert UnknownJob(jobId);
        if (msg.sender != job.submitter) revert NotSubmitter(jobId, msg.sender);
        if (job.status != JobStatus.Open) revert JobNotOpen(jobId, job.status);
        uint256 unitId = JobIds.unitId(jobId, 0);
        Unit storage unit = _units[unitId];
        if (unit.status != UnitStatus.Open && unit.status != UnitStatus.Selecting) {
            revert WrongUnitStatus(unitId, UnitStatus.Open, unit.status);
        }
        uint256 refund = _escrow(job);
        job.status = JobStatus.Cancelled;
        unit.status = UnitStatus.Cancelled;
        emit JobCancelled(jobId, refund);
        _credit(msg.sender, refund);
        _releaseClaimants(unitId, unit.claimantCount, address(0), _collateral(job));
    }

    // ------------------------------------------------------------------ scheduling

    /// @inheritdoc IJobManager
    function claim(uint256 unitId, bytes32 secretHash) external {
        Unit storage unit = _units[unitId];
        _expectStatus(unitId, unit, UnitStatus.Open);
        if (block.timestamp > unit.deadline) revert ClaimWindowClosed(unitId, unit.deadline);
        uint256 n = unit.claimantCount;
        if (n >= MAX_CLAIMANTS) revert TooManyClaimants(unitId, MAX_CLAIMANTS);
        if (secretHash == bytes32(0)) revert ZeroCommitment();
        for (uint256 i = 0; i < n; ++i) {
            if (_claimants[unitId][i].solver == msg.sender) revert AlreadyClaimed(unitId, msg.sender);
        }
        Job storage job = _jobs[JobIds.jobOf(unitId)];
        uint256 collateral = _collateral(job);
        uint256 w = _registry.selectionWeight(msg.sender);
        uint96 weight = w > type(uint96).max ? type(uint96).max : uint96(w);
        _claimants[unitId][n] = Claimant(msg.sender, weight);
        _secretHashes[unitId][n] = secretHash;
        // n < MAX_CLAIMANTS = 16, so n + 1 fits uint8.
        unit.claimantCount = uint8(n + 1);
        emit UnitClaimed(unitId, msg.sender, weight, collateral, secretHash);
        _registry.lockEligible(
            msg.sender,
            INodeRegistry.Role.Solver,
            INodeRegistry.Capability(job.deviceClass, job.memoryMiB, job.throughput),
            collateral
        );
    }

    /// @inheritdoc IJobManager
    function closeClaims(uint256 unitId) external {
        Unit storage unit = _units[unitId];
        _expectStatus(unitId, unit, UnitStatus.Open);
        if (block.timestamp <= unit.deadline) revert ClaimWindowStillOpen(unitId, unit.deadline);
        if (unit.claimantCount == 0) {
            uint64 deadline = uint64(block.timestamp) + _claimWindow;
            unit.deadline = deadline;
            emit ClaimWindowExtended(unitId, deadline);
            return;
        }
        uint64 seedBlock = uint64(block.number) + 1;
        unit.status = UnitStatus.Selecting;
        unit.seedBlock = seedBlock;
        emit ClaimsClosed(unitId, seedBlock, unit.claimantCount);
    }

    /// @inheritdoc IJobManager
    function selectAssignee(uint256 unitId) external {
        Unit storage unit = _units[unitId];
        _expectStatus(unitId, unit, UnitStatus.Selecting);
        bytes32 seed = _seed(unitId, unit);
        if (seed == bytes32(0)) return;
        uint256 n = unit.claimantCount;
        uint96[] memory weights = new uint96[](n);
        for (uint256 i = 0; i < n; ++i) {
            weights[i] = _claimants[unitId][i].weight;
        }
        uint256 index = MarketMath.pickWeighted(weights, uint256(seed));
        _assign(unitId, unit, index, seed, n);
    }

    /// @inheritdoc IJobManager
    function expireAssignment(uint256 unitId) external {
        Unit storage unit = _units[unitId];
        _expectStatus(unitId, unit, UnitStatus.Assigned);
        if (block.timestamp <= unit.deadline) revert DeadlineNotPassed(unitId, unit.deadline);
        emit AssignmentExpired(unitId, unit.assignee, _collateral(_jobs[JobIds.jobOf(unitId)]));
        _slashAssignee(unitId, unit, address(0), 0);
    }

    // ------------------------------------------------------------------ solver

    /// @inheritdoc IJobManager
    function commitCheckpoints(
        uint256 unitId,
        bytes32 checkpointRoot,
        uint64 numCheckpoints,
        bytes32 finalStateRoot,
        string calldata blobLocator,
        bytes32 seal
    ) external {
        Unit storage unit = _units[unitId];
        _expectStatus(unitId, unit, UnitStatus.Assigned);
        if (msg.sender != unit.assignee) revert NotAssignee(unitId, msg.sender, unit.assignee);
        if (block.timestamp > unit.deadline) revert CommitDeadlinePassed(unitId, unit.deadline);
        Job storage job = _jobs[JobIds.jobOf(unitId)];
        // steps >= checkpointInterval >= 1 and k divides T, so T / k + 1 <= 2^64 - 1 unless k = 1
        // and T = 2^64 - 1; compare in uint256 so that case cannot wrap.
        uint256 expected = uint256(job.steps / job.checkpointInterval) + 1;
        if (numCheckpoints != expected) revert WrongCheckpointCount(unitId, numCheckpoints, uint64(expected));
        if (checkpointRoot == bytes32(0)) revert ZeroCommitment();
        if (finalStateRoot == bytes32(0)) revert ZeroCommitment();
        if (seal == bytes32(0)) revert ZeroCommitment();
        if (bytes(blobLocator).length == 0) revert EmptyBlobLocator();
        uint64 seedBlock = uint64(block.number) + 1;
        unit.status = UnitStatus.Committed;
        unit.checkpointRoot = checkpointRoot;
        unit.finalStateRoot = finalStateRoot;
        unit.seal = seal;
        unit.seedBlock = seedBlock;
        emit CheckpointsCommitted(
            unitId, msg.sender, checkpointRoot, numCheckpoints, finalStateRoot, blobLocator, seedBlock, seal
        );
    }

    // ------------------------------------------------------------------ verification

    /// @inheritdoc IJobManager
    function drawVerifiers(uint256 unitId) external {
        Unit storage unit = _units[unitId];
        _expectStatus(unitId, unit, UnitStatus.Committed);
        bytes32 seed = _seed(unitId, unit);
        if (seed == bytes32(0)) return;
        uint64 deadline = uint64(block.timestamp) + _verifyWindow;
        // 64 bits of the seed pick the segments (PROTOCOL §6.5); never zero once drawn.
        uint64 verifySeed = uint64(uint256(seed)) | 1;
        unit.status = UnitStatus.Verifying;
        unit.verifySeed = verifySeed;
        unit.deadline = deadline;

        // Pick with views first, record, then lock: no state is written after an external call.
        uint256 lock = _lock(_jobs[JobIds.jobOf(unitId)]);
        uint256 wanted = _verifiersPerUnit;
        address[] memory picked = new address[](wanted + 1);
        picked[0] = unit.assignee;
        uint256 count = 0;
        // Only verifiers that joined before the seed block can be drawn, and they alone set the
        // modulus: nobody who has seen the seed can join to move the draw (PROTOCOL §6.5).
        uint64 joinedBefore = unit.seedBlock;
        for (uint256 t = 0; t < 4 * wanted && count < wanted; ++t) {
            uint256 word = uint256(keccak256(abi.encode(seed, t)));
            address v = _registry.pickPoolMember(INodeRegistry.Role.Verifier, word, joinedBefore, picked, lock);
            if (v == address(0)) continue;
            _verifiers[unitId][count] = VerifierSlot(v, VerifierStatus.Pending, false);
            ++count;
            picked[count] = v;
        }
        // count <= verifiersPerUnit, a uint8.
        unit.verifierCount = uint8(count);
        address[] memory drawn = new address[](count);
        for (uint256 i = 0; i < count; ++i) {
            drawn[i] = picked[i + 1];
        }
        emit VerifiersDrawn(unitId, drawn, verifySeed, deadline);
        for (uint256 i = 0; i < count; ++i) {
            _registry.lock(drawn[i], lock);
        }
    }

    /// @inheritdoc IJobManager
    function sealAttestation(uint256 unitId, bytes32 seal) external {
        Unit storage unit = _units[unitId];
        _expectVerifying(unitId, unit);
        if (block.timestamp > unit.deadline) revert ChallengeWindowClosed(unitId, unit.deadline);
        // After a reveal the true root is public: a seal made now would need no replay.
        if (unit.forcedRevealed) revert SealingClosed(unitId);
        // An opened seal's end roots are public: before the deadline that needs every drawn
        // verifier sealed, so only a deadline a lost dispute extended lets one still Pending here.
        if (unit.attestCount != 0) revert SealingClosed(unitId);
        if (seal == bytes32(0)) revert ZeroCommitment();
        uint256 index = _findVerifier(unitId, unit, msg.sender);
        if (index == NOT_DRAWN) revert NotSelectedVerifier(unitId, msg.sender);
        VerifierSlot storage slot = _verifiers[unitId][index];
        if (slot.status != VerifierStatus.Pending) revert AlreadyResponded(unitId, msg.sender, slot.status);
        slot.status = VerifierStatus.Sealed;
        _attestations[unitId][index] = seal;
        emit AttestationSealed(unitId, msg.sender, seal);
    }

    /// @inheritdoc IJobManager
    function attest(uint256 unitId, bytes32[] calldata endRoots, bytes32 salt) external {
        Unit storage unit = _units[unitId];
        _expectVerifying(unitId, unit);
        uint256 index = _findVerifier(unitId, unit, msg.sender);
        if (index == NOT_DRAWN) revert NotSelectedVerifier(unitId, msg.sender);
        VerifierSlot storage slot = _verifiers[unitId][index];
        uint64[] memory segments = _sampledSegments(unitId, unit, msg.sender);
        if (endRoots.length != segments.length) revert WrongAttestationLength(endRoots.length, segments.length);
        // After a forced reveal the verdicts are known: nobody still Pending may attest, and a seal
        // still closed then was judged silent (opened now it would earn the fee without the risk).
        if (unit.forcedRevealed) revert SealingClosed(unitId);
        uint64 deadline = unit.deadline;
        uint256 unsealed = _countStatus(unitId, unit.verifierCount, VerifierStatus.Pending);
        if (slot.status == VerifierStatus.Pending) {
            // The last drawn verifier to answer may attest in the clear, in the window: every
            // other one is already bound by its seal, so there is nobody left to copy it.
            if (block.timestamp > deadline) revert ChallengeWindowClosed(unitId, deadline);
            if (unsealed != 1) revert RevealNotOpen(unitId, deadline);
            // Nor once another's roots are public (a seal opened past a deadline since extended).
            if (unit.attestCount != 0) revert SealingClosed(unitId);
        } else {
            if (slot.status != VerifierStatus.Sealed) revert NotSealed(unitId, msg.sender, slot.status);
            // Before the window closes a seal may be opened only once nobody is left to copy it.
            if (block.timestamp <= deadline && unsealed != 0) revert RevealNotOpen(unitId, deadline);
            uint64 revealDeadline = deadline + _revealWindow;
            if (block.timestamp > revealDeadline) revert RevealWindowClosed(unitId, revealDeadline);
            bytes32 seal = _attestations[unitId][index];
            if (_sealOf(unitId, unit.attempt, msg.sender, endRoots, salt) != seal) {
                revert AttestationSealMismatch(unitId, msg.sender, seal);
            }
        }
        slot.status = VerifierStatus.Attested;
        _attestations[unitId][index] = keccak256(abi.encode(endRoots));
        // attestCount <= verifierCount, a uint8: each verifier attests at most once.
        unchecked {
            ++unit.attestCount;
        }
        emit Attested(unitId, msg.sender, segments, endRoots);
    }

    /// @inheritdoc IJobManager
    function challenge(uint256 unitId, bytes32 counterClaim) external nonReentrant returns (uint256 gameId) {
        Unit storage unit = _units[unitId];
        _expectStatus(unitId, unit, UnitStatus.Verifying);
        if (block.timestamp > unit.deadline) revert ChallengeWindowClosed(unitId, unit.deadline);
        INodeRegistry.Role role = _registry.roleOf(msg.sender);
        if (role != INodeRegistry.Role.Verifier && role != INodeRegistry.Role.Whistleblower) {
            revert NotChallenger(msg.sender, role);
        }
        if (counterClaim == bytes32(0)) revert ZeroCommitment();
        if (counterClaim == unit.checkpointRoot) revert ClaimMatchesCommitment(unitId, counterClaim);

        // A drawn verifier that challenges still seals and opens its attestation: a challenge is
        // public, so it cannot stand for a sealed verdict.
        unit.status = UnitStatus.Disputed;
        // At most uint96.max (_bondFor clamps it), so the cast into Dispute.bond is exact.
        uint96 bond = uint96(_bondFor(_jobs[JobIds.jobOf(unitId)]));
        _token.safeTransferFrom(msg.sender, address(this), bond);

        // The game id is only known once the arbiter (fixed at deployment) opened the game; the
        // dispute record is written right after, and every entry point is nonReentrant.
        gameId = IDisputeArbiter(_arbiter).openGame(_gameRequest(unitId, unit, counterClaim));
        if (gameId == 0) revert UnknownGame(gameId, unitId);
        if (_gameUnits[gameId] != 0) revert UnknownGame(gameId, unitId);
        _disputes[unitId] = Dispute(gameId, msg.sender, bond);
        _gameUnits[gameId] = unitId;
        emit ChallengeOpened(unitId, msg.sender, gameId, counterClaim, bond);
    }

    /// @inheritdoc IDisputeCallback
    function onDisputeResolved(uint256 gameId, uint256 unitId, bool challengerWon) external {
        if (msg.sender != _arbiter) revert NotArbiter(msg.sender);
        if (unitId == 0) revert UnknownGame(gameId, unitId);
        if (_gameUnits[gameId] != unitId) revert UnknownGame(gameId, unitId);
        if (_disputes[unitId].gameId != gameId) {
            // A game of a dispute voided by a forced-error reveal: its result changes nothing.
            delete _gameUnits[gameId];
            emit VoidedGameEnded(gameId, unitId, challengerWon);
            return;
        }
        Unit storage unit = _units[unitId];
        Dispute memory d = _disputes[unitId];
        delete _gameUnits[gameId];
        // A challenger that won over a round that may be forced may only have found its forced
        // error: the solver can still reveal it (voiding the dispute), so the slash waits
        // (`settleDispute`). The dispute record stays, its game is gone: that is the held result.
        // The judge decides whether and until when (`holdEnd`: zero when the win applies now).
        uint64 until = challengerWon ? _judge.holdEnd(unitId) : 0;
        if (until != 0) {
            _holdEnds[unitId] = until;
            emit DisputeResultHeld(unitId, gameId, until);
            return;
        }
        if (challengerWon) {
            _applyWin(unitId, unit, d);
        } else {
            delete _disputes[unitId];
            address solver = unit.assignee;
            uint256 toSolver = MarketMath.share(d.bond, _challengerRewardBps);
            uint64 deadline = _backToVerifying(unit);
            emit DisputeResolved(unitId, gameId, false, deadline);
            _credit(solver, toSolver);
            _addJackpot(d.bond - toSolver);
        }
    }

    /// @inheritdoc IJobManager
    function settleDispute(uint256 unitId) external {
        Unit storage unit = _units[unitId];
        _expectStatus(unitId, unit, UnitStatus.Disputed);
        // A Disputed unit always has its dispute (a void returns it to Verifying), whose game is
        // either still running (no hold end) or ended with the challenger's win held.
        Dispute memory d = _disputes[unitId];
        uint64 until = _holdEnds[unitId];
        if (until == 0) revert NoHeldResult(unitId, d.gameId);
        if (block.timestamp <= until) revert ResultHeldUntil(unitId, until);
        _applyWin(unitId, unit, d);
    }

    /// @inheritdoc IJobManager
    function finalize(uint256 unitId) external {
        Unit storage unit = _units[unitId];
        _expectStatus(unitId, unit, UnitStatus.Verifying);
        if (block.timestamp <= unit.deadline) revert DeadlineNotPassed(unitId, unit.deadline);
        uint64 revealDeadline = unit.deadline + _revealWindow;
        if (block.timestamp <= revealDeadline && _countStatus(unitId, unit.verifierCount, VerifierStatus.Sealed) != 0) {
            revert AwaitingReveals(unitId, revealDeadline);
        }
        // A forced round's reveal opens when the last seal does, at revealDeadline at the latest:
        // only the solver, who alone knows whether its round is forced, may finalize before one
        // more revealWindow has left the reveal a slot of its own.
        uint64 revealSlotEnd = revealDeadline + _revealWindow;
        bool solverMayWaive = msg.sender == unit.assignee || unit.forcedRevealed;
        if (!solverMayWaive && block.timestamp <= revealSlotEnd) revert AwaitingReveals(unitId, revealSlotEnd);
        uint256 jobId = JobIds.jobOf(unitId);
        Job storage job = _jobs[jobId];
        uint256 reward = job.reward;
        uint256 fee = job.verificationFee;
        (uint256 solverPay, uint256 tax) = MarketMath.payout(reward, fee, _taxBps);
        address solver = unit.assignee;

        unit.status = UnitStatus.Finalized;
        // unitsFinalized < unitCount (a uint8) while a unit is unfinalized.
        unchecked {
            ++job.unitsFinalized;
        }
        emit UnitFinalized(unitId, solver, solverPay, fee, tax);
        if (job.unitsFinalized == job.unitCount) {
            job.status = JobStatus.Completed;
            emit JobCompleted(jobId);
        }
        _credit(solver, solverPay);
        uint256 lock = _lock(job);
        _addJackpot(tax + _payVerifiers(unitId, unit.verifierCount, unit.attestCount, fee, lock));
        if (unit.forcedRevealed) _payCatchers(unitId, unit.verifierCount, fee);
        _registry.release(solver, _collateral(job), true);
        _settleVerifierLocks(unitId, unit.verifierCount, lock, true);
    }

    // ------------------------------------------------------------------ forced errors

    /// @inheritdoc IJobManager
    function applyForcedReveal(uint256 unitId, uint64 position, bytes32 trueRoot, uint8[] calldata verdicts)
        external
    {
        _onlyJudge();
        Unit storage unit = _units[unitId];
        // An open dispute is voided: its challenger gets its bond back, but no share (a challenge
        // is public, so a share would go to whoever copies it first; catchers are the drawn
        // verifiers whose sealed attestations were RIGHT).
        if (unit.status == UnitStatus.Disputed) _voidDispute(unitId);
        // The true root stands from now on; it can be challenged for at least disputeGrace.
        uint64 deadline = _backToVerifying(unit);
        unit.forcedRevealed = true;
        // Verifiers replayed from P and the court proves their start roots against it.
        _publishedRoots[unitId] = unit.checkpointRoot;
        unit.checkpointRoot = trueRoot;
        uint256 lock = _lock(_jobs[JobIds.jobOf(unitId)]);
        // Nothing moves yet: the verdicts trust the solver's C, which can still be disputed.
        // Finalize pays the catchers and slashes the WRONG verifiers' locks; a re-opened unit (C
        // overturned) pays no catcher and releases every lock.
        (uint256 caught, uint256 wrong) = _settleForced(unitId, unit, verdicts, lock);
        emit ForcedErrorRevealed(unitId, unit.assignee, position, trueRoot, caught, wrong, deadline);
    }

    /// @inheritdoc IJobManager
    function applyPrematureReveal(uint256 unitId, address reporter) external {
        _onlyJudge();
        Unit storage unit = _units[unitId];
        // Never Disputed: the judge leaves an open dispute to its game.
        emit PrematureRevealReported(unitId, unit.assignee, reporter, _collateral(_jobs[JobIds.jobOf(unitId)]));
        _slashAssignee(unitId, unit, reporter, 0);
    }

    /// @inheritdoc IJobManager
    function fundJackpot(uint256 amount) external nonReentrant {
        if (amount == 0) revert ZeroAmount();
        _addJackpot(amount);
        _token.safeTransferFrom(msg.sender, address(this), amount);
    }

    /// @inheritdoc IJobManager
    function withdraw() external nonReentrant {
        uint256 amount = _credits.take(msg.sender);
        if (amount == 0) revert NothingToWithdraw(msg.sender);
        emit Withdrawn(msg.sender, amount);
        _token.safeTransfer(msg.sender, amount);
    }

    // ------------------------------------------------------------------ views

    /// @inheritdoc IJobManager
    function token() external view returns (address) {
        return address(_token);
    }

    /// @inheritdoc IJobManager
    function registry() external view returns (address) {
        return address(_registry);
    }

    /// @inheritdoc IJobManager
    function arbiter() external view returns (address) {
        return _arbiter;
    }

    /// @inheritdoc IJobManager
    function config() external view returns (Config memory) {
        return Config(
            _claimWindow,
            _verifyWindow,
            _disputeGrace,
            _taxBps,
            _challengerRewardBps,
            _collateralBps,
            _verifiersPerUnit,
            _segmentsPerVerifier,
            _verifierLock,
            _challengeBond,
            _forcedErrorBps,
            _lazySlashFactor,
            _revealWindow
        );
    }

    /// @inheritdoc IJobManager
    function jobCount() external view returns (uint256) {
        return _jobCount;
    }

    /// @inheritdoc IJobManager
    function getJob(uint256 jobId) external view returns (Job memory job) {
        job = _jobs[jobId];
        job.escrow = uint128(_escrow(_jobs[jobId]));
    }

    /// @inheritdoc IJobManager
    function getUnit(uint256 unitId) external view returns (Unit memory) {
        return _units[unitId];
    }

    /// @inheritdoc IJobManager
    function getClaimants(uint256 unitId) external view returns (address[] memory solvers, uint96[] memory weights) {
        uint256 n = _units[unitId].claimantCount;
        solvers = new address[](n);
        weights = new uint96[](n);
        for (uint256 i = 0; i < n; ++i) {
            Claimant memory c = _claimants[unitId][i];
            solvers[i] = c.solver;
            weights[i] = c.weight;
        }
    }

    /// @inheritdoc IJobManager
    function getVerifiers(uint256 unitId) external view returns (address[] memory verifiers) {
        uint256 n = _units[unitId].verifierCount;
        verifiers = new address[](n);
        for (uint256 i = 0; i < n; ++i) {
            verifiers[i] = _verifiers[unitId][i].verifier;
        }
    }

    /// @inheritdoc IJobManager
    function verifierStatus(uint256 unitId, address verifier)
        external
        view
        returns (VerifierStatus status, bytes32 attestationHash)
    {
        uint256 index = _findVerifier(unitId, _units[unitId], verifier);
        if (index == NOT_DRAWN) return (VerifierStatus.None, bytes32(0));
        status = _verifiers[unitId][index].status;
        // The seal while Sealed, the hash of the opened end roots once Attested (or Slashed); a
        // Pending slot may still hold an earlier attempt's value, so it reads zero.
        if (status != VerifierStatus.Pending) attestationHash = _attestations[unitId][index];
    }

    /// @inheritdoc IJobManager
    function publishedRootOf(uint256 unitId) external view returns (bytes32) {
        Unit storage unit = _units[unitId];
        if (unit.forcedRevealed) return _publishedRoots[unitId];
        return unit.checkpointRoot;
    }

    /// @inheritdoc IJobManager
    function sampledSegments(uint256 unitId, address verifier) external view returns (uint64[] memory) {
        Unit storage unit = _units[unitId];
        if (unit.verifySeed == 0) return new uint64[](0);
        return _sampledSegments(unitId, unit, verifier);
    }

    /// @inheritdoc IJobManager
    function getDispute(uint256 unitId) external view returns (Dispute memory) {
        return _disputes[unitId];
    }

    /// @inheritdoc IJobManager
    function heldUntil(uint256 unitId) external view returns (uint64) {
        return _holdEnds[unitId];
    }

    /// @inheritdoc IJobManager
    function unitOfGame(uint256 gameId) external view returns (uint256) {
        return _gameUnits[gameId];
    }

    /// @inheritdoc IJobManager
    function credits(address account) external view returns (uint256) {
        return _credits.owed(account);
    }

    /// @inheritdoc IJobManager
    function jackpot() external view returns (uint256) {
        return _jackpot;
    }

    /// @inheritdoc IJobManager
    function collateralOf(uint256 jobId) external view returns (uint256) {
        return _collateral(_jobs[jobId]);
    }

    /// @inheritdoc IJobManager
    function challengeBondOf(uint256 unitId) external view returns (uint256) {
        return _bondFor(_jobs[JobIds.jobOf(unitId)]);
    }

    /// @inheritdoc IJobManager
    function verifierLockOf(uint256 jobId) external view returns (uint256) {
        return _lock(_jobs[jobId]);
    }

    /// @inheritdoc IJobManager
    function payoutOf(uint256 jobId) external view returns (uint256 solverPay, uint256 verifierFee, uint256 tax) {
        Job storage job = _jobs[jobId];
        verifierFee = job.verificationFee;
        (solverPay, tax) = MarketMath.payout(job.reward, verifierFee, _taxBps);
    }

    /// @inheritdoc IJobManager
    function secretHashOf(uint256 unitId, uint256 index) external view returns (bytes32) {
        return _secretHashes[unitId][index];
    }

    /// @inheritdoc IJobManager
    function forcedErrorJudge() external view returns (address) {
        return address(_judge);
    }

    /// @inheritdoc IJobManager
    function sealOf(uint256 unitId, uint32 attempt, address verifier, bytes32[] calldata endRoots, bytes32 salt)
        external
        pure
        returns (bytes32)
    {
        return _sealOf(unitId, attempt, verifier, endRoots, salt);
    }

    /// @inheritdoc IJobManager
    function unitIdOf(uint256 jobId, uint256 index) external pure returns (uint256) {
        return JobIds.unitId(jobId, index);
    }

    /// @inheritdoc IJobManager
    function jobIdOf(uint256 unitId) external pure returns (uint256) {
        return JobIds.jobOf(unitId);
    }

    // ------------------------------------------------------------------ internal

    function _expectStatus(uint256 unitId, Unit storage unit, UnitStatus expected) private view {
        if (unit.status != expected) revert WrongUnitStatus(unitId, expected, unit.status);
    }

    /// @dev Verifiers seal and open their attestations while the unit is Verifying or Disputed.
    function _expectVerifying(uint256 unitId, Unit storage unit) private view {
        if (unit.status != UnitStatus.Verifying && unit.status != UnitStatus.Disputed) {
            revert WrongUnitStatus(unitId, UnitStatus.Verifying, unit.status);
        }
    }

    function _sealOf(uint256 unitId, uint32 attempt, address verifier, bytes32[] calldata endRoots, bytes32 salt)
        private
        pure
        returns (bytes32)
    {
        return keccak256(abi.encode(unitId, attempt, verifier, endRoots, salt));
    }

    /// @dev A drawn verifier whose lock finalize slashes: one that never sealed, never opened its
    ///      seal, or was judged WRONG by a forced-error reveal.
    function _penalised(VerifierStatus status) private pure returns (bool) {
        return status == VerifierStatus.Pending || status == VerifierStatus.Sealed || status == VerifierStatus.Slashed;
    }

    /// @dev How many of the unit's `n` drawn verifiers are in `status` (n <= verifiersPerUnit).
    function _countStatus(uint256 unitId, uint256 n, VerifierStatus status) private view returns (uint256 count) {
        for (uint256 i = 0; i < n; ++i) {
            if (_verifiers[unitId][i].status == status) ++count;
        }
    }

    /// @dev What the job still holds in escrow: the reward of each unit not yet finalized while the
    ///      job is open (a unit's reward leaves the escrow when it is finalized or cancelled).
    function _escrow(Job storage job) private view returns (uint256) {
        if (job.status != JobStatus.Open) return 0;
        return uint256(job.reward) * (job.unitCount - job.unitsFinalized);
    }

    function _collateral(Job storage job) private view returns (uint256) {
        return MarketMath.share(job.reward, _collateralBps);
    }

    /// @dev The bond a challenge of a unit of `job` takes (`challengeBondOf`): what a winning
    ///      challenger is paid on top of its bond (`_slashAssignee`: the same share of the same
    ///      collateral, rounded alike), at least `challengeBond`. Clamped to uint96.max, the width
    ///      of `Dispute.bond`: only a collateralBps above 10 000 on a reward near uint96.max
    ///      exceeds it (challengerRewardBps <= BPS, checked at deployment).
    function _bondFor(Job storage job) private view returns (uint256) {
        uint256 bond = MarketMath.share(_collateral(job), _challengerRewardBps);
        if (bond < _challengeBond) return _challengeBond;
        return bond > type(uint96).max ? type(uint96).max : bond;
    }

    /// @dev The per-unit verifier lock of `job` (`verifierLockOf`): a function of the job's fixed
    ///      parameters and the deployment's, so the draw, the release and the slash agree.
    function _lock(Job storage job) private view returns (uint256) {
        // The solver's pay (`payout`'s first value): reward − fee − tax.
        uint256 reward = job.reward;
        uint256 solverPay = reward - job.verificationFee - MarketMath.share(reward, _taxBps);
        return MarketMath.verifierLock(
            solverPay, _segmentsPerVerifier, job.steps / job.checkpointInterval, _lazySlashFactor, _verifierLock
        );
    }

    /// @dev The seed of a Selecting or Committed unit: keccak of the seed block's hash, the unit and
    ///      its attempt. Returns zero (and re-arms the seed block) if that hash is unavailable.
    function _seed(uint256 unitId, Unit storage unit) private returns (bytes32) {
        uint64 seedBlock = unit.seedBlock;
        if (block.number <= seedBlock) revert SeedNotYetAvailable(unitId, seedBlock);
        bytes32 hash = blockhash(seedBlock);
        if (hash == bytes32(0)) {
            uint64 next = uint64(block.number) + 1;
            unit.seedBlock = next;
            emit SeedRearmed(unitId, next);
            return bytes32(0);
        }
        return keccak256(abi.encode(hash, unitId, unit.attempt, unit.status));
    }

    function _sampledSegments(uint256 unitId, Unit storage unit, address verifier)
        private
        view
        returns (uint64[] memory)
    {
        Job storage job = _jobs[JobIds.jobOf(unitId)];
        uint256 numSegments = job.steps / job.checkpointInterval;
        uint256 count = _segmentsPerVerifier < numSegments ? _segmentsPerVerifier : numSegments;
        return MarketMath.sampleSegments(unit.verifySeed, verifier, count, numSegments);
    }

    /// @dev Index of `verifier` among the drawn verifiers of the unit's current attempt, or
    ///      NOT_DRAWN. At most `verifiersPerUnit` slots are scanned.
    function _findVerifier(uint256 unitId, Unit storage unit, address verifier)
        private
        view
        returns (uint256)
    {
        uint256 n = unit.verifierCount;
        for (uint256 i = 0; i < n; ++i) {
            if (_verifiers[unitId][i].verifier == verifier) return i;
        }
        return NOT_DRAWN;
    }

    function _reopen(uint256 unitId, Unit storage unit) private {
        uint64 deadline = uint64(block.timestamp) + _claimWindow;
        uint32 attempt = unit.attempt + 1;
        unit.status = UnitStatus.Open;
        unit.deadline = deadline;
        unit.claimantCount = 0;
        unit.verifierCount = 0;
        unit.attestCount = 0;
        unit.assignee = address(0);
        unit.attempt = attempt;
        unit.verifySeed = 0;
        unit.forcedRevealed = false;
        emit UnitOpened(unitId, JobIds.jobOf(unitId), deadline, attempt);
    }

    /// @dev Assigns the unit to its claimant `index` (of `n`) and releases the others.
    function _assign(uint256 unitId, Unit storage unit, uint256 index, bytes32 seed, uint256 n) private {
        Job storage job = _jobs[JobIds.jobOf(unitId)];
        address winner = _claimants[unitId][index].solver;
        uint64 deadline = uint64(block.timestamp) + job.computeTime;
        unit.status = UnitStatus.Assigned;
        unit.assignee = winner;
        // index < claimantCount <= MAX_CLAIMANTS = 16 fits uint8; 64 bits of the seed decide
        // (with the assignee's secret) whether the round is forced.
        unit.assigneeIndex = uint8(index);
        unit.assignSeed = uint64(uint256(seed));
        unit.deadline = deadline;
        emit UnitAssigned(unitId, winner, deadline, seed);
        _releaseClaimants(unitId, n, winner, _collateral(job));
    }

    function _releaseClaimants(uint256 unitId, uint256 n, address keep, uint256 collateral) private {
        for (uint256 i = 0; i < n; ++i) {
            address solver = _claimants[unitId][i].solver;
            if (solver != keep) emit ClaimReleased(unitId, solver);
        }
        for (uint256 i = 0; i < n; ++i) {
            address solver = _claimants[unitId][i].solver;
            if (solver != keep) _registry.release(solver, collateral, false);
        }
    }

    function _gameRequest(uint256 unitId, Unit storage unit, bytes32 counterClaim)
        private
        view
        returns (IDisputeArbiter.GameRequest memory req)
    {
        Job storage job = _jobs[JobIds.jobOf(unitId)];
        req.unitId = unitId;
        req.solver = unit.assignee;
        req.challenger = msg.sender;
        req.specHash = job.specHash;
        req.datasetRoot = job.datasetRoot;
        req.initialStateRoot = job.initialStateRoot;
        req.steps = job.steps;
        req.checkpointInterval = job.checkpointInterval;
        req.checkpointRoot = unit.checkpointRoot;
        req.numCheckpoints = job.steps / job.checkpointInterval + 1;
        req.finalStateRoot = unit.finalStateRoot;
        req.challengerClaim = counterClaim;
    }

    /// @dev Credits the attesting verifiers their equal share of `fee`; returns what goes to the
    ///      jackpot instead: the division remainder (all of `fee` if nobody attested) and the
    ///      locks `lock` (the job's S) of silent and WRONG verifiers (slashed by
    ///      `_settleVerifierLocks`).
    function _payVerifiers(uint256 unitId, uint256 verifierCount, uint256 attested, uint256 fee, uint256 lock)
        private
        returns (uint256 toJackpot)
    {
        uint256 feeShare = attested == 0 ? 0 : fee / attested;
        toJackpot = attested == 0 ? fee : fee % attested;
        for (uint256 i = 0; i < verifierCount; ++i) {
            VerifierSlot memory slot = _verifiers[unitId][i];
            if (slot.status == VerifierStatus.Attested) {
                _credit(slot.verifier, feeShare);
            } else if (_penalised(slot.status)) {
                toJackpot += lock;
                emit VerifierPenalised(unitId, slot.verifier, lock);
            }
        }
    }

    /// @dev Voids the unit's open dispute: the challenger gets its bond back and the game's result
    ///      will be ignored.
    function _voidDispute(uint256 unitId) private {
        Dispute memory d = _disputes[unitId];
        // _gameUnits keeps a running game until its result arrives (then ignored: no dispute
        // matches); a held result's game is gone already.
        delete _disputes[unitId];
        delete _holdEnds[unitId];
        emit DisputeVoided(unitId, d.gameId, d.challenger);
        _credit(d.challenger, d.bond);
    }

    /// @dev Marks the RIGHT verifiers catchers (paid at finalize) and the WRONG ones Slashed: no
    ///      fee, and their lock is slashed at finalize (released if the unit re-opens).
    function _settleForced(uint256 unitId, Unit storage unit, uint8[] calldata verdicts, uint256 lock)
        private
        returns (uint256 caught, uint256 wrong)
    {
        for (uint256 i = 0; i < verdicts.length; ++i) {
            VerifierSlot storage slot = _verifiers[unitId][i];
            if (verdicts[i] == ForcedErrors.VERDICT_RIGHT) {
                slot.caught = true;
                ++caught;
                emit AttestationJudgedRight(unitId, slot.verifier);
            } else if (verdicts[i] == ForcedErrors.VERDICT_WRONG) {
                slot.status = VerifierStatus.Slashed;
                ++wrong;
                emit AttestationJudgedWrong(unitId, slot.verifier, lock);
            }
        }
        // wrong <= attestCount: only verifiers that attested get a verdict.
        unit.attestCount -= uint8(wrong);
    }

    /// @dev Pays each catcher of the unit's forced error `J / 2^(k−1)` (J = the fee, k catchers),
    ///      at most an equal share of the jackpot's balance, which by now holds this unit's tax and
    ///      the locks of the verifiers it penalised.
    function _payCatchers(uint256 unitId, uint256 verifierCount, uint256 fee) private {
        uint256 caught = 0;
        for (uint256 i = 0; i < verifierCount; ++i) {
            if (_verifiers[unitId][i].caught) ++caught;
        }
        uint256 share = ForcedErrors.catcherShare(fee, caught, _jackpot);
        for (uint256 i = 0; i < verifierCount; ++i) {
            VerifierSlot memory slot = _verifiers[unitId][i];
            if (!slot.caught) continue;
            emit JackpotPaid(unitId, slot.verifier, share);
            _credit(slot.verifier, share);
        }
        // caught * share <= _jackpot: catcherShare caps the share at _jackpot / caught.
        _jackpot -= caught * share;
    }

    function _onlyJudge() private view {
        if (msg.sender != address(_judge)) revert NotJudge(msg.sender);
    }

    /// @dev Applies the challenger's win of dispute `d`: slashes the assignee (the challenger gets
    ///      its bond back and its reward) and re-opens the unit.
    function _applyWin(uint256 unitId, Unit storage unit, Dispute memory d) private {
        delete _disputes[unitId];
        delete _holdEnds[unitId];
        emit DisputeResolved(unitId, d.gameId, true, 0);
        _slashAssignee(unitId, unit, d.challenger, d.bond);
    }

    /// @dev Returns the unit to Verifying with its challenge deadline at least `disputeGrace` away.
    function _backToVerifying(Unit storage unit) private returns (uint64 deadline) {
        deadline = unit.deadline;
        uint64 graceEnd = uint64(block.timestamp) + _disputeGrace;
        if (graceEnd > deadline) deadline = graceEnd;
        unit.status = UnitStatus.Verifying;
        unit.deadline = deadline;
    }

    /// @dev Slashes the assignee's collateral and re-opens the unit: `beneficiary` (if any) is
    ///      credited `extra` plus `challengerRewardBps` of the collateral, the rest goes to the
    ///      jackpot; the drawn verifiers' locks are released.
    function _slashAssignee(uint256 unitId, Unit storage unit, address beneficiary, uint256 extra) private {
        address solver = unit.assignee;
        uint256 verifierCount = unit.verifierCount;
        Job storage job = _jobs[JobIds.jobOf(unitId)];
        uint256 collateral = _collateral(job);
        uint256 reward = beneficiary == address(0) ? 0 : MarketMath.share(collateral, _challengerRewardBps);
        _credit(beneficiary, extra + reward);
        _addJackpot(collateral - reward);
        _reopen(unitId, unit);
        _registry.slash(solver, collateral, true);
        _settleVerifierLocks(unitId, verifierCount, _lock(job), false);
    }

    /// @dev Releases the locks of the drawn verifiers, except that with `penalise` (finalize)
    ///      those that stayed silent or were judged WRONG are slashed instead (a unit that re-opens
    ///      releases all: a WRONG verdict falls with the C it trusted).
    function _settleVerifierLocks(uint256 unitId, uint256 verifierCount, uint256 lock, bool penalise) private {
        for (uint256 i = 0; i < verifierCount; ++i) {
            VerifierSlot memory slot = _verifiers[unitId][i];
            if (penalise && _penalised(slot.status)) {
                _registry.slash(slot.verifier, lock, true);
            } else {
                _registry.release(slot.verifier, lock, false);
            }
        }
    }

    function _credit(address account, uint256 amount) private {
        if (amount == 0) return;
        uint256 balance = _credits.add(account, amount);
        emit Credited(account, amount, balance);
    }

    function _addJackpot(uint256 amount) private {
        if (amount == 0) return;
        uint256 total = _jackpot + amount;
        _jackpot = total;
        emit JackpotIncreased(amount, total);
    }
}
