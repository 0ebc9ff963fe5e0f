// SPDX-License-Identifier: MIT
pragma solidity 0.8.37;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";
import {IJobManager} from "../interfaces/IJobManager.sol";
import {IRoundManager} from "../interfaces/IRoundManager.sol";
import {INodeRegistry} from "../interfaces/INodeRegistry.sol";
import {IDisputeCallback} from "../interfaces/IDisputeCallback.sol";
import {Credits} from "../libraries/Credits.sol";
import {JobIds} from "../libraries/JobIds.sol";
import {MarketMath} from "../libraries/MarketMath.sol";
import {TensorMerkle} from "../libraries/TensorMerkle.sol";
import {ForcedErrors} from "../libraries/ForcedErrors.sol";
import {ForcedErrorJudge} from "./ForcedErrorJudge.sol";
import {JobManagerBase} from "./JobManagerBase.sol";
import {JobManagerExtension} from "./JobManagerExtension.sol";

/// @title JobManager
/// @notice Job escrow, scheduling, checkpoint commitments, verification and settlement
///         (docs/PROTOCOL.md §6).
/// @dev Token balance == Σ job escrow + Σ open dispute bonds + Σ open data-request bonds
///      + Σ credits + jackpot.
///      Storage, parameters and the rules both halves share are in `JobManagerBase` (records
///      recycled, PROTOCOL §6.10). This contract runs the job's life cycle and the views; the
///      rare paths (cancel, expiry, disputes, data requests, forced reveals, `keepRecord`) run on this storage
///      from the `JobManagerExtension` it creates, by DELEGATECALL (`_delegate`), so that the whole
///      fits the 24 KiB code size limit with room to spare.
///      Checks-effects-interactions throughout: every state change precedes the calls to the
///      registry, the token and the arbiter (all fixed at deployment), except the game id that
///      `openGame` returns. `challenge`, `withdraw` and `fundJackpot` are also `nonReentrant`;
///      `postJob` and `finalize`, a job's first and last transactions, are not (the guard's
///      storage slot costs 2.3k gas each): their one token call comes last, after every state
///      change, so a token hook that re-enters finds the job posted and the unit Finalized
///      (tests/contracts/test_reentrant_token.py).
contract JobManager is JobManagerBase, IJobManager {
    using SafeERC20 for IERC20;
    using Credits for Credits.Ledger;

    address private immutable _deployer;
    /// @dev The rare paths' code (`JobManagerExtension`, wired once by `setExtension`), run on
    ///      this storage. Deployed on its own: its creation code beside this contract's and the
    ///      judge's would pass the 48 KiB limit on creation code (EIP-3860).
    address private _extension;
    /// @dev The round manager whose units' claims follow the placement rule (wired once).
    address private _roundManager;
    /// @dev Placement (PROTOCOL §6.9), per decomposed job and round: the shard (plus one) each
    ///      solver claimed first, and the end of the round's first claim window.
    mapping(uint256 roundJob => mapping(uint256 round => mapping(address solver => uint256))) private _roundShards;
    mapping(uint256 roundJob => mapping(uint256 round => uint256)) private _roundWindows;

    /// @dev Creates its own ForcedErrorJudge: the judge's checks would not fit this contract.
    constructor(address registry_, Config memory cfg)
        JobManagerBase(registry_, cfg, address(new ForcedErrorJudge()))
    {
        _deployer = msg.sender;
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

    /// @inheritdoc IJobManager
    function setExtension(address newExtension) external {
        if (msg.sender != _deployer) revert NotDeployer(msg.sender);
        if (_extension != address(0)) revert ExtensionAlreadySet(_extension);
        if (newExtension == address(0)) revert ZeroAddress();
        address runsOn = JobManagerExtension(newExtension).manager();
        if (runsOn != address(this)) revert ExtensionOfAnotherManager(newExtension, runsOn);
        _extension = newExtension;
        emit ExtensionSet(newExtension);
    }

    /// @inheritdoc IJobManager
    function setRoundManager(address newRoundManager) external {
        if (msg.sender != _deployer) revert NotDeployer(msg.sender);
        if (_roundManager != address(0)) revert RoundManagerAlreadySet(_roundManager);
        if (newRoundManager == address(0)) revert ZeroAddress();
        address postsInto = IRoundManager(newRoundManager).jobManager();
        if (postsInto != address(this)) revert RoundManagerOfAnotherManager(newRoundManager, postsInto);
        _roundManager = newRoundManager;
        emit RoundManagerSet(newRoundManager);
    }

    // ------------------------------------------------------------------ submitter

    /// @inheritdoc IJobManager
    function postJob(JobParams calldata p) external returns (uint256 jobId) {
        if (_arbiter == address(0)) revert ArbiterNotSet();
        if (p.steps == 0) revert ZeroSteps();
        if (p.steps > type(uint32).max) revert TooManySteps(p.steps, type(uint32).max);
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

        (uint256 record, uint8 generation, bool kept) = _allocate();
        jobId = JobIds.fromRecord(record, generation);
        Record storage r = _records[record];
        // Slot 0 is written whole: every count and flag of the record's last job is reset here.
        r.status = UnitStatus.Open;
        r.claimantCount = 0;
        r.verifierCount = 0;
        r.attestCount = 0;
        // Only a contract's job is kept: the round manager's units are flagged for placement.
        r.flags = kept ? (msg.sender == _roundManager ? KEPT | ROUND_UNIT : KEPT) : 0;
        // claimDeadline <= now + 1 day (checked above): far inside 40 bits.
        r.deadline = uint40(p.claimDeadline);
        r.seedBlock = 0;
        r.attempt = 0;
        r.generation = generation;
        r.verifySeed = 0;
        r.computeTime = p.computeTime;
        r.reward = p.reward;
        r.verificationFee = p.verificationFee;
        // steps < 2^32 (checked above) and checkpointInterval divides it.
        r.steps = uint32(p.steps);
        r.checkpointInterval = uint32(p.checkpointInterval);
        r.submitter = msg.sender;
        r.deviceClass = p.required.deviceClass;
        r.memoryMiB = p.required.memoryMiB;
        r.throughput = p.required.throughput;
        r.specHash = p.specHash;
        r.datasetRoot = p.datasetRoot;
        r.initialStateRoot = p.initialStateRoot;
        // Bound here, in the posting transaction: no solver ever sees the job without its config.
        r.configHash = p.configHash;
        // the unit's first attempt opens with the job: `JobPosted` (its params' claimDeadline)
        emit JobPosted(jobId, msg.sender, p.specHash, p, 1);
        _token.safeTransferFrom(msg.sender, address(this), p.reward);
    }

    // ------------------------------------------------------------------ scheduling

    /// @inheritdoc IJobManager
    function claim(uint256 unitId, bytes32 secretHash) external {
        (Record storage r, uint256 record) = _expect(unitId, UnitStatus.Open);
        if (block.timestamp > r.deadline) revert ClaimWindowClosed(unitId, r.deadline);
        uint256 n = r.claimantCount;
        if (n >= MAX_CLAIMANTS) revert TooManyClaimants(unitId, MAX_CLAIMANTS);
        if (secretHash == bytes32(0)) revert ZeroCommitment();
        for (uint256 i = 0; i < n; ++i) {
            if (_claimants[record][i].solver == msg.sender) revert AlreadyClaimed(unitId, msg.sender);
        }
        if (r.flags & ROUND_UNIT != 0) _placeRoundUnit(JobIds.jobOf(unitId), r.deadline);
        uint256 collateral = _collateral(r);
        uint256 w = _registry.selectionWeight(msg.sender);
        uint96 weight = w > type(uint96).max ? type(uint96).max : uint96(w);
        _claimants[record][n] = Claimant(msg.sender, weight);
        _secretHashes[record][n] = secretHash;
        // n < MAX_CLAIMANTS = 16, so n + 1 fits uint8.
        r.claimantCount = uint8(n + 1);
        emit UnitClaimed(unitId, msg.sender, weight, collateral, secretHash);
        _registry.lockEligible(
            msg.sender,
            INodeRegistry.Role.Solver,
            INodeRegistry.Capability(r.deviceClass, r.memoryMiB, r.throughput),
            collateral
        );
    }

    /// @inheritdoc IJobManager
    function closeClaims(uint256 unitId) external {
        (Record storage r,) = _expect(unitId, UnitStatus.Open);
        if (block.timestamp <= r.deadline) revert ClaimWindowStillOpen(unitId, r.deadline);
        if (r.claimantCount == 0) {
            uint40 deadline = uint40(block.timestamp) + _claimWindow;
            r.deadline = deadline;
            emit ClaimWindowExtended(unitId, deadline);
            return;
        }
        uint40 seedBlock = uint40(block.number) + 1;
        r.status = UnitStatus.Selecting;
        r.seedBlock = seedBlock;
        emit ClaimsClosed(unitId, seedBlock, r.claimantCount);
    }

    /// @inheritdoc IJobManager
    function selectAssignee(uint256 unitId) external {
        (Record storage r, uint256 record) = _expect(unitId, UnitStatus.Selecting);
        bytes32 seed = _seed(unitId, r);
        if (seed == bytes32(0)) return;
        uint256 n = r.claimantCount;
        uint256 index = 0;
        // a single claimant wins whatever the seed (which still decides whether the round is
        // forced, below)
        if (n > 1) {
            uint96[] memory weights = new uint96[](n);
            for (uint256 i = 0; i < n; ++i) {
                weights[i] = _claimants[record][i].weight;
            }
            index = MarketMath.pickWeighted(weights, uint256(seed));
        }
        address winner = _claimants[record][index].solver;
        uint40 deadline = uint40(block.timestamp) + r.computeTime;
        r.status = UnitStatus.Assigned;
        r.deadline = deadline;
        r.assignee = winner;
        // index < claimantCount <= MAX_CLAIMANTS = 16 fits uint8; 64 bits of the seed decide
        // (with the assignee's secret) whether the round is forced.
        r.assigneeIndex = uint8(index);
        r.assignSeed = uint64(uint256(seed));
        emit UnitAssigned(unitId, winner, deadline, seed);
        if (n > 1) _releaseClaimants(record, unitId, n, winner, _collateral(r));
    }

    // ------------------------------------------------------------------ solver

    /// @inheritdoc IJobManager
    function commitCheckpoints(
        uint256 unitId,
        bytes32 checkpointRoot,
        uint64 numCheckpoints,
        bytes32 finalStateRoot,
        bytes32[] calldata finalProof,
        string calldata blobLocator,
        bytes32 seal
    ) external {
        (Record storage r,) = _expect(unitId, UnitStatus.Assigned);
        if (msg.sender != r.assignee) revert NotAssignee(unitId, msg.sender, r.assignee);
        if (block.timestamp > r.deadline) revert CommitDeadlinePassed(unitId, r.deadline);
        // steps < 2^32, so T / k + 1 cannot wrap.
        uint256 expected = uint256(r.steps / r.checkpointInterval) + 1;
        if (numCheckpoints != expected) revert WrongCheckpointCount(unitId, numCheckpoints, uint64(expected));
        if (checkpointRoot == bytes32(0)) revert ZeroCommitment();
        if (finalStateRoot == bytes32(0)) revert ZeroCommitment();
        if (seal == bytes32(0)) revert ZeroCommitment();
        if (bytes(blobLocator).length == 0) revert EmptyBlobLocator();
        // INVARIANT: the unit's result is its checkpoint list's last entry. Only a game checks
        // the list's entries, and no honest party can open one over a list it agrees with.
        if (!TensorMerkle.verifyListEntry(
                checkpointRoot, TensorMerkle.CHECKPOINT_DOMAIN, expected, expected - 1, finalStateRoot, finalProof
            )) revert FinalRootNotLast(unitId, finalStateRoot, checkpointRoot);
        uint40 seedBlock = uint40(block.number) + 1;
        r.status = UnitStatus.Committed;
        r.seedBlock = seedBlock;
        r.checkpointRoot = checkpointRoot;
        r.finalStateRoot = finalStateRoot;
        r.seal = seal;
        emit CheckpointsCommitted(
            unitId, msg.sender, checkpointRoot, numCheckpoints, finalStateRoot, blobLocator, seedBlock, seal
        );
    }

    // ------------------------------------------------------------------ verification

    /// @inheritdoc IJobManager
    function drawVerifiers(uint256 unitId) external returns (address[] memory verifiers, uint64 verifySeed) {
        (Record storage r, uint256 record) = _expect(unitId, UnitStatus.Committed);
        bytes32 seed = _seed(unitId, r);
        if (seed == bytes32(0)) return (verifiers, 0);
        uint256 lock;
        (verifiers, verifySeed, lock) = _draw(unitId, r, record, seed);
        if (verifiers.length != 0) _registry.lockAll(verifiers, lock);
    }

    /// @dev The draw of a Committed unit whose seed is `seed`: opens the challenge window. The
    ///      caller locks `lock` of each drawn verifier's stake as its last step (`lockAll`): no
    ///      state is written after that external call.
    function _draw(uint256 unitId, Record storage r, uint256 record, bytes32 seed)
        private
        returns (address[] memory drawn, uint64 verifySeed, uint256 lock)
    {
        uint40 deadline = uint40(block.timestamp) + _verifyWindow;
        // 64 bits of the seed pick the segments (PROTOCOL §6.5); never zero once drawn.
        verifySeed = uint64(uint256(seed)) | 1;
        r.status = UnitStatus.Verifying;
        r.verifySeed = verifySeed;
        r.deadline = deadline;

        // Pick with a view first, record, then lock: no state is written after an external call.
        // Only verifiers that joined before the seed block can be drawn, and they alone set the
        // modulus: nobody who has seen the seed can join to move the draw (PROTOCOL §6.5).
        lock = _lock(r);
        uint256 wanted = _verifiersPerUnit;
        drawn = _registry.pickPoolMembers(
            INodeRegistry.Role.Verifier, seed, wanted, 4 * wanted, r.seedBlock, r.assignee, lock
        );
        uint256 count = drawn.length;
        for (uint256 i = 0; i < count; ++i) {
            _verifiers[record][i] = VerifierSlot(drawn[i], VerifierStatus.Pending, false);
        }
        // count <= verifiersPerUnit, a uint8.
        r.verifierCount = uint8(count);
        emit VerifiersDrawn(unitId, drawn, verifySeed, deadline);
    }

    /// @dev A verifier's first answer on a Committed unit draws the verifiers first, exactly as
    ///      `drawVerifiers` would in this block (PROTOCOL §6.5): the seed block is in the past of
    ///      the call and in the future of the commitment. A seed whose hash is gone is re-armed
    ///      by `drawVerifiers` alone (`SeedExpired`): an answer never changes the seed. Returns
    ///      what the caller locks last (`_lockDrawn`): none when the unit was drawn before.
    function _drawIfCommitted(uint256 unitId) private returns (address[] memory drawn, uint256 lock) {
        (Record storage r, uint256 record, bool live) = _unit(unitId);
        if (!live || r.status != UnitStatus.Committed) return (drawn, 0);
        uint40 seedBlock = r.seedBlock;
        if (block.number <= seedBlock) revert SeedNotYetAvailable(unitId, seedBlock);
        bytes32 hash = blockhash(seedBlock);
        if (hash == bytes32(0)) revert SeedExpired(unitId, seedBlock);
        (drawn,, lock) = _draw(unitId, r, record, _seedOf(hash, unitId, r));
    }

    /// @dev Locks `lock` of each verifier an answer drew (`_drawIfCommitted`): the answer's last
    ///      step, after its own state and event (checks-effects-interactions).
    function _lockDrawn(address[] memory drawn, uint256 lock) private {
        if (drawn.length != 0) _registry.lockAll(drawn, lock);
    }

    /// @inheritdoc IJobManager
    function sealAttestation(uint256 unitId, bytes32 seal) external {
        (address[] memory drawn, uint256 lock) = _drawIfCommitted(unitId);
        (Record storage r, uint256 record) = _expectVerifying(unitId);
        if (block.timestamp > r.deadline) revert ChallengeWindowClosed(unitId, r.deadline);
        // After a reveal the true root is public: a seal made now would need no replay.
        if (r.flags & FORCED_REVEALED != 0) revert SealingClosed(unitId);
        // An opened seal's end roots are public: before the deadline that needs every drawn
        // verifier sealed, so only a deadline a lost dispute extended lets one still Pending here.
        if (r.attestCount != 0) revert SealingClosed(unitId);
        if (seal == bytes32(0)) revert ZeroCommitment();
        uint256 index = _findVerifier(record, r.verifierCount, msg.sender);
        if (index == NOT_DRAWN) revert NotSelectedVerifier(unitId, msg.sender);
        VerifierSlot storage slot = _verifiers[record][index];
        if (slot.status != VerifierStatus.Pending) revert AlreadyResponded(unitId, msg.sender, slot.status);
        slot.status = VerifierStatus.Sealed;
        _attestations[record][index] = seal;
        emit AttestationSealed(unitId, msg.sender, seal);
        _lockDrawn(drawn, lock);
    }

    /// @inheritdoc IJobManager
    function attest(uint256 unitId, bytes32[] calldata endRoots, bytes32 salt) external {
        (address[] memory drawn, uint256 lock) = _drawIfCommitted(unitId);
        (Record storage r, uint256 record) = _expectVerifying(unitId);
        uint256 index = _findVerifier(record, r.verifierCount, msg.sender);
        if (index == NOT_DRAWN) revert NotSelectedVerifier(unitId, msg.sender);
        uint64[] memory segments = _sampledSegments(r, msg.sender);
        if (endRoots.length != segments.length) revert WrongAttestationLength(endRoots.length, segments.length);
        // After a forced reveal the verdicts are known: nobody still Pending may attest, and a seal
        // still closed then was judged silent (opened now it would earn the fee without the risk).
        if (r.flags & FORCED_REVEALED != 0) revert SealingClosed(unitId);
        VerifierSlot storage slot = _verifiers[record][index];
        if (slot.status == VerifierStatus.Pending) {
            _expectLastInTheClear(unitId, r, record);
        } else {
            _expectOpening(unitId, r, record, index, slot.status, endRoots, salt);
        }
        slot.status = VerifierStatus.Attested;
        _attestations[record][index] = keccak256(abi.encode(endRoots));
        // attestCount <= verifierCount, a uint8: each verifier attests at most once.
        unchecked {
            ++r.attestCount;
        }
        emit Attested(unitId, msg.sender, segments, endRoots);
        _lockDrawn(drawn, lock);
    }

    /// @dev A Pending verifier attests without a seal only as the last drawn verifier to answer,
    ///      in the window: every other one is already bound by its seal, so there is nobody left
    ///      to copy it.
    function _expectLastInTheClear(uint256 unitId, Record storage r, uint256 record) private view {
        uint64 deadline = r.deadline;
        if (block.timestamp > deadline) revert ChallengeWindowClosed(unitId, deadline);
        if (_countStatus(record, r.verifierCount, VerifierStatus.Pending) != 1) {
            revert RevealNotOpen(unitId, deadline);
        }
        // Nor once another's roots are public (a seal opened past a deadline since extended).
        if (r.attestCount != 0) revert SealingClosed(unitId);
    }

    /// @dev A Sealed verifier opens its seal with the roots and salt it sealed, once nobody is left
    ///      to copy it (every drawn verifier sealed) or the window closed, and within
    ///      `revealWindow` after it.
    function _expectOpening(
        uint256 unitId,
        Record storage r,
        uint256 record,
        uint256 index,
        VerifierStatus status,
        bytes32[] calldata endRoots,
        bytes32 salt
    ) private view {
        if (status != VerifierStatus.Sealed) revert NotSealed(unitId, msg.sender, status);
        uint64 deadline = r.deadline;
        bool unsealed = _countStatus(record, r.verifierCount, VerifierStatus.Pending) != 0;
        if (block.timestamp <= deadline && unsealed) revert RevealNotOpen(unitId, deadline);
        uint64 revealDeadline = deadline + _revealWindow;
        if (block.timestamp > revealDeadline) revert RevealWindowClosed(unitId, revealDeadline);
        bytes32 seal = _attestations[record][index];
        if (_sealOf(unitId, r.attempt, msg.sender, endRoots, salt) != seal) {
            revert AttestationSealMismatch(unitId, msg.sender, seal);
        }
    }

    /// @inheritdoc IJobManager
    /// @dev Not `nonReentrant` (see the contract's notes): every state change precedes the
    ///      registry's `settleUnit` and the solver's payment, the last call, so a token hook that
    ///      re-enters finds the unit Finalized (`WrongUnitStatus`) and the books settled.
    function finalize(uint256 unitId) external {
        (Record storage r, uint256 record) = _expect(unitId, UnitStatus.Verifying);
        uint64 deadline = r.deadline;
        if (block.timestamp <= deadline) revert DeadlineNotPassed(unitId, deadline);
        uint256 verifierCount = r.verifierCount;
        uint64 revealDeadline = deadline + _revealWindow;
        if (block.timestamp <= revealDeadline && _countStatus(record, verifierCount, VerifierStatus.Sealed) != 0) {
            revert AwaitingReveals(unitId, revealDeadline);
        }
        // A forced round's reveal opens when the last seal does, at revealDeadline at the latest:
        // only the solver, who alone knows whether its round is forced, may finalize before one
        // more revealWindow has left the reveal a slot of its own.
        address solver = r.assignee;
        bool forced = r.flags & FORCED_REVEALED != 0;
        uint64 revealSlotEnd = revealDeadline + _revealWindow;
        bool solverMayWaive = msg.sender == solver || forced;
        if (!solverMayWaive && block.timestamp <= revealSlotEnd) revert AwaitingReveals(unitId, revealSlotEnd);
        r.status = UnitStatus.Finalized;
        _settle(unitId, record, r, solver, forced);
    }

    // ------------------------------------------------------------------ rare paths (extension)

    /// @inheritdoc IJobManager
    function cancelJob(uint256) external {
        _delegate();
    }

    /// @inheritdoc IJobManager
    function expireAssignment(uint256) external {
        _delegate();
    }

    /// @inheritdoc IJobManager
    function challenge(uint256, bytes32) external returns (uint256) {
        _delegate();
    }

    /// @inheritdoc IDisputeCallback
    function onDisputeResolved(uint256, uint256, bool) external {
        _delegate();
    }

    /// @inheritdoc IJobManager
    function settleDispute(uint256) external {
        _delegate();
    }

    /// @inheritdoc IJobManager
    function applyForcedReveal(uint256, uint64, bytes32, uint8[] calldata) external {
        _delegate();
    }

    /// @inheritdoc IJobManager
    function applyPrematureReveal(uint256, address) external {
        _delegate();
    }

    /// @inheritdoc IJobManager
    function keepRecord(uint256) external {
        _delegate();
    }

    /// @inheritdoc IJobManager
    function requestData(uint256, uint32) external returns (uint96) {
        _delegate();
    }

    /// @inheritdoc IJobManager
    function openDataState(uint256, uint32, bytes32, bytes32[] calldata) external {
        _delegate();
    }

    /// @inheritdoc IJobManager
    function openDataHeaders(uint256, uint32, TensorHeader[] calldata, bytes32[] calldata) external {
        _delegate();
    }

    /// @inheritdoc IJobManager
    function proveDataSamples(uint256, DataSample[] calldata, string calldata) external {
        _delegate();
    }

    /// @inheritdoc IJobManager
    function offerData(uint256, string calldata) external {
        _delegate();
    }

    /// @inheritdoc IJobManager
    function expireDataRequest(uint256) external {
        _delegate();
    }

    /// @dev Runs this call's calldata on the extension's code and this contract's storage
    ///      (DELEGATECALL: same msg.sender, same storage, the `JobManagerBase` layout both share),
    ///      and returns or reverts with exactly what it returned. Never returns to its caller.
    function _delegate() private {
        address target = _extension;
        if (target == address(0)) revert ExtensionNotSet();
        assembly ("memory-safe") {
            // Copy the calldata to free memory; nothing after this returns to Solidity code.
            let ptr := mload(0x40)
            calldatacopy(ptr, 0, calldatasize())
            let ok := delegatecall(gas(), target, ptr, calldatasize(), 0, 0)
            // Hand back the extension's return data (or revert data) as this call's.
            returndatacopy(ptr, 0, returndatasize())
            if iszero(ok) { revert(ptr, returndatasize()) }
            return(ptr, returndatasize())
        }
    }

    // ------------------------------------------------------------------ money

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
    function extension() external view returns (address) {
        return _extension;
    }

    /// @inheritdoc IJobManager
    function arbiter() external view returns (address) {
        return _arbiter;
    }

    /// @inheritdoc IJobManager
    function roundManager() external view returns (address) {
        return _roundManager;
    }

    /// @inheritdoc IJobManager
    function roundShardOf(uint256 roundJob, uint256 round, address solver) external view returns (uint256) {
        return _roundShards[roundJob][round][solver];
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
            _revealWindow,
            _recordRetention
        );
    }

    /// @inheritdoc IJobManager
    function jobCount() external view returns (uint256) {
        return _jobCount;
    }

    /// @inheritdoc IJobManager
    function recordCounts() external view returns (uint256 recycled, uint256 kept) {
        return (_recordCount, _keptCount);
    }

    /// @inheritdoc IJobManager
    function jobAt(uint256 record) external view returns (uint256) {
        Record storage r = _records[record];
        if (r.status == UnitStatus.None) return 0;
        return JobIds.fromRecord(record, r.generation);
    }

    /// @inheritdoc IJobManager
    function getJob(uint256 jobId) external view returns (Job memory job) {
        (Record storage r, bool live) = _job(jobId);
        if (!live) return job;
        UnitStatus status = r.status;
        job.submitter = r.submitter;
        job.steps = r.steps;
        job.unitCount = 1;
        job.unitsFinalized = status == UnitStatus.Finalized ? 1 : 0;
        job.status = _jobStatus(status);
        job.reward = r.reward;
        job.verificationFee = r.verificationFee;
        job.computeTime = r.computeTime;
        job.deviceClass = r.deviceClass;
        // What the job still holds: its unit's reward until the unit is final or cancelled.
        job.escrow = job.status == JobStatus.Open ? r.reward : 0;
        job.checkpointInterval = r.checkpointInterval;
        job.memoryMiB = r.memoryMiB;
        job.throughput = r.throughput;
        job.specHash = r.specHash;
        job.datasetRoot = r.datasetRoot;
        job.initialStateRoot = r.initialStateRoot;
        job.configHash = r.configHash;
    }

    /// @inheritdoc IJobManager
    function getUnit(uint256 unitId) external view returns (Unit memory u) {
        (Record storage r,, bool live) = _unit(unitId);
        if (!live) return u;
        UnitStatus status = r.status;
        u.status = status;
        u.claimantCount = r.claimantCount;
        u.verifierCount = r.verifierCount;
        u.attestCount = r.attestCount;
        u.deadline = r.deadline;
        u.seedBlock = r.seedBlock;
        u.verifySeed = r.verifySeed;
        u.forcedRevealed = r.flags & FORCED_REVEALED != 0;
        u.attempt = r.attempt;
        // The assignment and the commitment are the current attempt's only once it got there
        // (the record may hold an earlier attempt's or an earlier job's).
        if (_assigned(status)) {
            u.assigneeIndex = r.assigneeIndex;
            u.assignee = r.assignee;
            u.assignSeed = r.assignSeed;
        }
        if (_committed(status)) {
            u.checkpointRoot = r.checkpointRoot;
            u.finalStateRoot = r.finalStateRoot;
            u.seal = r.seal;
        }
    }

    /// @inheritdoc IJobManager
    function getClaimants(uint256 unitId) external view returns (address[] memory solvers, uint96[] memory weights) {
        (Record storage r, uint256 record, bool live) = _unit(unitId);
        uint256 n = live ? r.claimantCount : 0;
        solvers = new address[](n);
        weights = new uint96[](n);
        for (uint256 i = 0; i < n; ++i) {
            Claimant memory c = _claimants[record][i];
            solvers[i] = c.solver;
            weights[i] = c.weight;
        }
    }

    /// @inheritdoc IJobManager
    function getVerifiers(uint256 unitId) external view returns (address[] memory verifiers) {
        (Record storage r, uint256 record, bool live) = _unit(unitId);
        uint256 n = live ? r.verifierCount : 0;
        verifiers = new address[](n);
        for (uint256 i = 0; i < n; ++i) {
            verifiers[i] = _verifiers[record][i].verifier;
        }
    }

    /// @inheritdoc IJobManager
    function verifierStatus(uint256 unitId, address verifier)
        external
        view
        returns (VerifierStatus status, bytes32 attestationHash)
    {
        (Record storage r, uint256 record, bool live) = _unit(unitId);
        if (!live) return (VerifierStatus.None, bytes32(0));
        uint256 index = _findVerifier(record, r.verifierCount, verifier);
        if (index == NOT_DRAWN) return (VerifierStatus.None, bytes32(0));
        status = _verifiers[record][index].status;
        // The seal while Sealed, the hash of the opened end roots once Attested (or Slashed); a
        // Pending slot may still hold an earlier attempt's value, so it reads zero.
        if (status != VerifierStatus.Pending) attestationHash = _attestations[record][index];
    }

    /// @inheritdoc IJobManager
    function publishedRootOf(uint256 unitId) external view returns (bytes32) {
        (Record storage r, uint256 record, bool live) = _unit(unitId);
        if (!live || !_committed(r.status)) return bytes32(0);
        if (r.flags & FORCED_REVEALED != 0) return _publishedRoots[record];
        return r.checkpointRoot;
    }

    /// @inheritdoc IJobManager
    function sampledSegments(uint256 unitId, address verifier) external view returns (uint64[] memory) {
        (Record storage r,, bool live) = _unit(unitId);
        if (!live || r.verifySeed == 0) return new uint64[](0);
        return _sampledSegments(r, verifier);
    }

    /// @inheritdoc IJobManager
    function getDispute(uint256 unitId) external view returns (Dispute memory d) {
        (, uint256 record, bool live) = _unit(unitId);
        if (live) d = _disputes[record];
    }

    /// @inheritdoc IJobManager
    function dataRequestOf(uint256 unitId) external view returns (DataRequest memory d) {
        (, uint256 record, bool live) = _unit(unitId);
        if (!live) return d;
        DataRequestSlot storage q = _dataRequests[record];
        return DataRequest(
            q.requester,
            q.checkpoint,
            q.answerDeadline,
            q.bond,
            q.seedBlock,
            q.tensorCount,
            q.opened,
            q.totalLeaves,
            q.samples,
            q.stateRoot
        );
    }

    /// @inheritdoc IJobManager
    function heldUntil(uint256 unitId) external view returns (uint64) {
        (, uint256 record, bool live) = _unit(unitId);
        return live ? _holdEnds[record] : 0;
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
        (Record storage r, bool live) = _job(jobId);
        return live ? _collateral(r) : 0;
    }

    /// @inheritdoc IJobManager
    function challengeBondOf(uint256 unitId) external view returns (uint256) {
        (Record storage r,, bool live) = _unit(unitId);
        return live ? _bondFor(r) : _challengeBond;
    }

    /// @inheritdoc IJobManager
    function verifierLockOf(uint256 jobId) external view returns (uint256) {
        (Record storage r, bool live) = _job(jobId);
        if (!live) revert UnknownJob(jobId);
        return _lock(r);
    }

    /// @inheritdoc IJobManager
    function payoutOf(uint256 jobId) external view returns (uint256 solverPay, uint256 verifierFee, uint256 tax) {
        (Record storage r, bool live) = _job(jobId);
        if (!live) return (0, 0, 0);
        verifierFee = r.verificationFee;
        (solverPay, tax) = MarketMath.payout(r.reward, verifierFee, _taxBps);
    }

    /// @inheritdoc IJobManager
    function secretHashOf(uint256 unitId, uint256 index) external view returns (bytes32) {
        (Record storage r, uint256 record, bool live) = _unit(unitId);
        if (!live || index >= r.claimantCount) return bytes32(0);
        return _secretHashes[record][index];
    }

    /// @inheritdoc IJobManager
    function forcedErrorJudge() external view returns (address) {
        return _judge;
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

    // ------------------------------------------------------------------ internal: records

    /// @dev The placement rule (PROTOCOL §6.9): during a round's first claim window (that of the
    ///      round's first claim: its units are posted together), a solver claims at most one
    ///      shard of the round, so the S units go to S distinct solvers when S are online; after
    ///      it (a unit nobody else took, or one re-opened) any solver may take a second shard.
    ///      The round manager is trusted (wired once) and `unitOf` is its view.
    function _placeRoundUnit(uint256 jobId, uint256 deadline) private {
        (uint256 roundJob, uint32 round, uint32 shard) = IRoundManager(_roundManager).unitOf(jobId);
        uint256 until = _roundWindows[roundJob][round];
        if (until == 0) {
            until = deadline;
            _roundWindows[roundJob][round] = until;
        }
        uint256 held = _roundShards[roundJob][round][msg.sender];
        if (held == 0) {
            _roundShards[roundJob][round][msg.sender] = uint256(shard) + 1;
        } else if (held != uint256(shard) + 1 && block.timestamp <= until) {
            revert ShardHeld(roundJob, round, held - 1, msg.sender, until);
        }
    }

    /// @dev The record for a new job, its generation, and whether it is kept for good. A job posted
    ///      by a contract gets a kept record of its own. Any other job takes the record under the
    ///      cursor if that one is free (its job settled, `recordRetention` past its deadline, not
    ///      kept, generations left), else a new one. The cursor walks the recycled records in the
    ///      order they were allocated: it stays on a settled record until that one is free (the
    ///      records after it settled later) and steps over one that is live, kept or spent.
    function _allocate() private returns (uint256 record, uint8 generation, bool kept) {
        uint256 jobs = _jobCount;
        if (jobs == type(uint32).max) revert RecordsExhausted();
        _jobCount = uint32(jobs + 1);
        // A contract's logic may read its job's record at any later time: keep it.
        if (msg.sender.code.length != 0) {
            uint256 keptCount = uint256(_keptCount) + 1;
            if (keptCount >= KEPT_RECORDS) revert RecordsExhausted();
            _keptCount = uint32(keptCount);
            return (KEPT_RECORDS + keptCount, 0, true);
        }
        uint256 count = _recordCount;
        uint256 cursor = _cursor;
        if (cursor == 0) {
            cursor = 1;
        } else {
            Record storage r = _records[cursor];
            (bool waiting, bool free) = _reuseState(r);
            if (free) {
                record = cursor;
                // free needs generation < 255 (_reuseState).
                generation = r.generation + 1;
            }
            if (!waiting) cursor = cursor == count ? 1 : cursor + 1;
        }
        if (record == 0) {
            record = count + 1;
            if (record >= KEPT_RECORDS) revert RecordsExhausted();
            _recordCount = uint32(record);
        }
        _cursor = uint32(cursor);
    }

    /// @dev Whether the record's job settled and it may take a new one later (`waiting`) or now
    ///      (`free`): Finalized or Cancelled, not kept, generations left, and (for `free`)
    ///      `recordRetention` past its deadline, by when the attestation court's window for it has
    ///      closed (AttestationCourt checks its window is no longer) and nothing else reads it.
    function _reuseState(Record storage r) private view returns (bool waiting, bool free) {
        UnitStatus status = r.status;
        bool settled = status == UnitStatus.Finalized || status == UnitStatus.Cancelled;
        if (!settled || r.flags & KEPT != 0 || r.generation == type(uint8).max) return (false, false);
        free = block.timestamp > uint256(r.deadline) + _recordRetention;
        waiting = !free;
    }

    /// @dev Verifiers seal and open their attestations while the unit is Verifying or Disputed.
    function _expectVerifying(uint256 unitId) private view returns (Record storage r, uint256 record) {
        bool live;
        (r, record, live) = _unit(unitId);
        UnitStatus status = live ? r.status : UnitStatus.None;
        if (status != UnitStatus.Verifying && status != UnitStatus.Disputed) {
            revert WrongUnitStatus(unitId, UnitStatus.Verifying, status);
        }
    }

    // ------------------------------------------------------------------ internal: rules

    /// @dev Whether the unit of this status has its current attempt's assignee.
    function _assigned(UnitStatus status) private pure returns (bool) {
        return status >= UnitStatus.Assigned && status <= UnitStatus.Finalized;
    }

    /// @dev Whether the unit of this status has its current attempt's commitment.
    function _committed(UnitStatus status) private pure returns (bool) {
        return status >= UnitStatus.Committed && status <= UnitStatus.Finalized;
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
    function _countStatus(uint256 record, uint256 n, VerifierStatus status) private view returns (uint256 count) {
        for (uint256 i = 0; i < n; ++i) {
            if (_verifiers[record][i].status == status) ++count;
        }
    }

    /// @dev The seed of a Selecting or Committed unit: keccak of the seed block's hash, the unit and
    ///      its attempt. Returns zero (and re-arms the seed block) if that hash is unavailable.
    function _seed(uint256 unitId, Record storage r) private returns (bytes32) {
        uint40 seedBlock = r.seedBlock;
        if (block.number <= seedBlock) revert SeedNotYetAvailable(unitId, seedBlock);
        bytes32 hash = blockhash(seedBlock);
        if (hash == bytes32(0)) {
            uint40 next = uint40(block.number) + 1;
            r.seedBlock = next;
            emit SeedRearmed(unitId, next);
            return bytes32(0);
        }
        return _seedOf(hash, unitId, r);
    }

    /// @dev The seed of the unit's current step from its seed block's hash.
    function _seedOf(bytes32 hash, uint256 unitId, Record storage r) private view returns (bytes32) {
        return keccak256(abi.encode(hash, unitId, r.attempt, r.status));
    }

    function _sampledSegments(Record storage r, address verifier) private view returns (uint64[] memory) {
        uint256 numSegments = r.steps / r.checkpointInterval;
        uint256 count = _segmentsPerVerifier < numSegments ? _segmentsPerVerifier : numSegments;
        return MarketMath.sampleSegments(r.verifySeed, verifier, count, numSegments);
    }

    // ------------------------------------------------------------------ internal: transitions

    /// @dev Finalize's payments (the unit is Finalized already): the solver's pay, the verifiers'
    ///      fee, the tax and the penalised locks to the jackpot, the catchers of a revealed forced
    ///      error; then the registry releases the collateral and each lock, or slashes the lock;
    ///      last, the solver's pay is transferred when the solver itself finalizes (it pulls its
    ///      pay in its own transaction; credited otherwise).
    function _settle(uint256 unitId, uint256 record, Record storage r, address solver, bool forced) private {
        uint256 fee = r.verificationFee;
        (uint256 solverPay, uint256 tax) = MarketMath.payout(r.reward, fee, _taxBps);
        emit UnitFinalized(unitId, solver, solverPay, fee, tax);
        // A job has one unit (protocol v1): its last unit is final.
        emit JobCompleted(JobIds.jobOf(unitId));
        bool direct = msg.sender == solver;
        if (!direct) _credit(solver, solverPay);
        uint256 lock = _lock(r);
        uint256 verifierCount = r.verifierCount;
        (address[] memory verifiers, uint256 toJackpot, uint256 slashMask) =
            _payVerifiers(unitId, record, verifierCount, r.attestCount, fee, lock);
        _addJackpot(tax + toJackpot);
        if (forced) _payCatchers(unitId, record, verifierCount, fee);
        _registry.settleUnit(solver, _collateral(r), verifiers, lock, slashMask);
        if (direct) _token.safeTransfer(solver, solverPay);
    }

    /// @dev Credits the attesting verifiers their equal share of `fee`; returns the drawn verifiers,
    ///      what goes to the jackpot instead — the division remainder (all of `fee` if nobody
    ///      attested) and the locks `lock` (the job's S) of silent and WRONG verifiers — and the
    ///      mask of those whose lock the registry slashes (bit i: drawn verifier i).
    function _payVerifiers(
        uint256 unitId,
        uint256 record,
        uint256 verifierCount,
        uint256 attested,
        uint256 fee,
        uint256 lock
    ) private returns (address[] memory verifiers, uint256 toJackpot, uint256 slashMask) {
        uint256 feeShare = attested == 0 ? 0 : fee / attested;
        toJackpot = attested == 0 ? fee : fee % attested;
        verifiers = new address[](verifierCount);
        for (uint256 i = 0; i < verifierCount; ++i) {
            VerifierSlot memory slot = _verifiers[record][i];
            verifiers[i] = slot.verifier;
            if (slot.status == VerifierStatus.Attested) {
                _credit(slot.verifier, feeShare);
            } else if (_penalised(slot.status)) {
                toJackpot += lock;
                slashMask |= 1 << i;
                emit VerifierPenalised(unitId, slot.verifier, lock);
            }
        }
    }
}
