"""Decision logic of the two sides of a dispute game: given what a party computed and what the
game shows, return its next move. Pure: no chain access (see client.py for I/O).

The defender (a solver defending its checkpoints, or a verifier its attestation) answers every
question from its own `Computation`; with a faulty computation it is a cheater, and its answers
are exactly what that cheater would post (the chain rejects the ones that cannot be posted, and
a defender that cannot move loses on time). The honest challenger always names the *first*
disagreement (segment, step, node, leaf, element), so everything before it is agreed and the
last move's inputs can be opened from its own data; a trace of more than 64 nodes it walks
down to that node (or to a node whose output the defender's posted S_{t+1} contradicts,
`proveProducer`, PROTOCOL §7.3); an element of a reduction longer than
`DIRECT_TERMS` terms it disputes through the element's accumulator chain (PROTOCOL §7.10), naming
the first disputed cut each round.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from agents.core.enums import Phase
from agents.dispute import reduction
from agents.dispute.encoding import GRAPH_DOMAIN, STEPS_DOMAIN
from agents.dispute.graph import JobGraph
from agents.dispute.trace import Computation
from agents.dispute.trace_walk import (
    Round,
    TraceRoots,
    WalkedTrace,
    next_round,
    pick_child,
    top_round,
    trace_siblings,
    walks,
)
from agents.training import merkle
from agents.training.keccak import keccak256

LEAF = merkle.LEAF_ELEMS


DEFENDER_PHASES = {
    Phase.POST_CHECKPOINTS,
    Phase.OPEN_SEGMENT,
    Phase.POST_TRACE,
    Phase.POST_TRACE_SUBTREE,
    Phase.POST_STATE_SUBTREE,
    Phase.POST_LEAVES,
    Phase.REVEAL_CHUNK,
    Phase.POST_ACCUMULATORS,
}

# Reductions of up to this many terms of a version-1 graph are proved in one move; longer ones
# are bisected through their chain (each kind of computation states its own: `direct_terms`).
DIRECT_TERMS = Computation.direct_terms
# Tensors of more leaves are walked down their leaf tree 6 levels a round (Walks.sol) rather than
# posted whole.
POST_LEAVES = 64
WALK_STRIDE = 6


# -- the game as a party sees it ----------------------------------------------------------------


@dataclass
class GameView:
    """A game's claim, its progress and everything posted so far (from views and events)."""

    game_id: int
    step_offset: int
    steps: int
    interval: int
    phase: int = Phase.NONE
    segment: int = 0
    step: int = 0
    node: int = 0
    leaf: int = 0
    checkpoints: list[bytes] | None = None
    step_roots: list[bytes] | None = None  # [start, intermediate..., end] of the segment
    node_roots: list[bytes] | None = None
    leaves: list[bytes] | None = None
    chunk: bytes | None = None
    winner: int = 0
    moves: int = 0
    element: int = 0  # the disputed element of a reduction (row-major), once opened
    lo: int = 0  # the accumulator span (lo, hi): acc_lo agreed, acc_hi disputed
    hi: int = 0
    cut_values: list[int] | None = None  # the defender's cut values of the current round
    walk_height: int = 0  # the disputed subtree of a large tensor's leaf tree (0: none yet)
    walk_index: int = 0
    subtree: list[bytes] | None = None  # the nodes the defender posted last (SubtreePosted)
    subtree_height: int = 0  # their height above the leaves and the index of the first
    subtree_index: int = 0
    # the walk down a large trace (PROTOCOL §7.3): every round the defender posted
    # (TraceSubtreePosted); the top of the disputed S_{t+1}'s list tree (TraceRootPosted), the
    # rounds of its walk (StateSubtreePosted) and whether the challenger took that walk
    trace_rounds: list[Round] = field(default_factory=list)
    state_top: list[bytes] | None = None
    state_rounds: list[Round] = field(default_factory=list)
    state_walk: bool = False

    @property
    def global_step(self) -> int:
        return self.step_offset + self.segment * self.interval + self.step

    @property
    def segments(self) -> int:
        return self.steps // self.interval


# -- moves ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Move:
    """A contract call: function name and its arguments (ABI-ready)."""

    fn: str
    args: tuple

    def call_args(self, game_id: int) -> tuple:
        return (game_id, *self.args)


