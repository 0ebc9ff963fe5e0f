"""The solver: register and stake, heartbeat, claim units it can run, train, publish
checkpoints, commit, defend disputes, withdraw earnings.

Persistent memory (SQLite records): kind "train", id "<unit>:<attempt>" — the checkpoints
published so far (roots, blob addresses, losses), so a solver killed during training resumes
from its last published checkpoint; kind "job" — jobs it refused (with the reason). A unit
whose commitment of mine was refused (it re-opened after my commit) is not claimed again.

Before claiming, the solver checks that it can finish: a claim locks its collateral until the
claim deadline (refused beyond --max-claim-wait), and once assigned it must train and commit
within the job's computeTime (the cost model below, at --train-speed, with the units it
holds and has not trained yet counted first).

Training runs off the loop, in one worker thread at a time (`TrainingRun`): while a unit
trains, the rounds go on serving every other unit (heartbeats, commits, forced reveals, game
moves). The "train" act of a unit starts its training when no other is in flight and is a
no-op otherwise; the worker writes the "train" record after each checkpoint and "published" at
the end, and the next round commits. A worker's error is raised again in the round that finds
it, inside that unit's isolation (logged, retried); stopping the agent stops the worker at its
next step (its last checkpoint is kept: a restart resumes from it).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import torch
from eth_utils import keccak

from agents.core.bounded import BoundedCache, SaidOnce
from agents.core.enums import Role
from agents.core.keys import derived_secret
from agents.dispute.availability import StateOpening
from agents.dispute.budget import StateBudget
from agents.dispute.player import Defender
from agents.dispute.trace import drop_computation
from agents.roles.actions import (
    AnswerData,
    ChainAction,
    ClaimUnit,
    ClaimWithSecret,
    CloseClaims,
    Commit,
    CommitCheckpoints,
    Defend,
    Reveal,
    RevealForced,
    Train,
)
from agents.roles.artifacts import Manifest, make_locator
from agents.roles.config import SolverConfig
from agents.roles.forced_reveal import forced_reveal, judged_checkpoints
from agents.roles.games import take_turn
from agents.roles.holding import answer_request
from agents.roles.jobs import JobContext, JobRejected
from agents.roles.logic import (
    Act,
    Now,
    Side,
    SolverFacts,
    UnitStatus,
    UnitView,
    VerifierStatus,
    claim_act,
    claim_send_refusal,
    claim_turn,
    forced_reveal_open,
    solver_acts,
    unclaimed_lapsed,
)
from agents.roles.runner import RoleAgent, progress_bar
from agents.roles.runtime import Claim, JobRuntime
from agents.training.float32 import check_no_flush_denormal
from agents.training.merkle import checkpoint_root, final_proof
from agents.training.spec import JobSpec, ModelSpec
from agents.training.state import State

TOKEN = 10**18

# --- the cost model of a claim -----------------------------------------------------------------
# One SGD step of an MLP with widths d0..dL on a batch of B examples costs about
# 3·B·Σ d_i·d_(i+1) multiply-adds: the forward pass, and the backward pass for the weights and
# for the activations. The engine also pays a fixed cost per step (Python, batch selection,
# kernel launches) that dominates small models: a 64-64-10 step is ~0.7 ms on one CPU core.
# Each checkpoint runs one more step's trace (its loss) and hashes, encodes and stores the state
# (n_params words). The estimate must fit the job's computeTime CLAIM_MARGIN times over: the
# commit, blob uploads and a slower machine than measured all come out of the same window.
STEP_OVERHEAD_S = 0.001
STATE_WORD_S = 5e-8
CLAIM_MARGIN = 2.0
# --train-speed's default (agents/roles/config.py DEFAULT_TRAIN_SPEED, million multiply-adds per
# second) is below what one shared CPU core sustained here (~600 for a 64-64-10 step with its
# overhead counted, 5,000-15,000 for 512- to 1024-wide layers).
# How long stopping the agent waits for an in-flight training to notice (it checks each step
# and each checkpoint); past it the daemon thread is abandoned, which is safe: every checkpoint
# is recorded as it is published, and a restart resumes from the last one.
TRAINING_STOP_WAIT_S = 5.0
#: Sends in flight at once (claims and keeper steps): sent side by side, their receipts awaited
#: together (the sender gives them consecutive nonces), the round going on meanwhile. One at a
#: time, each waited a block for its receipt: a solver first for 12 of 50 just-posted units
#: sent the last claims past their 20 s window, and a keeper step planned early in a round
#: went out many seconds late, when the next keeper's grace was over too (issue #45's bench).
SENDS_IN_FLIGHT = 16


def step_macs(spec: JobSpec) -> int:
    """Multiply-adds of one training step of `spec` (forward and backward)."""
    w = spec.widths
    return 3 * spec.batch * sum(a * b for a, b in zip(w, w[1:], strict=False))


def training_seconds(
    spec: JobSpec | ModelSpec,
    macs_per_s: float,
    macs: int | None = None,
    n_params: int | None = None,
) -> float:
    """Estimated seconds to train `spec` from step 0 and publish every checkpoint; `macs` and
    `n_params` are a step's multiply-adds and the parameters (a version-1 spec's by default;
    a job runtime's otherwise: `JobRuntime.step_macs`, `.n_params`)."""
    macs = step_macs(spec) if macs is None else macs
    n_params = spec.n_params if n_params is None else n_params
    step = STEP_OVERHEAD_S + macs / macs_per_s
    checkpoints = spec.steps // spec.checkpoint_every + 1
    return spec.steps * step + checkpoints * (step + n_params * STATE_WORD_S)


