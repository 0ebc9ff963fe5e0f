"""Fault-injection reliability bench (issue #10): `make reliability`.

Runs seeded trials of one real job (submitter, solver, verifier, and in dispute trials a lying
challenger, each a `python -m agents` process) on a private loopback Anvil while injecting one
class of fault, then measures from the chain and the agents' intent records:

- completed: the job reached JobCompleted;
- paid: every honest party that did work was credited (solver; verifier if it attested);
- duplicates: mined transactions that are not the recorded one of exactly one intent, or two
  mined transactions for one intent (tools.devnet.audit_sends), must be 0;
- tokens lost: what an honest party holds at the end (balance + credits + stake) short of what
  it held at the start, less the reward the submitter escrowed, must be 0.

Fault classes: crash (kill -9 a role at a seeded point of a seeded phase, restart it from its
data folder; the court trials kill the whistleblower at a seeded point of its case against a
lazy verifier's false attestation, which it must still win), chain (Anvil stopped and restarted
from its --dump-state file; anvil_rollback; anvil_reorg), transport (tools/faultproxy.py between
the agents and Anvil), blob (missing, corrupt and slow checkpoint blobs; a solver that withholds
its data in a game loses by the clock) and bad input (malformed specs, flags and on-chain
parameters: one clear line / a custom error).

Usage: python -m bench.reliability_bench [--quick] [--only CLASS ...] [--out PATH]
Writes bench/results/reliability.json (seeds, per-trial rows, totals, wall time).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "roles"))  # rolekit: the one "job with N processes" kit

import rolekit as rk  # noqa: E402
from web3 import Web3  # noqa: E402

from agents.core.blobs import BlobNotFound, LocalDirBackend  # noqa: E402
from agents.core.chain import (  # noqa: E402
    DEV_MNEMONIC,
    _die_with_parent,
    _stop,
    _wait_ready,
    anvil_binary,
    connect,
    free_port,
)
from bench import hanging_units  # noqa: E402
from tools.devnet import audit_sends  # noqa: E402
from tools.faultproxy import FaultProxy, FaultRates  # noqa: E402

OUT = REPO / "bench" / "results" / "reliability.json"
TOKEN = 10**18
MINTED = 1000 * TOKEN  # rolekit.fund mints this to every party
REWARD = 100 * TOKEN  # what the kit's jobs pay (tools.devnet.JOB_PAY)
STEPS, EVERY = 12000, 1000  # training takes a few seconds, so kills can land in it
JOB_TIMEOUT_S = 360.0
#: The game's chess clock (chain seconds per side). The submitter mines a block whenever it
#: idles, so chain time runs up to twice as fast as wall time; generous enough that an honest
#: party behind a faulty transport (retries, 11 s hangs) still moves in time.
CLOCK_BUDGET_S = 240
DISPUTE_GRACE_S = 10

CRASH_PHASES = ("training", "commitment", "replay", "game", "settlement")
#: Where a court trial kills the whistleblower: before the attestation (scanning), while it
#: checks it (fetch and replay), once the unit is final (about to challenge), in the court game.
COURT_POINTS = ("drawn", "attested", "finalized", "court")
#: The court game's clock (chain seconds per side): the lazy verifier never moves, so the case
#: lasts this long; the whistleblower must be back from a kill -9 (a cold Python start with
#: torch) well inside it.
COURT_CLOCK_S = 60
#: Set on SIGTERM/Ctrl-C: running trials stop at their next tick and stop their processes.
STOP = threading.Event()


# --- the chain: a restartable Anvil on a fixed loopback port ---------------------------------


class Anvil:
    """Automining Anvil on a fixed port whose state survives a restart (--dump-state on exit,
    --load-state on start), so the agents' RPC URL stays valid across the restart."""

    def __init__(self, work: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.state = work / "anvil-state.json"
        self.proc: subprocess.Popen | None = None

    def start(self, load: bool = False) -> None:
        cmd = [
            anvil_binary(),
            "--host", "127.0.0.1",
            "--port", str(self.port),
            "--chain-id", "31337",
            "--accounts", "20",
            "--balance", "10000",
            "--mnemonic", DEV_MNEMONIC,
            "--silent",
            "--dump-state", str(self.state),
        ]  # fmt: skip
        if load:
            cmd += ["--load-state", str(self.state)]
        self.proc = subprocess.Popen(
            cmd,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )
        _wait_ready(self.proc, self.url, 30)

    def stop(self) -> None:
        if self.proc is not None:
            _stop(self.proc)  # SIGTERM: Anvil writes --dump-state on the way out
            self.proc = None

    def restart(self, down_s: float) -> None:
        self.stop()
        time.sleep(down_s)
        self.start(load=True)


@contextlib.contextmanager
def anvil(work: Path) -> Iterator[Anvil]:
    a = Anvil(work)
    a.start()
    try:
        yield a
    finally:
        a.stop()


# --- a slow / faulty blob server (blob faults) -----------------------------------------------


class BlobFaultServer:
    """Serves a blob folder over HTTP like agents/core/blobs.py's server, with a fault mode:
    "missing" (404), "corrupt" (one flipped byte in large blobs), "slow" (latency per GET),
    "ok". The mode can change while the job runs."""

    def __init__(self, folder: Path, mode: str, delay_s: float = 1.5) -> None:
        self.backend, self.mode, self.delay_s = LocalDirBackend(folder), mode, delay_s
        self.hits: dict[str, int] = {}
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802
                parts = self.path.split("?", 1)[0].strip("/").split("/")
                mode = server.mode
                server.hits[mode] = server.hits.get(mode, 0) + 1
                try:
                    data = bytearray(server.backend.read(parts[-1]))
                except (BlobNotFound, ValueError):
                    data = None
                if mode == "missing" or data is None or parts[0] != "blobs":
                    self.send_error(404)
                    return
                if mode == "corrupt" and len(data) > 4096:
                    data[len(data) // 2] ^= 0x01
                if mode == "slow":
                    time.sleep(server.delay_s)
                self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(bytes(data))

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


# --- watching the job from the chain (events only, so view changes do not matter) ------------


class Watch:
    def __init__(self, w3: Web3, addrs: dict[str, str]) -> None:
        self.w3 = w3
        self.manager = rk.contract(w3, "JobManager", addrs["JobManager"])
        court = addrs.get("AttestationCourt")
        self.court = rk.contract(w3, "AttestationCourt", court) if court else None
        self.game = rk.contract(w3, "DisputeGame", addrs["DisputeGame"])
        self.registry = rk.contract(w3, "NodeRegistry", addrs["NodeRegistry"])
        self.token = rk.contract(w3, "TestToken", addrs["Token"])

    def count(self, contract: Any, event: str) -> int:
        try:
            return len(getattr(contract.events, event)().get_logs(from_block=0))
        except Exception:  # the node is restarting: nothing observed this tick
            return -1

    def game_moves(self) -> int:
        names = ("CheckpointsPosted", "SegmentPicked", "SegmentOpened", "StepPicked")
        names += ("TracePosted", "NodePicked", "LeavesPosted", "LeafPicked", "ChunkRevealed")
        return sum(max(0, self.count(self.game, n)) for n in names)

    def phase_reached(self, phase: str, arg: int = 0) -> bool:
        m = self.manager
        if phase == "assigned":
            return self.count(m, "UnitAssigned") >= 1
        if phase == "committed":
            return self.count(m, "CheckpointsCommitted") >= 1
        if phase == "drawn":
            return self.count(m, "VerifiersDrawn") >= 1
        if phase == "attested":
            return self.count(m, "Attested") >= 1
        if phase == "court":
            return self.count(self.court, "AttestationChallenged") >= 1
        if phase == "game":
            return self.count(self.game, "GameOpened") >= 1 and self.game_moves() >= arg
        if phase == "finalized":
            return self.count(m, "UnitFinalized") >= 1
        raise ValueError(phase)

    def completed(self) -> bool:
        return self.count(self.manager, "JobCompleted") >= 1

    def holdings(self, address: str) -> int:
        node = self.registry.functions.getNode(address).call()
        court = self.court.functions.credits(address).call() if self.court is not None else 0
        return (
            self.token.functions.balanceOf(address).call()
            + self.manager.functions.credits(address).call()
            + court
            + int(node[8])
            + int(node[10])
        )

    def court_settled(self) -> bool:
        """The court case ruled and its winner withdrew (only the whistleblower withdraws)."""
        return self.court is not None and self.count(self.court, "Withdrawn") >= 1

    def court_withdrawn(self, address: str) -> int:
        if self.court is None:
            return 0
        evs = self.court.events.Withdrawn().get_logs(
            from_block=0, argument_filters={"account": address}
        )
        return sum(int(e["args"]["amount"]) for e in evs)

    def false_attestation_ruled(self, verifier: str) -> bool:
        if self.court is None:
            return False
        evs = self.court.events.AttestationRuled().get_logs(from_block=0)
        return any(e["args"]["verifier"] == verifier and e["args"]["falseAttestation"] for e in evs)

    def credited(self, address: str) -> int:
        evs = self.manager.events.Credited().get_logs(
            from_block=0, argument_filters={"account": address}
        )
        return sum(int(e["args"]["amount"]) for e in evs)

    def paid_at_finalize(self, address: str) -> int:
        """What `address` was paid as the solver finalizing its own unit: that transaction pays
        it directly (PROTOCOL §6.7), with no credit to withdraw."""
        evs = self.manager.events.UnitFinalized().get_logs(
            from_block=0, argument_filters={"solver": address}
        )
        return sum(
            int(e["args"]["solverPay"])
            for e in evs
            if self.w3.eth.get_transaction(e["transactionHash"])["from"] == address
        )

    def attested(self, address: str) -> bool:
        evs = self.manager.events.Attested().get_logs(from_block=0)
        return any(e["args"]["verifier"] == address for e in evs)

    def slashed(self, address: str) -> int:
        evs = self.registry.events.NodeSlashed().get_logs(from_block=0)
        return sum(int(e["args"]["amount"]) for e in evs if e["args"]["node"] == address)


# --- one trial -------------------------------------------------------------------------------


@dataclass
class Plan:
    """What a trial does: the fault, where it strikes, and the job's cast."""

    fault: str  # crash | chain | transport | blob
    seed: int
    kind: str  # e.g. "kill-solver", "restart", "rollback", "reorg", "proxy", "corrupt"
    trigger: str = "assigned"  # a Watch phase
    trigger_arg: int = 0
    delay_s: float = 0.0
    target: str = ""
    down_s: float = 1.0
    depth: int = 1
    liar: bool = False  # a lying challenger joins: the unit goes to a dispute game
    rates: dict[str, float] = field(default_factory=dict)

    @property
    def court_case(self) -> bool:
        """A court trial: the whistleblower's case against a lazy verifier (`court_plan`)."""
        return self.target == "whistleblower"

    def row(self) -> dict[str, Any]:
        out = {k: v for k, v in self.__dict__.items() if v not in ("", {}, None)}
        if isinstance(out.get("delay_s"), float):
            out["delay_s"] = round(out["delay_s"], 2)
        if isinstance(out.get("down_s"), float):
            out["down_s"] = round(out["down_s"], 2)
        return out


def crash_plan(seed: int, index: int) -> Plan:
    rng = random.Random(seed)
    phase = CRASH_PHASES[index % len(CRASH_PHASES)]
    if phase == "training":
        target, trigger, delay = rng.choice(["solver", "solver", "submitter"]), "assigned", 0.0
        delay = rng.uniform(0.2, 3.0)
    elif phase == "commitment":
        target, trigger, delay = "solver", "assigned", rng.uniform(2.0, 7.0)
    elif phase == "replay":
        target, trigger, delay = rng.choice(["verifier", "verifier", "submitter"]), "drawn", 0.0
        delay = rng.uniform(0.0, 2.5)
    elif phase == "game":
        target, trigger, delay = rng.choice(["solver", "solver", "submitter"]), "game", 0.0
        delay = rng.uniform(0.0, 1.0)
    else:  # settlement: after the unit is finalized, before/while parties withdraw
        target = rng.choice(["solver", "verifier", "submitter"])
        trigger, delay = "finalized", rng.uniform(0.0, 1.5)
    return Plan(
        "crash",
        seed,
        f"kill-{target}@{phase}",
        trigger=trigger,
        trigger_arg=rng.randint(1, 4) if phase == "game" else 0,
        delay_s=delay,
        target=target,
        down_s=rng.uniform(0.5, 3.0),
        liar=phase == "game",
    )


def court_plan(seed: int, index: int) -> Plan:
    """kill -9 the whistleblower at a seeded point of its case (COURT_POINTS) against a lazy
    verifier's false attestation, and restart it from its data folder: it must still challenge
    once, win the court game and withdraw."""
    rng = random.Random(seed)
    point = COURT_POINTS[index % len(COURT_POINTS)]
    return Plan(
        "crash",
        seed,
        f"kill-whistleblower@{point}",
        trigger=point,
        delay_s=rng.uniform(0.0, 2.0 if point == "court" else 3.0),
        target="whistleblower",
        down_s=rng.uniform(0.5, 3.0),
    )


def chain_plan(seed: int, index: int) -> Plan:
    rng = random.Random(seed)
    kind = ("restart", "rollback", "reorg")[index % 3]
    trigger = rng.choice(["assigned", "committed", "drawn"])
    return Plan(
        "chain",
        seed,
        kind,
        trigger=trigger,
        delay_s=rng.uniform(0.0, 3.0),
        down_s=rng.uniform(0.5, 3.0),
        depth=rng.randint(1, 3),
    )


def adversary_plan(seed: int, index: int) -> Plan:
    """Griefing: two registered verifiers challenge the honest unit frivolously (one game
    each, one after the other); each must lose its bond and the extra settlement delay must
    stay within n x (2 x clock budget + dispute grace)."""
    return Plan("adversary", seed, "griefers", liar=True)


def transport_plan(seed: int, index: int) -> Plan:
    return Plan("transport", seed, "proxy", liar=index % 2 == 1)


def blob_plan(seed: int, index: int) -> Plan:
    rng = random.Random(seed)
    kind = ("missing", "corrupt", "slow", "withhold")[index % 4]
    if kind == "withhold":
        # the solver publishes its checkpoints but, once challenged, withholds every answer
        # (killed at a seeded move, never restarted): it must lose by the game's clock
        return Plan("blob", seed, kind, trigger="game", trigger_arg=rng.randint(0, 2),
                    target="solver", liar=True)  # fmt: skip
    return Plan("blob", seed, kind, delay_s=rng.uniform(2.0, 6.0))


def run_trial(plan: Plan, work: Path, timeout_s: float = JOB_TIMEOUT_S) -> dict[str, Any]:
    """Run one job under `plan`'s fault; every process it starts is stopped before it returns.
    `timeout_s` bounds the job's wall time (the CI sample allows more: its machine also runs
    the rest of the suite)."""
    started = time.monotonic()
    work.mkdir(parents=True, exist_ok=True)
    rk.write_spec(work / "spec.json", steps=STEPS, every=EVERY)
    submitter = rk.Party("submitter", "submitter", 1, ["--mine-when-idle"])
    solver_extra = ["--stake", "200"]
    blob_server: BlobFaultServer | None = None
    if plan.fault == "blob":
        mode = "ok" if plan.kind == "withhold" else plan.kind
        blob_server = BlobFaultServer(work / "blobs", mode)
        solver_extra += ["--public-blob-url", blob_server.url]
    solver = rk.Party("solver", "solver", 2, solver_extra)
    verifier = rk.Party("verifier", "verifier", 5, ["--stake", "100"])
    liar = rk.Party("liar", "verifier", 6, ["--stake", "100", "--cheat-challenge"])
    honest = [submitter, solver, verifier]
    griefer = rk.Party("griefer", "verifier", 7, ["--stake", "100", "--cheat-challenge"])
    cast = honest + ([liar] if plan.liar else []) + ([griefer] if plan.fault == "adversary" else [])
    if plan.court_case:
        # the only verifier is lazy (it attests the final root for every segment: false), so
        # the draw picks it; the whistleblower is the honest party that must win the case
        lazy = rk.Party("lazy", "verifier", 6, ["--stake", "100", "--lazy"])
        # the case outlives the job: once the submitter (which mines when idle, as a live chain
        # would) has exited, the whistleblower mines so that the silent verifier's clock runs out
        whistleblower = rk.Party(
            "whistleblower", "whistleblower", 7, ["--stake", "20", "--mine-when-idle"]
        )
        honest = [submitter, solver, whistleblower]
        cast = [*honest, lazy]
    proxy: FaultProxy | None = None
    result: dict[str, Any] = {"plan": plan.row()}
    try:
        with anvil(work) as chain:
            w3 = connect(chain.url, timeout_s=10.0)
            addrs = rk.deploy(
                w3,
                {
                    # a drawn verifier sees the draw, fetches and replays its segments and
                    # attests inside it; 40 s was once too short for a replay on a CI machine
                    # running four trials and the transport faults' 11 s hangs at once
                    "verifyWindow": 75,
                    # a verifier killed after sealing must be back within it to open its seal
                    "revealWindow": 40,
                    "disputeGrace": DISPUTE_GRACE_S,
                    "verifiersPerUnit": 2 if plan.liar else 1,
                },
                clock_budget=CLOCK_BUDGET_S,
                court_clock_budget=COURT_CLOCK_S if plan.court_case else None,
            )
            rk.fund(w3, addrs["Token"], rk.dev_private_key(0), cast)
            start_args = {"whistleblower": ["--court", addrs.get("AttestationCourt", "")]}
            first = w3.eth.block_number
            watch = Watch(w3, addrs)
            before = {p.name: watch.holdings(p.address) for p in honest}
            agent_url = chain.url
            if plan.fault == "transport":
                proxy = FaultProxy(chain.url, plan.seed, FaultRates())
                agent_url = proxy.start()
                result["plan"]["rates"] = {k: v for k, v in FaultRates().__dict__.items()}
            # the trials run side by side in threads: each names its own lens (rk.Agents)
            with rk.agents(work, agent_url, addrs["JobManager"], addrs["JobLens"]) as ag:
                for p in cast[1:]:
                    ag.start(p, *start_args.get(p.name, []))
                rk.wait_for(
                    "registrations",
                    lambda: all(
                        watch.registry.functions.roleOf(p.address).call() for p in cast[1:]
                    ),
                    120,
                    ag,
                )
                ag.start(submitter, *submitter_args(work))
                fault = _fault_driver(plan, chain, ag, watch, {p.name: p for p in cast}, start_args)
                fault_note = _run_until_done(ag, watch, fault, blob_server, plan, timeout_s)
                result.update(fault_note)
                # settle: honest parties withdraw what they were credited
                with contextlib.suppress(AssertionError):
                    rk.wait_for(
                        "withdrawals",
                        lambda: all(
                            watch.manager.functions.credits(p.address).call() == 0 for p in honest
                        ),
                        20,
                    )
            result.update(_measure(w3, watch, work, first, honest, before, plan, cast))
            if proxy is not None:
                result["injected"] = dict(sorted(proxy.counts.items()))
            if blob_server is not None:
                result["blob_requests"] = dict(sorted(blob_server.hits.items()))
    except KeyboardInterrupt:
        result.update(completed=False, survived=False, error="interrupted")
    except Exception as exc:  # a trial that breaks is a failed trial, recorded, not a crash
        result.update(
            completed=False,
            survived=False,
            error=f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}",
        )
    finally:
        if proxy is not None:
            proxy.stop()
        if blob_server is not None:
            blob_server.stop()
    result["wall_s"] = round(time.monotonic() - started, 1)
    return result


def submitter_args(work: Path) -> list[str]:
    """The submitter's job flags (the same on a restart: it then follows its posted job)."""
    return ["--spec", str(work / "spec.json"), "--claim-window", "8", "--compute-time", "120",
            "--out", str(work / "result.json")]  # fmt: skip


def _fault_driver(
    plan: Plan,
    chain: Anvil,
    ag: rk.Agents,
    watch: Watch,
    cast: dict[str, rk.Party],
    start_args: dict[str, list[str]],
) -> Callable[[], str | None]:
    """A step function called every tick: applies the fault once its trigger has held for
    `delay_s`; returns a note when it acted. A restarted party gets the flags it started with."""
    state: dict[str, Any] = {"seen": None, "done": False}

    def step() -> str | None:
        if state["done"] or plan.fault in ("transport", "adversary"):
            return None
        if plan.fault == "blob" and plan.kind != "withhold":
            return None
        if state["seen"] is None:
            if watch.phase_reached(plan.trigger, plan.trigger_arg):
                state["seen"] = time.monotonic()
            return None
        if time.monotonic() - state["seen"] < plan.delay_s:
            return None
        state["done"] = True
        if plan.kind == "withhold":
            ag.kill9(plan.target)
            return f"{plan.target} stopped answering (killed, not restarted)"
        if plan.fault == "crash":
            if ag.procs[plan.target].poll() is not None:
                return f"{plan.target} had already exited; not killed"
            ag.kill9(plan.target)
            time.sleep(plan.down_s)
            extra = submitter_args(ag.run_dir) if plan.target == "submitter" else []
            extra += start_args.get(plan.target, [])
            ag.start(cast[plan.target], *extra)
            return f"killed -9 and restarted {plan.target}"
        if plan.kind == "restart":
            block = watch.w3.eth.block_number
            chain.restart(plan.down_s)
            return f"anvil restarted from its dump at block {block} (down {plan.down_s:.1f} s)"
        if plan.kind == "rollback":
            watch.w3.provider.make_request("anvil_rollback", [plan.depth])
            return f"anvil_rollback {plan.depth}"
        watch.w3.provider.make_request("anvil_reorg", [plan.depth, []])
        return f"anvil_reorg {plan.depth}"

    return step


def _run_until_done(
    ag: rk.Agents,
    watch: Watch,
    fault: Callable[[], str | None],
    blobs: BlobFaultServer | None,
    plan: Plan,
    timeout_s: float,
) -> dict[str, Any]:
    notes: list[str] = []
    deadline = time.monotonic() + timeout_s
    blob_fixed = False
    bad_since: float | None = None
    while time.monotonic() < deadline:
        if STOP.is_set():
            raise KeyboardInterrupt
        note = fault()
        if note:
            notes.append(note)
        # missing / corrupt blobs: the right data appears only after the verifier has met the
        # fault (and so detected it and retried) for a seeded while
        if blobs is not None and not blob_fixed and plan.kind in ("missing", "corrupt"):
            if bad_since is None and blobs.hits.get(plan.kind, 0) > 0:
                bad_since = time.monotonic()
            if bad_since is not None and time.monotonic() - bad_since > plan.delay_s:
                blobs.mode = "ok"
                blob_fixed = True
                n = blobs.hits[plan.kind]
                notes.append(f"{n} requests got {plan.kind} blobs; then served correctly")
        if plan.kind == "withhold" and watch.count(watch.game, "GameResolved") >= 1:
            return {"notes": notes, "finished": "game resolved"}
        code = ag.procs["submitter"].poll()
        # a court case starts once the unit is final, after the submitter is done: wait for it
        if code is not None and (not plan.court_case or watch.court_settled()):
            return {"notes": notes, "finished": f"submitter exited {code}"}
        for name, proc in ag.procs.items():
            if name == plan.target and plan.kind == "withhold":
                continue
            if name != "submitter" and proc.poll() is not None:
                notes.append(f"{name} exited with code {proc.returncode}")
                return {"notes": notes, "finished": f"{name} died"}
        time.sleep(0.25)
    notes.append(f"timed out after {timeout_s:.0f} s")
    return {"notes": notes, "finished": "timeout"}


def _measure(
    w3: Web3,
    watch: Watch,
    work: Path,
    first: int,
    honest: list[rk.Party],
    before: dict[str, int],
    plan: Plan,
    cast: list[rk.Party],
) -> dict[str, Any]:
    completed = watch.completed()
    dups = audit_sends(w3, first, {p.address: work / p.name for p in cast})
    lost: dict[str, int] = {}
    paid: dict[str, bool] = {}
    for p in honest:
        allowed = REWARD if p.role == "submitter" else 0
        short = before[p.name] - watch.holdings(p.address) - allowed
        # a slash shows in the holdings too: count it once, even when pay made up for it
        lost[p.name] = max(0, short, watch.slashed(p.address))
        # the solver is always owed; a verifier only when it attested
        if p.role == "solver":
            paid[p.name] = watch.credited(p.address) + watch.paid_at_finalize(p.address) > 0
        if p.role == "verifier" and watch.attested(p.address):
            paid[p.name] = watch.credited(p.address) > 0
        if p.role == "whistleblower":  # it won its case and took its court credit
            paid[p.name] = watch.court_withdrawn(p.address) > 0
    tracebacks = [p.name for p in cast if "Traceback" in _read(work / f"{p.name}.log")]
    out: dict[str, Any] = {
        "completed": completed,
        "honest_paid": all(paid.values()) and bool(paid),
        "duplicate_transactions": len(dups),
        "tokens_lost_by_honest": sum(lost.values()) / TOKEN,
        "tracebacks": tracebacks,
    }
    if dups:
        out["duplicates"] = dups
    # what every trial must show: the job done, the honest paid, nothing sent twice or lost
    survived = (
        completed
        and out["honest_paid"]
        and out["duplicate_transactions"] == 0
        and out["tokens_lost_by_honest"] == 0
    )
    if plan.fault == "adversary":
        out.update(_griefing(watch, [p for p in cast if p.name in ("liar", "griefer")]))
        out["survived"] = (
            survived
            and out["griefers_lost_bonds"]
            and out["extra_settlement_delay_s"] <= out["delay_bound_s"]
        )
        return out
    if plan.court_case:
        lazy = next(p for p in cast if p.name == "lazy")
        out["false_attestation_ruled"] = watch.false_attestation_ruled(lazy.address)
        out["survived"] = survived and out["false_attestation_ruled"]
        return out
    if plan.kind == "withhold":
        # the solver withholds its data in the game (never answers): it must lose by the clock
        res = watch.game.events.GameResolved().get_logs(from_block=0)
        out["withholder_lost_by_clock"] = bool(
            res and res[0]["args"]["challengerWon"] and res[0]["args"]["byTimeout"]
        )
        out["completed"] = out["withholder_lost_by_clock"]
        out["honest_paid"] = True  # no honest work was done on the withheld unit
        out["tokens_lost_by_honest"] = (lost["submitter"] + lost["verifier"]) / TOKEN
        out["survived"] = out["withholder_lost_by_clock"] and out["duplicate_transactions"] == 0
        return out
    out["survived"] = survived
    return out


def _griefing(watch: Watch, griefers: list[rk.Party]) -> dict[str, Any]:
    """Frivolous games: who opened them, what their bonds became, and the settlement delay
    they caused against its bound n x (2 C + G): a game lasts at most both chess clocks (C
    each), and a lost challenge moves the unit's deadline to at most resolution + G."""
    m = watch.manager
    opened = m.events.ChallengeOpened().get_logs(from_block=0)
    resolved = m.events.DisputeResolved().get_logs(from_block=0)
    drawn = m.events.VerifiersDrawn().get_logs(from_block=0)
    budget, grace = CLOCK_BUDGET_S, DISPUTE_GRACE_S  # what run_trial deployed
    addrs = {p.address for p in griefers}
    by_griefers = [e for e in opened if e["args"]["challenger"] in addrs]
    bonds = sum(int(e["args"]["bond"]) for e in by_griefers)
    games = {int(e["args"]["gameId"]) for e in by_griefers}
    theirs = [e for e in resolved if int(e["args"]["gameId"]) in games]
    # A bond comes back (with the reward) in the transaction that resolves the game; a griefer
    # that was also drawn and attested earns its verifier fee at finalize, which is no refund.
    settled_in = {e["transactionHash"] for e in theirs}
    refunded = sum(
        int(e["args"]["amount"])
        for e in m.events.Credited().get_logs(from_block=0)
        if e["args"]["account"] in addrs and e["transactionHash"] in settled_in
    )
    earned = sum(watch.credited(a) for a in addrs) - refunded
    first_deadline = int(drawn[-1]["args"]["challengeDeadline"]) if drawn else 0
    last = max([int(e["args"]["challengeDeadline"]) for e in resolved] + [first_deadline])
    n = len(by_griefers)
    return {
        "frivolous_games": n,
        "games_won_by_griefers": sum(1 for e in theirs if e["args"]["challengerWon"]),
        "griefer_bonds_posted": bonds / TOKEN,
        "griefer_bond_refunds": refunded / TOKEN,
        "griefer_fees_as_verifiers": earned / TOKEN,
        "griefers_lost_bonds": (
            n > 0
            and len(theirs) == n
            and all(not e["args"]["challengerWon"] for e in theirs)
            and refunded == 0
        ),
        "extra_settlement_delay_s": max(0, last - first_deadline),
        "delay_bound_s": n * (2 * budget + grace),
    }


def _read(path: Path) -> str:
    return path.read_text(errors="replace") if path.exists() else ""


# --- bad input --------------------------------------------------------------------------------


def bad_inputs(work: Path, cli_every: int = 1) -> dict[str, Any]:
    """Malformed specs and flags to the CLI (one line on stderr, exit 2, no traceback, within
    a timeout) and malformed parameters on chain (a decoded custom error). `cli_every` > 1
    runs every n-th CLI case only (each is a process start of a few seconds)."""
    from bench.reliability_inputs import chain_cases, cli_cases

    work.mkdir(parents=True, exist_ok=True)
    with anvil(work) as chain:
        w3 = connect(chain.url, timeout_s=10.0)
        addrs = rk.deploy(w3)
        cli = cli_cases(work, chain.url, addrs["JobManager"], every=cli_every)
        rows = cli + chain_cases(w3, addrs)
    clear = sum(1 for r in rows if r["clear"])
    return {"tried": len(rows), "clear": clear, "cases": rows}


# --- the bench --------------------------------------------------------------------------------

PLANS = {  # a class's seeds follow from its place here: a new class goes last
    "crash": crash_plan,
    "chain": chain_plan,
    "transport": transport_plan,
    "blob": blob_plan,
    "adversary": adversary_plan,
    "court": court_plan,
}
FULL = {"crash": 20, "chain": 6, "transport": 3, "blob": 4, "adversary": 2, "court": 4}
QUICK = {"crash": 5, "chain": 3, "transport": 1, "blob": 2, "adversary": 1, "court": 1}


def plans(counts: dict[str, int], base_seed: int) -> list[Plan]:
    out = []
    for fault, n in counts.items():
        for i in range(n):
            seed = base_seed + 1000 * list(PLANS).index(fault) + i
            out.append(PLANS[fault](seed, i))
    return out


def _class_of(p: Plan) -> str:
    """The PLANS class a plan came from (a court trial is a crash, of the whistleblower)."""
    return "court" if p.court_case else p.fault


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    per: dict[str, dict[str, Any]] = {}
    for r in rows:
        f = r["plan"]["fault"]
        s = per.setdefault(
            f,
            {"trials": 0, "survived": 0, "duplicate_transactions": 0, "tokens_lost_by_honest": 0},
        )
        s["trials"] += 1
        s["survived"] += int(bool(r.get("survived")))
        s["duplicate_transactions"] += int(r.get("duplicate_transactions", 0))
        s["tokens_lost_by_honest"] += float(r.get("tokens_lost_by_honest", 0))
    return per


def run_side_by_side(todo: list[Any], run: Callable[[Any], dict[str, Any]], jobs: int) -> list:
    """`run` each of `todo`, `jobs` at a time; rows in `todo`'s order, each printed in brief as
    it is collected. An interrupt stops the running trials' processes at their next tick."""
    rows = []
    pool = ThreadPoolExecutor(max_workers=max(1, jobs))
    try:
        for fut in [pool.submit(run, p) for p in todo]:
            row = fut.result()
            rows.append(row)
            brief = ("plan", "survived", "wall_s", "notes", "error")
            print(json.dumps({k: row.get(k) for k in brief}), flush=True)
    except BaseException:
        STOP.set()  # running trials stop their processes at their next tick
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a few trials per class")
    parser.add_argument(
        "--only", nargs="*", choices=[*PLANS, "input", "hanging"], help="fault classes"
    )
    parser.add_argument("--seed", type=int, default=20261129, help="base seed")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--keep", action="store_true", help="keep the trials' work folders")
    parser.add_argument("--trials", type=int, help="at most this many trials per class")
    parser.add_argument("--jobs", type=int, default=4, help="trials run side by side")
    args = parser.parse_args(argv)
    started = time.monotonic()
    counts = dict(QUICK if args.quick else FULL)
    wanted = set(args.only or [*PLANS, "input", "hanging"])
    counts = {k: min(v, args.trials or v) for k, v in counts.items() if k in wanted}
    root = Path(tempfile.mkdtemp(prefix="reliability-"))
    rows = []
    try:
        # the longest classes (dispute games run to a clock) first, so the pool stays full
        order = ("adversary", "blob", "court", "transport", "chain", "crash")
        todo = sorted(plans(counts, args.seed), key=lambda p: order.index(_class_of(p)))
        rows = run_side_by_side(
            todo, lambda p: run_trial(p, root / f"{p.fault}-{p.seed}"), args.jobs
        )
        inputs = bad_inputs(root / "input") if "input" in wanted else None
        # one verifier drawn to twenty units whose blob servers never answer (issue #23)
        hanging = hanging_units.run(root / "hanging") if "hanging" in wanted else None
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    per = summarise(rows)
    report: dict[str, Any] = {
        "what": "fault-injection trials of one job with separate agent processes (issue #10)",
        "base_seed": args.seed,
        "profile": "quick" if args.quick else "full",
        "seeds": {f: [r["plan"]["seed"] for r in rows if r["plan"]["fault"] == f] for f in per},
        "per_fault_class": per,
        "totals": {
            "trials": sum(s["trials"] for s in per.values()),
            "survived": sum(s["survived"] for s in per.values()),
            "duplicate_transactions": sum(s["duplicate_transactions"] for s in per.values()),
            "tokens_lost_by_honest": sum(s["tokens_lost_by_honest"] for s in per.values()),
        },
        "bad_inputs": (
            None
            if inputs is None
            else {k: inputs[k] for k in ("tried", "clear")} | {"cases": inputs["cases"]}
        ),
        "trials": rows,
        "hanging_units": hanging,
        "wall_time_s": round(time.monotonic() - started, 1),
    }
    if wanted == {"hanging"} and args.out.exists():
        # the hanging-units trial alone: the other classes' figures stay those of their last run
        kept = json.loads(args.out.read_text())
        report = kept | {"hanging_units": hanging}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    bad = report["bad_inputs"]
    brief = {k: bad[k] for k in ("tried", "clear")} if bad else None
    print(json.dumps({"per_fault_class": report["per_fault_class"], "bad_inputs": brief,
                      "hanging_units": hanging}, indent=1))  # fmt: skip
    print(f"wrote {args.out} in {report['wall_time_s']} s")
    ok = report["totals"]["duplicate_transactions"] == 0
    ok = ok and report["totals"]["tokens_lost_by_honest"] == 0
    ok = ok and (hanging is None or hanging_units.survived(hanging))
    return 0 if ok else 1


def _interrupt(signum: int, frame: Any) -> None:
    STOP.set()
    raise KeyboardInterrupt


def run_bench(main_fn: Callable[[], int]) -> None:
    """A trial bench's entry point: SIGTERM and Ctrl-C stop every process it started."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        sys.exit(main_fn())
    except KeyboardInterrupt:
        STOP.set()
        print("interrupted; every process the bench started was stopped", file=sys.stderr)
        sys.exit(130)


if __name__ == "__main__":
    run_bench(main)
