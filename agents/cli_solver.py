"""`python -m agents solver`: one long-running process (agents/roles/solver.py)."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    from agents.roles.solver import register as add_parser

    add_parser(sub).set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from agents.adversaries import solver_strategy
    from agents.roles.runner import run_role
    from agents.roles.solver import Solver

    # the only place a test adversary (--lazy, --cheat, ...) is chosen: the role knows none
    return run_role(Solver, args, strategy=solver_strategy)
