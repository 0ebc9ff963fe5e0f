"""Seeded kill -9 trials of a decomposed version-3 job (issue #40's "Faults"; `make reliability`).

Each trial runs the char GPT of examples/models/char_gpt.py as a 2-round x 2-shard version-3 job
(2 local steps per unit, outer Nesterov; the spec of tests/roles/test_model_decomposed_e2e.py)
through the RoundManager on a private Anvil, every role a `python -m agents` process: two
solvers, a verifier, the aggregator and the submitter, all honest. One party is killed -9 at a
seeded point (`POINTS`) a seeded delay after that point is seen on chain, and restarted from its
data folder after a seeded down time (as bench/aggregator_crash_bench.py does for version 2):

- `aggregating`: the aggregator, once round 0's two units are final (its aggregate is due: it
  is computing H_1 or sending it);
- `committed`: the aggregator, once its round-0 aggregate is committed (in its challenge window);
- `solver`: solver-0, once a unit was assigned to it and before its checkpoints are committed
  (it is training the unit).

A trial survives when the job completed with the one-process root of `python -m agents train
--spec` (bit for bit), both rounds were finalized with the aggregator's aggregates, it withdrew its
round pay, no party sent a transaction twice (the intent audit of tools/devnet.audit_sends) and no
honest party lost a token (balance + credits + stake, slashes counted).

Usage: python -m bench.decomposed_faults_bench [--seed N] [--out PATH] [--jobs N] [--keep]
Writes bench/results/decomposed_faults.json (seeds, per-trial rows, totals, wall time).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "roles"))  # rolekit: the one "job with N processes" kit

import rolekit as rk  # noqa: E402
from web3 import Web3  # noqa: E402

from agents.core.deploy import DEFAULT_ABI_DIR, deploy_all  # noqa: E402
from bench.aggregator_crash_bench import (  # noqa: E402
    Watch,
    _read,
    _until,
    kill9,
    wait_for_submitter,
)
from bench.reliability_bench import run_bench, run_side_by_side  # noqa: E402
from scripts.demo import Processes  # noqa: E402
from scripts.demo_decomposed_gpt import _cli  # noqa: E402
from tools.devnet import Party, audit_sends, fund  # noqa: E402

OUT = REPO / "bench" / "results" / "decomposed_faults.json"
MODEL = REPO / "examples" / "models" / "char_gpt.py"
ROUNDS, SHARDS, K_LOCAL = 2, 2, 2
TOKEN = 10**18
POINTS = ("aggregating", "committed", "solver")
#: Seconds after its point is seen on chain the kill may land (seeded, uniform from 0): the
#: solver's two local steps and its commit take a few seconds, so its kill lands mid-unit.
MAX_DELAY_S = {"aggregating": 3.0, "committed": 3.0, "solver": 1.5}

SUBMITTER = Party("submitter", "submitter", 1)
SOLVERS = [Party(f"solver-{i}", "solver", 2 + i, ["--stake", "200"]) for i in range(SHARDS)]
VERIFIER = Party("verifier", "verifier", 5, ["--stake", "100"])
AGGREGATOR = Party("aggregator", "aggregator", 6, ["--stake", "200"])
CAST = [SUBMITTER, *SOLVERS, VERIFIER, AGGREGATOR]
TARGET = {"aggregating": AGGREGATOR, "committed": AGGREGATOR, "solver": SOLVERS[0]}
DEPLOY_PARAMS = {
    "dispute_game": True,
    "clock_budget": 600,
    "round_manager": True,
    "round_config": {"aggregationWindow": 30, "aggregatorBond": 50 * TOKEN},
    "manager_config": {
        "claimWindow": 8,
        "verifyWindow": 120,
        "revealWindow": 20,
        "disputeGrace": 10,
        "verifiersPerUnit": 1,
        "segmentsPerVerifier": 2,
        "forcedErrorBps": 0,
        "lazySlashFactor": 0,
    },
    "registry_config": {"unbondingDelay": 60, "heartbeatTtl": 3600},
}


@dataclass(frozen=True)
class Plan:
    """One trial: whom the kill strikes, where, how long after that point, how long it is down."""

    seed: int
    point: str
    delay_s: float
    down_s: float

    @property
    def target(self) -> Party:
        return TARGET[self.point]

    def row(self) -> dict[str, Any]:
        return {
            "seed": self.seed,
            "point": self.point,
            "target": self.target.name,
            "delay_s": round(self.delay_s, 2),
            "down_s": round(self.down_s, 2),
        }


def plan(seed: int, index: int) -> Plan:
    rng = random.Random(seed)
    point = POINTS[index % len(POINTS)]
    return Plan(seed, point, rng.uniform(0.0, MAX_DELAY_S[point]), rng.uniform(0.5, 3.0))


def build(folder: Path) -> tuple[Path, str]:
    """The spec and the final state root of `train --spec` of it (the one-process run)."""
    spec = folder / f"gpt-{ROUNDS}x{SHARDS}.json"
    _cli(["job", "build", "--model", f"{MODEL}:make_model", "--dataset",
          "shakespeare-char/train", "--optimizer", "adamw", "--lr", "0.003", "--batch", "2",
          "--steps", str(ROUNDS * K_LOCAL), "--checkpoint-every", "1", "--seed", "5",
          "--rounds", str(ROUNDS), "--shards", str(SHARDS), "--outer", "nesterov",
          "--out", str(spec)])  # fmt: skip
    local = json.loads(_cli(["train", "--spec", str(spec), "--json"]).splitlines()[-1])
    return spec, local["final_root"]


def reached(watch: Watch, p: Plan, w3: Web3) -> bool:
    if p.point == "aggregating":  # round 0's two units are final: its aggregate is due
        return len(watch.events(watch.manager, "UnitFinalized")) >= SHARDS
    if p.point == "committed":
        return bool(watch.events(watch.rm, "AggregateCommitted", aggregator=AGGREGATOR.address))
    if p.point == "solver":
        return bool(watch.events(watch.manager, "UnitAssigned", solver=SOLVERS[0].address))
    raise ValueError(p.point)


def _target_committed(watch: Watch, p: Plan) -> bool:
    """Whether the target already committed what its point leads to (then its kill did not land
    mid-aggregation or mid-unit): the aggregator its round-0 aggregate, solver-0 its unit's
    checkpoints."""
    if p.point == "aggregating":
        return bool(watch.events(watch.rm, "AggregateCommitted", aggregator=AGGREGATOR.address))
    if p.point == "solver":
        for ev in watch.events(watch.manager, "CheckpointsCommitted"):
            tx = watch.manager.w3.eth.get_transaction(ev["transactionHash"])
            if tx["from"] == SOLVERS[0].address:
                return True
    return False


def _last_said(log: Path) -> str:
    """The last message of an agent's log other than its heartbeats: what it was doing."""
    for line in reversed(_read(log).splitlines()):
        with contextlib.suppress(ValueError):
            msg = str(json.loads(line).get("msg", ""))
            if "eartbeat" not in msg:
                return msg[:200]
    return ""


