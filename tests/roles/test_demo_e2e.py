"""`make demo` end to end: every role a separate process on a private Anvil; the cheater is
caught by the dispute game and slashed, the lazy verifier is caught by the whistleblower through
the attestation court and slashed, the honest parties are paid, the job completes with the
engine's accuracy, the report and plot are written and no process is left behind."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
#: Hang guards only (the demo's speed is not asserted): about 2 minutes idle, 3 under load.
pytestmark = pytest.mark.timeout(600)


def _leftovers(marker: str) -> list[str]:
    out = subprocess.run(["pgrep", "-af", marker], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if "pgrep" not in line]


def test_make_demo_runs_the_protocol_end_to_end():
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.run(
        [sys.executable, "-m", "scripts.demo"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=560,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads((REPO / "build" / "demo" / "report.json").read_text())
    run_dir = str(REPO / "build" / "demo" / "run")
    time.sleep(0.5)
    assert _leftovers(run_dir) == [], "demo left agent processes running"
    port = report["rpc_url"].rsplit(":", 1)[1]
    assert _leftovers(f"--port {port} ") == [], "demo left its anvil running"

    job = report["job"]
    assert job["status"] == "completed"
    assert job["attempts"] == 2
    assert job["test_accuracy"] > 0.9
    assert job["final_state_root"].startswith("0x") and len(job["final_state_root"]) == 66
    o = report["outcomes"]
    assert o["solver-cheat"]["outcome"] == "slashed" and o["solver-cheat"]["slashed"] == 100
    assert o["solver-cheat"]["paid"] == 0
    assert report["dispute_count"] == 1
    (game,) = report["disputes"]
    assert game["defender"] == "solver-cheat" and game["winner"] == game["challenger"]
    assert game["by_timeout"] is False
    honest_solvers = [o["solver-a"], o["solver-b"]]
    assert sorted(s["paid"] for s in honest_solvers) == [0, 88]  # reward - fee - 2% tax
    assert o["verifier"]["paid"] > 0 and o["verifier"]["slashed"] == 0
    assert o["submitter"]["slashed"] == 0
    # the whistleblower re-checked the lazy verifier's attestations, found them false, disputed
    # them in the attestation court and won: the lazy verifier is slashed, the whistleblower paid
    assert o["verifier-lazy"]["reported_false_attestation"] is True
    assert o["verifier"]["reported_false_attestation"] is False
    assert report["attestation_disputes"]
    for d in report["attestation_disputes"]:
        assert d["verifier"] == "verifier-lazy" and d["whistleblower"] == "whistleblower"
        assert d["false_attestation"] is True
    assert o["verifier-lazy"]["outcome"] == "slashed"
    assert o["verifier-lazy"]["slashed"] == 20 * len(report["attestation_disputes"])
    for d in report["attestation_disputes"]:
        # the court's 20-token penalty floor: the bond is half of it, above the demo's 5-token
        # bond floor (a whistleblower paying the flat floor could not open the case)
        assert (d["penalty"], d["bond"]) == (20, 10)
    assert o["whistleblower"]["paid"] == 20 * len(report["attestation_disputes"])  # bond + half
    assert o["verifier"]["slashed"] == 0
    assert report["duplicate_transactions"] == []
    assert report["timeline"] and report["wall_time_s"] > 0
    png = (REPO / "build" / "demo" / "demo.png").read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 1000
    assert "test accuracy" in proc.stdout and "dispute game 1" in proc.stdout
