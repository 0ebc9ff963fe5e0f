"""The demo on other EVM clients: does `make demo` end the same on Ganache and Hardhat as on
Anvil?

Run: `python -m bench.clients_bench [anvil|ganache|hardhat ...]` (needs build/abi from `make
compile` and node_modules from `npm ci`; a few minutes per client). Hardhat 3's node (its EDR,
a native binding) needs Node 22, which the machine may not have: the first `hardhat` run
installs Node 22 (npm's `node` package) and Hardhat 3 into build/hardhat, inside the checkout
and outside its package.json, and runs Hardhat with that Node. For each client this starts the
client on a free loopback port as a dev chain the demo accepts — chain id 31337 and the dev
mnemonic, so the demo's dev keys hold ether — and runs `python -m scripts.demo --rpc-url URL`
against it (`make demo RPC_URL=URL`). Chain time: both clients automine, and the demo's
`--mine-when-idle` agents mine empty blocks while the job waits on a deadline, so neither needs
a time-travel RPC.

Recorded per client in bench/results/clients.json: the client's version, the demo's exit code,
whether the job completed, who was slashed and how much, the disputes and their winners, the
attestation disputes, duplicate transactions, the gas each party spent and the wall time. The
outcome (not the timings, nor what the chain's randomness decides) is what must match between
clients: `same_outcome` compares them (`comparable`).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agents.core.chain import DEV_MNEMONIC, anvil_binary, free_port

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "results" / "clients.json"
DEMO_REPORT = ROOT / "build" / "demo" / "report.json"
CHAIN_ID = 31337
ACCOUNTS = 20
BALANCE_ETH = 10_000
#: The demo bounds its own waits (registrations, assignment, completion, court); this only
#: stops a demo that hangs past all of them.
DEMO_TIMEOUT_S = 1_200
STARTUP_TIMEOUT_S = 60


@dataclass(frozen=True)
class Client:
    name: str
    command: tuple[str, ...]
    version_command: tuple[str, ...]
    cwd: Path | None = None
    env: dict[str, str] | None = None


#: Hardhat 3 and the Node 22 it needs, installed here by `setup_hardhat` (build/ is ignored).
HARDHAT_DIR = ROOT / "build" / "hardhat"
HARDHAT_PACKAGES = ("node@22.23.3", "hardhat@3.18.0")


def setup_hardhat() -> None:
    """Install Node 22 and Hardhat 3 into HARDHAT_DIR (once): Hardhat's npm install needs Node 22
    on PATH, else its native EDR binding is skipped and `hardhat node` cannot start."""
    if (HARDHAT_DIR / "node_modules" / ".bin" / "hardhat").exists():
        return
    HARDHAT_DIR.mkdir(parents=True, exist_ok=True)
    package = {"name": "vtp-hardhat-client", "private": True, "type": "module"}
    (HARDHAT_DIR / "package.json").write_text(json.dumps(package) + "\n")
    (HARDHAT_DIR / "hardhat.config.js").write_text("export default {};\n")
    npm = ("npm", "install", "--no-audit", "--no-fund")
    subprocess.run([*npm, HARDHAT_PACKAGES[0]], cwd=HARDHAT_DIR, check=True)
    env = hardhat_env()
    subprocess.run([*npm, HARDHAT_PACKAGES[1]], cwd=HARDHAT_DIR, check=True, env=env)


def hardhat_env() -> dict[str, str]:
    """The environment with Node 22 (HARDHAT_DIR's) first on PATH."""
    bin_dir = str(HARDHAT_DIR / "node_modules" / ".bin")
    return {**os.environ, "PATH": bin_dir + os.pathsep + os.environ.get("PATH", "")}


def clients(port: int) -> dict[str, Client]:
    anvil = anvil_binary()
    ganache = str(ROOT / "node_modules" / ".bin" / "ganache")
    return {
        "anvil": Client(
            "anvil",
            (
                anvil,
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--chain-id",
                str(CHAIN_ID),
                "--accounts",
                str(ACCOUNTS),
                "--balance",
                str(BALANCE_ETH),
                "--mnemonic",
                DEV_MNEMONIC,
                "--silent",
            ),  # fmt: skip
            (anvil, "--version"),
        ),
        "ganache": Client(
            "ganache",
            (
                ganache,
                "--server.host",
                "127.0.0.1",
                "--server.port",
                str(port),
                "--chain.chainId",
                str(CHAIN_ID),
                "--wallet.totalAccounts",
                str(ACCOUNTS),
                "--wallet.defaultBalance",
                str(BALANCE_ETH),
                "--wallet.mnemonic",
                DEV_MNEMONIC,
                "--logging.quiet",
            ),  # fmt: skip
            (ganache, "--version"),
        ),
        # Hardhat 3's node: chain id 31337 and, by default, 20 accounts of the dev mnemonic with
        # 10,000 ether each; it automines and never repeats a timestamp
        "hardhat": Client(
            "hardhat",
            (
                str(HARDHAT_DIR / "node_modules" / ".bin" / "hardhat"),
                "node",
                "--hostname",
                "127.0.0.1",
                "--port",
                str(port),
            ),  # fmt: skip
            (str(HARDHAT_DIR / "node_modules" / ".bin" / "hardhat"), "--version"),
            cwd=HARDHAT_DIR,
            env=hardhat_env(),
        ),
    }


def version(client: Client) -> str:
    out = subprocess.run(
        client.version_command,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=client.cwd,
        env=client.env,
    )
    return out.stdout.strip().splitlines()[0] if out.stdout.strip() else "unknown"


def rpc_ready(url: str) -> bool:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "eth_chainId", "params": []})
    request = urllib.request.Request(
        url, data=body.encode(), headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=2) as response:
            return int(json.loads(response.read())["result"], 16) == CHAIN_ID
    except (OSError, ValueError, KeyError):
        return False


