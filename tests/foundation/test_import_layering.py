"""The agents' import layering (`[tool.importlinter]` in pyproject.toml, `lint-imports` in
`make lint`) fails on a planted back-import: each contract is broken once, in a copy of the
package, and the check must name it. Without this, a contract that matched nothing (a renamed
module, a misspelt layer) would pass for ever."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"

# contract name (as pyproject.toml spells it) -> (module to write, its source) or (module to
# append to, the line appended)
PLANTS = {
    "the training engine has no chain code": ("agents/training/_planted.py", "import web3\n"),
    "core (chain access, sender, store, enums) does not import the roles": (
        "agents/core/_planted.py",
        "import agents.roles.runner\n",
    ),
    "production code does not import the test adversaries": (
        "agents/dispute/_planted.py",
        "import agents.adversaries\n",
    ),
    "production code does not import the explorer": (
        "agents/roles/_planted.py",
        "import agents.explore.app\n",
    ),
    "no role imports another role, directly or indirectly": (
        "agents/roles/solver.py",
        "import agents.roles.verifier  # noqa\n",
    ),
    "cli at the top: nothing below imports agents.cli": (
        "agents/roles/_planted.py",
        "from agents.cli.options import build\n",
    ),
    "the training engine imports no dataset code (it is handed a dataset)": (
        "agents/training/_planted.py",
        "from agents.data.builtin import Dataset\n",
    ),
    "data calls nothing above it: no role, dispute, model, CLI or chain code": (
        "agents/data/_planted.py",
        "import agents.core.chain\n",
    ),
}


def _lint(tree: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--config", str(tree / "pyproject.toml")],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _copy(tmp_path: Path) -> Path:
    tree = tmp_path / "tree"
    shutil.copytree(ROOT / "agents", tree / "agents", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tree / "pyproject.toml")
    return tree


def test_the_real_tree_keeps_every_contract(tmp_path: Path) -> None:
    out = _lint(_copy(tmp_path))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "0 broken" in out.stdout


@pytest.mark.parametrize("contract", list(PLANTS))
def test_a_planted_back_import_breaks_its_contract(tmp_path: Path, contract: str) -> None:
    tree = _copy(tmp_path)
    path, source = PLANTS[contract]
    target = tree / path
    if target.exists():
        target.write_text(target.read_text() + source)
    else:
        target.write_text(source)
    out = _lint(tree)
    assert out.returncode != 0, out.stdout
    text = " ".join(out.stdout.split())
    assert f"{contract} BROKEN" in text, out.stdout


def test_a_planted_cycle_breaks_the_acyclic_contract(tmp_path: Path) -> None:
    tree = _copy(tmp_path)
    # two siblings importing each other inside function bodies, where a cycle hides from Python
    (tree / "agents/core/_planted_a.py").write_text("def f():\n    import agents.core._planted_b\n")
    (tree / "agents/core/_planted_b.py").write_text("def g():\n    import agents.core._planted_a\n")
    out = _lint(tree)
    assert out.returncode != 0, out.stdout
    assert "no import cycles in agents/" in " ".join(out.stdout.split())
    assert "1 broken" in out.stdout, out.stdout
