"""No parsed command line is read outside agents/cli/ (tools/namespace_reads.py, `make lint`):
the finder names a planted violation, and agents/ has none."""

from __future__ import annotations

import shutil
from pathlib import Path

from tools.namespace_reads import main, namespace_reads, outside_cli, reads_in

REPO = Path(__file__).resolve().parents[2]


def texts(source: str) -> list[str]:
    return [r.text for r in namespace_reads(source)]


def test_argparse_imports_namespaces_and_parse_calls_are_found():
    source = (
        "import argparse\n"
        "from argparse import Namespace as NS\n"
        "def f(args: argparse.Namespace, p):\n"
        "    return p.parse_args(['x']), Namespace\n"
        "def g(self):\n"
        "    return getattr(self.args, 'device', None) or 'cpu'\n"
    )
    assert texts(source) == [
        "import argparse",
        "from argparse import Namespace",
        "argparse.Namespace",
        "Namespace",
        "p.parse_args(...)",
        "getattr(self.args, 'device', None)",
    ]


def test_config_objects_and_other_names_are_not_reads():
    source = (
        "from types import SimpleNamespace\n"
        "def f(config, ev):\n"
        "    return config.stake, ev.args['unitId'], SimpleNamespace(a=1), parse(config)\n"
    )
    assert texts(source) == []


def test_a_violation_planted_in_a_role_is_named_and_the_cli_is_allowed(tmp_path, capsys):
    tree = tmp_path / "agents"
    shutil.copytree(REPO / "agents", tree, ignore=shutil.ignore_patterns("__pycache__"))
    assert main([str(tree)]) == 0
    role = tree / "roles" / "solver.py"
    role.write_text(
        role.read_text() + "\n\ndef stake_of(args):\n    return getattr(args, 'stake', 1.0)\n"
        "\n\ndef parse(p):\n    return p.parse_args()\n"
    )
    assert main([str(tree)]) == 1
    out = capsys.readouterr().out
    assert f"{role}:" in out and "p.parse_args(...)" in out
    assert "getattr(args, 'stake', 1.0)" in out
    assert not any(line.startswith(str(tree / "cli")) for line in out.splitlines())


def test_agents_reads_no_parsed_command_line_outside_its_cli():
    files = outside_cli(REPO / "agents")
    assert files and not any("/agents/cli/" in str(f) for f in files)
    assert reads_in(files) == []
