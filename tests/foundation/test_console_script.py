"""The command line's two spellings (issue #39): the `vtp` console script that `pip install`
makes from [project.scripts], and `python -m agents`: the same commands, the same parser."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
COMMANDS = ("train", "job", "dataset", "graph", "submit", "solver", "verifier", "whistleblower",
            "submitter", "aggregator", "node", "deploy")  # fmt: skip


def _run(*argv: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=120)


def test_pyproject_declares_vtp_at_the_cli_entry_point():
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    # entry(): main() on the arguments, then the exit (at once after `job build`)
    assert scripts == {"vtp": "agents.cli.main:entry"}


def test_vtp_help_lists_every_command():
    vtp = Path(sys.executable).with_name("vtp")  # installed beside this interpreter
    assert vtp.is_file(), "the vtp console script is not installed (make setup)"
    proc = _run(str(vtp), "--help")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage: vtp ")
    for command in COMMANDS:
        assert f"\n    {command}" in proc.stdout, command


def test_python_m_agents_is_the_same_parser():
    proc = _run(sys.executable, "-m", "agents", "--help")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage: python -m agents ")
    for command in COMMANDS:
        assert f"\n    {command}" in proc.stdout, command
    bad = _run(sys.executable, "-m", "agents", "solver", "--stake", "0", "--key", "dev:1",
               "--data-dir", "/nonexistent-vtp", "--rpc-url", "http://127.0.0.1:9")  # fmt: skip
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert bad.stderr.strip() == "error: stake (--stake='0'): expected a number > 0"
