"""`make demo DEMO=decomposed`: the char GPT (examples/models/char_gpt.py) decomposed into R rounds
x S shards (default 3 x 4, 2 local steps each, outer Nesterov: a version-3 job) through the
RoundManager on a local chain, every role a separate OS process (issue #40's "Must show").

S honest solvers, a cheating solver, a verifier (replays every segment of each unit from G_r on
the unit's shard batches), two aggregators (one cheats) and the submitter. The cheating solver
takes a unit of round 0 alone and commits a run with one element of one parameter update flipped
at the unit's last local step: the verifier challenges, the game bisects to that element, the
chain recomputes it (GraphProver, at the unit's global step and shard batch), the cheater is
slashed and the unit retrained by an honest solver. The cheating aggregator commits round 0's
H_1 with one element of the outer-updated state wrong; the honest aggregator, started then,
challenges it in the round manager's game and proves that element wrong: the cheater's bond is
taken and the round re-aggregated. The job completes; `job fetch --decomposed` returns G_R, whose
state root is checked against `python -m agents train --spec` of the same spec in one process.
Writes build/demo/decomposed-gpt.json and the logs under build/demo/decomposed-gpt-run/.

Exit codes: 0 success, 1 the job did not complete or differs from the local run, 2 a user error.
`scripts/demo_decomposed.py` (`DEMO=decomposed-mlp`) is the version-2 digits variant."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import shutil
import sys
import time
from pathlib import Path

from web3 import Web3

from agents.core.chain import AnvilConfig, ChainUnavailable, connect, dev_private_key, local_anvil
from agents.core.deploy import DEFAULT_ABI_DIR, DeploymentError, deploy_all, load_artifact
from scripts.demo import DemoError, Processes
from scripts.demo_decomposed import _kill9, _wait, slashed, unit_games
from tools.devnet import Party, fund

REPO = Path(__file__).resolve().parents[1]
MODEL = REPO / "examples" / "models" / "char_gpt.py"
REPORT = REPO / "build" / "demo" / "decomposed-gpt.json"
RUN_DIR = REPO / "build" / "demo" / "decomposed-gpt-run"
TOKEN = 10**18
BOND = 50 * TOKEN
K_LOCAL = 2  # local steps per unit, a checkpoint after each: the verifier replays both

SUBMITTER = Party("submitter", "submitter", 1)
VERIFIER = Party("verifier", "verifier", 2, ["--stake", "100"])
CHEATER = Party("agg-cheat", "aggregator", 3, ["--stake", "200", "--cheat"])
HONEST = Party("agg-honest", "aggregator", 4, ["--stake", "200"])


def solvers(shards: int) -> list[Party]:
    return [Party(f"solver-{i}", "solver", 10 + i, ["--stake", "200"]) for i in range(shards)]


def cheating_solver(fault: str) -> Party:
    return Party("solver-cheat", "solver", 5, ["--stake", "200", "--cheat", fault])


def deploy_params(window: int = 60) -> dict:
    return {
        "dispute_game": True,
        "clock_budget": 600,
        "round_manager": True,
        "round_config": {"aggregationWindow": window, "aggregatorBond": BOND},
        # no forced rounds (PROTOCOL §8.1), so the scenario's outcome is fixed
        "manager_config": {
            "claimWindow": 8,
            "verifyWindow": 60,
            "revealWindow": 15,
            "disputeGrace": 10,
            "verifiersPerUnit": 1,
            # every segment of a unit is replayed: the cheater's step is always among them
            "segmentsPerVerifier": K_LOCAL,
            "forcedErrorBps": 0,
            "lazySlashFactor": 0,
        },
        "registry_config": {"unbondingDelay": 60, "heartbeatTtl": 3600},
    }


def _cli(argv: list[str]) -> str:
    """`python -m agents ARGV` in this process; its stdout (UserError/exit != 0: DemoError)."""
    from agents.__main__ import main

    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = main(argv)
    if code != 0:
        raise DemoError(f"`{' '.join(argv[:2])}` exited {code}: {printed.getvalue()[-500:]}")
    return printed.getvalue()


def build(run_dir: Path, rounds: int, shards: int) -> tuple[Path, dict, str]:
    """The spec, `train --spec`'s summary of it, and the cheat: one element of a parameter's
    update (a state producer of the step graph) at a unit's last local step."""
    from agents.cli.job import load_job
    from agents.dispute.model_graph import model_job_graph

    spec = run_dir / f"gpt-{rounds}x{shards}.json"
    _cli(["job", "build", "--model", f"{MODEL}:make_model", "--dataset",
          "shakespeare-char/train", "--optimizer", "adamw", "--lr", "0.003", "--batch", "2",
          "--steps", str(rounds * K_LOCAL), "--checkpoint-every", "1", "--seed", "5",
          "--rounds", str(rounds), "--shards", str(shards), "--outer", "nesterov",
          "--out", str(spec)])  # fmt: skip
    local = json.loads(_cli(["train", "--spec", str(spec), "--json"]).splitlines()[-1])
    job, _ = load_job(str(spec), None)
    node = model_job_graph(job).config.state_producers[0]
    return spec, local, f"element:step={K_LOCAL - 1},node={node},element=3,mask=0x00400000"


