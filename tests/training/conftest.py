"""Engine test configuration: hypothesis profiles (example counts: training_support.py).

`ci` (default) keeps the engine suite within its CI budget; `fuzz` (HYPOTHESIS_PROFILE=fuzz,
used by `make fuzz`) multiplies the examples of every `@pytest.mark.fuzz` test. The suite-wide
tests/conftest.py normally registers both profiles first; they are registered here too so this
directory also runs on its own.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings
from hypothesis.errors import InvalidArgument

_BASE = dict(deadline=None, print_blob=True, suppress_health_check=list(HealthCheck))
for _name, _extra in (("ci", {"derandomize": True}), ("fuzz", {"max_examples": 5_000})):
    try:
        settings.get_profile(_name)
    except InvalidArgument:
        settings.register_profile(_name, **_BASE, **_extra)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
