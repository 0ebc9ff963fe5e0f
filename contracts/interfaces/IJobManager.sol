// SPDX-License-Identifier: MIT
pragma solidity 0.8.37;

import {INodeRegistry} from "./INodeRegistry.sol";
import {IDisputeCallback} from "./IDisputeCallback.sol";

// A data request is answered by a sample of the requested state, not the state itself
// (PROTOCOL §6.11): `DATA_SAMPLES` 256-byte chunks drawn uniformly over every chunk of the state
// by the hash of the block after the request, so its cost is bounded whatever the state's size.
uint256 constant DATA_SAMPLES = 64;
// An answer opens the state's tensor headers in parts of at most `DATA_OPEN_PART` (a whole
// subtree of the state tree each), so that no call outgrows a block or a transaction's size.
uint256 constant DATA_OPEN_PART = 256;

/// @title IJobManager
/// @notice Job escrow, scheduling, checkpoint commitments, verification and settlement
///         (docs/PROTOCOL.md §6). Events are the agents' API; every value has a view.
/// @dev A job owns `unitCount` work units (one in protocol v1); `unitId = jobId << 32 | index`
///      (`JobIds`). Unit life cycle: Open → Selecting → Assigned → Committed → Verifying
///      (⇄ Disputed) → Finalized; Open/Selecting → Cancelled by the submitter; Assigned → Open on
///      a missed commit deadline; Disputed → Open when the challenger wins (with forced errors
///      on, a win before the end of the round's reveal slot is held until then: `settleDispute`).
///      A data request (`requestData`, PROTOCOL §6.11) also makes a unit Disputed, until it is
///      answered (→ Verifying), expires (→ Open, as a lost game) or a forced reveal voids it.
///      Money: this contract holds escrows, challenge bonds, credits and the jackpot; payouts are
///      credited and pulled with `withdraw`.
interface IJobManager is IDisputeCallback {
    enum JobStatus {
        None,
        Open,
        Completed,
        Cancelled
    }

    enum UnitStatus {
        None,
        Open,
        Selecting,
        Assigned,
        Committed,
        Verifying,
        Disputed,
        Finalized,
        Cancelled
    }

    /// @dev A drawn verifier starts `Pending`, seals its end roots (`Sealed`, `sealAttestation`)
    ///      while the challenge window runs and opens them afterwards (`Attested`, `attest`).
    ///      `Slashed`: attested a wrong end root at a forced error's perturbed checkpoint
    ///      (`ForcedErrorJudge.revealForced`); it is not paid the fee, and its lock goes to the
    ///      jackpot at finalize, or back to it if the unit re-opens (the revealed C overturned).
    enum VerifierStatus {
        None,
        Pending,
        Attested,
        Sealed,
        Slashed
    }

    /// @notice What a submitter posts.
    /// @param specHash           keccak256 of the canonical job spec (PROTOCOL §5).
    /// @param datasetRoot        Dataset root list (PROTOCOL §4).
    /// @param initialStateRoot   State root at step 0 (PROTOCOL §3).
    /// @param steps              Training steps T (> 0).
    /// @param checkpointInterval Checkpoint interval k (> 0, divides T).
    /// @param required           Minimum solver capability.
    /// @param reward             Total payment escrowed; it covers the verification fee and tax.
    /// @param verificationFee    Part of `reward` shared by the verifiers who attest.
    /// @param claimDeadline      End of the first claim window (unix seconds, in the future).
    /// @param computeTime        Seconds an assignee has from assignment to its commitment.
    /// @param configHash         The job's dispute config hash (PROTOCOL §7.2), bound to the job in
    ///                           the posting transaction: the job is never claimable without it.
    ///                           Zero for a job whose config the game registers on its own (a
    ///                           round manager's unit, with its placement, §6.9).
    struct JobParams {
        bytes32 specHash;
        bytes32 datasetRoot;
        bytes32 initialStateRoot;
        uint64 steps;
        uint64 checkpointInterval;
        INodeRegistry.Capability required;
        uint96 reward;
        uint96 verificationFee;
        uint64 claimDeadline;
        uint32 computeTime;
        bytes32 configHash;
    }

    /// @notice A job as `getJob` returns it, assembled from the job's record (PROTOCOL §6.10):
    ///         `escrow` is the reward of each unfinalized unit while the job is open, and
    ///         `status`, `unitCount` and `unitsFinalized` follow from its one unit.
    struct Job {
        address submitter;
        uint64 steps;
        uint8 unitCount;
        uint8 unitsFinalized;
        JobStatus status;
        uint96 reward;
        uint96 verificationFee;
        uint32 computeTime;
        uint16 deviceClass;
        uint128 escrow;
        uint64 checkpointInterval;
        uint32 memoryMiB;
        uint32 throughput;
        bytes32 specHash;
        bytes32 datasetRoot;
        bytes32 initialStateRoot;
        bytes32 configHash;
    }

    /// @notice A work unit as `getUnit` returns it. `deadline` is the claim deadline (Open), the commit deadline
    ///         (Assigned) or the challenge deadline (Verifying, Disputed). `verifySeed` is the
    ///         verification seed (zero before the draw); the committed number of checkpoints is
    ///         always `steps / checkpointInterval + 1` (checked at commitment), so not stored.
    ///         The blob locator is only emitted (`CheckpointsCommitted`): nothing on chain reads it.
    ///         `assigneeIndex` is the assignee's claimant index (`secretHashOf`); `assignSeed` the
    ///         low 64 bits of the assignment seed (with the solver's secret it decides whether the
    ///         round is forced); `seal` the commitment's seal; `forcedRevealed` whether the solver
    ///         proved a forced error in this attempt. Assembled from the job's record (PROTOCOL
    ///         §6.10).
    struct Unit {
        UnitStatus status;
        uint8 claimantCount;
        uint8 verifierCount;
        uint8 attestCount;
        uint64 deadline;
        uint64 seedBlock;
        uint64 verifySeed;
        uint8 assigneeIndex;
        bool forcedRevealed;
        address assignee;
        uint32 attempt;
        uint64 assignSeed;
        bytes32 checkpointRoot;
        bytes32 finalStateRoot;
        bytes32 seal;
    }

