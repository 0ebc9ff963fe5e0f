"""`python -m agents submit`: post a job and follow it to its end with a live view.

The submitter role (agents/roles/submitter.py) does the work — publish the spec, escrow the
reward, post the job with its dispute config, take the keeper steps no node took, fetch and
check the final model — and this command adds what a person at a terminal wants to see: after
every round the job as `job status` shows it (each unit's phase, the disputes and their winners,
the chain time left in the window), redrawn in place on a terminal, printed again whenever
something changed otherwise. Exit 0 when the job completed; a cancelled job or any other end is
one error line (exit 2). `--no-follow` posts and exits; `job status ID` follows up later.
`--count N` posts N jobs of the spec at once from this one process (one approval, the posts sent
together) and follows them all (one result line each; no live view). A version-2 spec (R x S
unit jobs through the RoundManager) is followed by the role's log alone. The view is an observer
of the submitter (`LiveView`): it reads and shows, and changes nothing the role does.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import sys
from typing import Any

from agents.cli.options import build
from agents.cli.roles import role_parser
from agents.roles.config import SubmitterConfig


def register(sub: argparse._SubParsersAction) -> None:
    p = role_parser(sub, "submit", SubmitterConfig,
                    "post a training job and follow it to its end (live view)")  # fmt: skip
    p.set_defaults(func=run)


def run(ns: argparse.Namespace) -> int:
    from agents.roles.runner import run_role
    from agents.roles.submitter import Submitter

    config = build(SubmitterConfig, ns)
    return run_role(Submitter, config, observer=LiveView(config))


class LiveView:
    """The job as `job status` shows it, after every round of the submitter it observes
    (agents/roles/submitter.py `JobObserver`): redrawn in place on a terminal, printed again
    whenever a phase or a dispute changed otherwise."""

    def __init__(self, config: SubmitterConfig) -> None:
        self.config = config
        self.reader: Any = None
        self.shown: tuple | None = None
        self.live: Any = None

    async def posted(self, submitter: Any) -> None:
        from agents.roles.addresses import deployment_block
        from agents.roles.job_reads import JobReader
        from agents.training import spec as specs

        if submitter.spec.version == specs.SPEC_VERSION_DECOMPOSED:
            # R x S unit jobs through the RoundManager: the role's log is the view
            return
        deployment = self.config.deployment
        for job_id in submitter.job_ids:
            status = f"python -m agents job status {job_id} --deployment {deployment}"
            print(f"job {job_id} posted: `{status}` reads it", flush=True)
        if len(submitter.job_ids) == 1:  # the live view is of one job
            start = deployment_block(deployment, submitter.manager.address)
            job_id = submitter.job_id
            self.reader = JobReader(submitter.w3, submitter.manager, job_id, start)

    async def after_round(self) -> None:
        from agents.roles.job_view import change_key, render_rich, render_text

        if self.reader is None:
            return
        facts = await self.reader.read()
        if self.terminal:
            if self.live is None:
                self.live = self._start_live(render_rich(facts))
            self.live.update(render_rich(facts))
            return
        key = change_key(facts)
        if key != self.shown:  # printed again only when a phase or a dispute changed
            self.shown = key
            print(render_text(facts) + "\n", flush=True)

    @property
    def terminal(self) -> bool:
        return self.config.progress and sys.stdout.isatty()

    def _start_live(self, first: Any) -> Any:
        """A rich Live display on stdout; the log lines (stderr) print above it."""
        from rich.live import Live

        live = Live(first, refresh_per_second=2, redirect_stderr=True, transient=False)
        live.start()
        # the log handler holds the stderr it was made with: point it at the live's proxy
        for handler in logging.getLogger().handlers:
            if isinstance(handler, logging.StreamHandler):
                handler.setStream(sys.stderr)
        return live

    def close(self) -> None:
        if self.live is not None:
            with contextlib.suppress(Exception):
                self.live.stop()
            for handler in logging.getLogger().handlers:
                if isinstance(handler, logging.StreamHandler):
                    handler.setStream(sys.__stderr__)
