"""`python -m agents aggregator`: one long-running process (agents/roles/aggregator.py)."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    from agents.roles.aggregator import register as add_parser

    add_parser(sub).set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from agents.roles.aggregator import Aggregator
    from agents.roles.runner import run_role

    return run_role(Aggregator, args)
