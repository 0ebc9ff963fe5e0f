"""A dispute game as the dispute page shows it: the bisection path (checkpoint segment → step →
node → element), every move with its party, time and gas, the final one-step proof (the
operator, the input values it read, the defender's output against the chain's) and what the
result moved (slashes, bonds, credits).

Everything is read from the chain: the game's views and events, the moves' transactions and
their calldata (the decisive move carries the node's descriptor and the opened input chunks,
each checked by the contract against the committed roots before it could resolve the game).
Only the module a node came from needs the model's published bundle (agents/explore/
provenance.py); without it that one label says why it is missing.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from math import prod
from typing import Any

import numpy as np
from eth_abi import decode as abi_decode

from agents.core.enums import Phase, Side
from agents.core.events import Event
from agents.dispute import encoding as enc
from agents.dispute.model_graph import source_elements
from agents.explore.reads import ChainReads, NotFound
from agents.training import decompose
from agents.training.merkle import LEAF_ELEMS
from agents.training.registry import OPS, Node

#: The most input elements listed per operand of a one-step proof (a broadcast reads one, a
#: gather a few; a list longer than this says how many more there are).
SHOWN = 8
#: The game's move events (ConfigRegistered and UnitConfigRegistered are a job's, topic 1 its id).
MOVE_EVENTS = (
    "GameOpened",
    "CheckpointsPosted",
    "SegmentPicked",
    "SegmentOpened",
    "StepPicked",
    "TracePosted",
    "TraceRootPosted",
    "TraceSubtreePosted",
    "TraceSubtreePicked",
    "ProducerProved",
    "NodePicked",
    "LeavesPosted",
    "LeafPicked",
    "ChunkRevealed",
    "ElementProved",
    "SubtreePosted",
    "SubtreePicked",
    "ReductionOpened",
    "AccumulatorsPosted",
    "AccumulatorsPicked",
    "AccumulationProved",
    "GameResolved",
)
#: The JobManager's record of a game's end (topic 1 the unit, `gameId` an argument).
RESULT_EVENTS = ("DisputeResolved", "DisputeResultHeld", "DisputeVoided")
#: What moves with a result, in the result's transaction.
MOVED_EVENTS = ("NodeSlashed", "Credited", "JackpotIncreased", "StakeReleased", "UnitOpened")
V3_NAMES = {op.code: name for name, op in OPS.items()}
V1_NAMES = enc.OP_NAMES
KIND_NAMES = {
    enc.KIND_STATE: "state tensor",
    enc.KIND_NODE: "node output",
    enc.KIND_WORD: "hyper-parameter",
    enc.KIND_BATCH_X: "batch rows (x)",
    enc.KIND_BATCH_Y: "batch labels (y)",
    enc.KIND_WINDOW_X: "token windows (x)",
    enc.KIND_WINDOW_Y: "token windows (y)",
    enc.KIND_CONST: "constant",
    enc.KIND_DATA_X: "dataset X",
    enc.KIND_DATA_Y: "dataset Y",
    enc.KIND_BATCH: "batch indices",
}


@dataclass(frozen=True)
class Move:
    """One transaction of the game: what it did (its events, in words), who sent it, when,
    and its gas."""

    number: int
    what: tuple[str, ...]
    party: str  # "defender", "challenger" or "anyone"
    sender: str
    time: int
    gas: int
    tx_hash: str
    block: int


@dataclass(frozen=True)
class Level:
    """One level of the bisection picture: `size` candidates, the one the game narrowed to."""

    name: str
    size: int
    picked: int | None
    label: str


@dataclass(frozen=True)
class Value:
    """A binary32 or uint32 word as the page shows it."""

    bits: int
    dtype: int  # enc.DTYPE_F32 or enc.DTYPE_U32

    @property
    def text(self) -> str:
        if self.dtype == enc.DTYPE_F32:
            return f"{struct.unpack('>f', self.bits.to_bytes(4, 'big'))[0]:.9g}"
        return str(self.bits)

    @property
    def hex(self) -> str:
        return f"0x{self.bits:08x}"


@dataclass(frozen=True)
class ProofInput:
    """One operand of the proven operator: where it comes from and the elements read."""

    position: int
    source: str
    shape: tuple[int, ...]
    elements: tuple[tuple[int, Value], ...]
    more: int = 0  # elements read beyond those listed


@dataclass(frozen=True)
class Proof:
    """The decisive move: the operator recomputed on chain and both sides' outputs."""

    kind: str  # "element", "accumulation", "producer" or "timeout"
    operator: str | None = None
    order: str | None = None  # the operator's exact evaluation order (its registry entry)
    element: int | None = None
    inputs: tuple[ProofInput, ...] = ()
    claimed: Value | None = None  # the defender's
    correct: Value | None = None  # the chain's recomputation (the challenger's claim)
    note: str = ""


