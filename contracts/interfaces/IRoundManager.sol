// SPDX-License-Identifier: MIT
pragma solidity 0.8.37;

import {IDisputeCallback} from "./IDisputeCallback.sol";
import {INodeRegistry} from "./INodeRegistry.sol";

/// @title IRoundManager
/// @notice Decomposed jobs on chain (job spec version 2, PROTOCOL §5.1, §6.9): R rounds × S
///         shards of local SGD. Each round the manager posts S unit jobs into the job manager
///         (itself as their submitter; unit (r, s) starts from G_r), and once all S are finalized
///         an aggregator commits G_{r+1}, bonded. During the aggregation window anyone may prove
///         one element of G_{r+1} wrong, non-interactively, against the units' finalized state
///         roots (the agreed inputs); the aggregator's bond is slashed and the round re-opens
///         for aggregation. After the window the round is final and round r+1 is posted.
///         A version-3 job (PROTOCOL §5.2, `aggregationConfigHash` nonzero) keeps a round state
///         H_r (G_r's tensors, then the outer optimizer's buffers): its aggregate H_{r+1} is the
///         committed aggregation graph on H_r and the units' final states, and it is disputed
///         by the protocol's dispute game (`challengeAggregate`: one bonded challenger at a
///         time, bisected to one operator, `onDisputeResolved`), not by element proofs.
/// @dev Money: the submitter escrows R·(S·unitReward + aggregatorReward) here; unit rewards
///      move into the job manager as each round's units are posted. Payouts (aggregator reward
///      and bond, challenger rewards) are credited and pulled with `withdraw`; the slashed
///      remainder of a bond goes to this contract's jackpot, which `flushJackpot` passes on to the
///      job manager's.
interface IRoundManager is IDisputeCallback {
    enum JobStatus {
        None,
        Running,
        Completed
    }

    enum RoundStatus {
        None,
        Training, // units posted; aggregation may be committed once all S are finalized
        Committed, // an aggregate is in its challenge window
        Final, // G_{r+1} is final
        Disputed // version 3: the aggregate is disputed in the aggregation game
    }

    /// @notice What a submitter posts.
    /// @param specHash           keccak256 of the canonical version-2 job spec (PROTOCOL §5.1).
    /// @param datasetRoot        Dataset root list (PROTOCOL §4).
    /// @param initialStateRoot   State root of G_0 (the step state round 0's units start from).
    /// @param layoutHash         keccak256(abi.encode(StateLayout)) of the spec's state tensors.
    /// @param rounds             R (> 0).
    /// @param shards             S (1 … MAX_SHARDS, ≤ numExamples).
    /// @param localSteps         k_local, the steps of one unit (> 0).
    /// @param checkpointInterval k, divides k_local.
    /// @param numExamples        N, the dataset's training examples (fixes the weights w_s).
    /// @param required           Minimum solver capability of every unit.
    /// @param unitReward         Reward of one unit job (covers its verification fee and tax).
    /// @param verificationFee    Verification fee of one unit job.
    /// @param aggregatorReward   Paid to the aggregator of each round once it is final.
    /// @param computeTime        Seconds a unit's assignee has to commit.
    /// @param disputeConfigHash  The job's dispute config hash (PROTOCOL §7.2, a function of the
    ///                           spec and N), registered for every unit job with the unit's
    ///                           placement (first global step, shard) so units can be disputed.
    /// @param aggregationConfigHash Version 3: the dispute config hash of the job's aggregation
    ///                           graph (PROTOCOL §7.2), registered with the aggregation game;
    ///                           zero for version 2 (element fraud proofs).
    /// @param initialRoundRoot   Version 3: state root of H_0 (G_0's tensors, then zero outer
    ///                           buffers); zero for version 2 (H = G).
    /// @param numStep            Version 3: how many of the layout's tensors (the first) are
    ///                           the step state G; zero for version 2 (all).
    struct JobParams {
        bytes32 specHash;
        bytes32 datasetRoot;
        bytes32 initialStateRoot;
        bytes32 layoutHash;
        uint32 rounds;
        uint32 shards;
        uint64 localSteps;
        uint64 checkpointInterval;
        uint64 numExamples;
        INodeRegistry.Capability required;
        uint96 unitReward;
        uint96 verificationFee;
        uint96 aggregatorReward;
        uint32 computeTime;
        bytes32 disputeConfigHash;
        bytes32 aggregationConfigHash;
        bytes32 initialRoundRoot;
        uint32 numStep;
    }

