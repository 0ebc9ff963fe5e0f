"""Fakes of the contracts for role tests without a chain (the roles built with object.__new__):
`contract.functions.<name>(*args).call()` answers from a Python function."""

from __future__ import annotations

from types import SimpleNamespace


class Call:
    """A bound view: `call()` returns `value()`, or `value` itself when it is not callable."""

    def __init__(self, value: object):
        self.value = value

    def call(self, *a, **kw):
        return self.value() if callable(self.value) else self.value


class FakeContract:
    """`functions.<name>(*args).call()` returns `views[name](*args)`; `abi` and `address` for
    code that reads them (an empty ABI and a fixed address by default)."""

    def __init__(self, abi: list | None = None, address: str = "0x" + "99" * 20, **views):
        def bind(f):
            return lambda *a: Call(lambda: f(*a))

        self.functions = SimpleNamespace(**{name: bind(f) for name, f in views.items()})
        self.abi, self.address = abi or [], address


def in_rounds(role, step, done, rounds: int = 4) -> None:
    """What a role's rounds do with work whose read runs off the loop (agents/core/fetches.py):
    `step()` (a replay, a re-check) until `done()`, the role's background reads awaited between
    tries, at most `rounds` times."""
    for _ in range(rounds):
        step()
        if done():
            return
        role.reads.wait(60)


def recheck_now(w, key: str) -> None:
    """A whistleblower's re-check of attestation `key` as its rounds run it: until the record
    changes (its read, off the loop, answered and was judged)."""
    store = w.agent.store
    before = store.get_record("attestation", key)

    def changed() -> bool:
        rec = store.get_record("attestation", key)
        return (rec.state, rec.data) != (before.state, before.data)

    in_rounds(w, lambda: w.recheck(key, dict(store.get_record("attestation", key).data)), changed)