def _entry(value: bytes, proof: list[bytes]) -> tuple:
    return (value, list(proof))


def _list_siblings(domain: bytes, values: list[bytes], index: int) -> list[bytes]:
    return merkle.list_proof(domain, values, index).siblings


def leaf_siblings(leaves: list[bytes], index: int) -> list[bytes]:
    """Merkle siblings (bottom-up) of leaf `index` in the padded tree over leaf hashes."""
    arr = np.frombuffer(b"".join(leaves), dtype=np.uint8).reshape(-1, 32)
    sib, idx = [], index
    for level in merkle.levels(arr)[:-1]:
        sib.append(level[idx ^ 1].tobytes())
        idx //= 2
    return sib


def tensor_leaves(t) -> list[bytes]:
    w, code, _, _ = merkle.words(t)
    return [row.tobytes() for row in merkle.leaves(w, code == merkle.DTYPE_F32)]


def tensor_chunk(t, leaf: int) -> bytes:
    w, code, _, _ = merkle.words(t)
    return merkle.encode_chunk(w[leaf * LEAF : (leaf + 1) * LEAF], code == merkle.DTYPE_F32)


def _cfg(jg: JobGraph) -> tuple:
    return jg.config.as_tuple()


# -- defender ---------------------------------------------------------------------------------


@dataclass
class Defender:
    """Answers from its computation; `stop_at` = a phase at which it falls silent (tests)."""

    comp: Computation
    jg: JobGraph
    stop_at: int | None = None

    def next_move(self, v: GameView) -> Move | None:
        if v.phase not in DEFENDER_PHASES or v.phase == self.stop_at:
            return None
        c = self.comp
        if v.phase == Phase.POST_CHECKPOINTS:
            return Move("postCheckpoints", (c.checkpoint_roots(),))
        if v.phase == Phase.OPEN_SEGMENT:
            roots = c.segment_roots(v.segment)
            return Move("openSegment", (roots[1:-1],))
        t = v.global_step
        cfg = self.jg.config
        if v.phase == Phase.POST_TRACE:
            trace = self.trace_roots(t)
            if walks(len(trace)):
                top = top_round(trace)[2]
                state_top = top_round(self.state_entries(t), merkle.STATE_DOMAIN)[2]
                return Move("postTraceRoot", (top, state_top, _cfg(self.jg)))
            names, producers = list(cfg.state_names), list(cfg.state_producers)
            return Move("postTrace", (trace, names, producers, _cfg(self.jg)))
        if v.phase == Phase.POST_TRACE_SUBTREE:
            return Move("postTraceSubtree", (next_round(self.trace_roots(t), v.walk_height,
                                                        v.walk_index)[2],))  # fmt: skip
        if v.phase == Phase.POST_STATE_SUBTREE:
            r = next_round(self.state_entries(t), v.walk_height, v.walk_index, merkle.STATE_DOMAIN)
            return Move("postStateSubtree", (r[2], _cfg(self.jg)))
        if v.phase == Phase.POST_ACCUMULATORS:
            acc = c.element_chain(self.jg, t, v.node, v.element)
            return Move("postAccumulators", ([int(acc[j]) for j in reduction.cuts(v.lo, v.hi)],))
        out = c.node_output(t, v.node)
        if v.phase == Phase.POST_LEAVES:
            leaves = tensor_leaves(out)
            if len(leaves) > POST_LEAVES:
                return Move("postSubtree", (subtree_nodes(leaves, v)[2],))
            return Move("postLeaves", (leaves,))
        return Move("revealChunk", (tensor_chunk(out, v.leaf),))

    def trace_roots(self, t: int) -> list[bytes]:
        """The trace it posts of step t: its own."""
        return self.comp.trace_roots(t)

    def state_roots(self, t: int) -> list[bytes]:
        """The tensor roots of its S_{t+1}, in state order: its producers' outputs."""
        own = self.comp.trace_roots(t)
        return [own[p] for p in self.jg.config.state_producers]

    def state_entries(self, t: int) -> list[bytes]:
        """Its S_{t+1}'s list entries (PROTOCOL §3): keccak256(abi.encode(name, tensorRoot))."""
        return state_entries(self.jg, self.state_roots(t))


def state_entries(jg: JobGraph, roots: list[bytes]) -> list[bytes]:
    return [keccak256(h + r) for h, r in zip(jg.config.state_names, roots, strict=True)]


