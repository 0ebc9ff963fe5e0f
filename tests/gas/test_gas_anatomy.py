"""bench.gas_anatomy: the split of a transaction's gas from its opcode trace."""

from __future__ import annotations

from bench.gas_anatomy import Anatomy, anatomy, calldata_gas, total

MANAGER = "0x" + "aa" * 20
REGISTRY = "0x" + "bb" * 20
SLOT_A = "0x1"
SLOT_B = "0x2"


def step(op: str, cost: int, depth: int = 1, stack: list[str] | None = None, refund: int = 0):
    return {"op": op, "gasCost": cost, "depth": depth, "stack": stack or [], "refund": refund}


def test_calldata_gas_countsZeroAndNonzeroBytes():
    assert calldata_gas(b"") == 21_000
    assert calldata_gas(b"\x00\x00\x07") == 21_000 + 4 + 4 + 16


def test_anatomy_newSlotAfterColdRead_countsTheReadInTheSlot():
    logs = [
        step("SLOAD", 2_100, stack=[SLOT_A]),
        step("SSTORE", 20_000, stack=["0x5", SLOT_A]),
        step("SSTORE", 22_100, stack=["0x5", SLOT_B]),
        step("STOP", 0),
    ]
    a = anatomy(logs, b"", 21_000 + 2_100 + 20_000 + 22_100, MANAGER)
    assert (a.new_slots, a.new_slots_gas) == (2, 44_200)
    assert (a.cold_reads, a.cold_reads_gas) == (0, 0)
    assert a.execution == 0


def test_anatomy_sameSlotInAnotherContract_isNotTheCallersSlot():
    # manager and registry each read their own slot A cold and then fill it: two new slots, both
    # reads belong to them (keyed by slot only, the registry's write would take the manager's read)
    logs = [
        step("SLOAD", 2_100, stack=[SLOT_A]),
        step("CALL", 100, stack=["0x0", REGISTRY, "0x5000"]),
        step("SLOAD", 2_100, depth=2, stack=[SLOT_A]),
        step("SSTORE", 20_000, depth=2, stack=["0x1", SLOT_A]),
        step("STOP", 0, depth=2),
        step("SSTORE", 20_000, stack=["0x9", SLOT_A]),
        step("SSTORE", 2_900, stack=["0x9", SLOT_B]),
        step("STOP", 0),
    ]
    a = anatomy(logs, b"", 70_000, MANAGER)
    assert (a.new_slots, a.new_slots_gas) == (2, 44_200)
    assert a.cold_reads == 0
    assert (a.slot_updates, a.slot_updates_gas) == (1, 2_900)


def test_anatomy_refundAboveTheCap_isCappedAtAFifth():
    logs = [step("SSTORE", 2_900, stack=["0x0", SLOT_A]), step("STOP", 0, refund=10_000)]
    a = anatomy(logs, b"", 30_000, MANAGER)
    # executed 37 500, of which a fifth (7 500) was refunded
    assert a.refund == 7_500
    assert a.intrinsic + a.slot_updates_gas + a.execution - a.refund == 30_000


def test_anatomy_eventsAndWarmAccess_areSplitOff():
    logs = [step("LOG3", 1_756), step("SLOAD", 100, stack=[SLOT_A]), step("STOP", 0)]
    a = anatomy(logs, b"", 21_000 + 1_756 + 100, MANAGER)
    assert a.events_gas == 1_756
    assert a.cold_reads == 0
    assert a.execution == 100


def test_total_addsEveryField():
    one = Anatomy(10, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10)
    assert total([one, one]) == Anatomy(20, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20)
