"""Tx sender on a real Anvil: simulate-then-send, reverts, concurrent nonces, dropped txs,
and kill-and-restart without lost or duplicated sends (checked against the chain)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from corekit import Chain, async_w3
from eth_account import Account
from eth_utils import keccak

from agents.core.chain import dev_private_key
from agents.core.clock import FakeClock
from agents.core.store import Store
from agents.core.tx import (
    Action,
    ErrorDecoder,
    IntentConflict,
    TransportError,
    TxFailed,
    TxRequest,
    TxReverted,
    TxSender,
    classify_send_error,
    next_nonce,
    reconcile_action,
    retry_transport,
)

pytestmark = pytest.mark.chain
DECODER = ErrorDecoder.from_artifacts(["TestToken"])


def mint(chain: Chain, to: str, amount: int) -> TxRequest:
    return TxRequest.call(chain.token_contract().functions.mint(to, amount))


def balance(chain: Chain, who: str) -> int:
    return chain.token_contract().functions.balanceOf(who).call()


def nonce(chain: Chain, who: str) -> int:
    return chain.w3.eth.get_transaction_count(who)


def sender(w3, index: int, store: Store, **kw) -> TxSender:
    kw.setdefault("poll_interval", 0.02)
    kw.setdefault("receipt_timeout", 20)
    return TxSender(w3, Account.from_key(dev_private_key(index)), store, errors=DECODER, **kw)


def fresh_recipient(tag: str) -> str:
    return Account.from_key(keccak(text=tag)).address


# --- pure logic ---------------------------------------------------------------------------------


def test_reconcile_action_table() -> None:
    assert reconcile_action(True, False, 9, 3) is Action.DONE
    assert reconcile_action(False, True, 3, 3) is Action.WAIT
    assert reconcile_action(False, False, 3, 3) is Action.REBROADCAST
    assert reconcile_action(False, False, 4, 3) is Action.RESIGN
    assert reconcile_action(False, True, 4, 3) is Action.RESIGN  # a pool copy can never mine


def test_next_nonce_and_error_classes() -> None:
    assert next_nonce(5, None, None) == 5
    assert next_nonce(5, 7, None) == 7
    assert next_nonce(5, None, 8) == 9  # a recorded, dropped intent keeps its nonce
    assert classify_send_error("nonce too low: next nonce 4, tx nonce 3") == "nonce_low"
    assert classify_send_error("already known") == "known"
    assert classify_send_error("replacement transaction underpriced") == "underpriced"


@pytest.mark.asyncio
async def test_retry_transport_backs_off_on_fake_clock() -> None:
    import aiohttp

    clock, calls = FakeClock(), []

    async def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise aiohttp.ClientConnectionError("connection refused")
        return "ok"

    assert await retry_transport(flaky, clock, "probe", attempts=5, base_s=0.5) == "ok"
    assert clock.sleeps == [0.5, 1.0]

    async def dead() -> None:
        raise aiohttp.ClientConnectionError("connection refused")

    with pytest.raises(TransportError, match="probe: node unreachable after 3 tries"):
        await retry_transport(dead, clock, "probe", attempts=3, base_s=0.5)


# --- on chain ---------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_simulate_then_send(chain: Chain, tmp_path: Path) -> None:
    who = fresh_recipient("simple")
    async with async_w3(chain.url) as w3:
        s = sender(w3, 1, Store(tmp_path / "a.db"))
        out = await s.send("mint-1", mint(chain, who, 42))
        assert not out.resumed and out.block_number > 0
        # The same intent again does not send again.
        again = await s.send("mint-1", mint(chain, who, 42))
        assert again.resumed and again.tx_hash == out.tx_hash
        with pytest.raises(IntentConflict):
            await s.send("mint-1", mint(chain, who, 43))
    assert balance(chain, who) == 42


@pytest.mark.asyncio
async def test_revert_is_decoded_and_nothing_is_sent(chain: Chain, tmp_path: Path) -> None:
    key = Account.from_key(dev_private_key(2))
    token = chain.token_contract()
    before = nonce(chain, key.address)
    store = Store(tmp_path / "a.db")
    async with async_w3(chain.url) as w3:
        s = sender(w3, 2, store)
        with pytest.raises(TxReverted) as err:
            await s.send("too-much", TxRequest.call(token.functions.transfer(key.address, 5)))
    assert err.value.error_name == "ERC20InsufficientBalance"
    assert err.value.error_args == {"sender": key.address, "balance": 0, "needed": 5}
    assert "simulation reverted: ERC20InsufficientBalance(sender=0x" in str(err.value)
    assert nonce(chain, key.address) == before
    assert store.get_intent("too-much") is None


@pytest.mark.asyncio
async def test_concurrent_sends_from_one_key(chain: Chain, tmp_path: Path) -> None:
    key = Account.from_key(dev_private_key(3))
    who = fresh_recipient("concurrent")
    start = nonce(chain, key.address)
    async with async_w3(chain.url) as w3:
        store = Store(tmp_path / "a.db")
        # Two sender objects for the same key share one nonce manager.
        a, b = sender(w3, 3, store), sender(w3, 3, store)
        outs = await asyncio.gather(
            *[(a if i % 2 else b).send(f"m{i}", mint(chain, who, 1 + i)) for i in range(12)]
        )
        # The same intent sent twice at once still goes out once.
        twins = await asyncio.gather(
            a.send("twin", mint(chain, who, 1000)), b.send("twin", mint(chain, who, 1000))
        )
    assert twins[0].tx_hash == twins[1].tx_hash and sum(t.resumed for t in twins) == 1
    assert sorted(o.nonce for o in outs) == list(range(start, start + 12))
    assert balance(chain, who) == sum(1 + i for i in range(12)) + 1000
    assert nonce(chain, key.address) == start + 13


@pytest.mark.asyncio
async def test_nonce_taken_behind_our_back_is_recovered(chain: Chain, tmp_path: Path) -> None:
    """Another process uses our nonce between recording and broadcast: 'nonce too low'."""
    key = Account.from_key(dev_private_key(4))
    who = fresh_recipient("nonce-low")
    start = nonce(chain, key.address)

    def other_process(point: str, intent_id: str) -> None:
        if point == "recorded":
            tx = {"to": who, "value": 1, "gas": 21_000, "nonce": start, "chainId": 31337,
                  "maxFeePerGas": 10**10, "maxPriorityFeePerGas": 10**9}  # fmt: skip
            raw = key.sign_transaction(tx).raw_transaction
            chain.w3.eth.wait_for_transaction_receipt(chain.w3.eth.send_raw_transaction(raw))

    store = Store(tmp_path / "a.db")
    async with async_w3(chain.url) as w3:
        out = await sender(w3, 4, store, crash_point=other_process).send("m", mint(chain, who, 5))
    assert out.nonce == start + 1
    assert store.get_intent("m").resigns == 1
    assert balance(chain, who) == 5 and nonce(chain, key.address) == start + 2


@pytest.mark.asyncio
async def test_dropped_tx_is_rebroadcast(chain: Chain, tmp_path: Path) -> None:
    who = fresh_recipient("dropped")
    store = Store(tmp_path / "a.db")
    chain.rpc("evm_setAutomine", [False])
    try:
        async with async_w3(chain.url) as w3:
            s = sender(w3, 5, store, resend_after=0.3)
            task = asyncio.create_task(s.send("m", mint(chain, who, 7)))
            for _ in range(200):  # until it has been broadcast
                intent = store.get_intent("m")
                if intent is not None and intent.broadcasts:
                    break
                await asyncio.sleep(0.02)
            first_hash = intent.tx_hash
            chain.rpc("anvil_dropTransaction", [first_hash])
            assert chain.rpc("eth_getTransactionByHash", [first_hash]) is None
            for _ in range(200):  # the sender notices and re-broadcasts
                if store.get_intent("m").broadcasts >= 2:
                    break
                await asyncio.sleep(0.02)
            chain.rpc("evm_mine")
            out = await asyncio.wait_for(task, 10)
    finally:
        chain.rpc("evm_setAutomine", [True])
    assert out.tx_hash == first_hash  # the same signed bytes, not a new transaction
    assert store.get_intent("m").broadcasts >= 2
    assert balance(chain, who) == 7


class Killed(Exception):
    pass


def kill_at(where: str):
    def crash(point: str, intent_id: str) -> None:
        if point == where:
            raise Killed(f"{intent_id} killed at {point}")

    return crash


@pytest.mark.asyncio
@pytest.mark.parametrize("where", ["recorded", "broadcast"])
async def test_kill_and_restart_neither_loses_nor_duplicates(
    chain: Chain, tmp_path: Path, where: str
) -> None:
    index = 6 if where == "recorded" else 7
    key = Account.from_key(dev_private_key(index))
    who = fresh_recipient(f"restart-{where}")
    start = nonce(chain, key.address)
    db = tmp_path / "agent.db"
    async with async_w3(chain.url) as w3:
        first = sender(w3, index, Store(db), crash_point=kill_at(where))
        with pytest.raises(Killed):
            await first.send("pay", mint(chain, who, 9))
        # The agent dies; a new process opens the same data folder (after the node has mined
        # what it had: automine answers before the block exists).
        again = Store(db)
        if where == "broadcast":
            chain.w3.eth.wait_for_transaction_receipt(again.get_intent("pay").tx_hash, timeout=10)
        second = sender(w3, index, again)
        actions = await second.reconcile()
        expected = Action.REBROADCAST if where == "recorded" else Action.DONE
        assert actions == {"pay": expected}
        out = await second.send("pay", mint(chain, who, 9))  # the role retries its step
        assert out.resumed
        # And a later, different send still gets the next nonce.
        nxt = await second.send("pay-2", mint(chain, who, 1))
    assert nxt.nonce == out.nonce + 1 == start + 1
    assert balance(chain, who) == 10
    assert nonce(chain, key.address) == start + 2
    # Chain history: exactly one mint of 9 from this key.
    sent = [chain.w3.eth.get_transaction_by_block(b, i)
            for b in range(1, chain.w3.eth.block_number + 1)
            for i in range(len(chain.w3.eth.get_block(b).transactions))]  # fmt: skip
    mine = [t for t in sent if t["from"] == key.address]
    assert len(mine) == 2


@pytest.mark.asyncio
async def test_restart_after_mempool_loss_rebroadcasts_same_tx(
    chain: Chain, tmp_path: Path
) -> None:
    """Killed after broadcast, and the node lost the tx too: the same signed tx goes out."""
    key = Account.from_key(dev_private_key(8))
    who = fresh_recipient("mempool-loss")
    db = tmp_path / "agent.db"
    chain.rpc("evm_setAutomine", [False])
    try:
        async with async_w3(chain.url) as w3:
            with pytest.raises(Killed):
                await sender(w3, 8, Store(db), crash_point=kill_at("broadcast")).send(
                    "pay", mint(chain, who, 3)
                )
            recorded = Store(db).get_intent("pay")
            chain.rpc("anvil_dropTransaction", [recorded.tx_hash])
            second = sender(w3, 8, Store(db))
            assert await second.reconcile() == {"pay": Action.REBROADCAST}
            chain.rpc("evm_mine")
            out = await second.send("pay", mint(chain, who, 3))
    finally:
        chain.rpc("evm_setAutomine", [True])
    assert out.tx_hash == recorded.tx_hash and out.resumed
    assert balance(chain, who) == 3
    assert nonce(chain, key.address) == recorded.nonce + 1


@pytest.mark.asyncio
async def test_restart_after_nonce_taken_while_down_resigns_once(
    chain: Chain, tmp_path: Path
) -> None:
    """Killed before broadcast; while down, the key is used elsewhere for that nonce.
    On restart the intent is re-signed from its recorded bytes with a fresh nonce."""
    key = Account.from_key(dev_private_key(10))
    who = fresh_recipient("taken-while-down")
    db = tmp_path / "agent.db"
    async with async_w3(chain.url) as w3:
        with pytest.raises(Killed):
            await sender(w3, 10, Store(db), crash_point=kill_at("recorded")).send(
                "pay", mint(chain, who, 4)
            )
        recorded = Store(db).get_intent("pay")
        tx = {"to": who, "value": 1, "gas": 21_000, "nonce": recorded.nonce, "chainId": 31337,
              "maxFeePerGas": 10**10, "maxPriorityFeePerGas": 10**9}  # fmt: skip
        raw = key.sign_transaction(tx).raw_transaction
        chain.w3.eth.wait_for_transaction_receipt(chain.w3.eth.send_raw_transaction(raw))
        second = sender(w3, 10, Store(db))
        assert await second.reconcile() == {"pay": Action.RESIGN}
        out = await second.send("pay", mint(chain, who, 4))
    assert out.resumed and out.nonce == recorded.nonce + 1 and out.tx_hash != recorded.tx_hash
    assert Store(db).get_intent("pay").resigns == 1
    assert balance(chain, who) == 4
    assert nonce(chain, key.address) == recorded.nonce + 2


@pytest.mark.asyncio
async def test_mined_but_reverted_is_reported_not_resent(chain: Chain, tmp_path: Path) -> None:
    """Both transfers simulate fine against the latest block; mined together, the second
    reverts. It is recorded as failed, raised as TxFailed, and never re-sent."""
    key = Account.from_key(dev_private_key(11))
    token = chain.token_contract()
    token.functions.mint(key.address, 10).transact({"from": chain.w3.eth.accounts[1]})
    a, b = fresh_recipient("first-come"), fresh_recipient("second")
    store = Store(tmp_path / "a.db")
    chain.rpc("evm_setAutomine", [False])
    try:
        chain.rpc("evm_mine")  # the mint above
        async with async_w3(chain.url) as w3:
            s = sender(w3, 11, store)
            first = asyncio.create_task(
                s.send("t1", TxRequest.call(token.functions.transfer(a, 10)))
            )
            second = asyncio.create_task(
                s.send("t2", TxRequest.call(token.functions.transfer(b, 10)))
            )
            for _ in range(200):
                intents = [store.get_intent(i) for i in ("t1", "t2")]
                if all(i is not None and i.broadcasts for i in intents):
                    break
                await asyncio.sleep(0.02)
            chain.rpc("evm_mine")
            results = await asyncio.wait_for(
                asyncio.gather(first, second, return_exceptions=True), 10
            )
            failed = [r for r in results if isinstance(r, TxFailed)]
            assert len(failed) == 1 and "but reverted" in str(failed[0])
            loser = "t1" if isinstance(results[0], TxFailed) else "t2"
            with pytest.raises(TxFailed):  # asking again replays the outcome, sends nothing
                await s.send(loser, TxRequest.call(token.functions.transfer(
                    b if loser == "t2" else a, 10)))  # fmt: skip
    finally:
        chain.rpc("evm_setAutomine", [True])
    assert store.get_intent(loser).status == "failed"
    assert balance(chain, a) + balance(chain, b) == 10
    assert nonce(chain, key.address) == 2


@pytest.mark.asyncio
@pytest.mark.parametrize("first", ["asked-again", "new-send"])
async def test_txs_lost_in_a_reorg_are_replayed_once_in_nonce_order(
    chain: Chain, tmp_path: Path, first: str
) -> None:
    """A reorg drops two mined sends of ours (the node forgets them). Asking again for one of
    them, or sending something new, puts both back (same signed bytes, nonce order) before
    the new send takes the next nonce; each call lands exactly once."""
    index = 12 if first == "asked-again" else 13
    key = Account.from_key(dev_private_key(index))
    who = fresh_recipient(f"reorged-{first}")
    start = nonce(chain, key.address)
    async with async_w3(chain.url) as w3:
        s = sender(w3, index, Store(tmp_path / "r.db"))
        a = await s.send("a", mint(chain, who, 3))
        b = await s.send("b", mint(chain, who, 4))
        depth = chain.w3.eth.block_number - a.block_number + 1
        chain.rpc("anvil_reorg", [depth, []])  # positional: depth, replacement txs
        assert nonce(chain, key.address) == start
        assert chain.rpc("eth_getTransactionReceipt", [a.tx_hash]) is None
        if first == "asked-again":
            again = await s.send("a", mint(chain, who, 3))  # the role still needs step "a"
            assert again.tx_hash == a.tx_hash and again.resumed
        c = await s.send("c", mint(chain, who, 5))  # a new step: no nonce gap, no hang
        again_a = await s.send("a", mint(chain, who, 3))
        again_b = await s.send("b", mint(chain, who, 4))
    assert (again_a.tx_hash, again_b.tx_hash) == (a.tx_hash, b.tx_hash)
    assert c.nonce == start + 2
    assert balance(chain, who) == 12
    assert nonce(chain, key.address) == start + 3


@pytest.mark.asyncio
async def test_an_estimate_the_node_does_not_answer_is_not_waited_for(
    chain: Chain, tmp_path: Path
) -> None:
    """A simulated call whose gas estimate times out is sent at once with the block's gas limit:
    on Ganache, estimating a dispute move's proof timed out twice and the retries ran the
    honest challenger's game clock out (bench/results/clients.json, history)."""
    who = fresh_recipient("unestimated")
    async with async_w3(chain.url) as w3:
        calls = []

        async def silent(params, block="latest"):
            calls.append(params)
            raise TimeoutError()

        w3.eth.estimate_gas = silent
        out = await sender(w3, 3, Store(tmp_path / "a.db")).send(
            "mint-unestimated", mint(chain, who, 7)
        )
        tx = await w3.eth.get_transaction(out.tx_hash)
        block = await w3.eth.get_block(out.block_number)
    assert len(calls) == 1  # asked once, not retried into the deadline
    assert tx["gas"] == block["gasLimit"]
    assert balance(chain, who) == 7
