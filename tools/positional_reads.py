"""Find positional reads of contract call results in Python sources (issue #27).

A positional read (`fn.call()[12]`, or `job = fn.call()` then `job[4]`) silently reads the
wrong field once a struct or an output list gains a member; a named read (an ABI output name)
fails loudly instead. Two shapes are found, by the AST:

- `<expr>.call(...)[<int>]`, possibly through further int subscripts (`.call()[4][5]`);
- `<name>[<int>]` where, in the same function, `<name>` was assigned `<expr>.call(...)`, or an
  int subscript of one or of such a name (`u = fn.call()`, `p = u[4]`, then `p[0]`).

A value passed through another function or unpacked (`a, b = fn.call()`) is not followed.

`KNOWN` is the ratchet: the reads each file still has. `make lint` runs this module and fails
when a file has more or fewer than that (fewer: lower its number, so it cannot grow back).
"""

from __future__ import annotations

import argparse
import ast
import sys
from dataclasses import dataclass
from pathlib import Path

#: Positional reads allowed per file of agents/: none is left (issue #27). Contracts are bound
#: by `agents.core.bindings.bind`, whose results are decoded by the ABI's names (`u.attempt`).
KNOWN: dict[str, int] = {}


@dataclass(frozen=True, order=True)
class Read:
    path: str
    line: int
    text: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.text}"


def _int_index(node: ast.Subscript) -> bool:
    index = node.slice
    if isinstance(index, ast.UnaryOp) and isinstance(index.op, ast.USub):
        index = index.operand
    return isinstance(index, ast.Constant) and type(index.value) is int


def _is_call_result(node: ast.AST, bound: set[str] = frozenset()) -> bool:
    """`<expr>.call(...)`, a name in `bound` (assigned one), or an int subscript of either
    (a positional tuple still)."""
    if isinstance(node, ast.Subscript) and _int_index(node):
        return _is_call_result(node.value, bound)
    if isinstance(node, ast.Name):
        return node.id in bound
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "call"
    )


def _bound(nodes: list[ast.AST]) -> set[str]:
    """Names a scope assigns a call result (`u = fn.call()`, `p = u[4]`), to a fixed point."""
    assigns = [
        (target.id, node.value)
        for node in nodes
        if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(target, ast.Name)
    ]
    bound: set[str] = set()
    while True:
        more = {name for name, value in assigns if _is_call_result(value, bound)} - bound
        if not more:
            return bound
        bound |= more


def _scopes(tree: ast.Module) -> list[ast.AST]:
    return [tree] + [
        n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
    ]


def _own_nodes(scope: ast.AST) -> list[ast.AST]:
    """The nodes of a scope, not those of the functions nested in it (their own scopes)."""
    out, todo = [], list(ast.iter_child_nodes(scope))
    while todo:
        node = todo.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            continue
        out.append(node)
        todo.extend(ast.iter_child_nodes(node))
    return out


def positional_reads(source: str, path: str = "<source>") -> list[Read]:
    """Every positional read of a call result in `source`, in line order."""
    tree = ast.parse(source)
    found: set[Read] = set()
    for scope in _scopes(tree):
        nodes = _own_nodes(scope)
        bound = _bound(nodes)
        for node in nodes:
            if isinstance(node, ast.Subscript) and _is_call_result(node, bound):
                found.add(Read(path, node.lineno, ast.unparse(node)))
    # `fn.call()[4][5]` is one read, not two: keep the outermost subscript of a line's chain
    return sorted(
        r for r in found if not any(o.line == r.line and r.text + "[" in o.text for o in found)
    )


def reads_in(paths: list[Path]) -> list[Read]:
    out: list[Read] = []
    for path in paths:
        out += positional_reads(path.read_text(), str(path))
    return out


def ratchet(reads: list[Read], files: list[Path], known: dict[str, int]) -> list[str]:
    """What differs from `known` (file -> reads left): one line per file; empty when equal."""
    counts = {str(f): 0 for f in files}
    for r in reads:
        counts[r.path] += 1
    problems = []
    for path, n in sorted(counts.items()):
        want = known.get(path, 0)
        if n > want:
            new = [str(r) for r in reads if r.path == path]
            problems.append(f"{path}: {n} positional reads, {want} allowed:\n  " + "\n  ".join(new))
        elif n < want:
            problems.append(f"{path}: {n} positional reads left: lower KNOWN[{path!r}] to {n}")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, nargs="?", default=Path("agents"))
    parser.add_argument("--list", action="store_true", help="print every read found")
    args = parser.parse_args()
    files = sorted(args.folder.rglob("*.py"))
    reads = reads_in(files)
    if args.list:
        print("\n".join(map(str, reads)))
    problems = ratchet(reads, files, KNOWN)
    for line in problems:
        print(line, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
