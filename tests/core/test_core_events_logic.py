"""The event stream's cursor/reorg logic on an in-memory chain (no node): pure and fast.

The hypothesis test drives a real `EventStream` (real SQLite store, in memory) against a fake
chain through random sequences of mined blocks, reorgs of random depth (some transactions
re-mined in other blocks, some dropped), crashes inside a handler and restarts, and checks
after each catch-up that the cursor reached the confirmed head, that every canonical event up
to the cursor is applied and nothing applied has left the chain, that no event is applied
twice or retracted without being applied, and that reorgs no deeper than the confirmation
depth never cause a retraction.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from dataclasses import dataclass, field

import pytest
from eth_utils import keccak
from hypothesis import given
from hypothesis import strategies as st

from agents.core.events import Event, EventStream, RawLog, newest_canonical, plan_range
from agents.core.store import Checkpoint, Store


def _h(tag: str, n: int) -> str:
    return "0x" + keccak(text=f"{tag}{n}").hex()


@dataclass
class FakeChain:
    blocks: list[tuple[str, list[RawLog]]] = field(default_factory=list)
    counter: int = 0

    def __post_init__(self) -> None:
        self.blocks.append((_h("block", 0), []))

    def _fresh(self, tag: str) -> str:
        self.counter += 1
        return _h(tag, self.counter)

    def _block(self, txs: Sequence[str]) -> None:
        number, bhash = len(self.blocks), self._fresh("block")
        logs = [RawLog("0x" + "11" * 20, ("0xaa",), "0x", number, bhash, tx, i)
                for i, tx in enumerate(txs)]  # fmt: skip
        self.blocks.append((bhash, logs))

    def mine(self, n_events: int) -> None:
        self._block([self._fresh("tx") for _ in range(n_events)])

    def reorg(self, depth: int, new_blocks: int, keep: int) -> None:
        """Replace the last `depth` blocks by `new_blocks`, re-mining `keep` old txs first."""
        depth = min(depth, len(self.blocks) - 1)
        dropped = [log.tx_hash for _, logs in self.blocks[len(self.blocks) - depth :]
                   for log in logs]  # fmt: skip
        del self.blocks[len(self.blocks) - depth :]
        carry = dropped[:keep]
        for i in range(new_blocks):
            txs = carry[i::new_blocks]
            self._block(txs + ([self._fresh("tx")] if i % 2 else []))

    def ids_up_to(self, height: int) -> set[str]:
        return {f"{lg.tx_hash}:{lg.log_index}:{lg.block_hash}"
                for _, logs in self.blocks[: height + 1] for lg in logs}  # fmt: skip


class FakeSource:
    def __init__(self, chain: FakeChain) -> None:
        self.chain = chain

    async def head(self) -> int:
        return len(self.chain.blocks) - 1

    async def block_hash(self, number: int) -> str | None:
        return self.chain.blocks[number][0] if 0 <= number < len(self.chain.blocks) else None

    async def logs(self, first, last, addresses, topic0) -> list[RawLog]:
        return [lg for _, logs in self.chain.blocks[first : last + 1] for lg in logs]


class RawDecoder:
    def decode(self, raw: RawLog) -> Event:
        return Event("Fake", {}, raw)


class Crash(Exception):
    pass


@dataclass
class Model:
    """What a subscriber that keeps its own persistent state would hold."""

    applied: set[str] = field(default_factory=set)
    retractions: int = 0
    crash_in: int | None = None  # raise on the (n+1)-th delivery from now

    def on_event(self, event: Event) -> None:
        if self.crash_in is not None:
            if self.crash_in == 0:
                self.crash_in = None
                raise Crash(event.id)
            self.crash_in -= 1
        assert event.id not in self.applied, f"applied twice: {event.id}"
        self.applied.add(event.id)

    def on_retract(self, event: Event) -> None:
        assert event.id in self.applied, f"retracted without being applied: {event.id}"
        self.applied.remove(event.id)
        self.retractions += 1


def _stream(chain: FakeChain, store: Store, model: Model, confirmations: int, batch: int):
    stream = EventStream(
        "s", FakeSource(chain), store, RawDecoder(), confirmations=confirmations,
        batch_blocks=batch, keep_checkpoints=4, poll_interval=0,
    )  # fmt: skip
    stream.subscribe("model", model.on_event, model.on_retract)
    return stream


ops = st.one_of(
    st.tuples(st.just("mine"), st.integers(0, 3)),
    st.tuples(st.just("reorg"), st.integers(1, 6), st.integers(0, 6), st.integers(0, 4)),
    st.tuples(st.just("sync")),
    st.tuples(st.just("restart")),
    st.tuples(st.just("crash"), st.integers(0, 3)),
)


@pytest.mark.fuzz
@given(
    steps=st.lists(ops, min_size=1, max_size=30),
    confirmations=st.integers(0, 3),
    batch=st.integers(1, 5),
)
def test_stream_matches_canonical_chain(steps, confirmations, batch) -> None:
    asyncio.run(_run_scenario(steps, confirmations, batch))


async def _run_scenario(steps, confirmations: int, batch: int) -> None:
    chain, store, model = FakeChain(), Store(":memory:"), Model()
    stream = _stream(chain, store, model, confirmations, batch)
    deepest_reorg = 0
    for step in [*steps, ("sync",)]:
        if step[0] == "mine":
            chain.mine(step[1])
        elif step[0] == "reorg":
            _, depth, new_blocks, keep = step
            # Keep the head from shrinking below the replaced depth only when asked to.
            real_depth = min(depth, len(chain.blocks) - 1)
            chain.reorg(depth, max(new_blocks, 0), keep)
            if real_depth:
                deepest_reorg = max(deepest_reorg, real_depth)
        elif step[0] == "restart":
            stream = _stream(chain, store, model, confirmations, batch)
        elif step[0] == "crash":
            model.crash_in = step[1]  # the handler dies after acting on step[1] events
            with contextlib.suppress(Crash):
                await stream.catch_up(max_polls=500)
            model.crash_in = None
            stream = _stream(chain, store, model, confirmations, batch)  # the agent restarts
        else:
            result = await stream.catch_up(max_polls=500)
            assert result.caught_up, "stream never caught up"
            head = len(chain.blocks) - 1
            # Every confirmed block processed; a rollback may leave the cursor above the new
            # safe head (those blocks are still canonical), never above the head itself.
            assert head - confirmations <= result.cursor <= head or result.cursor == -1
            # Nothing applied has left the chain, and everything up to the cursor is applied.
            # (Events above the cursor can be applied and still canonical: a range that was
            # interrupted by a crash, then the chain shrank below it without replacing them.)
            assert model.applied <= chain.ids_up_to(head)
            assert chain.ids_up_to(result.cursor) <= model.applied
    if deepest_reorg <= confirmations and all(s[0] != "reorg" or s[2] >= s[1] for s in steps):
        # Reorgs that neither reach confirmed blocks nor shorten the chain undo nothing.
        assert model.retractions == 0


def test_plan_range() -> None:
    assert plan_range(cursor=-1, head=0, confirmations=0, batch=10) == (0, 0)
    assert plan_range(cursor=5, head=7, confirmations=2, batch=10) is None
    assert plan_range(cursor=5, head=20, confirmations=2, batch=4) == (6, 9)
    assert plan_range(cursor=5, head=9, confirmations=2, batch=100) == (6, 7)


def test_newest_canonical() -> None:
    cps = [Checkpoint(9, "0x9"), Checkpoint(6, "0x6"), Checkpoint(3, "0x3")]
    assert newest_canonical(cps, {9: "0x9"}) == cps[0]
    assert newest_canonical(cps, {9: "0xX", 6: "0x6"}) == cps[1]
    assert newest_canonical(cps, {9: None, 6: "0xY"}) is None  # caller must fetch height 3
    assert newest_canonical(cps, {9: None, 6: "0xY", 3: "0x3"}) == cps[2]
    assert newest_canonical(cps, {9: None, 6: "0xY", 3: "0xZ"}) is None


def test_reorg_below_start_block_is_refused() -> None:
    from agents.core.events import ReorgTooDeep

    async def scenario() -> None:
        chain, store, model = FakeChain(), Store(":memory:"), Model()
        for _ in range(5):
            chain.mine(1)
        stream = EventStream("s", FakeSource(chain), store, RawDecoder(), confirmations=0,
                             start_block=3)  # fmt: skip
        stream.subscribe("m", model.on_event, model.on_retract)
        await stream.catch_up()
        assert len(model.applied) == 3  # blocks 3, 4, 5
        chain.reorg(4, 4, 0)  # replaces blocks 2..5: below the anchor at block 2
        with pytest.raises(ReorgTooDeep, match="below its start block 3"):
            await stream.poll_once()

    asyncio.run(scenario())
