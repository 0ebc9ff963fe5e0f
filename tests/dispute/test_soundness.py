"""Soundness of the dispute game (issue #6), as property tests on a real chain.

Over random small MLP jobs on synthetic data (tiny widths, a few steps):
- a defender with one injected fault anywhere (an element of any node at any step, a wrong
  batch example, a wrong checkpoint root, wrong intermediate roots, a state root not assembled
  from its trace, a wrong checkpoint count) loses to the honest challenger, every time;
- an honest defender wins against a challenger disputing a true claim at random positions
  (with true openings, forged openings, or falling silent);
- whichever party falls silent at a random move loses at its deadline;
and every game takes at most ceil(log2(T/k)) + ceil(log2 k) + ceil(log2 nodes) + 3 moves.
"""

from __future__ import annotations

import math

import pytest
from dispute_fixtures import Job, advance, examples, make_job, open_game
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from agents.adversaries.faults import Fault, faulty_party
from agents.adversaries.liars import LyingChallenger
from agents.dispute.client import GameRecord, run_game
from agents.dispute.player import DEFENDER_PHASES, Challenger, Defender, Phase
from agents.dispute.trace import Computation

SETTINGS = dict(suppress_health_check=list(HealthCheck), deadline=None)
DEAD_NODES = ("loss.logsum", "loss.nll", "loss.mean")  # feed no later node: cannot change S_{t+1}


@st.composite
def jobs(draw) -> tuple[Job, int, int]:
    layers = draw(st.integers(1, 2))
    widths = tuple(draw(st.integers(2, 12)) for _ in range(layers)) + (draw(st.integers(2, 3)),)
    segments = draw(st.integers(1, 3))
    interval = draw(st.integers(1, 3))
    steps = segments * interval
    job = make_job(
        widths,
        batch=draw(st.integers(1, 5)),
        n=draw(st.integers(4, 24)),
        seed=draw(st.integers(0, 2**32)),
        steps=steps,
        interval=interval,
    )
    return job, steps, interval


