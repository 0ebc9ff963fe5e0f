"""Suite-wide test configuration.

Hypothesis profiles: `ci` (default; bounded so `make test` fits the CI budget) and `fuzz` (the
long profile `make fuzz` selects with HYPOTHESIS_PROFILE=fuzz). Tests that need a different
example count per profile read `EXAMPLES[profile]`-style values from their own conftest.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from hypothesis import HealthCheck, settings

# The repository root on sys.path, for every test directory: tests use `bench`, `scripts` and
# `tools`, which are not part of the installed `agents` package.
REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

settings.register_profile(
    "ci",
    deadline=None,
    derandomize=True,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "fuzz",
    deadline=None,
    max_examples=5_000,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

PROVIDER = os.environ.get("VTP_PROVIDER", "foundry")
