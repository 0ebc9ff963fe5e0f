"""Model-based test of the tx sender against an in-memory node (no chain, fake clock).

Hypothesis interleaves concurrent sends with the node misbehaving: mining, dropping pool
transactions, a node restart that empties the pool, another process taking the next nonce of
our key, and the agent being killed at any await point (its tasks cancelled) and restarted on
the same SQLite file (reconcile, then the role re-sends its unfinished intents). Invariant: in
the end every intent's call is on chain exactly once and the store agrees with the chain.
"""

from __future__ import annotations

import asyncio
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from eth_account import Account
from eth_account.typed_transactions import TypedTransaction
from eth_utils import keccak
from hexbytes import HexBytes
from hypothesis import given
from hypothesis import strategies as st
from web3.exceptions import TransactionNotFound

from agents.core.chain import dev_private_key
from agents.core.clock import FakeClock
from agents.core.store import Store
from agents.core.tx import NonceManager, TxRequest, TxSender

KEY = Account.from_key(dev_private_key(0))
TARGET = "0x" + "22" * 20


@dataclass
class PoolTx:
    tx_hash: str
    nonce: int
    data: bytes
    external: bool = False


@dataclass
class FakeEth:
    """Just enough of AsyncWeb3.eth for TxSender, for one sending key."""

    mined: list[PoolTx] = field(default_factory=list)  # index == nonce
    pool: dict[str, PoolTx] = field(default_factory=dict)

    @property
    def chain_id(self):
        return self._value(31337)

    @property
    def max_priority_fee(self):
        return self._value(10**9)

    async def _value(self, v):
        await asyncio.sleep(0)
        return v

    async def get_block(self, _which):
        await asyncio.sleep(0)
        return {"baseFeePerGas": 7}

    async def call(self, _params, _block="latest"):
        await asyncio.sleep(0)
        return b""

    async def estimate_gas(self, _params, _block="latest"):
        await asyncio.sleep(0)
        return 50_000

    async def get_transaction_count(self, _address, block):
        await asyncio.sleep(0)
        n = len(self.mined)
        if block == "pending":
            nonces = {t.nonce for t in self.pool.values()}
            while n in nonces:
                n += 1
        return n

    async def send_raw_transaction(self, raw):
        await asyncio.sleep(0)
        raw = HexBytes(raw)
        tx = TypedTransaction.from_bytes(raw).as_dict()
        tx_hash = "0x" + keccak(raw).hex()
        if tx["nonce"] < len(self.mined):
            raise ValueError("nonce too low")
        if tx_hash in self.pool:
            raise ValueError("already known")
        if any(t.nonce == tx["nonce"] for t in self.pool.values()):
            raise ValueError("replacement transaction underpriced")
        data = tx["data"]
        self.pool[tx_hash] = PoolTx(tx_hash, tx["nonce"], bytes(HexBytes(data)))
        return HexBytes(tx_hash)

    async def get_transaction_receipt(self, tx_hash):
        await asyncio.sleep(0)
        for n, t in enumerate(self.mined):
            if t.tx_hash == tx_hash:
                return {"status": 1, "blockNumber": n + 1, "gasUsed": 21_000}
        raise TransactionNotFound(tx_hash)

    async def get_transaction(self, tx_hash):
        await asyncio.sleep(0)
        if tx_hash in self.pool or any(t.tx_hash == tx_hash for t in self.mined):
            return {"hash": tx_hash}
        raise TransactionNotFound(tx_hash)

    # --- the node's own behaviour, driven by the test ---
    def mine(self) -> None:
        while True:
            nxt = [t for t in self.pool.values() if t.nonce == len(self.mined)]
            if not nxt:
                return
            self.mined.append(nxt[0])
            del self.pool[nxt[0].tx_hash]
            for stale in [h for h, t in self.pool.items() if t.nonce < len(self.mined)]:
                del self.pool[stale]

    def external(self) -> None:
        """Another process with our key takes the next nonce (and wins it)."""
        n = len(self.mined)
        for h in [h for h, t in self.pool.items() if t.nonce == n]:
            del self.pool[h]
        self.mined.append(PoolTx(f"0xext{n}", n, b"external", external=True))

    def drop(self, pick: int) -> None:
        if self.pool:
            del self.pool[sorted(self.pool)[pick % len(self.pool)]]


class FakeW3:
    def __init__(self) -> None:
        self.eth = FakeEth()


def payload(i: int) -> bytes:
    return b"intent-%d" % i