    /// @notice What `ForcedErrorJudge.revealForced` needs (PROTOCOL §8.1): the solver's secret r
    ///         and true checkpoint root C (sealed with the commitment); for each checkpoint the
    ///         judgement reads (strictly ascending: the perturbed ones the drawn verifiers'
    ///         segments touch, and the end of each such segment that starts perturbed), its
    ///         published and its true entry with their list proofs (§3) against the published
    ///         root and C; for each drawn verifier in draw order, the end roots it attested
    ///         (empty for one that did not attest), checked against the recorded attestation
    ///         hashes; and `finalProof`, the list proof that the unit's final state root is C's
    ///         last entry (C replaces the published root, and the result must stay its last
    ///         entry).
    struct ForcedReveal {
        bytes32 secret;
        bytes32 trueRoot;
        uint64[] checkpoints;
        bytes32[] publishedEntries;
        bytes32[][] publishedProofs;
        bytes32[] trueEntries;
        bytes32[][] trueProofs;
        bytes32[][] endRoots;
        bytes32[] finalProof;
    }

    /// @notice An open dispute over a unit.
    struct Dispute {
        uint256 gameId;
        address challenger;
        uint96 bond;
    }

    /// @notice A tensor of a requested state (`openDataState`, PROTOCOL §6.11), as the state
    ///         root's entry commits it: `keccak256(abi.encode(nameHash, tensorRoot(dtype, rows,
    ///         cols, dataRoot)))`; `nameHash` is `keccak256(bytes(name))`.
    struct TensorHeader {
        bytes32 nameHash;
        uint8 dtype;
        uint32 rows;
        uint32 cols;
        bytes32 dataRoot;
    }

    /// @notice An open data request over a unit (PROTOCOL §6.11): `requester` (zero when none is
    ///         open) demands proof that the state at checkpoint `checkpoint` is held, answered by
    ///         `answerDeadline`; `bond` is what it posted (zero for the submitter). The hash of
    ///         block `seedBlock` draws the samples. `stateRoot` is zero until `openDataState`
    ///         proved it is the checkpoint's entry, of `tensorCount` tensors; `opened` of them
    ///         have their headers open (`openDataHeaders`), holding `totalLeaves` chunks, and
    ///         `samples` of the `DATA_SAMPLES` are proved.
    struct DataRequest {
        address requester;
        uint32 checkpoint;
        uint40 answerDeadline;
        uint96 bond;
        uint40 seedBlock;
        uint32 tensorCount;
        uint32 opened;
        uint64 totalLeaves;
        uint32 samples;
        bytes32 stateRoot;
    }

    /// @notice One sampled chunk of a requested state (`proveDataSamples`): the tensor it lies in
    ///         (`tensor`, its first global chunk `start`, its `leaves` chunks and `dataRoot`,
    ///         proved by `layoutProof` against the layout the opening built), the 256-byte
    ///         `chunk` itself and its leaf proof `chunkProof` against `dataRoot` (§3).
    struct DataSample {
        uint32 tensor;
        uint64 start;
        uint64 leaves;
        bytes32 dataRoot;
        bytes32[] layoutProof;
        bytes chunk;
        bytes32[] chunkProof;
    }

    /// @notice Deployment parameters (PROTOCOL §6.4 lists defaults and reasons).
    struct Config {
        uint32 claimWindow;
        uint32 verifyWindow;
        uint32 disputeGrace;
        uint16 taxBps;
        uint16 challengerRewardBps;
        uint16 collateralBps;
        uint8 verifiersPerUnit;
        uint8 segmentsPerVerifier;
        uint96 verifierLock;
        uint96 challengeBond;
        uint16 forcedErrorBps;
        uint16 lazySlashFactor;
        uint32 revealWindow;
        uint32 recordRetention;
    }

