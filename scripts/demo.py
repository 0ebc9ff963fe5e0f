"""`make demo`: the protocol end to end on a local chain, every role a separate OS process.

Starts a private automining Anvil (or uses --rpc-url, which must be a dev chain: the demo's
accounts are Anvil's public dev keys), deploys every contract with the real dispute game as
arbiter and short demo deadlines, mints TestTokens to the agents, then runs one submitter, three
solvers (one cheating), two verifiers (one lazy) and one whistleblower as `python -m agents`
processes. The digits MLP job (examples/digits-mlp.json) is claimed first by the cheater alone;
the honest solvers join once it is assigned (so the demo always shows the cheat). The honest
verifier replays, challenges, and wins the dispute game; the cheater is slashed, the unit
re-opens, an honest solver trains it, both verifiers attest and the job completes; the
whistleblower re-checks every attestation and reports the lazy verifier's as false. The demo
prints a summary table and writes build/demo/report.json, build/demo/demo.png (scripts/plots.py:
loss curve, timeline, gas per phase) and the agents' logs under build/demo/run/. Every process
it started is stopped, also on failure or Ctrl-C.

Exit codes: 0 success, 1 the job did not complete, 2 a user error (unreachable RPC, missing
build, not a dev chain) printed as one line.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from web3 import Web3

from agents.core.chain import AnvilConfig, ChainUnavailable, connect, dev_private_key, local_anvil
from agents.core.deploy import DEFAULT_ABI_DIR, DeploymentError, deploy_all, load_artifact
from agents.core.enums import UnitStatus
from agents.core.keys import DEV_CHAIN_IDS
from tools.devnet import JOB_PAY, DevnetError, Party, audit_sends, fund

REPO = Path(__file__).resolve().parents[1]
# Absolute: the agents run in the checkout (cwd=REPO) while the demo may be started elsewhere,
# and both must mean the same folders.
REPORT_DIR = REPO / "build" / "demo"
# The one default deployment file (agents/roles/config.py DEFAULT_DEPLOYMENT): every role and
# `job status|fetch` read it unless --deployment names another.
DEPLOYMENT = REPO / "build" / "deployment.json"
SPEC = REPO / "examples" / "digits-mlp.json"
TOKEN = 10**18
#: The cheat: PROTOCOL §7.8's worked example (bit 30 of element 5 of node 2 at step 217).
CHEAT = "element:step=217,node=2,element=5,mask=0x40000000"

#: Demo deadlines (seconds of chain time).
REGISTRY_CONFIG = {"unbondingDelay": 60, "heartbeatTtl": 3600}
MANAGER_CONFIG = {
    "claimWindow": 10,
    # the honest verifier replays all ten segments (--replay-all), about 6 s on an idle core; a
    # loaded CI machine (three test groups on 2 cores) made that longer than a 20 s window, the
    # verifier stayed silent and the cheat was paid
    "verifyWindow": 45,
    # drawn verifiers open their seals at once when all sealed; this bounds the wait for one
    # that sealed and went silent
    "revealWindow": 15,
    "disputeGrace": 10,
    "verifiersPerUnit": 2,
    "segmentsPerVerifier": 2,
    # no forced rounds, so the demo's outcome is fixed (tests/roles/test_forced_e2e.py runs one);
    # without them the lazy slash has no role: the verifiers lock the flat verifierLock
    "forcedErrorBps": 0,
    "lazySlashFactor": 0,
}
CLOCK_BUDGET = 120
#: The attestation court's game: a lazy verifier has no data to defend with and times out.
COURT_CLOCK_BUDGET = 15
#: The court's bond floor, under the default 10: a challenge's bond (`bondOf`, half the 20-token
#: penalty = 10) is then the scaled one, not the floor, so the whistleblower must quote it.
COURT = {"bond": 5 * TOKEN}


PARTIES = [
    Party("submitter", "submitter", 1, list(JOB_PAY)),
    Party("solver-cheat", "solver", 2, ["--stake", "100", "--cheat", CHEAT]),
    Party("solver-a", "solver", 3, ["--stake", "200"]),
    Party("solver-b", "solver", 4, ["--stake", "200"]),
    Party("verifier", "verifier", 5, ["--stake", "100", "--replay-all"]),
    Party("verifier-lazy", "verifier", 6, ["--stake", "100", "--lazy"]),
    Party("whistleblower", "whistleblower", 7, ["--stake", "20", "--mine-when-idle"]),
]


class DemoError(DevnetError):
    """The demo did not reach its end (a step timed out, a process died)."""


@contextlib.contextmanager
def chain_url(rpc_url: str | None) -> Iterator[tuple[str, bool]]:
    """Yield (url, is_private_dev_chain): the given RPC, or a private Anvil we stop afterwards."""
    if rpc_url:
        yield rpc_url, False
        return
    # Automine: a block per transaction; the submitter (--mine-when-idle) mines an empty block
    # whenever the job waits on chain time or on a seed block, so deadlines pass promptly.
    with local_anvil(AnvilConfig()) as url:
        yield url, True


class Processes:
    """The agent processes, each in its own process group; `stop_all` ends every one."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir.resolve()
        self.procs: dict[str, subprocess.Popen] = {}
        self.logs: dict[str, Any] = {}

    def start(self, p: Party, url: str, manager: str, *args: str) -> None:
        log = open(self.run_dir / f"{p.name}.log", "ab")  # noqa: SIM115 - closed in stop_all
        env = dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1")
        self.logs[p.name] = log
        self.procs[p.name] = subprocess.Popen(
            self.command(p, url, manager, *args),
            stdout=log,
            stderr=log,
            cwd=REPO,
            env=env,
            start_new_session=True,
        )

    def command(self, p: Party, url: str, manager: str, *args: str) -> list[str]:
        """The agent's command line; it runs in the checkout, so its paths are absolute."""
        return [
            sys.executable,
            "-m",
            "agents",
            p.role,
            "--rpc-url",
            url,
            "--key",
            f"dev:{p.key_index}",
            "--data-dir",
            str(self.run_dir / p.name),
            "--blob-url",
            str(self.run_dir / "blobs"),
            "--allow-local-locators",  # the agents share that folder: locators name it
            "--manager",
            manager,
            "--poll-interval",
            "0.5",
            "--json-logs",
            "--no-progress",
            *p.extra,
            *args,
        ]

    def check_alive(self) -> None:
        for name, proc in self.procs.items():
            if proc.poll() is not None and name != "submitter":
                tail = (self.run_dir / f"{name}.log").read_text()[-600:]
                raise DemoError(f"{name} exited with code {proc.returncode}: {tail}")

    def stop_all(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + 8
        for proc in self.procs.values():
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=5)
        for log in self.logs.values():
            log.close()


