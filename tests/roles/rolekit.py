"""Helpers for the role tests: a private Anvil (1 s blocks), a deployment with the real dispute
game and short deadlines, funded dev accounts, role processes, and chain-history checks."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from web3 import Web3

from agents.core.chain import AnvilConfig, connect, dev_private_key, local_anvil
from agents.core.deploy import DEFAULT_ABI_DIR, deploy_all, load_artifact
from agents.core.enums import JobStatus, RoundJobStatus, RoundStatus, UnitStatus
from tools.devnet import JOB_PAY, Party, fund

REPO = Path(__file__).resolve().parents[2]
SPEC = REPO / "examples" / "digits-mlp.json"


@contextlib.contextmanager
def chain() -> Iterator[tuple[str, Web3]]:
    with local_anvil(AnvilConfig(block_time=1)) as url:
        yield url, connect(url)


def deploy(
    w3: Web3,
    manager_config: dict | None = None,
    clock_budget: int = 120,
    court_clock_budget: int | None = None,
) -> dict:
    """The contracts with short deadlines; `court_clock_budget` also deploys the attestation
    court (its game with that many seconds per side)."""
    # no forced rounds unless a test asks (their outcome depends on the secret and the seed), and
    # then no lazy slash either: verifiers lock the flat verifierLock
    cfg = {
        "claimWindow": 10,
        "verifyWindow": 25,
        # seals are opened at once when every drawn verifier sealed; this only bounds the wait
        # for one that sealed and fell silent
        "revealWindow": 20,
        "disputeGrace": 10,
        "verifiersPerUnit": 1,
        "forcedErrorBps": 0,
        "lazySlashFactor": 0,
    }
    cfg.update(manager_config or {})
    params = {
        "dispute_game": True,
        "clock_budget": clock_budget,
        "manager_config": cfg,
        "registry_config": {"unbondingDelay": 60, "heartbeatTtl": 3600},
    }
    if court_clock_budget is not None:
        params.update(attestation_court=True, court_clock_budget=court_clock_budget)
    addrs = deploy_all(w3, dev_private_key(0), DEFAULT_ABI_DIR, params)
    LENSES[addrs["JobManager"]] = addrs["JobLens"]
    return addrs


#: JobManager -> its JobLens, of the deployments `deploy` made: the role processes get `--lens`
#: (their --deployment file is an empty one), so the e2e tests run the roles' one-call unit reads
#: as a deployment file would give them; a deployment made otherwise runs them without a lens.
LENSES: dict[str, str] = {}


def contract(w3: Web3, name: str, address: str):
    return w3.eth.contract(address=address, abi=load_artifact(name)["abi"])


@dataclass(frozen=True)
class JobRead:
    """A job as `job status` reads it (agents/roles/job_reads.py): its facts, the latest
    commitment of its first unit, and the JobManager's address."""

    facts: Any
    commitment: Any
    manager: str


def read_job(url: str, manager: str, job_id: int) -> JobRead:
    """Job `job_id` read once through a JobReader over its own AsyncWeb3, as the CLI reads it."""
    from agents.core.bindings import bind
    from agents.core.chain import async_connect
    from agents.roles.job_reads import JobReader

    async def read() -> JobRead:
        w3 = await async_connect(url)
        try:
            reader = JobReader(w3, bind(w3, "JobManager", manager), job_id)
            facts = await reader.read()
            return JobRead(facts, await reader.commitment(facts.units[0].unit_id), manager)
        finally:
            await w3.provider.disconnect()

    return asyncio.run(read())


def write_spec(path: Path, steps: int, every: int) -> Path:
    obj = json.loads(SPEC.read_text())
    obj["steps"], obj["checkpoint_every"] = steps, every
    path.write_text(json.dumps(obj))
    return path


