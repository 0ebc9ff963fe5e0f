"""The error types of the roles: a fatal problem reported in one line (exit code 2), and a job an
agent does not take part in (`JobRejected`, with `rejecting`, which turns any error of a job's
published data into one).

Their own module so that the shared role helpers (decomposed.py, addresses.py, runtime.py) raise
them without importing the runner or jobs.py, which import those helpers.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator


class RoleError(RuntimeError):
    """A fatal problem a role reports in one line (exit code 2)."""


class JobRejected(RuntimeError):
    """The job's published data does not match its on-chain commitments (or is missing)."""


@contextlib.contextmanager
def rejecting(what: str) -> Iterator[None]:
    """Turn any error of building a job from its published data into JobRejected: that data
    decides what the spec parser, dataset, engine and graph see, so an error there is the job's,
    not the agent's. OSError (this machine's disk) is left to the caller's retry."""
    try:
        yield
    except (JobRejected, OSError):
        raise
    except Exception as exc:  # a hostile spec must not end the agent: refuse the job
        reason = str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__
        raise JobRejected(f"{what}: {reason}") from None