    /// @notice A decomposed job as stored (the posted parameters plus its progress).
    struct Job {
        address submitter;
        JobStatus status;
        uint32 currentRound;
        uint128 escrow;
        JobParams params;
    }

    /// @notice Round `r` of a job: its aggregate (G_{r+1}; H_{r+1} for version 3) and who
    ///         committed it. Version 3 also: the root of the aggregate's step state (G_{r+1},
    ///         round r+1's units' start), the units list U_r (the root list under
    ///         vtp.units.v1 of the S units' final state roots, the agreed inputs) and, while
    ///         Disputed, the challenger (its game is in `AggregateChallenged`).
    struct Round {
        RoundStatus status;
        uint32 attempt;
        uint64 deadline;
        address aggregator;
        bytes32 aggregateRoot;
        bytes32 nextUnitRoot;
        bytes32 unitsRoot;
        address challenger;
    }

    /// @notice The state tensors in state-root order (PROTOCOL §5): keccak256(name), rows, cols.
    struct StateLayout {
        bytes32[] names;
        uint32[] rows;
        uint32[] cols;
    }

    /// @notice Element `element` of state tensor `tensor` in one state: the tensor root, its
    ///         state-list entry proof (siblings bottom-up) and the element's 256-byte leaf chunk
    ///         with its Merkle siblings (bottom-up).
    struct ElementOpening {
        bytes32 tensorRoot;
        bytes32[] listProof;
        bytes chunk;
        bytes32[] siblings;
    }

    /// @notice A pending request that the aggregator reveal its data of one committed tensor
    ///         (PROTOCOL §6.9, withheld aggregates).
    /// @param requester  Who asked (and paid the request bond).
    /// @param deadline   Last second of the reveal; after it the aggregate counts as withheld.
    /// @param tensor     The tensor's state position.
    /// @param dataRoot   The committed data root of the tensor (proven against the aggregate).
    /// @param leavesHash keccak256(abi.encode(leaves)) of the requester's leaf hashes of the
    ///                   tensor (its honest G_{r+1}, which the committed data root differs from).
    struct RevealRequest {
        address requester;
        uint64 deadline;
        uint32 tensor;
        bytes32 dataRoot;
        bytes32 leavesHash;
    }

    /// @notice Deployment parameters (PROTOCOL §6.9 lists defaults and reasons).
    struct Config {
        uint32 aggregationWindow;
        uint96 aggregatorBond;
        uint16 challengerRewardBps;
    }

