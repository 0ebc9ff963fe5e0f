"""`python -m agents aggregator`: one long-running process (agents/roles/aggregator.py)."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    from agents.adversaries.flags import add_aggregator_flags
    from agents.roles.aggregator import register as add_parser

    p = add_parser(sub)
    add_aggregator_flags(p)  # the test adversaries' flags: the role's own parser has none
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from agents.adversaries import aggregator_strategy
    from agents.roles.aggregator import Aggregator
    from agents.roles.runner import run_role

    # the only place a test adversary (--cheat, --withhold) is chosen: the role knows none
    return run_role(Aggregator, args, strategy=aggregator_strategy)
