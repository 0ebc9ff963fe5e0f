"""Reorg-safe event stream: backfill from a persisted cursor, then follow the head.

How it stays correct:

* The cursor is (block number, block hash) of the last block fully processed. Every poll first
  checks that hash against the chain; on a mismatch the stream walks back through the persisted
  checkpoints (hashes of earlier range ends) to the newest one that is still canonical, retracts
  every event it delivered above it (newest first), and re-scans from there. Because a block
  hash commits to all its ancestors, one matching checkpoint proves everything below it.
* Only blocks `confirmations` deep are processed, so reorgs shallower than that never reach a
  handler; deeper ones (or `confirmations=0`) are undone through `on_retract`.
* Each event has a stable id, tx hash + log index + block hash, and each subscriber has a
  persisted per-event state (applied / retracted): a re-delivered event (restart after a crash
  before the cursor moved, overlapping ranges, ...) is skipped, so no handler acts twice.
  A reorg that re-mines the same transaction in another block yields a new id: the old one is
  retracted and the new one delivered. `Event.key` (tx hash + log index) is the reorg-stable
  name, for handlers that want to derive tx intent ids from it.

Delivery is at-least-once up to the handler call and exactly-once per (subscriber, event id) in
effect: a handler killed halfway is called again after restart, so it must itself be
idempotent for its side effects (tx intents keyed by the event do that; see tx.py).

The decision logic (`plan_range`, `newest_canonical`) is pure and tested without a chain; the
stream itself talks to a `LogSource`, a small protocol that `Web3LogSource` implements over
AsyncWeb3 (HTTP polling) and that tests implement in memory.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from eth_abi import decode as abi_decode
from eth_utils import keccak, to_checksum_address

from agents.core.clock import Clock, RealClock
from agents.core.rpc_errors import transport_errors
from agents.core.store import Checkpoint, Cursor, Store

log = logging.getLogger(__name__)


class ReorgTooDeep(RuntimeError):
    """The chain reorganised below the stream's start block: nothing safe to rewind to."""


@dataclass(frozen=True)
class RawLog:
    address: str
    topics: tuple[str, ...]  # 0x-hex, topic0 first
    data: str  # 0x-hex
    block_number: int
    block_hash: str  # 0x-hex, lower case
    tx_hash: str
    log_index: int

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> RawLog:
        return cls(**{**obj, "topics": tuple(obj["topics"])})


@dataclass(frozen=True)
class Event:
    name: str
    args: dict[str, Any]
    raw: RawLog

    @property
    def id(self) -> str:
        """Unique per delivery fork: tx hash, log index and the block hash it was mined in."""
        return f"{self.raw.tx_hash}:{self.raw.log_index}:{self.raw.block_hash}"

    @property
    def key(self) -> str:
        """Stable across reorgs that re-mine the same transaction (same position in it)."""
        return f"{self.raw.tx_hash}:{self.raw.log_index}"

    @property
    def block_number(self) -> int:
        return self.raw.block_number

    @property
    def address(self) -> str:
        return self.raw.address


# --- decoding ---------------------------------------------------------------------------------


def _type_str(inp: Mapping[str, Any]) -> str:
    t = inp["type"]
    if t.startswith("tuple"):
        return "(" + ",".join(_type_str(c) for c in inp["components"]) + ")" + t[len("tuple") :]
    return t


def _normalise(value: Any, typ: str) -> Any:
    if typ == "address":
        return to_checksum_address(value)
    if typ.endswith("]") and isinstance(value, (list, tuple)):
        inner = typ[: typ.rindex("[")]
        return [_normalise(v, inner) for v in value]
    return value


