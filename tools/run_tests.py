"""Run the whole suite under `ape test` on the selected provider.

`--provider foundry` (default) runs contract tests on an Anvil that ape-foundry starts on a free
port and stops at the end; `--provider test` uses ape's embedded py-evm chain. A run that
collects no test is a failure (pytest exit code 5), so CI never passes on an empty run.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

NETWORKS = {"foundry": "ethereum:local:foundry", "test": "ethereum:local:test"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--provider", choices=sorted(NETWORKS), default="foundry")
    parser.add_argument("pytest_args", nargs="*", help="extra arguments passed to pytest")
    args = parser.parse_args()
    env = dict(os.environ, VTP_PROVIDER=args.provider)
    cmd = [
        os.path.join(os.path.dirname(sys.executable), "ape"),
        "test",
        "tests",
        "--network",
        NETWORKS[args.provider],
        "-p",
        "no:cacheprovider",
        # the slowest tests, so a CI log shows where its minutes go
        "--durations=25",
        *args.pytest_args,
    ]
    print("+", " ".join(cmd), flush=True)
    code = subprocess.call(cmd, env=env)
    if code == 5:
        print("error: no tests were collected", file=sys.stderr)
        return 1
    return code


if __name__ == "__main__":
    sys.exit(main())
