"""`make demo DEMO=decomposed-mlp`: a 2-round x 3-shard digits job (examples/digits-2x3.json, spec
version 2) through the RoundManager on a local chain, every role a separate OS process.

Four solvers, a cheating solver, two aggregators (one cheats), a verifier (replays every segment of
each unit with the unit's shard batches from G_r, and attests or challenges) and the submitter. The
first solver claims a unit of round 0 alone and is killed (offline while it holds the unit): the
unit's commit deadline passes, the submitter re-opens it (expireAssignment) and the spare solver
trains it. The cheating solver then takes another unit of round 0 alone and commits a run with one
element of one weight update flipped: the verifier challenges, the bisection game narrows it to that
element at the unit's global step and shard batch, the cheater is slashed and the unit re-opened for
the honest solvers. The cheating aggregator commits round 0's aggregate with one element changed and
withholds its blob; the honest aggregator, started then, makes it reveal the disputed tensor on
chain (a bonded reveal request; it is killed -9 once its request is mined and restarted from its
data folder) and proves one element of the revealed chunk wrong against the units' final roots: the
cheater's bond is slashed and the round re-aggregated. The job's final state root is compared, bit
for bit, with the engine's one-process run of the same spec, and its test accuracy with the single
solver with the same 400 steps. Writes build/demo/decomposed.json and the logs under
build/demo/decomposed-run/.

Exit codes: 0 success, 1 the job did not complete or differs from the local run, 2 a user error."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import sys
import time
from pathlib import Path

from web3 import Web3
from web3.contract import Contract

from agents.core.chain import AnvilConfig, ChainUnavailable, connect, dev_private_key, local_anvil
from agents.core.deploy import DEFAULT_ABI_DIR, DeploymentError, deploy_all, load_artifact
from agents.data import builtin as datasets
from agents.training import decompose as D
from agents.training import spec as specs
from agents.training.engine import Engine
from scripts.demo import DemoError, Processes
from tools.devnet import Party, fund

REPO = Path(__file__).resolve().parents[1]
SPEC = REPO / "examples" / "digits-2x3.json"
SINGLE = REPO / "examples" / "digits-mlp.json"  # one solver, the same T = 400 steps
REPORT = REPO / "build" / "demo" / "decomposed.json"
RUN_DIR = REPO / "build" / "demo" / "decomposed-run"
TOKEN = 10**18
BOND = 50 * TOKEN

SUBMITTER = Party("submitter", "submitter", 1)
SOLVERS = [Party(f"solver-{i}", "solver", 2 + i, ["--stake", "200"]) for i in range(4)]
# commits a wrong aggregate and withholds its blob: only a reveal request gets the data out
CHEATER = Party("agg-cheat", "aggregator", 6, ["--stake", "200", "--cheat", "--withhold"])
HONEST = Party("agg-honest", "aggregator", 7, ["--stake", "200"])
VERIFIER = Party("verifier", "verifier", 8, ["--stake", "100"])
# upd.w0 (node 28 of the digits step graph) at local step 117 of its unit: segment 2 of 5
CHEAT_FAULT = "element:step=117,node=28,element=5,mask=0x40000000"
CHEATING_SOLVER = Party("solver-cheat", "solver", 9, ["--stake", "200", "--cheat", CHEAT_FAULT])
PARTIES = [SUBMITTER, *SOLVERS, CHEATER, HONEST, VERIFIER, CHEATING_SOLVER]

DEPLOY_PARAMS = {
    "dispute_game": True,
    "round_manager": True,
    "round_config": {"aggregationWindow": 45, "aggregatorBond": BOND},
    # no forced rounds (PROTOCOL §8.1), so the scenario's outcome is fixed
    "manager_config": {
        "claimWindow": 8,
        # the one verifier replays 5 segments of each of a round's units one after another: on
        # a loaded CI machine 20 s left too little headroom (as in scripts/demo.py)
        "verifyWindow": 45,
        "revealWindow": 15,  # the one drawn verifier opens its seal right after sealing
        "verifiersPerUnit": 1,
        # the verifier replays every segment (5 per unit), so the cheater's one wrong step is
        # always in a replayed segment and the scenario's outcome is fixed
        "segmentsPerVerifier": 5,
        "forcedErrorBps": 0,
        "lazySlashFactor": 0,  # without forced rounds the verifiers lock the flat verifierLock
    },
    "registry_config": {"unbondingDelay": 60, "heartbeatTtl": 3600},
}


def local_run() -> dict:
    """The engine's one-process run of the spec, and the single solver with the same steps."""
    sp, one = specs.load(SPEC), specs.load(SINGLE)
    ds = datasets.load_dataset(sp.dataset_name)
    test = datasets.test_split_for(ds.name)
    last = list(D.run_job(sp, ds))[-1]
    eng = Engine(one, ds)
    return {
        "final_state_root": "0x" + last.state_root.hex(),
        "test_accuracy": eng.accuracy(last.state, test),
        "single_solver_test_accuracy": eng.accuracy(list(eng.train())[-1][2], test),
    }