@dataclass(frozen=True)
class NodeInfo:
    index: int
    operator: str
    shape: tuple[int, ...]
    module: str  # where it came from in the model (provenance.py), or why that is not known


@dataclass
class DisputeView:
    game_id: int
    unit_id: int
    defender: str
    challenger: str
    phase: Phase
    winner: Side
    by_timeout: bool
    step_offset: int
    steps: int
    interval: int
    levels: list[Level] = field(default_factory=list)
    node: NodeInfo | None = None
    element: int | None = None
    global_step: int | None = None
    moves: list[Move] = field(default_factory=list)
    proof: Proof | None = None
    moved: list[str] = field(default_factory=list)  # what the result moved, in words
    result: str = ""  # the JobManager's record of the end (held, resolved, voided)

    @property
    def job_id(self) -> int:
        return self.unit_id >> 32

    @property
    def resolved(self) -> bool:
        return self.phase == Phase.RESOLVED

    @property
    def winner_name(self) -> str:
        return {Side.DEFENDER: "defender", Side.CHALLENGER: "challenger"}.get(self.winner, "")


async def read_dispute(reads: ChainReads, game_id: int, graph_info=None) -> DisputeView:
    """Game `game_id` of the JobManager's dispute game; NotFound when there is none.
    `graph_info(job_id, node)` -> (operator, module) | None gives the node's provenance."""
    game = reads.contract("DisputeGame")
    if game is None:
        raise NotFound("this deployment has no dispute game (a mock arbiter decides disputes)")
    if game_id <= 0 or game_id >= 1 << 64:
        raise NotFound(f"no dispute game {game_id}: game ids are positive integers")
    claim = await reads.call(game.functions.claimOf(game_id))
    if int(claim.defender, 16) == 0:
        raise NotFound(f"no dispute game {game_id} on DisputeGame {game.address}")
    p = await reads.call(game.functions.progressOf(game_id))
    v = DisputeView(
        game_id=game_id,
        unit_id=int(claim.unitId),
        defender=claim.defender,
        challenger=claim.challenger,
        phase=Phase(p.phase),
        winner=Side(p.winner),
        by_timeout=False,
        step_offset=int(claim.stepOffset),
        steps=int(claim.steps),
        interval=int(claim.interval),
    )
    events = await reads.events(["DisputeGame"], MOVE_EVENTS, topic1=[game_id])
    v.moves = await _moves(reads, events, v)
    by_name: dict[str, list[Event]] = {}
    for e in events:
        by_name.setdefault(e.name, []).append(e)
    _levels(v, by_name, p)
    resolved = by_name.get("GameResolved")
    if resolved:
        v.by_timeout = bool(resolved[-1].args["byTimeout"])
    await _node_and_proof(reads, v, by_name, graph_info)
    await _result(reads, v)
    return v