class AbiDecoder:
    """Decode logs by topic0 against event ABIs (from build/abi artifacts or any ABI list)."""

    def __init__(self, abi: Iterable[Mapping[str, Any]]) -> None:
        self._events: dict[str, Mapping[str, Any]] = {}
        for item in abi:
            if item.get("type") != "event" or item.get("anonymous"):
                continue
            sig = f"{item['name']}({','.join(_type_str(i) for i in item['inputs'])})"
            self._events["0x" + keccak(text=sig).hex()] = item

    @classmethod
    def from_artifacts(cls, names: Sequence[str], abi_dir: Path | None = None) -> AbiDecoder:
        from agents.core.deploy import DEFAULT_ABI_DIR, load_artifact

        abi: list[Mapping[str, Any]] = []
        for name in names:
            abi += load_artifact(name, abi_dir or DEFAULT_ABI_DIR)["abi"]
        return cls(abi)

    def topic0(self, names: Iterable[str] | None = None) -> list[str]:
        wanted = set(names) if names is not None else None
        return [t for t, e in self._events.items() if wanted is None or e["name"] in wanted]

    def decode(self, raw: RawLog) -> Event | None:
        if not raw.topics:
            return None
        abi = self._events.get(raw.topics[0].lower())
        if abi is None:
            return None
        indexed = [i for i in abi["inputs"] if i.get("indexed")]
        plain = [i for i in abi["inputs"] if not i.get("indexed")]
        if len(raw.topics) - 1 != len(indexed):
            return None  # same signature, different indexing: not this event
        args: dict[str, Any] = {}
        for inp, topic in zip(indexed, raw.topics[1:], strict=True):
            typ = _type_str(inp)
            if typ in ("string", "bytes") or typ.endswith("]") or typ.startswith("("):
                args[inp["name"]] = bytes.fromhex(topic[2:])  # only the hash is logged
            else:
                args[inp["name"]] = _normalise(abi_decode([typ], bytes.fromhex(topic[2:]))[0], typ)
        values = abi_decode([_type_str(i) for i in plain], bytes.fromhex(raw.data[2:]))
        for inp, value in zip(plain, values, strict=True):
            args[inp["name"]] = _normalise(value, _type_str(inp))
        return Event(abi["name"], args, raw)


# --- chain access -------------------------------------------------------------------------------


class LogSource(Protocol):
    async def head(self) -> int: ...

    async def block_hash(self, number: int) -> str | None:
        """Canonical hash at `number`, or None when the chain is shorter."""
        ...

    async def logs(
        self, from_block: int, to_block: int, addresses: Sequence[str] | None,
        topic0: Sequence[str] | None,
    ) -> list[RawLog]: ...  # fmt: skip


def _hex(value: Any) -> str:
    if isinstance(value, str):
        return value.lower() if value.startswith("0x") else "0x" + value.lower()
    return "0x" + bytes(value).hex()


class Web3LogSource:
    """`LogSource` over an AsyncWeb3 (HTTP polling)."""

    def __init__(self, w3: Any) -> None:
        self.w3 = w3

    async def head(self) -> int:
        return int(await self.w3.eth.block_number)

    async def block_hash(self, number: int) -> str | None:
        from web3.exceptions import BlockNotFound

        if number < 0:
            return None
        try:
            block = await self.w3.eth.get_block(number)
        except BlockNotFound:
            return None
        return _hex(block["hash"]) if block else None

    async def logs(
        self, from_block: int, to_block: int, addresses: Sequence[str] | None,
        topic0: Sequence[str] | None, topic1: Sequence[str] | None = None,
    ) -> list[RawLog]:  # fmt: skip
        """The logs in [from_block, to_block] of `addresses` (None: any), of the events whose
        topic0 is in `topic0` and, when given, whose first indexed argument is in `topic1`
        (0x + 64 hex each: a unit id, a game id, an account as a 32-byte word)."""
        params: dict[str, Any] = {"fromBlock": from_block, "toBlock": to_block}
        if addresses:
            params["address"] = [to_checksum_address(a) for a in addresses]
        if topic0 or topic1:
            params["topics"] = [list(topic0) if topic0 else None]
            if topic1:
                params["topics"].append(list(topic1))
        out = []
        for entry in await self.w3.eth.get_logs(params):
            out.append(
                RawLog(
                    address=to_checksum_address(entry["address"]),
                    topics=tuple(_hex(t) for t in entry["topics"]),
                    data=_hex(entry["data"]),
                    block_number=int(entry["blockNumber"]),
                    block_hash=_hex(entry["blockHash"]),
                    tx_hash=_hex(entry["transactionHash"]),
                    log_index=int(entry["logIndex"]),
                )
            )
        return out


# --- pure decision logic -------------------------------------------------------------------------