def _wait(what: str, cond, timeout: float, procs: Processes, keep: tuple[str, ...]) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for name in keep:
            proc = procs.procs[name]
            if proc.poll() is not None:
                tail = (procs.run_dir / f"{name}.log").read_text()[-1500:]
                raise DemoError(
                    f"{name} exited ({proc.returncode}) while waiting for {what}: {tail}"
                )
        if cond():
            return
        time.sleep(0.25)
    raise DemoError(f"timed out after {timeout:.0f} s waiting for {what}")


def _kill9(procs: Processes, name: str) -> None:
    proc = procs.procs[name]
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)


def scenario(w3: Web3, url: str, addrs: dict, run_dir: Path) -> dict:
    """Runs the parties through the job (see the module docstring); returns what happened."""
    fund(w3, addrs["Token"], dev_private_key(0), PARTIES)

    def contract(name: str):
        return w3.eth.contract(address=addrs[name], abi=load_artifact(name)["abi"])

    manager, rm, registry, game = (
        contract("JobManager"),
        contract("RoundManager"),
        contract("NodeRegistry"),
        contract("DisputeGame"),
    )
    extra = ("--round-manager", addrs["RoundManager"])
    procs = Processes(run_dir)
    offline = SOLVERS[0]
    try:
        # the solver that goes offline registers first and is alone when round 0 opens
        procs.start(offline, url, addrs["JobManager"], *extra)
        procs.start(CHEATER, url, addrs["JobManager"], *extra)
        procs.start(VERIFIER, url, addrs["JobManager"], *extra)
        first = (offline, CHEATER, VERIFIER)
        _wait(
            "registrations",
            lambda: all(registry.functions.roleOf(p.address).call() for p in first),
            180, procs, tuple(p.name for p in first),
        )  # fmt: skip
        procs.start(
            SUBMITTER, url, addrs["JobManager"], *extra, "--spec", str(SPEC), "--reward", "20",
            "--verification-fee", "2", "--claim-window", "8", "--compute-time", "45",
        )  # fmt: skip

        def held() -> int:
            if rm.functions.jobCount().call() == 0:
                return 0
            for s in range(3):
                job = rm.functions.unitJobOf(1, 0, s).call()
                if offline.address in manager.functions.getClaimants(job << 32).call()[0]:
                    return job
            return 0

        _wait("the first solver's claim", lambda: held() != 0, 180, procs, ("submitter",))
        lost = held()
        _kill9(procs, offline.name)  # offline: no commit, no heartbeat, no goodbye
        _wait(
            "the offline solver's assignment",
            lambda: manager.functions.getUnit(lost << 32).call()[9] == offline.address,
            90, procs, ("submitter",),
        )  # fmt: skip
        # the cheating solver is alone now too: it takes one of the other two units
        procs.start(CHEATING_SOLVER, url, addrs["JobManager"], *extra)

        def cheated() -> int:
            for s in range(3):
                job = rm.functions.unitJobOf(1, 0, s).call()
                if manager.functions.getUnit(job << 32).call()[9] == CHEATING_SOLVER.address:
                    return job
            return 0

        _wait("the cheating solver's assignment", lambda: cheated() != 0, 180, procs, ())
        cheated_unit = cheated()
        for p in SOLVERS[1:]:
            procs.start(p, url, addrs["JobManager"], *extra)

        def resolved() -> bool:
            return any(
                ev["args"]["unitId"] >> 32 == cheated_unit
                for ev in manager.events.DisputeResolved().get_logs(from_block=0)
            )

        _wait("the game over the cheating solver's unit", resolved, 400, procs, ("submitter",))
        _kill9(procs, CHEATING_SOLVER.name)  # caught and slashed: it takes no further part
        _wait(
            "the cheating aggregate",
            lambda: rm.functions.getRound(1, 0).call()[3] == CHEATER.address,
            400, procs, ("submitter", CHEATER.name),
        )  # fmt: skip
        procs.start(HONEST, url, addrs["JobManager"], *extra)
        _wait(
            "the honest aggregator's reveal request",
            lambda: bool(rm.events.AggregateRevealRequested().get_logs(from_block=0)),
            180, procs, ("submitter", HONEST.name),
        )  # fmt: skip
        # kill -9 mid-dispute (its request mined, its proof not yet, or just): it resumes from
        # its data folder and finishes the dispute
        proven_before_kill = bool(rm.events.AggregationFraudProven().get_logs(from_block=0))
        _kill9(procs, HONEST.name)
        procs.start(HONEST, url, addrs["JobManager"], *extra)
        _wait(
            "job completion",
            lambda: procs.procs["submitter"].poll() is not None,
            600, procs, (HONEST.name,),
        )  # fmt: skip
    finally:
        procs.stop_all()
    log = (run_dir / "submitter.log").read_text()
    if procs.procs["submitter"].returncode != 0:
        raise DemoError(f"the submitter failed: {log[-1500:]}")
    result = json.loads(next(ln for ln in log.splitlines() if '"units"' in ln))
    proofs = rm.events.AggregationFraudProven().get_logs(from_block=0)
    expired = manager.events.AssignmentExpired().get_logs(from_block=0)
    attested = manager.events.Attested().get_logs(from_block=0)
    requested = rm.events.AggregateRevealRequested().get_logs(from_block=0)
    revealed = rm.events.AggregateLeafRevealed().get_logs(from_block=0)
    held = rm.events.RevealBondHeld().get_logs(from_block=0)
    returned = rm.events.RevealBondReturned().get_logs(from_block=0)
    return {
        "result": result,
        "offline_solver": offline.address,
        "offline_unit_job": lost,
        "cheating_aggregator": CHEATER.address,
        "honest_aggregator": HONEST.address,
        "fraud_proofs": [
            {k: ev["args"][k] for k in ("round", "aggregator", "challenger", "tensor", "element")}
            for ev in proofs
        ],
        "expired_assignments": [
            {"unit_job": ev["args"]["unitId"] >> 32, "solver": ev["args"]["solver"]}
            for ev in expired
        ],
        "attestations": [
            {
                "unit_job": ev["args"]["unitId"] >> 32,
                "verifier": ev["args"]["verifier"],
                "segments": list(ev["args"]["segments"]),
            }
            for ev in attested
        ],  # fmt: skip
        "round_manager_jackpot": rm.functions.jackpot().call(),
        "reveal_requests": [
            {k: ev["args"][k] for k in ("round", "requester", "tensor")} for ev in requested
        ],
        "reveals": [{k: ev["args"][k] for k in ("round", "tensor", "leaf")} for ev in revealed],
        # answered requests' bonds, held with their aggregate; returned once it was overturned
        "reveal_bonds_held": [
            {k: ev["args"][k] for k in ("round", "attempt", "requester", "amount")} for ev in held
        ],
        "reveal_bonds_returned": [
            {k: ev["args"][k] for k in ("round", "attempt", "requester", "amount")}
            for ev in returned
        ],
        "honest_aggregator_restarted": {"proof_sent_before_kill": proven_before_kill},
        "cheating_solver": CHEATING_SOLVER.address,
        "cheating_solver_slashed": slashed(registry, CHEATING_SOLVER.address),
        "cheated_unit_job": cheated_unit,
        "unit_games": unit_games(game),
    }