    // ------------------------------------------------------------------ errors
    /// @notice A deployment parameter is out of range (zero window, bps above 100 %).
    error InvalidConfig();
    /// @notice A root or hash that must be set is zero.
    error ZeroCommitment();
    /// @notice `rounds` is zero.
    error ZeroRounds();
    /// @notice `shards` is zero, above MAX_SHARDS or above `numExamples`.
    error InvalidShards(uint256 shards, uint256 max);
    /// @notice `localSteps` is zero, `checkpointInterval` is zero or does not divide it.
    error InvalidLocalSteps(uint64 localSteps, uint64 checkpointInterval);
    /// @notice `computeTime` is zero.
    error ZeroComputeTime();
    /// @notice No decomposed job has this id.
    error UnknownJob(uint256 jobId);
    /// @notice The job manager has no arbiter to register unit dispute configs with.
    error ArbiterNotSet();
    /// @notice The job-manager job is not a unit of a decomposed job of this round manager.
    error NotAUnitJob(uint256 unitJobId);
    /// @notice The job is already completed.
    error JobNotRunning(uint256 jobId);
    /// @notice The round is not in the state this action needs.
    error WrongRoundStatus(uint256 jobId, uint256 round, RoundStatus expected, RoundStatus actual);
    /// @notice A unit job of the round is not finalized yet.
    error UnitNotFinalized(uint256 jobId, uint256 round, uint256 shard, uint256 unitJobId);
    /// @notice Only a registered solver may aggregate.
    error NotAggregator(address caller, INodeRegistry.Role role);
    /// @notice This account's aggregate of the round was proven wrong; it may not aggregate it again.
    error AggregatorBarred(uint256 jobId, uint256 round, address aggregator);
    /// @notice The blob locator is empty.
    error EmptyBlobLocator();
    /// @notice The given stateLayout does not hash to the job's layoutHash.
    error LayoutMismatch(bytes32 expected, bytes32 actual);
    /// @notice The stateLayout's arrays, the data roots or the openings have the wrong length.
    error LengthMismatch(uint256 expected, uint256 actual);
    /// @notice The aggregation challenge window is over.
    error ChallengeWindowClosed(uint256 jobId, uint256 round, uint64 deadline);
    /// @notice The aggregation challenge window is still running.
    error ChallengeWindowOpen(uint256 jobId, uint256 round, uint64 deadline);
    /// @notice `tensor` is not a state position.
    error TensorOutOfRange(uint256 tensor, uint256 numState);
    /// @notice An element opening does not verify against its state root; `shard` is S for G_{r+1}.
    error InvalidOpening(uint256 shard);
    /// @notice The recomputed element equals the committed one: the aggregate is right there.
    error AggregateCorrect(uint256 tensor, uint256 element, uint32 value);
    /// @notice The account has no credit.
    error NothingToWithdraw(address account);
    /// @notice The jackpot is empty: nothing to pass on to the job manager.
    error NothingToFlush();
    /// @notice A reveal of the round's aggregate is pending until `deadline`.
    error RevealPending(uint256 jobId, uint256 round, uint64 deadline);
    /// @notice No reveal of the round's aggregate is pending.
    error NoRevealPending(uint256 jobId, uint256 round);
    /// @notice The pending reveal's deadline has passed (the aggregate counts as withheld).
    error RevealTooLate(uint256 jobId, uint256 round, uint64 deadline);
    /// @notice The pending reveal's deadline has not passed.
    error RevealWindowOpen(uint256 jobId, uint256 round, uint64 deadline);
    /// @notice Aggregate `attempt` of the round was not overturned (it is still the current one,
    ///         or it stood): the request bonds held for it are not returned.
    error AggregateNotOverturned(uint256 jobId, uint256 round, uint256 attempt);
    /// @notice `requester` has no request bond held for that aggregate.
    error NoBondHeld(uint256 jobId, uint256 round, uint256 attempt, address requester);
    /// @notice The given data root is not tensor `tensor`'s in the committed aggregate.
    error InvalidTensorProof(uint256 tensor);
    /// @notice The requester's leaves give the committed data root: nothing is disputed.
    error TensorNotDisputed(uint256 tensor, bytes32 dataRoot);
    /// @notice A list's hash or root is not the one recorded.
    error RootMismatch(bytes32 expected, bytes32 actual);
    /// @notice The version fields disagree: a version-3 job needs `initialRoundRoot` and
    ///         `numStep` (and the aggregation game wired), a version-2 job has neither.
    error InvalidAggregation(bytes32 aggregationConfigHash, bytes32 initialRoundRoot, uint32 numStep);
    /// @notice `numStep` is above the layout's tensor count.
    error InvalidStepCount(uint256 numStep, uint256 numState);
    /// @notice Only the deployer wires the aggregation game.
    error NotDeployer(address caller);
    /// @notice The aggregation game was already wired.
    error GameAlreadySet(address game);
    /// @notice `game` is managed by `manager`, not by this contract.
    error GameOfAnotherManager(address game, address manager);
    /// @notice The job is version 3: its aggregates are disputed in the aggregation game
    ///         (`challengeAggregate`), not by element proofs or reveal requests.
    error AggregatedByGraph(uint256 jobId);
    /// @notice The job is version 2: it has no aggregation game (element proofs instead).
    error NoAggregationGame(uint256 jobId);
    /// @notice Only a registered party may challenge an aggregate.
    error NotRegistered(address caller);
    /// @notice The aggregator may not challenge its own aggregate.
    error OwnAggregate(address caller);

