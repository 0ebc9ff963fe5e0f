"""Fakes of the contracts for role tests without a chain (the roles built with object.__new__):
`await contract.functions.<name>(*args).call()` answers from a Python function, decoded by the ABI's
names as a contract bound by agents.core.bindings.bind decodes it (a struct or several outputs
as a named tuple), so a test's plain tuple reads as the chain's would."""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
from pathlib import Path
from types import SimpleNamespace

from web3._utils.abi import named_tree, recursive_dict_to_namedtuple

from agents.core.deploy import DEFAULT_ABI_DIR


@functools.cache
def _protocol_views() -> dict[str, list[dict]]:
    """Function name -> its ABI entries in every exported contract (a name may have several:
    JobManager's getJob and RoundManager's)."""
    out: dict[str, list[dict]] = {}
    for name in json.loads((DEFAULT_ABI_DIR / "index.json").read_text())["contracts"]:
        for e in json.loads((DEFAULT_ABI_DIR / f"{name}.json").read_text())["abi"]:
            if e.get("type") == "function" and e not in out.get(e["name"], []):
                out.setdefault(e["name"], []).append(e)
    return out


def decoded(name: str, value: object, abi: list | None = None) -> object:
    """`value` as a bound contract returns view `name`'s result: by the names of the entry of
    `abi` (else of any exported contract) whose outputs have `value`'s shape; as it is when it
    is no tuple, already named, or no entry fits."""
    if not isinstance(value, tuple | list) or hasattr(value, "_fields"):
        return value
    entries = [e for e in abi or [] if e.get("type") == "function" and e["name"] == name]
    for entry in entries or _protocol_views().get(name, []):
        outs = entry["outputs"]
        if len(outs) == 1 and outs[0]["type"] == "tuple":
            if len(outs[0]["components"]) == len(value):
                return recursive_dict_to_namedtuple(named_tree(outs, [value]))[0]
        elif len(outs) > 1 and len(outs) == len(value):
            return recursive_dict_to_namedtuple(named_tree(outs, value))
    return value


class Call:
    """A bound view of an async contract (the roles read through their agent's AsyncWeb3):
    `await call()` returns `value()`, or `value` itself when it is not callable."""

    def __init__(self, value: object):
        self.value = value

    async def call(self, *a, **kw):
        return self.value() if callable(self.value) else self.value


def answering(fn):
    """`fn` as a coroutine function: the roles await their reads (one AsyncWeb3 an agent), so a
    test's stand-in for a read (`now`, `unit`, `context`, ...) is awaited too."""

    async def answer(*a, **kw):
        return fn(*a, **kw)

    return answer


async def ready(value: object) -> object:
    """`value`, awaited: what an AsyncWeb3 read answers."""
    return value


class FakeEth:
    """`w3.eth` of an AsyncWeb3 for roles without a chain: `await eth.block_number`, `await
    eth.get_block("latest")` (`head`, `timestamp`), `await eth.get_balance(a)`, `await
    eth.get_code(a)`; a test moves `head` and `timestamp` as its chain would."""

    def __init__(self, head: int = 0, timestamp: int = 0, balance: int = 10**18) -> None:
        self.head, self.timestamp, self.balance = head, timestamp, balance

    @property
    def block_number(self):
        return ready(self.head)

    async def get_block(self, block: object = "latest") -> dict:
        return {"number": self.head, "timestamp": self.timestamp}

    async def get_balance(self, address: str) -> int:
        return self.balance

    async def get_code(self, address: str) -> bytes:
        return b"\x60"


class FakeContract:
    """`functions.<name>(*args).call()` returns `views[name](*args)`; `abi` and `address` for
    code that reads them (an empty ABI and a fixed address by default)."""

    def __init__(self, abi: list | None = None, address: str = "0x" + "99" * 20, **views):
        def bind(name, f):
            return lambda *a: Call(lambda: decoded(name, f(*a), abi))

        self.functions = SimpleNamespace(**{name: bind(name, f) for name, f in views.items()})
        self.abi, self.address = abi or [], address


def in_rounds(role, step, done, rounds: int = 4) -> None:
    """What a role's rounds do with work whose read runs off the loop (agents/core/fetches.py):
    `step()` (a replay, a re-check; a coroutine is run to its end, as a round awaits it) until
    `done()`, the role's background reads awaited between tries, at most `rounds` times."""
    for _ in range(rounds):
        result = step()
        if inspect.isawaitable(result):
            asyncio.run(result)
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


class RecordingExecutor:
    """A role's executor that sends nothing: `sent` gets (action, what its contract call
    answers) for each action executed — a fake contract's view of the call (FakeContract), so
    a test sees the function and arguments the action maps to — and `execute` answers `result`
    (None: not mined)."""

    def __init__(self, contracts: object, result: object = None) -> None:
        self.contracts = contracts
        self.result = result
        self.sent: list[tuple[object, object]] = []
        self.gas_used = 0

    async def execute(self, action) -> object:
        self.sent.append((action, await action.tx(self.contracts).call()))
        return self.result


class SendingExecutor:
    """A role's executor whose every send is `send(action, contract_function)`: the test's fake
    decides what comes of it (its answer is `execute`'s)."""

    def __init__(self, contracts: object, send) -> None:
        self.contracts, self.send, self.gas_used = contracts, send, 0

    async def execute(self, action) -> object:
        return await self.send(action, action.tx(self.contracts))


def role_config(cls, data_dir: Path = Path("unused"), **fields):
    """The config a role of class `cls` takes (agents/roles/config.py), its defaults but for
    `fields`: what a role built with object.__new__ reads as `self.config`."""
    from agents.core.config import AgentConfig
    from agents.roles import config as c

    kinds = {"solver": c.SolverConfig, "verifier": c.VerifierConfig,
             "whistleblower": c.WhistleblowerConfig, "submitter": c.SubmitterConfig,
             "aggregator": c.AggregatorConfig, "node": c.NodeConfig}  # fmt: skip
    kind = kinds.get(getattr(cls, "role", None), c.RoleConfig)
    if kind is c.SubmitterConfig:
        fields.setdefault("spec", "unused.json")
    if kind is c.NodeConfig:
        fields.setdefault("action", "status")
    return kind(agent=AgentConfig(key="dev:1", data_dir=data_dir), **fields)
