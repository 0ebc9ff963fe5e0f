// SPDX-License-Identifier: MIT
pragma solidity 0.8.37;

import {
    Clock,
    Phase,
    Side,
    DisputeConfig,
    Opening,
    Placement,
    StateConfigEntry
} from "../lib/DisputeTypes.sol";

/// @title IDisputeGame — the moves, errors, events and views of the dispute game
/// @notice Rules in docs/PROTOCOL.md §7. A game disputes a claim "from state root A at step t0,
///         `steps` steps give the roots of a checkpoint list ending in B"; the defender made the
///         claim, the challenger disputes it. Moves alternate; each is checked on chain; a side
///         whose chess clock runs out loses (`claimTimeout`, callable by anyone); the last move
///         recomputes one element of one operator on chain and the side that lied loses.
interface IDisputeGame {
    // ------------------------------------------------------------------ errors
    /// @notice The caller is not the job manager wired at deployment.
    error NotManager(address caller);
    /// @notice No game has this id.
    error UnknownGame(uint256 gameId);
    /// @notice The game expects a different move.
    error WrongPhase(uint256 gameId, Phase expected, Phase actual);
    /// @notice The caller is not the side that must move.
    error NotYourTurn(uint256 gameId, address caller, address expected);
    /// @notice The mover's clock ran out at `deadline`; only `claimTimeout` is left.
    error ClockExpired(uint256 gameId, uint256 deadline);
    /// @notice `claimTimeout` before the mover's deadline.
    error ClockNotExpired(uint256 gameId, uint256 deadline);
    /// @notice An index (segment, step, node, leaf, element) is out of range.
    error IndexOutOfRange(uint256 index, uint256 bound);
    /// @notice A list has the wrong length.
    error LengthMismatch(uint256 expected, uint256 actual);
    /// @notice A Merkle proof of `what` does not verify.
    error InvalidProof(bytes32 what);
    /// @notice A value differs from the one it must equal.
    error RootMismatch(bytes32 expected, bytes32 actual);
    /// @notice The supplied dispute config does not hash to the game's config hash.
    error ConfigMismatch(bytes32 expected, bytes32 actual);
    /// @notice No dispute config is registered for the job.
    error ConfigNotRegistered(uint256 jobId);
    /// @notice A dispute config is already registered for the job.
    error ConfigAlreadyRegistered(uint256 jobId, bytes32 configHash);
    /// @notice Only the job's submitter registers its dispute config.
    error NotSubmitter(address caller, address submitter);
    /// @notice A unit placement with no shard, or a shard index not below the shard count.
    error InvalidPlacement(uint32 shards, uint32 shard);
    /// @notice The claim's step count and checkpoint interval are unusable.
    error InvalidClaim(uint256 steps, uint256 interval);
    /// @notice `postSubtree` on a tensor of at most Walks.POST_LEAVES leaves, `pickSubtree` when
    ///         no walk was started, or `postTraceRoot` on a trace of at most that many nodes.
    error NotAWalk(uint256 numLeaves);
    /// @notice The resubmitted cut values are not the ones the defender posted this round.
    error CutsMismatch(bytes32 expected, bytes32 actual);

