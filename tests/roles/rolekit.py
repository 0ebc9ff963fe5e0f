"""Helpers for the role tests: a private Anvil (1 s blocks), a deployment with the real dispute
game and short deadlines, funded dev accounts, role processes, and chain-history checks."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from web3 import Web3

from agents.core.chain import AnvilConfig, connect, dev_private_key, local_anvil
from agents.core.deploy import DEFAULT_ABI_DIR, deploy_all, load_artifact
from scripts.demo import Party, fund

REPO = Path(__file__).resolve().parents[2]
SPEC = REPO / "examples" / "digits-mlp.json"


@contextlib.contextmanager
def chain() -> Iterator[tuple[str, Web3]]:
    with local_anvil(AnvilConfig(block_time=1)) as url:
        yield url, connect(url)


def deploy(w3: Web3, manager_config: dict | None = None, clock_budget: int = 120) -> dict:
    # no forced rounds unless a test asks (their outcome depends on the secret and the seed), and
    # then no lazy slash either: verifiers lock the flat verifierLock
    cfg = {
        "claimWindow": 10,
        "verifyWindow": 25,
        "disputeGrace": 10,
        "verifiersPerUnit": 1,
        "forcedErrorBps": 0,
        "lazySlashFactor": 0,
    }
    cfg.update(manager_config or {})
    return deploy_all(
        w3,
        dev_private_key(0),
        DEFAULT_ABI_DIR,
        {
            "dispute_game": True,
            "clock_budget": clock_budget,
            "manager_config": cfg,
            "registry_config": {"unbondingDelay": 60, "heartbeatTtl": 3600},
        },
    )


def contract(w3: Web3, name: str, address: str):
    return w3.eth.contract(address=address, abi=load_artifact(name)["abi"])


def write_spec(path: Path, steps: int, every: int) -> Path:
    obj = json.loads(SPEC.read_text())
    obj["steps"], obj["checkpoint_every"] = steps, every
    path.write_text(json.dumps(obj))
    return path


class Agents:
    """Role processes (own process groups, logs in `run_dir`), all stopped by `stop_all`."""

    def __init__(self, run_dir: Path, url: str, manager: str) -> None:
        self.run_dir, self.url, self.manager = run_dir, url, manager
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
            "--manager",
            self.manager,
            "--poll-interval",
            "0.5",
            "--json-logs",
            "--no-progress",
            "--deployment",  # isolated from build/demo's deployment file
            str(self.run_dir / "no-deployment.json"),
            *p.extra,
            *args,
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
def agents(run_dir: Path, url: str, manager: str) -> Iterator[Agents]:
    a = Agents(run_dir, url, manager)
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


def successful_calls(w3: Web3, sender: str) -> list[tuple[str, str]]:
    """(to, calldata hex) of every successful transaction `sender` sent, in chain order."""
    out = []
    for n in range(w3.eth.block_number + 1):
        for tx in w3.eth.get_block(n, full_transactions=True)["transactions"]:
            if tx["from"] == sender and w3.eth.get_transaction_receipt(tx["hash"])["status"] == 1:
                out.append(((tx["to"] or "").lower(), bytes(tx["input"]).hex()))
    return out


__all__ = ["Party", "fund"]