# -- honest challenger ------------------------------------------------------------------------


def _first_diff(mine: list[bytes], theirs: list[bytes], start: int = 0) -> int | None:
    for i in range(start, min(len(mine), len(theirs))):
        if mine[i] != theirs[i]:
            return i
    return None


@dataclass
class Challenger:
    """The honest challenger: names the first disagreement at every level."""

    comp: Computation  # an honest computation of the claim
    jg: JobGraph
    stop_at: int | None = None
    # longer reductions are bisected (PROTOCOL §7.10); None: the computation's own limit
    direct_terms: int | None = None

    def disputes(self, checkpoint_commit: bytes, final_root: bytes) -> bool:
        """Whether a claim (its checkpoint root and final state root) is wrong."""
        c = self.comp
        return checkpoint_commit != c.checkpoint_commit() or final_root != c.final_root()

    def next_move(self, v: GameView) -> Move | None:
        if v.phase in DEFENDER_PHASES or v.phase in (Phase.NONE, Phase.RESOLVED):
            return None
        if v.phase == self.stop_at:
            return None
        if v.phase == Phase.PICK_SEGMENT:
            return self._pick_segment(v)
        if v.phase == Phase.PICK_STEP:
            return self._pick_step(v)
        if v.phase == Phase.PICK_TRACE_SUBTREE:
            return self._pick_trace_subtree(v)
        if v.phase == Phase.PICK_STATE_SUBTREE:
            return self._pick_state_subtree(v)
        if v.phase == Phase.PICK_NODE and v.state_walk:
            return self._end_state_walk(v)
        if v.phase == Phase.PICK_NODE and v.node_roots is None:
            return self._end_trace_walk(v)
        if v.phase == Phase.PICK_NODE:
            return self._pick_node(v)
        if v.phase == Phase.PICK_LEAF:
            return self._pick_leaf(v)
        if v.phase == Phase.PICK_ACCUMULATORS:
            acc = self.comp.element_chain(self.jg, v.global_step, v.node, v.element)
            return pick_accumulators(v, _first_diff_part(v, acc))
        if v.phase == Phase.PROVE_ACCUMULATION:
            return prove_accumulation(self.comp, self.jg, v)
        return self._prove(v)

    def _pick_segment(self, v: GameView) -> Move | None:
        cps = v.checkpoints or []
        s = _first_diff(self.comp.checkpoint_roots(), cps, 1)
        return None if s is None else pick_segment(cps, s - 1)

    def _pick_step(self, v: GameView) -> Move | None:
        roots = v.step_roots or []
        j = _first_diff(self.comp.segment_roots(v.segment), roots, 1)
        return None if j is None else pick_step(roots, j - 1)

    def _pick_node(self, v: GameView) -> Move | None:
        roots = v.node_roots or []
        i = _first_diff(self.comp.trace_roots(v.global_step), roots)
        return None if i is None else pick_node(self.jg, roots, i)

    def _pick_trace_subtree(self, v: GameView) -> Move | None:
        """The leftmost child that differs from its own trace tree; at the top, when the whole
        trace agrees (its top does), S_{t+1}'s walk instead: a producer's entry contradicts the
        disputed S_{t+1} (PROTOCOL §7.3)."""
        own = self.comp.trace_roots(v.global_step)
        r = v.trace_rounds[-1]
        child = pick_child(own, r)
        if child is None and len(v.trace_rounds) == 1:
            return self._pick_state_subtree(v)
        return None if child is None else Move("pickTraceSubtree", (child, r[2]))

    def _own_state_entries(self, t: int) -> list[bytes]:
        own = self.comp.trace_roots(t)
        return state_entries(self.jg, [own[p] for p in self.jg.config.state_producers])

    def _pick_state_subtree(self, v: GameView) -> Move | None:
        mine = self._own_state_entries(v.global_step)
        r = state_rounds(self.jg, v)[-1]
        child = pick_child(mine, r, merkle.STATE_DOMAIN)
        if child is None:
            return None
        return Move("pickStateSubtree", (child, r[2], _cfg(self.jg)))

    def _end_trace_walk(self, v: GameView) -> Move | None:
        """After the walk's last round (the entries `first` …): the first entry that differs
        from its own."""
        own = self.comp.trace_roots(v.global_step)
        _, first, values = v.trace_rounds[-1]
        diffs = [first + j for j, x in enumerate(values) if first + j < len(own)
                 and x != own[first + j]]  # fmt: skip
        return pick_node(self.jg, walked_trace(self.comp, v), diffs[0]) if diffs else None

    def _end_state_walk(self, v: GameView) -> Move | None:
        """After S_{t+1}'s walk (the entries `first` …): the first entry that differs from its
        own is one whose producer's (agreed) trace entry does not make it."""
        mine = self._own_state_entries(v.global_step)
        _, first, values = state_rounds(self.jg, v)[-1]
        diffs = [first + j for j, x in enumerate(values) if first + j < len(mine)
                 and x != mine[first + j]]  # fmt: skip
        if not diffs:
            return None
        return prove_producer(self.comp, self.jg, v, diffs[0])

    def _pick_leaf(self, v: GameView) -> Move | None:
        mine = tensor_leaves(self.comp.node_output(v.global_step, v.node))
        if len(mine) > POST_LEAVES and v.subtree is not None:
            theirs = v.subtree
            width = len(theirs)
            level = merkle_level(mine, v.subtree_height)
            ours = [level[v.subtree_index + j] for j in range(width)]
            j = _first_diff(ours, theirs)
            return None if j is None else Move("pickSubtree", (j, theirs))
        leaves = v.leaves or []
        j = _first_diff(mine, leaves)
        return None if j is None else pick_leaf(leaves, j)

    def _prove(self, v: GameView) -> Move | None:
        chunk = v.chunk or b""
        mine = tensor_chunk(self.comp.node_output(v.global_step, v.node), v.leaf)
        offsets = [e for e in range(LEAF) if chunk[4 * e : 4 * e + 4] != mine[4 * e : 4 * e + 4]]
        if not offsets:
            return None
        offset = offsets[0]
        if bisects(self.comp, self.jg, v, offset, self.direct_terms):
            return Move("openReduction", (offset, chunk, self.jg.nodes[v.node].encode()))
        return prove_element(self.comp, self.jg, v, offset)