def plan_range(cursor: int, head: int, confirmations: int, batch: int) -> tuple[int, int] | None:
    """Next block range to process, or None when nothing is `confirmations` deep yet."""
    safe = head - confirmations
    if safe <= cursor:
        return None
    return cursor + 1, min(safe, cursor + batch)


def newest_canonical(
    checkpoints: Sequence[Checkpoint], canonical: Mapping[int, str | None]
) -> Checkpoint | None:
    """The newest checkpoint whose hash is still the chain's at its height.

    `checkpoints` is newest first; `canonical` maps heights to the chain's hash there (None:
    past the head). Heights missing from `canonical` stop the search (the caller fetches more).
    """
    for cp in checkpoints:
        if cp.block_number not in canonical:
            return None
        if canonical[cp.block_number] == cp.block_hash:
            return cp
    return None


# --- the stream --------------------------------------------------------------------------------

Handler = Callable[[Event], Awaitable[None] | None]


@dataclass
class Subscription:
    name: str  # persisted: handled state is keyed by it, so keep it stable across restarts
    on_event: Handler
    on_retract: Handler | None = None
    events: frozenset[str] | None = None  # event names; None = every decoded event


@dataclass
class PollResult:
    delivered: int = 0
    retracted: int = 0
    cursor: int = -1
    caught_up: bool = False
    rewound_to: int | None = None