async def _moves(reads: ChainReads, events: Sequence[Event], v: DisputeView) -> list[Move]:
    moves: list[Move] = []
    by_tx: dict[str, list[Event]] = {}
    for e in events:
        by_tx.setdefault(e.raw.tx_hash, []).append(e)
    for i, (tx_hash, evs) in enumerate(by_tx.items()):
        tx = await reads.tx(tx_hash)
        sender = tx.sender.lower()
        party = (
            "defender"
            if sender == v.defender.lower()
            else "challenger"
            if sender == v.challenger.lower()
            else "anyone"
        )
        moves.append(
            Move(
                i + 1,
                tuple(_words(e) for e in evs),
                party,
                tx.sender,
                tx.time,
                tx.gas_used,
                tx_hash,
                tx.block,
            )
        )
    return moves


def _words(e: Event) -> str:
    """One event of a move, in words."""
    a, n = e.args, e.name
    if n == "GameOpened":
        return f"opened over {a['steps']} steps from step {a['stepOffset']}"
    if n == "CheckpointsPosted":
        return f"posted {len(a['roots'])} checkpoint roots"
    if n == "SegmentPicked":
        return f"disputed checkpoint segment {a['segment']}"
    if n == "SegmentOpened":
        return f"listed the {len(a['intermediateRoots']) + 2} state roots of segment {a['segment']}"
    if n == "StepPicked":
        return f"disputed step {a['step']} of the segment"
    if n == "TracePosted":
        return f"posted the op trace of global step {a['globalStep']} ({len(a['roots'])} nodes)"
    if n == "TraceRootPosted":
        return f"committed the op trace of global step {a['globalStep']}"
    if n in ("TraceSubtreePosted", "SubtreePosted"):
        return f"posted {len(a['nodes'])} tree nodes at height {a['height']}"
    if n in ("TraceSubtreePicked", "SubtreePicked"):
        return f"disputed tree node {a['index']} at height {a['height']}"
    if n == "ProducerProved":
        return f"proved node {a['node']} produces state tensor {a['state']}"
    if n == "NodePicked":
        return f"disputed node {a['node']}"
    if n == "LeavesPosted":
        return f"posted the {len(a['leaves'])} leaf hashes of node {a['node']}"
    if n == "LeafPicked":
        return f"disputed leaf {a['leaf']} (elements {a['leaf'] * LEAF_ELEMS}…)"
    if n == "ChunkRevealed":
        return f"revealed leaf {a['leaf']}"
    if n == "ElementProved":
        return f"the chain recomputed element {a['element']}"
    if n == "ReductionOpened":
        return f"opened the reduction of element {a['element']} ({a['terms']} terms)"
    if n == "AccumulatorsPosted":
        return f"posted accumulators of span ({a['lo']}, {a['hi']})"
    if n == "AccumulatorsPicked":
        return f"disputed accumulator span ({a['lo']}, {a['hi']})"
    if n == "AccumulationProved":
        return f"the chain recomputed accumulation step {a['position']}"
    if n == "GameResolved":
        side = "challenger" if a["challengerWon"] else "defender"
        return f"resolved: the {side} won" + (
            " (the other's clock ran out)" if a["byTimeout"] else ""
        )
    return n


