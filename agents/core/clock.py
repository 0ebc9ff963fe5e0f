"""An injectable clock, so timeouts, backoff and polling can run on fake time in tests.

Every component of the core that waits takes a `Clock`; production code passes `RealClock()`,
tests pass `FakeClock()`, whose `sleep` advances virtual time instantly (optionally also letting
other asyncio tasks run), so a 30 s receipt timeout or an exponential backoff costs nothing.
"""

from __future__ import annotations

import asyncio
import time
from typing import Protocol


class Clock(Protocol):
    def monotonic(self) -> float:
        """Seconds on a clock that never goes backwards (for deadlines)."""
        ...

    def wall(self) -> float:
        """Unix time in seconds (for records that a human reads)."""
        ...

    async def sleep(self, seconds: float) -> None: ...

    def sleep_blocking(self, seconds: float) -> None: ...


class RealClock:
    def monotonic(self) -> float:
        return time.monotonic()

    def wall(self) -> float:
        return time.time()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))

    def sleep_blocking(self, seconds: float) -> None:
        time.sleep(max(0.0, seconds))


class FakeClock:
    """Virtual time: `sleep` advances it at once and records the requested durations.

    `sleep` still yields to the event loop once (asyncio.sleep(0)), so cooperating tasks get to
    run; `real_yield_s` > 0 makes it yield for that much real time instead, for tests where the
    other side of the wait is a real process (a node mining blocks) that needs a moment.
    """

    def __init__(self, start: float = 1_000.0, wall_start: float = 1_700_000_000.0,
                 real_yield_s: float = 0.0) -> None:  # fmt: skip
        self._now = start
        self._wall_offset = wall_start - start
        self.real_yield_s = real_yield_s
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return self._now

    def wall(self) -> float:
        return self._now + self._wall_offset

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("a clock cannot go backwards")
        self._now += seconds

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.advance(max(0.0, seconds))
        await asyncio.sleep(self.real_yield_s)

    def sleep_blocking(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.advance(max(0.0, seconds))
        if self.real_yield_s:
            time.sleep(self.real_yield_s)


def backoff_delays(base_s: float, cap_s: float, attempts: int) -> list[float]:
    """Exponential backoff schedule: base, 2*base, 4*base, ... capped at cap_s.

    Deterministic (no jitter): one agent per key, so there is no thundering herd to spread out,
    and deterministic delays keep tests exact.
    """
    return [min(cap_s, base_s * (2**i)) for i in range(attempts)]
