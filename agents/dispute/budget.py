"""One agent's byte budget for the training states its accounts of claims keep.

A `Computation` (agents/dispute/trace.py) keeps states so that questions about its claim are
answered without a replay from the start. Every kept state an agent's computations hold is
entered here, and when their bytes exceed the budget the least recently used state of *any* of
them is evicted (the roles' --state-cache-mib): an agent in many jobs and games at once holds at
most the budget in kept states, not the budget once per job. An evicted state is recomputed on
demand from the nearest state its computation still holds, bit for bit the same (the engine is
deterministic), so the budget trades time for memory and never changes an answer.

The budget only counts and evicts; each computation owns its states. Computations may run in
different threads (a solver trains in a worker while its loop answers a game), so every change
to the budget and to a computation's kept states happens under `lock`.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

import torch

#: Default budget (the roles' --state-cache-mib): 1 GiB of kept states per agent.
DEFAULT_STATE_CACHE_BYTES = 1 << 30


def state_bytes(st: dict[str, torch.Tensor]) -> int:
    """The bytes of a state's tensors."""
    return sum(x.numel() * x.element_size() for x in st.values())


class StateBudget:
    """Kept states of several computations, least recently used first, within `limit_bytes`.

    An entry is (the owner's dict of kept states, the step); evicting it deletes the step from
    that dict. The state entered last is never evicted by its own entry (a walk's target), so
    `kept_bytes` may exceed the limit by at most that one state.
    """

    def __init__(self, limit_bytes: int = DEFAULT_STATE_CACHE_BYTES):
        if limit_bytes <= 0:
            raise ValueError(f"bad state cache: {limit_bytes} bytes")
        self.limit_bytes = limit_bytes
        self.kept_bytes = 0
        self.lock = threading.RLock()
        # (id(owner), step) -> (owner, size): the owner dict is held here so that its id cannot
        # be reused by another dict while an entry of it remains.
        self._lru: OrderedDict[tuple[int, int], tuple[dict, int]] = OrderedDict()

    def keep(self, owner: dict, t: int, size: int) -> None:
        """Enter (or re-enter) `owner[t]` as the most recently used state, then evict others
        until the kept bytes fit."""
        key = (id(owner), t)
        with self.lock:
            old = self._lru.pop(key, None)
            if old is not None:
                self.kept_bytes -= old[1]
            self._lru[key] = (owner, size)
            self.kept_bytes += size
            while self.kept_bytes > self.limit_bytes:
                victim = next(iter(self._lru))
                if victim == key:
                    return  # only the newest state is left: kept whatever the bound
                victim_owner, victim_size = self._lru.pop(victim)
                self.kept_bytes -= victim_size
                del victim_owner[victim[1]]

    def touch(self, owner: dict, t: int) -> None:
        """`owner[t]` was used: it is now the most recently used state."""
        with self.lock:
            key = (id(owner), t)
            if key in self._lru:
                self._lru.move_to_end(key)

    def release(self, owner: dict) -> None:
        """Forget every entry of `owner` (a computation no longer needed), freeing its bytes."""
        with self.lock:
            mine = [key for key, (o, _) in self._lru.items() if o is owner]
            for key in mine:
                self.kept_bytes -= self._lru.pop(key)[1]
                owner.pop(key[1], None)

    def entries(self) -> int:
        """How many states the budget counts now."""
        with self.lock:
            return len(self._lru)
