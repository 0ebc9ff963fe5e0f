"""Run the whole suite under `ape test` on the selected provider.

`--provider foundry` (default) runs contract tests on an Anvil that ape-foundry starts on a free
port and stops at the end; `--provider test` uses ape's embedded py-evm chain. A run that
collects no test is a failure (pytest exit code 5), so CI never passes on an empty run.

The suite runs as two `ape test` processes side by side: the scenarios (role and reliability
tests, every role an OS process on a private Anvil) spend most of their wall time waiting for
on-chain deadlines and use little CPU, the rest is CPU-bound; one after the other, a 2-core CI
machine had a core idle for most of the scenarios' minutes. `--serial`, or any extra pytest
argument (a filtered run), runs one process.
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
# Each also runs `make demo` (scripts/demo.py), which writes build/demo/: one process only.
SCENARIOS = ["tests/roles", "tests/reliability", "tests/foundation/test_demo.py"]


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
        ignore = [f"--ignore={path}" for path in SCENARIOS]
        cmds = {
            "scenarios": _cmd(args.provider, SCENARIOS, args.pytest_args),
            "rest": _cmd(args.provider, ["tests", *ignore], args.pytest_args),
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
