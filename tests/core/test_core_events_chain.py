"""Event stream on a real Anvil: backfill + follow across a restart, reorgs, rollbacks."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from corekit import Chain, async_w3
from eth_account import Account
from eth_utils import keccak

from agents.core.events import AbiDecoder, Event, EventStream, Web3LogSource, ws_url_for
from agents.core.store import Store

pytestmark = pytest.mark.chain
DECODER = AbiDecoder.from_artifacts(["TestToken"])


@dataclass
class Ledger:
    """A subscriber with its own state; fails loudly if asked to act twice."""

    applied: dict[str, Event] = field(default_factory=dict)
    calls: int = 0
    retractions: int = 0

    def on_event(self, event: Event) -> None:
        assert event.id not in self.applied, f"acted twice on {event.id}"
        self.calls += 1
        self.applied[event.id] = event

    def on_retract(self, event: Event) -> None:
        assert event.id in self.applied, f"retracted unknown {event.id}"
        del self.applied[event.id]
        self.retractions += 1

    def amounts(self) -> list[int]:
        return sorted(e.args["value"] for e in self.applied.values())


def stream(w3, chain: Chain, store: Store, ledger: Ledger, confirmations: int, start: int):
    s = EventStream(
        "token", Web3LogSource(w3), store, DECODER, addresses=[chain.token],
        topic0=DECODER.topic0(["Transfer"]), confirmations=confirmations, start_block=start,
        batch_blocks=3, poll_interval=0.02,
    )  # fmt: skip
    s.subscribe("ledger", ledger.on_event, ledger.on_retract)
    return s


def recipient(tag: str) -> str:
    return Account.from_key(keccak(text=tag)).address


def mint(chain: Chain, to: str, amount: int) -> None:
    token = chain.token_contract()
    tx_hash = token.functions.mint(to, amount).transact({"from": chain.w3.eth.accounts[1]})
    # Automine mines asynchronously to the RPC answer: wait, so the block exists when we poll.
    chain.w3.eth.wait_for_transaction_receipt(tx_hash, timeout=10, poll_latency=0.01)


def canonical_transfer_ids(chain: Chain, start: int, to: int) -> set[str]:
    logs = chain.w3.eth.get_logs({"fromBlock": start, "toBlock": to, "address": chain.token})
    return {f"0x{lg['transactionHash'].hex()}:{lg['logIndex']}:0x{lg['blockHash'].hex()}"
            for lg in logs}  # fmt: skip


@pytest.mark.asyncio
async def test_backfill_follow_exactly_once_across_restart(chain: Chain, tmp_path: Path) -> None:
    start = chain.w3.eth.block_number + 1
    who = recipient("backfill")
    for i in range(5):
        mint(chain, who, 100 + i)
    ledger, db = Ledger(), tmp_path / "agent.db"
    async with async_w3(chain.url) as w3:
        first = stream(w3, chain, Store(db), ledger, confirmations=2, start=start)
        result = await first.catch_up()
        assert result.caught_up and ledger.amounts() == [100, 101, 102]  # 2 not deep enough
        # Killed mid-range: the handler dies on the second event of the next batch.
        for i in range(5, 9):
            mint(chain, who, 100 + i)
        crash_after = [1]

        def dying(event: Event) -> None:
            if crash_after[0] == 0:
                raise RuntimeError("killed")
            crash_after[0] -= 1
            ledger.on_event(event)

        crashing = EventStream(
            "token", Web3LogSource(w3), Store(db), DECODER, addresses=[chain.token],
            confirmations=2, start_block=start, batch_blocks=3,
        )  # fmt: skip
        crashing.subscribe("ledger", dying, ledger.on_retract)
        with pytest.raises(RuntimeError, match="killed"):
            await crashing.catch_up()
        assert ledger.amounts() == [100, 101, 102, 103]
        # Restart on the same data folder: follow the head with run() while more arrive.
        second = stream(w3, chain, Store(db), ledger, confirmations=2, start=start)
        stop = asyncio.Event()
        runner = asyncio.create_task(second.run(stop))
        for i in range(9, 12):
            mint(chain, who, 100 + i)
        chain.rpc("anvil_mine", [2])  # bury the last mints under the confirmation depth
        for _ in range(500):
            if len(ledger.applied) == 12:
                break
            await asyncio.sleep(0.02)
        stop.set()
        await asyncio.wait_for(runner, 5)
    assert ledger.amounts() == [100 + i for i in range(12)]
    assert ledger.calls == 12 and ledger.retractions == 0
    head = chain.w3.eth.block_number
    assert set(ledger.applied) == canonical_transfer_ids(chain, start, head)


@pytest.mark.asyncio
async def test_reorg_retracts_and_redelivers(chain: Chain, tmp_path: Path) -> None:
    start = chain.w3.eth.block_number + 1
    who = recipient("reorg")
    for i in range(4):
        mint(chain, who, 200 + i)  # one block each
    fast, careful = Ledger(), Ledger()
    async with async_w3(chain.url) as w3:
        store = Store(tmp_path / "agent.db")
        s_fast = stream(w3, chain, store, fast, confirmations=0, start=start)
        s_careful = stream(w3, chain, Store(tmp_path / "b.db"), careful, 3, start)
        await s_fast.catch_up()
        await s_careful.catch_up()
        assert fast.amounts() == [200, 201, 202, 203] and careful.amounts() == [200]
        # Replace the last 2 blocks (mints 202, 203): a new block holds mint 777 instead.
        data = chain.token_contract().functions.mint(who, 777)._encode_transaction_data()
        tx = {"from": chain.w3.eth.accounts[1], "to": chain.token, "data": data}
        chain.rpc("anvil_reorg", [2, [[tx, 1]]])
        result = await s_fast.catch_up()
        assert result.retracted == 2 and result.rewound_to is not None
        assert fast.amounts() == [200, 201, 777]
        assert fast.calls == 5 and fast.retractions == 2
        # Re-polling after the reorg changes nothing (nothing acts twice).
        again = await s_fast.catch_up()
        assert again.delivered == 0 and again.retracted == 0
        # The stream 3 blocks behind never saw the dropped blocks: nothing to retract.
        chain.rpc("anvil_mine", [3])
        await s_careful.catch_up()
        assert careful.retractions == 0 and careful.amounts() == [200, 201, 777]
    head = chain.w3.eth.block_number
    assert set(fast.applied) == canonical_transfer_ids(chain, start, head)


@pytest.mark.asyncio
async def test_rollback_then_different_block(chain: Chain, tmp_path: Path) -> None:
    start = chain.w3.eth.block_number + 1
    who = recipient("rollback")
    for i in range(3):
        mint(chain, who, 300 + i)
    ledger = Ledger()
    async with async_w3(chain.url) as w3:
        s = stream(w3, chain, Store(tmp_path / "agent.db"), ledger, confirmations=0, start=start)
        await s.catch_up()
        assert ledger.amounts() == [300, 301, 302]
        chain.rpc("anvil_rollback", [2])  # drops mints 301 and 302
        result = await s.catch_up()
        assert result.retracted == 2 and ledger.amounts() == [300]
        mint(chain, who, 999)
        await s.catch_up()
        assert ledger.amounts() == [300, 999] and ledger.retractions == 2
    assert set(ledger.applied) == canonical_transfer_ids(chain, start, chain.w3.eth.block_number)


@pytest.mark.asyncio
async def test_websocket_new_heads_wake_the_stream(chain: Chain, tmp_path: Path) -> None:
    """With a 60 s poll interval, only the newHeads subscription can deliver within seconds."""
    start = chain.w3.eth.block_number + 1
    who = recipient("websocket")
    ledger = Ledger()
    async with async_w3(chain.url) as w3:
        s = stream(w3, chain, Store(tmp_path / "agent.db"), ledger, confirmations=0, start=start)
        s.poll_interval = 60.0
        stop = asyncio.Event()
        runner = asyncio.create_task(s.run(stop, heads_ws_url=ws_url_for(chain.url)))
        await asyncio.sleep(0.5)  # first poll done, subscription open, now waiting
        mint(chain, who, 4242)
        for _ in range(250):
            if ledger.applied:
                break
            await asyncio.sleep(0.02)
        stop.set()
        await asyncio.wait_for(runner, 5)  # stop also ends the wait and the socket
    assert ledger.amounts() == [4242]