@dataclass
class EventStream:
    name: str
    source: LogSource
    store: Store
    decoder: AbiDecoder | Any  # anything with decode(RawLog) -> Event | None
    addresses: Sequence[str] | None = None
    topic0: Sequence[str] | None = None
    confirmations: int = 2
    start_block: int = 0
    batch_blocks: int = 2_000
    keep_checkpoints: int = 128
    poll_interval: float = 1.0
    clock: Clock = field(default_factory=RealClock)
    _subs: list[Subscription] = field(default_factory=list, init=False)

    def __post_init__(self) -> None:
        if self.confirmations < 0 or self.batch_blocks < 1 or self.keep_checkpoints < 1:
            raise ValueError("confirmations >= 0, batch_blocks >= 1, keep_checkpoints >= 1")

    def subscribe(
        self, name: str, on_event: Handler, on_retract: Handler | None = None,
        events: Iterable[str] | None = None,
    ) -> None:  # fmt: skip
        if any(s.name == name for s in self._subs):
            raise ValueError(f"subscriber {name!r} already registered on stream {self.name!r}")
        self._subs.append(
            Subscription(name, on_event, on_retract, frozenset(events) if events else None)
        )

    def _handler_key(self, sub: Subscription) -> str:
        return f"{self.name}/{sub.name}"

    @property
    def _base(self) -> int:
        return self.start_block - 1

    async def _cursor(self) -> Cursor:
        cursor = self.store.get_cursor(self.name)
        if cursor is not None:
            return cursor
        # First start: anchor at the block before start_block so a reorg below it is detected.
        base_hash = await self.source.block_hash(self._base) if self._base >= 0 else None
        cursor = Cursor(self._base, base_hash)
        with self.store.transaction():
            self.store.set_cursor(self.name, cursor)
            if base_hash is not None:
                self.store.add_checkpoint(self.name, Checkpoint(self._base, base_hash))
        return cursor

    async def poll_once(self) -> PollResult:
        """One step: detect and undo a reorg, then process at most one range of blocks."""
        result = PollResult()
        cursor = await self._cursor()
        if (
            cursor.block_hash is not None
            and await self.source.block_hash(cursor.block_number) != cursor.block_hash
        ):
            result.rewound_to, result.retracted = await self._rewind()
            cursor = await self._cursor()
        result.retracted += await self._retract_orphans(cursor)
        head = await self.source.head()
        span = plan_range(cursor.block_number, head, self.confirmations, self.batch_blocks)
        if span is None:
            result.cursor, result.caught_up = cursor.block_number, True
            return result
        first, last = span
        hash_before = await self.source.block_hash(last)
        raws = await self.source.logs(first, last, self.addresses, self.topic0)
        hash_after = await self.source.block_hash(last)
        still = (
            cursor.block_hash is None
            or await self.source.block_hash(cursor.block_number) == cursor.block_hash
        )
        if hash_before is None or hash_before != hash_after or not still:
            # The chain moved under us while we read: drop this read, the next poll redoes it.
            result.cursor = cursor.block_number
            return result
        raws = sorted(raws, key=lambda r: (r.block_number, r.log_index))
        if any(
            not first <= r.block_number <= last
            or (r.block_number == last and r.block_hash != hash_before)
            for r in raws
        ):
            result.cursor = cursor.block_number
            return result
        for raw in raws:
            event = self.decoder.decode(raw)
            if event is None:
                continue
            self.store.record_delivered(
                self.name, event.id, raw.block_number, raw.log_index, raw.to_json()
            )
            for sub in self._subs:
                if sub.events is not None and event.name not in sub.events:
                    continue
                key = self._handler_key(sub)
                if self.store.handled_state(key, event.id) == "applied":
                    continue
                await _call(sub.on_event, event)
                self.store.set_handled(key, event.id, "applied")
                result.delivered += 1
        with self.store.transaction():
            self.store.set_cursor(self.name, Cursor(last, hash_before))
            self.store.add_checkpoint(self.name, Checkpoint(last, hash_before))
            # Blocks with events are checkpointed too (their hashes came with the logs), so a
            # reorg rewinds to just below the first changed event block, not the range start.
            for number, bhash in {(r.block_number, r.block_hash) for r in raws}:
                self.store.add_checkpoint(self.name, Checkpoint(number, bhash))
            self.store.prune_checkpoints(self.name, self.keep_checkpoints, protect=self._base)
        result.cursor = last
        result.caught_up = last >= head - self.confirmations
        return result

    async def _rewind(self) -> tuple[int, int]:
        """Find the newest canonical checkpoint, retract everything above it, move the cursor."""
        checkpoints = self.store.checkpoints(self.name)
        canonical: dict[int, str | None] = {}
        found: Checkpoint | None = None
        for i in range(0, len(checkpoints), 16):
            for cp in checkpoints[i : i + 16]:
                canonical[cp.block_number] = await self.source.block_hash(cp.block_number)
            found = newest_canonical(checkpoints, canonical)
            if found is not None:
                break
        if found is not None:
            target = Cursor(found.block_number, found.block_hash)
        elif self._base < 0:
            target = Cursor(-1, None)  # started from genesis: rescan everything
        else:
            raise ReorgTooDeep(
                f"stream {self.name!r}: chain reorganised below its start block "
                f"{self.start_block}; the data folder no longer matches this chain"
            )
        retracted = await self._retract(
            [
                RawLog.from_json(p)
                for p in self.store.delivered_above(self.name, target.block_number)
            ]
        )
        with self.store.transaction():
            self.store.drop_checkpoints_above(self.name, target.block_number)
            self.store.set_cursor(self.name, target)
        log.warning("stream %s: reorg, rewound to block %d", self.name, target.block_number)
        return target.block_number, retracted

    async def _retract_orphans(self, cursor: Cursor) -> int:
        """Retract deliveries above a canonical cursor whose block has left the chain.

        Live deliveries above the cursor exist only when a range was interrupted (a crash or a
        handler error after some events of the range were handled, before the cursor moved).
        If those blocks are then reorganised away, no cursor hash mismatch would ever reveal
        it, so they are checked here, block by block.
        """
        raws = [
            RawLog.from_json(p) for p in self.store.delivered_above(self.name, cursor.block_number)
        ]
        if not raws:
            return 0
        canonical: dict[int, str | None] = {}
        for number in {r.block_number for r in raws}:
            canonical[number] = await self.source.block_hash(number)
        return await self._retract([r for r in raws if canonical[r.block_number] != r.block_hash])

    async def _retract(self, raws: Sequence[RawLog]) -> int:
        """Undo deliveries, newest first, each subscriber at most once per event id."""
        retracted = 0
        for raw in raws:
            event = self.decoder.decode(raw)
            if event is None:
                continue
            for sub in reversed(self._subs):
                key = self._handler_key(sub)
                if self.store.handled_state(key, event.id) != "applied":
                    continue
                if sub.on_retract is not None:
                    await _call(sub.on_retract, event)
                self.store.set_handled(key, event.id, "retracted")
                retracted += 1
            self.store.mark_retracted(self.name, event.id)
        return retracted

    async def catch_up(self, max_polls: int = 10_000) -> PollResult:
        """Poll until every confirmed block is processed (backfill)."""
        total = PollResult()
        for _ in range(max_polls):
            step = await self.poll_once()
            total.delivered += step.delivered
            total.retracted += step.retracted
            total.cursor = step.cursor
            if step.rewound_to is not None:
                total.rewound_to = step.rewound_to
            if step.caught_up:
                total.caught_up = True
                return total
        return total

    async def run(
        self, stop: asyncio.Event, *, heads_ws_url: str | None = None,
        error_backoff_s: float = 1.0, max_backoff_s: float = 30.0,
    ) -> None:  # fmt: skip
        """Follow the head until `stop` is set; transport errors back off and retry.

        With `heads_ws_url` (a node's WebSocket endpoint; Anvil serves it on its HTTP port)
        the stream also subscribes to new heads and polls as soon as one arrives, instead of
        waiting out `poll_interval`; polling remains the fallback if the socket fails.

        Handler exceptions are not swallowed: they stop the stream (the cursor has not moved
        past the failing event, so a restart retries it).
        """
        wake = asyncio.Event() if heads_ws_url else None
        watcher = (
            asyncio.create_task(watch_new_heads(heads_ws_url, wake, self.clock))
            if heads_ws_url and wake is not None
            else None
        )
        delay = error_backoff_s
        try:
            while not stop.is_set():
                if wake is not None:
                    wake.clear()  # heads that arrive during this poll wake the next wait
                try:
                    result = await self.poll_once()
                    delay = error_backoff_s
                except transport_errors() as exc:
                    log.warning("stream %s: %s; retrying in %.1f s", self.name, exc, delay)
                    await self.clock.sleep(delay)
                    delay = min(max_backoff_s, delay * 2)
                    continue
                if not result.caught_up:
                    continue
                if wake is None:
                    await self.clock.sleep(self.poll_interval)
                else:
                    await _first_of(wake, stop, timeout=self.poll_interval)
        finally:
            if watcher is not None:
                watcher.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await watcher