def job_training_seconds(ctx: JobContext, macs_per_s: float) -> float:
    rt = ctx.runtime
    return training_seconds(ctx.spec, macs_per_s, rt.step_macs, rt.n_params)


def fit_refusal(own_s: float, held_s: float, compute_time: int) -> tuple[str, bool] | None:
    """Why a unit of `own_s` estimated seconds must not be claimed while units of `held_s`
    seconds are still to train before it (their training runs first), or None. The bool says
    whether the refusal lasts (the job alone does not fit) or may pass (held units get done)."""
    budget = compute_time / CLAIM_MARGIN
    if own_s > budget:
        why = f"training takes ~{own_s:.0f} s here, over computeTime {compute_time} s / "
        return why + f"{CLAIM_MARGIN:g}", True
    if own_s + held_s > budget:
        why = f"training takes ~{own_s:.0f} s after the ~{held_s:.0f} s of units I hold; "
        return why + f"computeTime {compute_time} s / {CLAIM_MARGIN:g} leaves no room", False
    return None


def flipped(st: State, key: bytes, position: int, mask: int) -> State:
    """`st` with bits `mask` of one element (chosen by keccak(key, position)) of its first
    tensor flipped."""
    out = {name: t.clone() for name, t in st.items()}
    bits = next(iter(out.values())).view(-1).view(torch.int32)
    e = int.from_bytes(keccak(key + position.to_bytes(32, "big")), "big") % bits.numel()
    bits[e] ^= mask
    return out


def perturbed(st: State, secret: bytes, position: int) -> State:
    """The state one bit away that a forced round publishes at checkpoint `position`: the low
    mantissa bit of one element (chosen by keccak(r, position)) of the first tensor flipped."""
    return flipped(st, secret, position, 1)


class TrainingStopped(Exception):
    """The agent stops: an in-flight training ends at its next step (nothing is published)."""


@dataclass
class TrainingRun:
    """One unit's training in its worker thread. The loop starts it and reads `done` and
    `error` each round; the worker sets them last. A thread, not a process: torch and the C
    kernels (called through ctypes) release the GIL, so the loop's chain reads and sends go on
    beside it; and the worker may share the agent's store (one SQLite connection opened with
    check_same_thread off, each statement under the store's lock, so the worker's writes are
    serialized with the loop's) and its blob store (content-addressed files written atomically,
    or one HTTP connection per request). A daemon thread, so that an abandoned training never
    holds the process's exit."""

    key: str  # "<unit>:<attempt>", as the "train" record
    unit_id: int
    stop: threading.Event = field(default_factory=threading.Event)
    done: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None
    thread: threading.Thread | None = None


class Training(Protocol):
    """The checkpoints a solver publishes for a unit, computed in order, one at a time."""

    def resume(self, last_published: Callable[[], State]) -> bool:
        """Go on from the last checkpoint published before a restart (`last_published()`, read
        only if used); False: this run recomputes it."""
        ...

    def checkpoint(
        self, c: int, stop: threading.Event, advance: Callable[[int], None]
    ) -> tuple[State, bytes]:
        """The state at checkpoint `c` and the root published for it (the one after the last
        returned or resumed); raises TrainingStopped once `stop` is set."""
        ...


@dataclass
class EngineTraining:
    """The job trained by its engine, step by step, from its initial state (or from the last
    checkpoint published before a restart)."""

    runtime: JobRuntime
    every: int  # steps between checkpoints
    state: State | None = None  # at the last checkpoint computed or resumed

    def resume(self, last_published: Callable[[], State]) -> bool:
        self.state = last_published()
        return True

    def checkpoint(
        self, c: int, stop: threading.Event, advance: Callable[[int], None]
    ) -> tuple[State, bytes]:
        rt = self.runtime
        st = rt.initial_state() if self.state is None else self.state
        for t in range(max(c - 1, 0) * self.every, c * self.every):  # none for checkpoint 0
            if stop.is_set():
                raise TrainingStopped(f"step {t}")
            st = rt.step(st, t)
            advance(1)
        self.state = st
        return st, rt.state_root(st)


