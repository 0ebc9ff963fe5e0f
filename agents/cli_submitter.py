"""`python -m agents submitter`: one long-running process (agents/roles/submitter.py)."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    from agents.roles.submitter import register as add_parser

    add_parser(sub).set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from agents.roles.runner import run_role
    from agents.roles.submitter import Submitter

    return run_role(Submitter, args)
