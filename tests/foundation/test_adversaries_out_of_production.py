"""The test adversaries stay out of the production path (issue #27): the cheating behaviours
(--cheat, --false-truth, --lazy, --cheat-challenge, --withhold, the lying players, the faulty
accounts of a claim) live in agents/adversaries, handed to a role at start-up by
agents/cli/adversaries.py; no production module names them in its code. An import-linter
contract (pyproject) keeps the package unimported; this test keeps its vocabulary out of the
code itself, so no `if self.fault` / `if lazy` branch creeps back into an honest agent's path.
Docstrings and comments may still say what an adversary does."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
AGENTS = REPO / "agents"

#: Words of an identifier that name a cheat (identifiers are split at "_" and case changes).
CHEAT_WORDS = {"fault", "faults", "faulty", "cheat", "cheats", "cheating", "cheater", "lazy",
               "liar", "liars", "lying", "false_truth"}  # fmt: skip

#: Not production: the adversaries, the start-up wiring that selects them, and the economics
#: model, whose vocabulary is the strategies it prices (lazy verifiers, cheating solvers).
NOT_PRODUCTION = ("adversaries/", "cli/adversaries.py", "economics/")


def words(identifier: str) -> set[str]:
    parts = [p.lower() for p in re.findall(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])", identifier)]
    joined = {f"{a}_{b}" for a, b in zip(parts, parts[1:], strict=False)}
    return set(parts) | joined


def identifiers(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """(line, name) of every name the code uses or defines: variables, attributes, functions,
    classes, parameters, keyword arguments and imports (not strings, docstrings or comments)."""
    for n in ast.walk(tree):
        if isinstance(n, ast.Name):
            yield n.lineno, n.id
        elif isinstance(n, ast.Attribute):
            yield n.lineno, n.attr
        elif isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            yield n.lineno, n.name
        elif isinstance(n, ast.arg):
            yield n.lineno, n.arg
        elif isinstance(n, ast.keyword) and n.arg is not None:
            yield n.value.lineno, n.arg
        elif isinstance(n, ast.alias):
            yield n.lineno, n.asname or n.name.rsplit(".", 1)[-1]


def cheat_names(source: str) -> list[tuple[int, str]]:
    return sorted({(line, name) for line, name in identifiers(ast.parse(source))
                   if words(name) & CHEAT_WORDS})  # fmt: skip


def production_modules() -> list[Path]:
    out = []
    for path in sorted(AGENTS.rglob("*.py")):
        rel = path.relative_to(AGENTS).as_posix()
        if not rel.startswith(NOT_PRODUCTION):
            out.append(path)
    return out


def test_no_production_module_names_a_cheat_in_its_code():
    found = [
        f"agents/{path.relative_to(AGENTS).as_posix()}:{line}: {name}"
        for path in production_modules()
        for line, name in cheat_names(path.read_text())
    ]
    assert not found, "test adversaries named in production code:\n" + "\n".join(found)


def test_the_check_sees_a_cheat_branch_and_not_a_docstring():
    branch = (
        "def commit(self, u):\n"
        '    """A cheating solver commits its fault (a docstring may say so)."""\n'
        "    if self.strategy.fault is not None:  # a comment may say cheat\n"
        "        return self._cheat_computation(u)\n"
        "    lazySlashFactor = 'lazy'\n"
    )
    assert cheat_names(branch) == [(3, "fault"), (4, "_cheat_computation"), (5, "lazySlashFactor")]
    assert cheat_names("def train(self, u):\n    '''Never lazy.'''\n    return u\n") == []
    assert words("FalseTruthSolver") >= {"false_truth"} and "fault" in words("FAULT_KINDS")


def test_the_production_set_holds_the_honest_roles_and_not_the_adversaries():
    rels = {p.relative_to(AGENTS).as_posix() for p in production_modules()}
    honest = {
        "roles/solver.py",
        "roles/verifier.py",
        "roles/aggregator.py",
        "roles/runtime.py",
        "core/tx.py",
        "dispute/player.py",
        "dispute/trace.py",
        "dispute/model_trace.py",
    }
    assert honest <= rels
    assert "cli/roles.py" in rels  # the role commands are production code; their wiring isn't
    assert not any(r.startswith(("adversaries/", "cli/adversaries.py")) for r in rels)
