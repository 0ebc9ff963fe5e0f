"""The state cache of `Computation` (agents/dispute/trace.py): bounded in bytes, and invisible.

A party's account of a claim keeps states least recently used first within `cache_bytes` (the
roles' --state-cache-mib); whatever the bound and the order of the questions, every state,
root and trace it gives is bit for bit the one an unbounded account gives. No chain needed.
"""

from __future__ import annotations

import os

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agents.dispute.harness import make_job
from agents.dispute.trace import Computation, Fault

FUZZ = os.environ.get("HYPOTHESIS_PROFILE") == "fuzz"

STEPS, INTERVAL = 12, 3
JOB = make_job((4, 5, 3), batch=4, n=16, seed=7, steps=STEPS, interval=INTERVAL)
STATE_BYTES = sum(x.numel() * x.element_size() for x in JOB.engine.initial_state().values())
REFERENCE = Computation(JOB.engine, STEPS, INTERVAL, cache_bytes=1 << 40)
FAULT = Fault("element", step=5, node=2, element=1, mask=1 << 20)
REFERENCE_FAULTY = Computation(JOB.engine, STEPS, INTERVAL, fault=FAULT, cache_bytes=1 << 40)


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
    comp = Computation(
        JOB.engine, STEPS, INTERVAL, fault=FAULT if faulty else None,
        cache_bytes=states_kept * STATE_BYTES,
    )  # fmt: skip
    for kind, t in asked:
        if kind == "state":
            assert same_state(comp.state(t), reference.state(t)), f"S_{t}"
        elif kind == "root":
            assert comp.claimed_root(t) == reference.claimed_root(t), f"root of S_{t}"
        elif t < STEPS:
            got, want = comp.trace(t), reference.trace(t)
            assert all(torch.equal(x, y) for x, y in zip(got, want, strict=True)), f"trace {t}"
        # the bound holds after every answer; at least the start and the last state are kept
        assert comp.kept_bytes <= max(states_kept, 2) * STATE_BYTES
        assert comp.kept_bytes == len(comp.kept_steps()) * STATE_BYTES
        assert 0 in comp.kept_steps()


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
    comp.state(6)  # keeps 0, 3, 6
    comp.state(3)  # 3 used again: 6 is now the least recently used besides the start
    comp.state(9)  # the walk from S_6 keeps S_9 and evicts S_6
    assert comp.kept_steps() == [0, 3, 9]
    assert same_state(comp.state(6), REFERENCE.state(6))  # recomputed from S_3


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
