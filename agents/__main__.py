"""`python -m agents <command>`: a dispatcher over subcommand modules.

Each subcommand lives in its own module `agents/cli_<name>.py` exposing `register(subparsers)`
(adds its parser and sets `func`) — add a role by adding a module to COMMANDS. User errors
(`UserError` and the engine's validation errors) print one line to stderr and exit 2.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from agents.cli_errors import UserError

COMMANDS = (
    "train",
    "job",
    "dataset",
    "graph",
    "submit",
    "submitter",
    "solver",
    "verifier",
    "whistleblower",
    "aggregator",
    "node",
    "deploy",
    "explore",
)


def _user_error_types() -> tuple[type[BaseException], ...]:
    from agents.data.builtin import DatasetError
    from agents.training.registry import GraphError, TritonUnavailable
    from agents.training.spec import JobSpecError

    return (UserError, JobSpecError, DatasetError, GraphError, TritonUnavailable)


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage mistake is one line on stderr (exit 2), like every user error."""

    def error(self, message: str):
        self.exit(2, f"error: {self.prog}: {message} (see --help)\n")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m agents", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"agents.cli_{name}").register(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except _user_error_types() as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