    // ------------------------------------------------------------------ events
    /// @notice The job's dispute config was registered (PROTOCOL §7.2) by `registrant`: the job's
    ///         submitter, or this game's manager on its behalf (the attestation court, §6.8).
    event ConfigRegistered(uint256 indexed jobId, bytes32 indexed configHash, address registrant);
    /// @notice Unit job `jobId` of a decomposed job had its dispute config and placement
    ///         registered (PROTOCOL §6.9, §7.2) by `registrant`: its submitter (the round manager)
    ///         or this game's manager on its behalf.
    event UnitConfigRegistered(
        uint256 indexed jobId,
        bytes32 indexed configHash,
        address registrant,
        uint64 stepOffset,
        uint32 shards,
        uint32 shard
    );
    /// @notice A game was opened over `claim` (a checkpoint root) by the job manager.
    event GameOpened(
        uint256 indexed gameId,
        uint256 indexed unitId,
        address indexed defender,
        address challenger,
        bytes32 checkpointRoot,
        uint64 stepOffset,
        uint64 steps,
        uint64 interval
    );
    /// @notice The defender published its whole checkpoint list.
    event CheckpointsPosted(uint256 indexed gameId, bytes32[] roots);
    /// @notice The challenger named the first checkpoint segment it disputes (agreeing with
    ///         `startRoot`, disputing `endRoot`).
    event SegmentPicked(uint256 indexed gameId, uint64 segment, bytes32 startRoot, bytes32 endRoot);
    /// @notice The defender listed the state roots of every step of the segment.
    event SegmentOpened(
        uint256 indexed gameId,
        uint64 segment,
        bytes32 startRoot,
        bytes32 endRoot,
        bytes32[] intermediateRoots
    );
    /// @notice The challenger named the first disputed step (agreeing with `rootBefore`).
    event StepPicked(uint256 indexed gameId, uint64 step, bytes32 rootBefore, bytes32 rootAfter);
    /// @notice The defender posted the op trace (node output roots) of the disputed step.
    event TracePosted(uint256 indexed gameId, uint64 globalStep, bytes32 traceRoot, bytes32[] roots);
    /// @notice The defender of a step whose trace has more than Walks.POST_LEAVES nodes committed
    ///         its trace root and posted the top of the disputed S_{t+1}'s list tree
    ///         (`stateNodes`: the 2^m nodes m = min(6, h) levels below its root); the walk down
    ///         the trace list's tree starts (its first round is the `TraceSubtreePosted` that
    ///         follows), or the challenger walks S_{t+1}'s list instead (`pickStateSubtree`).
    event TraceRootPosted(
        uint256 indexed gameId, uint64 globalStep, bytes32 traceRoot, bytes32[] stateNodes
    );
    /// @notice The defender posted the 2^m nodes `height` levels above the leaves of the disputed
    ///         S_{t+1}'s list tree under the picked subtree, the first node `index`; at height 0
    ///         the list's entries (keccak256(abi.encode(keccak256(name), tensorRoot))).
    event StateSubtreePosted(uint256 indexed gameId, uint8 height, uint64 index, bytes32[] nodes);
    /// @notice The challenger named node `index` at `height` of S_{t+1}'s list tree.
    event StateSubtreePicked(uint256 indexed gameId, uint8 height, uint64 index, bytes32 root);
    /// @notice The defender posted the 2^m nodes `height` levels above the trace list's leaves
    ///         under the disputed subtree, the first of them node `index` of that height; at
    ///         height 0 the entries themselves (node output roots `index` …, zero past the end).
    event TraceSubtreePosted(uint256 indexed gameId, uint8 height, uint64 index, bytes32[] nodes);
    /// @notice The challenger named node `index` at `height` of the trace list's tree, hash `root`.
    event TraceSubtreePicked(uint256 indexed gameId, uint8 height, uint64 index, bytes32 root);
    /// @notice The challenger opened node `node`'s trace entry (`traced`) and the disputed
    ///         S_{t+1}'s entry of state tensor `state`, which that node produces (`posted`:
    ///         keccak256(abi.encode(keccak256(name), tensorRoot))); the challenger won iff
    ///         `posted` is not the entry of `traced`.
    event ProducerProved(
        uint256 indexed gameId, uint32 state, uint32 node, bytes32 traced, bytes32 posted
    );
    /// @notice The challenger named the first disputed node.
    event NodePicked(uint256 indexed gameId, uint32 node, bytes32 nodeRoot);
    /// @notice The defender posted the leaf hashes of the node's output tensor.
    event LeavesPosted(uint256 indexed gameId, uint32 node, bytes32 dataRoot, bytes32[] leaves);
    /// @notice The challenger named the first disputed leaf.
    event LeafPicked(uint256 indexed gameId, uint32 leaf, bytes32 leafHash);
    /// @notice The defender revealed the disputed chunk.
    event ChunkRevealed(uint256 indexed gameId, uint32 leaf, bytes chunk);
    /// @notice The chain recomputed element `element` of the node: `claimed` (the defender's)
    ///         against `correct` (the reference).
    event ElementProved(uint256 indexed gameId, uint256 element, uint32 claimed, uint32 correct);
    /// @notice The defender posted the 2^m nodes `height` levels above the leaves under the
    ///         disputed subtree (the first of them is node `index` of that height).
    event SubtreePosted(uint256 indexed gameId, uint8 height, uint64 index, bytes32[] nodes);
    /// @notice The challenger named the first disputed node of the posted subtree level: node
    ///         `index` at `height` (a leaf when `height` is 0), whose hash is `root`.
    event SubtreePicked(uint256 indexed gameId, uint8 height, uint64 index, bytes32 root);
    /// @notice The challenger opened the reduction behind element `element` of the node
    ///         (PROTOCOL §7.10): `terms` terms, accumulator span (0, terms + 1) with acc_0 = `init`
    ///         agreed and acc_{terms+1} = `claimed` (the defender's element) disputed.
    event ReductionOpened(
        uint256 indexed gameId, uint256 element, uint256 terms, uint32 init, uint32 claimed
    );
    /// @notice The defender posted the accumulators at the interior cut points of span
    ///         (lo, hi) (`Spans.cut`, in order).
    event AccumulatorsPosted(uint256 indexed gameId, uint64 lo, uint64 hi, uint32[] values);
    /// @notice The challenger named part `part` of the span: the new span (lo, hi), agreeing
    ///         with acc_lo = `loValue` and disputing acc_hi = `hiValue`.
    event AccumulatorsPicked(
        uint256 indexed gameId, uint8 part, uint64 lo, uint64 hi, uint32 loValue, uint32 hiValue
    );
    /// @notice The chain recomputed accumulation step `position` from the agreed `loValue`:
    ///         `claimed` (the defender's acc at `position`) against `correct`.
    event AccumulationProved(
        uint256 indexed gameId, uint64 position, uint32 loValue, uint32 claimed, uint32 correct
    );
    /// @notice The game ended; `byTimeout` when the loser's clock ran out.
    event GameResolved(uint256 indexed gameId, Side winner, bool challengerWon, bool byTimeout);

