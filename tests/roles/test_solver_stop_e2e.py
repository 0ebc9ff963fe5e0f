"""A solver process stopped (SIGTERM) in the middle of a training exits at once: the training
runs in a worker thread that stops at its next step (Solver.close), so the loop sees the signal
and ends. Before, the training ran inside the loop and the process answered SIGTERM only once
the whole unit was trained (a minute here; hours for a real job)."""

from __future__ import annotations

import contextlib
import os
import signal
import time

import pytest
import rolekit as rk

pytestmark = pytest.mark.timeout(300)


def test_solver_stopped_in_training_exits_promptly(tmp_path):
    # 80,000 steps: about a minute of training here, within the fit check at --compute-time 900
    spec = rk.write_spec(tmp_path / "spec.json", steps=80_000, every=800)
    submitter = rk.Party("submitter", "submitter", 1)
    solver = rk.Party("solver", "solver", 2, ["--stake", "200"])
    with rk.chain() as (url, w3):
        addrs = rk.deploy(w3)
        rk.fund(w3, addrs["Token"], rk.dev_private_key(0), [submitter, solver])
        registry = rk.contract(w3, "NodeRegistry", addrs["NodeRegistry"])
        with rk.agents(tmp_path, url, addrs["JobManager"]) as ag, rk.Warp(url, addrs, claimants=1):
            ag.start(solver)
            rk.wait_registered(registry, ag, [solver])
            ag.start(submitter, "--spec", str(spec), "--claim-window", "8", "--compute-time", "900")
            blobs = tmp_path / "blobs"
            # the spec is one blob; the 2nd and 3rd are the first two checkpoints
            rk.wait_for("training", lambda: rk.count_files(blobs) >= 3, 120, ag, ("solver",))
            proc = ag.procs["solver"]
            stopped_at = time.monotonic()
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=120)
            took = time.monotonic() - stopped_at
            assert took < 10, f"the solver took {took:.0f} s to stop"
            messages = ag.messages("solver")
            trained = any(m.startswith("trained unit") for m in messages)
            assert not trained, "the training ended before the stop: make it longer"
            assert proc.returncode == 0, ag.log("solver")[-2000:]
            assert messages[-1] == "stopped"
