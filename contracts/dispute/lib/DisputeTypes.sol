// SPDX-License-Identifier: MIT
pragma solidity 0.8.37;

/// @notice A chess clock of one side: the seconds it has left (high 64 bits) and the time its
///         current turn started (low 64 bits; 0 while the other side is to move). See `Clocks`.
type Clock is uint128;

/// @notice Where a dispute game stands: which move is expected next. The order is the order of
///         play (docs/PROTOCOL.md §7); levels that a game's size makes trivial are skipped.
enum Phase {
    None, //            no such game
    PostCheckpoints, // defender posts its whole checkpoint list (several segments only)
    PickSegment, //     challenger names the first disputed checkpoint segment
    OpenSegment, //     defender lists the state roots of every step of the segment
    PickStep, //        challenger names the first disputed step of the segment
    PostTrace, //       defender posts the op-trace (every node's output root) of that step, or
    //                  for a large trace the tops of its list tree and of S_{t+1}'s
    PickTraceSubtree, // challenger names a node of the posted level of the trace list's tree
    PostTraceSubtree, // defender posts the level below it (the entries themselves, at last)
    PickStateSubtree, // challenger names a node of the posted level of S_{t+1}'s list tree
    PostStateSubtree, // defender posts the level below it (S_{t+1}'s entries, at last)
    PickNode, //        challenger names the first disputed node of the trace (or a producer)
    PostLeaves, //      defender posts the leaf hashes of that node's output tensor
    PickLeaf, //        challenger names the first disputed leaf (256-byte chunk)
    RevealChunk, //     defender reveals that chunk
    ProveElement, //    challenger proves one element of the chunk, or opens its reduction
    PostAccumulators, // defender posts the accumulators at the cut points of the disputed span
    PickAccumulators, // challenger names the first disputed part of the span
    ProveAccumulation, // challenger recomputes one accumulation step of the reduction
    Resolved //         over; `winner` says who won
}

/// @notice The two parties of a game.
enum Side {
    None,
    Defender,
    Challenger
}

/// @notice Where a unit of a decomposed job (spec version 2, PROTOCOL §4, §6.9) sits in its job:
///         its steps are global steps `stepOffset` … and its batches are drawn from shard
///         `shard` of `shards`. The zero value is a version-1 job (offset 0, one shard).
/// @param stepOffset The unit's first global step t0 = r·k_local.
/// @param shards     S, the job's shard count (0 is read as 1).
/// @param shard      s < S, the unit's shard.
struct Placement {
    uint64 stepOffset;
    uint32 shards;
    uint32 shard;
}

/// @notice The training-job facts a game needs beyond the hook's request, committed as
///         `configHash = keccak256(abi.encode(config))` (docs/PROTOCOL.md §7.2).
/// @param graphRoot      Root list (domain keccak256("vtp.graph.v1")) of keccak256(node descriptor)
///                       over the step graph's nodes in node order.
/// @param numNodes       Number of nodes of one step.
/// @param batchSize      B, examples per step.
/// @param numExamples    N, training examples in the dataset.
/// @param seed           The batch-schedule seed of PROTOCOL §4.
/// @param numState       Number of state tensors.
/// @param stateList      Root list (domain keccak256("vtp.stateconfig.v1")) of
///                       keccak256(abi.encode(keccak256(name), producer)) over the state tensors
///                       in state order, `producer` the node whose output is the tensor's value
///                       after a step: the config stays one fixed-size struct whatever the
///                       state's size, and a move opens the entries it needs (PROTOCOL §7.2).
struct DisputeConfig {
    bytes32 graphRoot;
    uint32 numNodes;
    uint32 batchSize;
    uint64 numExamples;
    uint256 seed;
    uint32 numState;
    bytes32 stateList;
}

/// @notice One state tensor's config entry: its name hash and producer node, opened against
///         `DisputeConfig.stateList` (`proof`: the list proof's siblings).
struct StateConfigEntry {
    bytes32 name;
    uint32 producer;
    bytes32[] proof;
}

/// @notice One input of a node: where its tensor comes from and its header.
/// @param kind  1 state tensor of S_t, 2 output of an earlier node, 3 dataset features X,
///              4 dataset labels Y, 5 the step's batch indices (computed on chain, no opening).
/// @param index State position (kind 1) or node index (kind 2); 0 otherwise.
/// @param name  keccak256(name) of the state tensor (kind 1); 0 otherwise.
struct Operand {
    uint8 kind;
    uint32 index;
    bytes32 name;
    uint8 dtype;
    uint32 rows;
    uint32 cols;
}

/// @notice A node of the step graph: `keccak256(abi.encode(NodeDesc))` is its graph-list value.
/// @param op     Operator code (docs/PROTOCOL.md §7.2 table).
/// @param dtype  Output element type (1 float32, 2 uint32).
/// @param param  Operator parameter as binary32 bits in the low 32 bits (μ of momentum, η of sgd).
struct NodeDesc {
    uint8 op;
    uint8 dtype;
    uint32 rows;
    uint32 cols;
    uint256 param;
    Operand[] inputs;
}

/// @notice One 256-byte leaf of a tensor with its Merkle path (siblings bottom-up).
struct Chunk {
    uint256 leaf;
    bytes data;
    bytes32[] siblings;
}

/// @notice Opens elements of one operand tensor: its root, the root's inclusion proof in the
///         list it belongs to (state, op trace or dataset), its data root and some leaves.
struct Opening {
    bytes32 tensorRoot;
    bytes32[] listProof;
    bytes32 dataRoot;
    Chunk[] chunks;
}

/// @notice What the one-step prover needs to know about the disputed step.
/// @param stateRoot   The agreed state root S_t.
/// @param traceRoot   The defender's op-trace root of step t.
/// @param datasetRoot The job's dataset root list.
/// @param node        Index of the disputed node (inputs must be earlier nodes).
/// @param step        Global step t (batch schedule).
/// @param shards      S of the unit's placement (1 for a version-1 job).
/// @param shard       s of the unit's placement (0 for a version-1 job).
struct ProofContext {
    bytes32 stateRoot;
    bytes32 traceRoot;
    bytes32 datasetRoot;
    uint256 numState;
    uint256 numNodes;
    uint256 node;
    uint256 step;
    uint256 seed;
    uint256 batchSize;
    uint256 numExamples;
    uint256 shards;
    uint256 shard;
}

/// @notice One input of a version-3 graph node (PROTOCOL §7.2): where its tensor comes from and
///         its N-d header. `key` is keccak256(name) of a state tensor (kind 1), the binary32 word
///         of a hyper-parameter (kind 6, shape ()), the tensor root of a constant (kind 11), else 0.
///         Kind 12 is the step input (k0, k1, t), shape (3,), computed on chain from the seed and
///         the step. Kinds 7–10 are the step's batch, gathered from the dataset on chain (§4): 7 the rows
///         of X, 8 the labels of Y, 9 and 10 the token windows x and y of a token dataset.
struct TensorInput {
    uint8 kind;
    uint32 index;
    bytes32 key;
    uint8 dtype;
    uint32[] shape;
}

/// @notice A node of a version-3 step graph (op code 64 and up): `keccak256(abi.encode(GraphNode))`
///         is its graph-list value. `attrs` are the registry node's integer attributes, except
///         that a constant's words are committed by the tensor root in its one input (kind 11).
struct GraphNode {
    uint8 op;
    uint8 dtype;
    uint32[] shape;
    uint256[] attrs;
    TensorInput[] inputs;
}
