"""Compose the core for one agent process: chain, key, store, tx sender, blobs, streams.

A role does:

    config = load_config()
    async with open_agent(config) as agent:
        stream = agent.stream("jobs", AbiDecoder.from_artifacts(["JobManager"]), [address])
        stream.subscribe("solver", on_job_posted)
        await stream.run(stop)

`open_agent` fails fast with one line when the node is unreachable or the key is unusable,
and settles the pending transactions a previous run left behind (`TxSender.reconcile`) before
handing over, so a restarted agent resumes instead of double-sending.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

from web3 import AsyncWeb3

from agents.core.blobs import BlobStore, open_blob_store
from agents.core.chain import async_connect
from agents.core.clock import Clock, RealClock
from agents.core.config import AgentConfig, ConfigError
from agents.core.events import EventStream, Web3LogSource
from agents.core.keys import load_account
from agents.core.store import Store
from agents.core.tx import Action, ErrorDecoder, TxSender


@dataclass
class Agent:
    config: AgentConfig
    w3: AsyncWeb3
    chain_id: int
    account: Any  # LocalAccount
    store: Store
    sender: TxSender
    blobs: BlobStore
    clock: Clock
    reconciled: dict[str, Action]

    def stream(
        self, name: str, decoder: Any, addresses: Sequence[str] | None = None,
        topic0: Sequence[str] | None = None, start_block: int = 0,
    ) -> EventStream:  # fmt: skip
        return EventStream(
            name, Web3LogSource(self.w3), self.store, decoder, addresses=addresses,
            topic0=topic0, confirmations=self.config.confirmations, start_block=start_block,
            poll_interval=self.config.poll_interval, clock=self.clock,
        )  # fmt: skip


@contextlib.asynccontextmanager
async def open_agent(
    config: AgentConfig, *, clock: Clock | None = None, errors: ErrorDecoder | None = None,
    rpc_timeout_s: float = 10.0,
) -> AsyncIterator[Agent]:  # fmt: skip
    if config.rpc_url is None:
        raise ConfigError(["rpc_url: an agent needs a node; pass --rpc-url or set VTP_RPC_URL"])
    if not config.rpc_url.startswith(("http://", "https://")):
        raise ConfigError([f"rpc_url ({config.rpc_url}): agents poll over http(s) for now"])
    clock = clock or RealClock()
    # The agent's one client, for every read and send of its role (ChainUnavailable: one line)
    w3 = await async_connect(config.rpc_url, rpc_timeout_s)
    store: Store | None = None
    try:
        chain_id = int(await w3.eth.chain_id)  # cached by the provider
        account = load_account(config.key, chain_id)
        config.data_dir.mkdir(parents=True, exist_ok=True)
        store = Store(config.db_path, clock_wall=clock.wall)
        sender = TxSender(
            w3, account, store, errors=errors or _default_errors(), clock=clock,
            poll_interval=min(config.poll_interval, 1.0), receipt_timeout=config.receipt_timeout,
        )  # fmt: skip
        reconciled = await sender.reconcile()
        blobs = open_blob_store(config.blob_location)
        yield Agent(config, w3, chain_id, account, store, sender, blobs, clock, reconciled)
    finally:
        if store is not None:
            store.close()
        await w3.provider.disconnect()


def _default_errors() -> ErrorDecoder:
    """Every exported contract's custom errors, or only Solidity's built-ins when none are."""
    try:
        return ErrorDecoder.from_artifacts()
    except OSError:
        return ErrorDecoder()