def pick_segment(cps: list[bytes], s: int) -> Move:
    dom = merkle.CHECKPOINT_DOMAIN
    start = _entry(cps[s], _list_siblings(dom, cps, s))
    end = _entry(cps[s + 1], _list_siblings(dom, cps, s + 1))
    return Move("pickSegment", (s, start, end))


def pick_step(roots: list[bytes], j: int) -> Move:
    before = _entry(roots[j], _list_siblings(STEPS_DOMAIN, roots, j))
    after = _entry(roots[j + 1], _list_siblings(STEPS_DOMAIN, roots, j + 1))
    return Move("pickStep", (j, before, after))


def pick_node(jg: JobGraph, roots: TraceRoots, i: int) -> Move:
    proof = trace_siblings(roots, i)
    value = roots.value(i) if isinstance(roots, WalkedTrace) else roots[i]
    desc = jg.nodes[i]
    gproof = _list_siblings(GRAPH_DOMAIN, [n.hash() for n in jg.nodes], i)
    return Move("pickNode", (i, value, proof, desc.encode(), gproof, _cfg(jg)))


# -- the walk down a large trace (PROTOCOL §7.3) -------------------------------------------------


def walked_trace(comp: Computation, v: GameView) -> TraceRoots:
    """The defender's trace as posted: the whole list, or what its walk showed (with `comp`'s
    own trace for the subtrees left of the walked path, which agree)."""
    if v.node_roots is not None:
        return v.node_roots
    own = comp.trace_roots(v.global_step)
    return WalkedTrace(len(own), own, list(v.trace_rounds))


def state_rounds(jg: JobGraph, v: GameView) -> list[Round]:
    """The rounds of S_{t+1}'s walk as posted: the top (TraceRootPosted), then each
    StateSubtreePosted."""
    depth = merkle.depth_for(len(jg.config.state_names))
    top = (depth - min(6, depth), 0, list(v.state_top or []))
    return [top, *v.state_rounds]


