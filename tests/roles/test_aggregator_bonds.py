"""The aggregator role takes back the bond of a reveal request it made once the aggregate it
challenged is overturned (PROTOCOL §6.9: answered requests' bonds are held with their aggregate),
and stops following a request whose aggregate stood. No chain: a fake RoundManager."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from rolefakes import FakeContract, SendingExecutor
from test_verifier_resilience import bare, new_store

from agents.core.enums import RoundStatus
from agents.roles.aggregator import Aggregator

ME_HELD = 4 * 10**18
ZERO_ADDRESS = "0x" + "00" * 20


def aggregator(tmp_path, rounds: dict[tuple[int, int], tuple[int, int]], held: dict) -> Aggregator:
    """`rounds[(job, round)]` = (status, attempt); `held[(job, round, attempt)]` my held bond."""
    a = bare(Aggregator, tmp_path, new_store(tmp_path, "aggregator"))
    a.rm = FakeContract(
        # IRoundManager.Round: status, attempt, deadline, aggregator, aggregateRoot, then the
        # version-3 fields (nextUnitRoot, unitsRoot, challenger)
        getRound=lambda dj, r: (
            *rounds[(dj, r)],
            0,
            ZERO_ADDRESS,
            b"\0" * 32,
            b"\0" * 32,
            b"\0" * 32,
            ZERO_ADDRESS,
        ),
        heldBondOf=lambda dj, r, attempt, who: held.get((dj, r, attempt), 0),
        reclaimRevealBond=lambda dj, r, attempt: ("reclaimRevealBond", dj, r, attempt),
    )

    async def send(act, fn) -> bool:  # mined
        a.sent.append((act, await fn.call()))
        return True

    a.rounds = SimpleNamespace(rm=a.rm)  # the executor's RoundManager (RoleAgent.round_manager)
    a.executor = SendingExecutor(a, send)
    return a


def test_a_held_bond_is_reclaimed_once_its_aggregate_is_overturned(tmp_path):
    rounds = {
        (1, 0): (RoundStatus.COMMITTED, 0),
        (2, 3): (RoundStatus.COMMITTED, 1),
        (3, 0): (RoundStatus.FINAL, 0),
    }
    held = {(2, 3, 0): ME_HELD}
    a = aggregator(tmp_path, rounds, held)
    for key in ("1:0:0", "2:3:0", "3:0:0"):
        a.agent.store.put_record("reveal-bond", key, "requested", {})
    asyncio.run(a.reclaim_reveal_bonds())
    assert [fn for _, fn in a.sent] == [("reclaimRevealBond", 2, 3, 0)]
    state = {r.record_id: r.state for r in a.agent.store.list_records("reveal-bond")}
    # 1:0:0 still challenged, 2:3:0 overturned and reclaimed, 3:0:0 stood (bond forfeited)
    assert state == {"1:0:0": "requested", "2:3:0": "returned", "3:0:0": "forfeited"}
    # the next rounds read only the request still open
    rounds[(1, 0)] = (
        RoundStatus.TRAINING,
        1,
    )  # overturned; its request was pending, credited at once
    asyncio.run(a.reclaim_reveal_bonds())
    assert len(a.sent) == 1
    assert a.agent.store.get_record("reveal-bond", "1:0:0").state == "returned"