    // ------------------------------------------------------------------ events
    /// @notice A decomposed job was posted and `escrow` pulled from the submitter.
    event DecomposedJobPosted(
        uint256 indexed jobId, address indexed submitter, bytes32 indexed specHash, JobParams params, uint256 escrow
    );
    /// @notice Unit (round, shard) was posted as job `unitJobId` of the job manager, from G_round.
    event UnitJobPosted(
        uint256 indexed jobId, uint32 round, uint32 shard, uint256 indexed unitJobId, bytes32 initialStateRoot
    );
    /// @notice An aggregator committed G_{round+1}, bonded; it is final after `deadline`. The
    ///         state can be fetched at `blobLocator` (challengers open its elements from it).
    event AggregateCommitted(
        uint256 indexed jobId,
        uint32 round,
        address indexed aggregator,
        bytes32 aggregateRoot,
        uint64 deadline,
        string blobLocator
    );
    /// @notice Element `element` of tensor `tensor` of the committed aggregate was proven wrong.
    event AggregationFraudProven(
        uint256 indexed jobId,
        uint32 round,
        address indexed aggregator,
        address indexed challenger,
        uint256 tensor,
        uint256 element,
        uint32 claimed,
        uint32 computed
    );
    /// @notice `requester` asked the aggregator to reveal its data of tensor `tensor` by
    ///         `deadline`: the leaf hashes of its committed data root and the chunk of the first
    ///         leaf that differs from `leaves` (the requester's).
    event AggregateRevealRequested(
        uint256 indexed jobId,
        uint32 round,
        address indexed requester,
        uint32 tensor,
        bytes32 dataRoot,
        bytes32[] leaves,
        uint64 deadline
    );
    /// @notice The committed data of tensor `tensor` was revealed: its leaf hashes and the
    ///         chunk of leaf `leaf` (the first that differs from the requester's). The challenge
    ///         window now ends no earlier than `deadline`.
    event AggregateLeafRevealed(
        uint256 indexed jobId,
        uint32 round,
        uint32 tensor,
        uint256 leaf,
        bytes32[] leaves,
        bytes chunk,
        uint64 deadline
    );
    /// @notice The answered request's bond `amount` is held with aggregate `attempt` of the
    ///         round: to the jackpot if that aggregate stands, back to `requester` if it is
    ///         overturned (`reclaimRevealBond`).
    event RevealBondHeld(
        uint256 indexed jobId, uint32 round, uint32 attempt, address indexed requester, uint256 amount
    );
    /// @notice `requester` took back `amount`, its request bonds held with overturned aggregate
    ///         `attempt` of the round (credited).
    event RevealBondReturned(
        uint256 indexed jobId, uint32 round, uint32 attempt, address indexed requester, uint256 amount
    );
    /// @notice The aggregator did not reveal by the deadline: its bond is slashed as for fraud
    ///         and the round re-opens for aggregation.
    event AggregateWithheld(uint256 indexed jobId, uint32 round, address indexed aggregator, address indexed requester);
    /// @notice The aggregation game (a DisputeGame managed by this contract) was wired.
    event GameSet(address indexed game);
    /// @notice `challenger` disputes the round's aggregate, bonded, in game `gameId` of the
    ///         aggregation game.
    event AggregateChallenged(uint256 indexed jobId, uint32 round, address indexed challenger, uint256 indexed gameId);
    /// @notice Game `gameId` over the round's aggregate resolved. `challengerWon`: the aggregate
    ///         was wrong, the aggregator is barred and the round re-opens for aggregation;
    ///         otherwise the aggregate is back in its window, which ends no earlier than
    ///         `deadline`.
    event AggregateDisputeResolved(
        uint256 indexed jobId, uint32 round, uint256 indexed gameId, bool challengerWon, uint64 deadline
    );
    /// @notice G_{round+1} is final; the aggregator was paid.
    event RoundFinalized(uint256 indexed jobId, uint32 round, bytes32 globalRoot, address aggregator);
    /// @notice Every round is final; `resultRoot` is G_R.
    event DecomposedJobCompleted(uint256 indexed jobId, bytes32 resultRoot);
    /// @notice `amount` was credited to `account`, whose credit is now `balance`.
    event Credited(address indexed account, uint256 amount, uint256 balance);
    /// @notice `amount` went to the jackpot, which now holds `jackpot`.
    event JackpotIncreased(uint256 amount, uint256 jackpot);
    /// @notice `account` withdrew its credit.
    event Withdrawn(address indexed account, uint256 amount);
    /// @notice The jackpot's `amount` went to the job manager's jackpot (`IJobManager.fundJackpot`).
    event JackpotFlushed(uint256 amount);

