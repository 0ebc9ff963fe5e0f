"""Solvers that commit what they did not compute: `FaultySolver` (--cheat) trains, commits and
defends a run with an injected fault; `FalseTruthSolver` (--false-truth) trains honestly but, in
a forced round, seals a "true" checkpoint list that is itself wrong at the anchor (the reveal then
judges honest verifiers WRONG; they contest). For demos and tests only."""

from __future__ import annotations

import re
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from agents.adversaries.banner import Announced
from agents.adversaries.faults import FAULT_KINDS, Fault, faulty_account
from agents.dispute.budget import StateBudget
from agents.dispute.trace import drop_computation
from agents.roles.jobs import JobContext
from agents.roles.logic import UnitView
from agents.roles.runner import RoleError
from agents.roles.runtime import Claim, JobRuntime
from agents.roles.solver import HonestSolver, Solver, Training, TrainingStopped, flipped
from agents.training.merkle import CHECKPOINT_DOMAIN, list_proof
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


@dataclass
class ClaimedTraining:
    """Publishes a faulty account's checkpoints: its states and the roots it claims for them."""

    account: Claim
    every: int  # steps between checkpoints

    def resume(self, last_published: Callable[[], State]) -> bool:
        return False  # the account recomputes its states

    def checkpoint(
        self, c: int, stop: threading.Event, advance: Callable[[int], None]
    ) -> tuple[State, bytes]:
        if stop.is_set():
            raise TrainingStopped(f"checkpoint {c}")
        t = c * self.every
        out = self.account.state(t), self.account.claimed_root(t)
        advance(self.every if c else 0)
        return out


@dataclass(frozen=True, kw_only=True)
class FaultySolver(Announced, HonestSolver):
    """Trains, commits and defends the run with `fault` in it (it never plays forced rounds):
    its account of a unit is the faulty computation, which its training publishes."""

    fault: Fault
    banner: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "banner", f"CHEATING: will commit a run with fault {self.fault}")

    def computation(
        self, runtime: JobRuntime, steps: int, every: int, budget: StateBudget
    ) -> Claim:
        return faulty_account(runtime, steps, every, self.fault, budget)

    def account(self, fresh: Claim, seed: Callable[[Claim], None]) -> Claim:
        return fresh  # its published checkpoints are this account's states already

    def training(self, solver: Solver, u: UnitView, ctx: JobContext) -> Training:
        # registered on the loop, before the worker starts, for its commit and dispute moves
        drop_computation(solver.comps, u.unit_id)  # an earlier attempt's account
        comp = solver.new_computation(ctx)
        solver.comps[u.unit_id] = comp
        return ClaimedTraining(comp, ctx.spec.checkpoint_every)

    async def forced_checkpoints(
        self, drawn: Callable[[], Awaitable[tuple[int, list[int]]]]
    ) -> tuple[int, list[int]]:
        return 0, []  # the judge's draw is never read

    def commitment(
        self, checkpoint_root: bytes, true_root: bytes, account: Callable[[], Claim]
    ) -> tuple[bytes, bytes]:
        claimed = account().checkpoint_commit()  # a count fault commits one root too many
        return claimed, claimed

    def committed_checkpoint(
        self, published: Callable[[], tuple[list[bytes], State]], account: Callable[[], Claim],
        step: int,
    ) -> tuple[list[bytes], State]:  # fmt: skip
        comp = account()
        return comp.checkpoint_roots(), comp.state(step)


@dataclass(frozen=True, kw_only=True)
class StaleFinalSolver(Announced, HonestSolver):
    """Trains and publishes honestly but commits checkpoint `checkpoint`'s state root as the
    final one, with that entry's own valid list proof: issue #38's finding, where every verifier
    agreed with the list and the wrong result was paid. The chain refuses the commitment
    (`FinalRootNotLast`), so the unit expires and the collateral is slashed."""

    checkpoint: int
    banner: str = ""

    def __post_init__(self) -> None:
        text = f"STALE FINAL: will commit checkpoint {self.checkpoint}'s root as the final one"
        object.__setattr__(self, "banner", text)

    def final_root(self, published: list[bytes]) -> tuple[bytes, list[bytes]]:
        c = min(self.checkpoint, len(published) - 1)
        return published[c], list_proof(CHECKPOINT_DOMAIN, published, c).siblings


@dataclass(frozen=True, kw_only=True)
class FalseTruthSolver(Announced, HonestSolver):
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
