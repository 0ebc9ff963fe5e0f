"""The accumulator bisection on chain (PROTOCOL §7.10): a disputed element of a reduction is
narrowed to one accumulation step, which the one-step prover recomputes.

- a cheating defender (one wrong element of a matmul_nt, row_sum or row_max node) loses to the
  honest challenger through openReduction … proveAccumulation, not on time, whatever the
  defender posts inside the chain;
- an honest defender wins against a challenger bisecting a true element at random parts (true
  openings, or forged ones the prover rejects), for every reduction including mean;
- every move's arguments are bounded: a round posts at most 15 words.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
from dispute_fixtures import advance, examples, make_job, open_game, play_to, reverts
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from agents.adversaries.faults import Fault, faulty_party
from agents.adversaries.liars import ChainLiar, LyingChallenger
from agents.dispute import reduction
from agents.dispute.client import GameRecord, run_game
from agents.dispute.player import (
    Challenger,
    Defender,
    GameView,
    Move,
    Phase,
)

SETTINGS = dict(suppress_health_check=list(HealthCheck), deadline=None)
BISECTION = ("openReduction", "postAccumulators", "pickAccumulators", "proveAccumulation")
LIVE_REDUCTIONS = ("fwd0.mm", "bwd0.dw", "bwd0.db", "loss.max", "loss.sum", "bwd1.da", "fwd1.mm")


def bisected(rec: GameRecord) -> bool:
    fns = [fn for fn, _ in rec.moves]
    return all(fn in fns for fn in BISECTION) and fns[-1] == "proveAccumulation"


def play(dep, chain, job, liar, honest, defender, challenger) -> GameRecord:
    sid = chain.snapshot()
    try:
        gid = open_game(dep, job, liar, honest)
        return run_game(
            gid,
            (defender, dep.defender),
            (challenger, dep.challenger),
            advance(chain),
            max_moves=96,
        )
    finally:
        chain.restore(sid)


@st.composite
def reduction_jobs(draw):
    hidden = draw(st.integers(2, 40))
    widths = (draw(st.integers(2, 40)), hidden, draw(st.integers(2, 4)))
    job = make_job(
        widths,
        batch=draw(st.integers(1, 6)),
        n=draw(st.integers(6, 24)),
        seed=draw(st.integers(0, 2**32)),
        steps=2,
        interval=1,
    )
    return job


@pytest.mark.parametrize("node_name", LIVE_REDUCTIONS)
def test_cheater_at_each_reduction_loses_by_bisection(dep, chain, node_name):
    job = make_job((40, 24, 3), batch=4, n=16, seed=7, steps=2, interval=1)
    node = job.jg.graph.index_of(node_name)
    honest = job.honest(2, 1)
    challenger = Challenger(honest, job.jg, direct_terms=0)
    for element in reversed(range(job.jg.nodes[node].numel)):  # the first unmasked fault
        fault = Fault("element", step=1, node=node, element=element, mask=0x40000000)
        liar = faulty_party(job, 2, 1, fault)
        if challenger.disputes(liar.checkpoint_commit(), liar.final_root()):
            break
    else:
        raise AssertionError(f"every fault of {node_name} is masked")
    rec = play(dep, chain, job, liar, honest, Defender(liar, job.jg), challenger)
    assert rec.challenger_won and not rec.by_timeout, rec
    assert bisected(rec), rec
    terms = job.jg.nodes[node].inputs[0].cols
    rounds = sum(1 for fn, _ in rec.moves if fn == "pickAccumulators")
    assert rounds <= reduction.rounds(terms) + 1, (terms, rounds)


def test_cheater_loses_whatever_it_posts_in_the_chain(dep, chain):
    n = examples(10, chain.provider.name)
    settings(max_examples=n, **SETTINGS)(
        given(job=reduction_jobs(), data=st.data())(_chain_liar_loses)
    )(dep, chain)


def _chain_liar_loses(dep, chain, job, data):
    live = [job.jg.graph.index_of(name) for name in LIVE_REDUCTIONS if _has(job, name)]
    node = data.draw(st.sampled_from(live), label="node")
    element = data.draw(st.integers(0, job.jg.nodes[node].numel - 1), label="element")
    mask = data.draw(st.integers(1, 2**32 - 1), label="mask")
    fault = Fault("element", step=1, node=node, element=element, mask=mask)
    honest, liar = job.honest(2, 1), faulty_party(job, 2, 1, fault)
    challenger = Challenger(honest, job.jg, direct_terms=0)
    if not challenger.disputes(liar.checkpoint_commit(), liar.final_root()):
        event("fault masked: claim true")
        return
    terms = job.jg.nodes[node].inputs[0].cols
    from_pos = data.draw(st.integers(1, terms + 1), label="lie from")
    defender = ChainLiar(liar, job.jg, from_pos=from_pos)
    rec = play(dep, chain, job, liar, honest, defender, challenger)
    event(f"op {job.jg.graph.nodes[node].op}")
    assert rec.challenger_won and not rec.by_timeout, (fault, from_pos, rec)
    # The faulty node is the first whose root differs (a fault that leaves its root unchanged
    # leaves the claim true), so the game reaches its element and bisects its chain.
    assert bisected(rec), rec


def _has(job, name: str) -> bool:
    try:
        job.jg.graph.index_of(name)
    except KeyError:
        return False
    return True


def test_honest_defender_wins_against_a_bisecting_liar(dep, chain):
    n = examples(12, chain.provider.name)
    settings(max_examples=n, **SETTINGS)(
        given(job=reduction_jobs(), seed=st.integers(0, 2**32), forge=st.booleans())(
            _honest_defender_wins
        )
    )(dep, chain)


def _honest_defender_wins(dep, chain, job, seed, forge):
    names = [*LIVE_REDUCTIONS, "loss.mean"]
    node = job.jg.graph.index_of(names[seed % len(names)]) if _has(job, "fwd1.mm") else 2
    honest = job.honest(2, 1)
    liar = LyingChallenger(honest, job.jg, seed=seed, forge=forge, node=node, direct_terms=0)
    rec = play(dep, chain, job, honest, honest, Defender(honest, job.jg), liar)
    event(f"op {job.jg.graph.nodes[node].op} forge={forge}")
    assert not rec.challenger_won, rec
    # With true openings the step's recomputation decides; a forged opening is rejected and the
    # lying challenger loses on time (the finishing step K + 1 opens nothing to forge).
    assert rec.by_timeout == bool(rec.rejected), rec
    assert forge or not rec.by_timeout, rec
    if rec.by_timeout:
        event("forged opening rejected")
    assert any(fn == "openReduction" for fn, _ in rec.moves), rec


# -- reverts: each move of the bisection checks its arguments ----------------------------------

SMALL = make_job((40, 5, 3), batch=2, n=8, seed=3, steps=1, interval=1)
MM = SMALL.jg.graph.index_of("fwd0.mm")
SMALL_HONEST = SMALL.honest(1, 1)
SMALL_LIAR = faulty_party(
    SMALL, 1, 1, Fault("element", step=0, node=MM, element=0, mask=0x40000000)
)


@pytest.fixture
def small_game(dep, snapshot):
    gid = open_game(dep, SMALL, SMALL_LIAR, SMALL_HONEST)
    return gid, Defender(SMALL_LIAR, SMALL.jg), Challenger(SMALL_HONEST, SMALL.jg, direct_terms=0)


def test_openReduction_opensTheSpanOfTheElement(dep, small_game):
    gid, d, c = small_game
    v = play_to(dep, gid, Phase.POST_ACCUMULATORS, d, c)
    assert (v.element, v.lo, v.hi) == (0, 0, 41)  # K = 40 terms and the finishing step
    p = dep.defender.read_struct("progressOf", gid)
    claimed = SMALL_LIAR.node_output(0, MM).contiguous().reshape(-1).numpy().view(np.uint32)[0]
    assert (p["loValue"], p["hiValue"]) == (0, int(claimed))


def test_openReduction_notAReduction_reverts(dep, snapshot):
    job = make_job((6, 4, 3), batch=2, n=8, seed=5, steps=1, interval=1)
    node = job.jg.graph.index_of("fwd0.z")  # add_row
    liar = faulty_party(job, 1, 1, Fault("element", step=0, node=node, element=0, mask=0x40000000))
    honest = job.honest(1, 1)
    gid = open_game(dep, job, liar, honest)
    v = play_to(dep, gid, Phase.PROVE_ELEMENT, Defender(liar, job.jg), Challenger(honest, job.jg))
    desc = job.jg.nodes[v.node]
    with reverts(dep.prover, "NotAReduction", op=desc.op):
        dep.challenger.play(Move("openReduction", (0, v.chunk, desc.encode())), gid)


def test_openReduction_paddingElement_reverts(dep, small_game):
    gid, d, c = small_game
    v = play_to(dep, gid, Phase.PROVE_ELEMENT, d, c)
    desc = SMALL.jg.nodes[MM]  # (2, 5): 10 elements in leaf 0, offsets 10.. are padding
    with reverts(dep.game, "IndexOutOfRange", index=10, bound=10):
        dep.challenger.play(Move("openReduction", (10, v.chunk, desc.encode())), gid)


def test_postAccumulators_wrongCount_reverts(dep, small_game):
    gid, d, c = small_game
    v = play_to(dep, gid, Phase.POST_ACCUMULATORS, d, c)
    values = d.next_move(v).args[0]
    assert len(values) == 15
    with reverts(dep.game, "LengthMismatch", expected=15, actual=14):
        dep.defender.play(Move("postAccumulators", (values[:14],)), gid)


def test_pickAccumulators_tamperedValues_cutsMismatch(dep, small_game):
    gid, d, c = small_game
    v = play_to(dep, gid, Phase.PICK_ACCUMULATORS, d, c)
    tampered = list(v.cut_values)
    tampered[3] ^= 1
    with reverts(dep.game, "CutsMismatch"):
        dep.challenger.play(Move("pickAccumulators", (0, tampered)), gid)


def test_pickAccumulators_partOutOfRange_reverts(dep, small_game):
    gid, d, c = small_game
    v = play_to(dep, gid, Phase.PICK_ACCUMULATORS, d, c)
    with reverts(dep.game, "IndexOutOfRange", index=16, bound=16):
        dep.challenger.play(Move("pickAccumulators", (16, v.cut_values)), gid)


def test_proveAccumulation_beforeTheLastStep_wrongPhase(dep, small_game):
    gid, d, c = small_game
    play_to(dep, gid, Phase.POST_ACCUMULATORS, d, c)
    desc = SMALL.jg.nodes[MM]
    with reverts(dep.game, "WrongPhase", expected=Phase.PROVE_ACCUMULATION):
        dep.challenger.play(
            Move("proveAccumulation", (desc.encode(), SMALL.jg.config.as_tuple(), [])), gid
        )


def test_prover_reduction_namesTermsAndStart(dep):
    g = SMALL.jg.graph
    for node in g.nodes:
        desc = SMALL.jg.nodes[node.index].encode()
        chain = reduction.chain_of(node.op)
        if chain is None:
            with reverts(dep.prover, "NotAReduction"):
                dep.prover.functions.reduction(desc).call()
            continue
        terms, init = dep.prover.functions.reduction(desc).call()
        assert (terms, init) == (SMALL.jg.nodes[node.index].inputs[0].cols, chain.init), node


def test_prover_accumulate_positionOutOfRange_reverts(dep):
    desc = SMALL.jg.nodes[MM].encode()
    ctx = (b"\x00" * 32, b"\x00" * 32, b"\x00" * 32, 0, 0, MM, 0, 0, 2, 8, 1, 0)
    with reverts(dep.prover, "PositionOutOfRange", position=0, last=41):
        dep.prover.functions.accumulate(ctx, desc, 0, 0, 0, 0, []).call()
    with reverts(dep.prover, "PositionOutOfRange", position=42, last=41):
        dep.prover.functions.accumulate(ctx, desc, 0, 0, 42, 0, []).call()
    # The finishing step of matmul_nt is the identity and reads no input.
    assert dep.prover.functions.accumulate(ctx, desc, 0, 0, 41, 0x3F800000, []).call() == 0x3F800000


# -- every reduction's term step and finishing step decide (deterministic) ------------------------


@dataclass
class PartPicker(LyingChallenger):
    """Disputes a true element and always names part `part` of the span (0: the first, -1: the
    last), so the game ends at accumulation step 1 (the first term) or K + 1 (the finish)."""

    part: int = 0

    def next_move(self, v: GameView) -> Move | None:
        if v.phase == Phase.PICK_ACCUMULATORS:
            n = len(v.cut_values or []) + 1
            return Move("pickAccumulators", (self.part % n, list(v.cut_values or [])))
        return super().next_move(v)


TERM_JOB = make_job((20, 6, 3), batch=3, n=12, seed=21, steps=2, interval=1)
TERM_HONEST = TERM_JOB.honest(2, 1)


@pytest.mark.parametrize("part", [0, 1, -1], ids=["first-term", "second-part", "finish"])
@pytest.mark.parametrize("node_name", [*LIVE_REDUCTIONS, "loss.mean"])
def test_each_reductions_steps_stand_for_an_honest_defender(dep, chain, snapshot, node_name, part):
    node = TERM_JOB.jg.graph.index_of(node_name)
    last = TERM_JOB.jg.nodes[node].numel - 1
    liar = PartPicker(
        TERM_HONEST, TERM_JOB.jg, seed=1, segment=1, node=node, element=last, direct_terms=0,
        part=part,
    )  # fmt: skip
    gid = open_game(dep, TERM_JOB, TERM_HONEST, TERM_HONEST)
    rec = run_game(
        gid, (Defender(TERM_HONEST, TERM_JOB.jg), dep.defender), (liar, dep.challenger),
        advance(chain), max_moves=96,
    )  # fmt: skip
    assert not rec.challenger_won and not rec.by_timeout, rec
    (proved,) = dep.game.events.AccumulationProved().get_logs(
        from_block=0, argument_filters={"gameId": gid}
    )
    terms = TERM_JOB.jg.nodes[node].inputs[0].cols
    assert proved["args"]["position"] == {0: 1, -1: terms + 1}.get(part, proved["args"]["position"])
    assert proved["args"]["claimed"] == proved["args"]["correct"]


@pytest.mark.parametrize("node_name", LIVE_REDUCTIONS)
def test_each_reductions_term_step_catches_a_chain_liar(dep, chain, snapshot, node_name):
    node = TERM_JOB.jg.graph.index_of(node_name)
    for element in reversed(range(TERM_JOB.jg.nodes[node].numel)):  # an unmasked fault
        fault = Fault("element", step=1, node=node, element=element, mask=0x40000000)
        liar = faulty_party(TERM_JOB, 2, 1, fault)
        if liar.final_root() != TERM_HONEST.final_root():
            break
    gid = open_game(dep, TERM_JOB, liar, TERM_HONEST)
    rec = run_game(
        gid, (ChainLiar(liar, TERM_JOB.jg, from_pos=2), dep.defender),
        (Challenger(TERM_HONEST, TERM_JOB.jg, direct_terms=0), dep.challenger),
        advance(chain), max_moves=96,
    )  # fmt: skip
    assert rec.challenger_won and not rec.by_timeout, rec
    (proved,) = dep.game.events.AccumulationProved().get_logs(
        from_block=0, argument_filters={"gameId": gid}
    )
    assert proved["args"]["position"] == 2  # a term step, not the finish
