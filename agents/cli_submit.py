"""`python -m agents submit`: post a job and follow it to its end with a live view.

The submitter role (agents/roles/submitter.py) does the work — publish the spec, escrow the
reward, post, register the dispute config, take the keeper steps, fetch and check the final
model — and this command adds what a person at a terminal wants to see: after every round the
job as `job status` shows it (each unit's phase, the disputes and their winners, the chain time
left in the window), redrawn in place on a terminal, printed again whenever something changed
otherwise. Exit 0 when the job completed; a cancelled job or any other end is one error line
(exit 2). `--no-follow` posts and exits; `job status ID` follows up later. A version-2 spec
(R x S unit jobs through the RoundManager) is followed by the role's log alone.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import sys
from typing import Any

from agents.roles.errors import RoleError
from agents.roles.submitter import Submitter


def register(sub: argparse._SubParsersAction) -> None:
    from agents.roles.runner import role_parser
    from agents.roles.submitter import add_job_args

    p = role_parser(sub, "submit", "post a training job and follow it to its end (live view)")
    add_job_args(p)
    p.add_argument(
        "--no-follow",
        action="store_true",
        help="post the job and exit (`python -m agents job status ID` reads it later)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from agents.roles.runner import run_role

    return run_role(FollowedSubmitter, args)


class FollowedSubmitter(Submitter):
    """The submitter role plus the job's view after every round."""

    def __init__(self, *a: Any, **kw: Any) -> None:
        super().__init__(*a, **kw)
        self.reader: Any = None
        self.shown: tuple | None = None
        self.live: Any = None

    async def setup(self) -> None:
        from agents.roles.addresses import deployment_block
        from agents.roles.job_reads import JobReader
        from agents.training import spec as specs

        await super().setup()
        if self.spec.version == specs.SPEC_VERSION_DECOMPOSED:
            # R x S unit jobs through the RoundManager: the role's log is the view
            return
        status = f"python -m agents job status {self.job_id} --deployment {self.args.deployment}"
        print(f"job {self.job_id} posted: `{status}` reads it", flush=True)
        start = deployment_block(self.args.deployment, self.manager.address)
        self.reader = JobReader(self.w3, self.manager, self.job_id, start)

    async def round(self) -> bool:
        if self.args.no_follow:
            # posted; the dispute config (without which no solver takes the job) is retried
            # each round until the chain holds it
            await self.ensure_configs()
            return self.configured
        try:
            done = await super().round()
        except RoleError:
            await self.show()  # the view that explains the end
            raise
        await self.show()
        return done

    async def show(self) -> None:
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
        return self.progress and sys.stdout.isatty()

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
        super().close()
