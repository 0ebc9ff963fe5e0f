"""Decision logic of the two sides of a dispute game: given what a party computed and what the
game shows, return its next move. Pure: no chain access (see client.py for I/O).

The defender (a solver defending its checkpoints, or a verifier its attestation) answers every
question from its own `Computation`; with a faulty computation it is a cheater, and its answers
are exactly what that cheater would post (the chain rejects the ones that cannot be posted, and
a defender that cannot move loses on time). The honest challenger always names the *first*
disagreement (segment, step, node, leaf, element), so everything before it is agreed and the
last move's inputs can be opened from its own data. `LyingChallenger` disputes a true claim.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import numpy as np

from agents.dispute.encoding import (
    GRAPH_DOMAIN,
    KIND_BATCH,
    KIND_DATA_X,
    KIND_DATA_Y,
    KIND_NODE,
    KIND_STATE,
    STEPS_DOMAIN,
)
from agents.dispute.graph import JobGraph
from agents.dispute.trace import Computation
from agents.training import merkle
from agents.training.graph import element_deps

LEAF = merkle.LEAF_ELEMS


class Phase:
    NONE = 0
    POST_CHECKPOINTS = 1
    PICK_SEGMENT = 2
    OPEN_SEGMENT = 3
    PICK_STEP = 4
    POST_TRACE = 5
    PICK_NODE = 6
    POST_LEAVES = 7
    PICK_LEAF = 8
    REVEAL_CHUNK = 9
    PROVE_ELEMENT = 10
    RESOLVED = 11


DEFENDER_PHASES = {
    Phase.POST_CHECKPOINTS,
    Phase.OPEN_SEGMENT,
    Phase.POST_TRACE,
    Phase.POST_LEAVES,
    Phase.REVEAL_CHUNK,
}


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
        if v.phase == Phase.POST_TRACE:
            return Move("postTrace", (c.trace_roots(t), _cfg(self.jg)))
        out = c.node_output(t, v.node)
        if v.phase == Phase.POST_LEAVES:
            return Move("postLeaves", (tensor_leaves(out),))
        return Move("revealChunk", (tensor_chunk(out, v.leaf),))


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
        if v.phase == Phase.PICK_NODE:
            return self._pick_node(v)
        if v.phase == Phase.PICK_LEAF:
            return self._pick_leaf(v)
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

    def _pick_leaf(self, v: GameView) -> Move | None:
        mine = tensor_leaves(self.comp.node_output(v.global_step, v.node))
        leaves = v.leaves or []
        j = _first_diff(mine, leaves)
        return None if j is None else pick_leaf(leaves, j)

    def _prove(self, v: GameView) -> Move | None:
        chunk = v.chunk or b""
        mine = tensor_chunk(self.comp.node_output(v.global_step, v.node), v.leaf)
        offsets = [e for e in range(LEAF) if chunk[4 * e : 4 * e + 4] != mine[4 * e : 4 * e + 4]]
        if not offsets:
            return None
        return prove_element(self.comp, self.jg, v, offsets[0])


def pick_segment(cps: list[bytes], s: int) -> Move:
    dom = merkle.CHECKPOINT_DOMAIN
    start = _entry(cps[s], _list_siblings(dom, cps, s))
    end = _entry(cps[s + 1], _list_siblings(dom, cps, s + 1))
    return Move("pickSegment", (s, start, end))


def pick_step(roots: list[bytes], j: int) -> Move:
    before = _entry(roots[j], _list_siblings(STEPS_DOMAIN, roots, j))
    after = _entry(roots[j + 1], _list_siblings(STEPS_DOMAIN, roots, j + 1))
    return Move("pickStep", (j, before, after))


def pick_node(jg: JobGraph, roots: list[bytes], i: int) -> Move:
    proof = _list_siblings(merkle.TRACE_DOMAIN, roots, i)
    desc = jg.nodes[i]
    gproof = _list_siblings(GRAPH_DOMAIN, [n.hash() for n in jg.nodes], i)
    return Move("pickNode", (i, roots[i], proof, desc.encode(), gproof, _cfg(jg)))


def pick_leaf(leaves: list[bytes], j: int) -> Move:
    return Move("pickLeaf", (j, leaves[j], leaf_siblings(leaves, j)))


def prove_element(comp: Computation, jg: JobGraph, v: GameView, offset: int) -> Move:
    """The one-step proof of element `offset` of the revealed chunk, inputs from `comp`."""
    desc = jg.nodes[v.node]
    element = v.leaf * LEAF + offset
    openings: list[tuple] = []
    if element < desc.numel:
        r, c = divmod(element, desc.cols)
        openings = element_openings(comp, jg, v.node_roots or [], v.global_step, v.node, r, c)
    return Move("proveElement", (offset, v.chunk, desc.encode(), _cfg(jg), openings))


def element_openings(
    comp: Computation, jg: JobGraph, node_roots: list[bytes], t: int, i: int, r: int, c: int
) -> list[tuple]:
    """Openings of every input element output (r, c) of node i at step t depends on."""
    g = jg.graph
    node, desc = g.nodes[i], jg.nodes[i]
    idx = comp.batch_indices(t)
    labels = comp.node_output(t, g.index_of("y")).reshape(-1).cpu().numpy()
    deps = element_deps(g, i, r, c, idx, labels)
    out = []
    for k, ref in enumerate(node.inputs):
        operand = desc.inputs[k]
        if operand.kind == KIND_BATCH:
            out.append((bytes(32), [], bytes(32), []))
            continue
        tensor, list_proof = _source(comp, jg, node_roots, t, operand, ref)
        cols = operand.cols
        elems = {d.row * cols + x for d in deps if d.ref == ref for x in d.cols}
        leaves = sorted({e // LEAF for e in elems})
        chunks = []
        for leaf in leaves:
            ep = merkle.element_proof(tensor, leaf * LEAF)
            chunks.append((leaf, ep.chunk, list(ep.siblings)))
        out.append((merkle.tensor_root(tensor), list_proof, merkle.data_root(tensor), chunks))
    return out


def _source(comp: Computation, jg: JobGraph, node_roots: list[bytes], t: int, operand, ref: str):
    if operand.kind == KIND_STATE:
        entries = comp.entries(t)
        return comp.state(t)[ref], _list_siblings(merkle.STATE_DOMAIN, entries, operand.index)
    if operand.kind == KIND_NODE:
        proof = _list_siblings(merkle.TRACE_DOMAIN, node_roots, operand.index)
        return comp.node_output(t, operand.index), proof
    data = comp.engine.data
    roots = [merkle.tensor_root(data.x), merkle.tensor_root(data.y)]
    k = 0 if operand.kind == KIND_DATA_X else 1
    assert operand.kind in (KIND_DATA_X, KIND_DATA_Y)
    return (data.x if k == 0 else data.y), _list_siblings(merkle.DATASET_DOMAIN, roots, k)


# -- a challenger disputing a true claim (tests) ------------------------------------------------


@dataclass
class LyingChallenger:
    """Disputes a claim it cannot fault: picks random positions at every level, then proves a
    random element with true openings (`forge=False`: the only ones that verify) or with one
    input word altered (`forge=True`: the prover rejects it); `stop_at` falls silent."""

    comp: Computation  # honest data, for openings and proofs it needs
    jg: JobGraph
    seed: int = 0
    forge: bool = False
    stop_at: int | None = None
    segment: int | None = None  # dispute this segment rather than a random one
    node: int | None = None  # and this node
    element: int | None = None  # and this element of it (row-major index)
    rng: random.Random = field(init=False)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)

    def next_move(self, v: GameView) -> Move | None:
        if v.phase in DEFENDER_PHASES or v.phase in (Phase.NONE, Phase.RESOLVED):
            return None
        if v.phase == self.stop_at:
            return None
        rnd = self.rng.randrange
        if v.phase == Phase.PICK_SEGMENT:
            s = rnd(v.segments) if self.segment is None else self.segment
            return pick_segment(v.checkpoints or [], s)
        if v.phase == Phase.PICK_STEP:
            return pick_step(v.step_roots or [], rnd(v.interval))
        if v.phase == Phase.PICK_NODE:
            i = rnd(len(self.jg.nodes)) if self.node is None else self.node
            return pick_node(self.jg, v.node_roots or [], i)
        if v.phase == Phase.PICK_LEAF:
            leaf = rnd(len(v.leaves or [])) if self.element is None else self.element // LEAF
            return pick_leaf(v.leaves or [], leaf)
        desc = self.jg.nodes[v.node]
        in_range = min(LEAF, desc.numel - v.leaf * LEAF)
        offset = rnd(in_range) if self.element is None else self.element % LEAF
        move = prove_element(self.comp, self.jg, v, offset)
        if self.forge:
            move = _forged(move)
        return move


def _forged(move: Move) -> Move:
    """The same proof with one opened input word flipped (a lie about an input)."""
    offset, chunk, desc, cfg, openings = move.args
    for k, (troot, proof, droot, chunks) in enumerate(openings):
        if chunks:
            leaf, data, sib = chunks[0]
            data = bytes([data[0] ^ 0x40]) + data[1:]
            openings = list(openings)
            openings[k] = (troot, proof, droot, [(leaf, data, sib), *chunks[1:]])
            break
    return Move(move.fn, (offset, chunk, desc, cfg, openings))