    // ------------------------------------------------------------------ errors
    /// @notice A zero address was given for the registry or the arbiter.
    error ZeroAddress();
    /// @notice A deployment parameter is out of range (bps above 100 %, a zero window, no segment
    ///         per verifier).
    error InvalidConfig();
    /// @notice `setArbiter` was called by an account other than the deployer.
    error NotDeployer(address caller);
    /// @notice The arbiter was already wired.
    error ArbiterAlreadySet(address arbiter);
    /// @notice No job can be posted before the arbiter is wired.
    error ArbiterNotSet();
    /// @notice The extension was already wired.
    error ExtensionAlreadySet(address extension);
    /// @notice `extension` runs on another manager's storage, `manager`.
    error ExtensionOfAnotherManager(address extension, address manager);
    /// @notice The round manager was already wired.
    error RoundManagerAlreadySet(address roundManager);
    /// @notice `roundManager` posts its units into another job manager, `manager`.
    error RoundManagerOfAnotherManager(address roundManager, address manager);
    /// @notice Placement (PROTOCOL §6.9): `solver` already claimed shard `shard` of round `round`
    ///         of decomposed job `roundJob`, and the round's first claim window runs until `until`.
    error ShardHeld(uint256 roundJob, uint256 round, uint256 shard, address solver, uint256 until);
    /// @notice A rare path was called before the extension that runs it was wired.
    error ExtensionNotSet();
    /// @notice `steps` is zero.
    error ZeroSteps();
    /// @notice `steps` does not fit the 32 bits a job record keeps it in.
    error TooManySteps(uint64 steps, uint64 max);
    /// @notice `checkpointInterval` is zero.
    error ZeroCheckpointInterval();
    /// @notice `checkpointInterval` does not divide `steps`.
    error IntervalDoesNotDivideSteps(uint64 steps, uint64 checkpointInterval);
    /// @notice A root or hash that must be set is zero.
    error ZeroCommitment();
    /// @notice The first claim window would already be over.
    error ClaimDeadlineInPast(uint64 claimDeadline, uint64 nowTs);
    /// @notice `claimDeadline` is after `latest` = now + `MAX_CLAIM_HORIZON`: a claim locks
    ///         collateral until the window closes, and no claim can be withdrawn.
    error ClaimDeadlineTooFar(uint64 claimDeadline, uint64 latest);
    /// @notice `computeTime` is zero.
    error ZeroComputeTime();
    /// @notice The reward does not exceed the verification fee plus the tax.
    error RewardBelowFees(uint256 reward, uint256 fees);
    /// @notice No job has this id.
    error UnknownJob(uint256 jobId);
    /// @notice Only the job's submitter may do this.
    error NotSubmitter(uint256 jobId, address caller);
    /// @notice The job is completed or cancelled.
    error JobNotOpen(uint256 jobId, JobStatus status);
    /// @notice The unit is not in the state this action needs.
    error WrongUnitStatus(uint256 unitId, UnitStatus expected, UnitStatus actual);
    /// @notice The claim window of the unit is over.
    error ClaimWindowClosed(uint256 unitId, uint64 deadline);
    /// @notice The claim window of the unit is still running.
    error ClaimWindowStillOpen(uint256 unitId, uint64 deadline);
    /// @notice The solver already claimed this unit.
    error AlreadyClaimed(uint256 unitId, address solver);
    /// @notice The unit already has `MAX_CLAIMANTS` claimants.
    error TooManyClaimants(uint256 unitId, uint256 max);
    /// @notice The seed block has not been mined yet (`block.number <= seedBlock`).
    error SeedNotYetAvailable(uint256 unitId, uint64 seedBlock);
    /// @notice A verifier's first answer would draw the verifiers, but the seed block's hash is
    ///         gone (over 256 blocks old): `drawVerifiers` re-arms the seed first.
    error SeedExpired(uint256 unitId, uint64 seedBlock);
    /// @notice Only the unit's assignee may commit.
    error NotAssignee(uint256 unitId, address caller, address assignee);
    /// @notice The assignee's commit deadline is over.
    error CommitDeadlinePassed(uint256 unitId, uint64 deadline);
    /// @notice The unit's current deadline has not passed yet.
    error DeadlineNotPassed(uint256 unitId, uint64 deadline);
    /// @notice The committed count is not `steps / checkpointInterval + 1`.
    error WrongCheckpointCount(uint256 unitId, uint64 given, uint64 expected);
    /// @notice `finalStateRoot` is not the last entry of the committed checkpoint list
    ///         `checkpointRoot`: the final-entry proof (PROTOCOL §3 root-list proof of entry
    ///         `numCheckpoints - 1`) fails.
    error FinalRootNotLast(uint256 unitId, bytes32 finalStateRoot, bytes32 checkpointRoot);
    /// @notice The blob locator is empty.
    error EmptyBlobLocator();
    /// @notice The unit's challenge window is over.
    error ChallengeWindowClosed(uint256 unitId, uint64 deadline);
    /// @notice The caller was not drawn to verify this unit.
    error NotSelectedVerifier(uint256 unitId, address caller);
    /// @notice The drawn verifier already sealed (or attested) its end roots.
    error AlreadyResponded(uint256 unitId, address verifier, VerifierStatus status);
    /// @notice `attest` opens a seal: the drawn verifier has none to open (`status` is not
    ///         `Sealed`; a `Pending` one may attest without a seal only as the last to answer).
    error NotSealed(uint256 unitId, address verifier, VerifierStatus status);
    /// @notice The forced error of this attempt was revealed: no seal can be made or opened any
    ///         more (a seal still closed then was judged silent).
    error SealingClosed(uint256 unitId);
    /// @notice Seals are opened once every drawn verifier sealed or the window closed at `deadline`
    ///         (and an unsealed verifier attests in the clear only if it is the last to answer).
    error RevealNotOpen(uint256 unitId, uint64 deadline);
    /// @notice The seals could be opened until `revealDeadline` only.
    error RevealWindowClosed(uint256 unitId, uint64 revealDeadline);
    /// @notice The end roots and salt do not open `verifier`'s seal `seal`.
    error AttestationSealMismatch(uint256 unitId, address verifier, bytes32 seal);
    /// @notice Finalize waits until `revealDeadline`: a drawn verifier sealed and may still open its
    ///         seal until then, or (a caller other than the solver) a forced round's reveal keeps
    ///         its slot until then.
    error AwaitingReveals(uint256 unitId, uint64 revealDeadline);
    /// @notice One end root per sampled segment is required.
    error WrongAttestationLength(uint256 given, uint256 expected);
    /// @notice Only a registered verifier or whistleblower may challenge.
    error NotChallenger(address caller, INodeRegistry.Role role);
    /// @notice The counter-claim equals the solver's checkpoint root.
    error ClaimMatchesCommitment(uint256 unitId, bytes32 claim);
    /// @notice The account has no credit.
    error NothingToWithdraw(address account);
    /// @notice An amount that must be positive is zero.
    error ZeroAmount();
    /// @notice Raised by `unitIdOf` (library `JobIds`) for an index above 2^32 - 1.
    error UnitIndexTooLarge(uint256 index);
    /// @notice The verification fee exceeds what the tax can fund in forced-error payouts:
    ///         `fee · forcedErrorBps > reward · taxBps` (PROTOCOL §8); `cap` is the largest fee.
    error FeeAboveJackpotCap(uint256 fee, uint256 cap);
    /// @notice `keccak256(abi.encode(secret))` is not the hash the assignee committed with its claim.
    error SecretMismatch(uint256 unitId, bytes32 expected);
    /// @notice `keccak256(abi.encode(trueRoot, secret))` is not the commitment's seal.
    error SealMismatch(uint256 unitId, bytes32 seal);
    /// @notice The secret and the assignment seed do not make this round a forced one.
    error NotForced(uint256 unitId);
    /// @notice The published and the true entry at perturbed checkpoint `position` are equal.
    error NotPerturbed(uint256 unitId, uint64 position);
    /// @notice A list proof of checkpoint `position`'s entry fails against `root`.
    error BadCheckpointProof(uint256 unitId, uint64 position, bytes32 root);
    /// @notice A forced reveal's checkpoints must be strictly ascending; `position` is not.
    error CheckpointsNotAscending(uint256 unitId, uint64 position);
    /// @notice The judgement reads checkpoint `position`, which the reveal does not carry.
    error MissingCheckpoint(uint256 unitId, uint64 position);
    /// @notice The forced error of this attempt was already revealed.
    error ForcedAlreadyRevealed(uint256 unitId);
    /// @notice Drawn verifier `pending` has not sealed (or, once sealed, not opened its seal) and
    ///         its window runs until `deadline`: revealing now would tell it the answer.
    error RevealTooEarly(uint256 unitId, address pending, uint64 deadline);
    /// @notice Showing the secret now is not premature: every drawn verifier sealed, or the
    ///         challenge window is over, or the reveal already showed it (the verdicts are fixed);
    ///         or the commit deadline passed (`expireAssignment` applies), or a dispute is open
    ///         (its game decides).
    error RevealNotPremature(uint256 unitId);
    /// @notice `endRoots` must have one entry per drawn verifier, and each per-checkpoint array
    ///         one per checkpoint.
    error WrongRevealLength(uint256 given, uint256 expected);
    /// @notice The end roots given for `verifier` are not what it attested.
    error AttestationMismatch(uint256 unitId, address verifier);
    /// @notice Only the forced-error judge may apply a reveal.
    error NotJudge(address caller);
    /// @notice Only a protocol contract (a registry slasher) may keep a job's record.
    error NotProtocolContract(address caller);
    /// @notice The manager's 2^31 recycled records, 2^31 kept records or 2^32 - 1 jobs are used up.
    error RecordsExhausted();
    /// @notice The unit's dispute game `gameId` is still running: no result is held to settle.
    error NoHeldResult(uint256 unitId, uint256 gameId);
    /// @notice The held result may be settled only after `until`: the forced round's reveal may
    ///         still void the dispute until then.
    error ResultHeldUntil(uint256 unitId, uint64 until);

