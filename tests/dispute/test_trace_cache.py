"""The state cache of `Computation` (agents/dispute/trace.py, agents/dispute/budget.py):
bounded in bytes, shared, and invisible.

A party's accounts of claims keep states least recently used first within one byte budget (the
roles' --state-cache-mib, one per agent, shared by all its accounts); whatever the bound, the
number of accounts and the order of the questions, every state, root and trace an account gives
is bit for bit the one an unbounded account gives. No chain needed.
"""

from __future__ import annotations

import os
import threading

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agents.adversaries.faults import Fault, FaultyComputation
from agents.dispute.budget import StateBudget
from agents.dispute.harness import make_job
from agents.dispute.trace import Computation, drop_computation

FUZZ = os.environ.get("HYPOTHESIS_PROFILE") == "fuzz"

STEPS, INTERVAL = 12, 3
JOB = make_job((4, 5, 3), batch=4, n=16, seed=7, steps=STEPS, interval=INTERVAL)
STATE_BYTES = sum(x.numel() * x.element_size() for x in JOB.engine.initial_state().values())
REFERENCE = Computation(JOB.engine, STEPS, INTERVAL, cache_bytes=1 << 40)
FAULT = Fault("element", step=5, node=2, element=1, mask=1 << 20)
REFERENCE_FAULTY = FaultyComputation(JOB.engine, STEPS, INTERVAL, fault=FAULT, cache_bytes=1 << 40)


def same_state(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[n].view(-1), b[n].view(-1)) for n in a)


questions = st.lists(
    st.tuples(st.sampled_from(["state", "root", "trace"]), st.integers(0, STEPS)), max_size=25
)


@settings(
    max_examples=2_000 if FUZZ else 40, deadline=None, suppress_health_check=list(HealthCheck)
)
@given(states_kept=st.integers(1, STEPS + 2), asked=questions, faulty=st.booleans())
def test_bounded_cache_answers_as_the_unbounded_one(states_kept, asked, faulty):
    reference = REFERENCE_FAULTY if faulty else REFERENCE
    kept = states_kept * STATE_BYTES
    comp = (
        FaultyComputation(JOB.engine, STEPS, INTERVAL, fault=FAULT, cache_bytes=kept)
        if faulty
        else Computation(JOB.engine, STEPS, INTERVAL, cache_bytes=kept)
    )
    for kind, t in asked:
        if kind == "state":
            assert same_state(comp.state(t), reference.state(t)), f"S_{t}"
        elif kind == "root":
            assert comp.claimed_root(t) == reference.claimed_root(t), f"root of S_{t}"
        elif t < STEPS:
            got, want = comp.trace(t), reference.trace(t)
            assert all(torch.equal(x, y) for x, y in zip(got, want, strict=True)), f"trace {t}"
        # the bound holds after every answer (one state at least: the newest is kept)
        assert comp.kept_bytes <= states_kept * STATE_BYTES
        assert comp.kept_bytes == len(comp.kept_steps()) * STATE_BYTES == comp.budget.kept_bytes


def ask(comp: Computation, reference: Computation, kind: str, t: int) -> None:
    """Ask `comp` one question and check its answer against the unbounded `reference`."""
    if kind == "state":
        assert same_state(comp.state(t), reference.state(t)), f"S_{t}"
    elif kind == "root":
        assert comp.claimed_root(t) == reference.claimed_root(t), f"root of S_{t}"
    elif t < reference.t0 + reference.steps:
        got, want = comp.trace(t), reference.trace(t)
        assert all(torch.equal(x, y) for x, y in zip(got, want, strict=True)), f"trace {t}"


# A court game's account: one segment, from a start state it was given (not computable by it).
COURT_T0 = 3
COURT_REFERENCE = Computation(
    JOB.engine, INTERVAL, INTERVAL, t0=COURT_T0, start=REFERENCE.state(COURT_T0)
)