def scenario(w3: Web3, url: str, addrs: dict, run_dir: Path, spec: Path, fault: str,
             shards: int) -> dict:  # fmt: skip
    """Runs the parties through the job (see the module docstring); returns what happened."""
    honest, cheat = solvers(shards), cheating_solver(fault)
    parties = [SUBMITTER, VERIFIER, CHEATER, HONEST, cheat, *honest]
    fund(w3, addrs["Token"], dev_private_key(0), parties)

    def contract(name: str, address: str | None = None):
        return w3.eth.contract(address=address or addrs[name], abi=load_artifact(name)["abi"])

    manager, rm, registry = contract("JobManager"), contract("RoundManager"), contract(
        "NodeRegistry")  # fmt: skip
    game, round_game = contract("DisputeGame"), contract("DisputeGame", addrs["RoundGame"])
    extra = ("--round-manager", addrs["RoundManager"])
    procs = Processes(run_dir)
    try:
        # the cheating solver, the verifier and the cheating aggregator are there first
        first = (cheat, VERIFIER, CHEATER)
        for p in first:
            procs.start(p, url, addrs["JobManager"], *extra)
        _wait("registrations",
              lambda: all(registry.functions.roleOf(p.address).call() for p in first),
              180, procs, tuple(p.name for p in first))  # fmt: skip
        procs.start(SUBMITTER, url, addrs["JobManager"], *extra, "--spec", str(spec),
                    "--reward", "20", "--verification-fee", "2", "--claim-window", "8",
                    "--compute-time", "120")  # fmt: skip

        def cheated() -> int:
            if rm.functions.jobCount().call() == 0:
                return 0
            for s in range(shards):
                job = rm.functions.unitJobOf(1, 0, s).call()
                if manager.functions.getUnit(job << 32).call()[9] == cheat.address:
                    return job
            return 0

        _wait("the cheating solver's assignment", lambda: cheated() != 0, 300, procs,
              ("submitter",))  # fmt: skip
        cheated_unit = cheated()
        for p in honest:
            procs.start(p, url, addrs["JobManager"], *extra)

        def resolved() -> bool:
            logs = manager.events.DisputeResolved().get_logs(from_block=0)
            return any(ev["args"]["unitId"] >> 32 == cheated_unit for ev in logs)

        _wait("the game over the cheating solver's unit", resolved, 600, procs, ("submitter",))
        _kill9(procs, cheat.name)  # caught and slashed: it takes no further part
        _wait("the cheating aggregate",
              lambda: rm.functions.getRound(1, 0).call()[3] == CHEATER.address,
              600, procs, ("submitter", CHEATER.name))  # fmt: skip
        procs.start(HONEST, url, addrs["JobManager"], *extra)
        _wait("job completion", lambda: procs.procs["submitter"].poll() is not None, 1200,
              procs, (HONEST.name,))  # fmt: skip
    finally:
        procs.stop_all()
    log = (run_dir / "submitter.log").read_text()
    if procs.procs["submitter"].returncode != 0:
        raise DemoError(f"the submitter failed: {log[-1500:]}")
    result = json.loads(next(ln for ln in log.splitlines() if '"units"' in ln))
    agg_proved = round_game.events.ElementProved().get_logs(from_block=0)
    return {
        "result": result,
        "cheating_solver": cheat.address,
        "cheat": fault,
        "cheated_unit_job": cheated_unit,
        "cheating_solver_slashed": slashed(registry, cheat.address),
        "unit_games": unit_games(game),
        "cheating_aggregator": CHEATER.address,
        "honest_aggregator": HONEST.address,
        "aggregates": [
            {
                "round": ev["args"]["round"],
                "aggregator": ev["args"]["aggregator"],
                "root": "0x" + bytes(ev["args"]["aggregateRoot"]).hex(),
            }
            for ev in rm.events.AggregateCommitted().get_logs(from_block=0)
        ],  # fmt: skip
        "aggregate_challenges": [
            {
                "round": ev["args"]["round"],
                "challenger": ev["args"]["challenger"],
                "game": ev["args"]["gameId"],
            }
            for ev in rm.events.AggregateChallenged().get_logs(from_block=0)
        ],  # fmt: skip
        "aggregate_games": [
            {
                "round": ev["args"]["round"],
                "game": ev["args"]["gameId"],
                "challenger_won": ev["args"]["challengerWon"],
            }
            for ev in rm.events.AggregateDisputeResolved().get_logs(from_block=0)
        ],  # fmt: skip
        "aggregate_elements_proved": [
            {
                "game": ev["args"]["gameId"],
                "element": ev["args"]["element"],
                "claimed": ev["args"]["claimed"],
                "correct": ev["args"]["correct"],
            }
            for ev in agg_proved
        ],  # fmt: skip
        "cheating_aggregator_credits": rm.functions.credits(CHEATER.address).call(),
    }