    /// @notice A data request names checkpoint `checkpoint`, but the unit has `numCheckpoints`.
    error CheckpointOutOfRange(uint256 unitId, uint32 checkpoint, uint64 numCheckpoints);
    /// @notice Only a verifier drawn for the unit's current attempt or the job's submitter may
    ///         request data.
    error NotDataRequester(uint256 unitId, address caller);
    /// @notice The submitter may request the final checkpoint `finalCheckpoint` only.
    error SubmitterFinalCheckpointOnly(uint256 unitId, uint32 checkpoint, uint32 finalCheckpoint);
    /// @notice `requester` already requested data in attempt `attempt` of the unit.
    error DataAlreadyRequested(uint256 unitId, uint32 attempt, address requester);
    /// @notice The unit has no open data request.
    error NoDataRequest(uint256 unitId);
    /// @notice The request's state was opened already, with root `stateRoot`.
    error DataStateAlreadyOpened(uint256 unitId, bytes32 stateRoot);
    /// @notice `proveDataSamples` needs the request's state opened first (`openDataState`).
    error DataStateNotOpened(uint256 unitId);
    /// @notice A state has at least one tensor.
    error EmptyDataState(uint256 unitId);
    /// @notice An opening part must start at tensor `expected` (the next unopened one).
    error WrongFirstTensor(uint256 unitId, uint32 given, uint32 expected);
    /// @notice An opening part carries `given` headers; it must carry `expected` (a whole part,
    ///         `DATA_OPEN_PART`, or the rest of the state).
    error WrongDataPartLength(uint256 unitId, uint256 given, uint256 expected);
    /// @notice The headers of tensors `firstTensor`, … do not make that part of the opened
    ///         state's tree (`partProof` against the state tree fails).
    error BadDataHeaders(uint256 unitId, uint32 firstTensor);
    /// @notice Samples need every header open first: `opened` of `tensorCount` are.
    error DataHeadersNotOpened(uint256 unitId, uint32 opened, uint32 tensorCount);
    /// @notice The samples are drawn by the hash of block `seedBlock`, not mined yet.
    error DataSeedNotYetAvailable(uint256 unitId, uint64 seedBlock);
    /// @notice `proveDataSamples` carries no sample, or more than the `left` still due.
    error WrongDataSampleCount(uint256 unitId, uint256 given, uint256 left);
    /// @notice Sample `sample`'s tensor `tensor` (start, leaves, data root) is not the opened
    ///         layout's.
    error BadDataLayoutProof(uint256 unitId, uint256 sample, uint32 tensor);
    /// @notice Sample `sample` draws chunk `index` of the state, which tensor `tensor` (from
    ///         `start`, `leaves` chunks) does not hold.
    error DataSampleNotInTensor(uint256 unitId, uint256 sample, uint256 index, uint32 tensor);
    /// @notice Sample `sample`'s chunk is not leaf `leaf` of tensor `tensor`'s data root.
    error BadDataChunkProof(uint256 unitId, uint256 sample, uint32 tensor, uint256 leaf);
    /// @notice Only the unit's assignee or a verifier drawn for its current attempt holds its
    ///         data: `offerData` is theirs.
    error NotDataHolder(uint256 unitId, address caller);
    /// @notice `stateRoot` is not entry `checkpoint` of the unit's checkpoint root.
    error BadDataStateProof(uint256 unitId, uint32 checkpoint, bytes32 stateRoot);
    /// @notice The request could be answered until `answerDeadline` only.
    error DataAnswerWindowClosed(uint256 unitId, uint64 answerDeadline);
    /// @notice The request can still be answered until `answerDeadline`: it cannot expire yet.
    error DataAnswerWindowOpen(uint256 unitId, uint64 answerDeadline);

