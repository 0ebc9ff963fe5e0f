"""`pip install .` alone gives a working agent for every documented blob backend: each package
agents/core/blobs.py imports (function-local imports too: `s3://` imports boto3 only when used)
is a main dependency of the project or comes with one, not only with the dev extras."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib import metadata
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BLOBS = REPO / "agents" / "core" / "blobs.py"


def _name(requirement: str) -> str:
    return re.split(r"[\s<>=!~;\[(]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def main_closure() -> set[str]:
    """The distributions `pip install .` brings: the main dependencies and, as installed here,
    what they require (their own extras and markers aside)."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    todo = [_name(r) for r in project["dependencies"]]
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue
        todo += [_name(r) for r in requires if "extra ==" not in r]
    return seen


def third_party_imports(path: Path) -> set[str]:
    modules = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            modules |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules.add(node.module.split(".")[0])
    return {m for m in modules if m not in sys.stdlib_module_names and m not in ("agents",)}


def test_every_blob_backends_package_comes_with_pip_install_dot() -> None:
    closure = main_closure()
    dists = metadata.packages_distributions()
    missing = {}
    for module in sorted(third_party_imports(BLOBS)):
        names = {d.lower().replace("_", "-") for d in dists.get(module, [module])}
        if not names & closure:
            missing[module] = sorted(names)
    assert not missing, f"only the extras bring {missing}: add them to [project] dependencies"
    assert "boto3" in third_party_imports(BLOBS)  # the s3:// backend's, imported when used