def fetch(url: str, addrs: dict, run_dir: Path) -> dict:
    """`job fetch --decomposed 1`: G_R from the final aggregate's blob, checked on chain."""
    deployment = run_dir / "deployment.json"
    deployment.write_text(json.dumps({"format": "vtp.deployment.v1", "rpc_url": url,
                                      "block": 0, "contracts": addrs}))  # fmt: skip
    out = _cli(
        [
            "job",
            "fetch",
            "1",
            "--decomposed",
            "--deployment",
            str(deployment),
            "--out",
            str(run_dir / "gpt.safetensors"),
            "--allow-local-locators",
            "--json",
        ]
    )
    return json.loads(out.splitlines()[-1])


def run(rpc_url: str | None, rounds: int, shards: int, run_dir: Path = RUN_DIR) -> dict:
    started = time.monotonic()
    if run_dir.exists():
        shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True)
    spec, local, fault = build(run_dir, rounds, shards)

    def on(url: str) -> dict:
        w3 = connect(url)
        addrs = deploy_all(w3, dev_private_key(0), DEFAULT_ABI_DIR, deploy_params())
        out = scenario(w3, url, addrs, run_dir, spec, fault, shards)
        out["fetched"] = fetch(url, addrs, run_dir)
        out["contracts"] = addrs
        return out

    if rpc_url:
        out = on(rpc_url)
    else:
        with local_anvil(AnvilConfig(block_time=1)) as url:
            out = on(url)
    out["local"] = local
    out["root_matches_local_run"] = (
        out["result"]["final_state_root"] == out["fetched"]["state_root"] == local["final_root"]
    )
    out["wall_time_s"] = round(time.monotonic() - started, 1)
    return out


def summary(report: dict) -> str:
    r, local = report["result"], report["local"]
    lines = [
        f"decomposed version-3 job {r['job_id']} (char GPT): {r['rounds']} rounds x "
        f"{r['shards']} shards",
        f"  fetched G_R root   {report['fetched']['state_root']}",
        f"  train --spec root  {local['final_root']}  "
        f"({'bit-identical' if report['root_matches_local_run'] else 'DIFFERENT'})",
        f"  val loss           {r['val_loss']:.4f}",
        "  units:",
    ]
    for u in r["units"]:
        lines.append(f"    ({u['round']}, {u['shard']}) job {u['job_id']}  solver {u['solver']}  "
                     f"attempts {u['attempts']}")  # fmt: skip
    for g in report["unit_games"]:
        t0, shards, shard = g["placement"]
        won = "challenger" if g["challenger_won"] else "defender"
        how = "on time" if g["by_timeout"] else f"one-step proof at element {g['element']}"
        lines.append(f"  unit job {g['unit_job']} (t0 {t0}, shard {shard} of {shards}): game "
                     f"{g['game']}, {won} won ({how})")  # fmt: skip
    lines.append(f"  cheating solver {report['cheating_solver']} slashed "
                 f"{report['cheating_solver_slashed'] / TOKEN:g} tokens")  # fmt: skip
    for c, g in zip(report["aggregate_challenges"], report["aggregate_games"], strict=False):
        what = "overturned" if g["challenger_won"] else "stood"
        lines.append(f"  round {c['round']}: aggregate challenged by {c['challenger']} (game "
                     f"{c['game']}): {what}")  # fmt: skip
    for a in report["aggregates"]:
        lines.append(f"  round {a['round']}: H committed by {a['aggregator']} {a['root'][:18]}…")
    lines.append(f"  wall time {report['wall_time_s']} s; report {REPORT}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="make demo DEMO=decomposed", description=__doc__.split("\n")[0]
    )
    p.add_argument("--rpc-url", help="an existing dev chain (default: a fresh local Anvil)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--shards", type=int, default=4)
    args = p.parse_args(argv)
    try:
        report = run(args.rpc_url, args.rounds, args.shards)
    except (ChainUnavailable, DeploymentError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except DemoError as exc:
        print(f"demo failed: {exc}", file=sys.stderr)
        return 1
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    REPORT.write_text(json.dumps(report, indent=2, default=str) + "\n")
    print(summary(report))
    return 0 if report["root_matches_local_run"] else 1


if __name__ == "__main__":
    sys.exit(main())