    // ------------------------------------------------------------------ events
    /// @notice The dispute arbiter was wired.
    event ArbiterSet(address indexed arbiter);
    /// @notice The extension that runs the rare paths was wired.
    event ExtensionSet(address indexed extension);
    /// @notice The round manager whose units' claims follow the placement rule was wired.
    event RoundManagerSet(address indexed roundManager);
    /// @notice A job was posted and its reward escrowed.
    event JobPosted(
        uint256 indexed jobId,
        address indexed submitter,
        bytes32 indexed specHash,
        JobParams params,
        uint8 unitCount
    );
    /// @notice A unit re-opened for claims until `claimDeadline`; `attempt` counts re-openings.
    ///         Its first attempt opens with the job (`JobPosted`, until `params.claimDeadline`).
    event UnitOpened(uint256 indexed unitId, uint256 indexed jobId, uint64 claimDeadline, uint32 attempt);
    /// @notice A solver claimed a unit, locking `collateral`, with selection weight `weight`, and
    ///         committed `secretHash = keccak256(abi.encode(r))` of its forced-error secret r.
    event UnitClaimed(
        uint256 indexed unitId, address indexed solver, uint96 weight, uint256 collateral, bytes32 secretHash
    );
    /// @notice Nobody claimed: the claim window was extended.
    event ClaimWindowExtended(uint256 indexed unitId, uint64 claimDeadline);
    /// @notice The claim window was closed; selection uses the hash of block `seedBlock`.
    event ClaimsClosed(uint256 indexed unitId, uint64 seedBlock, uint8 claimants);
    /// @notice The seed block's hash was no longer available; a new seed block was fixed.
    event SeedRearmed(uint256 indexed unitId, uint64 seedBlock);
    /// @notice The assignee was selected; it must commit by `commitDeadline`.
    event UnitAssigned(uint256 indexed unitId, address indexed solver, uint64 commitDeadline, bytes32 seed);
    /// @notice A claimant that was not selected (or whose job was cancelled) got its collateral back.
    event ClaimReleased(uint256 indexed unitId, address indexed solver);
    /// @notice The assignee missed its commit deadline; `slashed` went to the jackpot.
    event AssignmentExpired(uint256 indexed unitId, address indexed solver, uint256 slashed);
    /// @notice The assignee committed its checkpoints; verifiers are drawn with block `seedBlock`.
    event CheckpointsCommitted(
        uint256 indexed unitId,
        address indexed solver,
        bytes32 checkpointRoot,
        uint64 numCheckpoints,
        bytes32 finalStateRoot,
        string blobLocator,
        uint64 seedBlock,
        bytes32 seal
    );
    /// @notice Verifiers were drawn; the challenge window runs until `challengeDeadline`.
    event VerifiersDrawn(uint256 indexed unitId, address[] verifiers, uint64 seed, uint64 challengeDeadline);
    /// @notice A drawn verifier sealed the end roots of its sampled segments (`sealOf`).
    event AttestationSealed(uint256 indexed unitId, address indexed verifier, bytes32 seal);
    /// @notice A drawn verifier opened its seal: the end roots of its sampled segments.
    event Attested(uint256 indexed unitId, address indexed verifier, uint64[] segments, bytes32[] endRoots);
    /// @notice A challenge posted `bond` (`challengeBondOf`) and opened game `gameId` with
    ///         counter-claim `claim`.
    event ChallengeOpened(
        uint256 indexed unitId, address indexed challenger, uint256 indexed gameId, bytes32 claim, uint256 bond
    );
    /// @notice A game ended; `challengeDeadline` is the new deadline when the solver won (0 otherwise).
    event DisputeResolved(uint256 indexed unitId, uint256 indexed gameId, bool challengerWon, uint64 challengeDeadline);
    /// @notice A drawn verifier stayed silent and lost `amount` to the jackpot.
    event VerifierPenalised(uint256 indexed unitId, address indexed verifier, uint256 amount);
    /// @notice A unit was settled: solver paid, verifiers' fee shared, tax to the jackpot.
    event UnitFinalized(
        uint256 indexed unitId, address indexed solver, uint256 solverPay, uint256 verifierFee, uint256 tax
    );
    /// @notice Every unit of the job is final.
    event JobCompleted(uint256 indexed jobId);
    /// @notice The submitter cancelled the job; `refund` was credited to it.
    event JobCancelled(uint256 indexed jobId, uint256 refund);
    /// @notice `amount` was credited to `account`, whose credit is now `balance`.
    event Credited(address indexed account, uint256 amount, uint256 balance);
    /// @notice `amount` went to the jackpot, which now holds `jackpot`.
    event JackpotIncreased(uint256 amount, uint256 jackpot);
    /// @notice `account` withdrew its credit.
    event Withdrawn(address indexed account, uint256 amount);
    /// @notice The solver proved a forced error anchored at checkpoint `position` (other
    ///         checkpoints may be perturbed too, PROTOCOL §8.1): `trueRoot` replaced the
    ///         published checkpoint root; `catchers` verifiers were judged RIGHT
    ///         (`AttestationJudgedRight`: paid from the jackpot at finalize) and `slashed` WRONG
    ///         (`AttestationJudgedWrong`: their locks are slashed at finalize); the challenge window
    ///         runs until `challengeDeadline`.
    event ForcedErrorRevealed(
        uint256 indexed unitId,
        address indexed solver,
        uint64 position,
        bytes32 trueRoot,
        uint256 catchers,
        uint256 slashed,
        uint64 challengeDeadline
    );
    /// @notice A catcher of a forced error was paid `amount` from the jackpot, at finalize: the
    ///         verdict that made it a catcher trusted the revealed C, which then stood.
    event JackpotPaid(uint256 indexed unitId, address indexed catcher, uint256 amount);
    /// @notice A drawn verifier attested the true end root at the perturbed checkpoint: it caught
    ///         the forced error, and is paid its share of the jackpot (`JackpotPaid`) at finalize,
    ///         unless the unit re-opens first (the revealed C overturned by a dispute).
    event AttestationJudgedRight(uint256 indexed unitId, address indexed verifier);
    /// @notice A drawn verifier attested a wrong end root at the perturbed checkpoint: it is not paid,
    ///         and its lock `amount` is slashed at finalize (`VerifierPenalised`), unless the unit
    ///         re-opens first (the revealed C overturned by a dispute), which releases it.
    event AttestationJudgedWrong(uint256 indexed unitId, address indexed verifier, uint256 amount);
    /// @notice The open dispute of a forced unit was voided (its challenger got its bond back);
    ///         the game's later result is ignored (a held result's game is over already).
    event DisputeVoided(uint256 indexed unitId, uint256 indexed gameId, address indexed challenger);
    /// @notice Game `gameId` ended with the challenger's win while the solver may still reveal
    ///         a forced error (forcedErrorBps > 0, none revealed, a job of two segments or more,
    ///         before the reveal's slot ends; `ForcedErrorJudge.holdEnd`):
    ///         the unit stays Disputed and the slash waits until after `until` (`settleDispute`,
    ///         then `DisputeResolved`); a reveal before that voids the dispute. `until` is one
    ///         revealWindow from now if the reveal phase is open already (no drawn verifier can
    ///         still seal or open its seal), else the end of the reveal's slot (the challenge
    ///         deadline + 2 · revealWindow).
    event DisputeResultHeld(uint256 indexed unitId, uint256 indexed gameId, uint64 until);
    /// @notice A voided game ended; nothing changes.
    event VoidedGameEnded(uint256 indexed gameId, uint256 indexed unitId, bool challengerWon);
    /// @notice Protocol contract `by` asked that job `jobId`'s record never be recycled (the
    ///         attestation court, at its first case over the job: later cases still read it).
    event RecordKept(uint256 indexed jobId, address indexed by);
    /// @notice `reporter` showed the assignee's secret before the reveal phase; the solver lost
    ///         `slashed` and the unit re-opened.
    event PrematureRevealReported(
        uint256 indexed unitId, address indexed solver, address indexed reporter, uint256 slashed
    );
    /// @notice `requester` (a drawn verifier, bond `bond`, or the submitter, bond 0) demanded
    ///         proof that the state at checkpoint `checkpoint` is held, by `answerDeadline`; the
    ///         hash of block `seedBlock` draws the samples. The unit is Disputed until the request
    ///         is answered, expires or is voided (PROTOCOL §6.11).
    event DataRequested(
        uint256 indexed unitId,
        address indexed requester,
        uint32 checkpoint,
        uint96 bond,
        uint64 answerDeadline,
        uint64 seedBlock
    );
    /// @notice The requested checkpoint's state root `stateRoot`, of `tensorCount` tensors, was
    ///         proved against the checkpoint root.
    event DataStateOpened(uint256 indexed unitId, bytes32 stateRoot, uint32 tensorCount);
    /// @notice The headers of tensors `firstTensor`, … (`count` of them; the call's calldata) were
    ///         proved against the opened state; the tensors opened so far hold `totalLeaves`
    ///         chunks.
    event DataHeadersOpened(uint256 indexed unitId, uint32 firstTensor, uint32 count, uint64 totalLeaves);
    /// @notice The seed block's hash was no longer available; the samples are drawn by block
    ///         `seedBlock`'s instead.
    event DataSeedRearmed(uint256 indexed unitId, uint64 seedBlock);
    /// @notice Samples `first`, … (`count` of them) of the requested state were proved by
    ///         `prover`.
    event DataSamplesProved(uint256 indexed unitId, address indexed prover, uint32 first, uint32 count);
    /// @notice Every sample was proved: the state is held. `answerer` (whoever proved the last
    ///         samples) serves it at `locator`; the requester's bond was forfeited as a failed
    ///         challenge's, and the unit is Verifying until `deadline`.
    event DataRequestAnswered(
        uint256 indexed unitId,
        address indexed requester,
        address indexed answerer,
        uint32 checkpoint,
        uint64 deadline,
        string locator
    );
    /// @notice `holder` (the assignee or a verifier drawn for attempt `attempt`) serves the
    ///         unit's data at `locator` (the state blob of a checkpoint behind `<store URL>#`,
    ///         PROTOCOL §6.11): where a submitter whose solver withholds reads its result.
    event DataOffered(uint256 indexed unitId, address indexed holder, uint32 attempt, string locator);
    /// @notice The request was not answered in time: the solver lost as in a lost dispute game
    ///         (collateral slashed, `requester` credited its bond and its reward) and, for the
    ///         final checkpoint, every drawn verifier that attested lost its lock
    ///         (`VerifierPenalised`: attesting is holding the result); the other locks were
    ///         released and the unit re-opened (`UnitOpened` follows; no `DisputeResolved`: there
    ///         was no game).
    event DataRequestExpired(uint256 indexed unitId, address indexed requester, uint32 checkpoint);
    /// @notice A forced-error reveal voided the open data request: `requester` got its bond back.
    event DataRequestVoided(uint256 indexed unitId, address indexed requester, uint32 checkpoint);

