"""The verifier says, once per unit before its draw, when its free stake cannot cover the unit's
verifier lock S (PROTOCOL §6.5): the draw would skip it, and without the notice an operator
staking the minimum would never learn why it is not drawn. Chain views are faked."""

from __future__ import annotations

import asyncio
import logging
from types import SimpleNamespace

import pytest

from agents.core.bounded import SaidOnce
from agents.roles.logic import UnitStatus, UnitView
from agents.roles.verifier import Verifier

TOKEN = 10**18


class _View:
    def __init__(self, value: int) -> None:
        self.value = value

    async def call(self) -> int:
        return self.value


def _verifier(free: int, locks: dict[int, int]) -> Verifier:
    v = Verifier.__new__(Verifier)  # no chain: only what warn_if_lock_uncovered reads
    v.me = "0x" + "ab" * 20
    v.log = logging.getLogger("verifier-test")
    v._lock_warned = SaidOnce()
    v.manager = SimpleNamespace(
        functions=SimpleNamespace(verifierLockOf=lambda job: _View(locks[job]))
    )
    v.registry = SimpleNamespace(functions=SimpleNamespace(freeStake=lambda me: _View(free)))
    return v


def _unit(unit_id: int, job_id: int, status: UnitStatus) -> UnitView:
    return UnitView(unit_id, job_id, status, 0, 0, 0, "", b"", b"", "", 0)


@pytest.mark.parametrize(
    ("free", "status", "warned"),
    [
        (100 * TOKEN, UnitStatus.COMMITTED, True),  # S = 143.8 > 100: skipped by the draw
        (200 * TOKEN, UnitStatus.COMMITTED, False),  # covered
        (100 * TOKEN, UnitStatus.VERIFYING, False),  # drawn or not, the draw is over
    ],
)
def test_notice_only_before_the_draw_when_the_lock_is_not_covered(caplog, free, status, warned):
    v = _verifier(free, {7: 143_820_000_000_000_000_000})
    with caplog.at_level(logging.WARNING, logger="verifier-test"):
        asyncio.run(v.warn_if_lock_uncovered(_unit(1, 7, status)))
        asyncio.run(v.warn_if_lock_uncovered(_unit(1, 7, status)))  # once per unit
    notices = [r.getMessage() for r in caplog.records]
    if warned:
        assert notices == [
            "unit 1: its verifier lock 143.82 exceeds my free stake 100: the draw skips me"
        ]
    else:
        assert notices == []