    // ------------------------------------------------------------------ actions
    /// @notice Posts a decomposed job, pulls R·(S·unitReward + aggregatorReward) (needs
    ///         approval) and posts round 0's S unit jobs.
    function postJob(JobParams calldata params) external returns (uint256 jobId);

    /// @notice A registered solver commits G_{r+1} of the current round, once its S units are
    ///         finalized, as the data roots of its state tensors (the state root is computed here
    ///         from the layout, so its structure is right by construction) and where its state
    ///         blob can be fetched; pulls the bond.
    function commitAggregate(
        uint256 jobId,
        StateLayout calldata stateLayout,
        bytes32[] calldata dataRoots,
        string calldata blobLocator
    )
        external;

    /// @notice Proves element `element` of tensor `tensor` of the committed aggregate wrong: the
    ///         S unit openings (shard order) and the aggregate's opening verify, and the fixed-order
    ///         average of the unit elements differs from the aggregate's. Slashes the bond (the
    ///         challenger's share credited, the rest to the jackpot) and re-opens aggregation.
    ///         An element of a leaf revealed in this aggregate (`revealAggregateLeaf`) pays the
    ///         first requester that leaf was revealed to, whoever proves it (the challenger's
    ///         share), so an aggregator that proves its own fraud after a reveal cannot take the
    ///         reward from the requester. Every request bond held with the aggregate can then be
    ///         reclaimed (`reclaimRevealBond`), whichever element was proven.
    function proveAggregationFraud(
        uint256 jobId,
        StateLayout calldata stateLayout,
        uint256 tensor,
        uint256 element,
        ElementOpening[] calldata units,
        ElementOpening calldata aggregate
    ) external;

    /// @notice Version 3: disputes the current round's committed aggregate in the aggregation
    ///         game (during its window, by a registered account other than the aggregator,
    ///         one game at a time): pulls a bond equal to the aggregator's and opens the
    ///         one-step claim "from H_r with the units list U_r, the aggregation graph gives the
    ///         committed H_{r+1}", defended by the aggregator. Returns the game's id.
    function challengeAggregate(uint256 jobId) external returns (uint256 gameId);

    /// @notice Wires the aggregation game, a DisputeGame whose manager is this contract.
    ///         Deployer only, once; version-3 jobs need it.
    function setGame(address newGame) external;

    /// @notice After the challenge window: G_{r+1} is final, the aggregator is credited its
    ///         bond and reward, and round r+1's units are posted (or the job completes).
    function finalizeRound(uint256 jobId) external;

    /// @notice Transfers the caller's credited balance.
    function withdraw() external;

    /// @notice Passes this contract's whole jackpot on to the job manager's (`fundJackpot`), the one
    ///         that pays forced-error catchers. Anyone may call.
    function flushJackpot() external;

    /// @notice Asks the aggregator of the current round to reveal its data of tensor `tensor`
    ///         (for an aggregate whose blob is withheld): `dataRoot` with `listProof` must be the
    ///         tensor's in the committed aggregate, and `leaves` (the requester's leaf hashes of
    ///         the tensor, one per 64 elements) must give another data root. Pulls the request
    ///         bond (`revealBond`). Once answered the bond is held with the aggregate: it goes
    ///         to the jackpot if the aggregate stands (`finalizeRound`) and back to the requester
    ///         if it is overturned by any fraud proof or withheld reveal (`reclaimRevealBond`).
    ///         One request at a time; the round cannot be finalized while one is pending.
    function requestAggregateReveal(
        uint256 jobId,
        StateLayout calldata stateLayout,
        uint256 tensor,
        bytes32 dataRoot,
        bytes32[] calldata listProof,
        bytes32[] calldata leaves
    ) external;

    /// @notice Answers the pending request (anyone holding the data may), with the job's state
    ///         layout: `leaves` give the
    ///         committed data root, `requested` are the requester's leaves, `chunk` is the leaf
    ///         of the first index where they differ. A chunk with a nonzero word past the
    ///         tensor's last element is a malformed aggregate and proven fraud at once.
    ///         Otherwise the challenge window is extended to at least one aggregation window
    ///         from now, so the requester can prove an element of the chunk wrong.
    function revealAggregateLeaf(
        uint256 jobId,
        StateLayout calldata stateLayout,
        bytes32[] calldata leaves,
        bytes32[] calldata requested,
        bytes calldata chunk
    ) external;

