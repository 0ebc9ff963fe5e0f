"""Reliability tests: fault-injection trials from bench/reliability_bench.py (the same code
`make reliability` runs with the full trial counts), a few seeded trials per fault class."""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
for path in (REPO, REPO / "tests" / "roles"):  # bench.*, scripts.demo and rolekit
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))
