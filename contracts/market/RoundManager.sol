// SPDX-License-Identifier: MIT
pragma solidity 0.8.37;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";
import {ReentrancyGuard} from "@openzeppelin/contracts/utils/ReentrancyGuard.sol";
import {IDisputeGame} from "../dispute/interfaces/IDisputeGame.sol";
import {IDisputeCallback} from "../interfaces/IDisputeCallback.sol";
import {Placement} from "../dispute/lib/DisputeTypes.sol";
import {IJobManager} from "../interfaces/IJobManager.sol";
import {INodeRegistry} from "../interfaces/INodeRegistry.sol";
import {IRoundManager} from "../interfaces/IRoundManager.sol";
import {AggregationReference} from "./AggregationReference.sol";
import {Credits} from "../libraries/Credits.sol";
import {JobIds} from "../libraries/JobIds.sol";
import {MarketMath} from "../libraries/MarketMath.sol";
import {TensorMerkle} from "../libraries/TensorMerkle.sol";

/// @dev The one view of a game read when it is wired: whose game it is.
interface IManagedGame {
    function manager() external view returns (address);
}

/// @title RoundManager
/// @notice Decomposed (R rounds × S shards) jobs over the job manager, with bonded aggregation
///         and its non-interactive fraud proof (version 2) or the aggregation game (version 3,
///         PROTOCOL §6.9).
/// @dev The job manager is trusted (fixed at deployment): unit jobs are posted into it with this
///      contract as their submitter, and a unit's finalized `finalStateRoot` is the agreed input
///      of aggregation. Entry points that move tokens or call the job manager are nonReentrant.
///      The aggregation game is a DisputeGame whose manager is this contract (wired once by the
///      deployer, `setGame`): it registers each version-3 job's aggregation config there, opens
///      one-step claims over aggregates and hears their results (`onDisputeResolved`).
contract RoundManager is IRoundManager, ReentrancyGuard {
    using SafeERC20 for IERC20;
    using Credits for Credits.Ledger;

    /// @notice At most this many shards (bounds the per-round posting and proof loops).
    uint256 public constant MAX_SHARDS = 64;
    /// @notice Domain of unit spec hashes: keccak256("vtp.unit.v1").
    bytes32 public constant UNIT_DOMAIN = keccak256("vtp.unit.v1");
    /// @notice A reveal request's bond, in basis points of the aggregator bond. 20 %: every
    ///         answered request costs its maker that much (to the jackpot), which bounds how long
    ///         anyone, the aggregator included, can stall a round with requests, while a
    ///         requester that then proves fraud earns `challengerRewardBps` of the whole bond.
    uint256 public constant REVEAL_BOND_BPS = 2_000;

    IJobManager private immutable _manager;
    IERC20 private immutable _token;
    INodeRegistry private immutable _registry;
    uint32 private immutable _aggregationWindow;
    uint96 private immutable _aggregatorBond;
    uint16 private immutable _challengerRewardBps;
    /// @dev The float32 weights and average (a separate contract for code size, see there).
    AggregationReference private immutable _reference;
    address private immutable _deployer;

    /// @dev The aggregation game (version 3), wired once.
    IDisputeGame private _game;

    uint256 private _jobCount;
    uint256 private _jackpot;

    /// @dev Packed reverse index of a unit job: decomposed job id, round, shard.
    struct UnitRef {
        uint192 jobId;
        uint32 round;
        uint32 shard;
    }

    mapping(uint256 jobId => Job) private _jobs;
    mapping(uint256 jobId => mapping(uint256 round => Round)) private _rounds;
    /// @dev H_r (G_r for version 2) and G_r, the state round r's units start from.
    mapping(uint256 jobId => mapping(uint256 round => bytes32)) private _globalRoots;
    mapping(uint256 jobId => mapping(uint256 round => bytes32)) private _unitStartRoots;
    mapping(uint256 jobId => mapping(uint256 round => mapping(uint256 shard => uint256))) private _unitJobs;
    mapping(uint256 unitJobId => UnitRef) private _unitRefs;
    mapping(uint256 jobId => mapping(uint256 round => mapping(address => bool))) private _barred;
    Credits.Ledger private _credits;
    mapping(uint256 jobId => mapping(uint256 round => RevealRequest)) private _reveals;
    /// @dev The first requester each leaf of an aggregate was revealed to (`_leafKey`).
    mapping(bytes32 leafKey => address) private _revealedTo;
    /// @dev Answered requests' bonds, held with their aggregate (`_aggregateKey`) until it stands
    ///      (to the jackpot) or is overturned (back to each requester): per requester, per
    ///      aggregate, and over all of them.
    mapping(bytes32 aggregateKey => mapping(address requester => uint256)) private _heldBondOf;
    mapping(bytes32 aggregateKey => uint256) private _heldBonds;
    uint256 private _heldBondsTotal;

    constructor(IJobManager manager, Config memory cfg) {
        if (address(manager) == address(0)) revert InvalidConfig();
        if (cfg.aggregationWindow == 0) revert InvalidConfig();
        if (cfg.challengerRewardBps > MarketMath.BPS) revert InvalidConfig();
        _manager = manager;
        _token = IERC20(manager.token());
        _registry = INodeRegistry(manager.registry());
        _aggregationWindow = cfg.aggregationWindow;
        _aggregatorBond = cfg.aggregatorBond;
        _challengerRewardBps = cfg.challengerRewardBps;
        _reference = new AggregationReference();
        _deployer = msg.sender;
    }

    // ------------------------------------------------------------------ wiring

    /// @inheritdoc IRoundManager
    function setGame(address newGame) external {
        if (msg.sender != _deployer) revert NotDeployer(msg.sender);
        if (address(_game) != address(0)) revert GameAlreadySet(address(_game));
        address gm = IManagedGame(newGame).manager();
        if (gm != address(this)) revert GameOfAnotherManager(newGame, gm);
        _game = IDisputeGame(newGame);
        emit GameSet(newGame);
    }

    // ------------------------------------------------------------------ submitter

    /// @inheritdoc IRoundManager
    function postJob(JobParams calldata p) external nonReentrant returns (uint256 jobId) {
        if (p.specHash == bytes32(0)) revert ZeroCommitment();
        if (p.datasetRoot == bytes32(0)) revert ZeroCommitment();
        if (p.initialStateRoot == bytes32(0)) revert ZeroCommitment();
        if (p.layoutHash == bytes32(0)) revert ZeroCommitment();
        if (p.disputeConfigHash == bytes32(0)) revert ZeroCommitment();
        if (p.rounds == 0) revert ZeroRounds();
        uint256 maxShards = p.numExamples < MAX_SHARDS ? p.numExamples : MAX_SHARDS;
        if (p.shards == 0 || p.shards > maxShards) revert InvalidShards(p.shards, maxShards);
        if (p.localSteps == 0 || p.checkpointInterval == 0 || p.localSteps % p.checkpointInterval != 0) {
            revert InvalidLocalSteps(p.localSteps, p.checkpointInterval);
        }
        // Every unit's first global step r·k_local must fit the game's uint64 step offset.
        if (uint256(p.rounds) * p.localSteps > type(uint64).max) {
            revert InvalidLocalSteps(p.localSteps, p.checkpointInterval);
        }
        if (p.computeTime == 0) revert ZeroComputeTime();
        bool v3 = p.aggregationConfigHash != bytes32(0);
        if (v3 ? (p.initialRoundRoot == bytes32(0) || p.numStep == 0 || address(_game) == address(0))
                : (p.initialRoundRoot != bytes32(0) || p.numStep != 0)) {
            revert InvalidAggregation(p.aggregationConfigHash, p.initialRoundRoot, p.numStep);
        }
        // The job manager checks the unit reward against its fees when round 0 is posted below.
        uint256 escrow = uint256(p.rounds) * (uint256(p.shards) * p.unitReward + p.aggregatorReward);

        jobId = ++_jobCount;
        Job storage job = _jobs[jobId];
        job.submitter = msg.sender;
        job.status = JobStatus.Running;
        job.escrow = uint128(escrow); // < 2^32 · (2^6 · 2^96 + 2^96) < 2^128
        job.params = p;
        _globalRoots[jobId][0] = v3 ? p.initialRoundRoot : p.initialStateRoot;
        _unitStartRoots[jobId][0] = p.initialStateRoot;
        emit DecomposedJobPosted(jobId, msg.sender, p.specHash, p, escrow);
        _token.safeTransferFrom(msg.sender, address(this), escrow);
        _postRound(jobId, job, 0);
        // This contract manages the game (checked in setGame): it alone registers configs there.
        if (v3) _game.registerConfig(jobId, p.aggregationConfigHash);
    }

    /// @inheritdoc IRoundManager
    /// @dev `unitGame` is any contract: a malicious one can only fail or waste the caller's gas (no
    ///      value moves and no state of this contract changes around the call).
    function registerUnitConfig(uint256 unitJobId, address unitGame) external nonReentrant {
        UnitRef memory ref = _unitRefs[unitJobId];
        if (ref.jobId == 0) revert NotAUnitJob(unitJobId);
        _registerUnit(IDisputeGame(unitGame), _jobs[ref.jobId].params, unitJobId, ref.round, ref.shard);
    }

    // ------------------------------------------------------------------ aggregation

    /// @inheritdoc IRoundManager
    function commitAggregate(
        uint256 jobId,
        StateLayout calldata stateLayout,
        bytes32[] calldata dataRoots,
        string calldata blobLocator
    ) external nonReentrant {
        Job storage job = _runningJob(jobId);
        uint32 r = job.currentRound;
        Round storage round = _rounds[jobId][r];
        _expectRound(jobId, r, round, RoundStatus.Training);
        INodeRegistry.Role role = _registry.roleOf(msg.sender);
        if (role != INodeRegistry.Role.Solver) revert NotAggregator(msg.sender, role);
        if (_barred[jobId][r][msg.sender]) revert AggregatorBarred(jobId, r, msg.sender);
        if (bytes(blobLocator).length == 0) revert EmptyBlobLocator();
        (bytes32 root, bytes32 stepRoot) = _aggregateRoots(job, stateLayout, dataRoots);
        bytes32 unitsRoot = _unitsRoot(jobId, r, job.params.shards, job.params.aggregationConfigHash != bytes32(0));
        uint64 deadline = uint64(block.timestamp) + _aggregationWindow;

        round.status = RoundStatus.Committed;
        round.deadline = deadline;
        round.aggregator = msg.sender;
        round.aggregateRoot = root;
        round.nextUnitRoot = stepRoot;
        round.unitsRoot = unitsRoot;
        emit AggregateCommitted(jobId, r, msg.sender, root, deadline, blobLocator);
        _token.safeTransferFrom(msg.sender, address(this), _aggregatorBond);
    }

    /// @inheritdoc IRoundManager
    function proveAggregationFraud(
        uint256 jobId,
        StateLayout calldata stateLayout,
        uint256 tensor,
        uint256 element,
        ElementOpening[] calldata units,
        ElementOpening calldata aggregate
    ) external nonReentrant {
        uint32 r = _version2(jobId).currentRound;
        (uint32 claimed, uint32 computed) = _recompute(jobId, r, stateLayout, tensor, element, units, aggregate);
        if (computed == claimed) revert AggregateCorrect(tensor, element, claimed);
        RevealRequest memory req = _reveals[jobId][r];
        // Read before the re-open moves the round's attempt on.
        address revealedTo = _revealedTo[_leafKey(jobId, r, tensor, element / TensorMerkle.LEAF_ELEMS)];
        address aggregator = _reopenAggregation(jobId, r);
        emit AggregationFraudProven(jobId, r, aggregator, msg.sender, tensor, element, claimed, computed);
        // A request still pending is moot once the aggregate is proven wrong: its bond returns.
        if (req.requester != address(0)) _credit(req.requester, revealBond());
        // The element is in a leaf revealed to a requester: the reward is the requester's,
        // whoever proves it (the aggregator itself, or a copier of the public chunk). Every
        // answered request's bond is held with the aggregate, so each requester takes its own
        // back (reclaimRevealBond), whichever element was proven first (PROTOCOL §6.9).
        _slashAggregatorBond(revealedTo == address(0) ? msg.sender : revealedTo, 0);
    }

    /// @inheritdoc IRoundManager
    function finalizeRound(uint256 jobId) external nonReentrant {
        Job storage job = _runningJob(jobId);
        uint32 r = job.currentRound;
        Round storage round = _rounds[jobId][r];
        _expectRound(jobId, r, round, RoundStatus.Committed);
        if (block.timestamp <= round.deadline) revert ChallengeWindowOpen(jobId, r, round.deadline);
        RevealRequest storage pending = _reveals[jobId][r];
        if (pending.requester != address(0)) revert RevealPending(jobId, r, pending.deadline);
        bytes32 root = round.aggregateRoot;
        address aggregator = round.aggregator;
        uint256 reward = job.params.aggregatorReward;

        round.status = RoundStatus.Final;
        _globalRoots[jobId][r + 1] = root;
        _unitStartRoots[jobId][r + 1] = round.nextUnitRoot;
        job.escrow -= uint128(reward);
        bytes32 aggregateKey = _aggregateKey(jobId, r, round.attempt);
        uint256 held = _heldBonds[aggregateKey];
        emit RoundFinalized(jobId, r, root, aggregator);
        _credit(aggregator, uint256(_aggregatorBond) + reward);
        // The aggregate stood: the bonds of the requests it answered are forfeited.
        if (held != 0) {
            delete _heldBonds[aggregateKey];
            _heldBondsTotal -= held;
            _addJackpot(held);
        }
        if (r + 1 == job.params.rounds) {
            job.status = JobStatus.Completed;
            emit DecomposedJobCompleted(jobId, root);
        } else {
            job.currentRound = r + 1;
            _postRound(jobId, job, r + 1);
        }
    }

    // ------------------------------------------------------------------ aggregation game

    /// @inheritdoc IRoundManager
    function challengeAggregate(uint256 jobId) external nonReentrant returns (uint256 gameId) {
        Job storage job = _runningJob(jobId);
        if (job.params.aggregationConfigHash == bytes32(0)) revert NoAggregationGame(jobId);
        uint32 r = job.currentRound;
        Round storage round = _rounds[jobId][r];
        _expectRound(jobId, r, round, RoundStatus.Committed);
        if (block.timestamp > round.deadline) revert ChallengeWindowClosed(jobId, r, round.deadline);
        if (_registry.roleOf(msg.sender) == INodeRegistry.Role.None) revert NotRegistered(msg.sender);
        address aggregator = round.aggregator;
        if (msg.sender == aggregator) revert OwnAggregate(msg.sender);
        bytes32[2] memory roots = [_globalRoots[jobId][r], round.aggregateRoot];

        round.status = RoundStatus.Disputed;
        round.challenger = msg.sender;
        // The game (wired once; this contract manages it) is trusted: it records the claim and
        // calls back only when the game resolves, in a later transaction.
        uint256 unitId = aggregationUnitId(jobId, r);
        gameId = _game.openSegmentGame(unitId, aggregator, msg.sender, round.unitsRoot, 0, 1, roots);
        emit AggregateChallenged(jobId, r, msg.sender, gameId);
        _token.safeTransferFrom(msg.sender, address(this), _aggregatorBond);
    }

    /// @inheritdoc IDisputeCallback
    /// @dev The loser's bond: `challengerRewardBps` of it to the winner, the rest to the jackpot.
    ///      The challenger's bond comes back if it won; the aggregator's stays with its aggregate
    ///      (credited at finalization) if it won.
    function onDisputeResolved(uint256 gameId, uint256 unitId, bool challengerWon) external {
        if (msg.sender != address(_game)) revert NotArbiter(msg.sender);
        // The game's unit id names the job and round (aggregationUnitId). A round is Disputed by
        // one game at a time (no challenge while Disputed), which resolves once, and nothing
        // else moves a round out of Disputed: a Disputed round's result is its open game's.
        uint256 jobId = JobIds.jobOf(unitId);
        uint32 r = uint32(JobIds.indexOf(unitId));
        Round storage round = _rounds[jobId][r];
        if (round.status != RoundStatus.Disputed) revert UnknownGame(gameId, unitId);
        address challenger = round.challenger;
        address aggregator = round.aggregator;
        round.challenger = address(0);
        uint256 share = MarketMath.share(_aggregatorBond, _challengerRewardBps);
        if (challengerWon) {
            _reopenAggregation(jobId, r);
            emit AggregateDisputeResolved(jobId, r, gameId, true, 0);
            _credit(challenger, uint256(_aggregatorBond) + share); // its bond back, and the reward
        } else {
            uint64 deadline = uint64(block.timestamp) + _aggregationWindow;
            if (deadline < round.deadline) deadline = round.deadline;
            round.status = RoundStatus.Committed;
            round.deadline = deadline;
            emit AggregateDisputeResolved(jobId, r, gameId, false, deadline);
            _credit(aggregator, share);
        }
        _addJackpot(_aggregatorBond - share);
    }

    // ------------------------------------------------------------------ withheld aggregates

    /// @inheritdoc IRoundManager
    function requestAggregateReveal(
        uint256 jobId,
        StateLayout calldata stateLayout,
        uint256 tensor,
        bytes32 dataRoot,
        bytes32[] calldata listProof,
        bytes32[] calldata leaves
    ) external nonReentrant {
        Job storage job = _version2(jobId);
        uint32 r = job.currentRound;
        Round storage round = _rounds[jobId][r];
        _expectRound(jobId, r, round, RoundStatus.Committed);
        if (block.timestamp > round.deadline) revert ChallengeWindowClosed(jobId, r, round.deadline);
        RevealRequest storage pending = _reveals[jobId][r];
        if (pending.requester != address(0)) revert RevealPending(jobId, r, pending.deadline);
        _checkLayout(job, stateLayout);
        _checkDisputedTensor(round.aggregateRoot, stateLayout, tensor, dataRoot, listProof, leaves);
        uint64 deadline = uint64(block.timestamp) + _aggregationWindow;

        // tensor < numState, the length of a calldata array: 2^32 names would not fit in a block
        _reveals[jobId][r] =
            RevealRequest(msg.sender, deadline, uint32(tensor), dataRoot, keccak256(abi.encode(leaves)));
        emit AggregateRevealRequested(jobId, r, msg.sender, uint32(tensor), dataRoot, leaves, deadline);
        _token.safeTransferFrom(msg.sender, address(this), revealBond());
    }

    /// @inheritdoc IRoundManager
    function revealAggregateLeaf(
        uint256 jobId,
        StateLayout calldata stateLayout,
        bytes32[] calldata leaves,
        bytes32[] calldata requested,
        bytes calldata chunk
    ) external nonReentrant {
        Job storage job = _runningJob(jobId);
        uint32 r = job.currentRound;
        RevealRequest memory req = _reveals[jobId][r];
        if (req.requester == address(0)) revert NoRevealPending(jobId, r);
        if (block.timestamp > req.deadline) revert RevealTooLate(jobId, r, req.deadline);
        uint256 leaf = _revealedLeaf(req, leaves, requested, chunk);
        _checkLayout(job, stateLayout);

        delete _reveals[jobId][r];
        uint64 deadline = _extendWindow(jobId, r);
        emit AggregateLeafRevealed(jobId, r, req.tensor, leaf, leaves, chunk, deadline);
        _settleReveal(jobId, r, req, stateLayout, leaf, chunk);
    }

    /// @dev After a reveal the challenge window ends no earlier than one window from now, so the
    ///      requester has the time to prove an element of the revealed chunk wrong.
    function _extendWindow(uint256 jobId, uint32 r) private returns (uint64 deadline) {
        Round storage round = _rounds[jobId][r];
        deadline = uint64(block.timestamp) + _aggregationWindow;
        if (deadline > round.deadline) round.deadline = deadline;
        else deadline = round.deadline;
    }

    /// @dev Forfeits the request bond to the jackpot, or, if the revealed chunk has a nonzero word
    ///      past the tensor's end, proves the aggregate malformed (no element opening can show
    ///      that: PROTOCOL §3 pads with zero bytes) and slashes it.
    function _settleReveal(
        uint256 jobId,
        uint32 r,
        RevealRequest memory req,
        StateLayout calldata stateLayout,
        uint256 leaf,
        bytes calldata chunk
    ) private {
        uint256 numel = uint256(stateLayout.rows[req.tensor]) * stateLayout.cols[req.tensor];
        (bool padded, uint256 element, uint32 word) = _nonzeroPadding(numel, leaf, chunk);
        if (!padded) {
            // Held, not paid to the aggregator: a cheating aggregator that requested reveals of
            // its own aggregate to stall the round would get its bond back. The bond goes to the
            // jackpot if the aggregate stands and back to the requester if it is overturned, by
            // whichever proof: an aggregator that knows another wrong element of its own and
            // proves that one first no longer costs the requester its bond.
            bytes32 key = _leafKey(jobId, r, req.tensor, leaf);
            if (_revealedTo[key] == address(0)) _revealedTo[key] = req.requester;
            _holdBond(jobId, r, req.requester);
            return;
        }
        address aggregator = _reopenAggregation(jobId, r);
        emit AggregationFraudProven(jobId, r, aggregator, req.requester, req.tensor, element, word, 0);
        _credit(req.requester, revealBond());
        _slashAggregatorBond(req.requester, 0);
    }

    /// @dev Holds an answered request's bond with round `r`'s current aggregate (see
    ///      `_settleReveal`; released by `finalizeRound` or `reclaimRevealBond`).
    function _holdBond(uint256 jobId, uint32 r, address requester) private {
        uint32 attempt = _rounds[jobId][r].attempt;
        bytes32 aggregateKey = _aggregateKey(jobId, r, attempt);
        uint256 bond = revealBond();
        _heldBondOf[aggregateKey][requester] += bond;
        _heldBonds[aggregateKey] += bond;
        _heldBondsTotal += bond;
        emit RevealBondHeld(jobId, r, attempt, requester, bond);
    }

    /// @dev Checks a reveal against its request: `requested` are the requester's leaves,
    ///      `leaves` give the committed data root, and `chunk` is the first leaf where they
    ///      differ; returns that leaf's index.
    function _revealedLeaf(
        RevealRequest memory req,
        bytes32[] calldata leaves,
        bytes32[] calldata requested,
        bytes calldata chunk
    ) private pure returns (uint256 leaf) {
        bytes32 requestedHash = keccak256(abi.encode(requested));
        if (requestedHash != req.leavesHash) revert RootMismatch(req.leavesHash, requestedHash);
        if (leaves.length != requested.length) revert LengthMismatch(requested.length, leaves.length);
        bytes32 revealedRoot = TensorMerkle.treeRoot(leaves);
        if (revealedRoot != req.dataRoot) revert RootMismatch(req.dataRoot, revealedRoot);
        // The roots differ (checked at the request), so some leaf differs before the end.
        while (leaves[leaf] == requested[leaf]) ++leaf;
        bytes32 chunkHash = TensorMerkle.leafHash(chunk);
        if (chunkHash != leaves[leaf]) revert RootMismatch(leaves[leaf], chunkHash);
    }

    /// @inheritdoc IRoundManager
    function claimAggregateWithheld(uint256 jobId) external nonReentrant {
        uint32 r = _runningJob(jobId).currentRound;
        RevealRequest memory req = _reveals[jobId][r];
        if (req.requester == address(0)) revert NoRevealPending(jobId, r);
        if (block.timestamp <= req.deadline) revert RevealWindowOpen(jobId, r, req.deadline);
        address aggregator = _reopenAggregation(jobId, r);
        emit AggregateWithheld(jobId, r, aggregator, req.requester);
        _credit(req.requester, revealBond());
        _slashAggregatorBond(req.requester, 0);
    }

    /// @inheritdoc IRoundManager
    function reclaimRevealBond(uint256 jobId, uint256 round, uint256 attempt) external nonReentrant {
        // An aggregate is overturned exactly when its round's attempt moves past it
        // (_reopenAggregation); one that stood leaves its round Final at its own attempt.
        if (attempt >= _rounds[jobId][round].attempt) revert AggregateNotOverturned(jobId, round, attempt);
        bytes32 aggregateKey = _aggregateKey(jobId, round, attempt);
        uint256 amount = _heldBondOf[aggregateKey][msg.sender];
        if (amount == 0) revert NoBondHeld(jobId, round, attempt, msg.sender);
        delete _heldBondOf[aggregateKey][msg.sender];
        _heldBonds[aggregateKey] -= amount;
        _heldBondsTotal -= amount;
        // both fit: attempt is below the round's uint32 attempt counter, which is 0 (and so
        // reverted above) for every round index past the job's uint32 round count
        emit RevealBondReturned(jobId, uint32(round), uint32(attempt), msg.sender, amount);
        _credit(msg.sender, amount);
    }

    /// @inheritdoc IRoundManager
    function withdraw() external nonReentrant {
        uint256 amount = _credits.take(msg.sender);
        if (amount == 0) revert NothingToWithdraw(msg.sender);
        emit Withdrawn(msg.sender, amount);
        _token.safeTransfer(msg.sender, amount);
    }

    /// @inheritdoc IRoundManager
    function flushJackpot() external nonReentrant {
        uint256 amount = _jackpot;
        if (amount == 0) revert NothingToFlush();
        _jackpot = 0;
        emit JackpotFlushed(amount);
        // The manager (fixed at deployment) pulls exactly `amount` into its jackpot.
        _token.forceApprove(address(_manager), amount);
        _manager.fundJackpot(amount);
    }

    // ------------------------------------------------------------------ views

    /// @inheritdoc IRoundManager
    function jobManager() external view returns (address) {
        return address(_manager);
    }

    /// @inheritdoc IRoundManager
    function token() external view returns (address) {
        return address(_token);
    }

    /// @inheritdoc IRoundManager
    function config() external view returns (Config memory) {
        return Config(_aggregationWindow, _aggregatorBond, _challengerRewardBps);
    }

    /// @inheritdoc IRoundManager
    function jobCount() external view returns (uint256) {
        return _jobCount;
    }

    /// @inheritdoc IRoundManager
    function getJob(uint256 jobId) external view returns (Job memory) {
        return _jobs[jobId];
    }

    /// @inheritdoc IRoundManager
    function getRound(uint256 jobId, uint256 round) external view returns (Round memory) {
        return _rounds[jobId][round];
    }

    /// @inheritdoc IRoundManager
    function globalRoot(uint256 jobId, uint256 round) external view returns (bytes32) {
        return _globalRoots[jobId][round];
    }

    /// @inheritdoc IRoundManager
    function unitStartRoot(uint256 jobId, uint256 round) external view returns (bytes32) {
        return _unitStartRoots[jobId][round];
    }

    /// @inheritdoc IRoundManager
    function game() external view returns (address) {
        return address(_game);
    }

    /// @inheritdoc IRoundManager
    function aggregationUnitId(uint256 jobId, uint256 round) public pure returns (uint256) {
        // The game reads the config of jobOf(unitId) = jobId, registered at posting.
        return JobIds.unitId(jobId, round);
    }

    /// @inheritdoc IRoundManager
    function unitJobOf(uint256 jobId, uint256 round, uint256 shard) external view returns (uint256) {
        return _unitJobs[jobId][round][shard];
    }

    /// @inheritdoc IRoundManager
    function unitOf(uint256 unitJobId) external view returns (uint256 jobId, uint32 round, uint32 shard) {
        UnitRef memory ref = _unitRefs[unitJobId];
        return (ref.jobId, ref.round, ref.shard);
    }

    /// @inheritdoc IRoundManager
    function unitSpecHash(bytes32 specHash, uint256 round, uint256 shard) public pure returns (bytes32) {
        return keccak256(abi.encode(UNIT_DOMAIN, specHash, round, shard));
    }

    /// @inheritdoc IRoundManager
    function credits(address account) external view returns (uint256) {
        return _credits.owed(account);
    }

    /// @inheritdoc IRoundManager
    function revealRequestOf(uint256 jobId, uint256 round) external view returns (RevealRequest memory) {
        return _reveals[jobId][round];
    }

    /// @inheritdoc IRoundManager
    function heldBondOf(uint256 jobId, uint256 round, uint256 attempt, address requester)
        external
        view
        returns (uint256)
    {
        return _heldBondOf[_aggregateKey(jobId, round, attempt)][requester];
    }

    /// @inheritdoc IRoundManager
    function heldBonds(uint256 jobId, uint256 round, uint256 attempt) external view returns (uint256) {
        return _heldBonds[_aggregateKey(jobId, round, attempt)];
    }

    /// @inheritdoc IRoundManager
    function heldBondsTotal() external view returns (uint256) {
        return _heldBondsTotal;
    }

    /// @inheritdoc IRoundManager
    function revealBond() public view returns (uint256) {
        return MarketMath.share(_aggregatorBond, REVEAL_BOND_BPS);
    }

    /// @inheritdoc IRoundManager
    function jackpot() external view returns (uint256) {
        return _jackpot;
    }

    // ------------------------------------------------------------------ internal

    function _runningJob(uint256 jobId) private view returns (Job storage job) {
        job = _jobs[jobId];
        if (job.status == JobStatus.None) revert UnknownJob(jobId);
        if (job.status != JobStatus.Running) revert JobNotRunning(jobId);
    }

    /// @dev A running version-2 job (element proofs and reveal requests are version 2's).
    function _version2(uint256 jobId) private view returns (Job storage job) {
        job = _runningJob(jobId);
        if (job.params.aggregationConfigHash != bytes32(0)) revert AggregatedByGraph(jobId);
    }

    function _expectRound(uint256 jobId, uint256 r, Round storage round, RoundStatus expected) private view {
        if (round.status != expected) revert WrongRoundStatus(jobId, r, expected, round.status);
    }

    /// @dev The stateLayout hashes to the job's and its arrays have one length. (Its shapes are the
    ///      submitter's word; a unit whose state does not fit them cannot be opened, and a
    ///      wrong stateLayout makes every aggregate root differ from the units' honest G_{r+1}.)
    function _checkLayout(Job storage job, StateLayout calldata stateLayout) private view {
        bytes32 h = keccak256(abi.encode(stateLayout));
        if (h != job.params.layoutHash) revert LayoutMismatch(job.params.layoutHash, h);
        uint256 n = stateLayout.names.length;
        if (n == 0) revert LengthMismatch(1, 0);
        if (stateLayout.rows.length != n) revert LengthMismatch(n, stateLayout.rows.length);
        if (stateLayout.cols.length != n) revert LengthMismatch(n, stateLayout.cols.length);
    }

    /// @dev The state root of an aggregate given as data roots under the job's layout, and that
    ///      of its step state (version 3: the first `numStep` tensors; version 2: the same).
    function _aggregateRoots(Job storage job, StateLayout calldata stateLayout, bytes32[] calldata dataRoots)
        private
        view
        returns (bytes32 root, bytes32 stepRoot)
    {
        _checkLayout(job, stateLayout);
        uint256 n = stateLayout.names.length;
        if (dataRoots.length != n) revert LengthMismatch(n, dataRoots.length);
        uint256 numStep = job.params.numStep;
        if (numStep > n) revert InvalidStepCount(numStep, n);
        bytes32[] memory entries = new bytes32[](n);
        for (uint256 i = 0; i < n; ++i) {
            uint256 rows = stateLayout.rows[i];
            uint256 cols = stateLayout.cols[i];
            bytes32 t = TensorMerkle.tensorRoot(TensorMerkle.DTYPE_F32, rows, cols, dataRoots[i]);
            entries[i] = keccak256(abi.encode(stateLayout.names[i], t));
        }
        root = TensorMerkle.listRootOf(TensorMerkle.STATE_DOMAIN, entries);
        if (numStep == 0 || numStep == n) return (root, root);
        assembly ("memory-safe") {
            mstore(entries, numStep) // the first numStep entries, in place (numStep < n)
        }
        stepRoot = TensorMerkle.listRootOf(TensorMerkle.STATE_DOMAIN, entries);
    }

    /// @dev Reverts UnitNotFinalized unless every unit job of round `r` is completed; with
    ///      `listed` (version 3) returns U_r, the root list of their final state roots (the
    ///      agreed inputs of the aggregation claim), else zero.
    function _unitsRoot(uint256 jobId, uint256 r, uint256 shards, bool listed) private view returns (bytes32) {
        bytes32[] memory finals = new bytes32[](shards);
        for (uint256 s = 0; s < shards; ++s) {
            uint256 unitJobId = _unitJobs[jobId][r][s];
            if (_manager.getJob(unitJobId).status != IJobManager.JobStatus.Completed) {
                revert UnitNotFinalized(jobId, r, s, unitJobId);
            }
            if (listed) finals[s] = _manager.getUnit(JobIds.unitId(unitJobId, 0)).finalStateRoot;
        }
        return listed ? _reference.unitsRoot(finals) : bytes32(0);
    }

    /// @dev Checks a fraud proof's openings against the round's committed aggregate and the
    ///      units' final roots; returns the committed element and the recomputed one.
    function _recompute(
        uint256 jobId,
        uint32 r,
        StateLayout calldata stateLayout,
        uint256 tensor,
        uint256 element,
        ElementOpening[] calldata units,
        ElementOpening calldata aggregate
    ) private view returns (uint32 claimed, uint32 computed) {
        Job storage job = _jobs[jobId];
        Round storage round = _rounds[jobId][r];
        _expectRound(jobId, r, round, RoundStatus.Committed);
        if (block.timestamp > round.deadline) revert ChallengeWindowClosed(jobId, r, round.deadline);
        _checkLayout(job, stateLayout);
        if (tensor >= stateLayout.names.length) revert TensorOutOfRange(tensor, stateLayout.names.length);
        uint256 shards = job.params.shards;
        if (units.length != shards) revert LengthMismatch(shards, units.length);
        uint32[] memory inputs = _unitInputs(jobId, r, stateLayout, tensor, element, units);
        claimed = _open(round.aggregateRoot, stateLayout, tensor, element, aggregate, shards);
        computed = _reference.recompute(inputs, _reference.weights(job.params.numExamples, shards));
    }

    /// @dev Splits the slashed aggregator bond: `challengerRewardBps` plus `refund` (at most the
    ///      whole bond) to `challenger`, the rest to the jackpot.
    function _slashAggregatorBond(address challenger, uint256 refund) private {
        uint256 paid = MarketMath.share(_aggregatorBond, _challengerRewardBps) + refund;
        if (paid > _aggregatorBond) paid = _aggregatorBond;
        _credit(challenger, paid);
        _addJackpot(_aggregatorBond - paid);
    }

    /// @dev Names aggregate `attempt` of round `r` of job `jobId`.
    function _aggregateKey(uint256 jobId, uint256 r, uint256 attempt) private pure returns (bytes32) {
        return keccak256(abi.encode(jobId, r, attempt));
    }

    /// @dev Names leaf `leaf` of tensor `tensor` of round `r`'s current aggregate (its attempt).
    function _leafKey(uint256 jobId, uint32 r, uint256 tensor, uint256 leaf) private view returns (bytes32) {
        return keccak256(abi.encode(jobId, r, _rounds[jobId][r].attempt, tensor, leaf));
    }

    /// @dev Checks that `dataRoot` is tensor `tensor`'s data root in the state `root` and that
    ///      `leaves` (one per leaf of the tensor) give another data root.
    function _checkDisputedTensor(
        bytes32 root,
        StateLayout calldata stateLayout,
        uint256 tensor,
        bytes32 dataRoot,
        bytes32[] calldata listProof,
        bytes32[] calldata leaves
    ) private pure {
        uint256 numState = stateLayout.names.length;
        if (tensor >= numState) revert TensorOutOfRange(tensor, numState);
        uint256 rows = stateLayout.rows[tensor];
        uint256 cols = stateLayout.cols[tensor];
        bytes32 tensorRoot = TensorMerkle.tensorRoot(TensorMerkle.DTYPE_F32, rows, cols, dataRoot);
        bytes32 entry = keccak256(abi.encode(stateLayout.names[tensor], tensorRoot));
        if (!TensorMerkle.verifyListEntry(root, TensorMerkle.STATE_DOMAIN, numState, tensor, entry, listProof)) {
            revert InvalidTensorProof(tensor);
        }
        uint256 numLeaves = TensorMerkle.leafCount(rows * cols);
        if (leaves.length != numLeaves) revert LengthMismatch(numLeaves, leaves.length);
        if (TensorMerkle.treeRoot(leaves) == dataRoot) revert TensorNotDisputed(tensor, dataRoot);
    }

    /// @dev The first nonzero word past the tensor's last element in its last leaf, if `leaf` is
    ///      that leaf (the padding of PROTOCOL §3 is zero bytes).
    function _nonzeroPadding(uint256 numel, uint256 leaf, bytes calldata chunk)
        private
        pure
        returns (bool padded, uint256 element, uint32 word)
    {
        uint256 first = leaf * TensorMerkle.LEAF_ELEMS;
        for (uint256 e = numel > first ? numel : first; e < first + TensorMerkle.LEAF_ELEMS; ++e) {
            word = TensorMerkle.elementAt(chunk, e - first);
            if (word != 0) return (true, e, word);
        }
        return (false, 0, 0);
    }

    /// @dev Bars the round's aggregator from it and re-opens aggregation; returns the aggregator.
    ///      A pending reveal request is cleared (the caller settles its bond).
    function _reopenAggregation(uint256 jobId, uint32 r) private returns (address aggregator) {
        delete _reveals[jobId][r];
        Round storage round = _rounds[jobId][r];
        aggregator = round.aggregator;
        _barred[jobId][r][aggregator] = true;
        round.status = RoundStatus.Training;
        round.attempt += 1;
        round.deadline = 0;
        round.aggregator = address(0);
        round.aggregateRoot = bytes32(0);
        round.nextUnitRoot = bytes32(0);
        round.unitsRoot = bytes32(0);
    }

    /// @dev The S units' element `element` of tensor `tensor`, opened against their finalized
    ///      state roots (the agreed inputs of the aggregation).
    function _unitInputs(
        uint256 jobId,
        uint256 r,
        StateLayout calldata stateLayout,
        uint256 tensor,
        uint256 element,
        ElementOpening[] calldata units
    ) private view returns (uint32[] memory inputs) {
        uint256 shards = units.length;
        inputs = new uint32[](shards);
        for (uint256 s = 0; s < shards; ++s) {
            uint256 unitId = JobIds.unitId(_unitJobs[jobId][r][s], 0);
            bytes32 unitRoot = _manager.getUnit(unitId).finalStateRoot;
            inputs[s] = _open(unitRoot, stateLayout, tensor, element, units[s], s);
        }
    }

    /// @dev Opens element `element` of tensor `tensor` in the state `root`; reverts
    ///      InvalidOpening(shard) if the proof fails (shard = S for the aggregate).
    function _open(
        bytes32 root,
        StateLayout calldata stateLayout,
        uint256 tensor,
        uint256 element,
        ElementOpening calldata o,
        uint256 shard
    ) private view returns (uint32 value) {
        bool ok;
        (ok, value) = _reference.openElement(root, stateLayout, tensor, element, o);
        if (!ok) revert InvalidOpening(shard);
    }

    /// @dev Posts the S unit jobs of round `r` from G_r into the job manager and registers them.
    function _postRound(uint256 jobId, Job storage job, uint32 r) private {
        JobParams storage p = job.params;
        uint256 shards = p.shards;
        uint96 reward = p.unitReward;
        IJobManager.JobParams memory unit = IJobManager.JobParams({
            specHash: bytes32(0),
            datasetRoot: p.datasetRoot,
            initialStateRoot: _unitStartRoots[jobId][r],
            steps: p.localSteps,
            checkpointInterval: p.checkpointInterval,
            required: p.required,
            reward: reward,
            verificationFee: p.verificationFee,
            claimDeadline: uint64(block.timestamp) + _manager.config().claimWindow,
            computeTime: p.computeTime,
            // registered with the game below, with the unit's placement (PROTOCOL §6.9)
            configHash: bytes32(0)
        });
        IDisputeGame arbiter = IDisputeGame(_manager.arbiter());
        if (address(arbiter) == address(0)) revert ArbiterNotSet();
        job.escrow -= uint128(shards * reward);
        _rounds[jobId][r].status = RoundStatus.Training;
        _token.forceApprove(address(_manager), shards * reward);
        for (uint256 s = 0; s < shards; ++s) {
            unit.specHash = unitSpecHash(p.specHash, r, s);
            // The job manager is trusted and nonReentrant; the ids are recorded right after.
            uint256 unitJobId = _manager.postJob(unit);
            _unitJobs[jobId][r][s] = unitJobId;
            _unitRefs[unitJobId] = UnitRef(uint192(jobId), r, uint32(s));
            emit UnitJobPosted(jobId, r, uint32(s), unitJobId, unit.initialStateRoot);
            // The arbiter is the job manager's (trusted, fixed at deployment).
            _registerUnit(arbiter, p, unitJobId, r, uint32(s));
        }
    }

    /// @dev Unit (r, s) is disputed from global step r·k_local with shard s's batches (§4).
    function _registerUnit(IDisputeGame unitGame, JobParams storage p, uint256 unitJobId, uint32 r, uint32 s)
        private
    {
        // r < R and R·k_local < 2^64 (checked at posting), so the product fits.
        uint64 stepOffset = uint64(uint256(r) * p.localSteps);
        unitGame.registerUnitConfig(unitJobId, p.disputeConfigHash, Placement(stepOffset, p.shards, s));
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