async def _first_of(*events: asyncio.Event, timeout: float) -> None:
    waiters = [asyncio.create_task(e.wait()) for e in events]
    try:
        await asyncio.wait(waiters, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waiters:
            w.cancel()


def ws_url_for(http_url: str) -> str:
    """The WebSocket URL a node serves next to its HTTP one (Anvil, geth with --ws on the
    same port); nodes with a separate WS port need it configured explicitly."""
    if http_url.startswith("https://"):
        return "wss://" + http_url[len("https://") :]
    if http_url.startswith("http://"):
        return "ws://" + http_url[len("http://") :]
    return http_url


async def watch_new_heads(
    ws_url: str, wake: asyncio.Event, clock: Clock, retry_s: float = 2.0
) -> None:
    """Set `wake` on every new head from an eth_subscribe("newHeads") WebSocket subscription.

    Runs until cancelled. A node that refuses the subscription ends the watcher (the stream
    keeps polling); a dropped socket is reopened after `retry_s`.
    """
    import websockets

    request = {"jsonrpc": "2.0", "id": 1, "method": "eth_subscribe", "params": ["newHeads"]}
    while True:
        try:
            async with websockets.connect(ws_url, open_timeout=5, max_size=1 << 22) as ws:
                await ws.send(json.dumps(request))
                reply = json.loads(await asyncio.wait_for(ws.recv(), 5))
                if "error" in reply:
                    log.warning("%s refuses newHeads (%s); polling only", ws_url, reply["error"])
                    return
                wake.set()
                async for _message in ws:
                    wake.set()
        except (OSError, TimeoutError, websockets.WebSocketException) as exc:
            log.warning("new-heads socket %s: %s; reconnecting in %.1f s", ws_url, exc, retry_s)
        await clock.sleep(retry_s)


async def _call(handler: Handler, event: Event) -> None:
    outcome = handler(event)
    if inspect.isawaitable(outcome):
        await outcome


def event_json(event: Event) -> str:
    """Debug/log helper: the event as one JSON line."""
    return json.dumps({"name": event.name, "id": event.id, "args": event.args}, default=str)