def move_bound(steps: int, interval: int, nodes: int) -> int:
    lg = lambda x: math.ceil(math.log2(x)) if x > 1 else 0  # noqa: E731
    return lg(steps // interval) + lg(interval) + lg(nodes) + 3


def played(rec: GameRecord) -> int:
    return sum(1 for fn, _ in rec.moves if fn != "claimTimeout")


def draw_fault(data, kind: str, job: Job, steps: int, interval: int) -> Fault:
    t = data.draw(st.integers(0, steps - 1), label="step")
    if kind == "element":
        live = [n.index for n in job.jg.graph.nodes if n.name not in DEAD_NODES]
        node = data.draw(st.sampled_from(live), label="node")
        numel = job.jg.nodes[node].numel
        element = data.draw(st.integers(0, numel - 1), label="element")
        mask = data.draw(st.integers(1, 2**32 - 1), label="mask")
        return Fault("element", step=t, node=node, element=element, mask=mask)
    if kind == "batch":
        return Fault("batch", step=t, element=data.draw(st.integers(0, job.spec.batch - 1)))
    if kind == "checkpoint":
        return Fault("checkpoint", step=data.draw(st.integers(0, steps // interval)))
    if kind == "intermediate":
        return Fault("intermediate", step=data.draw(st.integers(1, steps)))
    return Fault(kind, step=t)


# CI examples per fault kind (x10 under `make fuzz`): 80 cheating defenders in all.
FAULT_EXAMPLES = {
    "element": 40,
    "batch": 10,
    "checkpoint": 8,
    "intermediate": 8,
    "assembly": 8,
    "count": 6,
}


def claim_is_wrong(liar: Computation, honest: Computation) -> bool:
    return (
        liar.checkpoint_commit() != honest.checkpoint_commit()
        or liar.final_root() != honest.final_root()
    )


@pytest.mark.parametrize("kind", list(FAULT_EXAMPLES))
def test_cheating_defender_loses(dep, chain, kind):
    n = examples(FAULT_EXAMPLES[kind], chain.provider.name)
    settings(max_examples=n, **SETTINGS)(
        given(job=jobs(), data=st.data())(_cheating_defender_loses)
    )(dep, chain, kind)


def _cheating_defender_loses(dep, chain, kind, job, data):
    job, steps, interval = job
    fault = draw_fault(data, kind, job, steps, interval)
    honest = job.honest(steps, interval)
    liar = faulty_party(job, steps, interval, fault)
    if not claim_is_wrong(liar, honest):
        # e.g. a flipped negative pre-activation that relu maps to the same zero: the claim
        # is true, and the honest challenger does not dispute it.
        assert not Challenger(honest, job.jg).disputes(liar.checkpoint_commit(), liar.final_root())
        event("fault masked: claim true, no dispute")
        return
    if kind == "element":
        event(f"dispute over node op {job.jg.graph.nodes[fault.node].op}")
    challenger = Challenger(honest, job.jg)
    assert challenger.disputes(liar.checkpoint_commit(), liar.final_root())
    sid = chain.snapshot()
    try:
        gid = open_game(dep, job, liar, honest)
        rec = run_game(
            gid,
            (Defender(liar, job.jg), dep.defender),
            (challenger, dep.challenger),
            advance(chain),
        )
    finally:
        chain.restore(sid)
    assert rec.challenger_won, (fault, rec)
    # A fault with data behind it is decided by the one-step proof; a root with no data behind
    # it (or a wrong count, or a state not assembled from the trace) by the defender's silence.
    assert rec.by_timeout == (fault.kind not in ("element", "batch")), (fault, rec)
    assert played(rec) <= move_bound(steps, interval, len(job.jg.nodes)), rec


def test_honest_defender_wins(dep, chain):
    n = examples(25, chain.provider.name)
    modes = st.sampled_from(["true", "forge", "stop"])
    settings(max_examples=n, **SETTINGS)(
        given(job=jobs(), seed=st.integers(0, 2**32), mode=modes)(_honest_defender_wins)
    )(dep, chain)


def _honest_defender_wins(dep, chain, job, seed, mode):
    job, steps, interval = job
    honest = job.honest(steps, interval)
    stop_at = None
    if mode == "stop":
        stop_at = [Phase.PICK_SEGMENT, Phase.PICK_STEP, Phase.PICK_NODE, Phase.PROVE_ELEMENT][
            seed % 4
        ]
    liar = LyingChallenger(honest, job.jg, seed=seed, forge=mode == "forge", stop_at=stop_at)
    sid = chain.snapshot()
    try:
        gid = open_game(dep, job, honest, honest)
        rec = run_game(
            gid,
            (Defender(honest, job.jg), dep.defender),
            (liar, dep.challenger),
            advance(chain),
        )
    finally:
        chain.restore(sid)
    assert not rec.challenger_won, rec
    # Forged openings are rejected, so the liar falls silent; so does a liar told to stop, if
    # the game reaches that level (one segment or k = 1 skips a level).
    silent = mode == "forge" or (mode == "stop" and stop_at in rec.phases)
    assert rec.by_timeout == silent, rec
    assert played(rec) <= move_bound(steps, interval, len(job.jg.nodes)), rec


def test_silent_party_loses(dep, chain):
    n = examples(20, chain.provider.name)
    settings(max_examples=n, **SETTINGS)(given(job=jobs(), data=st.data())(_silent_party_loses))(
        dep, chain
    )


def _silent_party_loses(dep, chain, job, data):
    job, steps, interval = job
    honest = job.honest(steps, interval)
    live = [n.index for n in job.jg.graph.nodes if n.name not in DEAD_NODES]
    fault = Fault(
        "element",
        step=data.draw(st.integers(0, steps - 1)),
        node=data.draw(st.sampled_from(live)),
        element=0,
        mask=0x40000000,  # flips the exponent's top bit: never the same value
    )
    liar = faulty_party(job, steps, interval, fault)
    if not claim_is_wrong(liar, honest):
        event("fault masked: claim true, no dispute")
        return
    phases = [p for p in range(Phase.POST_CHECKPOINTS, Phase.RESOLVED)]
    silent_phase = data.draw(st.sampled_from(phases), label="silent at")
    defender_silent = silent_phase in DEFENDER_PHASES
    defender = Defender(liar, job.jg, stop_at=silent_phase if defender_silent else None)
    challenger = Challenger(honest, job.jg, stop_at=None if defender_silent else silent_phase)
    sid = chain.snapshot()
    try:
        gid = open_game(dep, job, liar, honest)
        rec = run_game(gid, (defender, dep.defender), (challenger, dep.challenger), advance(chain))
    finally:
        chain.restore(sid)
    if silent_phase in rec.phases:
        assert rec.by_timeout and rec.phases[-1] == silent_phase, rec
        assert rec.challenger_won == defender_silent, rec
    else:  # the game skips that level (one segment, one step, one leaf, the trace walk of a
        # trace of more than 64 nodes — these MLPs have at most 49 — or the accumulator
        # bisection of an element proved directly): played out
        assert silent_phase in (
            Phase.POST_CHECKPOINTS,
            Phase.PICK_SEGMENT,
            Phase.PICK_STEP,
            Phase.PICK_TRACE_SUBTREE,
            Phase.POST_TRACE_SUBTREE,
            Phase.PICK_STATE_SUBTREE,
            Phase.POST_STATE_SUBTREE,
            Phase.PICK_LEAF,
            Phase.POST_ACCUMULATORS,
            Phase.PICK_ACCUMULATORS,
            Phase.PROVE_ACCUMULATION,
        ), rec
        assert rec.challenger_won and not rec.by_timeout, rec