    // ------------------------------------------------------------------ views
    /// @notice One entry of a root list with its inclusion proof (siblings bottom-up).
    struct ListEntry {
        bytes32 value;
        bytes32[] proof;
    }

    /// @notice The fixed part of a game.
    struct GameClaim {
        uint256 unitId;
        address defender;
        address challenger;
        bytes32 configHash;
        bytes32 datasetRoot;
        bytes32 initialStateRoot;
        bytes32 checkpointRoot;
        bytes32 finalStateRoot;
        uint64 stepOffset;
        uint64 steps;
        uint64 interval;
    }

    /// @notice The moving part of a game (what has been narrowed down so far).
    struct GameProgress {
        Phase phase;
        Side winner;
        uint32 moves;
        Clock defenderClock;
        Clock challengerClock;
        uint64 segment;
        uint64 step;
        uint32 node;
        uint32 leaf;
        uint8 dtype;
        uint32 rows;
        uint32 cols;
        bytes32 agreedRoot;
        bytes32 disputedRoot;
        bytes32 listRoot;
        bytes32 traceRoot;
        bytes32 nodeRoot;
        bytes32 descHash;
        bytes32 dataRoot;
        bytes32 leafHash;
        // The accumulator bisection of a disputed reduction (PROTOCOL §7.10); zero until opened.
        uint64 element; //  row-major index of the disputed element of the node
        uint64 lo; //       agreed accumulator position
        uint64 hi; //       disputed accumulator position
        uint32 loValue; //  acc_lo (agreed)
        uint32 hiValue; //  acc_hi (the defender's, disputed)
        bytes32 cutsHash; // Spans.commit of the defender's cut values of this round
        // The subtree walk down a large tensor's leaf tree (PROTOCOL §7.3); zero until started.
        // Reused, before the node is picked, by the walk down a large trace list's tree.
        bytes32 walkRoot; //  root of the disputed subtree
        uint64 walkIndex; //  its index among the nodes of its height
        uint8 walkHeight; //  its height above the leaves
        uint32 traceNodes; // the trace list's entry count, once a trace walk started
    }

    function claimOf(uint256 gameId) external view returns (GameClaim memory);
    function progressOf(uint256 gameId) external view returns (GameProgress memory);
    /// @notice The side to move and the last second it may move at (0, 0 when over).
    function turn(uint256 gameId) external view returns (Side side, uint256 deadline);