def _levels(v: DisputeView, by: dict[str, list[Event]], p: Any) -> None:
    """checkpoint segment → step → node → element, as far as the game went."""
    segments = max(1, v.steps // max(1, v.interval))
    seg = by.get("SegmentPicked")
    segment = int(seg[-1].args["segment"]) if seg else (0 if segments == 1 else None)
    first = v.step_offset + (segment or 0) * v.interval
    v.levels.append(
        Level(
            "checkpoint segment",
            segments,
            segment,
            f"segment {segment} of {segments}: steps {first}–{first + v.interval}"
            if segment is not None
            else f"{segments} segments",
        )
    )
    step = by.get("StepPicked")
    if step is None or segment is None:
        return
    j = int(step[-1].args["step"])
    v.global_step = first + j
    v.levels.append(
        Level("step", v.interval, j, f"step {j} of the segment: global step {v.global_step}")
    )
    trace = by.get("TracePosted")
    nodes = len(trace[-1].args["roots"]) if trace else int(p.traceNodes)
    picked = by.get("NodePicked")
    if picked is None:
        return
    node = int(picked[-1].args["node"])
    v.levels.append(Level("node", nodes, node, f"node {node} of {nodes}"))
    element = None
    for name in ("ElementProved", "ReductionOpened"):
        if by.get(name):
            element = int(by[name][-1].args["element"])
    leaf = by.get("LeafPicked")
    size = int(p.rows) * int(p.cols)
    if element is None and leaf:
        first_el = int(leaf[-1].args["leaf"]) * LEAF_ELEMS
        v.levels.append(
            Level(
                "element",
                size,
                None,
                f"leaf {leaf[-1].args['leaf']}: elements "
                f"{first_el}–{first_el + LEAF_ELEMS - 1} of {size}",
            )
        )
    elif element is not None:
        v.element = element
        v.levels.append(Level("element", size, element, f"element {element} of {size}"))


async def _node_and_proof(
    reads: ChainReads, v: DisputeView, by: dict[str, list[Event]], graph_info
) -> None:
    """The node's operator (from the descriptor the pickNode move carried) and module, and the
    decisive move's proof."""
    game = reads.contract("DisputeGame")
    picked = by.get("NodePicked")
    if picked:
        tx = await reads.tx(picked[-1].raw.tx_hash)
        _, args = game.decode_function_input(tx.input)
        desc = decode_node(bytes(args["nodeDesc"]))
        index = int(picked[-1].args["node"])
        module = "the model's bundle is not read for a version-1 job: its step graph is fixed"
        if desc.version == 3:
            module = "unknown: the job's model bundle was not read"
            if graph_info is not None:
                module = await graph_info(v.job_id, index)
        v.node = NodeInfo(index, desc.operator, desc.shape, module)
    if by.get("ElementProved"):
        v.proof = await _element_proof(reads, v, by["ElementProved"][-1])
    elif by.get("AccumulationProved"):
        v.proof = await _accumulation_proof(reads, v, by["AccumulationProved"][-1])
    elif by.get("ProducerProved"):
        a = by["ProducerProved"][-1].args
        v.proof = Proof(
            "producer",
            note=(
                f"node {a['node']}'s traced output root 0x{bytes(a['traced']).hex()[:16]}… against "
                f"the root 0x{bytes(a['posted']).hex()[:16]}… the defender posted for state tensor "
                f"{a['state']}: {'they differ' if a['traced'] != a['posted'] else 'equal'}"
            ),
        )
    elif v.resolved and v.by_timeout:
        loser = "defender" if v.winner == Side.CHALLENGER else "challenger"
        v.proof = Proof("timeout", note=f"the {loser}'s clock ran out")


@dataclass(frozen=True)
class Desc:
    """A node descriptor from calldata, either version."""

    version: int
    operator: str
    op: int
    dtype: int
    shape: tuple[int, ...]
    attrs: tuple[int, ...]
    inputs: tuple[tuple[int, int, bytes, int, tuple[int, ...]], ...]  # kind, index, key, dt, shape


def decode_node(raw: bytes) -> Desc:
    """A GraphNode (version 3, op code ≥ 64) or a NodeDesc (version 1) as abi-encoded."""
    try:
        ((op, dtype, shape, attrs, ins),) = abi_decode([enc.GRAPH_NODE_T], raw)
        if op >= enc.FIRST_V3:
            inputs = tuple(
                (int(k), int(i), bytes(key), int(dt), tuple(int(s) for s in sh))
                for k, i, key, dt, sh in ins
            )
            return Desc(
                3, V3_NAMES.get(op, f"op {op}"), op, dtype, tuple(shape), tuple(attrs), inputs
            )
    except Exception:  # noqa: BLE001 - not a GraphNode: a NodeDesc below
        pass
    ((op, dtype, rows, cols, param, ins),) = abi_decode([enc.NODE_T], raw)
    inputs = tuple(
        (int(k), int(i), bytes(name), int(dt), (int(r), int(c))) for k, i, name, dt, r, c in ins
    )
    return Desc(1, V1_NAMES.get(op, f"op {op}"), op, dtype, (rows, cols), (param,), inputs)


def _order(desc: Desc) -> str | None:
    op = OPS.get(desc.operator)
    return getattr(op, "order", None)


async def _element_proof(reads: ChainReads, v: DisputeView, ev: Event) -> Proof:
    game = reads.contract("DisputeGame")
    tx = await reads.tx(ev.raw.tx_hash)
    _, args = game.decode_function_input(tx.input)
    desc = decode_node(bytes(args["nodeDesc"]))
    e = int(ev.args["element"])
    reads_ = _reads(desc, e)
    inputs = await _inputs(reads, v, desc, reads_, args["openings"], args["cfg"])
    return Proof(
        "element",
        desc.operator,
        _order(desc),
        e,
        inputs,
        Value(int(ev.args["claimed"]), desc.dtype),
        Value(int(ev.args["correct"]), desc.dtype),
    )


async def _accumulation_proof(reads: ChainReads, v: DisputeView, ev: Event) -> Proof:
    game = reads.contract("DisputeGame")
    tx = await reads.tx(ev.raw.tx_hash)
    _, args = game.decode_function_input(tx.input)
    desc = decode_node(bytes(args["nodeDesc"]))
    position = int(ev.args["position"])
    opened = []
    for k, opening in enumerate(args["openings"]):
        vals = tuple(
            (int(c["leaf"]) * LEAF_ELEMS + j, Value(w, desc.inputs[k][3]))
            for c in opening["chunks"]
            for j, w in enumerate(_words32(bytes(c["data"])))
        )
        opened.append(
            ProofInput(
                k,
                _source(desc.inputs[k]),
                desc.inputs[k][4],
                vals[:SHOWN],
                max(0, len(vals) - SHOWN),
            )
        )
    note = (
        f"accumulation step {position} of element {v.element}: from the agreed "
        f"acc_{position - 1} = {Value(int(ev.args['loValue']), enc.DTYPE_F32).text}; the "
        "opened chunks of the term's inputs"
    )
    return Proof(
        "accumulation",
        desc.operator,
        _order(desc),
        v.element,
        tuple(opened),
        Value(int(ev.args["claimed"]), enc.DTYPE_F32),
        Value(int(ev.args["correct"]), enc.DTYPE_F32),
        note,
    )


def _reads(desc: Desc, e: int) -> list[list[int]] | None:
    """The input elements the proof of element e reads (the registry's dependency rule), None
    where they depend on data (indexing operators) or the node is version 1."""
    if desc.version != 3 or desc.operator in (
        "index_rows",
        "gather",
        "scatter_value",
        "index_add_rows",
        "const",
    ):
        return None
    node = Node(
        desc.operator,
        tuple(range(len(desc.inputs))),
        desc.attrs,
        desc.shape,
        "f32" if desc.dtype == enc.DTYPE_F32 else "i32",
    )
    shapes = [inp[4] for inp in desc.inputs]
    out: list[set[int]] = [set() for _ in desc.inputs]
    for k, elems in OPS[desc.operator].deps(node, shapes, e):
        out[k].update(elems)
    return [sorted(r) for r in out]


async def _inputs(
    reads: ChainReads,
    v: DisputeView,
    desc: Desc,
    wanted: list[list[int]] | None,
    openings: Sequence[Any],
    cfg: Any,
) -> tuple[ProofInput, ...]:
    picks = None
    out = []
    for k, inp in enumerate(desc.inputs):
        kind, _, key, dtype, shape = inp
        if kind == enc.KIND_WORD:
            out.append(
                ProofInput(
                    k, _source(inp), shape, ((0, Value(int.from_bytes(key[-4:], "big"), dtype)),)
                )
            )
            continue
        chunks = {int(c["leaf"]): _words32(bytes(c["data"])) for c in openings[k]["chunks"]}
        if wanted is None:  # data-dependent reads: every opened element
            vals = tuple(
                (leaf * LEAF_ELEMS + j, Value(w, dtype))
                for leaf, ws in sorted(chunks.items())
                for j, w in enumerate(ws)
            )
            out.append(ProofInput(k, _source(inp), shape, vals[:SHOWN], max(0, len(vals) - SHOWN)))
            continue
        elems = wanted[k]
        src = elems
        if kind in (enc.KIND_BATCH_X, enc.KIND_BATCH_Y, enc.KIND_WINDOW_X, enc.KIND_WINDOW_Y):
            if picks is None:
                picks = await _picks(reads, v, cfg)
            src = source_elements(picks, enc.TensorInput(kind, 0, key, dtype, shape), elems)
        vals = []
        for el, s in zip(elems, src, strict=True):
            ws = chunks.get(s // LEAF_ELEMS)
            if ws is not None:
                vals.append((el, Value(ws[s % LEAF_ELEMS], dtype)))
        out.append(
            ProofInput(k, _source(inp), shape, tuple(vals[:SHOWN]), max(0, len(vals) - SHOWN))
        )
    return tuple(out)


async def _picks(reads: ChainReads, v: DisputeView, cfg: Any) -> np.ndarray:
    """The disputed step's batch positions (PROTOCOL §4) from the config the move carried and
    the unit's placement."""
    game = reads.contract("DisputeGame")
    placement = await reads.call(game.functions.placementOf(v.job_id))
    shards, shard = int(placement.shards), int(placement.shard)
    seed, batch, n = int(cfg["seed"]), int(cfg["batchSize"]), int(cfg["numExamples"])
    return decompose.unit_batch_indices(seed, v.global_step or 0, batch, n, max(1, shards), shard)


def _source(inp: tuple) -> str:
    kind, index, _, _, shape = inp
    what = KIND_NAMES.get(kind, f"kind {kind}")
    if kind in (enc.KIND_STATE, enc.KIND_NODE):
        what += f" {index}"
    return f"{what} {list(shape)}" if prod(shape) > 1 else what


def _words32(chunk: bytes) -> list[int]:
    return [int.from_bytes(chunk[i : i + 4], "big") for i in range(0, len(chunk), 4)]


async def _result(reads: ChainReads, v: DisputeView) -> None:
    """The JobManager's record of the game's end and what moved in its transaction."""
    ends = [
        e
        for e in await reads.events(["JobManager"], RESULT_EVENTS, topic1=[v.unit_id])
        if int(e.args["gameId"]) == v.game_id
    ]
    for end in ends:
        a = end.args
        if end.name == "DisputeResultHeld":
            v.result = (
                f"the challenger's win is held until {a['until']} (a forced round may void it)"
            )
        elif end.name == "DisputeVoided":
            v.result = "voided: a forced error was revealed; the challenger's bond went back"
        else:
            v.result = (
                "the challenger won: the unit re-opened"
                if a["challengerWon"]
                else "the defender won: the unit's challenge window runs again"
            )
        block = end.raw.block_number
        same_tx = [
            e
            for e in await reads.events(
                ["JobManager", "NodeRegistry"], MOVED_EVENTS, start=block, end=block
            )
            if e.raw.tx_hash == end.raw.tx_hash
        ]
        v.moved += [moved_words(e) for e in same_tx]


def moved_words(e: Event) -> str:
    """A money or stake event in words (tokens of 18 decimals)."""
    a = e.args
    if e.name == "NodeSlashed":
        return f"{a['node']} slashed {tokens(a['amount'])}"
    if e.name == "Credited":
        return f"{a['account']} credited {tokens(a['amount'])}"
    if e.name == "JackpotIncreased":
        return f"jackpot +{tokens(a['amount'])} (now {tokens(a['jackpot'])})"
    if e.name == "StakeReleased":
        return f"{a['node']}'s lock of {tokens(a['amount'])} released"
    if e.name == "UnitOpened":
        return f"unit re-opened for claims (attempt {int(a['attempt']) + 1})"
    return e.name


def tokens(amount: int) -> str:
    return f"{int(amount) / 10**18:g} tokens"
