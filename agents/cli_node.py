"""`python -m agents node ACTION`: a node operator's one-shot commands (agents/roles/node.py)."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    from agents.roles.node import register as add_parser

    add_parser(sub).set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from agents.roles.node import NodeCommand
    from agents.roles.runner import run_role

    return run_role(NodeCommand, args)
