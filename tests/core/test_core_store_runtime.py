"""Store schema/versioning/records, and `open_agent` composing the core on Anvil."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from corekit import Chain
from eth_account import Account

from agents.core.chain import ChainUnavailable, dev_private_key, free_port
from agents.core.config import AgentConfig, ConfigError
from agents.core.events import AbiDecoder
from agents.core.keys import KeyConfigError
from agents.core.runtime import open_agent
from agents.core.store import SCHEMA_VERSION, Store, StoreError
from agents.core.tx import TxRequest


def test_store_is_wal_versioned_and_resumes(tmp_path: Path) -> None:
    db = tmp_path / "agent.db"
    store = Store(db)
    assert store.schema_version == SCHEMA_VERSION
    assert store._conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert db.stat().st_mode & 0o777 == 0o600
    store.put_job("7", "claimed", {"units": [1, 2]})
    store.put_game("g1", "bisecting", {"lo": 0, "hi": 64})
    store.put_secret("salt:7", b"\x01" * 32)
    store.close()
    again = Store(db)  # a restarted agent
    assert again.get_job("7").data == {"units": [1, 2]}
    assert [r.record_id for r in again.list_records("game", "bisecting")] == ["g1"]
    assert again.get_secret("salt:7") == b"\x01" * 32
    again.put_secret("salt:7", b"\x01" * 32)  # same value: fine
    with pytest.raises(StoreError, match="already set to a different value"):
        again.put_secret("salt:7", b"\x02" * 32)
    again.close()


def test_store_transactions_roll_back_and_newer_schema_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "agent.db"
    store = Store(db)
    with pytest.raises(RuntimeError), store.transaction():
        store.put_job("1", "a", {})
        with store.transaction():  # nested: joins the outer one
            store.put_job("2", "a", {})
        raise RuntimeError("crash mid-update")
    assert store.get_job("1") is None and store.get_job("2") is None
    store.close()
    conn = sqlite3.connect(db)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    with pytest.raises(StoreError, match="newer than this agent's"):
        Store(db)


@pytest.mark.chain
@pytest.mark.asyncio
async def test_open_agent_composes_and_resumes(chain: Chain, tmp_path: Path) -> None:
    cfg = AgentConfig(key="dev:9", data_dir=tmp_path / "solver", rpc_url=chain.url,
                      poll_interval=0.05)  # fmt: skip
    who = Account.from_key(dev_private_key(19)).address
    token = chain.token_contract()
    async with open_agent(cfg) as agent:
        assert agent.chain_id == 31337 and agent.reconciled == {}
        out = await agent.sender.send("m", TxRequest.call(token.functions.mint(who, 5)))
        address = agent.blobs.put(b"checkpoint")
        stream = agent.stream("t", AbiDecoder.from_artifacts(["TestToken"]), [chain.token],
                              start_block=out.block_number)  # fmt: skip
        seen = []
        stream.subscribe("s", lambda e: seen.append(e.args["value"]))
        chain.rpc("anvil_mine", [2])
        await stream.catch_up()
        assert seen == [5]
    async with open_agent(cfg) as agent:  # restart: same data folder
        assert agent.reconciled == {}
        assert (await agent.sender.send("m", TxRequest.call(token.functions.mint(who, 5)))).resumed
        assert agent.blobs.get(address) == b"checkpoint"
    assert token.functions.balanceOf(who).call() == 5


async def open_and_close(cfg: AgentConfig) -> None:
    async with open_agent(cfg):
        pass


@pytest.mark.asyncio
async def test_open_agent_fails_fast_with_one_line(tmp_path: Path) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(ChainUnavailable, match=f"cannot reach RPC {dead}"):
        await open_and_close(AgentConfig(key="dev:0", data_dir=tmp_path, rpc_url=dead))
    with pytest.raises(ConfigError, match="rpc_url: an agent needs a node"):
        await open_and_close(AgentConfig(key="dev:0", data_dir=tmp_path))


@pytest.mark.chain
@pytest.mark.asyncio
async def test_open_agent_refuses_dev_key_off_dev_chain(tmp_path: Path) -> None:
    from agents.core.chain import AnvilConfig, local_anvil

    with (
        local_anvil(AnvilConfig(chain_id=4242)) as url,
        pytest.raises(KeyConfigError, match="refusing Anvil dev key dev:0 on chain id 4242"),
    ):
        await open_and_close(AgentConfig(key="dev:0", data_dir=tmp_path, rpc_url=url))


def test_store_is_thread_safe(tmp_path: Path) -> None:
    """The blob server and other helpers may run in threads next to the event loop."""
    import threading

    store = Store(tmp_path / "agent.db")
    errors: list[BaseException] = []

    def worker(w: int) -> None:
        try:
            for i in range(100):
                with store.transaction():
                    store.put_job(f"{w}-{i}", "new", {"i": i})
                assert store.get_job(f"{w}-{i}").data == {"i": i}
                store.list_records("job")
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert not errors and len(store.list_records("job")) == 400
