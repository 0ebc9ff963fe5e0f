"""agents/core/bounded.py: the "said once" set that keeps a long-running agent's warn-once
bookkeeping bounded (the LRU cache itself is property-tested in tests/roles/test_job_context.py,
against a list model)."""

from __future__ import annotations

import pytest

from agents.core.bounded import BoundedCache, SaidOnce


def test_said_once_is_true_once_per_key():
    said = SaidOnce()
    assert said.first(("claim:1", "NotOnline"))
    assert not said.first(("claim:1", "NotOnline"))
    assert said.first(("claim:1", "StakeTooLow"))
    assert len(said) == 2


def test_said_once_remembers_at_most_its_capacity_the_oldest_forgotten_first():
    said = SaidOnce(capacity=3)
    for key in range(10):
        assert said.first(key)
    assert len(said) == 3
    assert [k in said for k in range(10)] == [False] * 7 + [True] * 3
    assert not said.first(9)
    assert said.first(0)  # forgotten: said once more


def test_an_evicted_value_is_handed_to_on_evict():
    gone: list[str] = []
    cache: BoundedCache[int, str] = BoundedCache(2, on_evict=gone.append)
    for key in range(4):
        cache.put(key, f"v{key}")
    cache.pop(3)  # popped, not evicted
    assert gone == ["v0", "v1"]


def test_a_said_once_of_no_capacity_is_refused():
    with pytest.raises(ValueError, match="capacity must be > 0"):
        SaidOnce(0)
