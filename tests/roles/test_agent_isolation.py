"""One unit's error costs that unit only (RoleAgent.isolated, agents/roles/runner.py).

A role's inputs come from untrusted parties: a submitter's spec, a solver's blobs. Before the
guard, the main loop caught only node and network errors, so a hostile job (or any bug it hit)
ended the process, and on every restart again: the agent's heartbeat, commits and game moves on
all its other units stopped with it. No chain here: the roles are built with object.__new__ and
their chain reads replaced by small fakes, so each test drives one real `round()`.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from types import SimpleNamespace

import pytest
from rolefakes import answering, role_config

from agents.core.clock import RealClock
from agents.core.store import Store, StoreError
from agents.core.tx import TransportError
from agents.roles.actions import Commit, Replay
from agents.roles.logic import Act, Now, UnitStatus, UnitView
from agents.roles.node import NodeCommand
from agents.roles.runner import RoleAgent, RoleError
from agents.roles.solver import Solver
from agents.roles.verifier import Verifier
from agents.training.spec import JobSpecError

ME = "0x" + "ab" * 20
NOW = Now(block=100, timestamp=1_000)


def unit(n: int, status: UnitStatus) -> UnitView:
    return UnitView(
        unit_id=n << 32,
        job_id=n,
        status=status,
        deadline=NOW.timestamp + 600,
        seed_block=0,
        attempt=0,
        assignee=ME,
        checkpoint_root=b"\x01" * 32,
        final_root=b"\x02" * 32,
        locator="",
        verify_seed=0,
    )


def bare(cls: type[RoleAgent], tmp_path: Path, **args) -> RoleAgent:
    """A role object without a chain: what its loop reads."""
    r = object.__new__(cls)
    r.agent = SimpleNamespace(
        store=Store(tmp_path / "agent.db"),
        clock=RealClock(),
        config=SimpleNamespace(poll_interval=0.01),
    )
    r.config = role_config(cls, tmp_path, **args)
    r.log = logging.getLogger(f"test.isolation.{cls.role}")
    r.me = ME
    r.failures = 0
    return r


async def _nothing(*_a) -> None:
    return None


def solver_over(tmp_path: Path, units: list[UnitView], fail: dict[int, Exception]) -> Solver:
    """A solver whose units are `units`; reading the facts of a unit in `fail` raises its error
    (as loading a hostile job's spec does); every other unit gets one commit to send."""
    s = bare(Solver, tmp_path)
    s.sent = []
    s.now = answering(lambda: NOW)
    s.heartbeat_if_due = _nothing
    s.withdraw_if_credited = _nothing
    s.units_in_preference_order = answering(lambda: units)

    async def facts(u: UnitView, now: Now):
        if u.job_id in fail:
            raise fail[u.job_id]
        return "facts"

    async def handle(act: Act, u: UnitView, now: Now) -> None:
        s.sent.append((type(act), u.job_id))

    s.facts = facts
    s.handle = handle
    return s


@pytest.fixture
def commit_for_every_unit(monkeypatch):
    """The pure decision: one `commit` for every unit (its facts are not what is under test)."""
    monkeypatch.setattr(
        "agents.roles.solver.solver_acts",
        lambda u, now, facts: [Commit(f"commit:{u.unit_id}:0", u.unit_id, 0)],
    )


def test_solver_round_survives_a_hostile_job_and_serves_the_units_after_it(
    tmp_path, commit_for_every_unit, caplog
):
    units = [unit(1, UnitStatus.ASSIGNED), unit(2, UnitStatus.OPEN), unit(3, UnitStatus.ASSIGNED)]
    s = solver_over(tmp_path, units, {2: JobSpecError("widths", "7 inputs, the dataset has 64")})
    caplog.set_level(logging.DEBUG)
    assert asyncio.run(s.round()) is False
    assert s.sent == [(Commit, 1), (Commit, 3)]
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1
    assert f"unit {2 << 32}" in errors[0].getMessage()
    assert "widths': 7 inputs" in errors[0].getMessage()


def test_the_same_failure_of_a_unit_is_logged_once_then_at_debug(
    tmp_path, commit_for_every_unit, caplog
):
    s = solver_over(tmp_path, [unit(1, UnitStatus.OPEN)], {1: TypeError("bad manifest entry")})
    caplog.set_level(logging.DEBUG)
    for _ in range(3):
        asyncio.run(s.round())
    levels = [r.levelno for r in caplog.records if "bad manifest entry" in r.getMessage()]
    assert levels == [logging.ERROR, logging.DEBUG, logging.DEBUG]


def test_a_node_error_in_one_unit_still_ends_the_round_for_a_retry(tmp_path, commit_for_every_unit):
    """Node and network errors are not the unit's fault: the whole round is retried (run())."""
    units = [unit(1, UnitStatus.ASSIGNED), unit(2, UnitStatus.ASSIGNED)]
    s = solver_over(tmp_path, units, {1: TransportError("connection refused")})
    with pytest.raises(TransportError):
        asyncio.run(s.round())
    assert s.sent == []


@pytest.mark.parametrize("fatal", [RoleError("stop"), StoreError("database is corrupt")])
def test_a_fatal_error_in_one_unit_ends_the_process(tmp_path, commit_for_every_unit, fatal):
    s = solver_over(tmp_path, [unit(1, UnitStatus.ASSIGNED)], {1: fatal})
    with pytest.raises(type(fatal)):
        asyncio.run(s.run(asyncio.Event(), run_for=0.05))


def test_verifier_round_survives_a_unit_whose_replay_raises(tmp_path, monkeypatch):
    v = bare(Verifier, tmp_path)
    v.now = answering(lambda: NOW)
    v.heartbeat_if_due = _nothing
    v.withdraw_if_credited = _nothing
    v.units = answering(lambda: [unit(1, UnitStatus.VERIFYING), unit(2, UnitStatus.VERIFYING)])
    v.warn_if_lock_uncovered = _nothing
    v.facts = _nothing
    done: list[int] = []

    async def handle(act: Act, u: UnitView, now: Now) -> None:
        if u.job_id == 1:
            raise IndexError("list index out of range")  # a manifest shorter than the job
        done.append(u.job_id)

    async def defend(now: Now) -> None:
        raise KeyError("court case")

    v.handle = handle
    v.defend_attestations = defend
    monkeypatch.setattr(
        "agents.roles.verifier.verifier_acts", lambda u, now, facts: [Replay(u.unit_id, 0)]
    )
    assert asyncio.run(v.round()) is False
    assert done == [2]


def test_main_loop_outlives_an_unexpected_error_outside_any_unit(tmp_path):
    """A long-running role logs and retries a round that raised anything but a node or fatal
    error; before the guard, the error ended the process."""
    s = bare(Solver, tmp_path)
    rounds = []

    async def round_() -> bool:
        rounds.append(1)
        if len(rounds) == 1:
            raise ValueError("an unexpected reply")
        return True

    s.round = round_
    assert asyncio.run(s.run(asyncio.Event(), run_for=5.0)) == 0
    assert len(rounds) == 2


def test_node_command_reports_an_unexpected_error_instead_of_retrying(tmp_path):
    """`node` is a one-shot command: retrying for ever would hang the operator's shell."""
    n = bare(NodeCommand, tmp_path)

    async def round_() -> bool:
        raise ValueError("an unexpected reply")

    n.round = round_
    with pytest.raises(ValueError):
        asyncio.run(n.run(asyncio.Event(), run_for=5.0))
