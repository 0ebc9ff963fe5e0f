"""The I/O half every role shares: contracts, chain snapshots, sending actions, logging, progress.

A role process is one `RoleAgent` subclass, built from its frozen config (agents/roles/config.py;
`run_role` is the entry point the CLI calls with it): `run()` loops — read the chain (views, cheap),
decide with agents/roles/logic.py, execute the actions — every `--poll-interval` seconds on
the injected clock until stopped. Every transaction is a typed chain action
(agents/roles/actions.py) sent by the role's one executor (agents/roles/executor.py) through the
core sender (simulate first, persisted intents, reconcile on start); a simulation that reverts
is logged and retried on a later round, never sent.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import functools
import json
import logging
import signal
import sys
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

from web3.contract import AsyncContract
from web3.exceptions import BadFunctionCallOutput, ContractLogicError, Web3RPCError
from web3.types import RPCEndpoint

from agents.core.bindings import bind
from agents.core.blobs import BlobServer, BlobStore, LocalDirBackend, open_blob_store
from agents.core.bounded import BoundedCache, SaidOnce
from agents.core.chain import ChainUnavailable
from agents.core.enums import Role
from agents.core.events import ReorgTooDeep
from agents.core.fetches import PENDING, Failed, Reads
from agents.core.keys import DEV_CHAIN_IDS, KeyConfigError
from agents.core.rpc_errors import transport_errors
from agents.core.runtime import Agent, open_agent
from agents.core.store import StoreError
from agents.core.tx import TransportError
from agents.dispute.budget import StateBudget
from agents.dispute.client import AsyncGameReader
from agents.roles.actions import Approve, Heartbeat, Register
from agents.roles.addresses import companion_address, manager_address
from agents.roles.artifacts import BadBlob, Checkpoints, fetch_checkpoints, locator_problem
from agents.roles.config import PublisherConfig, RoleConfig
from agents.roles.decomposed import Rounds
from agents.roles.errors import RoleError
from agents.roles.executor import Executor
from agents.roles.jobs import (
    JobContext,
    JobRejected,
    LoadedJobs,
    keep_job,
    load_job,
)
from agents.roles.logic import (
    SETTLED,
    DataRequest,
    Drawn,
    IdleBlock,
    KeeperFacts,
    Now,
    SettledRecords,
    UnitStatus,
    UnitView,
    VerifierStatus,
    chain_time_since,
    idle_block_due,
    keeper_grace,
    read_budget_s,
    withdraw_act,
    withdraw_due,
)
from agents.training.engine import EngineConfig

LOG_FORMAT = "%(asctime)s %(name)s %(levelname)s %(message)s"


#: Rounds whose durations set my keeper grace (logic.keeper_grace): the latest few.
ROUNDS_KEPT = 5

# The node or the network failed (a read of the agent's async client too, once web3's own
# retries are spent: an HTTP 503 is aiohttp's ClientResponseError): the whole round is retried
# after the poll interval.
TRANSIENT_ERRORS: tuple[type[BaseException], ...] = (
    TransportError,
    ChainUnavailable,
    *transport_errors(),
)
# The agent itself cannot go on safely (its store is unreadable, the chain reorganised deeper
# than it can undo, or a role decided to stop): the process ends with one line.
FATAL_ERRORS: tuple[type[BaseException], ...] = (RoleError, StoreError, ReorgTooDeep)


# --- logging and progress -------------------------------------------------------------------


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        obj = {
            "ts": round(record.created, 3),
            "level": record.levelname.lower(),
            "agent": record.name,
            "msg": record.getMessage(),
        }
        obj.update(getattr(record, "fields", {}))
        return json.dumps(obj)


def setup_logging(name: str, json_logs: bool, verbose: bool = False) -> logging.Logger:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        JsonFormatter() if json_logs else logging.Formatter(LOG_FORMAT, "%H:%M:%S")
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG if verbose else logging.INFO)
    for noisy in ("web3", "urllib3", "asyncio", "agents.core"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    return logging.getLogger(name)


@contextlib.contextmanager
def progress_bar(label: str, total: int, enabled: bool) -> Iterator[Any]:
    """A rich progress bar on a TTY; a no-op advance function otherwise."""
    if not enabled or not sys.stderr.isatty():
        yield lambda n=1: None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    with Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        transient=True,
    ) as prog:
        task = prog.add_task(label, total=total)
        yield lambda n=1: prog.advance(task, n)


# --- start-up --------------------------------------------------------------------------------


def engine_config(device: str, log: logging.Logger) -> EngineConfig:
    """The engine settings of --device: on CUDA the Triton device kernels (the portable torch
    ops where Triton is absent), else the native CPU kernels. A CUDA request on a machine
    without CUDA is said once and runs on the CPU: the bits are the same either way."""
    import torch

    from agents.training.registry import triton_problem

    if not device.startswith("cuda"):
        return EngineConfig()
    if not torch.cuda.is_available():
        log.warning("--device %s: no CUDA device here; training on the CPU", device)
        return EngineConfig()
    return EngineConfig("triton" if triton_problem(device) is None else "torch", device=device)


def run_role(cls: type[RoleAgent], config: RoleConfig, **parts: Any) -> int:
    """Entry point of a role process: logging, its checks, the loop, one-line fatal errors.
    `parts` go to the role's constructor as they are (the CLI wiring's test adversary as
    `strategy`, the live view as `observer`)."""
    log = setup_logging(f"{cls.role}", config.json_logs, config.verbose)
    try:
        if config.agent.rpc_url is None:
            raise RoleError("an agent needs a node: pass --rpc-url or set VTP_RPC_URL")
        manager = manager_address(config.manager, config.deployment)
        cls.check_config(config)
        return asyncio.run(_main(cls, config, manager, log, parts))
    except (RoleError, ChainUnavailable, KeyConfigError) as exc:
        print(f"error: {exc}", file=sys.stderr)
    except KeyboardInterrupt:
        return 130
    return 2


async def _main(
    cls: type[RoleAgent], config: RoleConfig, manager: str, log: logging.Logger, parts: dict
) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    async with open_agent(config.agent) as agent:
        role = cls(agent, manager, config, log, **parts)
        try:
            await role.open()
            await role.setup()
            code = await role.run(stop, config.run_for)
        finally:
            role.close()
    return code


# --- the agent -------------------------------------------------------------------------------


#: Blocks per JobPosted scan (`RoleAgent.discover_jobs`): within the ranges RPC providers serve.
POSTED_SCAN_BLOCKS = 2_000
#: Seconds (wall clock) a role keeps its read of the registry's role pools (the keepers'
#: orders, logic.keeper_order) before reading them again; at once when a pool's size changed.
POOL_REFRESH_S = 60.0


def data_request_view(r: Any) -> DataRequest | None:
    """IJobManager.DataRequest (decoded by name) as the roles see it; None when none is open."""
    if int(r.requester, 16) == 0:
        return None
    return DataRequest(
        requester=r.requester,
        checkpoint=int(r.checkpoint),
        answer_deadline=int(r.answerDeadline),
        bond=int(r.bond),
        seed_block=int(r.seedBlock),
        state_opened=any(bytes(r.stateRoot)),
        tensor_count=int(r.tensorCount),
        opened=int(r.opened),
        samples=int(r.samples),
    )


class RoleAgent:
    role = "agent"
    config: RoleConfig  # my settings (a role's own subclass of it)
    # A long-running role outlives an unexpected error in one round (logged, retried next
    # round); a one-shot command (`node`) reports it instead of retrying for ever.
    isolate_rounds = True
    # The JobLens over my JobManager (bound in open; None: no lens, units read getter by getter)
    lens: AsyncContract | None = None
    lens_page = 0  # JobLens.MAX_PAGE: the most units one unitSnapshots call returns
    # How units are read (the lens or getter by getter): logged when the role's loop starts
    read_mode: str = "units read getter by getter"

    def __init__(self, agent: Agent, manager: str, config: RoleConfig, log: logging.Logger) -> None:
        self.agent = agent
        self.config = config
        self.log = log
        _ = self.engine_cfg  # --device: said once at start-up when CUDA is missing
        self.me = agent.account.address
        self.progress = config.progress
        # My agent's one AsyncWeb3 (agents/core/runtime.py): every read and every send of mine goes
        # through it; the contracts are bound in `open`, the start-up step that reads the chain.
        self.w3 = agent.w3
        self.manager_address = manager
        if config.mine_when_idle and agent.chain_id not in DEV_CHAIN_IDS:
            raise RoleError(f"--mine-when-idle: chain id {agent.chain_id} is not a dev chain")
        if self.local_locators and agent.chain_id not in DEV_CHAIN_IDS:
            raise RoleError(f"--allow-local-locators: chain id {agent.chain_id} is not a dev chain")
        self.blob_server: BlobServer | None = None
        self.public_blob_url = agent.config.blob_location
        if isinstance(config, PublisherConfig):
            self.public_blob_url = config.public_blob_url or agent.config.blob_location
            if config.serve_blobs:
                self.blob_server = serve_blobs(config.serve_blobs, agent.config.blob_location)
                self.public_blob_url = config.public_blob_url or self.blob_server.url
                log.info("serving my blobs at %s", self.blob_server.url)
        problem = locator_problem(self.public_blob_url, self.local_locators)
        if problem and isinstance(config, PublisherConfig):
            log.warning(
                "other agents will not read the blobs I publish: %s; serve them over http(s) "
                "(--serve-blobs HOST:PORT --public-blob-url http://HOST:PORT)",
                problem,
            )
        self.failures = 0
        self.jobs = LoadedJobs(self.max_loaded_jobs)
        # unit -> ((attempt, checkpoint root), (locator, published root)): its latest commitment
        self._locators: dict[int, tuple[tuple[int, bytes], tuple[str, bytes]]] = {}
        self.settled = SettledRecords()  # jobs whose unit no round reads again (units())
        self.live_jobs: set[int] = set()  # jobs posted (JobPosted) and not yet seen settled
        self._posted_from = 0  # the first block the next JobPosted scan reads
        self._posted_count = -1  # jobCount when it last scanned
        self.rounds: Rounds | None = None
        self.court: AsyncContract | None = None
        self.court_game: AsyncContract | None = None

    async def open(self) -> None:
        """Bind my contracts: the JobManager and what it names (registry, token, game, judge),
        and the AttestationCourt, RoundManager and JobLens that belong to it. The start-up step
        that reads the chain (RoleError, one line, when an address holds no such contract);
        `_main` awaits it before `setup`."""
        manager = self.manager_address
        if not await self.w3.eth.get_code(manager):
            raise RoleError(f"no contract at JobManager address {manager}")
        self.manager = self._contract("JobManager", manager)
        f = self.manager.functions
        self.registry = self._contract("NodeRegistry", await f.registry().call())
        self.token = self._contract("TestToken", await f.token().call())
        self.game = self._contract("DisputeGame", await f.arbiter().call())
        self.judge = self._contract("ForcedErrorJudge", await f.forcedErrorJudge().call())
        await self._open_court(manager)
        self.rounds = await self._rounds(manager)
        self.lens = await self._lens(manager)
        self.opened()

    def opened(self) -> None:
        """A role's checks of what `open` bound (RoleError: one line); none by default."""

    async def _open_court(self, manager: str) -> None:
        """The AttestationCourt over this JobManager (--court, else the deployment file's)."""
        court = companion_address(self.config, "court", manager)
        explicit = self.config.court is not None
        if court and not await self.w3.eth.get_code(court):
            if explicit:
                raise RoleError(f"no contract at AttestationCourt address {court}")
            return  # a deployment file of another chain that reused the address
        if not court:
            return
        bound = self._contract("AttestationCourt", court)
        if (await bound.functions.manager().call()).lower() != manager.lower():
            if explicit:
                raise RoleError(f"AttestationCourt {court} belongs to another JobManager")
            return
        self.court = bound
        self.court_game = self._contract("DisputeGame", await bound.functions.game().call())

    async def _lens(self, manager: str) -> AsyncContract | None:
        """The JobLens over this JobManager (--lens, else the deployment file's), or None."""
        address = companion_address(self.config, "lens", manager)
        explicit = self.config.lens is not None
        if address is None or not await self.w3.eth.get_code(address):
            if explicit:
                raise RoleError(f"no contract at JobLens address {address}")
            self.read_mode = "no JobLens: a unit is read getter by getter"
            return None
        lens = self._contract("JobLens", address)
        if (await lens.functions.manager().call()).lower() != manager.lower():
            if explicit:
                raise RoleError(f"JobLens {address} reads another JobManager")
            self.read_mode = "no JobLens of this JobManager: a unit is read getter by getter"
            return None
        self.read_mode = f"reading units through JobLens {address}"
        self.lens_page = int(await lens.functions.MAX_PAGE().call())  # a constant
        return lens

    async def _rounds(self, manager: str) -> Rounds | None:
        """The RoundManager's view (decomposed jobs, agents/roles/decomposed.py), or None."""
        address = companion_address(self.config, "round_manager", manager)
        if address is None or not await self.w3.eth.get_code(address):
            return None
        rm = self._contract("RoundManager", address)
        if (await rm.functions.jobManager().call()).lower() != manager.lower():
            return None
        # its own dispute game over version-3 aggregates (RoundManager.setGame), when wired
        game = await rm.functions.game().call()
        round_game = self._contract("DisputeGame", game) if int(game, 16) else None
        return Rounds(
            rm, self.manager, self.game, self.spec_stores(), self.local_locators, self.max_params,
            self.max_loaded_jobs, self.engine_cfg, self.config.fetch, round_game,
        )  # fmt: skip

    def spec_stores(self) -> list[BlobStore]:
        """Where job specs are looked up: my blob store, then each --spec-store."""
        return [self.agent.blobs] + [open_blob_store(s) for s in self.config.spec_store]

    async def foreign_placement(self, job_id: int) -> tuple[int, ...] | None:
        """The unit placement registered with the game for job `job_id`, a job that is no round
        manager's unit, or None when it has none, as it must (PROTOCOL §7.2): with one, its
        one-step proofs would draw another step's or shard's batch, and an honest solver of the
        job as posted would lose its games."""
        placement = tuple(await self.game.functions.placementOf(job_id).call())
        return placement if any(placement) else None

    @functools.cached_property
    def engine_cfg(self) -> EngineConfig:
        """--device's engine settings (engine_config), worked out once."""
        return engine_config(self.config.device, self.log)

    @property
    def max_params(self) -> int:
        """--max-params: the largest model whose jobs I take part in (my memory budget)."""
        return self.config.max_params

    @property
    def max_loaded_jobs(self) -> int:
        """--max-loaded-jobs: how many job contexts (datasets, engines) I keep loaded."""
        return self.config.max_loaded_jobs

    @property
    def state_cache_bytes(self) -> int:
        """--state-cache-mib in bytes: what all my replays' and games' `Computation`s together
        may keep of training states."""
        return self.config.state_cache_bytes

    @functools.cached_property
    def state_budget(self) -> StateBudget:
        """The one byte budget every `Computation` of mine keeps its states under
        (--state-cache-mib): least recently used first across all of them."""
        return StateBudget(self.state_cache_bytes)

    @property
    def local_locators(self) -> bool:
        """--allow-local-locators: a locator (anyone's, from the chain) may name a local folder;
        without it only http(s) is read (artifacts.locator_store)."""
        return self.config.allow_local_locators

    async def job_context(self, job_id: int) -> JobContext:
        """Job `job_id`'s spec, engine and dispute graph, checked against the chain (from my blob
        store or any --spec-store) and kept loaded while I use it (`LoadedJobs`: an evicted job
        is loaded again, the same); raises JobRejected when it cannot be."""
        ctx = self.jobs.get(job_id)
        if ctx is not None:
            return ctx
        job = await self.manager.functions.getJob(job_id).call()
        if self.rounds is not None and self.rounds.is_unit_job(job):
            ctx = await self.rounds.load_unit(job_id, job)
        else:
            placement = await self.foreign_placement(job_id)
            if placement is not None:
                raise JobRejected(
                    f"job {job_id}: a unit placement {placement} is registered for it, but it "
                    "is no round manager's unit"
                )
            cfg = bytes(await self.game.functions.configOf(job_id).call())
            ctx = load_job(job_id, job, self.spec_stores(), cfg, self.max_params, self.engine_cfg,
                           self.config.fetch)  # fmt: skip
            keep_job(ctx, self.agent.blobs, self.log)
        self.jobs.put(job_id, ctx)
        return ctx

    async def context(self, job_id: int) -> JobContext | None:
        """The job's context, or None (logged) for a job this agent cannot take part in."""
        try:
            return await self.job_context(job_id)
        except JobRejected as exc:
            self.log.warning("job %d: %s", job_id, exc)
            return None

    def _contract(self, name: str, address: str) -> AsyncContract:
        return bind(self.w3, name, address)

    async def mine_if_idle(self) -> None:
        """On a dev chain with --mine-when-idle: mine one empty block (chain time moves on), when
        chain time is not ahead of the wall clock (logic.idle_block_due)."""
        if not self.config.mine_when_idle:
            return
        clock = self.agent.clock
        latest = int((await self.w3.eth.get_block("latest"))["timestamp"])
        if not idle_block_due(latest, self.__dict__.get("_idle_block"), clock.monotonic()):
            return
        await self.w3.provider.make_request(RPCEndpoint("evm_mine"), [])
        mined = int((await self.w3.eth.get_block("latest"))["timestamp"])
        self._idle_block = IdleBlock(mined, clock.monotonic())

    def close(self) -> None:
        if self.blob_server is not None:
            self.blob_server.stop()
        if "reads" in self.__dict__:
            self.reads.close()

    @functools.cached_property
    def reads(self) -> Reads:
        """My reads of other parties' data, on --fetch-workers threads (agents/core/fetches.py)."""
        return Reads(self.config.fetch_workers, self.agent.clock)

    def checkpoints_read(
        self,
        key: str,
        spec: Any,
        locator: str,
        checkpoint_root: bytes,
        indices: list[int],
        now: Now,
        deadline: int,
    ) -> Checkpoints | None:
        """The unit's checkpoints at `indices` read off the round loop under `key`: None while
        the read runs inside its budget (`logic.read_budget_s` of the chain time left before
        `deadline`; ask again next round), else the checked `Checkpoints`; BadBlob when the read
        failed or is late, so that the caller falls back at once (its own replay). The read's
        own timeout is its budget: a server that never answers holds a worker no longer. A
        failed read is forgotten once reported, so asking again reads again."""
        budget = read_budget_s(now, deadline)
        got = self.reads.ask(
            key,
            lambda: fetch_checkpoints(
                spec, locator, checkpoint_root, indices, self.local_locators, budget
            ),
            budget,
        )
        if got is PENDING:
            return None
        if isinstance(got, Failed):
            self.reads.forget(key)  # asked again (a later retry), it is read again
            raise BadBlob(got.reason())
        return got

    @classmethod
    def check_config(cls, config: RoleConfig) -> None:
        """The role's own checks of its settings, across fields, before touching the chain
        (RoleError: one line); each field was checked alone as it was parsed."""

    async def setup(self) -> None:
        """One-time start-up work (register, stake); runs after reconciling pending sends."""

    async def round(self) -> bool:
        """One decision round; return True when the role is done (one-shot roles)."""
        raise NotImplementedError

    @contextlib.contextmanager
    def isolated(self, what: str) -> Iterator[None]:
        """Run the work of one unit, game or case so that an error it raises costs that work
        only, for this round: its inputs come from untrusted parties (a submitter's spec, a
        solver's blobs), and one hostile job must not stop the agent's heartbeat, commits and
        game moves on every other unit — nor, by a crash on each restart, for good. The error is
        logged once (then at DEBUG) and the work is tried again next round. Node and network
        errors still end the round (`run` retries it), and fatal ones end the process."""
        try:
            yield
        except (*TRANSIENT_ERRORS, *FATAL_ERRORS):
            raise
        except Exception as exc:
            self.log_isolated(what, exc)

    def log_isolated(self, what: str, exc: Exception) -> None:
        """Log a failure of `what` at ERROR (with its traceback) the first time it fails this way,
        then at DEBUG: a unit that fails the same way every round must not flood the log."""
        reason = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
        seen: SaidOnce = self.__dict__.setdefault("_isolated_errors", SaidOnce())
        first = seen.first((what, reason))
        level = logging.ERROR if first else logging.DEBUG
        self.log.log(level, "%s: skipped this round: %s", what, reason, exc_info=first)

    async def run(self, stop: asyncio.Event, run_for: float = 0.0) -> int:
        # said once the role's start-up checks passed: a refused start stays one line (exit 2)
        self.log.info("%s", self.read_mode)
        clock = self.agent.clock  # injectable (agents/core/clock.py): tests drive time
        started = clock.monotonic()
        interval = self.agent.config.poll_interval
        while not stop.is_set():
            try:
                with self.isolated("round") if self.isolate_rounds else contextlib.nullcontext():
                    began = clock.monotonic()
                    if await self.round():
                        return 0
                    self.note_round(clock.monotonic() - began)
                self.failures = 0
            except TRANSIENT_ERRORS as exc:
                self.failures += 1
                self.log.error("round failed (will retry): %s", str(exc).splitlines()[0][:200])
            if run_for and clock.monotonic() - started > run_for:
                self.log.info("--run-for %.0f s elapsed; stopping", run_for)
                return 0
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=interval)
        self.log.info("stopped")
        return 0

    # --- chain reads --------------------------------------------------------------------

    async def reveal_window(self) -> int:
        """JobManager.Config.revealWindow (immutable, read once): drawn verifiers open their
        sealed attestations until a unit's deadline + this."""
        if "_reveal_window" not in self.__dict__:
            config = await self.manager.functions.config().call()
            self._reveal_window = int(config.revealWindow)
        return self._reveal_window

    async def now(self) -> Now:
        b = await self.w3.eth.get_block("latest")
        now = Now(int(b["number"]), int(b["timestamp"]))
        self._now_read = (now, self.agent.clock.monotonic())
        return now

    def chain_time(self, now: Now) -> Now:
        """The chain's time as a deadline check just before a send must use it: `now` (a block
        I read this round), or my latest block read moved on by the wall time since I read it
        (`logic.chain_time_since`). A round can run long after its first read — a restarted
        agent loads every job before its first claim — and a margin counted from a block read
        then let a claim land past its deadline (issue #45)."""
        read = self.__dict__.get("_now_read")
        if read is None:
            return now
        return chain_time_since(now, read[0], self.agent.clock.monotonic() - read[1])

    # --- keepers (PROTOCOL §6.5) ----------------------------------------------------------

    async def live_pool(self, role: Role) -> tuple[str, ...]:
        """The nodes on the registry's live pool entries of `role` (NodeRegistry.poolAt): the
        keepers' orders (logic.keeper_order). Read again every POOL_REFRESH_S seconds, and at
        once when the pool's size changed (asked at most once a second)."""
        pools: dict[Role, tuple[int, float, float, tuple[str, ...]]] = self.__dict__.setdefault(
            "_pools", {}
        )
        clock = self.agent.clock.monotonic()
        kept = pools.get(role)
        if kept is not None and clock - kept[2] < 1.0 and clock - kept[1] < POOL_REFRESH_S:
            return kept[3]
        size = int(await self.registry.functions.poolSize(int(role)).call())
        if kept is not None and kept[0] == size and clock - kept[1] < POOL_REFRESH_S:
            pools[role] = (size, kept[1], clock, kept[3])
            return kept[3]
        live = []
        for i in range(size):
            entry = await self.registry.functions.poolAt(int(role), i).call()
            if entry.live:
                live.append(entry.entry.node)
        pools[role] = (size, clock, clock, tuple(live))
        return pools[role][3]

    async def simulated_draw(self, u: UnitView, fresh: bool = False) -> tuple[tuple[str, ...], int]:
        """The verifiers and the verification seed drawVerifiers would draw for the Committed
        unit in the next block: simulated at the pending block (JobManager.drawVerifiers returns
        them), once per seed block (`fresh`: again, as just before an answer that draws). Empty
        before the seed block, or when the seed's hash is gone (it re-arms)."""
        key = (u.unit_id, u.attempt, u.seed_block)
        draws: BoundedCache[tuple[int, int, int], tuple[tuple[str, ...], int]] = (
            self.__dict__.setdefault("_draws", BoundedCache(4096))
        )
        kept = draws.get(key)
        if kept is not None and not fresh:
            return kept
        fn = self.manager.functions.drawVerifiers(u.unit_id)
        try:
            out = await fn.call({"from": self.me}, block_identifier="pending")
        except (ContractLogicError, BadFunctionCallOutput):
            return (), 0  # not yet (or no longer) Committed past its seed block
        drawn = (tuple(out.verifiers), int(out.verifySeed))
        draws.put(key, drawn)
        return drawn

    async def keeper_facts(self, u: UnitView) -> KeeperFacts:
        """My place among unit `u`'s keepers (logic.keeper_rank): the live solver and verifier
        pools and the unit's claimants where the step due is a pool's (Open, Selecting,
        Committed), the challenger of a held win. (The job's submitter keeps with
        `KeeperFacts(me)`: in no pool, after every node but for its own data request.)"""
        grace = keeper_grace(self.round_seconds)
        if u.status in (UnitStatus.OPEN, UnitStatus.SELECTING):
            solvers = await self.live_pool(Role.SOLVER)
            claimants = await self.claimants(u)
            return KeeperFacts(self.me, solvers=solvers, claimants=claimants, grace=grace)
        if u.status == UnitStatus.COMMITTED:
            # a draw that picks nobody has no first answer to wait for
            fold = bool((await self.simulated_draw(u))[0])
            verifiers = await self.live_pool(Role.VERIFIER)
            return KeeperFacts(self.me, verifiers=verifiers, fold=fold, grace=grace)
        if u.status == UnitStatus.DISPUTED and u.result_held:
            challenger = (await self.dispute(u)).challenger
            return KeeperFacts(self.me, challenger=challenger, grace=grace)
        return KeeperFacts(self.me, grace=grace)

    def note_round(self, seconds: float) -> None:
        """Keep a round's duration; say when my keeper grace changes with it."""
        before = keeper_grace(self.round_seconds)
        self.round_seconds.append(seconds)
        after = keeper_grace(self.round_seconds)
        if after != before:
            longest = max(self.round_seconds)
            self.log.info("keeper grace %d s (my longest recent round %.1f s)", after, longest)

    @property
    def round_seconds(self) -> collections.deque[float]:
        """My latest rounds' durations (the keepers' grace, logic.keeper_grace)."""
        return self.__dict__.setdefault("_round_seconds", collections.deque(maxlen=ROUNDS_KEPT))

    # --- acts that cannot succeed ---------------------------------------------------------

    def drop(self, intent: str, why: str) -> None:
        """Record that the act under `intent` cannot succeed, so that no round plans it again
        (and a restart neither); said once, at INFO: it is an outcome, not a failure."""
        if self.agent.store.get_record("dropped", intent) is None:
            self.agent.store.put_record("dropped", intent, "dropped", {"why": why})
            self.log.info("%s: not sent, and not planned again: %s", intent, why)

    def dropped(self, intent: str) -> bool:
        """The act under `intent` was recorded as one that cannot succeed (`drop`)."""
        return self.agent.store.get_record("dropped", intent) is not None

    async def block_hash(self, number: int) -> bytes | None:
        """The hash of block `number`, None while it is not mined (a data request's seed)."""
        if (await self.now()).block < number:
            return None
        return bytes((await self.w3.eth.get_block(number))["hash"])

    async def locator(self, unit_id: int, block: int | str = "latest") -> str:
        """Where the unit's checkpoints of the latest commitment up to `block` can be fetched:
        only the CheckpointsCommitted event carries the blob locator (not stored, to save gas)."""
        return (await self.commitment(unit_id, block))[0]

    async def commitment(self, unit_id: int, block: int | str = "latest") -> tuple[str, bytes]:
        """(blob locator, published checkpoint root) of the latest commitment up to `block`."""
        logs = await self.manager.events.CheckpointsCommitted().get_logs(
            argument_filters={"unitId": unit_id}, from_block=0, to_block=block
        )
        if not logs:
            return "", b""
        return str(logs[-1]["args"]["blobLocator"]), bytes(logs[-1]["args"]["checkpointRoot"])

    async def unit(self, unit_id: int) -> UnitView:
        """The unit as the roles read it. With a JobLens, everything in one call (its drawn
        verifiers, claimants, dispute and job too); without one, getUnit, and heldUntil and
        dataRequestOf while Disputed (the rest is read when asked: drawn, claimants, ...)."""
        if self.lens is not None:
            return await self.snapshot_view(await self.lens.functions.unitSnapshot(unit_id).call())
        f = self.manager.functions
        u = await f.getUnit(unit_id).call()
        # A Disputed unit whose challenger's win is held (JobManager.DisputeResultHeld) for the
        # forced round's reveal: heldUntil is its end, zero while the game runs.
        held_until, data_request = 0, None
        if u.status == UnitStatus.DISPUTED:
            held_until = int(await f.heldUntil(unit_id).call())
            data_request = data_request_view(await f.dataRequestOf(unit_id).call())
        return await self.unit_view(unit_id, u, held_until, data_request)

    async def units_read(self, unit_ids: list[int]) -> list[UnitView]:
        """`unit` of each of `unit_ids`: with a JobLens, a page of them (JobLens.MAX_PAGE, read
        in `open`) per call."""
        if self.lens is None:
            return [await self.unit(uid) for uid in unit_ids]
        page = self.lens_page
        out = []
        for i in range(0, len(unit_ids), page):
            snapshots = await self.lens.functions.unitSnapshots(unit_ids[i : i + page]).call()
            out += [await self.snapshot_view(s) for s in snapshots]
        return out

    async def snapshot_view(self, s: Any) -> UnitView:
        """A JobLens.UnitSnapshot as the roles see it (held result and data request as `unit`
        reads them: only while Disputed)."""
        disputed = s.unit.status == UnitStatus.DISPUTED
        held_until = int(s.heldUntil) if disputed else 0
        data_request = data_request_view(s.dataRequest) if disputed else None
        view = await self.unit_view(s.unitId, s.unit, held_until, data_request)
        return dataclasses.replace(
            view,
            drawn=tuple(Drawn(v.verifier, VerifierStatus(v.status)) for v in s.verifiers),
            claimants=tuple(s.claimants),
            dispute=s.dispute,
            job=s.job,
        )

    async def unit_view(
        self, unit_id: int, u: Any, held_until: int, data_request: DataRequest | None
    ) -> UnitView:
        """UnitView of `u` (IJobManager.Unit, decoded by name); the commitment's locator is
        looked up once per attempt (only its event carries it)."""
        locator, published = "", b""
        # A commitment (hence a locator) exists from Committed on; one lookup per attempt.
        if UnitStatus.COMMITTED <= u.status <= UnitStatus.FINALIZED:
            key = (u.attempt, bytes(u.checkpointRoot))
            kept = self._locators.get(unit_id)
            if kept is None or kept[0] != key:  # a new attempt or a forced reveal's root
                kept = self._locators[unit_id] = (key, await self.commitment(unit_id))
            locator, published = kept[1]
        return UnitView(
            unit_id=unit_id,
            job_id=unit_id >> 32,
            status=UnitStatus(u.status),
            deadline=u.deadline,
            seed_block=u.seedBlock,
            attempt=u.attempt,
            assignee=u.assignee,
            checkpoint_root=bytes(u.checkpointRoot),
            final_root=bytes(u.finalStateRoot),
            locator=locator,
            verify_seed=u.verifySeed,
            assign_seed=u.assignSeed,
            forced_revealed=bool(u.forcedRevealed),
            published_root=published,
            result_held=held_until != 0,
            held_until=held_until,
            data_request=data_request,
            assignee_index=int(u.assigneeIndex),
        )

    # What the JobLens reads with a unit, read here getter by getter when no lens is wired.

    async def drawn(self, u: UnitView) -> tuple[Drawn, ...]:
        """The unit's drawn verifiers and their statuses, draw order."""
        if u.drawn is not None:
            return u.drawn
        f = self.manager.functions
        drawn = [
            Drawn(v, VerifierStatus((await f.verifierStatus(u.unit_id, v).call()).status))
            for v in await f.getVerifiers(u.unit_id).call()
        ]
        return tuple(drawn)

    async def verifier_status(self, u: UnitView, verifier: str) -> VerifierStatus:
        """`verifier`'s status on the unit (None when not drawn)."""
        if u.drawn is None:
            fn = self.manager.functions.verifierStatus(u.unit_id, verifier)
            return VerifierStatus((await fn.call()).status)
        mine = [d.status for d in u.drawn if d.verifier.lower() == verifier.lower()]
        return mine[0] if mine else VerifierStatus.NONE

    async def claimants(self, u: UnitView) -> tuple[str, ...]:
        if u.claimants is not None:
            return u.claimants
        return tuple((await self.manager.functions.getClaimants(u.unit_id).call()).solvers)

    async def dispute(self, u: UnitView) -> Any:
        """IJobManager.Dispute of the unit (gameId, challenger, bond; zeros when none)."""
        if u.dispute is not None:
            return u.dispute
        return await self.manager.functions.getDispute(u.unit_id).call()

    async def job_of(self, u: UnitView) -> Any:
        """IJobManager.Job of the unit's job."""
        if u.job is not None:
            return u.job
        return await self.manager.functions.getJob(u.job_id).call()

    async def units(self) -> list[UnitView]:
        """Every job's unit that may still change, and a settled one (Finalized, Cancelled) in
        the round it is first seen settled, so that every role sees it so once (a solver drops
        its account of it then). Later rounds do not read it again: a round's reads grow with
        the live jobs, not with every job ever posted. A job whose record has taken another job
        since (PROTOCOL §6.10) reads as unknown: it settled long ago, and is dropped unread. A
        restart reads every job once more."""
        await self.discover_jobs()
        out = []
        for u in await self.units_read([job_id << 32 for job_id in sorted(self.live_jobs)]):
            job_id = u.job_id
            recycled = u.status == UnitStatus.NONE
            if recycled or (u.status in SETTLED and await self.holds_deep(self.settled_at(u))):
                self.settled.add(job_id)
                self.live_jobs.discard(job_id)
                self.forget_unit(u.unit_id)
            if not recycled:
                out.append(u)
        return out

    def settled_at(self, u: UnitView) -> Callable[[int], Awaitable[bool]]:
        """Whether unit `u` is settled at a block (for `holds_deep`)."""

        async def holds(block: int) -> bool:
            unit = await self.manager.functions.getUnit(u.unit_id).call(block_identifier=block)
            return unit.status in SETTLED

        return holds

    async def discover_jobs(self) -> None:
        """Add the jobs posted since my last scan (`JobPosted`, whose ids are not dense once
        records are recycled), when `jobCount` says there are any. Each scan reads from the block
        `--confirmations` below the head the last one reached, so a post re-mined by a shallow
        reorg is still seen; one reorged away reads as unknown and is dropped (`units`)."""
        count = int(await self.manager.functions.jobCount().call())
        if count == self._posted_count:
            return
        head = int(await self.w3.eth.block_number)
        start = self._posted_from
        while start <= head:
            end = min(head, start + POSTED_SCAN_BLOCKS - 1)
            posted = self.manager.events.JobPosted()
            for log in await posted.get_logs(from_block=start, to_block=end):
                job_id = int(log["args"]["jobId"])
                if job_id not in self.settled:
                    self.live_jobs.add(job_id)
            start = end + 1
        self._posted_from = max(self._posted_from, head + 1 - self.agent.config.confirmations)
        self._posted_count = count

    def forget_unit(self, unit_id: int) -> None:
        """Drop what I keep in memory about a unit that no round reads again (settled for good):
        its commitment's locator (looked up again if ever asked, `unit`). Roles extend it."""
        self._locators.pop(unit_id, None)

    async def holds_deep(self, holds_at: Callable[[int], Awaitable[bool]]) -> bool:
        """`holds_at(block)` at the block --confirmations deep. What is seen only in the newest
        blocks (a unit settled, a job completed) could still be undone by a reorg, and what no
        round reads again would then be left undone by me, so it is asked again until it holds
        this deep. False too when that block cannot be read: no contract there yet (a young
        chain), or a node that no longer serves its state."""
        block = await self.w3.eth.block_number - self.agent.config.confirmations
        if block < 0:
            return False
        try:
            return await holds_at(block)
        except (BadFunctionCallOutput, ContractLogicError, Web3RPCError):
            return False

    # --- sending ------------------------------------------------------------------------

    @property
    def round_manager(self) -> AsyncContract | None:
        """The RoundManager (decomposed jobs), when one belongs to my JobManager."""
        return self.rounds.rm if self.rounds is not None else None

    @property
    def round_game(self) -> AsyncContract | None:
        """The RoundManager's dispute game over version-3 aggregates, when one is wired."""
        return self.rounds.round_game if self.rounds is not None else None

    @functools.cached_property
    def executor(self) -> Executor:
        """The one executor of my chain actions (agents/roles/executor.py): every transaction
        of mine goes through it, and through it my agent's one crash-safe sender."""
        return Executor(self.agent, self, self.log)

    @property
    def gas_used(self) -> int:
        """Gas of the transactions this process signed."""
        return self.executor.gas_used

    @functools.cached_property
    def game_reader(self) -> AsyncGameReader:
        """Keyless reads of the job manager's dispute game (agents/roles/games.py)."""
        return AsyncGameReader(self.w3, self.game)

    @functools.cached_property
    def round_game_reader(self) -> AsyncGameReader:
        """Keyless reads of the round manager's dispute game (version-3 aggregates)."""
        assert self.round_game is not None
        return AsyncGameReader(self.w3, self.round_game)

    @functools.cached_property
    def court_game_reader(self) -> AsyncGameReader:
        """Keyless reads of the attestation court's dispute game."""
        assert self.court_game is not None
        return AsyncGameReader(self.w3, self.court_game)

    async def approve_at_least(self, intent: str, spender: str, amount: int) -> None:
        """Let `spender` take `amount` of my tokens unless it already may. The amount is in the
        intent: an amount quoted higher on a retry (a bond that grew) gets its own approval."""
        if await self.token.functions.allowance(self.me, spender).call() < amount:
            await self.executor.execute(Approve(f"{intent}:approve:{amount}", spender, amount))

    async def ensure_registered(
        self, role: int, stake: int, capability: tuple[int, int, int]
    ) -> None:
        node = await self.registry.functions.getNode(self.me).call()
        if node.role != 0:
            if node.role != role:
                raise RoleError(f"{self.me} is already registered with another role ({node.role})")
            return
        balance = await self.token.functions.balanceOf(self.me).call()
        if balance < stake:
            raise RoleError(
                f"account {self.me} holds {balance / 1e18:g} tokens, staking needs "
                f"{stake / 1e18:g}: fund it first (on a dev chain: TestToken.mint)"
            )
        if await self.w3.eth.get_balance(self.me) == 0:
            raise RoleError(f"account {self.me} has no ether to pay gas")
        await self.executor.execute(Approve("register:approve", self.registry.address, stake))
        out = await self.executor.execute(Register("register", role, capability, stake))
        if out is None:
            raise RoleError("registration reverted (see the warning above)")
        self.log.info("registered as role %d with stake %g", role, stake / 1e18)

    async def heartbeat_if_due(self, now: Now) -> None:
        node = await self.registry.functions.getNode(self.me).call()
        ttl = await self.registry.functions.heartbeatTtl().call()
        if now.timestamp - node.lastHeartbeat >= ttl // 2:
            slot = now.timestamp // max(1, ttl // 2)
            await self.executor.execute(Heartbeat(f"heartbeat:{slot}"))

    async def withdraw_if_credited(self, now: Now) -> None:
        """Withdraw my job manager credits, at most once every WITHDRAW_EVERY_S of chain time
        (logic.withdraw_due): a busy verifier is credited a fee every few seconds, and one
        withdrawal per credit would cost a transaction per job."""
        last = self.agent.store.get_record("withdrawal", self.manager.address.lower())
        last_ts = int(last.data["at"]) if last is not None else None
        credits = await self.manager.functions.credits(self.me).call()
        if not withdraw_due(credits, last_ts, now):
            return
        act = withdraw_act(credits, now.block)
        if act is not None and await self.executor.execute(act) is not None:
            self.agent.store.put_record(
                "withdrawal", self.manager.address.lower(), "done", {"at": now.timestamp}
            )
            self.log.info("withdrew %g tokens", credits / 1e18)


def serve_blobs(bind: str, location: str) -> BlobServer:
    """Serve the local blob folder `location` read-only over HTTP on `bind` (HOST:PORT)."""
    host, sep, port = bind.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise RoleError(f"--serve-blobs {bind!r}: expected HOST:PORT, e.g. 0.0.0.0:8600")
    if "://" in location and not location.startswith("file://"):
        raise RoleError("--serve-blobs needs a local --blob-url folder to serve")
    try:
        return BlobServer(
            LocalDirBackend(Path(location.removeprefix("file://"))), host, int(port)
        ).start()
    except OSError as exc:
        raise RoleError(f"--serve-blobs {bind}: {exc.strerror or exc}") from None