class SolverStrategy(Protocol):
    """What a solver trains, commits and defends: the honest run (`HonestSolver`) or a test
    adversary's (agents.adversaries: --cheat, --false-truth), chosen once at start-up. Each
    hook is handed what the honest solver does (a value, or a callable computing it)."""

    def announce(self, log: logging.Logger) -> None:
        """Say once at start-up what this strategy does, if it is not the honest one."""
        ...

    def computation(
        self, runtime: JobRuntime, steps: int, every: int, budget: StateBudget
    ) -> Claim:
        """A fresh account of a whole job's claim, its kept states within `budget`."""
        ...

    def account(self, fresh: Claim, seed: Callable[[Claim], None]) -> Claim:
        """My account of a unit for its disputes, from a `fresh` one (`seed` starts it from my
        published checkpoints)."""
        ...

    def training(self, solver: Solver, u: UnitView, ctx: JobContext) -> Training:
        """The run the worker publishes for `u` (set up on the loop, before it starts)."""
        ...

    async def forced_checkpoints(
        self, drawn: Callable[[], Awaitable[tuple[int, list[int]]]]
    ) -> tuple[int, list[int]]:
        """The anchor and perturbed checkpoints of the forced round I play (`await drawn()`:
        the judge's draw for my secret, read only if used; (0, []): an ordinary round)."""
        ...

    def sealed_true_roots(
        self, true_roots: list[str], anchor: int, state_at: Callable[[int], State],
        state_root: Callable[[State], bytes],
    ) -> list[str]:  # fmt: skip
        """The checkpoint list a forced round's seal holds true (`true_roots`: my training's;
        `anchor`: the round's anchor checkpoint; `state_at(c)`: my state at checkpoint c)."""
        ...

    def commitment(
        self, checkpoint_root: bytes, true_root: bytes, account: Callable[[], Claim]
    ) -> tuple[bytes, bytes]:
        """The checkpoint root I commit and the one my seal holds true (given: my manifest's
        and my training's; `account()`: my account of the unit)."""
        ...

    def committed_checkpoint(
        self, published: Callable[[], tuple[list[bytes], State]], account: Callable[[], Claim],
        step: int,
    ) -> tuple[list[bytes], State]:  # fmt: skip
        """The roots my commitment binds and my state at checkpoint step `step` (`published()`:
        my training's, as the chain holds them now)."""
        ...

    def final_root(self, published: list[bytes]) -> tuple[bytes, list[bytes]]:
        """The final state root I commit with the list proof that opens it (`published`: the
        state roots of the list I commit)."""
        ...


@dataclass(frozen=True, kw_only=True)
class HonestSolver:
    """Trains the job as specified, commits and seals the roots it computed, defends them from
    its published checkpoints and plays the forced rounds its secret draws."""

    def announce(self, log: logging.Logger) -> None:
        return None

    def computation(
        self, runtime: JobRuntime, steps: int, every: int, budget: StateBudget
    ) -> Claim:
        return runtime.computation(steps, every, budget=budget)

    def account(self, fresh: Claim, seed: Callable[[Claim], None]) -> Claim:
        seed(fresh)
        return fresh

    def training(self, solver: Solver, u: UnitView, ctx: JobContext) -> Training:
        return EngineTraining(ctx.runtime, ctx.spec.checkpoint_every)

    async def forced_checkpoints(
        self, drawn: Callable[[], Awaitable[tuple[int, list[int]]]]
    ) -> tuple[int, list[int]]:
        return await drawn()

    def sealed_true_roots(
        self, true_roots: list[str], anchor: int, state_at: Callable[[int], State],
        state_root: Callable[[State], bytes],
    ) -> list[str]:  # fmt: skip
        return true_roots

    def commitment(
        self, checkpoint_root: bytes, true_root: bytes, account: Callable[[], Claim]
    ) -> tuple[bytes, bytes]:
        return checkpoint_root, true_root

    def committed_checkpoint(
        self, published: Callable[[], tuple[list[bytes], State]], account: Callable[[], Claim],
        step: int,
    ) -> tuple[list[bytes], State]:  # fmt: skip
        return published()

    def final_root(self, published: list[bytes]) -> tuple[bytes, list[bytes]]:
        # the list's last entry: never perturbed, so a forced round's too
        return published[-1], final_proof(published)


