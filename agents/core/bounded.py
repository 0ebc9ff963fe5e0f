"""Bounded memory for long-running agents: an LRU cache, and a "said once" set.

An agent runs for months; anything it keeps per job, unit or game must either be dropped when
that work is done or be bounded, else its memory grows with every job ever posted.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

#: How many distinct warnings a `SaidOnce` remembers: a warning older than that many others may
#: be said once more, which costs a log line, never a decision.
SAID_ONCE_CAPACITY = 4096


class BoundedCache(Generic[K, V]):
    """At most `capacity` values, the least recently used evicted first.

    What an agent keeps of the jobs it works on (the roles' --max-loaded-jobs: job contexts,
    whole-job replays, a decomposed job's specs and global states, an aggregator's aggregates)
    is held in these, so that a long-running agent does not keep every job it ever took part in.
    Evicting is safe where each value is a pure function of what the chain holds and of
    published data checked against it: loaded again, it is the same, bit for bit (see
    agents/roles/jobs.py for how the one input that could vanish, a job's spec, is kept).
    """

    def __init__(
        self,
        capacity: int,
        on_evict: Callable[[V], None] | None = None,
    ) -> None:
        """`on_evict(value)` runs for each value evicted (not for `pop`): a `Computation` gives
        its kept states back to the state budget there."""
        if capacity <= 0:
            raise ValueError(f"capacity must be > 0 (got {capacity})")
        self.capacity = capacity
        self.on_evict = on_evict
        self.loads = 0  # values put in, first loads and reloads alike
        self.evictions = 0
        self._values: OrderedDict[K, V] = OrderedDict()
        # a solver's training worker and its loop may both look values up
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        """The kept value (now the most recently used), or None."""
        with self._lock:
            value = self._values.get(key)
            if value is not None:
                self._values.move_to_end(key)
            return value

    def put(self, key: K, value: V) -> None:
        """Keep `value` as the most recently used, evicting the least recently used beyond the
        capacity."""
        with self._lock:
            self._values[key] = value
            self._values.move_to_end(key)
            self.loads += 1
            while len(self._values) > self.capacity:
                _, evicted = self._values.popitem(last=False)
                self.evictions += 1
                if self.on_evict is not None:
                    self.on_evict(evicted)

    def pop(self, key: K) -> V | None:
        with self._lock:
            return self._values.pop(key, None)

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._values

    def __len__(self) -> int:
        with self._lock:
            return len(self._values)

    def keys(self) -> list[K]:
        """Kept keys, least recently used first."""
        with self._lock:
            return list(self._values)


class SaidOnce:
    """Keys of things already said in the log (a refusal, a missing config): `first(key)` is
    True once per key, so each is logged once, while at most `capacity` keys are remembered
    (the oldest forgotten first). For log lines only: nothing that decides an action."""

    def __init__(self, capacity: int = SAID_ONCE_CAPACITY) -> None:
        self._said: BoundedCache[Hashable, bool] = BoundedCache(capacity)

    def first(self, key: Hashable) -> bool:
        """True (and remembered) the first time `key` is asked, False while remembered."""
        if self._said.get(key) is not None:
            return False
        self._said.put(key, True)
        return True

    def __contains__(self, key: object) -> bool:
        return key in self._said

    def __len__(self) -> int:
        return len(self._said)
