"""`python -m agents <command>` (or `vtp <command>`): the dispatcher over the command groups.

Each group is a module of this package exposing `register(subparsers)`, which adds its parsers
and sets `func` (add a group by adding it to GROUPS). A command parses once into its frozen
config and calls down. User errors (a bad flag or input, the engine's validation errors, a role
refusing to start) print one line to stderr and exit 2.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys
from pathlib import Path

from agents.cli.errors import UserError

GROUPS = ("train", "job", "dataset", "graph", "submit", "roles", "node", "deploy", "explore")


def _user_error_types() -> tuple[type[BaseException], ...]:
    from agents.core.config import ConfigError
    from agents.core.spec_files import SourcesError
    from agents.data.builtin import DatasetError
    from agents.model.hf import HfError
    from agents.roles.errors import RoleError
    from agents.training.registry import GraphError, TritonUnavailable
    from agents.training.spec import JobSpecError

    return (UserError, ConfigError, RoleError, JobSpecError, DatasetError, GraphError,
            TritonUnavailable, SourcesError, HfError)  # fmt: skip


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage mistake is one line on stderr (exit 2), like every user error."""

    def error(self, message: str):
        self.exit(2, f"error: {self.prog}: {message} (see --help)\n")


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The whole command line; given `argv` whose first word names a group, that group's parsers
    alone (a group's module imports what its commands declare: `job build` never imports the
    chain client, ~1 s)."""
    prog = "vtp" if Path(sys.argv[0]).name == "vtp" else "python -m agents"
    p = _Parser(prog=prog, description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    named = [argv[0]] if argv and argv[0] in GROUPS else GROUPS
    for name in named:
        importlib.import_module(f"agents.cli.{name}").register(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser(argv).parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except _user_error_types() as e:
        from agents.core.config import ConfigError

        # a ConfigError's every problem, on the one line
        print(f"error: {'; '.join(e.problems) if isinstance(e, ConfigError) else e}",
              file=sys.stderr)  # fmt: skip
        return 2
    except BrokenPipeError:
        return 0


#: Commands whose process ends as soon as they return: their output is written (blobs fsynced,
#: files closed) and printed, and what is left is the interpreter's teardown of the ~900 modules
#: tracing imports (torch._dynamo's sympy and triton): ~0.7 CPU s of `job build`'s 5.
_EXIT_AT_ONCE = {("job", "build")}


def entry() -> None:
    """`vtp` and `python -m agents`: main() on the process's arguments, then its exit."""
    argv = sys.argv[1:]
    rc = main(argv)
    if tuple(argv[:2]) in _EXIT_AT_ONCE:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(BrokenPipeError):  # a reader gone: as at a normal exit
                stream.flush()
        os._exit(rc)
    sys.exit(rc)
