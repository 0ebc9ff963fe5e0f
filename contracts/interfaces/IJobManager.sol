// SPDX-License-Identifier: MIT
pragma solidity 0.8.37;

import {INodeRegistry} from "./INodeRegistry.sol";
import {IDisputeCallback} from "./IDisputeCallback.sol";

/// @title IJobManager
/// @notice Job escrow, scheduling, checkpoint commitments, verification and settlement
///         (docs/PROTOCOL.md §6). Events are the agents' API; every value has a view.
/// @dev A job owns `unitCount` work units (one in protocol v1); `unitId = jobId << 32 | index`
///      (`JobIds`). Unit life cycle: Open → Selecting → Assigned → Committed → Verifying
///      (⇄ Disputed) → Finalized; Open/Selecting → Cancelled by the submitter; Assigned → Open on
///      a missed commit deadline; Disputed → Open when the challenger wins.
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

    enum VerifierStatus {
        None,
        Pending,
        Attested,
        Challenged
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
    }

    /// @notice A job as stored.
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
    }

    /// @notice A work unit as stored. `deadline` is the claim deadline (Open), the commit deadline
    ///         (Assigned) or the challenge deadline (Verifying, Disputed). `verifySeed` is the
    ///         verification seed (zero before the draw); the committed number of checkpoints is
    ///         always `steps / checkpointInterval + 1` (checked at commitment), so not stored.
    struct Unit {
        UnitStatus status;
        uint8 claimantCount;
        uint8 verifierCount;
        uint8 attestCount;
        uint64 deadline;
        uint64 seedBlock;
        uint64 verifySeed;
        address assignee;
        uint32 attempt;
        bytes32 checkpointRoot;
        bytes32 finalStateRoot;
        string blobLocator;
    }

    /// @notice An open dispute over a unit.
    struct Dispute {
        uint256 gameId;
        address challenger;
        uint96 bond;
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
    }

    // ------------------------------------------------------------------ errors
    error ZeroAddress();
    error InvalidConfig();
    error NotDeployer(address caller);
    error ArbiterAlreadySet(address arbiter);
    error ArbiterNotSet();
    error ZeroSteps();
    error ZeroCheckpointInterval();
    error IntervalDoesNotDivideSteps(uint64 steps, uint64 checkpointInterval);
    error ZeroCommitment();
    error ClaimDeadlineInPast(uint64 claimDeadline, uint64 nowTs);
    error ZeroComputeTime();
    error RewardBelowFees(uint256 reward, uint256 fees);
    error UnknownJob(uint256 jobId);
    error NotSubmitter(uint256 jobId, address caller);
    error JobNotOpen(uint256 jobId, JobStatus status);
    error WrongUnitStatus(uint256 unitId, UnitStatus expected, UnitStatus actual);
    error ClaimWindowClosed(uint256 unitId, uint64 deadline);
    error ClaimWindowStillOpen(uint256 unitId, uint64 deadline);
    error AlreadyClaimed(uint256 unitId, address solver);
    error TooManyClaimants(uint256 unitId, uint256 max);
    error SeedNotYetAvailable(uint256 unitId, uint64 seedBlock);
    error NotAssignee(uint256 unitId, address caller, address assignee);
    error CommitDeadlinePassed(uint256 unitId, uint64 deadline);
    error DeadlineNotPassed(uint256 unitId, uint64 deadline);
    error WrongCheckpointCount(uint256 unitId, uint64 given, uint64 expected);
    error EmptyBlobLocator();
    error ChallengeWindowClosed(uint256 unitId, uint64 deadline);
    error NotSelectedVerifier(uint256 unitId, address caller);
    error AlreadyResponded(uint256 unitId, address verifier, VerifierStatus status);
    error WrongAttestationLength(uint256 given, uint256 expected);
    error NotChallenger(address caller, INodeRegistry.Role role);
    error ClaimMatchesCommitment(uint256 unitId, bytes32 claim);
    error NothingToWithdraw(address account);
    /// @notice Raised by `unitIdOf` (library `JobIds`) for an index above 2^32 - 1.
    error UnitIndexTooLarge(uint256 index);

    // ------------------------------------------------------------------ events
    event ArbiterSet(address indexed arbiter);
    event JobPosted(
        uint256 indexed jobId,
        address indexed submitter,
        bytes32 indexed specHash,
        JobParams params,
        uint8 unitCount
    );
    event UnitOpened(uint256 indexed unitId, uint256 indexed jobId, uint64 claimDeadline, uint32 attempt);
    event UnitClaimed(uint256 indexed unitId, address indexed solver, uint96 weight, uint256 collateral);
    event ClaimWindowExtended(uint256 indexed unitId, uint64 claimDeadline);
    event ClaimsClosed(uint256 indexed unitId, uint64 seedBlock, uint8 claimants);
    event SeedRearmed(uint256 indexed unitId, uint64 seedBlock);
    event UnitAssigned(uint256 indexed unitId, address indexed solver, uint64 commitDeadline, bytes32 seed);
    event ClaimReleased(uint256 indexed unitId, address indexed solver);
    event AssignmentExpired(uint256 indexed unitId, address indexed solver, uint256 slashed);
    event CheckpointsCommitted(
        uint256 indexed unitId,
        address indexed solver,
        bytes32 checkpointRoot,
        uint64 numCheckpoints,
        bytes32 finalStateRoot,
        string blobLocator,
        uint64 seedBlock
    );
    event VerifiersDrawn(uint256 indexed unitId, address[] verifiers, uint64 seed, uint64 challengeDeadline);
    event Attested(uint256 indexed unitId, address indexed verifier, uint64[] segments, bytes32[] endRoots);
    event ChallengeOpened(
        uint256 indexed unitId, address indexed challenger, uint256 indexed gameId, bytes32 claim, uint256 bond
    );
    event DisputeResolved(uint256 indexed unitId, uint256 indexed gameId, bool challengerWon, uint64 challengeDeadline);
    event VerifierPenalised(uint256 indexed unitId, address indexed verifier, uint256 amount);
    event UnitFinalized(
        uint256 indexed unitId, address indexed solver, uint256 solverPay, uint256 verifierFee, uint256 tax
    );
    event JobCompleted(uint256 indexed jobId);
    event JobCancelled(uint256 indexed jobId, uint256 refund);
    event Credited(address indexed account, uint256 amount, uint256 balance);
    event JackpotIncreased(uint256 amount, uint256 jackpot);
    event Withdrawn(address indexed account, uint256 amount);

    // ------------------------------------------------------------------ wiring
    /// @notice Sets the dispute arbiter. Deployer only, once.
    function setArbiter(address newArbiter) external;

    // ------------------------------------------------------------------ submitter
    /// @notice Posts a job and pulls `params.reward` into escrow (needs approval).
    function postJob(JobParams calldata params) external returns (uint256 jobId);

    /// @notice Cancels a job none of whose units is assigned yet; credits the escrow back.
    function cancelJob(uint256 jobId) external;

    // ------------------------------------------------------------------ scheduling
    /// @notice Claims an open unit while its claim window runs; locks the solver's collateral.
    function claim(uint256 unitId) external;

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
    /// @notice Commits the checkpoint root over state roots at steps 0, k, ..., T (PROTOCOL §3),
    ///         their count, the final state root and where the checkpoints can be fetched.
    function commitCheckpoints(
        uint256 unitId,
        bytes32 checkpointRoot,
        uint64 numCheckpoints,
        bytes32 finalStateRoot,
        string calldata blobLocator
    ) external;

    // ------------------------------------------------------------------ verification
    /// @notice Draws the verifiers with the hash of the block after the commitment and opens the
    ///         challenge window. Anyone may call.
    function drawVerifiers(uint256 unitId) external;

    /// @notice A selected verifier attests, committing the state root it computed at the end of
    ///         each of its sampled segments (`sampledSegments`, in order).
    function attest(uint256 unitId, bytes32[] calldata endRoots) external;

    /// @notice A verifier or whistleblower disputes the unit's commitment, pulling
    ///         `challengeBond`, and opens a dispute game with its own checkpoint root
    ///         `counterClaim`. The assignee is a solver and so can never challenge its own unit.
    function challenge(uint256 unitId, bytes32 counterClaim) external returns (uint256 gameId);

    /// @notice After the challenge window, with no dispute open: pays the solver, the attesting
    ///         verifiers and the tax; penalises silent verifiers. Anyone may call.
    function finalize(uint256 unitId) external;

    /// @notice Transfers the caller's credited balance.
    function withdraw() external;

    // ------------------------------------------------------------------ views
    function token() external view returns (address);
    function registry() external view returns (address);
    function arbiter() external view returns (address);
    function config() external view returns (Config memory);
    function jobCount() external view returns (uint256);
    function getJob(uint256 jobId) external view returns (Job memory);
    function getUnit(uint256 unitId) external view returns (Unit memory);
    function getClaimants(uint256 unitId) external view returns (address[] memory solvers, uint96[] memory weights);
    function getVerifiers(uint256 unitId) external view returns (address[] memory);
    function verifierStatus(uint256 unitId, address verifier)
        external
        view
        returns (VerifierStatus status, bytes32 attestationHash);
    function sampledSegments(uint256 unitId, address verifier) external view returns (uint64[] memory);
    function getDispute(uint256 unitId) external view returns (Dispute memory);
    function unitOfGame(uint256 gameId) external view returns (uint256);
    function credits(address account) external view returns (uint256);
    function jackpot() external view returns (uint256);
    /// @notice Collateral a solver locks to claim a unit of `jobId`.
    function collateralOf(uint256 jobId) external view returns (uint256);
    /// @notice How a unit's reward of `jobId` splits: solver, verifiers, tax.
    function payoutOf(uint256 jobId) external view returns (uint256 solverPay, uint256 verifierFee, uint256 tax);
    function unitIdOf(uint256 jobId, uint256 index) external pure returns (uint256);
    function jobIdOf(uint256 unitId) external pure returns (uint256);
}
