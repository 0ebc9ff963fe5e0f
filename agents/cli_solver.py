"""`python -m agents solver`: one long-running process (agents/roles/solver.py)."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    from agents.adversaries.flags import add_solver_flags
    from agents.roles.solver import register as add_parser

    p = add_parser(sub)
    add_solver_flags(p)  # the test adversaries' flags: the role's own parser has none
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from agents.adversaries import solver_strategy
    from agents.roles.runner import run_role
    from agents.roles.solver import Solver

    # the only place a test adversary (--lazy, --cheat, ...) is chosen: the role knows none
    return run_role(Solver, args, strategy=solver_strategy)
