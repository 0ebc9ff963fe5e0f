"""Reads off the round loop (agents/core/fetches.py): a read answers PENDING at once, then its
value or its error; one past its budget is late at once, whatever its server does; at most
`workers` run together, and a queue of silent servers makes later reads late, never slow."""

from __future__ import annotations

import threading
import time

import pytest

from agents.core.blobs import BlobStore, BlobTimeout, HttpBackend
from agents.core.clock import FakeClock
from agents.core.fetches import PENDING, Failed, Reads
from tools.faultproxy import SilentServer


def test_a_read_answers_pending_then_its_value_or_its_error():
    reads = Reads(2)
    gate = threading.Event()
    assert reads.ask("a", lambda: gate.wait(5) and 7, 60) is PENDING
    gate.set()
    assert reads.wait(5)
    assert reads.ask("a", lambda: 0, 60) == 7  # kept: not read again
    reads.ask("b", lambda: 1 / 0, 60)
    reads.wait(5)
    got = reads.ask("b", lambda: 0, 60)
    assert isinstance(got, Failed) and isinstance(got.error, ZeroDivisionError)
    assert not got.late and "division" in got.reason()
    reads.forget("b")
    assert reads.ask("b", lambda: 3, 60) in (PENDING, 3)  # forgotten: read again
    reads.wait(5)
    assert reads.ask("b", lambda: 0, 60) == 3
    reads.close()


def test_a_read_past_its_budget_is_late_at_once_and_its_result_is_dropped():
    clock = FakeClock()
    reads = Reads(1, clock)
    gate = threading.Event()
    assert reads.ask("slow", lambda: gate.wait(5) and "data", 10) is PENDING
    clock.advance(9)
    assert reads.ask("slow", lambda: None, 10) is PENDING
    clock.advance(2)
    got = reads.ask("slow", lambda: None, 10)
    assert isinstance(got, Failed) and got.late
    gate.set()
    reads.wait(5)
    # the data arrived after the budget: still late (the caller has fallen back already)
    assert isinstance(reads.ask("slow", lambda: None, 10), Failed)
    reads.close()


def test_a_queue_of_silent_servers_holds_no_more_than_its_workers_and_no_round():
    """Twenty reads of a server that never answers, two workers: every ask returns at once;
    queued reads go late on their budget without ever starting; the running ones end with
    their own timeout (the budget), so the workers come free."""
    with SilentServer() as silent:
        store = BlobStore(HttpBackend(silent.url, timeout_s=1.0))
        reads = Reads(2)
        address = "0x" + "ab" * 32
        for i in range(20):
            # PENDING: the ask returned while its read (or the queue before it) still runs
            assert reads.ask(f"u{i}", lambda: store.get(address), 1.0) is PENDING
        assert reads.running() == 20
        time.sleep(1.2)
        outcomes = [reads.ask(f"u{i}", lambda: None, 1.0) for i in range(20)]
        assert all(isinstance(o, Failed) for o in outcomes)
        assert sum(o.late for o in outcomes) >= 18  # the queued ones never ran
        assert reads.wait(10)  # the two running reads ended with their 1 s timeout
        assert silent.accepted <= 4  # only the reads that ran connected
        ran = [reads.ask(f"u{i}", lambda: None, 1.0) for i in range(2)]
        assert all(isinstance(o, Failed) for o in ran)
        reads.close()


def test_a_silent_server_times_out_a_direct_read():
    with SilentServer() as silent:
        store = BlobStore(HttpBackend(silent.url, timeout_s=0.5))
        with pytest.raises(BlobTimeout):
            store.get("0x" + "cd" * 32)
        assert silent.accepted == 1


def test_workers_must_be_positive():
    with pytest.raises(ValueError, match="at least 1"):
        Reads(0)
