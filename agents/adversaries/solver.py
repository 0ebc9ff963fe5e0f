"""Solvers that commit what they did not compute: `FaultySolver` (--cheat) trains, commits and
defends a run with an injected fault; `FalseTruthSolver` (--false-truth) trains honestly but, in
a forced round, seals a "true" checkpoint list that is itself wrong at the anchor (the reveal then
judges honest verifiers WRONG; they contest). For demos and tests only."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from agents.dispute.trace import FAULT_KINDS, Fault
from agents.roles.runner import RoleError
from agents.roles.solver import HonestSolver, flipped
from agents.training.state import State


def parse_cheat(text: str | None) -> Fault | None:
    """`KIND[:step=S,node=N,element=E,mask=M]`, e.g. `element:step=217,node=2,element=5`."""
    if not text:
        return None
    kind, _, rest = text.partition(":")
    if kind not in FAULT_KINDS:
        raise RoleError(f"--cheat {text!r}: kind must be one of {', '.join(FAULT_KINDS)}")
    fields: dict[str, int] = {}
    for part in filter(None, rest.split(",")):
        m = re.fullmatch(r"(step|node|element|mask)=(0x[0-9a-fA-F]+|\d+)", part.strip())
        if not m:
            raise RoleError(f"--cheat {text!r}: bad field {part!r} (step|node|element|mask=INT)")
        fields[m.group(1)] = int(m.group(2), 0)
    return Fault(kind, **fields)


def falsified(st: State, position: int) -> State:
    """A wrong "true" state for `--false-truth`: the second-lowest mantissa bit of one element
    flipped, so it differs from both the true state and the published `perturbed` one."""
    return flipped(st, b"false-truth", position, 2)


@dataclass(frozen=True, kw_only=True)
class FaultySolver(HonestSolver):
    """Trains, commits and defends the run with `fault` in it (it never plays forced rounds)."""

    fault: Fault | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "banner", f"CHEATING: will commit a run with fault {self.fault}")


@dataclass(frozen=True, kw_only=True)
class FalseTruthSolver(HonestSolver):
    """Seals a forced round's true list with the anchor's root replaced by a falsified state's."""

    banner: str = "FALSE TRUTH: will seal a wrong true list in forced rounds"

    def sealed_true_roots(
        self, true_roots: list[str], anchor: int, state_at: Callable[[int], State],
        state_root: Callable[[State], bytes],
    ) -> list[str]:  # fmt: skip
        lie = falsified(state_at(anchor), anchor)
        out = list(true_roots)
        out[anchor] = "0x" + state_root(lie).hex()
        return out
