"""Bring your own model, end to end through the CLI: `job build`, `train`, `job weights`.

- bit-exactness: each example's checkpoint roots are identical with 1 and 2 threads, in
  separate processes, and between the native kernels and the portable torch path;
- the trained weights load with `load_state_dict(strict=True)` and plain PyTorch reproduces
  the metric the engine reported;
- the CNN learns (>= 97% digits test accuracy);
- refusals: one line on stderr, exit 2, nothing written.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from agents.__main__ import main
from agents.data import builtin as data
from agents.data import tokens
from agents.model.job import lm_loss

ROOT = Path(__file__).resolve().parents[2]
MODELS = ROOT / "examples" / "models"

EXAMPLES = {
    "cnn": ["--model", f"{MODELS}/digits_cnn.py:make_model", "--dataset", "sklearn-digits/train",
            "--optimizer", "sgd", "--lr", "0.05", "--momentum", "0.9", "--batch", "32"],
    "mlp_adamw": ["--model", f"{MODELS}/digits_mlp.py:make_model", "--dataset",
                  "sklearn-digits/train", "--optimizer", "adamw", "--lr", "0.003",
                  "--weight-decay", "0.01", "--batch", "32"],
    "gpt": ["--model", f"{MODELS}/char_gpt.py:make_model", "--dataset", "shakespeare-char/train",
            "--optimizer", "adamw", "--lr", "0.003", "--betas", "0.9,0.99", "--weight-decay",
            "0.1", "--clip-norm", "1.0", "--batch", "8"],
}  # fmt: skip


def build(tmp: Path, name: str, steps: int, every: int, extra=()) -> Path:
    out = tmp / f"{name}.json"
    argv = ["job", "build", *EXAMPLES[name], "--steps", str(steps), "--checkpoint-every",
            str(every), "--seed", "1", "--out", str(out), "--json", *extra]  # fmt: skip
    assert main(argv) == 0
    return out


def train(spec: Path, *flags: str) -> list[dict]:
    res = subprocess.run(
        [sys.executable, "-m", "agents", "train", "--spec", str(spec), "--json", *flags],
        capture_output=True, text=True, cwd=ROOT, check=False,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    return [json.loads(line) for line in res.stdout.splitlines()]


@pytest.fixture(scope="module")
def specs(tmp_path_factory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("examples")
    return {name: build(tmp, name, 4, 2) for name in EXAMPLES}


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_checkpoint_roots_are_identical_across_threads_and_kernels(specs, name):
    runs = {
        flags: train(specs[name], *flags)
        for flags in (("--threads", "1"), ("--threads", "2"), ("--kernels", "torch"))
    }
    roots = {flags: [line["root"] for line in r if "root" in line] for flags, r in runs.items()}
    assert len(next(iter(roots.values()))) == 3  # S_0, S_2, S_4
    assert len({tuple(r) for r in roots.values()}) == 1, roots
    finals = {r[-1]["checkpoint_root"] for r in runs.values()}
    assert len(finals) == 1


def _load(path: Path, factory: str):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return getattr(mod, factory)()


def test_weights_load_strictly_and_plain_pytorch_reproduces_the_metrics(specs, tmp_path):
    for name, file in (("cnn", "digits_cnn.py"), ("gpt", "char_gpt.py")):
        state = tmp_path / f"{name}.state"
        lines = train(specs[name], "--out-state", str(state))
        out = tmp_path / f"{name}.safetensors"
        assert main(["job", "weights", "--spec", str(specs[name]), "--state", str(state),
                     "--out", str(out)]) == 0  # fmt: skip
        module = _load(MODELS / file, "make_model")
        module.load_state_dict(load_file(out), strict=True)
        module.eval()
        with torch.no_grad():
            if name == "cnn":
                test = data.test_split_for(data.DIGITS_TRAIN)
                pred = module(test.x.reshape(-1, 1, 8, 8)).argmax(-1)
                acc = float((pred == test.y.reshape(-1)).double().mean())
                assert abs(acc - lines[-1]["test_accuracy"]) <= 1 / test.n
            else:
                x, y = tokens.load_tokens(tokens.VAL).eval_windows(module.block_size)
                assert abs(lm_loss(module(x), y) - lines[-1]["val_loss"]) <= 1e-4


def test_weights_from_a_state_root_in_the_blob_store(specs, tmp_path, capsys):
    # S_0 is in the store under its root: `job weights` reads it from there
    s0 = json.loads(specs["cnn"].read_text())["model"]["state"]
    out = tmp_path / "s0.safetensors"
    assert main(["job", "weights", "--spec", str(specs["cnn"]), "--state", s0, "--out",
                 str(out)]) == 0  # fmt: skip
    assert json.loads(capsys.readouterr().out)["state_root"] == s0
    module = _load(MODELS / "digits_cnn.py", "make_model")
    module.load_state_dict(load_file(out), strict=True)


_CHAIN_CLIENT = ("web3", "eth_account", "eth_utils", "eth_keys", "aiohttp", "ape")


def test_job_build_imports_no_chain_client_and_builds_the_same_spec(specs, tmp_path):
    # `job build` is offline: the chain client's ~1 s of imports is not part of it, and the
    # command run alone (a process of its own) writes the very spec built in this one
    out = tmp_path / "mlp_adamw.json"
    argv = ["job", "build", *EXAMPLES["mlp_adamw"], "--steps", "4", "--checkpoint-every", "2",
            "--seed", "1", "--out", str(out), "--json"]  # fmt: skip
    script = ("import sys\nfrom agents.cli.main import main\nrc = main(sys.argv[1:])\n"
              f"print(sorted(m for m in sys.modules if m.split('.')[0] in {_CHAIN_CLIENT}))\n"
              "sys.exit(rc)")  # fmt: skip
    res = subprocess.run([sys.executable, "-c", script, *argv], capture_output=True, text=True,
                         cwd=ROOT, check=False)  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines()[-1] == "[]"
    assert out.read_bytes() == specs["mlp_adamw"].read_bytes()


def test_the_cnn_reaches_97_percent(tmp_path):
    spec = build(tmp_path, "cnn", 1000, 500)
    assert train(spec)[-1]["test_accuracy"] >= 0.97


BAD_MODELS = """
import torch
from torch import nn