def slashed(registry: Contract, node: str) -> int:
    """Everything the registry slashed of `node` in the run."""
    logs = registry.events.NodeSlashed().get_logs(from_block=0, argument_filters={"node": node})
    return sum(ev["args"]["amount"] for ev in logs)


def unit_games(game: Contract) -> list[dict]:
    """Every game over a unit in the run: its unit job and placement, the parties and how it
    ended (the one-step element, the global step a version-1/2 trace was posted at)."""
    ended = {
        ev["args"]["gameId"]: ev["args"] for ev in game.events.GameResolved().get_logs(from_block=0)
    }
    proved = {
        ev["args"]["gameId"]: ev["args"]
        for ev in game.events.ElementProved().get_logs(from_block=0)
    }
    traced = {
        ev["args"]["gameId"]: ev["args"]["globalStep"]
        for ev in game.events.TracePosted().get_logs(from_block=0)
    }
    return [
        {
            "game": (gid := ev["args"]["gameId"]),
            "unit_job": ev["args"]["unitId"] >> 32,
            "placement": list(game.functions.placementOf(ev["args"]["unitId"] >> 32).call()),
            "defender": ev["args"]["defender"],
            "challenger": ev["args"]["challenger"],
            "challenger_won": ended[gid]["challengerWon"] if gid in ended else None,
            "by_timeout": ended[gid]["byTimeout"] if gid in ended else None,
            "global_step": traced.get(gid),
            "element": proved[gid]["element"] if gid in proved else None,
        }
        for ev in game.events.GameOpened().get_logs(from_block=0)
    ]


