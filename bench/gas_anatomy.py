"""Where a transaction's gas goes, from its opcode trace (`debug_traceTransaction`).

The contracts bench uses this to show which part of the job lifecycle's gas is fixed by the
protocol's shape (one transaction per step, one fresh storage slot per value that must outlive the
transaction) and which part is execution that code changes could still trim (PROTOCOL §6.7).

Costs are those of the EVM since Berlin/London (EIP-2929, EIP-2200, EIP-3529):
- intrinsic: 21,000 per transaction plus 4 gas per zero and 16 per nonzero calldata byte;
- a **new slot** (zero to nonzero): 20,000, plus 2,100 for the slot's first access in the
  transaction, which the trace charges either to that SSTORE (22,100) or to an earlier cold SLOAD
  of the same slot (the compiler reads a packed slot before writing part of it);
- a **slot update** (nonzero to another value, or a reset): 2,900, plus 2,100 when cold;
- a **cold read**: 2,100 (warm reads and writes, 100, count as execution);
- events: the LOG opcodes;
- the refund (slots reset to zero), capped at a fifth of the gas executed.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

TX_BASE_GAS = 21_000
COLD_SLOAD_GAS = 2_100
NEW_SLOT_GAS = 20_000
CALLS = ("CALL", "STATICCALL", "CALLCODE", "DELEGATECALL")
OWN_STORAGE = ("DELEGATECALL", "CALLCODE")
LOGS = ("LOG0", "LOG1", "LOG2", "LOG3", "LOG4")


@dataclass(frozen=True)
class Anatomy:
    """One transaction's gasUsed, split; `execution` is what is left (opcodes, memory, calls,
    hashing) after the other parts and the refund."""

    gas_used: int
    intrinsic: int
    new_slots: int
    new_slots_gas: int
    slot_updates: int
    slot_updates_gas: int
    cold_reads: int
    cold_reads_gas: int
    events_gas: int
    refund: int
    execution: int

    def to_json(self) -> dict[str, int]:
        return asdict(self)


def calldata_gas(data: bytes) -> int:
    """Intrinsic gas of a call transaction with this calldata (no access list)."""
    zeros = data.count(0)
    return TX_BASE_GAS + 4 * zeros + 16 * (len(data) - zeros)


def anatomy(struct_logs: list[dict[str, Any]], calldata: bytes, gas_used: int, to: str) -> Anatomy:
    """Split `gas_used` of a call to `to` whose trace is `struct_logs` (geth's default tracer,
    with the stack). Storage keys are told apart by contract: the stack of called addresses
    follows CALL/STATICCALL (a DELEGATECALL or CALLCODE keeps the caller's storage)."""
    frames: list[str] = [to.lower()]
    cold_loaded: set[tuple[str, str]] = set()
    new_slots = new_slots_gas = updates = updates_gas = 0
    cold_reads = events_gas = 0
    for i, log in enumerate(struct_logs):
        depth = log["depth"]
        # returning from a call pops frames (a call that runs no code never pushed one)
        del frames[depth:]
        op = log["op"]
        cost = int(log["gasCost"])
        if op in CALLS:
            nxt = struct_logs[i + 1] if i + 1 < len(struct_logs) else None
            if nxt is not None and nxt["depth"] == depth + 1:
                target = "0x" + log["stack"][-2][2:].rjust(40, "0")[-40:]
                # DELEGATECALL and CALLCODE run the callee's code on the caller's storage
                frames.append(frames[-1] if op in OWN_STORAGE else target.lower())
        elif op == "SLOAD":
            if cost >= COLD_SLOAD_GAS:
                cold_reads += 1
                cold_loaded.add((frames[-1], log["stack"][-1]))
        elif op == "SSTORE":
            key = (frames[-1], log["stack"][-1])
            if cost >= NEW_SLOT_GAS:
                new_slots += 1
                new_slots_gas += NEW_SLOT_GAS + COLD_SLOAD_GAS
                if cost < NEW_SLOT_GAS + COLD_SLOAD_GAS and key in cold_loaded:
                    # its first access was that cold SLOAD: count it here, not as a read
                    cold_loaded.discard(key)
                    cold_reads -= 1
            elif cost > 100:
                updates += 1
                updates_gas += cost
        elif op in LOGS:
            events_gas += cost
    executed_refund = int(struct_logs[-1].get("refund", 0)) if struct_logs else 0
    intrinsic = calldata_gas(calldata)
    executed = _executed(gas_used, executed_refund)
    refund = executed - gas_used
    cold_reads_gas = cold_reads * COLD_SLOAD_GAS
    execution = executed - intrinsic - new_slots_gas - updates_gas - cold_reads_gas - events_gas
    return Anatomy(
        gas_used=gas_used,
        intrinsic=intrinsic,
        new_slots=new_slots,
        new_slots_gas=new_slots_gas,
        slot_updates=updates,
        slot_updates_gas=updates_gas,
        cold_reads=cold_reads,
        cold_reads_gas=cold_reads_gas,
        events_gas=events_gas,
        refund=refund,
        execution=execution,
    )


def _executed(gas_used: int, refund_counter: int) -> int:
    """The gas executed before the refund: gasUsed = executed - min(counter, executed // 5)."""
    if 5 * refund_counter <= gas_used + refund_counter:
        return gas_used + refund_counter
    # the cap applied: executed - executed // 5 == gas_used
    executed = gas_used * 5 // 4
    while executed - executed // 5 < gas_used:
        executed += 1
    return executed


def total(parts: list[Anatomy]) -> Anatomy:
    """The field-wise sum of several transactions' anatomies."""
    fields = Anatomy.__dataclass_fields__
    return Anatomy(**{f: sum(getattr(p, f) for p in parts) for f in fields})
