"""`python -m agents node ACTION`: a node operator's one-shot commands (agents/roles/node.py)."""

from __future__ import annotations

import argparse

from agents.cli.options import build
from agents.cli.roles import role_parser
from agents.roles.config import NodeConfig


def register(sub: argparse._SubParsersAction) -> None:
    p = role_parser(
        sub, "node", NodeConfig,
        "a node operator's own stake and pay: status, add-stake, unbond (or leave the role: "
        "unbond all), withdraw-unbonded, withdraw (stop the role agent first)",
    )  # fmt: skip
    p.set_defaults(func=run)


def run(ns: argparse.Namespace) -> int:
    from agents.roles.node import NodeCommand
    from agents.roles.runner import run_role

    return run_role(NodeCommand, build(NodeConfig, ns))