def run(rpc_url: str | None) -> dict:
    started = time.monotonic()
    if RUN_DIR.exists():
        shutil.rmtree(RUN_DIR)
    RUN_DIR.mkdir(parents=True)
    local = local_run()
    if rpc_url:
        w3 = connect(rpc_url)
        addrs = deploy_all(w3, dev_private_key(0), DEFAULT_ABI_DIR, DEPLOY_PARAMS)
        out = scenario(w3, rpc_url, addrs, RUN_DIR)
    else:
        with local_anvil(AnvilConfig(block_time=1)) as url:
            w3 = connect(url)
            addrs = deploy_all(w3, dev_private_key(0), DEFAULT_ABI_DIR, DEPLOY_PARAMS)
            out = scenario(w3, url, addrs, RUN_DIR)
    out["local"] = local
    out["contracts"] = addrs
    out["root_matches_local_run"] = out["result"]["final_state_root"] == local["final_state_root"]
    out["wall_time_s"] = round(time.monotonic() - started, 1)
    return out


def summary(report: dict) -> str:
    r, local = report["result"], report["local"]
    lines = [
        f"decomposed job {r['job_id']}: {r['rounds']} rounds x {r['shards']} shards",
        f"  final state root   {r['final_state_root']}",
        f"  local run root     {local['final_state_root']}  "
        f"({'bit-identical' if report['root_matches_local_run'] else 'DIFFERENT'})",
        f"  test accuracy      {r['test_accuracy']:.4f} (single solver, same 400 steps: "
        f"{local['single_solver_test_accuracy']:.4f})",
        "  units:",
    ]
    for u in r["units"]:
        lines.append(
            f"    ({u['round']}, {u['shard']}) job {u['job_id']:>2}  solver {u['solver']}  "
            f"attempts {u['attempts']}"
        )
    for a in report["attestations"]:
        lines.append(
            f"  unit job {a['unit_job']}: verifier {a['verifier']} replayed segments "
            f"{a['segments']} and attested"
        )
    for e in report["expired_assignments"]:
        lines.append(f"  offline solver {e['solver']} lost unit job {e['unit_job']} (re-opened)")
    for g in report["unit_games"]:
        placement = g["placement"]
        lines.append(
            f"  unit job {g['unit_job']} (t0 {placement[0]}, shard {placement[2]} of "
            f"{placement[1]}): game {g['game']}, {g['challenger']} challenged "
            f"{g['defender']}: {'challenger' if g['challenger_won'] else 'defender'} won "
            f"({'on time' if g['by_timeout'] else 'one-step proof'} at global step "
            f"{g['global_step']}, element {g['element']})"
        )
    if report["cheating_solver_slashed"]:
        lines.append(
            f"  cheating solver {report['cheating_solver']} slashed "
            f"{report['cheating_solver_slashed'] / TOKEN:g} tokens"
        )
    for q in report["reveal_requests"]:
        lines.append(
            f"  round {q['round']}: aggregate blob withheld; {q['requester']} asked on chain for "
            f"tensor {q['tensor']}"
        )
    for v in report["reveals"]:
        lines.append(f"  round {v['round']}: tensor {v['tensor']} leaf {v['leaf']} revealed")
    for p in report["fraud_proofs"]:
        lines.append(
            f"  round {p['round']}: aggregate of {p['aggregator']} proven wrong at tensor "
            f"{p['tensor']} element {p['element']} by {p['challenger']} (bond slashed)"
        )
    for a in r["aggregations"]:
        lines.append(
            f"  round {a['round']}: G_{a['round'] + 1} by {a['aggregator']} "
            f"(attempts {a['attempts']})"
        )
    lines.append(f"  wall time {report['wall_time_s']} s")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="make demo DEMO=decomposed-mlp", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--rpc-url", help="a dev chain (Anvil's dev keys) instead of a private one")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    try:
        report = run(args.rpc_url)
    except (ChainUnavailable, FileNotFoundError, DeploymentError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except DemoError as exc:
        print(f"error: demo failed: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted; every demo process was stopped", file=sys.stderr)
        return 130
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    REPORT.write_text(json.dumps(report, indent=2, default=str) + "\n")
    print(summary(report))
    print(f"wrote {REPORT}")
    return 0 if report["root_matches_local_run"] else 1


if __name__ == "__main__":
    sys.exit(main())
