"""Role tests: agents as OS processes against a private Anvil each (web3.py, no ape), so they
pass whichever provider the suite runs with."""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # scripts.demo (the demo's helpers) lives at the repo root
    sys.path.insert(0, str(REPO))
