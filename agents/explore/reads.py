"""The explorer's chain reads: the deployment's contracts bound by ABI names
(agents/core/bindings.py), units a page at a time through the JobLens, events decoded by the
agents' `AbiDecoder`, and the facts of a transaction (who sent it, its gas, its block's time).

Every read here is keyless and changes nothing. A read the node does not answer raises
`ChainDown` (one line saying so), one of a job, node or game the chain does not hold raises
`NotFound`: the pages turn both into a message, never a stack trace.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from web3 import AsyncWeb3, Web3
from web3.contract import AsyncContract

from agents.core.bindings import bind
from agents.core.bounded import BoundedCache
from agents.core.chain import ChainUnavailable, async_connect
from agents.core.enums import JobStatus
from agents.core.events import AbiDecoder, Event, Web3LogSource
from agents.core.keys import DEV_CHAIN_IDS
from agents.core.rpc_errors import transport_errors
from agents.explore.config import Deployment, ExploreConfig, ExploreError

#: Blocks per eth_getLogs: within the ranges RPC providers serve (agents/roles/job_reads.py).
LOG_SCAN_BLOCKS = 2_000
#: Transactions and block times kept: a dispute page reads one per move.
TX_CACHE = 4_096
#: The contracts whose events the explorer decodes (by their build/abi artifacts).
ARTIFACTS = ("JobManager", "NodeRegistry", "DisputeGame", "RoundManager", "AttestationCourt")


class ChainDown(RuntimeError):
    """The chain's node did not answer a read (down, unreachable, or not a node)."""


class NotFound(LookupError):
    """No job, node or game under that id on this deployment."""


@dataclass(frozen=True)
class TxFacts:
    """What a page says of a transaction: its sender, gas used and block time."""

    tx_hash: str
    sender: str
    gas_used: int
    block: int
    time: int
    input: bytes


def word(value: int | str) -> str:
    """A topic: an integer id or an address as a 32-byte word, 0x-hex."""
    if isinstance(value, str):
        return "0x" + bytes.fromhex(value[2:].rjust(64, "0")).hex()
    return "0x" + value.to_bytes(32, "big").hex()


