"""Run every benchmark in bench/ (files named *_bench.py), each in its own process.

Each benchmark writes its own JSON under bench/results/. Benchmarks that need a chain start
their own (ape's foundry provider or a private Anvil); nothing here times anything itself.
Usage: python -m tools.run_bench [name ...]   (names without the _bench.py suffix)
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

BENCH_DIR = Path("bench")
#: Benchmarks run only when named: those with a target of their own (`make reliability`), and
#: the pipeline's network bench, which needs root for its network namespaces (`sudo
#: .venv/bin/python -m tools.run_bench pipeline`).
OWN_TARGET = {"reliability", "aggregator_crash", "decomposed_faults", "pipeline"}


def main(argv: list[str]) -> int:
    scripts = sorted(BENCH_DIR.glob("*_bench.py"))
    if argv:
        wanted = set(argv)
        scripts = [s for s in scripts if s.name.removesuffix("_bench.py") in wanted]
        missing = wanted - {s.name.removesuffix("_bench.py") for s in scripts}
        if missing:
            print(f"error: no benchmark named {', '.join(sorted(missing))}", file=sys.stderr)
            return 2
    else:
        scripts = [s for s in scripts if s.name.removesuffix("_bench.py") not in OWN_TARGET]
    failures = []
    for script in scripts:
        print(f"== {script}", flush=True)
        started = time.monotonic()
        module = f"bench.{script.stem}"
        code = subprocess.call([sys.executable, "-m", module])
        print(f"== {script} exited {code} after {time.monotonic() - started:.0f} s", flush=True)
        if code != 0:
            failures.append(script.name)
    if failures:
        print(f"error: failed benchmarks: {', '.join(failures)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
