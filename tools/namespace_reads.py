"""Find parsed command lines read outside the CLI package (issue #39).

Every command parses once, in agents/cli/, into a frozen config (agents/roles/config.py for the
roles); the code below it takes config objects. A module outside agents/cli/ that imports
argparse, names a `Namespace`, calls `parse_args` / `parse_known_args`, or reads a setting with
`getattr(args, "x", default)` (the shape of a Namespace passed down, `args` or `self.args`) has
a parsed command line travelling into it (or makes one): each such line is reported, by the
AST.

`make lint` runs this module over agents/ and fails when it finds any.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path

#: The one package that may parse and read a command line (and the `python -m agents` entry).
ALLOWED = ("cli",)
PARSE_CALLS = ("parse_args", "parse_known_args", "parse_intermixed_args")


@dataclass(frozen=True, order=True)
class Read:
    path: str
    line: int
    text: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.text}"


def namespace_reads(source: str, path: str = "<source>") -> list[Read]:
    """Every argparse import, Namespace name and parse call in `source`, in line order."""
    found: list[Read] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "argparse":
                    found.append(Read(path, node.lineno, f"import {alias.name}"))
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "argparse":
            names = ", ".join(a.name for a in node.names)
            found.append(Read(path, node.lineno, f"from argparse import {names}"))
        elif isinstance(node, ast.Attribute) and node.attr == "Namespace":
            found.append(Read(path, node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.Name) and node.id == "Namespace":
            found.append(Read(path, node.lineno, "Namespace"))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in PARSE_CALLS
        ):
            found.append(Read(path, node.lineno, ast.unparse(node.func) + "(...)"))
        elif _getattr_of_args(node):
            found.append(Read(path, node.lineno, ast.unparse(node)))
    return sorted(set(found))


def _getattr_of_args(node: ast.AST) -> bool:
    """`getattr(args, ...)` or `getattr(<x>.args, ...)`."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
        return False
    if node.func.id != "getattr" or not node.args:
        return False
    target = node.args[0]
    return (isinstance(target, ast.Name) and target.id == "args") or (
        isinstance(target, ast.Attribute) and target.attr == "args"
    )


def outside_cli(folder: Path) -> list[Path]:
    """The Python files of the package `folder` (agents/) outside its CLI package."""
    return [
        p for p in sorted(folder.rglob("*.py"))
        if p.relative_to(folder).parts[0] not in ALLOWED
    ]  # fmt: skip


def reads_in(paths: list[Path]) -> list[Read]:
    out: list[Read] = []
    for path in paths:
        out += namespace_reads(path.read_text(), str(path))
    return out


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    folder = Path(args[0] if args else "agents")
    reads = reads_in(outside_cli(folder))
    for r in reads:
        print(f"{r}  (a parsed command line outside {folder}/cli/: take a config object)")
    return 1 if reads else 0


if __name__ == "__main__":
    sys.exit(main())
