"""CLI: `python -m agents train|graph` output and user-error handling (one line, exit 2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from agents.__main__ import main

EXAMPLE = str(Path(__file__).resolve().parents[2] / "examples" / "digits-mlp.json")


def test_train_json(capsys):
    assert main(["train", "--spec", EXAMPLE, "--steps", "20", "--every", "10", "--json"]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [d["step"] for d in lines[:-1]] == [0, 10, 20]
    assert all(d["root"].startswith("0x") and len(d["root"]) == 66 for d in lines[:-1])
    assert 0 <= lines[-1]["test_accuracy"] <= 1 and lines[-1]["spec_hash"].startswith("0x")


def test_graph(capsys):
    assert main(["graph", "--spec", EXAMPLE, "--json"]) == 0
    nodes = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert nodes[0]["op"] == "gather_rows" and nodes[-1]["op"] == "sgd"
    assert main(["graph", "--spec", EXAMPLE]) == 0
    assert "matmul_nt" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["train", "--spec", "/nonexistent.json"], "cannot read"),
        (["train", "--spec", EXAMPLE, "--steps", "0"], "--steps"),
        (["train", "--spec", EXAMPLE, "--steps", "100000"], "--steps"),
        (["train", "--spec", EXAMPLE, "--every", "0"], "--every"),
        (["train", "--spec", EXAMPLE, "--device", "tpu"], "--device"),
        (["graph", "--spec", "BADJSON"], "job spec"),
        pytest.param(
            ["train", "--spec", EXAMPLE, "--device", "cuda"],
            "no CUDA",
            marks=pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is available"),
        ),
    ],
)
def test_user_errors_exit_2_with_one_line(args, needle, capsys, tmp_path):
    if "BADJSON" in args:
        bad = tmp_path / "bad.json"
        bad.write_text('{"version": 1, "batch": 0}')
        args = [a if a != "BADJSON" else str(bad) for a in args]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and needle in err and "Traceback" not in err


@pytest.mark.parametrize(
    "args", [["train"], ["train", "--spec", EXAMPLE, "--steps", "x"], ["nope"], []]
)
def test_usage_errors_are_one_line(args, capsys):
    with pytest.raises(SystemExit) as e:
        main(args)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error:")


def test_dataset_root_mismatch(tmp_path, capsys):
    obj = json.loads(Path(EXAMPLE).read_text())
    obj["dataset"]["root"] = "0x" + "00" * 32
    p = tmp_path / "s.json"
    p.write_text(json.dumps(obj))
    assert main(["train", "--spec", str(p)]) == 2
    assert "root" in capsys.readouterr().err


def test_user_error_is_one_line_when_run_as_a_module():
    # `python -m agents` runs agents/__main__.py as `__main__`: a user error raised by a
    # subcommand must still be caught there (one line, exit 2), not escape as a traceback.
    import subprocess
    import sys

    repo = Path(__file__).resolve().parents[2]
    proc = subprocess.run(
        [sys.executable, "-m", "agents", "train", "--spec", "examples/digits-mlp.json",
         "--steps", "0"],
        cwd=repo, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == [
        "error: --steps must be in [1, 400] (the spec's T), got 0"
    ]
