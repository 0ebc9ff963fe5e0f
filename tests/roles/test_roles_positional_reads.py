"""Positional reads of contract call results in agents/ (tools/positional_reads.py): the finder on
small sources, and the check `make lint` runs (none is left in agents/, so a new one fails)."""

from __future__ import annotations

from pathlib import Path

from tools.positional_reads import KNOWN, Read, positional_reads, ratchet, reads_in

REPO = Path(__file__).resolve().parents[2]


def texts(source: str) -> list[str]:
    return [r.text for r in positional_reads(source)]


def test_a_call_result_indexed_by_an_int_is_found():
    assert texts("x = c.functions.config().call()[12]\n") == ["c.functions.config().call()[12]"]
    assert texts("x = int(c.f(1).call(block_identifier=b)[-1])\n") == [
        "c.f(1).call(block_identifier=b)[-1]"
    ]
    # a chain of int subscripts is one read
    assert texts("shards = rm.functions.getJob(j).call()[4][5]\n") == [
        "rm.functions.getJob(j).call()[4][5]"
    ]


def test_a_name_bound_from_a_call_result_and_indexed_by_an_int_is_found():
    source = (
        "def f(c):\n    u = c.functions.getUnit(1).call()\n    p = u[4]\n    return u[10], p[0]\n"
    )
    assert texts(source) == ["u[4]", "p[0]", "u[10]"]  # line order, then text


def test_named_reads_and_other_subscripts_are_not_reads():
    source = (
        "def f(c, xs, d):\n"
        "    u = c.functions.getUnit(1).call()\n"
        "    a, b = c.functions.pair().call()\n"  # unpacked: not followed
        "    return u.status, u['k'], xs[0], d[1], a[0], c.call[0]\n"
    )
    assert texts(source) == []


def test_a_binding_is_seen_only_in_its_own_function():
    source = (
        "def f(c):\n    u = c.functions.getUnit(1).call()\n    return u\n\n"
        "def g(u):\n    return u[3]\n"
    )
    assert texts(source) == []


def test_the_ratchet_fails_on_a_new_read_and_on_a_stale_allowance():
    files = [Path("a.py")]
    one = [Read("a.py", 3, "u[1]")]
    assert ratchet(one, files, {"a.py": 1}) == []
    assert "1 positional reads, 0 allowed" in ratchet(one, files, {})[0]
    assert "lower KNOWN['a.py'] to 0" in ratchet([], files, {"a.py": 1})[0]


def test_agents_has_no_positional_read(monkeypatch):
    monkeypatch.chdir(REPO)  # KNOWN is keyed by paths relative to the repository root
    files = sorted(Path("agents").rglob("*.py"))
    assert KNOWN == {}
    assert ratchet(reads_in(files), files, KNOWN) == []