class Solver(RoleAgent):
    role = "solver"
    config: SolverConfig
    # A class default, so solvers built without __init__ (tests) are honest.
    strategy: SolverStrategy = HonestSolver()
    # The training in flight, if any: one at a time, as held_seconds assumes (units are trained
    # one after the other). A class default, so solvers built without __init__ (tests) have it.
    trainer: TrainingRun | None = None

    def __init__(self, *a, strategy: SolverStrategy | None = None, **kw) -> None:
        super().__init__(*a, **kw)
        self.strategy = strategy or HonestSolver()
        self.capability = self.config.capability
        self.comps: dict[int, Claim] = {}
        # game -> the unit I defend in it (its first turn is logged; an evicted one again)
        self.games: BoundedCache[int, int] = BoundedCache(self.max_loaded_jobs)
        self.round_units: list[UnitView] = []
        self.held: dict[int, float] | None = None  # unit -> training left (held_seconds)

    async def setup(self) -> None:
        await self.ensure_registered(Role.SOLVER, int(self.config.stake * TOKEN), self.capability)
        self.strategy.announce(self.log)

    # --- a round ----------------------------------------------------------------------------

    async def round(self) -> bool:
        now = await self.now()
        await self.heartbeat_if_due(now)
        self.reap_training()
        units = await self.units_in_preference_order()
        self.stop_stale_training(units)
        # The work I hold, read once this round if a claim is weighed (held_seconds).
        self.round_units, self.held = units, None
        for u in units:
            if u.status in (UnitStatus.FINALIZED, UnitStatus.CANCELLED, UnitStatus.NONE):
                # my account of a unit is for its commit and its games: done with for good
                drop_computation(self.comps, u.unit_id)
                continue
            with self.isolated(f"unit {u.unit_id}"):
                for act in solver_acts(u, now, await self.facts(u, now)):
                    await self.handle(act, u, now)
        await self.sends_landed()
        await self.withdraw_if_credited(now)
        return False

    async def units_in_preference_order(self) -> list[UnitView]:
        """Every unit; a RoundManager's units in my own order (decomposed.preference)."""
        units = await self.units()
        if self.rounds is None:
            return units
        from agents.roles.decomposed import preference

        return sorted(units, key=lambda u: preference(self.me, u.unit_id))

    async def facts(self, u: UnitView, now: Now) -> SolverFacts:
        claimed = await self.claimed(u)
        rec = self.agent.store.get_record("train", f"{u.unit_id}:{u.attempt}")
        trained = rec is not None and rec.state == "published"
        game_id = 0
        if u.status == UnitStatus.DISPUTED:
            game_id = int((await self.dispute(u)).gameId)
        # Eligibility decides a claim only: a unit I hold is served whatever it would say now
        # (my claim itself locked the stake it compares). My turn comes first: it is cheap,
        # and a unit I will not claim needs no job loaded.
        eligible = (
            u.status == UnitStatus.OPEN
            and not claimed
            and await self.claim_turn(u, now)
            and await self.eligible(u)
        )
        reveal_due = await self.reveal_due(u)
        keeper = await self.keeper_facts(u)
        return SolverFacts(self.me, claimed, eligible, trained, game_id, reveal_due, keeper)

    async def claim_turn(self, u: UnitView, now: Now) -> bool:
        """My turn to claim this open window (logic.claim_turn): first in the unit's order of
        the live solvers, or nobody claimed in my rank's graces since I first saw it open. An
        extended window (its deadline moved) starts the turns again: its extender claims it,
        the others wait their graces as in the first."""
        seen: BoundedCache[tuple[int, int, int], int] = self.__dict__.setdefault(
            "_open_since", BoundedCache(4096)
        )
        window = (u.unit_id, u.attempt, u.deadline)
        first = seen.get(window)
        if first is None:
            seen.put(window, now.timestamp)
            first = now.timestamp
        solvers = await self.live_pool(Role.SOLVER)
        return claim_turn(u, self.me, solvers, await self.claimants(u), now.timestamp - first)

    # --- sends in flight (SENDS_IN_FLIGHT) --------------------------------------------------

    @property
    def in_flight(self) -> set[asyncio.Task]:
        return self.__dict__.setdefault("_in_flight", set())

    async def send_slot(self) -> None:
        """Wait until fewer than SENDS_IN_FLIGHT of my sends are in flight."""
        while len(self.in_flight) >= SENDS_IN_FLIGHT:
            await asyncio.wait(self.in_flight, return_when=asyncio.FIRST_COMPLETED)

    def beside(self, send: Awaitable[Any], u: UnitView) -> None:
        """Run `send` (a claim's or keeper step's) beside the round, isolated as the unit's work
        in the round is; its outcome is the executor's to log."""

        async def run() -> None:
            try:
                with self.isolated(f"unit {u.unit_id}"):
                    await send
            except Exception as exc:  # a node or network error: the round's, as if sent in it
                self.__dict__["_send_error"] = exc

        task = asyncio.create_task(run())
        self.in_flight.add(task)
        task.add_done_callback(self.in_flight.discard)

    async def sends_landed(self) -> None:
        """Wait for every send in flight (a round ends with its sends done); a node or network
        error one of them met ends the round, as it would have ended it in the loop."""
        if self.in_flight:
            await asyncio.wait(set(self.in_flight))
        error = self.__dict__.pop("_send_error", None)
        if error is not None:
            raise error

    async def claim_seconds(self, u: UnitView) -> float:
        """Estimated seconds to train unit `u` from step 0 (a claim of it, before it lands)."""
        return job_training_seconds(await self.job_context(u.job_id), self.train_speed)

    async def claim_refusal(self, u: UnitView) -> str | None:
        """Why the claim planned on `u` must not be sent now (logic.claim_send_refusal), on a
        fresh block and the unit read again with its claimants; None: send it."""
        now = self.chain_time(await self.now())
        fresh = await self.unit(u.unit_id)
        fresh = replace(fresh, claimants=await self.claimants(fresh))
        return claim_send_refusal(u, fresh, now, self.me)

    async def claimed(self, u: UnitView) -> bool:
        return any(c.lower() == self.me.lower() for c in await self.claimants(u))

    async def reveal_due(self, u: UnitView) -> bool:
        """My forced round awaits its reveal and no drawn verifier can still seal or open its seal
        (logic.forced_reveal_open; the judge refuses earlier, and showing the secret while one
        is still to seal would get me slashed)."""
        if u.forced_revealed or u.assignee.lower() != self.me.lower():
            return False
        if u.status not in (UnitStatus.VERIFYING, UnitStatus.DISPUTED):
            return False
        if self.agent.store.get_record("forced", f"{u.unit_id}:{u.attempt}") is None:
            return False
        statuses = [d.status for d in await self.drawn(u)]
        now, window = await self.now(), await self.reveal_window()
        return forced_reveal_open(statuses, now, u.deadline, window)

    async def eligible(self, u: UnitView) -> bool:
        """May I claim this open unit: not refused before, a claim deadline near enough,
        capable, free stake for the collateral, a job I can load, and time to train it."""
        if self.agent.store.get_record("job", str(u.job_id)) is not None:
            return False  # refused before
        if await self.failed_before(u):
            return False
        wait = u.deadline - (await self.now()).timestamp
        if wait > self.config.max_claim_wait:
            # my collateral would stay locked until the claim deadline (selection)
            why = f"claim deadline in {wait} s, over --max-claim-wait {self.config.max_claim_wait}"
            self.refuse_once((u.unit_id, u.attempt, u.deadline), u, why)
            return False
        job = await self.job_of(u)
        required = (job.deviceClass, job.memoryMiB, job.throughput)
        if not all(a >= b for a, b in zip(self.capability, required, strict=True)):
            return False
        if await self.busy_in_round(job, u.job_id):
            return False
        free = await self.registry.functions.freeStake(self.me).call()
        if free < await self.manager.functions.collateralOf(u.job_id).call():
            return False
        ctx = await self.context(u.job_id)
        if ctx is None:
            return False
        own = job_training_seconds(ctx, self.train_speed)
        refusal = fit_refusal(own, await self.held_seconds(u.unit_id), int(job.computeTime))
        if refusal is None:
            return True
        why, lasting = refusal
        if lasting:
            self.log.warning("not taking part in job %d: %s", u.job_id, why)
            self.agent.store.put_job(str(u.job_id), "refused", {"reason": why})
        else:
            self.refuse_once((u.unit_id, u.attempt, "busy"), u, why)
        return False

    async def failed_before(self, u: UnitView) -> bool:
        """My commitment of an earlier attempt of this unit was mined and the unit re-opened by
        a lost dispute (not by a reported leak of my secret): the network refused my run.
        Claiming it again would stake my collateral on the same replay. (An assignment that
        expired before my commit is not counted: a crash or a slow machine may well do better
        the next time.)"""
        committed = [
            a
            for a in range(u.attempt)
            if (intent := self.agent.store.get_intent(f"commit:{u.unit_id}:{a}")) is not None
            and intent.status == "mined"
        ]
        if not committed:
            return False
        # A leaked secret of mine re-opens the unit too (PrematureRevealReported) — whether the
        # report landed before or after my commit is a race: that attempt's run was not refused,
        # so only re-opens beyond the reports count.
        if len(committed) <= await self.leaks_reported(u.unit_id):
            return False
        why = f"my commitment of attempt {committed[-1]} was refused (lost dispute)"
        self.refuse_once((u.unit_id, "failed"), u, why)
        return True

    async def leaks_reported(self, unit_id: int) -> int:
        """How many times a leaked secret of mine re-opened this unit (PrematureRevealReported)."""
        logs = await self.manager.events.PrematureRevealReported().get_logs(
            argument_filters={"unitId": unit_id, "solver": self.me}, from_block=0
        )
        return len(logs)

    @property
    def train_speed(self) -> float:
        """Multiply-adds per second my engine sustains in training (--train-speed)."""
        return self.config.train_speed * 1e6

    def refuse_once(self, key: tuple, u: UnitView, why: str) -> None:
        """Log a refusal that is not stored (it may pass later) once per `key`."""
        seen: SaidOnce = self.__dict__.setdefault("_refused", SaidOnce())
        if seen.first(key):
            self.log.info("not claiming unit %d (job %d): %s", u.unit_id, u.job_id, why)

    async def held_seconds(self, exclude: int) -> float:
        """Estimated training still ahead of me on the units I hold and have not trained (claimed
        while open, or assigned), other than `exclude`: assigned units are trained one after
        the other, so a new one waits for all of them. Read once per round (round_units)."""
        if self.held is None:
            self.held = {}
            for v in self.round_units:
                left = await self.training_left(v)
                if left:
                    self.held[v.unit_id] = left
        return sum(s for uid, s in self.held.items() if uid != exclude)

    async def training_left(self, v: UnitView) -> float:
        """Estimated seconds of training left on unit `v` if I hold it, else 0."""
        if v.status in (UnitStatus.OPEN, UnitStatus.SELECTING):
            if not await self.claimed(v):
                return 0.0
            done = 0
        elif v.status == UnitStatus.ASSIGNED and v.assignee.lower() == self.me.lower():
            rec = self.agent.store.get_record("train", f"{v.unit_id}:{v.attempt}")
            if rec is not None and rec.state == "published":
                return 0.0
            done = len(rec.data["roots"]) if rec is not None else 0
        else:
            return 0.0
        try:
            ctx = await self.job_context(v.job_id)
        except JobRejected:
            return 0.0  # a job I cannot load is not trained either
        total = ctx.segments + 1
        return job_training_seconds(ctx, self.train_speed) * max(0, total - done) / total

    async def busy_in_round(self, job: Any, job_id: int) -> bool:
        """A RoundManager unit while I hold --units-per-round others of its round (§6.9)."""
        rounds = self.rounds
        if rounds is None or not rounds.is_unit_job(job):
            return False
        return await rounds.busy_in_round(job_id, self.me, self.config.units_per_round)

    async def context(self, job_id: int) -> JobContext | None:
        try:
            return await self.job_context(job_id)
        except JobRejected as exc:
            self.log.warning("not taking part: %s", exc)
            if "not found" not in str(exc) and "registered" not in str(exc):
                self.agent.store.put_job(str(job_id), "refused", {"reason": str(exc)})
            return None

    async def handle(self, act: Act, u: UnitView, now: Now) -> None:
        match act:
            case ClaimUnit(intent=intent):
                await self.send_slot()
                await self.claim(intent, u)
            case Train():
                await self.start_training(u)
            case Commit():
                await self.commit(act, u)
            case Defend(game_id=game_id):
                await self.defend(game_id, u, now)
            case Reveal():
                await self.reveal(act, u)
            case AnswerData():
                await self.answer_data(u)
            case CloseClaims() if unclaimed_lapsed(u, await self.claimants(u)):
                await self.send_slot()
                self.beside(self.extend_and_claim(act, u), u)
            case ChainAction():  # keeper steps
                await self.send_slot()
                self.beside(self.executor.execute(act), u)

    async def claim(self, intent: str, u: UnitView) -> None:
        """Claim unit `u` under `intent`, beside the round. The round ran long since it read the
        unit (a restart loads every job first; under load a round weighs hundreds of units):
        checked again on a fresh block and a fresh read of the unit right before the send."""
        why = await self.claim_refusal(u)
        if why is not None:
            self.log.info("unit %d: not claiming: %s", u.unit_id, why)
            return
        claim = ClaimWithSecret(intent, u.unit_id, keccak(self.secret(u)))
        if self.held is not None:
            # the next claim this round counts this one's training too
            self.held[u.unit_id] = await self.claim_seconds(u)
        self.beside(self.executor.execute(claim), u)

    async def extend_and_claim(self, close: CloseClaims, u: UnitView) -> None:
        """Extend the lapsed window of a unit nobody claimed, and claim it in the window that
        opens: the extension is the claim's first step (logic.unclaimed_lapsed), and a claim
        left to a later round let that window lapse too under load."""
        if await self.executor.execute(close) is not None:
            fresh = await self.unit(u.unit_id)
            await self.claim(claim_act(fresh).intent, fresh)

    # --- training and publishing --------------------------------------------------------------

    async def computation(self, u: UnitView) -> Claim:
        """This solver's account of the unit (as its strategy computes it); the job's context is
        read only to make a new one."""
        comp = self.comps.get(u.unit_id)
        if comp is not None:
            return comp
        return self.account_of(u, await self.job_context(u.job_id))

    def account_of(self, u: UnitView, ctx: JobContext) -> Claim:
        """`computation` given the unit's job context (read by the async caller): for the
        strategy hooks, which ask for my account through a plain callable."""
        if u.unit_id not in self.comps:
            fresh = self.new_computation(ctx)
            self.comps[u.unit_id] = self.strategy.account(
                fresh, lambda comp: self._seed_states(comp, u, ctx)
            )
        return self.comps[u.unit_id]

    def new_computation(self, ctx: JobContext) -> Claim:
        """A fresh account of a whole job's claim, its kept states bounded by --state-cache-mib."""
        return self.strategy.computation(
            ctx.runtime, ctx.spec.steps, ctx.spec.checkpoint_every, self.state_budget
        )

    def _seed_states(self, comp: Claim, u: UnitView, ctx: JobContext) -> None:
        """Start the dispute computation from my published checkpoints."""
        rec = self.agent.store.get_record("train", f"{u.unit_id}:{u.attempt}")
        if rec is None:
            return
        k = ctx.spec.checkpoint_every
        for i, address in enumerate(rec.data["states"]):
            comp.seed(i * k, ctx.runtime.decode_state(self.agent.blobs.get(address)))

    async def start_training(self, u: UnitView) -> None:
        """The "train" act: start the unit's training in a worker thread unless a training is in
        flight (this unit's: it goes on; another's: this one waits its turn). What reads the
        chain (the job's context) runs here, on the loop; an error in it costs the unit this
        round, as before."""
        if self.trainer is not None:
            return
        ctx = await self.job_context(u.job_id)
        training = self.strategy.training(self, u, ctx)
        run = TrainingRun(f"{u.unit_id}:{u.attempt}", u.unit_id)

        def work() -> None:
            try:
                # FTZ/DAZ live in each thread's floating-point state: subnormals must survive
                # here too, or my roots differ from every verifier's (PROTOCOL §1)
                check_no_flush_denormal()
                self._train(u, ctx, training, run.stop)
            except BaseException as exc:  # handed to the loop (reap_training)
                run.error = exc
            finally:
                run.done.set()

        run.thread = threading.Thread(target=work, name=f"train-{run.key}", daemon=True)
        self.trainer = run
        run.thread.start()
        self.log.info("training unit %d (attempt %d) in the background", u.unit_id, u.attempt)

    def reap_training(self) -> None:
        """Free the slot of a finished training; a worker's error is raised again here, in the
        unit's isolation: logged once at ERROR, the unit trained again (node and fatal errors
        end the round or the process, as they would have on the loop)."""
        run = self.trainer
        if run is None or not run.done.is_set():
            return
        self.trainer = None
        if run.error is not None and not isinstance(run.error, TrainingStopped):
            with self.isolated(f"unit {run.unit_id}"):
                raise run.error

    def stop_stale_training(self, units: list[UnitView]) -> None:
        """Stop a training whose assignment is gone (expired, re-opened): it can no longer be
        committed, and it would hold the slot the units I still hold wait for."""
        run = self.trainer
        if run is None or run.stop.is_set():
            return
        for v in units:
            if v.unit_id != run.unit_id:
                continue
            mine = v.assignee.lower() == self.me.lower()
            current = run.key == f"{v.unit_id}:{v.attempt}"
            if not (v.status == UnitStatus.ASSIGNED and mine and current):
                self.log.warning("unit %d is no longer mine to train: stopping", v.unit_id)
                run.stop.set()
            return

    def stop_training(self, wait_s: float = TRAINING_STOP_WAIT_S) -> None:
        """Ask an in-flight training to stop at its next step and wait for it a little."""
        run = self.trainer
        if run is None:
            return
        run.stop.set()
        if run.thread is not None:
            run.thread.join(wait_s)
            if run.thread.is_alive():
                self.log.warning("training of unit %d did not stop in time: abandoned", run.unit_id)

    def close(self) -> None:
        self.stop_training()
        super().close()

    async def train(self, u: UnitView) -> None:
        """Train unit `u` to the end in the calling thread (the worker's work, synchronously,
        once the job's context is read)."""
        ctx = await self.job_context(u.job_id)
        self._train(u, ctx, self.strategy.training(self, u, ctx), threading.Event())

    def _train(
        self, u: UnitView, ctx: JobContext, training: Training, stop: threading.Event
    ) -> None:
        """Publish `training`'s checkpoints from the last one published, recording each; ends
        early (raising TrainingStopped) once `stop` is set. Touches only the store, the blobs and
        the log."""
        key = f"{u.unit_id}:{u.attempt}"
        rec = self.agent.store.get_record("train", key)
        done = rec.data if rec is not None else {"roots": [], "states": [], "losses": []}
        spec, rt = ctx.spec, ctx.runtime
        k, T = spec.checkpoint_every, spec.steps
        first = len(done["roots"])
        if first and training.resume(
            lambda: rt.decode_state(self.agent.blobs.get(done["states"][-1]))
        ):
            self.log.info("resuming unit %d from checkpoint %d", u.unit_id, first - 1)
        with progress_bar(f"train unit {u.unit_id}", T, self.progress) as advance:
            advance((first - 1) * k if first else 0)
            for c in range(first, T // k + 1):
                st, root = training.checkpoint(c, stop, advance)
                address = self.agent.blobs.put(rt.encode_state(st))
                loss = rt.loss(st, min(c * k, T - 1))
                done["roots"].append("0x" + root.hex())
                done["states"].append(address)
                done["losses"].append(loss)
                if stop.is_set():
                    raise TrainingStopped(key)  # the store may be closing: write nothing more
                self.agent.store.put_record("train", key, "training", done)
        self.agent.store.put_record("train", key, "published", done)
        self.log.info(
            "trained unit %d: %d checkpoints published, final root %s…, loss %.4f",
            u.unit_id,
            len(done["roots"]),
            done["roots"][-1][:18],
            done["losses"][-1],
        )

    def secret(self, u: UnitView) -> bytes:
        """My forced-error secret r for the unit's current attempt: derived from my key, so it
        needs no storage, survives restarts and nobody else can compute it."""
        return derived_secret(self.agent.account, u.unit_id, u.attempt)

    async def forced_checkpoints(self, u: UnitView, ctx: JobContext) -> tuple[int, list[int]]:
        """The anchor and every checkpoint of the forced round I play ((0, []): an ordinary
        round): those my secret and the assignment seed perturb (the judge's view, PROTOCOL
        §8.1), as my strategy plays them."""
        return await self.strategy.forced_checkpoints(lambda: self._drawn_checkpoints(u, ctx))

    async def _drawn_checkpoints(self, u: UnitView, ctx: JobContext) -> tuple[int, list[int]]:
        secret = self.secret(u)
        f = self.judge.functions
        forced, anchor = await f.isForced(secret, u.assign_seed, ctx.segments).call()
        if not forced:
            return 0, []
        fn = f.perturbedCheckpoints(secret, u.assign_seed, ctx.segments)
        return int(anchor), [int(c) for c in await fn.call()]

    async def reveal(self, act: Reveal, u: UnitView) -> None:
        """Prove my forced error: secret, true root, both lists' entries (with proofs) at every
        checkpoint the judgement reads, and every drawn verifier's attested end roots (from its
        event)."""
        rec = self.agent.store.get_record("forced", f"{u.unit_id}:{u.attempt}")
        assert rec is not None
        perturbed = rec.data["perturbed"]
        true = [bytes.fromhex(r[2:]) for r in rec.data["true_roots"]]
        pub = [bytes.fromhex(r[2:]) for r in rec.data["roots"]]
        samples, end_roots = [], []
        for d in await self.drawn(u):
            v, status = d.verifier, d.status
            samples.append(await self.manager.functions.sampledSegments(u.unit_id, v).call())
            ends: list[bytes] = []
            if status == VerifierStatus.ATTESTED:
                logs = await self.manager.events.Attested().get_logs(
                    argument_filters={"unitId": u.unit_id, "verifier": v}, from_block=0
                )
                ends = list(logs[-1]["args"]["endRoots"])
            end_roots.append(ends)
        checkpoints = judged_checkpoints(samples, set(perturbed))
        reveal = forced_reveal(self.secret(u), pub, true, checkpoints, end_roots)
        if await self.executor.execute(RevealForced(act.intent, u.unit_id, reveal)) is not None:
            self.log.info(
                "revealed the forced error of unit %d (checkpoints %s perturbed)",
                u.unit_id,
                perturbed,
            )

    async def commit(self, act: Commit, u: UnitView) -> None:
        rec = self.agent.store.get_record("train", f"{u.unit_id}:{u.attempt}")
        assert rec is not None
        ctx = await self.job_context(u.job_id)
        spec_hash = "0x" + ctx.spec.spec_hash().hex()
        roots, states = list(rec.data["roots"]), list(rec.data["states"])
        true_root = Manifest(spec_hash, roots, states, rec.data["losses"]).checkpoint_root()
        position, forced = await self.forced_checkpoints(u, ctx)
        if position:
            # A forced round: publish each perturbed checkpoint one bit away, reveal them later.
            rt = ctx.runtime
            for c in forced:
                st = perturbed(rt.decode_state(self.agent.blobs.get(states[c])),
                               self.secret(u), c)  # fmt: skip
                states[c] = self.agent.blobs.put(rt.encode_state(st))
                roots[c] = "0x" + rt.state_root(st).hex()
            trained = list(rec.data["roots"])
            true_roots = self.strategy.sealed_true_roots(
                trained,
                position,
                lambda c: rt.decode_state(self.agent.blobs.get(rec.data["states"][c])),
                rt.state_root,
            )
            if true_roots != trained:
                self.log.warning("unit %d: sealed a true list that is not my training's", u.unit_id)
                true_root = checkpoint_root([bytes.fromhex(r[2:]) for r in true_roots])
            data = {
                "perturbed": forced,
                "true_roots": true_roots,
                "roots": roots,
            }
            self.agent.store.put_record("forced", f"{u.unit_id}:{u.attempt}", "published", data)
            self.log.info("unit %d is a forced round: checkpoints %s perturbed", u.unit_id, forced)
        m = Manifest(spec_hash, roots, states, rec.data["losses"])
        address = self.agent.blobs.put(m.to_bytes())
        locator = make_locator(self.public_blob_url, address)
        cp_root, true_root = self.strategy.commitment(
            m.checkpoint_root(), true_root, lambda: self.account_of(u, ctx)
        )
        final, proof = self.strategy.final_root([bytes.fromhex(r[2:]) for r in m.roots])
        # The seal binds the root this solver holds true to its secret (PROTOCOL §8.1).
        seal = keccak(true_root + self.secret(u))
        commit = CommitCheckpoints(act.intent, u.unit_id, cp_root, len(m.roots), final, proof,
                                   locator, seal)  # fmt: skip
        if await self.executor.execute(commit) is not None:
            self.log.info("committed unit %d: checkpoint root 0x%s…", u.unit_id, cp_root.hex()[:16])

    # --- data requests (PROTOCOL §6.11) ----------------------------------------------------------

    async def committed_checkpoint(self, u: UnitView, c: int) -> tuple[list[bytes], State]:
        """The state roots the unit's checkpoint root binds now and my state at checkpoint `c`:
        the published ones, a forced round's perturbed ones at its perturbed checkpoints until
        its reveal (then the true ones, the chain's root), as my strategy committed them."""
        ctx = await self.job_context(u.job_id)
        return self.strategy.committed_checkpoint(
            lambda: self._published_checkpoint(u, c, ctx),
            lambda: self.account_of(u, ctx),
            c * ctx.spec.checkpoint_every,
        )

    def _published_checkpoint(
        self, u: UnitView, c: int, ctx: JobContext
    ) -> tuple[list[bytes], State]:
        key = f"{u.unit_id}:{u.attempt}"
        rec = self.agent.store.get_record("train", key)
        assert rec is not None, f"unit {u.unit_id}: committed without a training record"
        roots = [bytes.fromhex(r[2:]) for r in rec.data["roots"]]
        st = ctx.runtime.decode_state(self.agent.blobs.get(rec.data["states"][c]))
        forced = self.agent.store.get_record("forced", key)
        if forced is not None and not u.forced_revealed:
            # published perturbed; once revealed the chain's root is the true one (§8.1)
            roots = [bytes.fromhex(r[2:]) for r in forced.data["roots"]]
            if c in forced.data["perturbed"]:
                st = perturbed(st, self.secret(u), c)
        return roots, st

    async def answer_data(self, u: UnitView) -> None:
        """Answer a data request on my unit (PROTOCOL §6.11): prove that I hold the requested
        checkpoint's state, as my commitment binds it, and serve it from my blob store."""
        req = u.data_request
        assert req is not None
        roots, st = await self.committed_checkpoint(u, req.checkpoint)
        rt = (await self.job_context(u.job_id)).runtime
        locator = make_locator(self.public_blob_url, self.agent.blobs.put(rt.encode_state(st)))
        opening = StateOpening(rt.committed(st))
        await answer_request(self.executor, u, opening, roots, locator, self.block_hash, self.log)

    # --- disputes -----------------------------------------------------------------------------

    async def defend(self, game_id: int, u: UnitView, now: Now) -> None:
        if self.games.get(game_id) is None:
            self.games.put(game_id, u.unit_id)
            self.log.info("defending unit %d in dispute game %d", u.unit_id, game_id)
        comp = await self.computation(u)
        player = Defender(comp, (await self.job_context(u.job_id)).jg)
        await take_turn(self.executor, self.game_reader, game_id, Side.DEFENDER, player, now)