def elu():
    return nn.Sequential(nn.Flatten(), nn.Linear(64, 10), nn.ELU())

def big():
    return nn.Sequential(nn.Flatten(), nn.Linear(64, 4096), nn.Linear(4096, 10))

def double():
    return nn.Sequential(nn.Flatten(), nn.Linear(64, 10)).double()

def broken():
    raise RuntimeError("no such checkpoint")

def not_a_module():
    return 3

def wrong_width():
    return nn.Sequential(nn.Flatten(), nn.Linear(32, 10))

def rank_3():
    return nn.Sequential(nn.Flatten(), nn.Unflatten(1, (2, 32)), nn.Linear(32, 10))

def three_outputs():
    return nn.Sequential(nn.Flatten(), nn.Linear(64, 3))
"""


@pytest.mark.parametrize(
    "factory,needle",
    [
        ("elu", "unsupported operator aten.elu (in layer 2 (ELU))"),
        ("big", "over --max-params 100000"),
        ("double", "float32"),
        ("broken", "raised RuntimeError: no such checkpoint"),
        ("not_a_module", "not a Module"),
        ("missing", "has no callable missing"),
        ("wrong_width", "forward failed on a batch of shape (4, 1, 8, 8): RuntimeError"),
        ("rank_3", "the model must return logits of rank 2 for this dataset ((B, C))"),
        ("three_outputs", "the model has 3 outputs; the dataset has 10 classes"),
    ],
)
def test_refusals_are_one_line_exit_2_and_write_nothing(tmp_path, capfd, factory, needle):
    models = tmp_path / "bad.py"
    models.write_text(BAD_MODELS)
    out = tmp_path / "job.json"
    argv = ["job", "build", "--model", f"{models}:{factory}", "--dataset",
            "sklearn-digits/train", "--optimizer", "sgd", "--lr", "0.1", "--batch", "4",
            "--steps", "2", "--checkpoint-every", "1", "--max-params", "100000", "--out",
            str(out)]  # fmt: skip
    assert main(argv) == 2
    err = capfd.readouterr().err
    assert needle in err and err.count("\n") == 1, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.py"]


def test_flags_of_the_other_optimizer_are_refused(tmp_path, capsys):
    argv = ["job", "build", *EXAMPLES["cnn"], "--betas", "0.9,0.9", "--steps", "2",
            "--checkpoint-every", "1", "--out", str(tmp_path / "j.json")]  # fmt: skip
    assert main(argv) == 2
    assert "--betas does not apply to --optimizer sgd" in capsys.readouterr().err


def test_train_without_the_blobs_is_one_line(specs, tmp_path, capsys):
    assert main(["train", "--spec", str(specs["cnn"]), "--blob-url", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "cannot read the job's blobs" in err and err.count("\n") == 1


def test_a_bundle_that_breaks_the_step_interface_is_refused_in_one_line(specs, tmp_path, capsys):
    from agents.core.blobs import open_blob_store
    from agents.training.spec import canonical_json

    spec_obj = json.loads(specs["cnn"].read_text())
    store = open_blob_store(str(specs["cnn"].with_suffix(".blobs")))
    bundle = json.loads(store.get(spec_obj["model"]["graph"]))
    bundle["step"]["outputs"] = [o for o in bundle["step"]["outputs"] if o[0] != "loss"]
    spec_obj["model"]["graph"] = store.put(canonical_json(bundle))
    bad = tmp_path / "bad.json"
    bad.write_bytes(canonical_json(spec_obj))
    argv = ["train", "--spec", str(bad), "--blob-url", str(specs["cnn"].with_suffix(".blobs"))]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "step graph must output an f32 scalar loss" in err and err.count("\n") == 1


def test_graph_prints_a_version_3_step(specs, capsys):
    assert main(["graph", "--spec", str(specs["gpt"])]) == 0
    out = capsys.readouterr().out.splitlines()
    assert any(" erf " in line for line in out) and out[-1].startswith("outputs: p.wte.weight")
