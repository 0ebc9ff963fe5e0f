// SPDX-License-Identifier: MIT
pragma solidity 0.8.37;

import {IDisputeGame} from "./interfaces/IDisputeGame.sol";
import {IOneStepProver} from "./interfaces/IOneStepProver.sol";
import {Phase, DisputeConfig, StateConfigEntry} from "./lib/DisputeTypes.sol";
import {DisputeMerkle} from "./lib/DisputeMerkle.sol";
import {Positions} from "./lib/Positions.sol";
import {Walks} from "./lib/Walks.sol";
import {DisputeGameBase} from "./DisputeGameBase.sol";

/// @title DisputeGameTrace — the trace phase of the dispute game (docs/PROTOCOL.md §7.3)
/// @notice The moves from the disputed step's trace to its disputed node: `postTrace` (a trace
///         of up to `Walks.POST_LEAVES` nodes, posted whole), or for a larger one `postTraceRoot`
///         and the walk down the trace list's tree (`pickTraceSubtree`, `postTraceSubtree`) or
///         down the disputed S_{t+1}'s list tree (`pickStateSubtree`, `postStateSubtree`);
///         then `pickNode`, or `proveProducer` when a producer's trace entry is not the S_{t+1}
///         entry the defender committed for its tensor. Their documentation is `IDisputeGame`'s: the
///         `DisputeGame` declares each of them and forwards the call here.
/// @dev Runs only by DELEGATECALL from the DisputeGame that created it (`onlyDelegated`), on
///      that game's storage (the `DisputeGameBase` layout both inherit) and with the same manager
///      and prover (its own immutables, set from the same arguments). Called directly it reverts:
///      its own storage is empty and holds nothing.
contract DisputeGameTrace is DisputeGameBase {
    /// @notice Called other than by DELEGATECALL from the game that created this contract.
    error NotDelegated();

    /// @dev The game that created this contract: the only storage its code runs on.
    address private immutable _game;

    constructor(address manager_, IOneStepProver prover_) DisputeGameBase(manager_, prover_) {
        _game = msg.sender;
    }

    /// @dev Every entry point runs as the game (by its DELEGATECALL) or not at all.
    modifier onlyDelegated() {
        if (address(this) != _game) revert NotDelegated();
        _;
    }

    /// @dev `IDisputeGame.postTrace`, run as the game.
    function postTrace(
        uint256 gameId,
        bytes32[] calldata nodeRoots,
        bytes32[] calldata names,
        uint32[] calldata producers,
        DisputeConfig calldata cfg
    ) external onlyDelegated {
        (IDisputeGame.GameClaim storage c, IDisputeGame.GameProgress storage p) =
            _move(gameId, Phase.PostTrace);
        _checkConfig(c, cfg);
        _checkSmallTrace(p, cfg, nodeRoots, names, producers);
        bytes32 traceRoot = DisputeMerkle.rootList(DisputeMerkle.TRACE_DOMAIN, nodeRoots);
        p.traceRoot = traceRoot;
        _advance(p, Phase.PickNode);
        emit IDisputeGame.TracePosted(gameId, uint64(_globalStep(c, p)), traceRoot, nodeRoots);
    }

    /// @dev `postTrace`'s checks of a whole trace: its length, the state list it names, and the
    ///      state its producers' outputs assemble (the disputed root). Its own frame: with the
    ///      three calldata arrays of the move, the legacy code generator (which slither compiles
    ///      with) runs out of stack slots.
    function _checkSmallTrace(
        IDisputeGame.GameProgress storage p,
        DisputeConfig calldata cfg,
        bytes32[] calldata nodeRoots,
        bytes32[] calldata names,
        uint32[] calldata producers
    ) private view {
        uint256 n = cfg.numNodes;
        if (nodeRoots.length != n) revert IDisputeGame.LengthMismatch(n, nodeRoots.length);
        // INVARIANT: a trace of more than POST_LEAVES nodes is walked (postTraceRoot), so the
        // state list rebuilt here is bounded by the small graphs this move takes.
        if (n > Walks.POST_LEAVES) revert IDisputeGame.LengthMismatch(Walks.POST_LEAVES, n);
        _checkStateList(cfg, names, producers);
        bytes32 assembled = _stateRoot(_producerRoots(nodeRoots, producers), names);
        if (assembled != p.disputedRoot) revert IDisputeGame.RootMismatch(p.disputedRoot, assembled);
    }

    /// @dev `IDisputeGame.postTraceRoot`, run as the game.
    function postTraceRoot(
        uint256 gameId,
        bytes32[] calldata nodes,
        bytes32[] calldata stateNodes,
        DisputeConfig calldata cfg
    ) external onlyDelegated {
        (IDisputeGame.GameClaim storage c, IDisputeGame.GameProgress storage p) =
            _move(gameId, Phase.PostTrace);
        _checkConfig(c, cfg);
        uint256 n = cfg.numNodes;
        // INVARIANT: traces of up to POST_LEAVES nodes are posted whole (postTrace), so the
        // first round below never reaches the entries.
        if (n <= Walks.POST_LEAVES) revert IDisputeGame.NotAWalk(n);
        _checkStateTop(p, stateNodes, cfg.numState);
        uint8 height = _startWalk(p, nodes, n);
        _advance(p, Phase.PickTraceSubtree);
        emit IDisputeGame.TraceRootPosted(gameId, uint64(_globalStep(c, p)), p.traceRoot, stateNodes);
        emit IDisputeGame.TraceSubtreePosted(gameId, height, 0, nodes);
    }

    /// @dev `IDisputeGame.pickStateSubtree`, run as the game.
    function pickStateSubtree(
        uint256 gameId,
        uint8 child,
        bytes32[] calldata nodes,
        DisputeConfig calldata cfg
    ) external onlyDelegated {
        // The first pick of a walked trace may take S_{t+1}'s walk instead of the trace's,
        // while the trace walk is still at its top (the trace tree's height).
        bool first = _progress[gameId].phase == Phase.PickTraceSubtree;
        (IDisputeGame.GameClaim storage c, IDisputeGame.GameProgress storage p) =
            _move(gameId, first ? Phase.PickTraceSubtree : Phase.PickStateSubtree);
        _checkConfig(c, cfg);
        uint256 height = p.walkHeight;
        uint256 index = 0;
        if (first) {
            if (height != Positions.depth(p.traceNodes)) {
                revert IDisputeGame.WrongPhase(gameId, Phase.PickStateSubtree, Phase.PickTraceSubtree);
            }
            height = _checkStateTop(p, nodes, cfg.numState);
        } else {
            bytes32 root = Walks.rootOf(nodes);
            if (root != p.walkRoot) revert IDisputeGame.RootMismatch(p.walkRoot, root);
            index = p.walkIndex;
        }
        uint256 stride = Walks.stride(height);
        uint256 width = uint256(1) << stride;
        if (nodes.length != width) revert IDisputeGame.LengthMismatch(width, nodes.length);
        if (child >= width) revert IDisputeGame.IndexOutOfRange(child, width);
        uint64 picked = uint64((index << stride) + child);
        bytes32 node = nodes[child];
        p.walkRoot = node;
        p.walkIndex = picked;
        p.walkHeight = uint8(height - stride);
        // A pick among entries (a list of up to 64, whose top they are) ends the walk.
        _advance(p, height == stride ? Phase.PickNode : Phase.PostStateSubtree);
        emit IDisputeGame.StateSubtreePicked(gameId, uint8(height - stride), picked, node);
    }

    /// @dev `IDisputeGame.postStateSubtree`, run as the game.
    function postStateSubtree(uint256 gameId, bytes32[] calldata nodes, DisputeConfig calldata cfg)
        external
        onlyDelegated
    {
        (IDisputeGame.GameClaim storage c, IDisputeGame.GameProgress storage p) =
            _move(gameId, Phase.PostStateSubtree);
        _checkConfig(c, cfg);
        uint256 height = p.walkHeight;
        uint256 stride = Walks.stride(height);
        uint256 width = uint256(1) << stride;
        if (nodes.length != width) revert IDisputeGame.LengthMismatch(width, nodes.length);
        uint256 first = uint256(p.walkIndex) << stride;
        bool entries = height == stride;
        bytes32 root = entries
            ? Walks.entriesRoot(DisputeMerkle.STATE_DOMAIN, nodes, first, cfg.numState)
            : Walks.rootOf(nodes);
        if (root != p.walkRoot) revert IDisputeGame.RootMismatch(p.walkRoot, root);
        _advance(p, entries ? Phase.PickNode : Phase.PickStateSubtree);
        emit IDisputeGame.StateSubtreePosted(gameId, uint8(height - stride), uint64(first), nodes);
    }

    /// @dev `IDisputeGame.pickTraceSubtree`, run as the game.
    function pickTraceSubtree(uint256 gameId, uint8 child, bytes32[] calldata nodes)
        external
        onlyDelegated
    {
        (, IDisputeGame.GameProgress storage p) = _move(gameId, Phase.PickTraceSubtree);
        uint256 stride = Walks.stride(p.walkHeight);
        uint256 width = uint256(1) << stride;
        if (nodes.length != width) revert IDisputeGame.LengthMismatch(width, nodes.length);
        bytes32 root = Walks.rootOf(nodes);
        if (root != p.walkRoot) revert IDisputeGame.RootMismatch(p.walkRoot, root);
        if (child >= width) revert IDisputeGame.IndexOutOfRange(child, width);
        uint64 index = uint64((uint256(p.walkIndex) << stride) + child);
        // INVARIANT: a round whose nodes are the entries themselves ends the walk (PickNode), so
        // the picked node is above the entries.
        uint8 height = uint8(p.walkHeight - stride);
        bytes32 picked = nodes[child];
        p.walkRoot = picked;
        p.walkIndex = index;
        p.walkHeight = height;
        _advance(p, Phase.PostTraceSubtree);
        emit IDisputeGame.TraceSubtreePicked(gameId, height, index, picked);
    }

    /// @dev `IDisputeGame.postTraceSubtree`, run as the game.
    function postTraceSubtree(uint256 gameId, bytes32[] calldata nodes) external onlyDelegated {
        (, IDisputeGame.GameProgress storage p) = _move(gameId, Phase.PostTraceSubtree);
        uint256 height = p.walkHeight;
        uint256 stride = Walks.stride(height);
        uint256 width = uint256(1) << stride;
        if (nodes.length != width) revert IDisputeGame.LengthMismatch(width, nodes.length);
        uint256 first = uint256(p.walkIndex) << stride;
        bool entries = height == stride;
        bytes32 root = entries
            ? Walks.entriesRoot(DisputeMerkle.TRACE_DOMAIN, nodes, first, p.traceNodes)
            : Walks.rootOf(nodes);
        if (root != p.walkRoot) revert IDisputeGame.RootMismatch(p.walkRoot, root);
        _advance(p, entries ? Phase.PickNode : Phase.PickTraceSubtree);
        emit IDisputeGame.TraceSubtreePosted(gameId, uint8(height - stride), uint64(first), nodes);
    }

    /// @dev `IDisputeGame.pickNode`, run as the game.
    function pickNode(
        uint256 gameId,
        uint32 node,
        bytes32 nodeRoot,
        bytes32[] calldata traceProof,
        bytes calldata nodeDesc,
        bytes32[] calldata graphProof,
        DisputeConfig calldata cfg
    ) external onlyDelegated {
        (IDisputeGame.GameClaim storage c, IDisputeGame.GameProgress storage p) =
            _move(gameId, Phase.PickNode);
        _checkConfig(c, cfg);
        _checkTraceEntry(p, cfg.numNodes, node, nodeRoot, traceProof);
        bytes32 descHash = _checkGraphEntry(cfg, node, nodeDesc, graphProof);
        p.node = node;
        p.nodeRoot = nodeRoot;
        p.descHash = descHash;
        (p.dtype, p.rows, p.cols) = prover.header(nodeDesc);
        // The leaf walk of a large output tensor starts from a clear walk (postSubtree).
        p.walkRoot = bytes32(0);
        p.walkIndex = 0;
        p.walkHeight = 0;
        _advance(p, Phase.PostLeaves);
        emit IDisputeGame.NodePicked(gameId, node, nodeRoot);
    }

    /// @dev `IDisputeGame.proveProducer`, run as the game.
    function proveProducer(
        uint256 gameId,
        uint32 state,
        StateConfigEntry calldata entry,
        IDisputeGame.ListEntry calldata traceEntry,
        IDisputeGame.ListEntry calldata stateEntry,
        DisputeConfig calldata cfg
    ) external onlyDelegated {
        (IDisputeGame.GameClaim storage c, IDisputeGame.GameProgress storage p) =
            _move(gameId, Phase.PickNode);
        _checkConfig(c, cfg);
        _checkConfigEntry(cfg, state, entry);
        uint32 node = entry.producer;
        _checkTraceEntry(p, cfg.numNodes, node, traceEntry.value, traceEntry.proof);
        _checkStateEntry(p, cfg.numState, state, stateEntry);
        bytes32 traced = traceEntry.value;
        bytes32 posted = stateEntry.value;
        emit IDisputeGame.ProducerProved(gameId, state, node, traced, posted);
        _resolve(gameId, c, p, DisputeMerkle.stateEntry(entry.name, traced) != posted, false);
    }

    // =========================================================================== internals

    /// @dev Starts the walk down an `n`-entry trace list's tree from its top `nodes` (checked
    ///      count); stores the trace root they commit. Returns the height of `nodes`.
    function _startWalk(IDisputeGame.GameProgress storage p, bytes32[] calldata nodes, uint256 n)
        internal
        returns (uint8)
    {
        uint256 height = Positions.depth(n);
        uint256 stride = Walks.stride(height);
        uint256 width = uint256(1) << stride;
        if (nodes.length != width) revert IDisputeGame.LengthMismatch(width, nodes.length);
        bytes32 root = Walks.rootOf(nodes);
        p.traceRoot = DisputeMerkle.listCommit(DisputeMerkle.TRACE_DOMAIN, n, root);
        p.traceNodes = uint32(n);
        p.walkRoot = root;
        p.walkHeight = uint8(height);
        return uint8(height - stride);
    }

    /// @dev `stateNodes` are the top of the disputed S_{t+1}'s list tree (of `numState`
    ///      entries): 2^m nodes, m = min(6, h), h its height (the entries themselves when
    ///      h <= 6), hashing with the count to the disputed root. Returns h.
    function _checkStateTop(
        IDisputeGame.GameProgress storage p,
        bytes32[] calldata stateNodes,
        uint256 numState
    ) internal view returns (uint256 height) {
        height = Positions.depth(numState);
        uint256 width = uint256(1) << Walks.stride(height);
        if (stateNodes.length != width) revert IDisputeGame.LengthMismatch(width, stateNodes.length);
        // A list of up to 64 entries has them as its top.
        bytes32 root = height <= Walks.STRIDE
            ? Walks.entriesRoot(DisputeMerkle.STATE_DOMAIN, stateNodes, 0, numState)
            : Walks.rootOf(stateNodes);
        bytes32 commit = DisputeMerkle.listCommit(DisputeMerkle.STATE_DOMAIN, numState, root);
        if (commit != p.disputedRoot) revert IDisputeGame.RootMismatch(p.disputedRoot, commit);
    }

    /// @dev `names` and `producers` are the config's whole state list.
    function _checkStateList(
        DisputeConfig calldata cfg,
        bytes32[] calldata names,
        uint32[] calldata producers
    ) internal pure {
        uint256 n = cfg.numState;
        if (names.length != n) revert IDisputeGame.LengthMismatch(n, names.length);
        if (producers.length != n) revert IDisputeGame.LengthMismatch(n, producers.length);
        bytes32[] memory entries = new bytes32[](n);
        for (uint256 i = 0; i < n; ++i) {
            entries[i] = DisputeMerkle.stateConfigEntry(names[i], producers[i]);
        }
        bytes32 list = DisputeMerkle.rootList(DisputeMerkle.STATE_CONFIG_DOMAIN, entries);
        if (list != cfg.stateList) revert IDisputeGame.RootMismatch(cfg.stateList, list);
    }

    /// @dev `e` is entry `state` of the config's state list.
    function _checkConfigEntry(
        DisputeConfig calldata cfg,
        uint256 state,
        StateConfigEntry calldata e
    ) internal pure {
        uint256 n = cfg.numState;
        if (state >= n) revert IDisputeGame.IndexOutOfRange(state, n);
        bytes32 value = DisputeMerkle.stateConfigEntry(e.name, e.producer);
        bytes32 dom = DisputeMerkle.STATE_CONFIG_DOMAIN;
        if (!DisputeMerkle.verifyListEntry(cfg.stateList, dom, n, state, value, e.proof)) {
            revert IDisputeGame.InvalidProof("config.state");
        }
    }

    function _checkTraceEntry(
        IDisputeGame.GameProgress storage p,
        uint256 numNodes,
        uint256 node,
        bytes32 nodeRoot,
        bytes32[] calldata proof
    ) internal view {
        bytes32 dom = DisputeMerkle.TRACE_DOMAIN;
        if (!DisputeMerkle.verifyListEntry(p.traceRoot, dom, numNodes, node, nodeRoot, proof)) {
            revert IDisputeGame.InvalidProof("trace.node");
        }
    }

    /// @dev `e.value` is entry `state` of the disputed S_{t+1}'s list (of `n` entries).
    function _checkStateEntry(
        IDisputeGame.GameProgress storage p,
        uint256 n,
        uint256 state,
        IDisputeGame.ListEntry calldata e
    ) internal view {
        bytes32 dom = DisputeMerkle.STATE_DOMAIN;
        if (!DisputeMerkle.verifyListEntry(p.disputedRoot, dom, n, state, e.value, e.proof)) {
            revert IDisputeGame.InvalidProof("state.tensor");
        }
    }

    function _checkGraphEntry(
        DisputeConfig calldata cfg,
        uint256 node,
        bytes calldata nodeDesc,
        bytes32[] calldata proof
    ) internal pure returns (bytes32 descHash) {
        descHash = keccak256(nodeDesc);
        bytes32 dom = DisputeMerkle.GRAPH_DOMAIN;
        if (!DisputeMerkle.verifyListEntry(cfg.graphRoot, dom, cfg.numNodes, node, descHash, proof)) {
            revert IDisputeGame.InvalidProof("graph.node");
        }
    }

    /// @dev The trace entries of the nodes producing S_{t+1}'s tensors, in state order.
    function _producerRoots(bytes32[] calldata nodeRoots, uint32[] calldata producers)
        internal
        pure
        returns (bytes32[] memory roots)
    {
        uint256 n = producers.length;
        roots = new bytes32[](n);
        for (uint256 i = 0; i < n; ++i) {
            uint256 producer = producers[i];
            if (producer >= nodeRoots.length) {
                revert IDisputeGame.IndexOutOfRange(producer, nodeRoots.length);
            }
            roots[i] = nodeRoots[producer];
        }
    }

    /// @dev The state root (PROTOCOL §3) of tensors named `names` with roots `roots`.
    function _stateRoot(bytes32[] memory roots, bytes32[] calldata names)
        internal
        pure
        returns (bytes32)
    {
        uint256 n = names.length;
        if (roots.length != n) revert IDisputeGame.LengthMismatch(n, roots.length);
        bytes32[] memory entries = new bytes32[](n);
        for (uint256 i = 0; i < n; ++i) {
            entries[i] = DisputeMerkle.stateEntry(names[i], roots[i]);
        }
        return DisputeMerkle.rootList(DisputeMerkle.STATE_DOMAIN, entries);
    }
}