@contextlib.contextmanager
def running(client: Client, port: int, log: Path) -> Iterator[str]:
    url = f"http://127.0.0.1:{port}"
    with log.open("wb") as sink:
        proc = subprocess.Popen(
            client.command,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            cwd=client.cwd,
            env=client.env,
        )
        try:
            deadline = time.monotonic() + STARTUP_TIMEOUT_S
            while not rpc_ready(url):
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"{client.name} did not start: see {log}")
                time.sleep(0.5)
            yield url
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def outcome(report: dict[str, Any]) -> dict[str, Any]:
    """What must be the same on every client: how the job ended, who was slashed, who won each
    dispute of the job, whose attestations the court found false.

    Not compared: how many false attestations went to court. The lazy verifier attests on the
    cheater's attempt and on the honest retrain; the court judges only an attempt still
    current (AttestationCourt: `sampledSegments` and the published root are the current
    attempt's), so the first is disputed only when the whistleblower's challenge lands before
    the unit re-opens — a race of block timing (on Anvil it lost: NoSuchSegment, then
    BadStartRoot; on Ganache it won). `attestation_disputes` records the count.
    """
    slashed = {n: o["slashed"] for n, o in report["outcomes"].items() if o["slashed"]}
    return {
        "job_status": report["job"]["status"],
        "test_accuracy": report["job"].get("test_accuracy"),
        "final_state_root": report["job"].get("final_state_root"),
        "attempts": report["job"].get("attempts"),
        "slashed": sorted(slashed),
        "cheater_slashed": slashed.get("solver-cheat", 0),
        "outcomes": {n: o["outcome"] for n, o in report["outcomes"].items()},
        "dispute_winners": [g["winner"] for g in report["disputes"]],
        "false_attesters": sorted(
            {d["verifier"] for d in report["attestation_disputes"] if d["false_attestation"]}
        ),
        "duplicate_transactions": len(report["duplicate_transactions"]),
    }


#: The honest solvers: which of them retrains the re-opened unit is a draw among its claimants.
HONEST_SOLVERS = ("solver-a", "solver-b")


