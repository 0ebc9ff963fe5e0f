// SPDX-License-Identifier: MIT
pragma solidity 0.8.37;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";
import {IJobManager, DATA_OPEN_PART, DATA_SAMPLES} from "../interfaces/IJobManager.sol";
import {INodeRegistry} from "../interfaces/INodeRegistry.sol";
import {IDisputeArbiter} from "../interfaces/IDisputeArbiter.sol";
import {IDisputeCallback} from "../interfaces/IDisputeCallback.sol";
import {DataRequests} from "../libraries/DataRequests.sol";
import {TensorMerkle} from "../libraries/TensorMerkle.sol";
import {JobIds} from "../libraries/JobIds.sol";
import {MarketMath} from "../libraries/MarketMath.sol";
import {ForcedErrors} from "../libraries/ForcedErrors.sol";
import {ForcedErrorJudge} from "./ForcedErrorJudge.sol";
import {JobManagerBase} from "./JobManagerBase.sol";

/// @title JobManagerExtension
/// @notice The job manager's rare paths (docs/PROTOCOL.md §6): cancelling a job, expiring an
///         assignment, disputes and their results, data requests (§6.11), forced-error reveals
///         and keeping a record.
///         Their documentation is `IJobManager`'s: the `JobManager` declares each of them and
///         forwards the call here.
/// @dev Runs only by DELEGATECALL from the JobManager it was deployed for (`onlyDelegated`), on that
///      manager's storage (the `JobManagerBase` layout both inherit) and with the same
///      parameters (its own immutables, set from the same Config). Called directly it reverts:
///      its own storage is empty and holds nothing.
contract JobManagerExtension is JobManagerBase, IDisputeCallback {
    using SafeERC20 for IERC20;

    /// @notice Called other than by DELEGATECALL from the manager that created this extension.
    error NotDelegated();

    /// @dev The manager this extension was deployed for: the only storage its code runs on.
    address private immutable _manager;

    /// @dev Takes the manager's registry, parameters and judge from the manager itself, so that
    ///      the immutables it runs with cannot differ from the manager's.
    constructor(IJobManager manager_)
        JobManagerBase(manager_.registry(), manager_.config(), manager_.forcedErrorJudge())
    {
        _manager = address(manager_);
    }

    /// @notice The manager whose storage this extension's code runs on (`setExtension` checks it).
    function manager() external view returns (address) {
        return _manager;
    }

    /// @dev Every entry point runs as the manager (by its DELEGATECALL) or not at all.
    modifier onlyDelegated() {
        if (address(this) != _manager) revert NotDelegated();
        _;
    }

    /// @dev `IJobManager.cancelJob`, run as the manager.
    function cancelJob(uint256 jobId) external onlyDelegated {
        (Record storage r, bool live) = _job(jobId);
        if (!live) revert IJobManager.UnknownJob(jobId);
        if (msg.sender != r.submitter) revert IJobManager.NotSubmitter(jobId, msg.sender);
        IJobManager.JobStatus jobStatus = _jobStatus(r.status);
        if (jobStatus != IJobManager.JobStatus.Open) revert IJobManager.JobNotOpen(jobId, jobStatus);
        uint256 unitId = JobIds.unitId(jobId, 0);
        if (r.status != IJobManager.UnitStatus.Open && r.status != IJobManager.UnitStatus.Selecting) {
            revert IJobManager.WrongUnitStatus(unitId, IJobManager.UnitStatus.Open, r.status);
        }
        uint256 refund = r.reward;
        r.status = IJobManager.UnitStatus.Cancelled;
        emit IJobManager.JobCancelled(jobId, refund);
        _credit(msg.sender, refund);
        _releaseClaimants(JobIds.recordOf(jobId), unitId, r.claimantCount, address(0), _collateral(r));
    }

    /// @dev `IJobManager.expireAssignment`, run as the manager.
    function expireAssignment(uint256 unitId) external onlyDelegated {
        (Record storage r, uint256 record) = _expect(unitId, IJobManager.UnitStatus.Assigned);
        if (block.timestamp <= r.deadline) revert IJobManager.DeadlineNotPassed(unitId, r.deadline);
        emit IJobManager.AssignmentExpired(unitId, r.assignee, _collateral(r));
        _slashAssignee(unitId, record, r, address(0), 0, 0);
    }

    /// @dev `IJobManager.challenge`, run as the manager.
    function challenge(uint256 unitId, bytes32 counterClaim)
        external
        onlyDelegated
        nonReentrant
        returns (uint256 gameId)
    {
        (Record storage r, uint256 record) = _expect(unitId, IJobManager.UnitStatus.Verifying);
        if (block.timestamp > r.deadline) revert IJobManager.ChallengeWindowClosed(unitId, r.deadline);
        INodeRegistry.Role role = _registry.roleOf(msg.sender);
        if (role != INodeRegistry.Role.Verifier && role != INodeRegistry.Role.Whistleblower) {
            revert IJobManager.NotChallenger(msg.sender, role);
        }
        if (counterClaim == bytes32(0)) revert IJobManager.ZeroCommitment();
        if (counterClaim == r.checkpointRoot) revert IJobManager.ClaimMatchesCommitment(unitId, counterClaim);

        // A drawn verifier that challenges still seals and opens its attestation: a challenge is
        // public, so it cannot stand for a sealed verdict.
        r.status = IJobManager.UnitStatus.Disputed;
        // At most uint96.max (_bondFor clamps it), so the cast into Dispute.bond is exact.
        uint96 bond = uint96(_bondFor(r));
        _token.safeTransferFrom(msg.sender, address(this), bond);

        // The game id is only known once the arbiter (fixed at deployment) opened the game; the
        // dispute record is written right after, and every entry point is nonReentrant.
        gameId = IDisputeArbiter(_arbiter).openGame(_gameRequest(unitId, r, counterClaim));
        if (gameId == 0) revert UnknownGame(gameId, unitId);
        if (_gameUnits[gameId] != 0) revert UnknownGame(gameId, unitId);
        _disputes[record] = IJobManager.Dispute(gameId, msg.sender, bond);
        _gameUnits[gameId] = unitId;
        emit IJobManager.ChallengeOpened(unitId, msg.sender, gameId, counterClaim, bond);
    }

    /// @dev `IDisputeCallback.onDisputeResolved`, run as the manager.
    function onDisputeResolved(uint256 gameId, uint256 unitId, bool challengerWon) external onlyDelegated {
        if (msg.sender != _arbiter) revert NotArbiter(msg.sender);
        if (unitId == 0) revert UnknownGame(gameId, unitId);
        if (_gameUnits[gameId] != unitId) revert UnknownGame(gameId, unitId);
        (Record storage r, uint256 record, bool live) = _unit(unitId);
        if (!live || _disputes[record].gameId != gameId) {
            // A game of a dispute voided by a forced-error reveal: its result changes nothing.
            delete _gameUnits[gameId];
            emit IJobManager.VoidedGameEnded(gameId, unitId, challengerWon);
            return;
        }
        IJobManager.Dispute memory d = _disputes[record];
        delete _gameUnits[gameId];
        // A challenger that won over a round that may be forced may only have found its forced
        // error: the solver can still reveal it (voiding the dispute), so the slash waits
        // (`settleDispute`). The dispute record stays, its game is gone: that is the held result.
        // The judge decides whether and until when (`holdEnd`: zero when the win applies now).
        uint64 until = challengerWon ? ForcedErrorJudge(_judge).holdEnd(unitId) : 0;
        if (until != 0) {
            _holdEnds[record] = until;
            emit IJobManager.DisputeResultHeld(unitId, gameId, until);
            return;
        }
        if (challengerWon) {
            _applyWin(unitId, record, r, d);
        } else {
            delete _disputes[record];
            address solver = r.assignee;
            uint256 toSolver = MarketMath.share(d.bond, _challengerRewardBps);
            uint64 deadline = _backToVerifying(r);
            emit IJobManager.DisputeResolved(unitId, gameId, false, deadline);
            _credit(solver, toSolver);
            _addJackpot(d.bond - toSolver);
        }
    }

    /// @dev `IJobManager.settleDispute`, run as the manager.
    function settleDispute(uint256 unitId) external onlyDelegated {
        (Record storage r, uint256 record) = _expect(unitId, IJobManager.UnitStatus.Disputed);
        // A Disputed unit has either its dispute (a void returns it to Verifying), whose game is
        // either still running (no hold end) or ended with the challenger's win held, or an open
        // data request (no dispute, no hold end: NoHeldResult with game 0; §6.11).
        IJobManager.Dispute memory d = _disputes[record];
        uint64 until = _holdEnds[record];
        if (until == 0) revert IJobManager.NoHeldResult(unitId, d.gameId);
        if (block.timestamp <= until) revert IJobManager.ResultHeldUntil(unitId, until);
        _applyWin(unitId, record, r, d);
    }

    /// @dev `IJobManager.applyForcedReveal`, run as the manager.
    function applyForcedReveal(uint256 unitId, uint64 position, bytes32 trueRoot, uint8[] calldata verdicts)
        external
        onlyDelegated
    {
        _onlyJudge();
        (Record storage r, uint256 record,) = _unit(unitId);
        // An open dispute is voided: its challenger gets its bond back, but no share (a challenge
        // is public, so a share would go to whoever copies it first; catchers are the drawn
        // verifiers whose sealed attestations were RIGHT).
        // An open data request is voided alike (the requester's bond back): a unit is Disputed by
        // a game or by a data request, never both.
        if (r.status == IJobManager.UnitStatus.Disputed) {
            if (_dataRequests[record].requester != address(0)) {
                _voidDataRequest(unitId, record, r.attempt);
            } else {
                _voidDispute(unitId, record);
            }
        }
        // The true root stands from now on; it can be challenged for at least disputeGrace.
        uint64 deadline = _backToVerifying(r);
        r.flags |= FORCED_REVEALED;
        // Verifiers replayed from P and the court proves their start roots against it.
        _publishedRoots[record] = r.checkpointRoot;
        r.checkpointRoot = trueRoot;
        uint256 lock = _lock(r);
        // Nothing moves yet: the verdicts trust the solver's C, which can still be disputed.
        // Finalize pays the catchers and slashes the WRONG verifiers' locks; a re-opened unit (C
        // overturned) pays no catcher and releases every lock.
        (uint256 caught, uint256 wrong) = _settleForced(unitId, record, r, verdicts, lock);
        emit IJobManager.ForcedErrorRevealed(unitId, r.assignee, position, trueRoot, caught, wrong, deadline);
    }

    /// @dev `IJobManager.applyPrematureReveal`, run as the manager.
    function applyPrematureReveal(uint256 unitId, address reporter) external onlyDelegated {
        _onlyJudge();
        (Record storage r, uint256 record,) = _unit(unitId);
        // Never Disputed: the judge leaves an open dispute to its game.
        emit IJobManager.PrematureRevealReported(unitId, r.assignee, reporter, _collateral(r));
        _slashAssignee(unitId, record, r, reporter, 0, 0);
    }

    // ------------------------------------------------------------------ data requests (§6.11)

    /// @dev `IJobManager.requestData`, run as the manager.
    function requestData(uint256 unitId, uint32 checkpoint) external onlyDelegated nonReentrant returns (uint96 bond) {
        (Record storage r, uint256 record) = _expect(unitId, IJobManager.UnitStatus.Verifying);
        uint64 deadline = r.deadline;
        if (block.timestamp > deadline) revert IJobManager.ChallengeWindowClosed(unitId, deadline);
        // steps < 2^32 and checkpointInterval > 0: T / k + 1 fits 64 bits.
        uint64 numCheckpoints = uint64(r.steps / r.checkpointInterval) + 1;
        if (checkpoint >= numCheckpoints) revert IJobManager.CheckpointOutOfRange(unitId, checkpoint, numCheckpoints);
        // A drawn verifier posts the challenge bond; the submitter (a caller that is both counts
        // as the verifier) posts none and may ask for the final checkpoint only: the result it
        // paid for.
        bool drawn = _findVerifier(record, r.verifierCount, msg.sender) != NOT_DRAWN;
        if (!drawn) {
            if (msg.sender != r.submitter) revert IJobManager.NotDataRequester(unitId, msg.sender);
            // numCheckpoints - 1 = T / k < 2^32.
            uint32 finalCheckpoint = uint32(numCheckpoints - 1);
            if (checkpoint != finalCheckpoint) {
                revert IJobManager.SubmitterFinalCheckpointOnly(unitId, checkpoint, finalCheckpoint);
            }
        }
        uint32 attempt = r.attempt;
        // INVARIANT: one request per requester per attempt, so a requester cannot hold the unit
        // Disputed forever by asking again once answered.
        if (_dataRequested[unitId][attempt][msg.sender]) {
            revert IJobManager.DataAlreadyRequested(unitId, attempt, msg.sender);
        }
        // At most uint96.max (_bondFor clamps it).
        bond = drawn ? uint96(_bondFor(r)) : 0;
        // The answer is a bounded proof (a few transactions whatever the state's size): an
        // online node sends it within revealWindow; now < 2^40.
        uint40 answerDeadline = uint40(block.timestamp) + _revealWindow;
        // The samples are drawn by the next block's hash: unknown to anyone when the request
        // is made, so nobody can have kept just the chunks it names.
        uint40 seedBlock = uint40(block.number) + 1;
        // INVARIANT: a request opens only on a Verifying unit, so a unit holds a game's dispute
        // or a data request, never both; Disputed, it can neither finalize nor be challenged.
        r.status = IJobManager.UnitStatus.Disputed;
        _dataRequested[unitId][attempt][msg.sender] = true;
        DataRequestSlot storage q = _dataRequests[record];
        q.requester = msg.sender;
        q.checkpoint = checkpoint;
        q.answerDeadline = answerDeadline;
        q.bond = bond;
        q.seedBlock = seedBlock;
        emit IJobManager.DataRequested(unitId, msg.sender, checkpoint, bond, answerDeadline, seedBlock);
        if (bond != 0) _token.safeTransferFrom(msg.sender, address(this), bond);
    }

    /// @dev `IJobManager.openDataState`, run as the manager.
    function openDataState(uint256 unitId, uint32 tensorCount, bytes32 stateTree, bytes32[] calldata checkpointProof)
        external
        onlyDelegated
    {
        (Record storage r,, DataRequestSlot storage q) = _openRequest(unitId);
        if (q.stateRoot != bytes32(0)) revert IJobManager.DataStateAlreadyOpened(unitId, q.stateRoot);
        if (tensorCount == 0) revert IJobManager.EmptyDataState(unitId);
        bytes32 stateRoot = DataRequests.stateRootOf(tensorCount, stateTree);
        uint32 checkpoint = q.checkpoint;
        uint256 numCheckpoints = uint256(r.steps / r.checkpointInterval) + 1;
        // INVARIANT: the state answered for is the committed one: its root is the checkpoint's
        // entry (after a forced reveal, of the true root C).
        if (!DataRequests.stateHolds(r.checkpointRoot, numCheckpoints, checkpoint, stateRoot, checkpointProof)) {
            revert IJobManager.BadDataStateProof(unitId, checkpoint, stateRoot);
        }
        q.stateRoot = stateRoot;
        q.stateTree = stateTree;
        q.tensorCount = tensorCount;
        emit IJobManager.DataStateOpened(unitId, stateRoot, tensorCount);
    }

    /// @dev `IJobManager.openDataHeaders`, run as the manager.
    function openDataHeaders(
        uint256 unitId,
        uint32 firstTensor,
        IJobManager.TensorHeader[] calldata headers,
        bytes32[] calldata partProof
    ) external onlyDelegated {
        (, uint256 record, DataRequestSlot storage q) = _openRequest(unitId);
        _expectPart(unitId, q, firstTensor, headers.length);
        (bytes32 layoutPart, uint256 end) = _checkPart(unitId, q, firstTensor, headers, partProof);
        // firstTensor + headers.length <= tensorCount < 2^32; a state's chunks are far below 2^64.
        uint32 opened = uint32(firstTensor + headers.length);
        q.opened = opened;
        q.totalLeaves = uint64(end);
        emit IJobManager.DataHeadersOpened(unitId, firstTensor, uint32(headers.length), uint64(end));
        _closeLayout(record, q, uint256(firstTensor) >> DataRequests.PART_DEPTH, opened, layoutPart);
    }

    /// @dev The state opened, and the part the next one: from the first unopened tensor, a whole
    ///      part or the rest.
    function _expectPart(uint256 unitId, DataRequestSlot storage q, uint32 firstTensor, uint256 length)
        private
        view
    {
        if (q.stateTree == bytes32(0)) revert IJobManager.DataStateNotOpened(unitId);
        uint32 opened = q.opened;
        if (firstTensor != opened) revert IJobManager.WrongFirstTensor(unitId, firstTensor, opened);
        // opened < tensorCount here: the last part closes the opening, after which none is due.
        uint256 due = q.tensorCount - opened;
        if (due > DATA_OPEN_PART) due = DATA_OPEN_PART;
        if (length != due) revert IJobManager.WrongDataPartLength(unitId, length, due);
    }

    /// @dev The part's layout subtree and the chunk after it, once its state subtree, placed by
    ///      `partProof`, is proved to be the opened state tree's.
    function _checkPart(
        uint256 unitId,
        DataRequestSlot storage q,
        uint32 firstTensor,
        IJobManager.TensorHeader[] calldata headers,
        bytes32[] calldata partProof
    ) private view returns (bytes32 layoutPart, uint256 end) {
        uint256 depth = DataRequests.partDepth(q.tensorCount);
        bytes32 statePart;
        (statePart, layoutPart, end) = DataRequests.partTrees(headers, firstTensor, q.totalLeaves, depth);
        // INVARIANT: every header opened is the committed state's, at its place: each part is
        // checked on its own, so no caller can spoil the opening for the one that holds the data.
        uint256 part = uint256(firstTensor) >> DataRequests.PART_DEPTH;
        if (DataRequests.rootFromPart(statePart, part, partProof) != q.stateTree) {
            revert IJobManager.BadDataHeaders(unitId, firstTensor);
        }
    }

    /// @dev Keeps part `part`'s layout subtree, or, the last tensor opened, fixes the layout root:
    ///      the only part's subtree, or the parts' subtrees combined.
    function _closeLayout(
        uint256 record,
        DataRequestSlot storage q,
        uint256 part,
        uint32 opened,
        bytes32 layoutPart
    ) private {
        if (opened < q.tensorCount) {
            _dataParts[record][part] = layoutPart;
            return;
        }
        if (part == 0) {
            q.layoutRoot = layoutPart; // the only part: its subtree is the whole layout tree
            return;
        }
        bytes32[] memory parts = new bytes32[](part + 1);
        for (uint256 i = 0; i < part; ++i) {
            parts[i] = _dataParts[record][i];
        }
        parts[part] = layoutPart;
        // more than one part: depthFor(tensorCount) > PART_DEPTH
        uint256 top = TensorMerkle.depthFor(q.tensorCount) - DataRequests.PART_DEPTH;
        q.layoutRoot = DataRequests.combineParts(parts, top);
    }

    /// @dev `IJobManager.proveDataSamples`, run as the manager.
    function proveDataSamples(uint256 unitId, IJobManager.DataSample[] calldata samples, string calldata locator)
        external
        onlyDelegated
    {
        if (bytes(locator).length == 0) revert IJobManager.EmptyBlobLocator();
        (uint256 record, Draw memory draw, uint32 first) = _sampleDraw(unitId, samples.length);
        if (draw.seed == bytes32(0)) return; // re-armed: the samples are drawn by a later block
        for (uint256 i = 0; i < samples.length; ++i) {
            _checkSample(draw, first + i, samples[i]);
        }
        // first + samples.length <= DATA_SAMPLES
        uint32 proved = uint32(first + samples.length);
        _dataRequests[record].samples = proved;
        emit IJobManager.DataSamplesProved(unitId, msg.sender, first, uint32(samples.length));
        if (proved == DATA_SAMPLES) _answerDataRequest(unitId, record, locator);
    }

    /// @dev The open request's draw for `count` more samples, its headers all open, and the first
    ///      sample due; the seed zero when it was re-armed (nothing to prove this call).
    function _sampleDraw(uint256 unitId, uint256 count)
        private
        returns (uint256 record, Draw memory draw, uint32 first)
    {
        DataRequestSlot storage q;
        (, record, q) = _openRequest(unitId);
        uint32 tensorCount = q.tensorCount;
        uint32 opened = q.opened;
        if (tensorCount == 0 || opened != tensorCount) {
            revert IJobManager.DataHeadersNotOpened(unitId, opened, tensorCount);
        }
        first = q.samples;
        uint256 left = DATA_SAMPLES - first;
        if (count == 0 || count > left) revert IJobManager.WrongDataSampleCount(unitId, count, left);
        bytes32 seed = q.seed;
        if (seed == bytes32(0)) seed = _drawDataSeed(unitId, q);
        draw = Draw(unitId, seed, q.layoutRoot, tensorCount, q.totalLeaves);
    }

    /// @dev `IJobManager.offerData`, run as the manager.
    function offerData(uint256 unitId, string calldata locator) external onlyDelegated {
        (Record storage r, uint256 record, bool live) = _unit(unitId);
        IJobManager.UnitStatus status = live ? r.status : IJobManager.UnitStatus.None;
        bool holding = status == IJobManager.UnitStatus.Verifying || status == IJobManager.UnitStatus.Disputed
            || status == IJobManager.UnitStatus.Finalized;
        if (!holding) revert IJobManager.WrongUnitStatus(unitId, IJobManager.UnitStatus.Verifying, status);
        bool holder = msg.sender == r.assignee || _findVerifier(record, r.verifierCount, msg.sender) != NOT_DRAWN;
        if (!holder) revert IJobManager.NotDataHolder(unitId, msg.sender);
        if (bytes(locator).length == 0) revert IJobManager.EmptyBlobLocator();
        emit IJobManager.DataOffered(unitId, msg.sender, r.attempt, locator);
    }

    /// @dev `IJobManager.expireDataRequest`, run as the manager.
    function expireDataRequest(uint256 unitId) external onlyDelegated {
        (Record storage r, uint256 record) = _expect(unitId, IJobManager.UnitStatus.Disputed);
        DataRequestSlot memory q = _dataRequests[record];
        if (q.requester == address(0)) revert IJobManager.NoDataRequest(unitId);
        if (block.timestamp <= q.answerDeadline) revert IJobManager.DataAnswerWindowOpen(unitId, q.answerDeadline);
        delete _dataRequests[record];
        emit IJobManager.DataRequestExpired(unitId, q.requester, q.checkpoint);
        // Attesting is holding the result (PROTOCOL §6.11): nobody answered for the final state,
        // so every drawn verifier that attested withheld it too.
        bool result = q.checkpoint == r.steps / r.checkpointInterval;
        uint256 penalised = result ? _attestedMask(record, r.verifierCount) : 0;
        // A lost game for the solver, never held: a forced round must serve its data too.
        _slashAssignee(unitId, record, r, q.requester, q.bond, penalised);
    }

    /// @dev `IJobManager.keepRecord`, run as the manager.
    function keepRecord(uint256 jobId) external onlyDelegated {
        if (!_registry.isSlasher(msg.sender)) revert IJobManager.NotProtocolContract(msg.sender);
        (Record storage r, bool live) = _job(jobId);
        if (!live) revert IJobManager.UnknownJob(jobId);
        if (r.flags & KEPT != 0) return;
        r.flags |= KEPT;
        emit IJobManager.RecordKept(jobId, msg.sender);
    }

    // ------------------------------------------------------------------ internal

    /// @dev A new attempt: claims open for `claimWindow`. Slot 0 alone is written; the assignment,
    ///      the commitment and the lists are the last attempt's until overwritten, and read only
    ///      below their counts or once the status says they are this attempt's.
    function _reopen(uint256 unitId, Record storage r) private {
        uint40 deadline = uint40(block.timestamp) + _claimWindow;
        uint32 attempt = r.attempt + 1;
        r.status = IJobManager.UnitStatus.Open;
        r.deadline = deadline;
        r.claimantCount = 0;
        r.verifierCount = 0;
        r.attestCount = 0;
        r.attempt = attempt;
        r.verifySeed = 0;
        r.seedBlock = 0;
        r.flags &= ~FORCED_REVEALED;
        emit IJobManager.UnitOpened(unitId, JobIds.jobOf(unitId), deadline, attempt);
    }

    function _gameRequest(uint256 unitId, Record storage r, bytes32 counterClaim)
        private
        view
        returns (IDisputeArbiter.GameRequest memory req)
    {
        req.unitId = unitId;
        req.solver = r.assignee;
        req.challenger = msg.sender;
        req.specHash = r.specHash;
        req.datasetRoot = r.datasetRoot;
        req.initialStateRoot = r.initialStateRoot;
        req.steps = r.steps;
        req.checkpointInterval = r.checkpointInterval;
        req.checkpointRoot = r.checkpointRoot;
        req.numCheckpoints = r.steps / r.checkpointInterval + 1;
        req.finalStateRoot = r.finalStateRoot;
        req.challengerClaim = counterClaim;
        req.configHash = r.configHash;
    }

    /// @dev Voids the unit's open dispute: the challenger gets its bond back and the game's result
    ///      will be ignored.
    function _voidDispute(uint256 unitId, uint256 record) private {
        IJobManager.Dispute memory d = _disputes[record];
        // _gameUnits keeps a running game until its result arrives (then ignored: no dispute
        // matches); a held result's game is gone already.
        delete _disputes[record];
        delete _holdEnds[record];
        emit IJobManager.DisputeVoided(unitId, d.gameId, d.challenger);
        _credit(d.challenger, d.bond);
    }

    /// @dev The last samples answered the request: the unit returns to Verifying (its deadline at
    ///      least `disputeGrace` away) and the requester's bond is forfeited as a failed
    ///      challenge's: `challengerRewardBps` of it to the solver, the rest to the jackpot. The
    ///      requester's once-per-attempt mark stays.
    function _answerDataRequest(uint256 unitId, uint256 record, string calldata locator) private {
        Record storage r = _records[record];
        DataRequestSlot memory q = _dataRequests[record];
        delete _dataRequests[record];
        uint64 deadline = _backToVerifying(r);
        emit IJobManager.DataRequestAnswered(unitId, q.requester, msg.sender, q.checkpoint, deadline, locator);
        uint256 toSolver = MarketMath.share(q.bond, _challengerRewardBps);
        _credit(r.assignee, toSolver);
        _addJackpot(q.bond - toSolver);
    }

    /// @dev The unit's open request, Disputed and within its answer window.
    function _openRequest(uint256 unitId)
        private
        view
        returns (Record storage r, uint256 record, DataRequestSlot storage q)
    {
        (r, record) = _expect(unitId, IJobManager.UnitStatus.Disputed);
        q = _dataRequests[record];
        if (q.requester == address(0)) revert IJobManager.NoDataRequest(unitId);
        uint40 answerDeadline = q.answerDeadline;
        if (block.timestamp > answerDeadline) revert IJobManager.DataAnswerWindowClosed(unitId, answerDeadline);
    }

    /// @dev The samples' seed: the hash of the request's seed block, stored; zero (and the seed
    ///      block moved to the next one, `DataSeedRearmed`) if that hash is gone (> 256 blocks).
    function _drawDataSeed(uint256 unitId, DataRequestSlot storage q) private returns (bytes32 seed) {
        uint256 seedBlock = q.seedBlock;
        if (block.number <= seedBlock) revert IJobManager.DataSeedNotYetAvailable(unitId, uint64(seedBlock));
        seed = blockhash(seedBlock);
        if (seed == bytes32(0)) {
            // block.number < 2^40
            uint40 next = uint40(block.number) + 1;
            q.seedBlock = next;
            emit IJobManager.DataSeedRearmed(unitId, next);
            return bytes32(0);
        }
        q.seed = seed;
    }

    /// @dev What every sample of one `proveDataSamples` call is checked against (one memory
    ///      struct: with the calldata sample, loose values would reach past the 16 stack slots
    ///      the legacy code generator, which slither compiles with, can address).
    struct Draw {
        uint256 unitId;
        bytes32 seed;
        bytes32 layoutRoot;
        uint256 tensorCount;
        uint256 totalLeaves;
    }

    /// @dev Checks sample `j` (`s`): its tensor in the layout, the drawn global chunk within that
    ///      tensor, and the chunk under the tensor's data root.
    function _checkSample(Draw memory d, uint256 j, IJobManager.DataSample calldata s) private pure {
        // INVARIANT: a sample is the state's chunk the seed draws, from the committed data.
        if (!DataRequests.layoutHolds(d.layoutRoot, d.tensorCount, s)) {
            revert IJobManager.BadDataLayoutProof(d.unitId, j, s.tensor);
        }
        uint256 index = DataRequests.sampleIndex(d.seed, j, d.totalLeaves);
        if (index < s.start || index - s.start >= s.leaves) {
            revert IJobManager.DataSampleNotInTensor(d.unitId, j, index, s.tensor);
        }
        uint256 leaf = index - s.start;
        if (!DataRequests.chunkHolds(s, leaf)) revert IJobManager.BadDataChunkProof(d.unitId, j, s.tensor, leaf);
    }

    /// @dev Bit i set for each drawn verifier i that attested (opened its attestation).
    function _attestedMask(uint256 record, uint256 verifierCount) private view returns (uint256 mask) {
        for (uint256 i = 0; i < verifierCount; ++i) {
            if (_verifiers[record][i].status == IJobManager.VerifierStatus.Attested) mask |= 1 << i;
        }
    }

    /// @dev Voids the unit's open data request (a forced reveal replaced the checkpoint root): the
    ///      requester gets its bond back and may request again in this attempt (against the true
    ///      root).
    function _voidDataRequest(uint256 unitId, uint256 record, uint32 attempt) private {
        DataRequestSlot memory q = _dataRequests[record];
        delete _dataRequests[record];
        _dataRequested[unitId][attempt][q.requester] = false;
        emit IJobManager.DataRequestVoided(unitId, q.requester, q.checkpoint);
        _credit(q.requester, q.bond);
    }

    /// @dev Marks the RIGHT verifiers catchers (paid at finalize) and the WRONG ones Slashed: no
    ///      fee, and their lock is slashed at finalize (released if the unit re-opens).
    function _settleForced(
        uint256 unitId,
        uint256 record,
        Record storage r,
        uint8[] calldata verdicts,
        uint256 lock
    ) private returns (uint256 caught, uint256 wrong) {
        for (uint256 i = 0; i < verdicts.length; ++i) {
            VerifierSlot storage slot = _verifiers[record][i];
            if (verdicts[i] == ForcedErrors.VERDICT_RIGHT) {
                slot.caught = true;
                ++caught;
                emit IJobManager.AttestationJudgedRight(unitId, slot.verifier);
            } else if (verdicts[i] == ForcedErrors.VERDICT_WRONG) {
                slot.status = IJobManager.VerifierStatus.Slashed;
                ++wrong;
                emit IJobManager.AttestationJudgedWrong(unitId, slot.verifier, lock);
            }
        }
        // wrong <= attestCount: only verifiers that attested get a verdict.
        r.attestCount -= uint8(wrong);
    }

    function _onlyJudge() private view {
        if (msg.sender != _judge) revert IJobManager.NotJudge(msg.sender);
    }

    /// @dev Applies the challenger's win of dispute `d`: slashes the assignee (the challenger gets
    ///      its bond back and its reward) and re-opens the unit.
    function _applyWin(uint256 unitId, uint256 record, Record storage r, IJobManager.Dispute memory d) private {
        delete _disputes[record];
        delete _holdEnds[record];
        emit IJobManager.DisputeResolved(unitId, d.gameId, true, 0);
        _slashAssignee(unitId, record, r, d.challenger, d.bond, 0);
    }

    /// @dev Returns the unit to Verifying with its challenge deadline at least `disputeGrace` away.
    function _backToVerifying(Record storage r) private returns (uint64 deadline) {
        deadline = r.deadline;
        uint64 graceEnd = uint64(block.timestamp) + _disputeGrace;
        if (graceEnd > deadline) deadline = graceEnd;
        r.status = IJobManager.UnitStatus.Verifying;
        // At most now + disputeGrace or the deadline it was: inside 40 bits.
        r.deadline = uint40(deadline);
    }

    /// @dev Slashes the assignee's collateral and re-opens the unit: `beneficiary` (if any) is
    ///      credited `extra` plus `challengerRewardBps` of the collateral, the rest goes to the
    ///      jackpot; the drawn verifiers in `penalised` (bit i: verifier i) lose their locks to
    ///      the jackpot, the others' locks are released.
    function _slashAssignee(
        uint256 unitId,
        uint256 record,
        Record storage r,
        address beneficiary,
        uint256 extra,
        uint256 penalised
    ) private {
        address solver = r.assignee;
        uint256 verifierCount = r.verifierCount;
        uint256 collateral = _collateral(r);
        uint256 lock = _lock(r);
        uint256 reward = beneficiary == address(0) ? 0 : MarketMath.share(collateral, _challengerRewardBps);
        address[] memory verifiers = new address[](verifierCount);
        uint256 toJackpot = collateral - reward;
        for (uint256 i = 0; i < verifierCount; ++i) {
            verifiers[i] = _verifiers[record][i].verifier;
            if (penalised & (1 << i) != 0) {
                toJackpot += lock;
                emit IJobManager.VerifierPenalised(unitId, verifiers[i], lock);
            }
        }
        _credit(beneficiary, extra + reward);
        _addJackpot(toJackpot);
        _reopen(unitId, r);
        _registry.slash(solver, collateral, true);
        for (uint256 i = 0; i < verifierCount; ++i) {
            if (penalised & (1 << i) != 0) {
                _registry.slash(verifiers[i], lock, true);
            } else {
                _registry.release(verifiers[i], lock, false);
            }
        }
    }
}