ops = st.one_of(
    st.tuples(st.just("send"), st.integers(0, 5)),
    st.tuples(st.just("mine")),
    st.tuples(st.just("drop"), st.integers(0, 10)),
    st.tuples(st.just("flush")),  # node restart: pool lost
    st.tuples(st.just("external")),
    st.tuples(st.just("kill")),
    st.tuples(st.just("tick"), st.integers(1, 30)),
)


@pytest.mark.fuzz
@given(steps=st.lists(ops, min_size=1, max_size=25))
def test_every_intent_lands_exactly_once(steps) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(_scenario(steps, Path(tmp) / "agent.db"))


async def _scenario(steps, db: Path) -> None:
    w3 = FakeW3()
    clock = FakeClock()

    def new_sender() -> TxSender:
        # A killed process's nonce manager dies with it.
        NonceManager._registry.pop(asyncio.get_running_loop(), None)
        return TxSender(w3, KEY, Store(db, clock_wall=clock.wall), clock=clock,
                        poll_interval=1.0, resend_after=5.0, receipt_timeout=1e9)  # fmt: skip

    sender = new_sender()
    tasks: dict[int, asyncio.Task] = {}
    extra: list[asyncio.Task] = []  # duplicate sends of an intent already being sent
    started: set[int] = set()

    async def tick(n: int) -> None:
        for _ in range(n):
            await asyncio.sleep(0)

    for step in steps:
        if step[0] == "send":
            # A second send of a started intent runs next to the first (both wait and heal).
            started.add(step[1])
            request = TxRequest(TARGET, payload(step[1]), gas=60_000)
            task = asyncio.create_task(sender.send(f"i{step[1]}", request))
            if step[1] in tasks:
                extra.append(task)
            else:
                tasks[step[1]] = task
        elif step[0] == "mine":
            w3.eth.mine()
        elif step[0] == "drop":
            w3.eth.drop(step[1])
        elif step[0] == "flush":
            w3.eth.pool.clear()
        elif step[0] == "external":
            w3.eth.external()
        elif step[0] == "kill":
            for task in [*tasks.values(), *extra]:
                task.cancel()
            await asyncio.gather(*tasks.values(), *extra, return_exceptions=True)
            tasks.clear()
            extra.clear()
            sender = new_sender()
            await sender.reconcile()
        await tick(step[1] if step[0] == "tick" else 3)
    # Settle: the role re-sends whatever it had not seen finish; the node keeps mining.
    for i in started:
        if i not in tasks or tasks[i].done() and tasks[i].exception() is not None:
            request = TxRequest(TARGET, payload(i), gas=60_000)
            tasks[i] = asyncio.create_task(sender.send(f"i{i}", request))
    for _ in range(3_000):
        if all(t.done() for t in [*tasks.values(), *extra]):
            break
        w3.eth.mine()
        await tick(5)
    assert all(t.done() for t in [*tasks.values(), *extra]), "sends never finished"
    for t in [*tasks.values(), *extra]:
        t.result()  # no send failed
    landed = [t.data for t in w3.eth.mined if not t.external]
    assert sorted(landed) == sorted(payload(i) for i in started), "lost or duplicated a send"
    store = Store(db)
    for i in started:
        intent = store.get_intent(f"i{i}")
        assert intent.status == "mined"
        assert any(t.tx_hash == intent.tx_hash for t in w3.eth.mined)


def test_two_waiters_of_one_intent_resign_it_once() -> None:
    """Both waiters see the nonce taken; only one may re-sign, or the call lands twice."""

    async def scenario() -> None:
        w3, clock = FakeW3(), FakeClock()
        with tempfile.TemporaryDirectory() as tmp:
            sender = TxSender(w3, KEY, Store(Path(tmp) / "a.db"), clock=clock,
                              poll_interval=1.0, resend_after=5.0, receipt_timeout=1e9)  # fmt: skip
            request = TxRequest(TARGET, payload(0), gas=60_000)
            first = asyncio.create_task(sender.send("i0", request))
            for _ in range(20):
                await asyncio.sleep(0)
            second = asyncio.create_task(sender.send("i0", request))
            for _ in range(20):
                await asyncio.sleep(0)
            w3.eth.external()  # our nonce goes to another transaction
            for _ in range(400):  # both waiters heal, several times
                await asyncio.sleep(0)
            for _ in range(200):
                w3.eth.mine()
                await asyncio.sleep(0)
                if first.done() and second.done():
                    break
            assert first.result().tx_hash == second.result().tx_hash
            landed = [t.data for t in w3.eth.mined if not t.external]
            assert landed == [payload(0)], landed

    asyncio.run(scenario())