    // ------------------------------------------------------------------ wiring
    /// @notice Sets the dispute arbiter. Deployer only, once.
    function setArbiter(address newArbiter) external;

    /// @notice Wires the `JobManagerExtension` that runs the rare paths (cancelling, expiries,
    ///         disputes, data requests, forced reveals) on this manager's storage; it must have
    ///         been deployed for this manager (its `manager()`). Deployer only, once.
    function setExtension(address newExtension) external;

    /// @notice Wires the round manager (PROTOCOL §6.9): the unit jobs it posts from then on
    ///         follow the placement rule (a solver claims at most one shard of a round during
    ///         the round's first claim window). It must post into this manager (its
    ///         `jobManager()`). Deployer only, once.
    function setRoundManager(address newRoundManager) external;

    // ------------------------------------------------------------------ submitter
    /// @notice Posts a job and pulls `params.reward` into escrow (needs approval).
    function postJob(JobParams calldata params) external returns (uint256 jobId);

    /// @notice Cancels a job none of whose units is assigned yet; credits the escrow back.
    function cancelJob(uint256 jobId) external;

    // ------------------------------------------------------------------ scheduling
    /// @notice Claims an open unit while its claim window runs; locks the solver's collateral and
    ///         records `secretHash = keccak256(abi.encode(r))` of a fresh secret r (PROTOCOL §8).
    function claim(uint256 unitId, bytes32 secretHash) external;

    /// @notice After the claim window: fixes the selection seed block (next block), or extends the
    ///         window by `claimWindow` if nobody claimed. Anyone may call.
    function closeClaims(uint256 unitId) external;

    /// @notice Selects the assignee among the claimants, weighted by selection weight, with the
    ///         hash of the seed block; re-arms the seed if that block is older than 256 blocks.
    function selectAssignee(uint256 unitId) external;

    /// @notice After a missed commit deadline: slashes the assignee's collateral into the jackpot
    ///         and re-opens the unit. Anyone may call.
    function expireAssignment(uint256 unitId) external;

    // ------------------------------------------------------------------ solver
    /// @notice Commits the (published) checkpoint root over state roots at steps 0, k, ..., T
    ///         (PROTOCOL §3), their count, the final state root with `finalProof`, the list
    ///         proof (siblings bottom-up) that it is the list's last entry, where the checkpoints
    ///         can be fetched, and `seal = keccak256(abi.encode(C, r))` of the true checkpoint
    ///         root C. The final root is the unit's result (the job's, or a decomposed round's
    ///         input to its aggregation): bound to the list here, so that a list every verifier
    ///         agrees with cannot carry another result (`FinalRootNotLast`, PROTOCOL §6.5).
    function commitCheckpoints(
        uint256 unitId,
        bytes32 checkpointRoot,
        uint64 numCheckpoints,
        bytes32 finalStateRoot,
        bytes32[] calldata finalProof,
        string calldata blobLocator,
        bytes32 seal
    ) external;

    // ------------------------------------------------------------------ forced errors (judge only)
    /// @notice Applies a forced-error reveal checked by the judge (`ForcedErrorJudge.revealForced`):
    ///         one verdict per drawn verifier; the WRONG ones lose the fee and, at finalize, their
    ///         lock (a verdict trusts the revealed C, which can still be disputed: if a dispute
    ///         overturns it the unit re-opens and the locks are released), the RIGHT ones are
    ///         marked catchers and paid their share of the jackpot at finalize, once C has stood
    ///         (nothing if a dispute overturns it), an open dispute is voided (its challenger gets
    ///         its bond back: a challenge is public, so paying it would pay whoever copies it
    ///         first; an open data request likewise, `DataRequestVoided`: its bond back, and
    ///         its requester may ask again), and `trueRoot` replaces the published checkpoint
    ///         root (which `publishedRootOf` keeps).
    function applyForcedReveal(uint256 unitId, uint64 position, bytes32 trueRoot, uint8[] calldata verdicts)
        external;

    /// @notice Applies a premature reveal checked by the judge (never of a Disputed unit):
    ///         slashes the assignee's collateral (`reporter` gets `challengerRewardBps` of it) and
    ///         re-opens the unit.
    function applyPrematureReveal(uint256 unitId, address reporter) external;

    // ------------------------------------------------------------------ verification
    /// @notice Draws the verifiers with the hash of the block after the commitment and opens the
    ///         challenge window. Anyone may call. Returns the verifiers drawn and the verification
    ///         seed (both empty when the seed block's hash was gone and the seed re-armed): a
    ///         verifier learns by simulating this call whether it will be drawn, and replays
    ///         before its first seal draws (PROTOCOL §6.5).
    function drawVerifiers(uint256 unitId) external returns (address[] memory verifiers, uint64 verifySeed);

    /// @notice A drawn verifier seals its attestation while the challenge window runs:
    ///         `seal = sealOf(unitId, attempt, verifier, endRoots, salt)` with the state root it
    ///         computed at the end of each of its sampled segments (`sampledSegments`, in order).
    ///         Sealed, no verifier can copy another's roots or wait for another's verdict. On a
    ///         Committed unit it first draws the verifiers, as `drawVerifiers` does (the seed's
    ///         hash must still be available: `SeedExpired` otherwise), so the first verifier's
    ///         answer takes no separate keeper transaction (PROTOCOL §6.5).
    function sealAttestation(uint256 unitId, bytes32 seal) external;

