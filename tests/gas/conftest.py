"""Tests of the gas benchmark's helpers (bench/): the repository root goes on sys.path, as in
tests/reliability, since `bench` is not part of the installed `agents` package."""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