    // ------------------------------------------------------------------ moves
    /// @notice Records job `jobId`'s dispute config hash (PROTOCOL §7.2), once per job. Only the
    ///         job's submitter (read from the manager), or, in a game deployed with
    ///         `managerRegistersOnly` (the attestation court's), only its manager: the court
    ///         copies the job manager's game's config at the first challenge (§6.8). A job posted
    ///         with its config (`JobParams.configHash`) has it already: `ConfigAlreadyRegistered`.
    function registerConfig(uint256 jobId, bytes32 configHash) external;

    /// @notice As `registerConfig`, for a unit job of a decomposed job: also records where the
    ///         unit sits (its first global step and its shard), which the one-step proof uses
    ///         for the batch schedule (PROTOCOL §4). Who and how often: as `registerConfig`.
    function registerUnitConfig(uint256 jobId, bytes32 configHash, Placement calldata placement)
        external;

    /// @notice The config hash of a job (zero when none): the one registered here, else, in the
    ///         job manager's game, the one posted with the job (`IJobManager.Job.configHash`).
    function configOf(uint256 jobId) external view returns (bytes32);

    /// @notice The placement of a unit job (zero for a version-1 job: offset 0, one shard).
    function placementOf(uint256 jobId)
        external
        view
        returns (uint64 stepOffset, uint32 shards, uint32 shard);

    function openSegmentGame(
        uint256 unitId,
        address defender,
        address challenger,
        bytes32 datasetRoot,
        uint64 stepOffset,
        uint64 steps,
        bytes32[2] calldata roots
    ) external returns (uint256 gameId);

    function postCheckpoints(uint256 gameId, bytes32[] calldata roots) external;

    function pickSegment(
        uint256 gameId,
        uint64 segment,
        ListEntry calldata start,
        ListEntry calldata end
    ) external;

    function openSegment(uint256 gameId, bytes32[] calldata intermediateRoots) external;

    function pickStep(
        uint256 gameId,
        uint64 step,
        ListEntry calldata before,
        ListEntry calldata after_
    ) external;

    /// @notice The whole trace (every node's output root) of a step graph of up to
    ///         `Walks.POST_LEAVES` nodes, with the config's state list (`names`, `producers`, in
    ///         state order: they must make `cfg.stateList`); S_{t+1} assembled from the producers'
    ///         entries must be the disputed root.
    function postTrace(
        uint256 gameId,
        bytes32[] calldata nodeRoots,
        bytes32[] calldata names,
        uint32[] calldata producers,
        DisputeConfig calldata cfg
    ) external;

    /// @notice Instead of `postTrace` (phase PostTrace), for a step graph of more than
    ///         `Walks.POST_LEAVES` nodes: the 2^m nodes m = min(6, h) levels below the root of
    ///         the trace list's tree of height h = ceil(log2 numNodes), whose root with the node
    ///         count is the trace root, and the same top of the disputed S_{t+1}'s list tree
    ///         (`stateNodes`, which with `cfg.numState` must make the disputed root). No move of
    ///         either walk posts more than 64 hashes, whatever the node or state count
    ///         (PROTOCOL §7.3).
    function postTraceRoot(
        uint256 gameId,
        bytes32[] calldata nodes,
        bytes32[] calldata stateNodes,
        DisputeConfig calldata cfg
    ) external;

    /// @notice Instead of `pickTraceSubtree`, as the first pick after `postTraceRoot`, or after
    ///         a `postStateSubtree`: names one of the S_{t+1} list tree's nodes the defender
    ///         posted last (`nodes`, resubmitted, checked against that subtree's root), the walk
    ///         the challenger takes when it agrees with the trace root (PROTOCOL §7.3).
    function pickStateSubtree(
        uint256 gameId,
        uint8 child,
        bytes32[] calldata nodes,
        DisputeConfig calldata cfg
    ) external;

    /// @notice The 2^m nodes m = min(6, h) levels below the picked S_{t+1} subtree of height h;
    ///         when m = h, the list's entries themselves (past the state count: padding), after
    ///         which the challenger proves a producer wrong (`proveProducer`).
    function postStateSubtree(uint256 gameId, bytes32[] calldata nodes, DisputeConfig calldata cfg)
        external;