def comparable(outcome: dict[str, Any]) -> dict[str, Any]:
    """An outcome without what the chain's randomness decides: which honest solver was paid
    (the count of paid ones stays)."""
    parties = dict(outcome["outcomes"])
    paid = sum(parties.pop(name) == "paid" for name in HONEST_SOLVERS)
    return {**outcome, "outcomes": parties, "honest_solvers_paid": paid}


def same_outcomes(runs: dict[str, Any]) -> dict[str, bool]:
    """{client: its outcome is Anvil's}, for every client run."""
    reference = runs.get("anvil", {}).get("outcome")
    return {
        name: reference is not None
        and run.get("outcome") is not None
        and comparable(run["outcome"]) == comparable(reference)
        for name, run in runs.items()
    }


def run_client(name: str) -> dict[str, Any]:
    if name == "hardhat":
        setup_hardhat()
    port = free_port()
    client = clients(port)[name]
    log = ROOT / "build" / "bench" / f"{name}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    DEMO_REPORT.unlink(missing_ok=True)
    started = time.monotonic()
    with running(client, port, log) as url:
        demo = subprocess.run(
            [sys.executable, "-m", "scripts.demo", "--rpc-url", url],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=DEMO_TIMEOUT_S,
        )
    result: dict[str, Any] = {
        "client": version(client),
        "command": " ".join([Path(client.command[0]).name, *client.command[1:]]),
        "demo_exit_code": demo.returncode,
        "wall_time_s": round(time.monotonic() - started, 1),
    }
    if demo.returncode != 0 or not DEMO_REPORT.exists():
        result["error"] = (demo.stderr or demo.stdout)[-1_500:]
        return result
    report = json.loads(DEMO_REPORT.read_text())
    result["outcome"] = outcome(report)
    result["disputes"] = report["disputes"]
    result["attestation_disputes"] = report["attestation_disputes"]
    result["gas_used"] = {n: o["gas_used"] for n, o in report["outcomes"].items()}
    result["gas_total"] = sum(result["gas_used"].values())
    result["job_gas_used"] = report["job"].get("gas_used")
    result["demo_wall_time_s"] = report["wall_time_s"]
    result["wall_marks_s"] = report["wall_marks_s"]
    return result


def history_entry(name: str, run: dict[str, Any], same: bool) -> dict[str, Any]:
    """One line of the file's `history`: every run is kept, so that a client's outcome that
    differs only sometimes (a race, a slow node) stays on record after a later run."""
    o = run.get("outcome") or {}
    return {
        "client": name,
        "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "demo_exit_code": run["demo_exit_code"],
        "same_outcome_as_anvil": same,
        "job_status": o.get("job_status"),
        "cheater_slashed": o.get("cheater_slashed"),
        "dispute_winners": o.get("dispute_winners"),
        "disputes": run.get("disputes"),
        "wall_time_s": run["wall_time_s"],
        **({"error": run["error"].strip().splitlines()[-1]} if run.get("error") else {}),
    }


def main(argv: list[str]) -> int:
    names = argv or ["anvil", "ganache"]
    unknown = set(names) - set(clients(0))
    if unknown:
        print(f"error: unknown client {', '.join(sorted(unknown))}", file=sys.stderr)
        return 2
    results = json.loads(OUT.read_text()) if OUT.exists() else {}
    runs = results.setdefault("runs", {})
    for name in names:
        print(f"-- the demo on {name}", flush=True)
        runs[name] = run_client(name)
        r = runs[name]
        print(f"   exit {r['demo_exit_code']} after {r['wall_time_s']} s", flush=True)
    results["same_outcome"] = same_outcomes(runs)
    history = results.setdefault("history", [])
    for name in names:
        history.append(history_entry(name, runs[name], results["same_outcome"][name]))
    OUT.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps({"same_outcome": results["same_outcome"]}))
    failed = [n for n in names if runs[n].get("outcome", {}).get("job_status") != "completed"]
    return 1 if failed or not all(results["same_outcome"].values()) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