@settings(
    max_examples=2_000 if FUZZ else 40, deadline=None, suppress_health_check=list(HealthCheck)
)
@given(
    states_kept=st.integers(1, 2 * STEPS),
    asked=st.lists(
        st.tuples(st.integers(0, 2), st.sampled_from(["state", "root", "trace"]), st.integers()),
        max_size=30,
    ),
)
def test_accounts_sharing_one_budget_answer_as_unbounded_ones(states_kept, asked):
    """An honest account, a faulty one and a court game's (pinned start) under one budget: the
    budget holds in total, the start stays, and every answer is the unbounded one's."""
    budget = StateBudget(states_kept * STATE_BYTES)
    start = {n: x.clone() for n, x in REFERENCE.state(COURT_T0).items()}
    comps = [
        Computation(JOB.engine, STEPS, INTERVAL, budget=budget),
        FaultyComputation(JOB.engine, STEPS, INTERVAL, fault=FAULT, budget=budget),
        Computation(JOB.engine, INTERVAL, INTERVAL, t0=COURT_T0, start=start, budget=budget),
    ]
    references = [REFERENCE, REFERENCE_FAULTY, COURT_REFERENCE]
    for which, kind, t in asked:
        ref = references[which]
        ask(comps[which], ref, kind, ref.t0 + t % (ref.steps + 1))
        assert budget.kept_bytes <= states_kept * STATE_BYTES
        # the budget counts every kept state but the court game's pinned start, which stays
        assert sum(c.kept_bytes for c in comps) == budget.kept_bytes + STATE_BYTES
        assert COURT_T0 in comps[2].kept_steps()


def test_a_walk_keeps_checkpoints_and_its_target_only():
    """Walking a claim to its end (as a commit does) keeps one state per checkpoint, not one
    per step: memory for T/k + 1 states, not T + 1."""
    comp = Computation(JOB.engine, STEPS, INTERVAL)
    comp.final_root()
    assert comp.kept_steps() == list(range(0, STEPS + 1, INTERVAL))
    comp.state(7)  # a step inside a segment: the walk from S_6 keeps S_7 only
    assert comp.kept_steps() == [0, 3, 6, 7, 9, 12]


def test_a_tight_bound_evicts_least_recently_used_first():
    comp = Computation(JOB.engine, STEPS, INTERVAL, cache_bytes=3 * STATE_BYTES)
    comp.state(6)  # keeps 0, 3, 6 (least recently used first)
    comp.state(3)  # 3 used again: 0, 6, 3
    comp.state(0)  # 0 used again: 6, 3, 0
    comp.state(9)  # the walk starts from S_6 (used: 3, 0, 6), keeps S_9 and evicts S_3
    assert comp.kept_steps() == [0, 6, 9]
    assert same_state(comp.state(3), REFERENCE.state(3))  # recomputed from S_0


def test_an_evicted_initial_state_is_recomputed():
    """The job's initial state is the engine's to make again: under a one-state budget a walk
    keeps its target only, and every earlier state is still right."""
    comp = Computation(JOB.engine, STEPS, INTERVAL, cache_bytes=STATE_BYTES)
    assert comp.final_root() == REFERENCE.final_root()
    assert comp.kept_steps() == [STEPS]
    assert same_state(comp.state(0), REFERENCE.state(0))
    assert same_state(comp.state(4), REFERENCE.state(4))
    # a budget below one state still keeps the newest: a walk's target is not thrown away
    tiny = Computation(JOB.engine, STEPS, INTERVAL, cache_bytes=1)
    tiny.state(5)
    assert tiny.kept_steps() == [5]


def test_one_budget_bounds_many_accounts_in_total():
    """Ten accounts walked to their ends under a budget of four states keep four states in
    all, the most recently used ones (the last account's), not four each."""
    budget = StateBudget(4 * STATE_BYTES)
    comps = [Computation(JOB.engine, STEPS, INTERVAL, budget=budget) for _ in range(10)]
    for comp in comps:
        comp.final_root()
    assert budget.kept_bytes == 4 * STATE_BYTES
    assert [len(c.kept_steps()) for c in comps] == [0] * 9 + [4]
    assert comps[-1].kept_steps() == [3, 6, 9, 12]
    assert same_state(comps[0].state(5), REFERENCE.state(5))  # recomputed from the start