    /// @notice A drawn verifier opens its seal, once every drawn verifier sealed or the challenge
    ///         window is over, and until `revealWindow` after it. Only opened attestations earn
    ///         the fee; a seal left closed counts as silence. The last drawn verifier to answer
    ///         may attest without a seal while the window runs (`salt` is then unused): every
    ///         other one is bound by its seal already, so one transaction suffices for it — and
    ///         for the only one when a single verifier is drawn. Like `sealAttestation`, it draws
    ///         the verifiers first on a Committed unit.
    function attest(uint256 unitId, bytes32[] calldata endRoots, bytes32 salt) external;

    /// @notice A verifier or whistleblower disputes the unit's commitment, pulling
    ///         `challengeBondOf(unitId)` (recorded in the dispute and in `ChallengeOpened`), and
    ///         opens a dispute game with its own checkpoint root `counterClaim`. The assignee is a
    ///         solver and so can never challenge its own unit.
    function challenge(uint256 unitId, bytes32 counterClaim) external returns (uint256 gameId);

    /// @notice Applies a held dispute result (`DisputeResultHeld`) once its hold is over, after
    ///         its `until` (`heldUntil`) with no reveal: as `onDisputeResolved` does for a challenger's win
    ///         (`DisputeResolved`), the solver's collateral is slashed (`challengerRewardBps` of
    ///         it and the bond credited to the challenger, the rest to the jackpot), the
    ///         verifiers' locks are released and the unit re-opens. Anyone may call.
    function settleDispute(uint256 unitId) external;

    // ------------------------------------------------------------------ data requests (§6.11)
    /// @notice Demands proof that the state at checkpoint `checkpoint` is held (a
    ///         data-availability challenge): the unit Verifying, `now ≤ deadline`,
    ///         `checkpoint < numCheckpoints`; the caller a verifier drawn for the current attempt,
    ///         which posts `bond = challengeBondOf(unitId)` (pulled, needs approval), or the job's
    ///         submitter, bond 0, for the final checkpoint only; once per requester per attempt.
    ///         The unit becomes Disputed (no finalize, no challenge) until the request is answered
    ///         (`openDataState`, then `proveDataSamples`), expires (`expireDataRequest`) or a
    ///         forced reveal voids it; the answer is due by `now + revealWindow`, and its samples
    ///         are drawn by the hash of the next block.
    function requestData(uint256 unitId, uint32 checkpoint) external returns (uint96 bond);

    /// @notice Opens the requested checkpoint's state (anyone, once, by the answer deadline):
    ///         `stateRoot = keccak256(abi.encode(STATE_DOMAIN, tensorCount, stateTree))` (§3)
    ///         must be entry `checkpoint` of the unit's checkpoint root (`checkpointProof`: the
    ///         §3 root-list siblings, bottom-up, of a list of `numCheckpoints`), `tensorCount > 0`.
    function openDataState(uint256 unitId, uint32 tensorCount, bytes32 stateTree, bytes32[] calldata checkpointProof)
        external;

    /// @notice Opens the next part of the opened state's tensor headers (anyone, by the answer
    ///         deadline): `headers` are tensors `firstTensor` (the next unopened one), … in state
    ///         order, `DATA_OPEN_PART` of them or the rest; `partProof` the siblings, bottom-up,
    ///         that place their subtree of the state tree (§3: a whole subtree of
    ///         `DATA_OPEN_PART` leaves, or the whole tree for a state of at most that many
    ///         tensors, then no siblings) under the opened state tree. Every part is checked on
    ///         its own, so no caller can spoil an answer with a wrong one. Fixes the state's
    ///         layout, in state order: each tensor's first global chunk and its chunk count.
    function openDataHeaders(
        uint256 unitId,
        uint32 firstTensor,
        TensorHeader[] calldata headers,
        bytes32[] calldata partProof
    ) external;

    /// @notice Proves the next samples of the opened state (anyone, by the answer deadline):
    ///         sample j is the state's global chunk
    ///         `uint256(keccak256(abi.encode(seed, j))) mod totalLeaves`, seed the hash of the
    ///         request's seed block (fixed by the first call; re-armed to the next block, with
    ///         nothing proved, if it is no longer available). Each sample proves its tensor's
    ///         place in the layout and its chunk against the tensor's data root. The call that
    ///         proves the last of the `DATA_SAMPLES` answers the request
    ///         (`DataRequestAnswered`, with `locator`: where the caller serves the state): the
    ///         requester's bond is forfeited as a failed challenge's (`challengerRewardBps` of it
    ///         to the solver, the rest to the jackpot) and the unit returns to Verifying with its
    ///         deadline at least `disputeGrace` away.
    function proveDataSamples(uint256 unitId, DataSample[] calldata samples, string calldata locator) external;

    /// @notice Says where the caller serves the unit's data (`DataOffered`): the assignee or a
    ///         verifier drawn for the unit's current attempt, the unit Verifying, Disputed or
    ///         Finalized, `locator` nonempty. Changes no state.
    function offerData(uint256 unitId, string calldata locator) external;

    /// @notice After the answer deadline of an unanswered request (anyone): the solver loses as
    ///         in a lost dispute game — its collateral is slashed, the requester is credited its
    ///         bond plus `challengerRewardBps` of the collateral, the rest goes to the jackpot —,
    ///         for the final checkpoint every drawn verifier that attested loses its lock to the
    ///         jackpot (it attested, so it held the result and did not answer), the other locks
    ///         are released, and the unit re-opens. Never held for a forced round's reveal: a
    ///         forced round must serve its data too.
    function expireDataRequest(uint256 unitId) external;

    /// @notice After the challenge window (and, while a seal is still closed, the reveal window),
    ///         with no dispute open: pays the solver, the attesting verifiers and the tax;
    ///         penalises silent verifiers (no seal, or a seal never opened). The solver may call
    ///         then; anyone else, unless a forced error was revealed, one `revealWindow` after the
    ///         reveal window (the reveal's own slot: it may open only when the last seal does).
    ///         The solver finalizing its own unit is paid in the same transaction (its pay is
    ///         transferred, not credited: it pulls it itself); anyone else's finalize credits it.
    function finalize(uint256 unitId) external;

    /// @notice Transfers the caller's credited balance.
    function withdraw() external;

    /// @notice Keeps job `jobId`'s record for good: it is never recycled (PROTOCOL §6.10). For
    ///         protocol contracts (registry slashers) that read a job's record past
    ///         `recordRetention` after its deadline: the attestation court, whose later cases over
    ///         an attestation that stood may come at any time. Records of jobs that contracts
    ///         post are kept already.
    function keepRecord(uint256 jobId) external;

