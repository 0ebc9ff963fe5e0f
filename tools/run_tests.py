"""Run the whole suite under `ape test` on the selected provider.

`--provider foundry` (default) runs contract tests on an Anvil that ape-foundry starts on a free
port and stops at the end; `--provider test` uses ape's embedded py-evm chain. A run that
collects no test is a failure (pytest exit code 5), so CI never passes on an empty run.

The suite runs as three `ape test` processes side by side: the scenarios (role and reliability
tests, every role an OS process on a private Anvil) spend about half their wall time waiting
for their agents' polls and receipts and use half a core, the rest is CPU-bound. In one process
the scenarios were the critical path (17 of a 20-minute CI run on 2 cores, the rest done after
15); in two they took 9 and 10 minutes and the rest 15, so the longest test of the rest moved
into the shorter scenario group. `--serial`, or any extra pytest argument (a filtered run), runs
one process.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

NETWORKS = {"foundry": "ethereum:local:foundry", "test": "ethereum:local:test"}
# The scenario tests in two groups; with them, the contracts' stateful test (about 4 of the rest's
# 15 minutes on 2 cores), so that each of the three processes takes 12-16 minutes (the longest
# e2e tests, 1-2 minutes each, balance them: the false-truth and held-dispute e2e tests moved
# from B to A; with the stateful test at 200 sequences a fresh-clone run measured A 14:18,
# B 12:54, rest 12:30). Both demo
# tests run `scripts/demo.py`, which writes build/deployment.json: one group only.
SCENARIOS_A = [
    "tests/reliability",
    "tests/roles/test_decomposed_job.py",
    "tests/roles/test_false_truth_e2e.py",
    "tests/roles/test_held_dispute_e2e.py",
    "tests/contracts/test_invariants.py",
    # a job on a packed dataset through the agents (about 3.5 minutes)
    "tests/data/test_data_dispute_e2e.py",
    # (tests/dispute/test_model_game.py, 200+ games over four models, about 6.5 minutes, runs
    # in the rest: in a CI run with it here A took 39.7 minutes, B about 32, the rest 18)
    # the GPT demo (about 4 minutes; it writes build/demo/gpt/, apart from the MLP demo's files)
    # and the README's journey (about 3.5): in B, with the token-stream e2e, the fetch e2e and
    # the rest of tests/roles, a fresh-clone run took B past 36 minutes with A done at 22
    "tests/roles/test_demo_gpt_e2e.py",
    "tests/roles/test_readme_journey.py",
    # a 1M-parameter GPT's data requests through the agents, twice (about 5 minutes)
    "tests/roles/test_availability_e2e.py",
    # issue #40's must-show, smaller: a 2 x 2 char GPT job of version 3 with a cheating solver
    # and a cheating aggregator (about 4 minutes on 2 loaded cores; B has the honest 2 x 2 one)
    "tests/roles/test_decomposed_gpt_e2e.py",
]
# The dispute-game tests (CPU-bound, about 5 minutes) run in B, all but test_game.py: in a
# fresh-clone run on 2 cores with them in the rest, A took 19.4, B 18.2 and the rest 23.6
# minutes, with one core idle for the last four; with all of them in B, A 16.0, B 17.9 and the
# rest 13.8.
DISPUTE_IN_B = ["soundness", "game_reverts", "unit_game", "frontrun", "trace_cache"]
SCENARIOS_B = [
    "tests/roles",
    # a char-GPT job on a packed token stream through the agents (about 2.5 minutes)
    "tests/data/test_data_token_e2e.py",
    "tests/foundation/test_demo.py",
    *[f"tests/dispute/test_{name}.py" for name in DISPUTE_IN_B],
]
SCENARIOS = [*SCENARIOS_A, *SCENARIOS_B]


def _cmd(provider: str, paths: list[str], extra: list[str]) -> list[str]:
    return [
        os.path.join(os.path.dirname(sys.executable), "ape"),
        "test",
        *paths,
        "--network",
        NETWORKS[provider],
        "-p",
        "no:cacheprovider",
        # the slowest tests, so a CI log shows where its minutes go
        "--durations=25",
        *extra,
    ]


def _ignoring(paths: list[str]) -> list[str]:
    return [f"--ignore={path}" for path in paths]


def _run_side_by_side(cmds: dict[str, list[str]], env: dict) -> dict[str, int]:
    """Start every command, print each one's output once it ended (no interleaving)."""
    codes: dict[str, int] = {}
    with tempfile.TemporaryDirectory(prefix="run_tests-") as tmp:
        procs = {}
        for name, cmd in cmds.items():
            print(f"+ [{name}] {' '.join(cmd)}", flush=True)
            log = open(Path(tmp) / f"{name}.log", "wb")  # noqa: SIM115 - closed below
            procs[name] = (
                subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT),
                log,
            )
        started = time.monotonic()
        try:
            while len(codes) < len(procs):
                for name, (proc, log) in procs.items():
                    if name in codes or proc.poll() is None:
                        continue
                    log.close()
                    codes[name] = proc.returncode
                    minutes = (time.monotonic() - started) / 60
                    print(f"===== [{name}] exit {proc.returncode} after {minutes:.1f} min =====")
                    sys.stdout.write((Path(tmp) / f"{name}.log").read_text(errors="replace"))
                    sys.stdout.flush()
                time.sleep(1)
        finally:  # interrupted: pytest's KeyboardInterrupt path stops what its tests started
            for name, (proc, log) in procs.items():
                if name in codes:
                    continue
                try:  # a terminal's Ctrl-C reached it already; else pass the interrupt on
                    proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    proc.send_signal(signal.SIGINT)
                    try:
                        proc.wait(timeout=30)
                    except subprocess.TimeoutExpired:
                        proc.kill()
                        proc.wait()
                log.close()
                print(f"===== [{name}] interrupted =====")
                sys.stdout.write((Path(tmp) / f"{name}.log").read_text(errors="replace"))
    return codes


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--provider", choices=sorted(NETWORKS), default="foundry")
    parser.add_argument("--serial", action="store_true", help="one ape process for the suite")
    parser.add_argument("pytest_args", nargs="*", help="extra arguments passed to pytest")
    args = parser.parse_args()
    env = dict(os.environ, VTP_PROVIDER=args.provider)
    if args.serial or args.pytest_args:
        cmd = _cmd(args.provider, ["tests"], args.pytest_args)
        print("+", " ".join(cmd), flush=True)
        codes = {"tests": subprocess.call(cmd, env=env)}
    else:
        cmds = {  # no extra pytest arguments here (they select the serial run above)
            "scenarios-a": _cmd(args.provider, SCENARIOS_A, []),
            "scenarios-b": _cmd(args.provider, [*SCENARIOS_B, *_ignoring(SCENARIOS_A)], []),
            "rest": _cmd(args.provider, ["tests", *_ignoring(SCENARIOS)], []),
        }
        try:
            codes = _run_side_by_side(cmds, env)
        except KeyboardInterrupt:
            print("interrupted", file=sys.stderr)
            return 130
    for name, code in codes.items():
        if code == 5:
            print(f"error: no tests were collected ({name})", file=sys.stderr)
    if any(code != 0 for code in codes.values()):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
