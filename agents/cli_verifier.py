"""`python -m agents verifier`: one long-running process (agents/roles/verifier.py)."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    from agents.adversaries.flags import add_verifier_flags
    from agents.roles.verifier import register as add_parser

    p = add_parser(sub)
    add_verifier_flags(p)  # the test adversaries' flags: the role's own parser has none
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from agents.adversaries import verifier_strategy
    from agents.roles.runner import run_role
    from agents.roles.verifier import Verifier

    # the only place a test adversary (--lazy, --cheat, ...) is chosen: the role knows none
    return run_role(Verifier, args, strategy=verifier_strategy)