def wait_for(what: str, cond, timeout: float, procs: Processes | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if procs is not None:
            procs.check_alive()
        if cond():
            return
        time.sleep(0.5)
    raise DemoError(f"timed out after {timeout:.0f} s waiting for {what}")


def deploy_params(
    manager_config: dict | None = None, clock_budget: int = CLOCK_BUDGET
) -> dict[str, Any]:
    """The demo's deployment: the real dispute game and the attestation court, short deadlines
    (`manager_config` overrides some of MANAGER_CONFIG's)."""
    return {
        "attestation_court": COURT,
        "court_clock_budget": COURT_CLOCK_BUDGET,
        "dispute_game": True,
        "clock_budget": clock_budget,
        "registry_config": REGISTRY_CONFIG,
        "manager_config": {**MANAGER_CONFIG, **(manager_config or {})},
    }


#: A demo's scenario once the contracts are deployed and the parties funded: (w3, url,
#: addresses, wall-clock start, wall marks, first block) -> the report's job part.
Play = Callable[[Web3, str, dict, float, dict, int], dict]


def first_unit_assigned(manager) -> bool:
    """Job 1's first unit has been assigned (or gone further): the cheater holds it."""
    if manager.functions.jobCount().call() < 1:
        return False
    return manager.functions.getUnit(1 << 32).call()[0] >= UnitStatus.ASSIGNED


def run(
    rpc_url: str | None,
    deployer_key: str | None,
    deploy_only: bool = False,
    params: dict[str, Any] | None = None,
    parties: list[Party] | None = None,
    deployment: Path = DEPLOYMENT,
    play_fn: Play | None = None,
) -> dict:
    """Deploy (writing `deployment`, which the roles and `job status|fetch` read), fund
    `parties` and run `play_fn` (by default the MLP demo's)."""
    started = time.monotonic()
    marks: dict[str, float] = {}
    with chain_url(rpc_url) as (url, private_chain):
        w3 = connect(url)
        chain_id = w3.eth.chain_id
        if not deploy_only and chain_id not in DEV_CHAIN_IDS:
            raise DemoError(
                f"chain id {chain_id} is not a dev chain: the demo uses Anvil's "
                "public dev keys; use a local Anvil"
            )
        key = deployer_key or dev_private_key(0)
        addresses = deploy_all(w3, key, DEFAULT_ABI_DIR, params or deploy_params())
        first_block = w3.eth.block_number
        report: dict[str, Any] = {
            "rpc_url": url,
            "private_chain": private_chain,
            "chain_id": chain_id,
            "block": first_block,
            "contracts": addresses,
        }
        deployment.parent.mkdir(parents=True, exist_ok=True)
        deployment.write_text(json.dumps(report, indent=2) + "\n")
        marks["deployed"] = time.monotonic() - started
        if deploy_only:
            report["wall_time_s"] = round(time.monotonic() - started, 2)
            return report
        fund(w3, addresses["Token"], key, parties or PARTIES)
        marks["funded"] = time.monotonic() - started
        report.update((play_fn or play)(w3, url, addresses, started, marks, first_block))
    report["wall_time_s"] = round(time.monotonic() - started, 2)
    return report


def play(
    w3: Web3,
    url: str,
    addresses: dict[str, str],
    started: float,
    marks: dict[str, float],
    first_block: int,
) -> dict:
    run_dir = REPORT_DIR / "run"
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    manager_addr = addresses["JobManager"]
    manager = w3.eth.contract(address=manager_addr, abi=load_artifact("JobManager")["abi"])
    registry = w3.eth.contract(
        address=addresses["NodeRegistry"], abi=load_artifact("NodeRegistry")["abi"]
    )
    by_name = {p.name: p for p in PARTIES}
    procs = Processes(run_dir)
    result_file = run_dir / "submitter-result.json"
    try:
        # 1. the cheater, the verifiers and the whistleblower register and stake
        for name in ("solver-cheat", "verifier", "verifier-lazy", "whistleblower"):
            procs.start(by_name[name], url, manager_addr)
        wait_for(
            "registrations",
            lambda: all(
                registry.functions.roleOf(by_name[n].address).call() != 0
                for n in ("solver-cheat", "verifier", "verifier-lazy", "whistleblower")
            ),
            90,
            procs,
        )
        marks["registered"] = time.monotonic() - started
        # 2. the submitter posts the job; the cheater is the only solver online
        procs.start(
            by_name["submitter"],
            url,
            manager_addr,
            "--spec",
            str(SPEC),
            "--claim-window",
            "14",
            "--compute-time",
            "120",
            "--out",
            str(result_file),
            "--mine-when-idle",
        )
        wait_for(
            "the first assignment",
            lambda: first_unit_assigned(manager),
            90,
            procs,
        )
        marks["assigned"] = time.monotonic() - started
        # 3. the honest solvers join
        for name in ("solver-a", "solver-b"):
            procs.start(by_name[name], url, manager_addr)
        # 4. run until the job completes and the honest parties withdrew what they earned
        wait_for("job completion", lambda: procs.procs["submitter"].poll() is not None, 240, procs)
        if procs.procs["submitter"].returncode != 0:
            tail = (run_dir / "submitter.log").read_text()[-600:]
            raise DemoError(
                f"submitter exited with code {procs.procs['submitter'].returncode}: {tail}"
            )
        marks["completed"] = time.monotonic() - started
        court = w3.eth.contract(
            address=addresses["AttestationCourt"], abi=load_artifact("AttestationCourt")["abi"]
        )

        def court_settled() -> bool:
            opened = court.events.AttestationChallenged().get_logs(from_block=first_block)
            ruled = court.events.AttestationRuled().get_logs(from_block=first_block)
            return len(opened) >= 1 and len(ruled) == len(opened)

        # the whistleblower disputes the lazy verifier's false attestation in the court
        with contextlib.suppress(DemoError):
            wait_for("the attestation dispute", court_settled, 90, procs)
        marks["attestation_ruled"] = time.monotonic() - started
        with contextlib.suppress(DemoError):
            wait_for(
                "withdrawals",
                lambda: all(
                    manager.functions.credits(p.address).call() == 0
                    and court.functions.credits(p.address).call() == 0
                    for p in PARTIES
                ),
                20,
            )
        marks["withdrawn"] = time.monotonic() - started
    finally:
        procs.stop_all()
    result = json.loads(result_file.read_text())
    return {"job": result, **collect(w3, addresses, first_block, run_dir, marks)}


# --- the report, from the chain ------------------------------------------------------------


def _events(contract, name: str, first: int) -> list:
    return list(getattr(contract.events, name)().get_logs(from_block=first, to_block="latest"))


def collect(
    w3: Web3,
    addresses: dict[str, str],
    first: int,
    run_dir: Path,
    marks: dict[str, float],
    parties: list[Party] | None = None,
) -> dict:
    parties = parties or PARTIES
    manager = w3.eth.contract(
        address=addresses["JobManager"], abi=load_artifact("JobManager")["abi"]
    )
    registry = w3.eth.contract(
        address=addresses["NodeRegistry"], abi=load_artifact("NodeRegistry")["abi"]
    )
    game = w3.eth.contract(
        address=addresses["DisputeGame"], abi=load_artifact("DisputeGame")["abi"]
    )
    names = {p.address: p.name for p in parties}
    # gas and transactions per address, from every block of the run
    gas: dict[str, int] = {}
    txs: dict[str, int] = {}
    spent: list[tuple[int, int]] = []  # (block timestamp, gas) of every transaction
    for n in range(first, w3.eth.block_number + 1):
        block = w3.eth.get_block(n, full_transactions=True)
        for tx in block["transactions"]:
            sender = tx["from"]
            rc = w3.eth.get_transaction_receipt(tx["hash"])
            gas[sender] = gas.get(sender, 0) + int(rc["gasUsed"])
            txs[sender] = txs.get(sender, 0) + 1
            spent.append((int(block["timestamp"]), int(rc["gasUsed"])))
    duplicates = audit_sends(w3, first, {p.address: run_dir / p.name for p in parties})
    slashed: dict[str, int] = {}
    for ev in _events(registry, "NodeSlashed", first):
        a = ev["args"]
        slashed[a["node"]] = slashed.get(a["node"], 0) + int(a["amount"])
    court = w3.eth.contract(
        address=addresses["AttestationCourt"], abi=load_artifact("AttestationCourt")["abi"]
    )
    paid: dict[str, int] = {}
    for ev in _events(manager, "Withdrawn", first) + _events(court, "Withdrawn", first):
        a = ev["args"]
        paid[a["account"]] = paid.get(a["account"], 0) + int(a["amount"])
    # A solver that finalizes its own unit is paid in that transaction (no credit, no Withdrawn)
    for ev in _events(manager, "UnitFinalized", first):
        a = ev["args"]
        if w3.eth.get_transaction(ev["transactionHash"])["from"] == a["solver"]:
            paid[a["solver"]] = paid.get(a["solver"], 0) + int(a["solverPay"])
    attestation_disputes = []
    for ev in _events(court, "AttestationChallenged", first):
        a = ev["args"]
        ruled = [
            r
            for r in _events(court, "AttestationRuled", first)
            if r["args"]["gameId"] == a["gameId"]
        ]
        attestation_disputes.append(
            {
                "game_id": int(a["gameId"]),
                "verifier": names.get(a["verifier"], a["verifier"]),
                "whistleblower": names.get(a["whistleblower"], a["whistleblower"]),
                "segment": int(a["segment"]),
                "penalty": int(a["penalty"]) / TOKEN,
                "bond": int(a["bond"]) / TOKEN,
                "false_attestation": bool(ruled[0]["args"]["falseAttestation"]) if ruled else None,
            }
        )
    credited: dict[str, int] = {}
    for ev in _events(manager, "Credited", first):
        a = ev["args"]
        credited[a["account"]] = credited.get(a["account"], 0) + int(a["amount"])
    games = []
    for ev in _events(game, "GameResolved", first):
        a = ev["args"]
        claim = game.functions.claimOf(int(a["gameId"])).call()
        games.append(
            {
                "game_id": int(a["gameId"]),
                "challenger_won": bool(a["challengerWon"]),
                "by_timeout": bool(a["byTimeout"]),
                "defender": names.get(claim[1], claim[1]),
                "challenger": names.get(claim[2], claim[2]),
                "winner": names.get(claim[2] if a["challengerWon"] else claim[1]),
            }
        )
    actions: dict[str, list[str]] = {p.name: [] for p in parties}
    happened: list[tuple[int, int, str, str]] = []
    for ev_name, who, what in (
        ("UnitClaimed", "solver", "claimed"),
        ("UnitAssigned", "solver", "assigned"),
        ("CheckpointsCommitted", "solver", "committed"),
        ("AttestationSealed", "verifier", "sealed"),
        ("Attested", "verifier", "attested"),
        ("ChallengeOpened", "challenger", "challenged"),
    ):
        for ev in _events(manager, ev_name, first):
            n = names.get(ev["args"][who])
            if n:
                happened.append((ev["blockNumber"], ev["logIndex"], n, what))
    for ev in _events(court, "AttestationChallenged", first):
        n = names.get(ev["args"]["whistleblower"])
        if n:
            happened.append((ev["blockNumber"], ev["logIndex"], n, "disputed attestation"))
    for _, _, n, what in sorted(happened):
        if not actions[n] or actions[n][-1] != what:
            actions[n].append(what)
    false_attest = _false_attestations(run_dir / "whistleblower.log", names)
    outcomes = {}
    for p in parties:
        outcomes[p.name] = {
            "address": p.address,
            "role": p.role,
            "actions": actions[p.name],
            "paid": paid.get(p.address, 0) / TOKEN,
            "credited": credited.get(p.address, 0) / TOKEN,
            "slashed": slashed.get(p.address, 0) / TOKEN,
            "gas_used": gas.get(p.address, 0),
            "transactions": txs.get(p.address, 0),
            "reported_false_attestation": p.name in false_attest,
        }
        o = outcomes[p.name]
        o["outcome"] = "slashed" if o["slashed"] else ("paid" if o["paid"] else "-")
    timeline = _timeline(w3, manager, game, first)
    posted = _events(manager, "JobPosted", first)
    if posted:
        t0 = int(w3.eth.get_block(posted[0]["blockNumber"])["timestamp"])
        timeline = phase_gas(timeline, [(ts - t0, g) for ts, g in spent])
    return {
        "outcomes": outcomes,
        "disputes": games,
        "dispute_count": len(games),
        "attestation_disputes": attestation_disputes,
        "duplicate_transactions": duplicates,
        "timeline": timeline,
        "wall_marks_s": {k: round(v, 2) for k, v in marks.items()},
    }


def _false_attestations(log: Path, names: dict[str, str]) -> set[str]:
    out = set()
    if not log.exists():
        return out
    for line in log.read_text().splitlines():
        with contextlib.suppress(ValueError):
            msg = json.loads(line).get("msg", "")
            if msg.startswith("FALSE ATTESTATION by verifier "):
                out.add(names.get(msg.split()[4], msg.split()[4]))
    return out


def _timeline(w3: Web3, manager, game, first: int) -> list[dict]:
    """Chain-time phases: (name, start s, end s) relative to the job's posting."""

    def ts(ev) -> int:
        return int(w3.eth.get_block(ev["blockNumber"])["timestamp"])

    def all_ts(contract, name: str) -> list[int]:
        return [ts(e) for e in _events(contract, name, first)]

    posted = all_ts(manager, "JobPosted")
    if not posted:
        return []
    t0 = posted[0]
    assigned = all_ts(manager, "UnitAssigned")
    committed = all_ts(manager, "CheckpointsCommitted")
    drawn = all_ts(manager, "VerifiersDrawn")
    opened = all_ts(manager, "ChallengeOpened")
    resolved = all_ts(game, "GameResolved")
    finalized = all_ts(manager, "UnitFinalized")
    reopened = all_ts(manager, "UnitOpened")
    phases = []
    # attempt 0's claim window opens with the job (JobPosted), attempt i's at reopened[i - 1]
    starts = [t0, *reopened]
    for i, a in enumerate(assigned):
        phases.append(("claim", starts[i] if i < len(starts) else t0, a))
        if i < len(committed):
            phases.append(("train", a, committed[i]))
        if i < len(drawn):
            end = opened[i] if i < len(opened) else (finalized[0] if finalized else drawn[i])
            phases.append(("verify", committed[i], end))
        if i < len(opened) and i < len(resolved):
            phases.append(("dispute", opened[i], resolved[i]))
    return [{"phase": n, "start_s": s - t0, "end_s": e - t0} for n, s, e in phases]


def phase_gas(timeline: list[dict], spent: list[tuple[int, int]]) -> list[dict]:
    """The timeline's phases, each with the gas of the transactions mined in it (`spent`: chain
    time after posting, gas); a transaction at a boundary counts in the first phase holding it,
    one outside every phase (registration, staking, withdrawals) in none."""
    out = [dict(ph, gas=0) for ph in timeline]
    for t, g in spent:
        for ph in out:
            if ph["start_s"] <= t <= ph["end_s"]:
                ph["gas"] += g
                break
    return out


# --- output ----------------------------------------------------------------------------------


def summary_table(report: dict) -> str:
    lines = []
    job = report["job"]
    head = (
        f"{'party':<14} {'role':<13} {'did':<34} {'outcome':<8} "
        f"{'paid':>7} {'slashed':>8} {'gas':>10}"
    )
    lines += [head, "-" * len(head)]
    for name, o in report["outcomes"].items():
        did = ",".join(o["actions"]) or "-"
        if o["reported_false_attestation"]:
            did += " (reported false)"
        lines.append(
            f"{name:<14} {o['role']:<13} {did[:34]:<34} {o['outcome']:<8} "
            f"{o['paid']:>7.2f} {o['slashed']:>8.2f} {o['gas_used']:>10,}"
        )
    lines.append("")
    for g in report["disputes"]:
        lines.append(
            f"dispute game {g['game_id']}: {g['challenger']} vs {g['defender']} -> "
            f"winner {g['winner']}{' (timeout)' if g['by_timeout'] else ''}"
        )
    for d in report.get("attestation_disputes", []):
        verdict = {True: "false -> verifier slashed", False: "stood", None: "unresolved"}
        lines.append(
            f"attestation dispute (court game {d['game_id']}): {d['whistleblower']} vs "
            f"{d['verifier']}, segment {d['segment']}, penalty {d['penalty']:g}, bond "
            f"{d['bond']:g}: {verdict[d['false_attestation']]}"
        )
    lines.append("")
    lines.append("phase (chain time after posting)   start     end")
    for ph in report["timeline"]:
        lines.append(f"  {ph['phase']:<32} {ph['start_s']:>6}s {ph['end_s']:>6}s")
    lines.append("")
    lines.append(job_line(job))
    lines.append(
        f"transactions sent twice: {len(report['duplicate_transactions'])}; "
        f"wall time {report['wall_time_s']} s"
    )
    return "\n".join(lines)


def job_line(job: dict) -> str:
    """The job's outcome in one line, with its held-out metric (accuracy or validation loss)."""
    acc, val = job.get("test_accuracy"), job.get("val_loss")
    metric = (f"test accuracy {acc * 100:.2f}%" if acc is not None else
              f"val loss {val:.4f}" if val is not None else "no held-out metric")  # fmt: skip
    return (
        f"job {job['job_id']}: {job['status']} after {job['attempts']} attempt(s); "
        f"final state root {job['final_state_root'][:18]}…; {metric}"
    )


def write_outputs(report: dict) -> None:
    from scripts.plots import demo_figure

    REPORT_DIR.mkdir(parents=True, exist_ok=True)
    (REPORT_DIR / "report.json").write_text(json.dumps(report, indent=2) + "\n")
    k = 40
    with contextlib.suppress(ValueError, OSError):
        k = json.loads(SPEC.read_text())["checkpoint_every"]
    demo_figure(report, REPORT_DIR / "demo.png", k)


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def guarded(fn: Callable[[], dict]) -> dict | int:
    """`fn`'s report, or the exit code once its failure was said in one line (2: a user error,
    1: the demo failed, 130: interrupted); every process it started is stopped either way."""
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        return fn()
    except (ChainUnavailable, FileNotFoundError, DeploymentError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except DevnetError as exc:
        print(f"error: demo failed: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted; every demo process was stopped", file=sys.stderr)
        return 130


def print_contracts(report: dict) -> None:
    print(f"chain {report['chain_id']}; contracts:")
    for name, address in report["contracts"].items():
        print(f"  {name:<24} {address}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make demo", description=__doc__.splitlines()[0])
    parser.add_argument("--rpc-url", help="use this dev chain instead of starting a private Anvil")
    parser.add_argument("--key", help="deployer private key (default: Anvil dev account 0)")
    parser.add_argument(
        "--deploy-only",
        action="store_true",
        help="only deploy and write build/deployment.json",
    )
    args = parser.parse_args(argv)
    report = guarded(lambda: run(args.rpc_url, args.key, args.deploy_only))
    if isinstance(report, int):
        return report
    print_contracts(report)
    if args.deploy_only:
        print(f"wrote {DEPLOYMENT} in {report['wall_time_s']} s")
        return 0
    print()
    print(summary_table(report))
    write_outputs(report)
    print(f"wrote {REPORT_DIR / 'report.json'} and {REPORT_DIR / 'demo.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