    /// @notice Names the first disputed of the trace nodes the defender posted last (`nodes`,
    ///         resubmitted, checked against the disputed subtree's root).
    function pickTraceSubtree(uint256 gameId, uint8 child, bytes32[] calldata nodes) external;

    /// @notice The 2^m nodes m = min(6, h) levels below the picked trace subtree of height h; when
    ///         m = h, the entries themselves (each node's output root; anything past the node
    ///         count is padding), after which the challenger picks a node (`pickNode`) or proves
    ///         a producer wrong (`proveProducer`).
    function postTraceSubtree(uint256 gameId, bytes32[] calldata nodes) external;

    /// @notice Instead of `pickNode` (phase PickNode): decisive. Opens state tensor `state`'s
    ///         config entry (`entry`: its name hash and producer, against `cfg.stateList`), the
    ///         producer's trace entry (`traceEntry`, against the trace root) and the disputed
    ///         S_{t+1}'s entry `state` (`stateEntry.value`: keccak256(abi.encode(name,
    ///         tensorRoot)), against the disputed root); the challenger wins iff that entry is not
    ///         the one the traced root makes.
    function proveProducer(
        uint256 gameId,
        uint32 state,
        StateConfigEntry calldata entry,
        ListEntry calldata traceEntry,
        ListEntry calldata stateEntry,
        DisputeConfig calldata cfg
    ) external;

    function pickNode(
        uint256 gameId,
        uint32 node,
        bytes32 nodeRoot,
        bytes32[] calldata traceProof,
        bytes calldata nodeDesc,
        bytes32[] calldata graphProof,
        DisputeConfig calldata cfg
    ) external;

    function postLeaves(uint256 gameId, bytes32[] calldata leaves) external;

    function pickLeaf(uint256 gameId, uint32 leaf, bytes32 leafHash, bytes32[] calldata siblings)
        external;

    /// @notice Instead of `postLeaves` (phase PostLeaves), for a tensor of more than
    ///         `Walks.POST_LEAVES` leaves: the 2^m nodes m = min(6, h) levels below the disputed
    ///         subtree's root of height h (the whole leaf tree at first, whose root the header
    ///         must turn into the node's root), so that no move posts more than 64 hashes.
    function postSubtree(uint256 gameId, bytes32[] calldata nodes) external;

    /// @notice Instead of `pickLeaf` after a `postSubtree`: names the first disputed of the posted
    ///         `nodes` (resubmitted, checked against the subtree root); a leaf ends the walk.
    function pickSubtree(uint256 gameId, uint8 child, bytes32[] calldata nodes) external;

    function revealChunk(uint256 gameId, bytes calldata chunk) external;

    function proveElement(
        uint256 gameId,
        uint8 offset,
        bytes calldata chunk,
        bytes calldata nodeDesc,
        DisputeConfig calldata cfg,
        Opening[] calldata openings
    ) external;

    /// @notice Instead of `proveElement` (phase ProveElement), the challenger disputes element
    ///         `offset` of the revealed chunk of a reduction node (matmul_nt, row_sum, row_max,
    ///         mean) through its accumulator chain (PROTOCOL §7.10), so that no move reads the K
    ///         inputs the element depends on. Reverts with `NotAReduction` for other operators.
    function openReduction(uint256 gameId, uint8 offset, bytes calldata chunk, bytes calldata nodeDesc)
        external;

    /// @notice The defender's accumulators at the `Spans.parts(lo, hi) - 1` interior cut points
    ///         of the disputed span, in order.
    function postAccumulators(uint256 gameId, uint32[] calldata values) external;

    /// @notice The challenger names the first part of the span whose end it disputes; `values`
    ///         are the defender's posted cut values of this round (checked against their hash).
    function pickAccumulators(uint256 gameId, uint8 part, uint32[] calldata values) external;

    /// @notice Decisive: recomputes accumulation step `hi` from the agreed acc_lo and the opened
    ///         input elements of term hi (none for the finishing step hi = K + 1); the challenger
    ///         wins iff the result differs from the defender's acc_hi.
    function proveAccumulation(
        uint256 gameId,
        bytes calldata nodeDesc,
        DisputeConfig calldata cfg,
        Opening[] calldata openings
    ) external;

    function claimTimeout(uint256 gameId) external;
}