def job_pay(p: Party, args: tuple[str, ...]) -> tuple[str, ...]:
    """JOB_PAY for a submitter started without a --reward of its own, else nothing."""
    if p.role in ("submitter", "submit") and "--reward" not in (*p.extra, *args):
        return JOB_PAY
    return ()


class Agents:
    """Role processes (own process groups, logs in `run_dir`), all stopped by `stop_all`."""

    def __init__(self, run_dir: Path, url: str, manager: str, lens: str | None = None) -> None:
        self.run_dir, self.url, self.manager = run_dir, url, manager
        # `lens`: the deployment's JobLens, named by a caller that runs deployments side by side
        # (their managers share an address on every fresh chain, their lenses not always: LENSES
        # holds the last one deployed)
        self.lens = lens if lens is not None else LENSES.get(manager)
        self.procs: dict[str, subprocess.Popen] = {}

    def start(self, p: Party, *args: str) -> subprocess.Popen:
        cmd = [
            sys.executable,
            "-m",
            "agents",
            p.role,
            "--rpc-url",
            self.url,
            "--key",
            f"dev:{p.key_index}",
            "--data-dir",
            str(self.run_dir / p.name),
            "--blob-url",
            str(self.run_dir / "blobs"),
            "--allow-local-locators",  # the agents share that folder: locators name it
            "--manager",
            self.manager,
            "--poll-interval",
            "0.5",
            "--json-logs",
            "--no-progress",
            "--deployment",  # isolated from build/demo's deployment file
            str(self.run_dir / "no-deployment.json"),
            *(("--lens", self.lens) if self.lens else ()),
            *p.extra,
            *args,
            *job_pay(p, args),
        ]
        log = open(self.run_dir / f"{p.name}.log", "ab")  # noqa: SIM115 - the child keeps it
        env = dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1")
        proc = subprocess.Popen(
            cmd, stdout=log, stderr=log, cwd=REPO, env=env, start_new_session=True
        )
        log.close()
        self.procs[p.name] = proc
        return proc

    def kill9(self, name: str) -> None:
        proc = self.procs[name]
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)

    def log(self, name: str) -> str:
        path = self.run_dir / f"{name}.log"
        return path.read_text() if path.exists() else ""

    def messages(self, name: str) -> list[str]:
        out = []
        for line in self.log(name).splitlines():
            with contextlib.suppress(ValueError):
                out.append(json.loads(line)["msg"])
        return out

    def stop_all(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(timeout=8)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=5)


@contextlib.contextmanager
def agents(run_dir: Path, url: str, manager: str, lens: str | None = None) -> Iterator[Agents]:
    a = Agents(run_dir, url, manager, lens)
    try:
        yield a
    finally:
        a.stop_all()