def prove_producer(comp: Computation, jg: JobGraph, v: GameView, state: int) -> Move:
    """Opens state tensor `state`'s config entry, its producer's trace entry (the trace is
    agreed: its own) and the disputed S_{t+1}'s entry as the walk showed it."""
    node = jg.config.state_producers[state]
    own = comp.trace_roots(v.global_step)
    n = len(jg.config.state_names)
    mine = state_entries(jg, [own[p] for p in jg.config.state_producers])
    posted = WalkedTrace(n, mine, state_rounds(jg, v), merkle.STATE_DOMAIN)
    trace_entry = _entry(own[node], trace_siblings(own, node))
    state_entry = _entry(posted.value(state), posted.siblings(state))
    return Move("proveProducer", (state, jg.config.state_entry(state), trace_entry, state_entry,
                                  _cfg(jg)))  # fmt: skip


def merkle_level(leaves: list[bytes], height: int) -> list[bytes]:
    """The nodes `height` levels above the leaves of the padded tree over leaf hashes."""
    arr = np.frombuffer(b"".join(leaves), dtype=np.uint8).reshape(-1, 32)
    return [row.tobytes() for row in merkle.levels(arr)[height]]


def subtree_nodes(leaves: list[bytes], v: GameView) -> tuple[int, int, list[bytes]]:
    """(height, first index, nodes) of the next round of the walk down the leaf tree: the 2^m
    nodes m = min(6, h) levels below the disputed subtree (the whole tree at first)."""
    h = v.walk_height or merkle.depth_for(len(leaves))
    stride = min(WALK_STRIDE, h)
    first = v.walk_index << stride
    level = merkle_level(leaves, h - stride)
    return h - stride, first, level[first : first + (1 << stride)]


def pick_leaf(leaves: list[bytes], j: int) -> Move:
    return Move("pickLeaf", (j, leaves[j], leaf_siblings(leaves, j)))


def prove_element(comp: Computation, jg: JobGraph, v: GameView, offset: int) -> Move:
    """The one-step proof of element `offset` of the revealed chunk, inputs from `comp`."""
    desc = jg.nodes[v.node]
    element = v.leaf * LEAF + offset
    openings: list[tuple] = []
    if element < desc.numel:
        openings = comp.element_openings(jg, walked_trace(comp, v), v.global_step, v.node, element)
    return Move("proveElement", (offset, v.chunk, desc.encode(), _cfg(jg), openings))


# -- the accumulator bisection (PROTOCOL §7.10) ---------------------------------------------------


def bisects(
    comp: Computation, jg: JobGraph, v: GameView, offset: int, direct_terms: int | None
) -> bool:
    """Whether to dispute element `offset` of the revealed chunk through its chain: a real
    (not padding) element of a reduction longer than `direct_terms` (None: the computation's
    `direct_terms`, the most terms whose direct proof stays cheap for its kind of graph)."""
    if direct_terms is None:
        direct_terms = comp.direct_terms
    desc = jg.nodes[v.node]
    terms = comp.reduction_terms(jg, v.node)
    return v.leaf * LEAF + offset < desc.numel and terms > direct_terms


def element_chain(comp: Computation, jg: JobGraph, t: int, node: int, element: int) -> np.ndarray:
    """acc_0 … acc_{K+1} of element `element` of node `node` at step t, from `comp`'s inputs."""
    return comp.element_chain(jg, t, node, element)


def _first_diff_part(v: GameView, mine: np.ndarray) -> int:
    """The part whose end is the first cut value differing from `mine` (the last part, whose end
    is the disputed acc_hi, when every posted cut value agrees)."""
    values = v.cut_values or []
    for i, (pos, value) in enumerate(zip(reduction.cuts(v.lo, v.hi), values, strict=True)):
        if int(mine[pos]) != value:
            return i
    return len(values)


def pick_accumulators(v: GameView, part: int) -> Move:
    return Move("pickAccumulators", (part, list(v.cut_values or [])))


def prove_accumulation(comp: Computation, jg: JobGraph, v: GameView) -> Move:
    """The proof of accumulation step `v.hi` of the disputed element: the openings of term
    hi's input elements (none for the finishing step hi = K + 1)."""
    desc = jg.nodes[v.node]
    openings: list[tuple] = []
    terms = comp.reduction_terms(jg, v.node)
    if v.hi <= terms:
        openings = comp.element_openings(
            jg, walked_trace(comp, v), v.global_step, v.node, v.element, term=v.hi - 1
        )
    return Move("proveAccumulation", (desc.encode(), _cfg(jg), openings))
