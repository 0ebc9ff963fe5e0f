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