def wait_for(
    what: str,
    cond: Callable[[], bool],
    timeout: float,
    agents: Agents | None = None,
    keep_alive: tuple[str, ...] = (),
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        for name in keep_alive:
            proc = agents.procs[name] if agents else None
            if proc is not None and proc.poll() is not None:
                raise AssertionError(
                    f"{name} exited ({proc.returncode}):\n{agents.log(name)[-2000:]}"
                )
        time.sleep(0.25)
    logs = (
        ""
        if agents is None
        else "\n".join(f"--- {n}\n{agents.log(n)[-1500:]}" for n in agents.procs)
    )
    raise AssertionError(f"timed out waiting for {what}\n{logs}")


def wait_job_completed(agents: Agents, timeout: float, keep_alive: tuple[str, ...] = ()) -> None:
    """Wait until the submitter's process ends (it exits once its job completed) and check it
    succeeded, failing fast if a `keep_alive` agent exits first."""
    wait_for(
        "job completion",
        lambda: agents.procs["submitter"].poll() is not None,
        timeout,
        agents,
        keep_alive,
    )
    assert agents.procs["submitter"].returncode == 0, agents.log("submitter")[-2000:]


def jump_past(w3: Web3, when: int) -> None:
    """Move chain time just past `when` and mine (the agents then see the deadline passed)."""
    now = w3.eth.get_block("latest")["timestamp"]
    if when >= now:
        w3.provider.make_request("evm_increaseTime", [when + 1 - now])
    w3.provider.make_request("evm_mine", [])


def attested_after_second_draw(manager) -> bool:
    """Whether a verifier attested after the unit's second draw (a redone unit's attestation)."""
    draws = manager.events.VerifiersDrawn().get_logs(from_block=0)
    if len(draws) < 2:
        return False
    since = draws[-1]["blockNumber"]
    return any(e["blockNumber"] >= since for e in manager.events.Attested().get_logs(from_block=0))


@dataclass
class CaughtCheat:
    """What `cheat_caught_and_redone` leaves to assert on: the chain and the contracts."""

    w3: Web3
    manager: object
    registry: object
    game: object
    cheater: Party
    honest: Party
    url: str = ""
    addrs: dict | None = None  # the deployment's contracts (for `job fetch`)


@contextlib.contextmanager
def cheat_caught_and_redone(
    run_dir: Path, spec: Path, cheat: str, manager_config: dict, clock_budget: int = 120
) -> Iterator[CaughtCheat]:
    """The cheat scenario of the dispute e2e tests: a cheating solver (`--cheat cheat`) alone
    online when the job of `spec` is posted, one honest verifier; once the cheater holds the unit
    an honest solver joins (`clock_budget`: each side's seconds in the dispute game). Waits for
    the dispute's result, the redone unit's attestation and (chain time skipped past its
    challenge window) the job's completion, then yields the chain, still up, for the test's
    checks."""
    submitter = Party("submitter", "submitter", 1)
    cheater = Party("solver-cheat", "solver", 2, ["--stake", "100", "--cheat", cheat])
    honest = Party("solver", "solver", 3, ["--stake", "200"])
    verifier = Party("verifier", "verifier", 5, ["--stake", "100"])
    with chain() as (url, w3):
        addrs = deploy(w3, manager_config, clock_budget)
        fund(w3, addrs["Token"], dev_private_key(0), [submitter, cheater, honest, verifier])
        manager = contract(w3, "JobManager", addrs["JobManager"])
        registry = contract(w3, "NodeRegistry", addrs["NodeRegistry"])
        game = contract(w3, "DisputeGame", addrs["DisputeGame"])
        unit = 1 << 32
        with agents(run_dir, url, addrs["JobManager"]) as ag:
            ag.start(cheater)
            ag.start(verifier)
            wait_registered(registry, ag, [cheater, verifier])
            ag.start(submitter, "--spec", str(spec), "--claim-window", "8", "--compute-time", "300")
            wait_for(
                "the cheater's assignment",
                lambda: manager.functions.getUnit(unit).call()[0] >= UnitStatus.ASSIGNED,
                120,
                ag,
                ("solver-cheat", "verifier", "submitter"),
            )
            ag.start(honest)
            wait_for(
                "the dispute's result",
                lambda: bool(manager.events.DisputeResolved().get_logs(from_block=0)),
                300,
                ag,
                ("verifier", "submitter"),
            )
            wait_for(
                "the second draw's attestation",
                lambda: attested_after_second_draw(manager),
                240,
                ag,
                ("solver", "verifier", "submitter"),
            )
            jump_past(w3, manager.functions.getUnit(unit).call()[4])
            wait_job_completed(ag, 180, ("solver",))
        yield CaughtCheat(w3, manager, registry, game, cheater, honest, url, addrs)


def count_files(path: Path) -> int:
    """Files below `path` (0 if it does not exist): what an agent's data folder holds."""
    return sum(1 for p in path.rglob("*") if p.is_file()) if path.exists() else 0


def wait_registered(registry, agents: Agents, parties: list[Party], timeout: float = 90) -> None:
    """Wait until every party's agent registered (staked, with its role), failing fast if one
    of them exits."""
    wait_for(
        "registrations",
        lambda: all(registry.functions.roleOf(p.address).call() for p in parties),
        timeout,
        agents,
        tuple(p.name for p in parties),
    )


def successful_calls(w3: Web3, sender: str) -> list[tuple[str, str]]:
    """(to, calldata hex) of every successful transaction `sender` sent, in chain order."""
    out = []
    for n in range(w3.eth.block_number + 1):
        for tx in w3.eth.get_block(n, full_transactions=True)["transactions"]:
            if tx["from"] == sender and w3.eth.get_transaction_receipt(tx["hash"])["status"] == 1:
                out.append(((tx["to"] or "").lower(), bytes(tx["input"]).hex()))
    return out


# IJobManager / IRoundManager enum values the warp reads
_JOB_OPEN, _UNIT_OPEN = JobStatus.OPEN, UnitStatus.OPEN
_UNIT_ASSIGNED, _UNIT_VERIFYING = UnitStatus.ASSIGNED, UnitStatus.VERIFYING
_UNIT_DONE = (UnitStatus.FINALIZED, UnitStatus.CANCELLED)
_RM_JOB_RUNNING = RoundJobStatus.RUNNING
_ROUND_TRAINING, _ROUND_COMMITTED = RoundStatus.TRAINING, RoundStatus.COMMITTED


def _named(fn, *args) -> dict:
    """A struct-returning view call as {field: value} (robust to fields being added)."""
    names = [c["name"] for c in fn.abi["outputs"][0]["components"]]
    return dict(zip(names, fn(*args).call(), strict=True))


#: Blocks a Verifying unit stays as its last attestation left it before the warp jumps.
SETTLE_BLOCKS = 5


class Warp:
    """Skips chain time that only waits for a deadline: when everything on chain that is still
    running is idle (nobody left who acts before its deadline), the chain's clock jumps to just
    past the earliest deadline (evm_increaseTime + evm_mine), so a role test does not sleep
    through challenge windows it has no use for. Deadlines still pass on chain and the agents
    still act on them: only the real seconds between the last action and the deadline go.

    Idle means, per running item (anything else keeps the clock as it is):
      - a unit in Verifying whose drawn verifiers have all attested since the draw (a challenge
        is no verdict: a drawn challenger still attests, sealed or as the last to answer),
        SETTLE_BLOCKS blocks ago at least (the submitter's keeper reads the final checkpoint
        meanwhile, and demands it on chain when the read fails: with the draw and the only
        attestation in one transaction, PROTOCOL §6.5, a jump at once left it no round),
        and, when forced rounds are on, whose forced error (if any) is revealed: with every
        verifier of the test drawn (the caller's promise: no other verifier or whistleblower
        could challenge), only `finalize` is left;
      - a unit in Open whose claimants number `claimants` (the test's solvers), if given;
      - a unit Assigned to an address in `offline` (a solver the test killed for good);
      - a round Committed by an aggregator in `trusted` with no reveal request pending;
      - any unit of a job in `skip_jobs` (one the test abandoned on purpose).
    A round in Training whose units are all finalized waits for an aggregate: not idle."""

    def __init__(
        self,
        url: str,
        addrs: dict,
        claimants: int | None = None,
        trusted: tuple[str, ...] = (),
        skip_jobs: tuple[int, ...] = (),
        poll_s: float = 0.5,
    ) -> None:
        self.w3 = connect(url)
        self.manager = contract(self.w3, "JobManager", addrs["JobManager"])
        rm = addrs.get("RoundManager")
        self.rm = contract(self.w3, "RoundManager", rm) if rm else None
        self.claimants, self.trusted, self.skip_jobs = claimants, set(trusted), set(skip_jobs)
        self.offline: set[str] = set()
        self.poll_s = poll_s
        self.forced = _named(self.manager.functions.config)["forcedErrorBps"] > 0
        self.jumps: list[tuple[int, int]] = []  # (from timestamp, seconds skipped)
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="warp", daemon=True)

    def __enter__(self) -> Warp:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _loop(self) -> None:
        while not self._stop.wait(self.poll_s):
            try:
                now = self.w3.eth.get_block("latest")["timestamp"]
                target = self.idle_until()
                if target is not None and target >= now:
                    self.w3.provider.make_request("evm_increaseTime", [target + 1 - now])
                    self.w3.provider.make_request("evm_mine", [])
                    self.jumps.append((now, target + 1 - now))
            except Exception as exc:  # noqa: BLE001 - a read racing a state change: next poll
                self.errors.append(repr(exc))

    def idle_until(self) -> int | None:
        """The earliest deadline if every running item is idle, else None."""
        deadlines: list[int] = []
        m = self.manager.functions
        events = self.manager.events
        drawn = {e["args"]["unitId"]: e for e in events.VerifiersDrawn().get_logs(from_block=0)}
        responses = [  # (unit, verifier, block) of every attestation (an opened seal)
            (e["args"]["unitId"], e["args"]["verifier"], e["blockNumber"])
            for e in events.Attested().get_logs(from_block=0)
        ]
        # every job through JobPosted: ids are not dense (contracts' jobs are in the kept range,
        # recycled records' jobs carry their generation, PROTOCOL §6.10)
        jobs = sorted({e["args"]["jobId"] for e in events.JobPosted().get_logs(from_block=0)})
        for job in jobs:
            j = _named(m.getJob, job)
            if j["status"] != _JOB_OPEN or job in self.skip_jobs:
                continue
            for i in range(j["unitCount"]):
                uid = m.unitIdOf(job, i).call()
                u = _named(m.getUnit, uid)
                status = u["status"]
                if status in _UNIT_DONE:
                    continue
                if status == _UNIT_VERIFYING:
                    draw = drawn.get(uid)
                    if draw is None or (self.forced and not u["forcedRevealed"]):
                        return None
                    since = draw["blockNumber"]
                    mine = [(v, block) for unit, v, block in responses if unit == uid]
                    acted = {v for v, block in mine if block >= since}
                    if not set(draw["args"]["verifiers"]) <= acted:
                        return None
                    last = max((block for _, block in mine), default=since)
                    if self.w3.eth.block_number - last < SETTLE_BLOCKS:
                        return None
                elif status == _UNIT_OPEN:
                    if self.claimants is None or u["claimantCount"] < self.claimants:
                        return None
                elif status == _UNIT_ASSIGNED:
                    if u["assignee"] not in self.offline:
                        return None
                else:
                    return None
                deadlines.append(u["deadline"])
        if self.rm is not None:
            for dj in range(1, self.rm.functions.jobCount().call() + 1):
                j = _named(self.rm.functions.getJob, dj)
                if j["status"] != _RM_JOB_RUNNING:
                    continue
                r = j["currentRound"]
                rnd = _named(self.rm.functions.getRound, dj, r)
                if rnd["status"] == _ROUND_COMMITTED:
                    req = _named(self.rm.functions.revealRequestOf, dj, r)
                    if rnd["aggregator"] not in self.trusted or int(req["requester"], 16):
                        return None
                    deadlines.append(rnd["deadline"])
                elif rnd["status"] == _ROUND_TRAINING:
                    shards = j["params"][[c["name"] for c in self._params_abi()].index("shards")]
                    units = [self.rm.functions.unitJobOf(dj, r, s).call() for s in range(shards)]
                    if all(_named(m.getJob, u)["status"] != _JOB_OPEN for u in units):
                        return None  # every unit done: waiting for an aggregator
                else:
                    return None
        return min(deadlines) if deadlines else None

    def _params_abi(self) -> list[dict]:
        job = self.rm.functions.getJob.abi["outputs"][0]["components"]
        return next(c for c in job if c["name"] == "params")["components"]


__all__ = ["Party", "fund"]
