"""The one error type of the roles: a fatal problem reported in one line (exit code 2).

Its own module so that the shared role helpers (decomposed.py, addresses.py) raise it without
importing the runner, which imports them.
"""

from __future__ import annotations


class RoleError(RuntimeError):
    """A fatal problem a role reports in one line (exit code 2)."""