class ChainReads:
    """The deployment's contracts over one AsyncWeb3 (`open`); `close` disconnects it."""

    def __init__(
        self,
        w3: AsyncWeb3,
        deployment: Deployment,
        contracts: dict[str, AsyncContract],
        chain_id: int,
    ) -> None:
        self.w3, self.deployment, self.chain_id = w3, deployment, chain_id
        self.contracts = contracts
        self.from_block = deployment.block
        self.decoder = AbiDecoder.from_artifacts(ARTIFACTS)
        self.source = Web3LogSource(w3)
        self._txs: BoundedCache[str, TxFacts] = BoundedCache(TX_CACHE)
        self._times: BoundedCache[int, int] = BoundedCache(TX_CACHE)
        self.lens_page = 0

    # --- set-up ---------------------------------------------------------------------------

    @classmethod
    async def open(cls, cfg: ExploreConfig, deployment: Deployment) -> ChainReads:
        """Connect and bind; ExploreError (the user's one line) when the chain or the
        deployment is not what the command line says."""
        url = cfg.rpc_url or deployment.rpc_url
        if not url:
            raise ExploreError(f"--deployment {cfg.deployment} names no rpc_url: pass --rpc-url")
        try:
            w3 = await async_connect(url)
        except (ChainUnavailable, OSError) as exc:
            raise ExploreError(f"--rpc-url {url}: no chain there ({exc})") from None
        try:
            chain_id = int(await w3.eth.chain_id)
            if cfg.allow_local_locators and chain_id not in DEV_CHAIN_IDS:
                raise ExploreError(
                    f"--allow-local-locators: chain id {chain_id} is not a dev chain"
                )
            manager_addr = deployment.address("JobManager")
            if not await w3.eth.get_code(manager_addr):
                raise ExploreError(
                    f"no JobManager at {manager_addr} on {url} (another chain's deployment?)"
                )
            contracts = {"JobManager": bind(w3, "JobManager", manager_addr)}
            manager = contracts["JobManager"]
            registry = (
                deployment.address("NodeRegistry") or await manager.functions.registry().call()
            )
            contracts["NodeRegistry"] = bind(w3, "NodeRegistry", registry)
            # The game by its interface: its moves' parameters are named there (the contract's
            # own delegating functions leave them unnamed), which decodes their calldata.
            for name, artifact in (
                ("DisputeGame", "IDisputeGame"),
                ("JobLens", "JobLens"),
                ("RoundManager", "RoundManager"),
                ("AttestationCourt", "AttestationCourt"),
                ("CourtGame", "IDisputeGame"),
            ):
                address = deployment.address(name)
                if address and await w3.eth.get_code(address):
                    contracts[name] = bind(w3, artifact, address)
            reads = cls(w3, deployment, contracts, chain_id)
            if "JobLens" in contracts:
                reads.lens_page = int(await contracts["JobLens"].functions.MAX_PAGE().call())
            return reads
        except BaseException:
            await w3.provider.disconnect()
            raise

    async def close(self) -> None:
        await self.w3.provider.disconnect()

    def contract(self, name: str) -> AsyncContract | None:
        return self.contracts.get(name)

    @property
    def manager(self) -> AsyncContract:
        return self.contracts["JobManager"]

    @property
    def registry(self) -> AsyncContract:
        return self.contracts["NodeRegistry"]

    # --- guarded reads -----------------------------------------------------------------------

    async def call(self, fn: Any) -> Any:
        """`fn.call()`, a transport failure as ChainDown."""
        try:
            return await fn.call()
        except transport_errors() as exc:
            raise ChainDown(down_message(exc)) from None

    async def head(self) -> tuple[int, int]:
        """(number, timestamp) of the chain's latest block."""
        try:
            block = await self.w3.eth.get_block("latest")
        except transport_errors() as exc:
            raise ChainDown(down_message(exc)) from None
        return int(block["number"]), int(block["timestamp"])

    async def block_time(self, number: int) -> int:
        got = self._times.get(number)
        if got is None:
            try:
                got = int((await self.w3.eth.get_block(number))["timestamp"])
            except transport_errors() as exc:
                raise ChainDown(down_message(exc)) from None
            self._times.put(number, got)
        return got

    async def events(
        self,
        contracts: Sequence[str],
        names: Sequence[str] | None = None,
        topic1: Sequence[int | str] | None = None,
        start: int | None = None,
        end: int | None = None,
    ) -> list[Event]:
        """The decoded events of `contracts` (names as bound), of event `names` (None: all) and,
        when given, whose first indexed argument is in `topic1`, in chain order, read
        LOG_SCAN_BLOCKS at a time from `start` (default: the deployment's block)."""
        addresses = [self.contracts[c].address for c in contracts if c in self.contracts]
        if not addresses:
            return []
        topic0 = self.decoder.topic0(names) if names is not None else None
        if topic0 is not None and not topic0:
            return []
        topics1 = [word(t) for t in topic1] if topic1 is not None else None
        if topics1 is not None and not topics1:
            return []
        try:
            first = self.from_block if start is None else start
            last = int(await self.w3.eth.block_number) if end is None else end
            out: list[Event] = []
            while first <= last:
                stop = min(last, first + LOG_SCAN_BLOCKS - 1)
                for raw in await self.source.logs(first, stop, addresses, topic0, topics1):
                    event = self.decoder.decode(raw)
                    if event is not None:
                        out.append(event)
                first = stop + 1
        except transport_errors() as exc:
            raise ChainDown(down_message(exc)) from None
        return sorted(out, key=lambda e: (e.raw.block_number, e.raw.log_index))

    async def tx(self, tx_hash: str) -> TxFacts:
        """The sender, gas and block time of a mined transaction (kept: it never changes
        while its block stays canonical)."""
        got = self._txs.get(tx_hash)
        if got is None:
            try:
                tx = await self.w3.eth.get_transaction(tx_hash)
                receipt = await self.w3.eth.get_transaction_receipt(tx_hash)
            except transport_errors() as exc:
                raise ChainDown(down_message(exc)) from None
            block = int(receipt["blockNumber"])
            got = TxFacts(
                tx_hash,
                Web3.to_checksum_address(tx["from"]),
                int(receipt["gasUsed"]),
                block,
                await self.block_time(block),
                bytes(tx["input"]),
            )
            self._txs.put(tx_hash, got)
        return got

    # --- jobs and units ------------------------------------------------------------------------

    async def job(self, job_id: int) -> Any:
        """IJobManager.Job of `job_id`, decoded by name; NotFound when there is none."""
        if job_id <= 0 or job_id >= 1 << 64:
            raise NotFound(f"no job {job_id}: job ids are positive integers")
        job = await self.call(self.manager.functions.getJob(job_id))
        if job.status == JobStatus.NONE:
            raise NotFound(f"no job {job_id} on JobManager {self.manager.address}")
        return job

    async def snapshots(self, unit_ids: list[int]) -> list[Any]:
        """JobLens.UnitSnapshot of each unit (unit, job, dispute, claimants, verifiers), a page
        per call; without a lens, the same fields read getter by getter."""
        lens = self.contracts.get("JobLens")
        out: list[Any] = []
        if lens is not None:
            for i in range(0, len(unit_ids), self.lens_page):
                page = unit_ids[i : i + self.lens_page]
                out += await self.call(lens.functions.unitSnapshots(page))
            return out
        f = self.manager.functions
        for uid in unit_ids:
            unit = await self.call(f.getUnit(uid))
            job = await self.call(f.getJob(uid >> 32))
            out.append(_Snapshot(uid, unit, job, await self.call(f.getDispute(uid))))
        return out

    async def job_ids(self, start: int | None = None, end: int | None = None) -> list[int]:
        """Every job id JobManager posted in [start, end] (JobPosted), in order."""
        return [
            int(e.args["jobId"])
            for e in await self.events(["JobManager"], ["JobPosted"], start=start, end=end)
        ]

    # --- nodes ---------------------------------------------------------------------------------

    async def node(self, address: str) -> tuple[Any, bool]:
        """INodeRegistry.Node of `address` and whether it is online; NotFound when it was never
        registered (an exited node reads as role None with its track record kept)."""
        if not Web3.is_address(address):
            raise NotFound(f"{address[:60]!r} is not an address")
        address = Web3.to_checksum_address(address)
        f = self.registry.functions
        node = await self.call(f.getNode(address))
        if node.role == 0 and not (node.completed or node.failed or node.slashed or node.stake):
            raise NotFound(f"no node {address} in NodeRegistry {self.registry.address}")
        return node, bool(await self.call(f.isOnline(address)))


@dataclass(frozen=True)
class _Snapshot:
    """The JobLens.UnitSnapshot fields the explorer reads, when no lens is deployed."""

    unitId: int  # noqa: N815 - the snapshot's own field names
    unit: Any
    job: Any
    dispute: Any


def down_message(exc: BaseException) -> str:
    text = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
    return f"the chain does not answer: {text}"