def run_trial(p: Plan, work: Path, spec: Path, local_root: str) -> dict[str, Any]:
    """Run one decomposed job under `p`; every process it starts is stopped before it returns."""
    started = time.monotonic()
    work.mkdir(parents=True, exist_ok=True)
    honest = [q for q in CAST if q is not SUBMITTER]
    row: dict[str, Any] = {"plan": p.row(), "notes": []}
    procs = Processes(work)
    try:
        with rk.chain() as (url, w3):
            addrs = deploy_all(w3, rk.dev_private_key(0), DEFAULT_ABI_DIR, DEPLOY_PARAMS)
            fund(w3, addrs["Token"], rk.dev_private_key(0), CAST)
            watch = Watch(w3, addrs)
            first = w3.eth.block_number
            before = {q.name: watch.holdings(q.address) for q in honest}
            extra = ("--round-manager", addrs["RoundManager"])
            with rk.Warp(url, addrs, trusted=(AGGREGATOR.address,)):
                row.update(_drive(p, procs, watch, w3, url, addrs["JobManager"], spec, extra))
                # its pay: the aggregator withdraws its round credits
                _until(lambda: watch.rm.functions.credits(AGGREGATOR.address).call() == 0, 60)
            row.update(_measure(w3, watch, work, first, honest, before, local_root))
    except KeyboardInterrupt:
        row.update(survived=False, error="interrupted")
    except Exception as exc:  # a trial that breaks is a failed trial, recorded, not a crash
        first_line = str(exc).splitlines()[0][:300] if str(exc) else ""
        row.update(survived=False, error=f"{type(exc).__name__}: {first_line}")
    finally:
        procs.stop_all()
    row["wall_s"] = round(time.monotonic() - started, 1)
    return row


