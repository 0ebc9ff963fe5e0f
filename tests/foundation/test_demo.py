"""`make demo`'s entry point: own chain, deploys, exits 0, leaves no Anvil; bad RPC fails fast."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _run_demo(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run(
        [sys.executable, "-m", "scripts.demo", *args],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def _anvil_on_port(port: int) -> bool:
    out = subprocess.run(["pgrep", "-af", "anvil"], capture_output=True, text=True).stdout
    return any(f"--port {port} " in line for line in out.splitlines())


def test_demo_starts_own_chain_deploys_and_stops_it():
    # The full demo (agents and all) is tests/roles/test_demo_e2e.py; here only its chain part.
    proc = _run_demo("--deploy-only", cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    report = json.loads((REPO / "build" / "deployment.json").read_text())
    assert report["private_chain"] is True
    assert report["contracts"]["TestToken"].startswith("0x")
    port = int(report["rpc_url"].rsplit(":", 1)[1])
    time.sleep(0.2)
    assert not _anvil_on_port(port), "demo left its anvil running"


def test_demo_against_unreachable_rpc_fails_fast_with_one_line():
    started = time.monotonic()
    proc = _run_demo("--rpc-url", "http://127.0.0.1:9", cwd=REPO)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: cannot reach RPC http://127.0.0.1:9")
    assert "Traceback" not in proc.stderr + proc.stdout
    assert time.monotonic() - started < 30


def test_demo_rejects_malformed_rpc_url_with_one_line():
    proc = _run_demo("--rpc-url", "localhost:8545", cwd=REPO)
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        "error: unsupported RPC URL 'localhost:8545': expected http:// or https://"
    )