def test_a_dropped_account_gives_its_bytes_back():
    budget = StateBudget(1 << 40)
    comps = {1: Computation(JOB.engine, STEPS, INTERVAL, budget=budget)}
    other = Computation(JOB.engine, STEPS, INTERVAL, budget=budget)
    dropped = comps[1]
    dropped.final_root()
    other.state(3)
    drop_computation(comps, 1)
    drop_computation(comps, 1)  # already gone: nothing to do
    assert comps == {} and dropped.kept_steps() == []
    assert budget.kept_bytes == other.kept_bytes == 2 * STATE_BYTES
    assert budget.entries() == 2


def test_accounts_in_two_threads_share_one_budget():
    """A solver trains in a worker thread while its loop answers a game: two accounts under one
    tight budget, each walked in its own thread, evict each other's states and stay right.
    (A smoke test: the budget's lock guards each lookup and eviction, but CPython's GIL makes
    the race it closes too narrow to show here; a run without the lock passed too.)"""
    budget = StateBudget(3 * STATE_BYTES)
    comps = [Computation(JOB.engine, STEPS, INTERVAL, budget=budget) for _ in range(2)]
    errors: list[BaseException] = []

    def walk(comp: Computation) -> None:
        try:
            for t in list(range(0, STEPS + 1)) * 4:
                for _ in range(20):  # kept-state hits, between the walks that evict
                    comp.state(t)
                assert same_state(comp.state(t), REFERENCE.state(t)), f"S_{t}"
        except BaseException as exc:  # reported to the main thread
            errors.append(exc)

    threads = [threading.Thread(target=walk, args=(c,)) for c in comps]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []
    assert budget.kept_bytes <= 3 * STATE_BYTES


def test_seeded_states_are_computed_from():
    """A seeded checkpoint (the solver's published state) is where later states start from:
    a wrong seed shows in every state after it."""
    comp = Computation(JOB.engine, STEPS, INTERVAL)
    wrong = {n: x.clone() for n, x in REFERENCE.state(6).items()}
    first = next(iter(wrong))
    wrong[first].view(-1)[0] += 1.0
    comp.seed(6, wrong)
    assert not same_state(comp.state(9), REFERENCE.state(9))
    with pytest.raises(IndexError):
        comp.seed(STEPS + 1, wrong)


def test_a_non_positive_bound_is_refused():
    with pytest.raises(ValueError, match="bad state cache"):
        Computation(JOB.engine, STEPS, INTERVAL, cache_bytes=0)
    with pytest.raises(ValueError, match="bad state cache"):
        StateBudget(-1)


def test_a_version_3_account_under_any_budget_has_the_unbounded_ones_roots(tmp_path, capsys):
    """A ModelComputation is a Computation: its states live under the same budget (here one of
    one byte and one shared with a version-1 account) and every root is the unbounded one's."""
    from dispute_fixtures import build_model_job

    from agents.dispute.model_graph import model_job_graph
    from agents.dispute.model_trace import ModelComputation

    job, st = build_model_job(tmp_path, "cnn", steps=6, every=2)
    jg = model_job_graph(job)
    want = [r for _t, r, _s, _l in job.train(st, steps=6, every=2)]
    shared = StateBudget(1)
    v1 = Computation(JOB.engine, STEPS, INTERVAL, budget=shared)
    for budget in (StateBudget(1), shared):
        comp = ModelComputation(job, jg, st, 6, 2, budget=budget)
        v1.claimed_root(STEPS)
        assert comp.checkpoint_roots() == want
        assert comp.kept_steps() == [0, 6] and budget.entries() == 1  # the start is pinned
        assert comp.trace_roots(3) == ModelComputation(job, jg, st, 6, 2).trace_roots(3)
        comp.release()
        assert comp.kept_steps() == [0] and comp.checkpoint_roots() == want
