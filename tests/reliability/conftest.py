"""Reliability tests: fault-injection trials from bench/reliability_bench.py (the same code
`make reliability` runs with the full trial counts), a few seeded trials per fault class."""

from __future__ import annotations

import sys
from pathlib import Path

ROLES = Path(__file__).resolve().parents[1] / "roles"
if str(ROLES) not in sys.path:  # rolekit (the repository root is tests/conftest.py's)
    sys.path.insert(0, str(ROLES))
