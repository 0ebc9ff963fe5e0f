"""Reads of other parties' data, off the round loop: no slow or silent peer can stall an agent.

A role's round loop reads the chain, decides and sends for every unit and game it serves; a
blob read from a peer's server (a solver's checkpoints) may take as long as that server likes
within the read's own timeout. Run in the round, one server that accepts connections and never
answers held the whole loop for its timeout on every try: every other unit's window and every
game clock waited with it (PROPERTIES H14). Here each read runs on a worker thread of a bounded
pool and the round only asks how it went:

* `Reads.ask(key, fn, budget_s)` starts `fn` once per key and answers at once: `PENDING`, the
  value, or the error it raised (`Failed`). A read still running `budget_s` after it was asked
  for is *late*: it answers `Failed` at once (its thread runs on to its own timeout, its result
  is dropped), so the caller falls back (its own replay) while the window still has time.
* At most `workers` reads run at a time (the per-agent budget: threads, sockets, memory); the
  rest wait their turn, their budget running from when they were asked for, so a queue of
  hanging peers makes later reads late, never the round slow.
* An answer is kept until `forget` (the caller's unit settled, or it wants a fresh try):
  asking again for a failed key does not read again, so the caller decides when a retry is due.

The pool's threads only read and decode bytes (the roles' `fetch_*` functions): they touch no
chain client, store or engine that the round uses.
"""

from __future__ import annotations

import concurrent.futures as cf
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from agents.core.clock import Clock, RealClock

T = TypeVar("T")

#: Reads a role runs at once by default (--fetch-workers).
DEFAULT_FETCH_WORKERS = 8


class _Pending:
    def __repr__(self) -> str:
        return "PENDING"


#: `Reads.ask`'s answer for a read still running inside its budget.
PENDING: Any = _Pending()


@dataclass(frozen=True)
class Failed(Generic[T]):
    """A read that raised (`error`) or ran past its budget (`late`)."""

    error: BaseException | None
    late: bool = False

    def reason(self) -> str:
        if self.late:
            return "no answer within its read budget"
        exc = self.error
        text = str(exc).splitlines()[0][:300] if exc is not None and str(exc) else ""
        return text or type(exc).__name__


@dataclass
class _Read:
    future: cf.Future
    asked_at: float
    budget_s: float
    late: bool = False


class Reads:
    """Bounded background reads keyed by what they read (see the module docstring)."""

    def __init__(self, workers: int = DEFAULT_FETCH_WORKERS, clock: Clock | None = None) -> None:
        if workers < 1:
            raise ValueError(f"workers must be at least 1, got {workers}")
        self.workers = workers
        self.clock = clock or RealClock()
        self._pool = cf.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="read")
        self._reads: dict[str, _Read] = {}
        self._lock = threading.Lock()

    def ask(self, key: str, fn: Callable[[], T], budget_s: float) -> T | Failed | Any:
        """The value of read `key` (started now with `fn` if it is not known), `PENDING`, or
        `Failed`. `budget_s` applies from the first ask; later asks do not move it."""
        with self._lock:
            read = self._reads.get(key)
            if read is None:
                read = _Read(self._pool.submit(fn), self.clock.monotonic(), budget_s)
                self._reads[key] = read
        if read.future.done():
            if read.late:
                return Failed(None, late=True)
            exc = read.future.exception()
            return read.future.result() if exc is None else Failed(exc)
        if read.late or self.clock.monotonic() - read.asked_at > read.budget_s:
            # a queued read that never started is not started at all
            read.late = True
            read.future.cancel()
            return Failed(None, late=True)
        return PENDING

    def running(self) -> int:
        """Reads not yet ended (queued or on a thread), late ones included."""
        with self._lock:
            return sum(1 for r in self._reads.values() if not r.future.done())

    def forget(self, prefix: str) -> None:
        """Drop the answers of every key that starts with `prefix` (a read still running ends
        on its own; asked again, the key is read again)."""
        with self._lock:
            for key in [k for k in self._reads if k.startswith(prefix)]:
                del self._reads[key]

    def wait(self, timeout_s: float) -> bool:
        """Block until every read has ended or `timeout_s` passed (one-shot commands, tests and
        shutdown); True when none is left running."""
        with self._lock:
            futures = [r.future for r in self._reads.values()]
        _, not_done = cf.wait(futures, timeout=timeout_s)
        return not not_done

    def close(self) -> None:
        """Stop taking reads; queued ones are dropped, running ones end with their timeout."""
        self._pool.shutdown(wait=False, cancel_futures=True)