def _drive(
    p: Plan,
    procs: Processes,
    watch: Watch,
    w3: Web3,
    url: str,
    manager: str,
    spec: Path,
    extra: tuple[str, ...],
) -> dict[str, Any]:
    """Start the cast, kill -9 and restart `p`'s target at its point, and wait for the
    submitter to finish; returns what happened."""
    notes: list[str] = []
    workers = [*SOLVERS, VERIFIER, AGGREGATOR]
    for q in workers:
        procs.start(q, url, manager, *extra)
    _until(lambda: all(watch.registry.functions.roleOf(q.address).call() for q in workers), 180)
    procs.start(
        SUBMITTER, url, manager, *extra, "--spec", str(spec), "--reward", "20",
        "--verification-fee", "2", "--claim-window", "8", "--compute-time", "120",
    )  # fmt: skip
    _until(lambda: reached(watch, p, w3), 600, procs)
    time.sleep(p.delay_s)
    committed_first = _target_committed(watch, p)
    said = _last_said(procs.run_dir / f"{p.target.name}.log")
    final_at_kill = len(watch.events(watch.rm, "RoundFinalized"))
    notes.append(kill9(procs, p.target, p.point, p.delay_s))
    time.sleep(p.down_s)
    procs.start(p.target, url, manager, *extra)
    notes.append(f"restarted after {p.down_s:.2f} s")
    out: dict[str, Any] = {"notes": notes, "target_last_said_before_kill": said}
    out["rounds_final_at_kill"] = final_at_kill  # (the windows nobody acts in are warped)
    out["finished"] = wait_for_submitter(procs, notes)
    if p.point in ("aggregating", "solver"):
        out["killed_before_its_commit"] = not committed_first
    return out


def _measure(
    w3: Web3,
    watch: Watch,
    work: Path,
    first: int,
    honest: list[Party],
    before: dict[str, int],
    local_root: str,
) -> dict[str, Any]:
    log = _read(work / "submitter.log")
    result = None
    for line in reversed(log.splitlines()):
        with contextlib.suppress(ValueError):
            obj = json.loads(line)
            if isinstance(obj, dict) and "final_state_root" in obj:
                result = obj
                break
    root = result["final_state_root"] if result else None
    rounds = watch.events(watch.rm, "RoundFinalized")
    withdrawn = watch.events(watch.rm, "Withdrawn", account=AGGREGATOR.address)
    lost = {}
    for q in honest:
        short = before[q.name] - watch.holdings(q.address)
        lost[q.name] = max(0, short, watch.slashed(q.address))  # a slash counts once
    dups = audit_sends(w3, first, {q.address: work / q.name for q in CAST})
    tracebacks = [q.name for q in CAST if "Traceback" in _read(work / f"{q.name}.log")]
    units = result["units"] if result else []
    out: dict[str, Any] = {
        "completed": root is not None,
        "final_state_root": root,
        "root_matches_local_run": root == local_root,
        "aggregates_all_honest": bool(rounds)
        and all(e["args"]["aggregator"] == AGGREGATOR.address for e in rounds),
        "rounds_finalized": len(rounds),
        "units_by_solver": {q.name: sum(u["solver"] == q.address for u in units) for q in SOLVERS},
        "aggregator_withdrew": sum(int(e["args"]["amount"]) for e in withdrawn) / TOKEN,
        "duplicate_transactions": len(dups),
        "tokens_lost_by_honest": sum(lost.values()) / TOKEN,
        "lost_by_party": {k: v / TOKEN for k, v in lost.items() if v},
        "tracebacks": tracebacks,
    }
    if dups:
        out["duplicates"] = dups
    out["survived"] = (
        out["root_matches_local_run"]
        and out["aggregates_all_honest"]
        and out["rounds_finalized"] == ROUNDS
        and out["aggregator_withdrew"] > 0
        and out["duplicate_transactions"] == 0
        and out["tokens_lost_by_honest"] == 0
    )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=20261208, help="base seed")
    parser.add_argument("--trials", type=int, default=2 * len(POINTS), help="the points in turn")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--keep", action="store_true", help="keep the trials' work folders")
    parser.add_argument("--jobs", type=int, default=2, help="trials run side by side")
    args = parser.parse_args(argv)
    started = time.monotonic()
    todo = [plan(args.seed + i, i) for i in range(args.trials)]
    root = Path(tempfile.mkdtemp(prefix="decomposed-faults-"))
    try:
        spec, local_root = build(root)
        rows = run_side_by_side(
            todo,
            lambda p: run_trial(p, root / f"{p.point}-{p.seed}", spec, local_root),
            args.jobs,
        )
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    report = {
        "what": "seeded kill -9 trials of a decomposed version-3 job's aggregator and a solver "
        f"(issue #40): the char GPT, {ROUNDS} rounds x {SHARDS} shards x {K_LOCAL} local steps",
        "base_seed": args.seed,
        "points": list(POINTS),
        "local_run_final_state_root": local_root,
        "totals": {
            "trials": len(rows),
            "survived": sum(1 for r in rows if r.get("survived")),
            "duplicate_transactions": sum(r.get("duplicate_transactions", 0) for r in rows),
            "tokens_lost_by_honest": sum(r.get("tokens_lost_by_honest", 0) for r in rows),
        },
        "trials": rows,
        "cpus": os.cpu_count(),
        "load_at_end": os.getloadavg()[0],
        "wall_time_s": round(time.monotonic() - started, 1),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report["totals"]))
    print(f"wrote {args.out} in {report['wall_time_s']} s")
    return 0 if report["totals"]["survived"] == report["totals"]["trials"] else 1


if __name__ == "__main__":
    run_bench(main)