    /// @notice After an unanswered request's deadline: the aggregate counts as withheld; its
    ///         bond is slashed as for fraud (the requester's share and its request bond
    ///         credited, the rest to the jackpot) and the round re-opens for aggregation.
    function claimAggregateWithheld(uint256 jobId) external;

    /// @notice Credits the caller its request bonds held with aggregate `attempt` of round
    ///         `round`, once that aggregate was overturned (the round's attempt moved past it).
    function reclaimRevealBond(uint256 jobId, uint256 round, uint256 attempt) external;

    /// @notice Registers unit job `unitJobId`'s dispute config and placement (t0 = r·k_local,
    ///         shard s of S) with `unitGame`, this contract being the unit's submitter. Units are
    ///         registered with the job manager's arbiter when posted; anyone may call this for
    ///         another game that reads submitters from the job manager (the attestation
    ///         court's). Reverts as the game does if already registered there.
    function registerUnitConfig(uint256 unitJobId, address unitGame) external;

    // ------------------------------------------------------------------ views
    /// @notice The job manager the units run in.
    function jobManager() external view returns (address);
    /// @notice The payment token.
    function token() external view returns (address);
    /// @notice The deployment parameters.
    function config() external view returns (Config memory);
    /// @notice Number of decomposed jobs posted; the last id.
    function jobCount() external view returns (uint256);
    /// @notice Decomposed job `jobId`.
    function getJob(uint256 jobId) external view returns (Job memory);
    /// @notice Round `round` of job `jobId`.
    function getRound(uint256 jobId, uint256 round) external view returns (Round memory);
    /// @notice State root of G_round (G_0 at posting; G_{r+1} once round r is final; else 0);
    ///         for version 3 the round state H_round.
    function globalRoot(uint256 jobId, uint256 round) external view returns (bytes32);
    /// @notice State root of the step state round `round`'s units start from (G_round).
    function unitStartRoot(uint256 jobId, uint256 round) external view returns (bytes32);
    /// @notice The aggregation game (zero until wired).
    function game() external view returns (address);
    /// @notice The unit id of round `round`'s aggregation claim in the aggregation game (its
    ///         config is the job's, registered at posting): `JobIds.unitId(jobId, round)`.
    function aggregationUnitId(uint256 jobId, uint256 round) external pure returns (uint256);
    /// @notice Job-manager job id of unit (round, shard) (0 before it is posted).
    function unitJobOf(uint256 jobId, uint256 round, uint256 shard) external view returns (uint256);
    /// @notice Which decomposed job, round and shard a job-manager job runs (jobId 0 if none).
    function unitOf(uint256 unitJobId) external view returns (uint256 jobId, uint32 round, uint32 shard);
    /// @notice spec hash of unit (round, shard): keccak256(abi.encode(UNIT_DOMAIN, specHash, round, shard)).
    function unitSpecHash(bytes32 specHash, uint256 round, uint256 shard) external pure returns (bytes32);
    /// @notice What `account` can withdraw.
    function credits(address account) external view returns (uint256);
    /// @notice Tokens held for the jackpot until `flushJackpot` passes them to the job manager.
    function jackpot() external view returns (uint256);
    /// @notice The pending reveal request of round `round` (requester 0 when none).
    function revealRequestOf(uint256 jobId, uint256 round) external view returns (RevealRequest memory);
    /// @notice The bond a reveal request pulls: REVEAL_BOND_BPS of the aggregator bond.
    function revealBond() external view returns (uint256);
    /// @notice Request bonds of `requester` held with aggregate `attempt` of round `round`.
    function heldBondOf(uint256 jobId, uint256 round, uint256 attempt, address requester)
        external
        view
        returns (uint256);
    /// @notice All request bonds held with aggregate `attempt` of round `round` (not yet gone to
    ///         the jackpot at the round's finalization, nor reclaimed).
    function heldBonds(uint256 jobId, uint256 round, uint256 attempt) external view returns (uint256);
    /// @notice All request bonds held, over every aggregate (for the money's conservation).
    function heldBondsTotal() external view returns (uint256);
}
