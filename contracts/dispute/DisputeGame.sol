// SPDX-License-Identifier: MIT
pragma solidity 0.8.37;

import {IDisputeArbiter} from "../interfaces/IDisputeArbiter.sol";
import {IJobManager} from "../interfaces/IJobManager.sol";
import {JobIds} from "../libraries/JobIds.sol";
import {IDisputeGame} from "./interfaces/IDisputeGame.sol";
import {IOneStepProver} from "./interfaces/IOneStepProver.sol";
import {
    Clock,
    Phase,
    Side,
    DisputeConfig,
    Opening,
    Placement,
    ProofContext,
    StateConfigEntry
} from "./lib/DisputeTypes.sol";
import {Clocks} from "./lib/Clocks.sol";
import {Positions} from "./lib/Positions.sol";
import {DisputeMerkle} from "./lib/DisputeMerkle.sol";
import {Spans} from "./lib/Spans.sol";
import {Walks} from "./lib/Walks.sol";
import {DisputeGameBase} from "./DisputeGameBase.sol";
import {DisputeGameTrace} from "./DisputeGameTrace.sol";

/// @title DisputeGame — the Truebit-style arbiter of the protocol (docs/PROTOCOL.md §7)
/// @notice Narrows a disputed claim "state root A at step t0, `steps` steps later (checkpoints
///         every `interval` steps) the state is B" down to one element of one operator of one
///         step, in at most 10 moves, and recomputes that element on chain through the one-step
///         prover; an element of a long reduction is narrowed further, to one step of its
///         accumulator chain, in 2·ceil(log_16(K + 1)) + 1 more moves (PROTOCOL §7.10).
///         Implements the job manager's dispute hook (`IDisputeArbiter`) and reports the
///         result through `IDisputeCallback.onDisputeResolved`. It holds no money: bonds and
///         stakes live with the job manager and registry (PROTOCOL §6.6).
/// @dev Storage and the rules every move shares are in `DisputeGameBase`; the trace phase
///      (postTrace … pickNode, the walk down a large trace, proveProducer) runs on this storage
///      from the `DisputeGameTrace` it creates, by DELEGATECALL (`_delegate`), so that the whole
///      fits the 24 KiB code size limit.
contract DisputeGame is DisputeGameBase, IDisputeArbiter, IDisputeGame {
    using Clocks for Clock;

    /// @notice Each side's chess-clock budget for a whole game, in seconds.
    uint64 public immutable clockBudget;
    /// @notice Whether only the manager registers configs: true for the attestation court's
    ///         game, which takes each job's config from the job manager's game at the first
    ///         challenge (so a submitter cannot pick it after the verifiers attested, §6.8);
    ///         false for the job manager's game, where the job's submitter registers it.
    bool public immutable managerRegistersOnly;
    /// @dev The trace phase's code (`DisputeGameTrace`, created here), run on this storage.
    address private immutable _trace;

    /// @dev Creates its own DisputeGameTrace, so that no deployment step changes.
    constructor(address manager_, IOneStepProver prover_, uint64 clockBudget_, bool managerRegistersOnly_)
        DisputeGameBase(manager_, prover_)
    {
        clockBudget = clockBudget_;
        managerRegistersOnly = managerRegistersOnly_;
        _trace = address(new DisputeGameTrace(manager_, prover_));
    }

    // =========================================================================== opening

    /// @inheritdoc IDisputeGame
    /// @dev Adapter until the job manager carries the config hash itself (PROTOCOL §7.2, §7.9):
    ///      only the job's submitter (read from the manager) may register it, once.
    function registerConfig(uint256 jobId, bytes32 configHash) external {
        _register(jobId, configHash);
        emit ConfigRegistered(jobId, configHash, msg.sender);
    }

    /// @inheritdoc IDisputeGame
    /// @dev The submitter of a unit job is its round manager, which calls this when it posts the
    ///      unit; the placement is as trusted as the config hash (parties check both, §7.2).
    function registerUnitConfig(uint256 jobId, bytes32 configHash, Placement calldata placement)
        external
    {
        if (placement.shards == 0) revert InvalidPlacement(placement.shards, placement.shard);
        if (placement.shard >= placement.shards) {
            revert InvalidPlacement(placement.shards, placement.shard);
        }
        _register(jobId, configHash);
        _placements[jobId] = placement;
        emit UnitConfigRegistered(
            jobId,
            configHash,
            msg.sender,
            placement.stepOffset,
            placement.shards,
            placement.shard
        );
    }

    function _register(uint256 jobId, bytes32 configHash) internal {
        if (managerRegistersOnly) {
            // The attestation court copies what the submitter registered with the job manager's
            // game (AttestationCourt._adoptConfig, PROTOCOL §6.8); nobody else registers here.
            if (msg.sender != manager) revert NotManager(msg.sender);
        } else {
            IJobManager.Job memory job = IJobManager(manager).getJob(jobId);
            if (msg.sender != job.submitter) revert NotSubmitter(msg.sender, job.submitter);
            // A job posted with its config (PROTOCOL §7.2) has it for good.
            if (job.configHash != bytes32(0)) revert ConfigAlreadyRegistered(jobId, job.configHash);
        }
        bytes32 existing = _configs[jobId];
        if (existing != bytes32(0)) revert ConfigAlreadyRegistered(jobId, existing);
        _configs[jobId] = configHash;
    }

    /// @inheritdoc IDisputeArbiter
    function openGame(GameRequest calldata request) external returns (uint256 gameId) {
        if (msg.sender != manager) revert NotManager(msg.sender);
        // The config posted with the job, else the one registered here (a round manager's unit).
        bytes32 configHash = request.configHash;
        if (configHash == bytes32(0)) configHash = _configOf(request.unitId);
        GameClaim memory c = GameClaim({
            unitId: request.unitId,
            defender: request.solver,
            challenger: request.challenger,
            configHash: configHash,
            datasetRoot: request.datasetRoot,
            initialStateRoot: request.initialStateRoot,
            checkpointRoot: request.checkpointRoot,
            finalStateRoot: request.finalStateRoot,
            stepOffset: 0,
            steps: request.steps,
            interval: request.checkpointInterval
        });
        gameId = _open(c);
    }

    /// @inheritdoc IDisputeGame
    /// @notice Opens a game over one segment claim "from `roots[0]` at step `stepOffset`,
    ///         `steps` steps give `roots[1]`" (a verifier's attestation, defended by the verifier
    ///         against a whistleblower). The checkpoint list is [roots[0], roots[1]].
    function openSegmentGame(
        uint256 unitId,
        address defender,
        address challenger,
        bytes32 datasetRoot,
        uint64 stepOffset,
        uint64 steps,
        bytes32[2] calldata roots
    ) external returns (uint256 gameId) {
        if (msg.sender != manager) revert NotManager(msg.sender);
        bytes32 configHash = _configOf(unitId);
        bytes32[] memory cps = new bytes32[](2);
        cps[0] = roots[0];
        cps[1] = roots[1];
        GameClaim memory c = GameClaim({
            unitId: unitId,
            defender: defender,
            challenger: challenger,
            configHash: configHash,
            datasetRoot: datasetRoot,
            initialStateRoot: roots[0],
            checkpointRoot: DisputeMerkle.rootList(DisputeMerkle.CHECKPOINT_DOMAIN, cps),
            finalStateRoot: roots[1],
            stepOffset: stepOffset,
            steps: steps,
            interval: steps
        });
        gameId = _open(c);
    }

    function _configOf(uint256 unitId) internal view returns (bytes32 configHash) {
        uint256 jobId = JobIds.jobOf(unitId);
        configHash = _configs[jobId];
        if (configHash == bytes32(0)) revert ConfigNotRegistered(jobId);
    }

    function _open(GameClaim memory c) internal returns (uint256 gameId) {
        if (c.interval == 0 || c.steps == 0 || c.steps % c.interval != 0) {
            revert InvalidClaim(c.steps, c.interval);
        }
        gameId = Positions.nextId(gameCount);
        gameCount = gameId;
        _claims[gameId] = c;
        GameProgress storage p = _progress[gameId];
        bool oneSegment = Positions.segments(c.steps, c.interval) == 1;
        p.phase = oneSegment ? Phase.OpenSegment : Phase.PostCheckpoints;
        p.defenderClock = Clocks.wrap(clockBudget, uint64(block.timestamp));
        p.challengerClock = Clocks.wrap(clockBudget, 0);
        emit GameOpened(
            gameId,
            c.unitId,
            c.defender,
            c.challenger,
            c.checkpointRoot,
            c.stepOffset,
            c.steps,
            c.interval
        );
    }

    // =========================================================================== moves

    /// @inheritdoc IDisputeGame
    /// @dev Publishes the whole list (data availability for the challenger's choice) and checks
    ///      it against the committed root (which binds the count T / k + 1), the job's initial
    ///      state and the defender's final state root. A defender that cannot loses on time.
    function postCheckpoints(uint256 gameId, bytes32[] calldata roots) external {
        (GameClaim storage c, GameProgress storage p) = _move(gameId, Phase.PostCheckpoints);
        uint256 n = Positions.segments(c.steps, c.interval) + 1;
        if (roots.length != n) revert LengthMismatch(n, roots.length);
        if (roots[0] != c.initialStateRoot) revert RootMismatch(c.initialStateRoot, roots[0]);
        if (roots[n - 1] != c.finalStateRoot) revert RootMismatch(c.finalStateRoot, roots[n - 1]);
        bytes32 root = DisputeMerkle.rootList(DisputeMerkle.CHECKPOINT_DOMAIN, roots);
        if (root != c.checkpointRoot) revert RootMismatch(c.checkpointRoot, root);
        _advance(p, Phase.PickSegment);
        emit CheckpointsPosted(gameId, roots);
    }

    /// @inheritdoc IDisputeGame
    function pickSegment(
        uint256 gameId,
        uint64 segment,
        ListEntry calldata start,
        ListEntry calldata end
    ) external {
        (GameClaim storage c, GameProgress storage p) = _move(gameId, Phase.PickSegment);
        uint256 n = Positions.segments(c.steps, c.interval);
        if (segment >= n) revert IndexOutOfRange(segment, n);
        bytes32 cpRoot = c.checkpointRoot;
        bytes32 dom = DisputeMerkle.CHECKPOINT_DOMAIN;
        if (!DisputeMerkle.verifyListEntry(cpRoot, dom, n + 1, segment, start.value, start.proof)) {
            revert InvalidProof("checkpoint.start");
        }
        if (!DisputeMerkle.verifyListEntry(cpRoot, dom, n + 1, segment + 1, end.value, end.proof)) {
            revert InvalidProof("checkpoint.end");
        }
        p.segment = segment;
        p.agreedRoot = start.value;
        p.disputedRoot = end.value;
        _advance(p, Phase.OpenSegment);
        emit SegmentPicked(gameId, segment, start.value, end.value);
    }

    /// @inheritdoc IDisputeGame
    /// @dev With one segment the checkpoint list must be [initial, final] (checked here); with
    ///      several, `pickSegment` fixed the segment's two roots.
    function openSegment(uint256 gameId, bytes32[] calldata intermediateRoots) external {
        (GameClaim storage c, GameProgress storage p) = _move(gameId, Phase.OpenSegment);
        if (Positions.segments(c.steps, c.interval) == 1) _checkOneSegment(c, p);
        uint256 k = c.interval;
        if (intermediateRoots.length != k - 1) revert LengthMismatch(k - 1, intermediateRoots.length);
        bytes32 startRoot = p.agreedRoot;
        bytes32 endRoot = p.disputedRoot;
        if (k == 1) {
            _advance(p, Phase.PostTrace);
        } else {
            p.listRoot = _stepList(startRoot, intermediateRoots, endRoot);
            _advance(p, Phase.PickStep);
        }
        emit SegmentOpened(gameId, p.segment, startRoot, endRoot, intermediateRoots);
    }

    /// @inheritdoc IDisputeGame
    function pickStep(
        uint256 gameId,
        uint64 step,
        ListEntry calldata before,
        ListEntry calldata after_
    ) external {
        (GameClaim storage c, GameProgress storage p) = _move(gameId, Phase.PickStep);
        uint256 k = c.interval;
        if (step >= k) revert IndexOutOfRange(step, k);
        bytes32 dom = DisputeMerkle.STEPS_DOMAIN;
        bytes32 list = p.listRoot;
        if (!DisputeMerkle.verifyListEntry(list, dom, k + 1, step, before.value, before.proof)) {
            revert InvalidProof("step.before");
        }
        if (!DisputeMerkle.verifyListEntry(list, dom, k + 1, step + 1, after_.value, after_.proof)) {
            revert InvalidProof("step.after");
        }
        p.step = step;
        p.agreedRoot = before.value;
        p.disputedRoot = after_.value;
        _advance(p, Phase.PostTrace);
        emit StepPicked(gameId, step, before.value, after_.value);
    }

    /// @inheritdoc IDisputeGame
    function postTrace(
        uint256,
        bytes32[] calldata,
        bytes32[] calldata,
        uint32[] calldata,
        DisputeConfig calldata
    ) external {
        _delegate();
    }

    /// @inheritdoc IDisputeGame
    function postTraceRoot(uint256, bytes32[] calldata, bytes32[] calldata, DisputeConfig calldata)
        external
    {
        _delegate();
    }

    /// @inheritdoc IDisputeGame
    function pickTraceSubtree(uint256, uint8, bytes32[] calldata) external {
        _delegate();
    }

    /// @inheritdoc IDisputeGame
    function postTraceSubtree(uint256, bytes32[] calldata) external {
        _delegate();
    }

    /// @inheritdoc IDisputeGame
    function pickStateSubtree(uint256, uint8, bytes32[] calldata, DisputeConfig calldata)
        external
    {
        _delegate();
    }

    /// @inheritdoc IDisputeGame
    function postStateSubtree(uint256, bytes32[] calldata, DisputeConfig calldata) external {
        _delegate();
    }

    /// @inheritdoc IDisputeGame
    function pickNode(
        uint256,
        uint32,
        bytes32,
        bytes32[] calldata,
        bytes calldata,
        bytes32[] calldata,
        DisputeConfig calldata
    ) external {
        _delegate();
    }

    /// @inheritdoc IDisputeGame
    function proveProducer(
        uint256,
        uint32,
        StateConfigEntry calldata,
        ListEntry calldata,
        ListEntry calldata,
        DisputeConfig calldata
    ) external {
        _delegate();
    }

    /// @inheritdoc IDisputeGame
    function postLeaves(uint256 gameId, bytes32[] calldata leaves) external {
        (, GameProgress storage p) = _move(gameId, Phase.PostLeaves);
        uint256 numLeaves = Positions.leafCount(uint256(p.rows) * uint256(p.cols));
        if (leaves.length != numLeaves) revert LengthMismatch(numLeaves, leaves.length);
        bytes32 dataRoot = DisputeMerkle.treeRootCalldata(leaves);
        bytes32 root = DisputeMerkle.tensorRoot(p.dtype, p.rows, p.cols, dataRoot);
        if (root != p.nodeRoot) revert RootMismatch(p.nodeRoot, root);
        p.dataRoot = dataRoot;
        if (numLeaves == 1) {
            p.leaf = 0;
            p.leafHash = leaves[0];
            _advance(p, Phase.RevealChunk);
        } else {
            _advance(p, Phase.PickLeaf);
        }
        emit LeavesPosted(gameId, p.node, dataRoot, leaves);
    }

    /// @inheritdoc IDisputeGame
    function pickLeaf(uint256 gameId, uint32 leaf, bytes32 leafHash, bytes32[] calldata siblings)
        external
    {
        (, GameProgress storage p) = _move(gameId, Phase.PickLeaf);
        uint256 numLeaves = Positions.leafCount(uint256(p.rows) * uint256(p.cols));
        if (leaf >= numLeaves) revert IndexOutOfRange(leaf, numLeaves);
        if (!DisputeMerkle.verifyLeaf(p.dataRoot, numLeaves, leaf, leafHash, siblings)) {
            revert InvalidProof("tensor.leaf");
        }
        p.leaf = leaf;
        p.leafHash = leafHash;
        _advance(p, Phase.RevealChunk);
        emit LeafPicked(gameId, leaf, leafHash);
    }

    /// @inheritdoc IDisputeGame
    function postSubtree(uint256 gameId, bytes32[] calldata nodes) external {
        (, GameProgress storage p) = _move(gameId, Phase.PostLeaves);
        uint256 numLeaves = Positions.leafCount(uint256(p.rows) * uint256(p.cols));
        // INVARIANT: tensors of up to POST_LEAVES leaves are posted whole (postLeaves).
        if (numLeaves <= Walks.POST_LEAVES) revert NotAWalk(numLeaves);
        bytes32 root = Walks.rootOf(nodes);
        if (p.walkRoot == bytes32(0)) {
            // The first round: the whole leaf tree, whose root the header must turn into the
            // node's root (as postLeaves checks).
            bytes32 tRoot = DisputeMerkle.tensorRoot(p.dtype, p.rows, p.cols, root);
            if (tRoot != p.nodeRoot) revert RootMismatch(p.nodeRoot, tRoot);
            p.dataRoot = root;
            p.walkRoot = root;
            p.walkHeight = uint8(Positions.depth(numLeaves));
        } else if (root != p.walkRoot) {
            revert RootMismatch(p.walkRoot, root);
        }
        uint256 stride = Walks.stride(p.walkHeight);
        uint256 width = uint256(1) << stride;
        if (nodes.length != width) revert LengthMismatch(width, nodes.length);
        _advance(p, Phase.PickLeaf);
        emit SubtreePosted(gameId, uint8(p.walkHeight - stride), p.walkIndex << stride, nodes);
    }

    /// @inheritdoc IDisputeGame
    function pickSubtree(uint256 gameId, uint8 child, bytes32[] calldata nodes) external {
        (, GameProgress storage p) = _move(gameId, Phase.PickLeaf);
        bytes32 parent = p.walkRoot;
        uint256 numLeaves = Positions.leafCount(uint256(p.rows) * uint256(p.cols));
        // INVARIANT: a walk was started by postSubtree (after postLeaves, pickLeaf names a leaf).
        if (parent == bytes32(0)) revert NotAWalk(numLeaves);
        uint256 stride = Walks.stride(p.walkHeight);
        uint256 width = uint256(1) << stride;
        if (nodes.length != width) revert LengthMismatch(width, nodes.length);
        bytes32 root = Walks.rootOf(nodes);
        if (root != parent) revert RootMismatch(parent, root);
        if (child >= width) revert IndexOutOfRange(child, width);
        uint64 index = uint64((uint256(p.walkIndex) << stride) + child);
        uint8 height = uint8(p.walkHeight - stride);
        bytes32 picked = nodes[child];
        p.walkRoot = picked;
        p.walkIndex = index;
        p.walkHeight = height;
        if (height == 0) {
            // INVARIANT: padding leaves are zero on both sides; only a tensor leaf is disputed.
            if (index >= numLeaves) revert IndexOutOfRange(index, numLeaves);
            p.leaf = uint32(index);
            p.leafHash = picked;
            _advance(p, Phase.RevealChunk);
        } else {
            _advance(p, Phase.PostLeaves);
        }
        emit SubtreePicked(gameId, height, index, picked);
    }

    /// @inheritdoc IDisputeGame
    function revealChunk(uint256 gameId, bytes calldata chunk) external {
        (, GameProgress storage p) = _move(gameId, Phase.RevealChunk);
        _checkChunk(p, chunk);
        _advance(p, Phase.ProveElement);
        emit ChunkRevealed(gameId, p.leaf, chunk);
    }

    /// @inheritdoc IDisputeGame
    /// @dev `chunk` is the one the defender revealed; `nodeDesc` the disputed node's descriptor.
    ///      Decisive: the challenger wins iff the recomputed element differs from the defender's.
    function proveElement(
        uint256 gameId,
        uint8 offset,
        bytes calldata chunk,
        bytes calldata nodeDesc,
        DisputeConfig calldata cfg,
        Opening[] calldata openings
    ) external {
        (GameClaim storage c, GameProgress storage p) = _move(gameId, Phase.ProveElement);
        _checkConfig(c, cfg);
        _checkChunk(p, chunk);
        if (offset >= Positions.LEAF_ELEMS) revert IndexOutOfRange(offset, Positions.LEAF_ELEMS);
        _checkDesc(p, nodeDesc);
        uint256 element = Positions.elementIndex(p.leaf, offset);
        uint32 claimed = Positions.word(chunk, offset);
        uint32 correct = _correctValue(c, p, cfg, element, nodeDesc, openings);
        emit ElementProved(gameId, element, claimed, correct);
        _resolve(gameId, c, p, claimed != correct, false);
    }

    /// @inheritdoc IDisputeGame
    function openReduction(uint256 gameId, uint8 offset, bytes calldata chunk, bytes calldata nodeDesc)
        external
    {
        (, GameProgress storage p) = _move(gameId, Phase.ProveElement);
        _checkChunk(p, chunk);
        if (offset >= Positions.LEAF_ELEMS) revert IndexOutOfRange(offset, Positions.LEAF_ELEMS);
        _checkDesc(p, nodeDesc);
        uint256 element = Positions.elementIndex(p.leaf, offset);
        uint256 numel = uint256(p.rows) * uint256(p.cols);
        // INVARIANT: a disputed padding element is proved by proveElement (it must be zero).
        if (element >= numel) revert IndexOutOfRange(element, numel);
        (uint256 terms, uint32 init) = prover.reduction(nodeDesc);
        uint32 claimed = Positions.word(chunk, offset);
        p.element = uint64(element);
        p.lo = 0;
        p.hi = uint64(terms + 1);
        p.loValue = init;
        p.hiValue = claimed;
        _advance(p, Phase.PostAccumulators);
        emit ReductionOpened(gameId, element, terms, init, claimed);
    }

    /// @inheritdoc IDisputeGame
    function postAccumulators(uint256 gameId, uint32[] calldata values) external {
        (, GameProgress storage p) = _move(gameId, Phase.PostAccumulators);
        uint256 cuts = Spans.parts(p.lo, p.hi) - 1;
        if (values.length != cuts) revert LengthMismatch(cuts, values.length);
        p.cutsHash = Spans.commit(values);
        _advance(p, Phase.PickAccumulators);
        emit AccumulatorsPosted(gameId, p.lo, p.hi, values);
    }

    /// @inheritdoc IDisputeGame
    function pickAccumulators(uint256 gameId, uint8 part, uint32[] calldata values) external {
        (, GameProgress storage p) = _move(gameId, Phase.PickAccumulators);
        bytes32 h = Spans.commit(values);
        if (h != p.cutsHash) revert CutsMismatch(p.cutsHash, h);
        uint64 lo = p.lo;
        uint64 hi = p.hi;
        uint256 n = Spans.parts(lo, hi);
        if (part >= n) revert IndexOutOfRange(part, n);
        // The part's ends: the span's own ends, or the defender's posted cut values.
        if (part > 0) p.loValue = values[part - 1];
        if (part + 1 < n) p.hiValue = values[part];
        uint64 newLo = Spans.cut(lo, hi, part, n);
        uint64 newHi = Spans.cut(lo, hi, part + 1, n);
        p.lo = newLo;
        p.hi = newHi;
        _advance(p, newHi - newLo == 1 ? Phase.ProveAccumulation : Phase.PostAccumulators);
        emit AccumulatorsPicked(gameId, part, newLo, newHi, p.loValue, p.hiValue);
    }

    /// @inheritdoc IDisputeGame
    function proveAccumulation(
        uint256 gameId,
        bytes calldata nodeDesc,
        DisputeConfig calldata cfg,
        Opening[] calldata openings
    ) external {
        (GameClaim storage c, GameProgress storage p) = _move(gameId, Phase.ProveAccumulation);
        _checkConfig(c, cfg);
        _checkDesc(p, nodeDesc);
        ProofContext memory ctx = _proofContext(c, p, cfg);
        uint256 e = p.element;
        uint32 correct =
            prover.accumulate(ctx, nodeDesc, e / p.cols, e % p.cols, p.hi, p.loValue, openings);
        uint32 claimed = p.hiValue;
        emit AccumulationProved(gameId, p.hi, p.loValue, claimed, correct);
        _resolve(gameId, c, p, claimed != correct, false);
    }

    /// @inheritdoc IDisputeGame
    function claimTimeout(uint256 gameId) external {
        GameClaim storage c = _claims[gameId];
        GameProgress storage p = _progress[gameId];
        Phase phase = p.phase;
        if (phase == Phase.None) revert UnknownGame(gameId);
        if (phase == Phase.Resolved) revert WrongPhase(gameId, Phase.None, phase);
        Side side = Positions.mover(phase);
        Clock clock = side == Side.Defender ? p.defenderClock : p.challengerClock;
        if (!clock.expired(block.timestamp)) revert ClockNotExpired(gameId, clock.deadline());
        _resolve(gameId, c, p, side == Side.Defender, true);
    }

    // =========================================================================== views

    /// @inheritdoc IDisputeGame
    function configOf(uint256 jobId) external view returns (bytes32 configHash) {
        configHash = _configs[jobId];
        // The job manager's game: a job posted with its config keeps it in the manager's record.
        if (configHash == bytes32(0) && !managerRegistersOnly) {
            configHash = IJobManager(manager).getJob(jobId).configHash;
        }
    }

    /// @inheritdoc IDisputeGame
    function placementOf(uint256 jobId)
        external
        view
        returns (uint64 stepOffset, uint32 shards, uint32 shard)
    {
        Placement storage placement = _placements[jobId];
        return (placement.stepOffset, placement.shards, placement.shard);
    }

    /// @inheritdoc IDisputeGame
    function claimOf(uint256 gameId) external view returns (GameClaim memory) {
        return _claims[gameId];
    }

    /// @inheritdoc IDisputeGame
    function progressOf(uint256 gameId) external view returns (GameProgress memory) {
        return _progress[gameId];
    }

    /// @inheritdoc IDisputeGame
    function turn(uint256 gameId) external view returns (Side side, uint256 deadline) {
        GameProgress storage p = _progress[gameId];
        side = Positions.mover(p.phase);
        if (side == Side.None) return (side, 0);
        Clock clock = side == Side.Defender ? p.defenderClock : p.challengerClock;
        deadline = clock.deadline();
    }

    /// @notice Root list (domain "vtp.steps.v1") of the k + 1 state roots of a segment.
    function stepListRoot(bytes32 startRoot, bytes32[] calldata intermediate, bytes32 endRoot)
        external
        pure
        returns (bytes32)
    {
        return _stepList(startRoot, intermediate, endRoot);
    }

    // =========================================================================== internals

    /// @dev Runs this call's calldata on the trace phase's code and this contract's storage
    ///      (DELEGATECALL: same msg.sender, same storage, the `DisputeGameBase` layout both
    ///      share), and returns or reverts with exactly what it returned. Never returns to its
    ///      caller.
    function _delegate() private {
        address trace = _trace;
        assembly ("memory-safe") {
            // Copy the calldata to free memory; nothing after this returns to Solidity code.
            let ptr := mload(0x40)
            calldatacopy(ptr, 0, calldatasize())
            let ok := delegatecall(gas(), trace, ptr, calldatasize(), 0, 0)
            // Hand back the trace phase's return data (or revert data) as this call's.
            returndatacopy(ptr, 0, returndatasize())
            if iszero(ok) { revert(ptr, returndatasize()) }
            return(ptr, returndatasize())
        }
    }

    function _checkChunk(GameProgress storage p, bytes calldata chunk) internal view {
        if (chunk.length != Positions.LEAF_BYTES) {
            revert LengthMismatch(Positions.LEAF_BYTES, chunk.length);
        }
        bytes32 h = keccak256(chunk);
        if (h != p.leafHash) revert RootMismatch(p.leafHash, h);
    }

    function _checkDesc(GameProgress storage p, bytes calldata nodeDesc) internal view {
        bytes32 descHash = keccak256(nodeDesc);
        if (descHash != p.descHash) revert RootMismatch(p.descHash, descHash);
    }

    function _checkOneSegment(GameClaim storage c, GameProgress storage p) internal {
        bytes32[] memory cps = new bytes32[](2);
        cps[0] = c.initialStateRoot;
        cps[1] = c.finalStateRoot;
        bytes32 root = DisputeMerkle.rootList(DisputeMerkle.CHECKPOINT_DOMAIN, cps);
        if (root != c.checkpointRoot) revert RootMismatch(c.checkpointRoot, root);
        p.agreedRoot = cps[0];
        p.disputedRoot = cps[1];
    }

    function _stepList(bytes32 startRoot, bytes32[] calldata intermediate, bytes32 endRoot)
        internal
        pure
        returns (bytes32)
    {
        uint256 n = intermediate.length + 2;
        bytes32[] memory values = new bytes32[](n);
        values[0] = startRoot;
        for (uint256 i = 0; i < intermediate.length; ++i) {
            values[i + 1] = intermediate[i];
        }
        values[n - 1] = endRoot;
        return DisputeMerkle.rootList(DisputeMerkle.STEPS_DOMAIN, values);
    }

    function _correctValue(
        GameClaim storage c,
        GameProgress storage p,
        DisputeConfig calldata cfg,
        uint256 element,
        bytes calldata nodeDesc,
        Opening[] calldata openings
    ) internal view returns (uint32) {
        uint256 numel = uint256(p.rows) * uint256(p.cols);
        if (element >= numel) return 0; // padding of the last leaf must be zero bytes
        ProofContext memory ctx = _proofContext(c, p, cfg);
        return prover.evaluate(ctx, nodeDesc, element / p.cols, element % p.cols, openings);
    }

    function _proofContext(GameClaim storage c, GameProgress storage p, DisputeConfig calldata cfg)
        internal
        view
        returns (ProofContext memory ctx)
    {
        Placement memory placement = _placements[JobIds.jobOf(c.unitId)];
        ctx = ProofContext({
            stateRoot: p.agreedRoot,
            traceRoot: p.traceRoot,
            datasetRoot: c.datasetRoot,
            numState: cfg.numState,
            numNodes: cfg.numNodes,
            node: p.node,
            step: _globalStep(c, p),
            seed: cfg.seed,
            batchSize: cfg.batchSize,
            numExamples: cfg.numExamples,
            // A version-1 job has no placement: one shard, the whole dataset.
            shards: placement.shards == 0 ? 1 : placement.shards,
            shard: placement.shard
        });
    }
}
