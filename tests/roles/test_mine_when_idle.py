"""--mine-when-idle paces chain time by the wall clock (logic.idle_block_due), on a client that
never repeats a timestamp (Hardhat: every block a second after the one before) as on one that
may (Anvil). Counting blocks made Hardhat's chain time run 2.4 times as fast as wall time."""

from __future__ import annotations

import asyncio
import math
from types import SimpleNamespace

import pytest
from rolefakes import role_config

from agents.core.clock import FakeClock
from agents.roles.logic import IdleBlock, idle_block_due
from agents.roles.runner import RoleAgent


def test_a_block_is_due_only_while_chain_time_keeps_behind_the_wall_clock() -> None:
    assert idle_block_due(100, None, 0.0)  # the first: nothing to pace against yet
    last = IdleBlock(chain_ts=100, at_s=50.0)
    assert not idle_block_due(100, last, 50.5)  # my block would be a second later: too soon
    assert idle_block_due(100, last, 51.0)
    # others' transactions moved the chain 5 s in 2 s of wall time: wait until the wall catches up
    assert not idle_block_due(105, last, 52.0)
    assert not idle_block_due(105, last, 55.5)
    assert idle_block_due(105, last, 56.0)


class Chain:
    """An automining dev chain: a block's timestamp is the wall second, and on a client that
    never repeats one (`strict`), at least the previous block's plus one."""

    def __init__(self, clock: FakeClock, strict: bool) -> None:
        self.clock, self.strict = clock, strict
        self.timestamps = [math.floor(clock.wall())]

    def block(self) -> None:
        wall = math.floor(self.clock.wall())
        previous = self.timestamps[-1]
        self.timestamps.append(max(wall, previous + 1) if self.strict else max(wall, previous))

    # the AsyncWeb3 surface mine_if_idle uses
    async def get_block(self, which: str) -> dict:
        assert which == "latest"
        return {"timestamp": self.timestamps[-1]}

    async def make_request(self, method: str, params: list) -> None:
        assert method == "evm_mine"
        self.block()


def idle_role(chain: Chain, clock: FakeClock) -> RoleAgent:
    role = object.__new__(RoleAgent)
    role.config = role_config(RoleAgent, mine_when_idle=True)
    role.agent = SimpleNamespace(clock=clock)
    role.w3 = SimpleNamespace(eth=chain, provider=chain)
    return role


@pytest.mark.parametrize("strict", [True, False], ids=["hardhat", "anvil"])
def test_two_idle_miners_and_busy_senders_keep_chain_time_with_the_wall_clock(strict) -> None:
    """The demo's case: the submitter and the whistleblower both mine when idle, every half
    second (their poll interval), while others' transactions make a block every 2 s."""
    clock = FakeClock()
    chain = Chain(clock, strict)
    miners = [idle_role(chain, clock), idle_role(chain, clock)]
    start_wall, start_chain = clock.wall(), chain.timestamps[-1]
    for tick in range(600):  # 300 s of wall time
        if tick % 4 == 0:
            chain.block()  # someone's transaction
        for m in miners:
            asyncio.run(m.mine_if_idle())
        clock.advance(0.5)
    wall_elapsed = clock.wall() - start_wall
    chain_elapsed = chain.timestamps[-1] - start_chain
    assert chain_elapsed <= wall_elapsed + 2
    # and chain time does move on: deadlines pass at the wall clock's pace
    assert chain_elapsed >= wall_elapsed - 2


def test_without_the_flag_nothing_is_mined() -> None:
    clock = FakeClock()
    chain = Chain(clock, strict=True)
    role = idle_role(chain, clock)
    role.config = role_config(RoleAgent, mine_when_idle=False)
    asyncio.run(role.mine_if_idle())
    assert len(chain.timestamps) == 1
