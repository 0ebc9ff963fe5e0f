"""Seeded crash trials of a decomposed job's aggregator (issue #10; run by `make reliability`).

Each trial runs the 2-round x 3-shard digits job (examples/digits-2x3.json) through the
RoundManager on a private Anvil, every role a `python -m agents` process: three solvers, a
verifier, the submitter and the honest aggregator. In a dispute trial a cheating aggregator
commits round 0's aggregate first, with one element changed, and withholds its blob; the honest
aggregator, started then, must request a reveal of the disputed tensor, prove an element of the
revealed chunk wrong, re-aggregate the round and take its reveal bond back.

The honest aggregator is killed -9 at a seeded point (`POINTS`: while it aggregates, with its
aggregate in its challenge window, once the job is complete but before it withdrew; in a dispute,
after its reveal request, after the reveal, after its fraud proof), a seeded delay after that
point is seen on chain, and restarted from its data folder after a seeded down time. A trial
survives when the job completed with the engine's one-process final state root (bit for bit),
every round's accepted aggregate is the honest aggregator's, it withdrew its round pay, every
reveal bond it posted came back, no party sent a transaction twice (the intent audit of
scripts/demo.py) and no honest party lost a token (balance + credits + stake, slashes counted).

Usage: python -m bench.aggregator_crash_bench [--quick] [--seed N] [--out PATH] [--jobs N]
Writes bench/results/aggregator_crash.json (seeds, per-trial rows, totals, wall time).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import signal
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
from bench.reliability_bench import STOP, run_bench, run_side_by_side  # noqa: E402
from scripts.demo import Processes  # noqa: E402
from scripts.demo_decomposed import (  # noqa: E402
    CHEATER,
    DEPLOY_PARAMS,
    HONEST,
    SOLVERS,
    SPEC,
    SUBMITTER,
    TOKEN,
    VERIFIER,
    local_run,
)
from tools.devnet import audit_sends, fund  # noqa: E402

OUT = REPO / "bench" / "results" / "aggregator_crash.json"
#: Where a trial kills the honest aggregator. Without a cheater: while round 0's aggregate is
#: computed and sent (its three units final), with its first aggregate in the challenge window,
#: and once the job is complete but before it withdrew its pay. With a cheater (`DISPUTE`): after
#: its reveal request is mined, after the cheater's reveal (before or while it proves), after its
#: fraud proof (before it re-aggregates the round and reclaims its reveal bond).
POINTS = ("aggregating", "committed", "completed", "requested", "revealed", "proven")
DISPUTE = ("requested", "revealed", "proven")
#: Seconds after its point is seen on chain the kill may land (seeded, uniform from 0).
MAX_DELAY_S = {"aggregating": 4.0, "committed": 3.0, "completed": 1.0}
HONEST_SOLVERS = SOLVERS[1:]  # three: one unit of each round each
JOB_TIMEOUT_S = 900.0
FULL, QUICK = len(POINTS), 2


@dataclass(frozen=True)
class Plan:
    """One trial: where the kill lands, how long after that point, and how long it stays down."""

    seed: int
    point: str
    delay_s: float
    down_s: float

    @property
    def dispute(self) -> bool:
        return self.point in DISPUTE

    def row(self) -> dict[str, Any]:
        return {
            "seed": self.seed,
            "point": self.point,
            "cheating_aggregator": self.dispute,
            "delay_s": round(self.delay_s, 2),
            "down_s": round(self.down_s, 2),
        }


def plan(seed: int, index: int) -> Plan:
    """Trial `index` of a run: the points in turn, its delay and down time from its own seed."""
    rng = random.Random(seed)
    point = POINTS[index % len(POINTS)]
    return Plan(seed, point, rng.uniform(0.0, MAX_DELAY_S.get(point, 2.0)), rng.uniform(0.5, 3.0))


def plans(count: int, base_seed: int) -> list[Plan]:
    return [plan(base_seed + i, i) for i in range(count)]


class Watch:
    """What a trial reads from the chain (events and views of the deployed contracts)."""

    def __init__(self, w3: Web3, addrs: dict[str, str]) -> None:
        self.manager = rk.contract(w3, "JobManager", addrs["JobManager"])
        self.rm = rk.contract(w3, "RoundManager", addrs["RoundManager"])
        self.registry = rk.contract(w3, "NodeRegistry", addrs["NodeRegistry"])
        self.token = rk.contract(w3, "TestToken", addrs["Token"])

    def events(self, contract: Any, name: str, **filters: Any) -> list[Any]:
        kw = {"argument_filters": filters} if filters else {}
        return list(getattr(contract.events, name)().get_logs(from_block=0, **kw))

    def reached(self, point: str) -> bool:
        if point == "aggregating":  # round 0's three units are final: its aggregate is due
            return len(self.events(self.manager, "UnitFinalized")) >= 3
        if point == "committed":
            return bool(self.events(self.rm, "AggregateCommitted", aggregator=HONEST.address))
        if point == "completed":
            return bool(self.events(self.rm, "DecomposedJobCompleted"))
        if point == "requested":
            return bool(self.events(self.rm, "AggregateRevealRequested"))
        if point == "revealed":
            return bool(self.events(self.rm, "AggregateLeafRevealed"))
        if point == "proven":
            return bool(self.events(self.rm, "AggregationFraudProven"))
        raise ValueError(point)

    def holdings(self, address: str) -> int:
        """Tokens `address` holds anywhere in the protocol: balance, both managers' credits,
        stake and unbonding stake."""
        node = self.registry.functions.getNode(address).call()
        return (
            self.token.functions.balanceOf(address).call()
            + self.manager.functions.credits(address).call()
            + self.rm.functions.credits(address).call()
            + int(node[8])
            + int(node[10])
        )

    def slashed(self, address: str) -> int:
        evs = self.events(self.registry, "NodeSlashed", node=address)
        return sum(int(e["args"]["amount"]) for e in evs)


def run_trial(p: Plan, work: Path, local_root: str) -> dict[str, Any]:
    """Run one decomposed job under `p`; every process it starts is stopped before it returns."""
    started = time.monotonic()
    work.mkdir(parents=True, exist_ok=True)
    cast = [SUBMITTER, *HONEST_SOLVERS, VERIFIER, HONEST] + ([CHEATER] if p.dispute else [])
    honest = [q for q in cast if q not in (SUBMITTER, CHEATER)]
    row: dict[str, Any] = {"plan": p.row(), "notes": []}
    procs = Processes(work)
    try:
        with rk.chain() as (url, w3):
            addrs = deploy_all(w3, rk.dev_private_key(0), DEFAULT_ABI_DIR, DEPLOY_PARAMS)
            fund(w3, addrs["Token"], rk.dev_private_key(0), cast)
            watch = Watch(w3, addrs)
            first = w3.eth.block_number
            before = {q.name: watch.holdings(q.address) for q in honest}
            extra = ("--round-manager", addrs["RoundManager"])
            # the waits for windows in which nobody acts any more are skipped on chain
            with rk.Warp(url, addrs, trusted=(HONEST.address,)):
                row.update(_drive(p, procs, watch, url, addrs["JobManager"], extra))
                # its pay: the aggregator withdraws its round credits (and reclaims its bonds)
                _until(lambda: watch.rm.functions.credits(HONEST.address).call() == 0, 60)
            row.update(_measure(w3, watch, work, first, cast, honest, before, local_root))
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
    p: Plan, procs: Processes, watch: Watch, url: str, manager: str, extra: tuple[str, ...]
) -> dict[str, Any]:
    """Start the cast, kill and restart the honest aggregator at `p`'s point, and wait for the
    submitter to finish; returns what happened."""
    notes: list[str] = []
    workers = [*HONEST_SOLVERS, VERIFIER] + ([CHEATER] if p.dispute else [HONEST])
    for q in workers:
        procs.start(q, url, manager, *extra)
    _until(lambda: all(watch.registry.functions.roleOf(q.address).call() for q in workers), 180)
    procs.start(
        SUBMITTER, url, manager, *extra, "--spec", str(SPEC), "--reward", "20",
        "--verification-fee", "2", "--claim-window", "8", "--compute-time", "45",
    )  # fmt: skip
    if p.dispute:
        # the cheater commits round 0's aggregate first; then the honest aggregator joins
        _until(lambda: bool(watch.events(watch.rm, "AggregateCommitted")), 400, procs)
        procs.start(HONEST, url, manager, *extra)
    _until(lambda: watch.reached(p.point), 600, procs)
    time.sleep(p.delay_s)
    notes.append(kill9(procs, HONEST, p.point, p.delay_s))
    time.sleep(p.down_s)
    procs.start(HONEST, url, manager, *extra)
    notes.append(f"restarted after {p.down_s:.2f} s")
    return {"notes": notes, "finished": wait_for_submitter(procs, notes)}


def kill9(procs: Processes, party: Any, point: str, delay_s: float) -> str:
    """kill -9 `party`'s process group (`delay_s` after `point`); the trial's note of it."""
    proc = procs.procs[party.name]
    if proc.poll() is not None:
        return f"{party.name} had already exited ({proc.returncode}) at '{point}'"
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    return f"killed -9 {party.name} {delay_s:.2f} s after '{point}'"


def wait_for_submitter(procs: Processes, notes: list[str]) -> str:
    """Wait until the submitter exits (at most JOB_TIMEOUT_S), or another party dies; how the
    job finished. Each event on the way is appended to `notes`."""
    deadline = time.monotonic() + JOB_TIMEOUT_S
    while procs.procs["submitter"].poll() is None:
        if STOP.is_set():
            raise KeyboardInterrupt
        if time.monotonic() > deadline:
            notes.append(f"timed out after {JOB_TIMEOUT_S:.0f} s")
            break
        for name, q in procs.procs.items():
            if name != "submitter" and q.poll() is not None:
                notes.append(f"{name} exited with code {q.returncode}")
                return f"{name} died"
        time.sleep(0.5)
    return f"submitter exited {procs.procs['submitter'].poll()}"


def _until(cond: Any, timeout: float, procs: Processes | None = None) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if STOP.is_set():
            raise KeyboardInterrupt
        if procs is not None:
            for name, q in procs.procs.items():
                if q.poll() is not None and name != "submitter":
                    raise RuntimeError(f"{name} exited with code {q.returncode}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"not reached within {timeout:.0f} s")
        time.sleep(0.25)


def _measure(
    w3: Web3,
    watch: Watch,
    work: Path,
    first: int,
    cast: list[Any],
    honest: list[Any],
    before: dict[str, int],
    local_root: str,
) -> dict[str, Any]:
    log = (work / "submitter.log").read_text(errors="replace")
    result = next((json.loads(ln) for ln in log.splitlines() if '"units"' in ln), None)
    root = result["final_state_root"] if result else None
    rounds = watch.events(watch.rm, "RoundFinalized")
    held = watch.events(watch.rm, "RevealBondHeld", requester=HONEST.address)
    returned = watch.events(watch.rm, "RevealBondReturned", requester=HONEST.address)
    requested = watch.events(watch.rm, "AggregateRevealRequested", requester=HONEST.address)
    withdrawn = watch.events(watch.rm, "Withdrawn", account=HONEST.address)
    lost = {}
    for q in honest:
        short = before[q.name] - watch.holdings(q.address)
        lost[q.name] = max(0, short, watch.slashed(q.address))  # a slash counts once
    dups = audit_sends(w3, first, {q.address: work / q.name for q in cast})
    tracebacks = [q.name for q in cast if "Traceback" in _read(work / f"{q.name}.log")]
    out: dict[str, Any] = {
        "completed": root is not None,
        "root_matches_local_run": root == local_root,
        "aggregates_all_honest": bool(rounds)
        and all(e["args"]["aggregator"] == HONEST.address for e in rounds),
        "rounds_finalized": len(rounds),
        "aggregator_withdrew": sum(int(e["args"]["amount"]) for e in withdrawn) / TOKEN,
        "reveal_requests": len(requested),
        "reveal_bonds_held": len(held),
        "reveal_bonds_returned": len(returned),
        "fraud_proofs": len(watch.events(watch.rm, "AggregationFraudProven")),
        "duplicate_transactions": len(dups),
        "tokens_lost_by_honest": sum(lost.values()) / TOKEN,
        "tracebacks": tracebacks,
    }
    if dups:
        out["duplicates"] = dups
    out["survived"] = (
        out["root_matches_local_run"]
        and out["aggregates_all_honest"]
        and out["rounds_finalized"] == 2
        and out["aggregator_withdrew"] > 0
        and out["reveal_bonds_returned"] == out["reveal_bonds_held"]
        and out["duplicate_transactions"] == 0
        and out["tokens_lost_by_honest"] == 0
    )
    return out


def _read(path: Path) -> str:
    return path.read_text(errors="replace") if path.exists() else ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=f"{QUICK} trials, not {FULL}")
    parser.add_argument("--seed", type=int, default=20261201, help="base seed")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--keep", action="store_true", help="keep the trials' work folders")
    parser.add_argument("--jobs", type=int, default=2, help="trials run side by side")
    args = parser.parse_args(argv)
    started = time.monotonic()
    todo = plans(QUICK if args.quick else FULL, args.seed)
    local_root = local_run()["final_state_root"]
    root = Path(tempfile.mkdtemp(prefix="aggregator-crash-"))
    try:
        rows = run_side_by_side(
            todo, lambda p: run_trial(p, root / f"{p.point}-{p.seed}", local_root), args.jobs
        )
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    report = {
        "what": "seeded kill -9 trials of a decomposed job's honest aggregator (issue #10)",
        "base_seed": args.seed,
        "profile": "quick" if args.quick else "full",
        "points": list(POINTS),
        "local_run_final_state_root": local_root,
        "totals": {
            "trials": len(rows),
            "survived": sum(1 for r in rows if r.get("survived")),
            "duplicate_transactions": sum(r.get("duplicate_transactions", 0) for r in rows),
            "tokens_lost_by_honest": sum(r.get("tokens_lost_by_honest", 0) for r in rows),
        },
        "trials": rows,
        "wall_time_s": round(time.monotonic() - started, 1),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report["totals"]))
    print(f"wrote {args.out} in {report['wall_time_s']} s")
    return 0 if report["totals"]["survived"] == report["totals"]["trials"] else 1


if __name__ == "__main__":
    run_bench(main)