    /// @notice Pulls `amount` from the caller into the jackpot (needs approval). The attestation
    ///         court sends its share of each slashed verifier penalty here, so one jackpot pays
    ///         every catcher and is fed by every slash.
    function fundJackpot(uint256 amount) external;

    // ------------------------------------------------------------------ views
    /// @notice The payment token.
    function token() external view returns (address);
    /// @notice The node registry.
    function registry() external view returns (address);
    /// @notice The dispute arbiter (zero until wired).
    function arbiter() external view returns (address);
    /// @notice The extension that runs the rare paths (zero until wired).
    function extension() external view returns (address);
    /// @notice The round manager whose units follow the placement rule (zero until wired).
    function roundManager() external view returns (address);
    /// @notice The shard (plus one; 0: none) `solver` claimed first in round `round` of the
    ///         round manager's job `roundJob` (the placement rule's record).
    function roundShardOf(uint256 roundJob, uint256 round, address solver) external view returns (uint256);
    /// @notice The deployment parameters.
    function config() external view returns (Config memory);
    /// @notice Number of jobs posted. Job ids are `generation << 32 | record` (`JobIds`): 1, 2, 3,
    ///         … while no record has been recycled, and records of jobs posted by contracts are
    ///         numbered from `KEPT_RECORDS + 1`; `JobPosted` gives every job's id.
    function jobCount() external view returns (uint256);
    /// @notice Number of records allocated: recycled ones (numbered 1 to `recycled`) and kept
    ///         ones (numbered `KEPT_RECORDS + 1` to `KEPT_RECORDS + kept`). Every job that may
    ///         still change lives in one of them.
    function recordCounts() external view returns (uint256 recycled, uint256 kept);
    /// @notice The id of the job record `record` holds now (0 for a record never used).
    function jobAt(uint256 record) external view returns (uint256);
    /// @notice Job `jobId` (zeros, status None, for an unknown job or one whose record was
    ///         recycled).
    function getJob(uint256 jobId) external view returns (Job memory);
    /// @notice Unit `unitId` (zeros, status None, for an unknown unit or one whose record was
    ///         recycled). The assignment (assignee, its index and seed) reads zero before the
    ///         current attempt is assigned, the commitment (both roots and the seal) before it is
    ///         committed, and both once the unit is cancelled.
    function getUnit(uint256 unitId) external view returns (Unit memory);
    /// @notice Claimants of the unit's current attempt and their weights.
    function getClaimants(uint256 unitId) external view returns (address[] memory solvers, uint96[] memory weights);
    /// @notice Verifiers drawn for the unit's current attempt.
    function getVerifiers(uint256 unitId) external view returns (address[] memory);
    /// @notice A drawn verifier's response: its seal once sealed, `keccak256(abi.encode(endRoots))`
    ///         once attested.
    function verifierStatus(uint256 unitId, address verifier)
        external
        view
        returns (VerifierStatus status, bytes32 attestationHash);
    /// @notice Segments `verifier` must replay (empty before the draw); PROTOCOL §6.5.
    function sampledSegments(uint256 unitId, address verifier) external view returns (uint64[] memory);
    /// @notice The unit's open dispute (zeros if none).
    function getDispute(uint256 unitId) external view returns (Dispute memory);
    /// @notice The unit's open data request (zeros, `requester` zero, if none).
    function dataRequestOf(uint256 unitId) external view returns (DataRequest memory);
    /// @notice When the challenger's win over the unit is held (`DisputeResultHeld`), the time
    ///         after which `settleDispute` applies it; zero when no result is held.
    function heldUntil(uint256 unitId) external view returns (uint64);
    /// @notice Unit of an open game (0 once resolved).
    function unitOfGame(uint256 gameId) external view returns (uint256);
    /// @notice What `account` can withdraw.
    function credits(address account) external view returns (uint256);
    /// @notice Tokens held for the jackpot.
    function jackpot() external view returns (uint256);
    /// @notice Collateral a solver locks to claim a unit of `jobId`.
    function collateralOf(uint256 jobId) external view returns (uint256);
    /// @notice The bond a challenge of `unitId` takes: what a winning challenger is paid on top
    ///         of its bond (`challengerRewardBps` of the job's collateral, `collateralOf`), at
    ///         least `challengeBond`. A challenge holds up the unit's settlement and its solver's
    ///         collateral for a whole dispute game, so the challenger risks at least what winning
    ///         would pay it, and a solver whose commitment stands is compensated in proportion to
    ///         the job. At most uint96.max. For an unknown unit: `challengeBond`.
    function challengeBondOf(uint256 unitId) external view returns (uint256);
    /// @notice The lock S each drawn verifier of a unit of `jobId` holds until settlement, and
    ///         loses if silent or wrong at a forced error (PROTOCOL §8): `max(verifierLock,
    ///         solverPay · (2m' − 1) · lazySlashFactor / n)`, n = steps / checkpointInterval,
    ///         m' = min(segmentsPerVerifier, n). Reverts `UnknownJob` for an unknown job.
    function verifierLockOf(uint256 jobId) external view returns (uint256);
    /// @notice How a unit's reward of `jobId` splits: solver, verifiers, tax.
    function payoutOf(uint256 jobId) external view returns (uint256 solverPay, uint256 verifierFee, uint256 tax);
    /// @notice The secret hash claimant `index` of the unit's current attempt committed.
    function secretHashOf(uint256 unitId, uint256 index) external view returns (bytes32);
    /// @notice The forced-error judge (created by this manager): reveals and premature reveals
    ///         go through it.
    function forcedErrorJudge() external view returns (address);
    /// @notice The checkpoint root the unit's current commitment published (`CheckpointsCommitted`),
    ///         which the drawn verifiers replayed from and the attestation court proves start roots
    ///         against: after a forced reveal `Unit.checkpointRoot` is the true root C, and this
    ///         is still the published P; otherwise the two are the same.
    function publishedRootOf(uint256 unitId) external view returns (bytes32);
    /// @notice The seal of an attestation: `keccak256(abi.encode(unitId, attempt, verifier,
    ///         endRoots, salt))`; it binds the verifier and the unit's attempt, so a seal cannot be
    ///         copied or replayed.
    function sealOf(uint256 unitId, uint32 attempt, address verifier, bytes32[] calldata endRoots, bytes32 salt)
        external
        pure
        returns (bytes32);
    /// @notice `jobId << 32 | index`.
    function unitIdOf(uint256 jobId, uint256 index) external pure returns (uint256);
    /// @notice `unitId >> 32`.
    function jobIdOf(uint256 unitId) external pure returns (uint256);
}
