"""The solver trains off its loop (Solver.start_training, agents/roles/solver.py).

Before, `train` ran a unit's whole training inside the round: while it trained, the solver's
heartbeats, commits, forced reveals and game moves on its other units waited, and a long
training could outlast another unit's dispute clock. Now one worker thread trains one unit at a
time while the rounds go on. No chain: the solver is built with object.__new__ and small fakes
of the contracts (test_solver_submitter_resilience), its engine's step patched to block or
fail; each round runs in a thread of its own so that a round stuck in a training fails the
test instead of hanging it.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest
from rolefakes import answering
from test_solver_submitter_resilience import ME, NOW, a_solver, digits, job_tuple, unit

from agents.core.store import StoreError
from agents.data import builtin as datasets
from agents.roles.logic import UnitStatus, UnitView
from agents.roles.solver import Solver

SPEC = digits(40, 10)  # 5 checkpoints, well under a second
ROUND_TIMEOUT_S = 30.0


def assigned(job_id: int) -> UnitView:
    return unit(job_id, UnitStatus.ASSIGNED, NOW.timestamp + 600, ME)


def solver(tmp_path: Path, units: list[UnitView], spec=SPEC) -> Solver:
    """A solver holding `units` (assigned to it, one job each) whose sends are recorded."""
    data = datasets.load_dataset(spec.dataset_name)
    jobs = {u.job_id: (spec, job_tuple(spec, data)) for u in units}
    s = a_solver(
        tmp_path, jobs, getClaimants=lambda uid: ([ME], []), commitCheckpoints=lambda *a: a
    )
    s.sent = []

    class Intents:  # the executor: records each action's intent, mines nothing
        async def execute(self, action):
            s.sent.append(action.intent)
            return None

    async def nothing(now):
        return None

    s.executor = Intents()
    s.heartbeat_if_due = s.withdraw_if_credited = nothing
    s.forced_checkpoints = answering(lambda u, ctx: (0, []))
    s.units_in_preference_order = answering(lambda: units)
    s.blob_server = None
    return s


def run_round(s: Solver) -> None:
    """One round, which must end within ROUND_TIMEOUT_S whatever a training does."""
    box: dict[str, BaseException] = {}

    def go() -> None:
        try:
            asyncio.run(s.round())
        except BaseException as exc:
            box["error"] = exc

    th = threading.Thread(target=go, daemon=True)
    th.start()
    th.join(ROUND_TIMEOUT_S)
    assert not th.is_alive(), "the round waited for a training"
    if "error" in box:
        raise box["error"]


class Gate:
    """Patches a job's engine: step `at` blocks until released; counts trainings started (each
    runs step 0 first here: `at` is inside the first segment, so a retry resumes from
    checkpoint 0)."""

    def __init__(
        self, s: Solver, job_id: int, at: int | None = None, fail: Exception | None = None
    ) -> None:
        eng = asyncio.run(s.job_context(job_id)).engine
        step = eng.step
        self.entered, self.release = threading.Event(), threading.Event()
        self.started = 0
        self.fail = fail
        if fail is not None:
            self.release.set()  # the step fails once, then passes

        def gated_step(st, t):
            self.started += t == 0
            if t == at:
                self.entered.set()
                if self.fail is not None:
                    exc, self.fail = self.fail, None  # fails once
                    raise exc
                self.release.wait()
            return step(st, t)

        eng.step = gated_step


def finish(s: Solver, timeout: float = ROUND_TIMEOUT_S) -> None:
    run = s.trainer
    assert run is not None
    assert run.done.wait(timeout), "the training did not end"


def state(s: Solver, u: UnitView) -> str | None:
    rec = s.agent.store.get_record("train", f"{u.unit_id}:{u.attempt}")
    return rec.state if rec is not None else None


def publish(s: Solver, u: UnitView) -> None:
    """Mark `u` trained (its record as a finished training leaves it)."""
    asyncio.run(s.train(u))
    assert state(s, u) == "published"


def test_a_round_serves_other_units_while_one_trains(tmp_path):
    """Unit A's training blocks in its step 5; the round still commits unit B. Before the
    change the round never returned (the test failed on the round's timeout)."""
    a, b = assigned(1), assigned(2)
    s = solver(tmp_path, [a, b])
    publish(s, b)
    gate = Gate(s, 1, at=5)
    try:
        run_round(s)
        assert gate.entered.wait(ROUND_TIMEOUT_S)
        assert s.sent == [f"commit:{b.unit_id}:0"]
        assert state(s, a) == "training"  # checkpoint 0 recorded: a restart resumes from it
        run_round(s)  # and the next round too
        assert s.trainer is not None and not s.trainer.done.is_set()
    finally:
        gate.release.set()


def test_one_training_at_a_time_never_twice_the_same_unit_then_published_and_committed(
    tmp_path,
):
    a, c = assigned(1), assigned(3)
    s = solver(tmp_path, [a, c])
    gate_a, gate_c = Gate(s, 1, at=5), Gate(s, 3)
    try:
        for _ in range(3):
            run_round(s)  # "train" of A (in flight: a no-op) and of C (waits its turn)
        assert gate_a.entered.wait(ROUND_TIMEOUT_S)
        assert (gate_a.started, gate_c.started) == (1, 0)
        assert s.trainer is not None and s.trainer.key == f"{a.unit_id}:0"
        assert s.sent == []
    finally:
        gate_a.release.set()
    finish(s)
    assert state(s, a) == "published"
    same = solver(tmp_path / "sync", [a])
    # the same training in the calling thread publishes the same checkpoints
    asyncio.run(same.train(a))
    assert same.agent.store.get_record("train", f"{a.unit_id}:0").data == (
        s.agent.store.get_record("train", f"{a.unit_id}:0").data
    )
    run_round(s)  # A committed; C's training starts
    assert s.sent == [f"commit:{a.unit_id}:0"]
    assert s.trainer is not None and s.trainer.key == f"{c.unit_id}:0"
    finish(s)
    run_round(s)
    assert s.sent[-2:] == [f"commit:{a.unit_id}:0", f"commit:{c.unit_id}:0"]  # (fakes: unmined)
    assert (gate_a.started, gate_c.started) == (1, 1)
    assert s.trainer is None


def test_a_failed_training_costs_its_unit_only_and_is_retried(tmp_path, caplog):
    a, b = assigned(1), assigned(2)
    s = solver(tmp_path, [a, b])
    gate = Gate(s, 1, at=5, fail=ValueError("a bad batch"))
    run_round(s)
    finish(s)
    failed = s.trainer
    caplog.set_level(logging.DEBUG)
    publish(s, b)
    run_round(s)  # finds the error: logged under the unit, B committed, A trained again
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1
    why = f"unit {a.unit_id}: skipped this round: ValueError: a bad batch"
    assert why in errors[0].getMessage()
    assert s.sent == [f"commit:{b.unit_id}:0"]
    assert s.trainer is not None and s.trainer is not failed  # not stuck in flight
    finish(s)
    assert state(s, a) == "published"
    run_round(s)
    assert f"commit:{a.unit_id}:0" in s.sent
    assert gate.started == 2
    assert len([r for r in caplog.records if r.levelno == logging.ERROR]) == 1


def test_a_stopped_training_resumes_from_its_last_checkpoint_and_publishes_the_same(
    tmp_path, caplog
):
    """Stopped in its third segment (checkpoints 0-2 recorded), a restarted solver (the same
    data folder) trains from checkpoint 2 on, not from step 0, and publishes what one
    uninterrupted training publishes."""
    a = assigned(1)
    s = solver(tmp_path, [a])
    gate = Gate(s, 1, at=25)
    run_round(s)
    assert gate.entered.wait(ROUND_TIMEOUT_S)
    assert s.trainer is not None
    s.trainer.stop.set()
    gate.release.set()
    finish(s)
    assert state(s, a) == "training"
    assert len(s.agent.store.get_record("train", f"{a.unit_id}:0").data["roots"]) == 3
    again = solver(tmp_path, [a])
    eng = asyncio.run(again.job_context(1)).engine
    step, ran = eng.step, []

    def counted(st, t):
        ran.append(t)
        return step(st, t)

    eng.step = counted
    caplog.set_level(logging.INFO)
    asyncio.run(again.train(a))
    assert ran == list(range(20, SPEC.steps))
    assert f"resuming unit {a.unit_id} from checkpoint 2" in caplog.text
    fresh = solver(tmp_path / "fresh", [a])
    asyncio.run(fresh.train(a))
    key = f"{a.unit_id}:0"
    assert again.agent.store.get_record("train", key).data == (
        fresh.agent.store.get_record("train", key).data
    )


def test_a_fatal_error_in_the_worker_still_ends_the_process(tmp_path):
    a = assigned(1)
    s = solver(tmp_path, [a])
    Gate(s, 1, at=5, fail=StoreError("database is corrupt"))
    run_round(s)
    finish(s)
    with pytest.raises(StoreError):
        run_round(s)
    assert s.trainer is None


def slow(s: Solver, job_id: int, delay: float) -> None:
    eng = asyncio.run(s.job_context(job_id)).engine
    step = eng.step

    def slow_step(st, t):
        time.sleep(delay)
        return step(st, t)

    eng.step = slow_step


def test_stopping_the_agent_stops_the_training_and_a_restart_resumes_it(tmp_path, caplog):
    spec = digits(600, 200)  # 4 checkpoints
    a = assigned(1)
    s = solver(tmp_path / "run", [a], spec)
    slow(s, 1, 0.02)  # 4 s between checkpoints: the stop is seen at a step, not a checkpoint
    run_round(s)
    deadline = time.monotonic() + ROUND_TIMEOUT_S
    while time.monotonic() < deadline:
        rec = s.agent.store.get_record("train", f"{a.unit_id}:0")
        if rec is not None and len(rec.data["roots"]) >= 2:
            break
        time.sleep(0.02)
    run = s.trainer
    started = time.monotonic()
    s.close()  # what the runner does once the loop ends (SIGTERM, --run-for)
    assert time.monotonic() - started < 2.0
    assert run is not None and run.thread is not None and not run.thread.is_alive()
    rec = s.agent.store.get_record("train", f"{a.unit_id}:0")
    assert rec is not None and rec.state == "training"
    kept = len(rec.data["roots"])
    assert 2 <= kept < 4
    # a restarted solver over the same data folder resumes from the last checkpoint
    caplog.set_level(logging.INFO)
    again = solver(tmp_path / "run", [a], spec)
    asyncio.run(again.train(a))
    assert f"resuming unit {a.unit_id} from checkpoint {kept - 1}" in caplog.text
    resumed = again.agent.store.get_record("train", f"{a.unit_id}:0")
    whole = solver(tmp_path / "whole", [a], spec)
    asyncio.run(whole.train(a))
    expected = whole.agent.store.get_record("train", f"{a.unit_id}:0")
    assert resumed is not None and expected is not None
    assert resumed.state == "published"
    assert resumed.data["roots"] == expected.data["roots"]


def test_a_training_whose_assignment_is_gone_is_stopped(tmp_path, caplog):
    """The unit's assignment expired (re-opened, attempt 1): its training cannot be committed
    any more and would hold the slot the other units wait for."""
    a, c = assigned(1), assigned(3)
    units = [a, c]
    s = solver(tmp_path, units)
    gate = Gate(s, 1, at=5)
    Gate(s, 3)
    try:
        run_round(s)
        assert gate.entered.wait(ROUND_TIMEOUT_S)
        units[0] = replace(a, status=UnitStatus.OPEN, attempt=1, assignee="0x" + "00" * 20)
        caplog.set_level(logging.INFO)
        run_round(s)
        assert s.trainer is not None and s.trainer.stop.is_set()
    finally:
        gate.release.set()
    finish(s)
    run_round(s)  # the slot is free: C trains
    assert "no longer mine to train" in caplog.text
    assert not [r for r in caplog.records if r.levelno == logging.ERROR]
    assert s.trainer is not None and s.trainer.key == f"{c.unit_id}:0"
    assert state(s, a) == "training"  # never published
    finish(s)


def test_a_units_computation_is_dropped_once_the_unit_is_finalized(tmp_path):
    """My account of a unit (a cheater's faulty run, a dispute's replay) serves its commit and
    its games only: a finalized or cancelled unit's is dropped and its kept states given back to
    my --state-cache-mib budget, so a long-running solver does not keep one per unit it ever
    held."""

    class Account:  # (only its presence and its release matter)
        released = False

        def release(self) -> None:
            self.released = True

    a, c = assigned(1), assigned(3)
    units = [a, c]
    s = solver(tmp_path, units)
    accounts = [Account(), Account()]
    s.comps = {a.unit_id: accounts[0], c.unit_id: accounts[1]}
    units[0] = replace(a, status=UnitStatus.FINALIZED)
    units[1] = replace(c, status=UnitStatus.CANCELLED)
    run_round(s)
    assert s.comps == {}
    assert [x.released for x in accounts] == [True, True]
