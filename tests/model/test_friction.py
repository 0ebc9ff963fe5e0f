"""A new user's first tries of `job build`, `train` and `job weights` (issue #41's friction list):
each fails on main before its fix. A language model without a `block_size` takes `--context`;
a model file imports the modules beside it; a spec built with `--blob-url` or from a packed
dataset's manifest is trained and exported without restating where its blobs and chunks are."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from agents.__main__ import main

SIBLING = """
from torch import nn


class TinyLM(nn.Module):  # no block_size: the context comes from --context
    def __init__(self, vocab=84, d=8):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.head = nn.Linear(d, vocab)

    def forward(self, idx):
        return self.head(self.emb(idx))


def mlp():
    return nn.Sequential(nn.Flatten(), nn.Linear(64, 10))
"""

MODEL = """
from layers import TinyLM, mlp  # a module beside this file


def make_lm():
    return TinyLM()


def make_mlp():
    return mlp()
"""


def _models(tmp: Path, beside: bool = False) -> Path:
    """A model file: importing its layers from a module beside it, or holding them itself."""
    if beside:
        (tmp / "layers.py").write_text(SIBLING)
        (tmp / "model.py").write_text(MODEL)
    else:
        (tmp / "model.py").write_text(SIBLING + MODEL.replace("from layers import", "# "))
    return tmp / "model.py"


def _build(model: str, dataset: str, out: Path, *extra: str) -> int:
    return main(["job", "build", "--model", model, "--dataset", dataset, "--optimizer", "sgd",
                 "--lr", "0.1", "--batch", "4", "--steps", "2", "--checkpoint-every", "1",
                 "--out", str(out), *extra])  # fmt: skip


def test_a_model_file_imports_the_modules_beside_it(tmp_path, capsys):
    model = _models(tmp_path, beside=True)
    assert _build(f"{model}:make_mlp", "sklearn-digits/train", tmp_path / "j.json") == 0
    capsys.readouterr()


def test_a_language_model_without_block_size_takes_context(tmp_path, capsys):
    model = _models(tmp_path)
    out = tmp_path / "lm.json"
    assert _build(f"{model}:make_lm", "shakespeare-char/train", out) == 2
    err = capsys.readouterr().err
    assert "--context" in err and err.count("\n") == 1
    assert _build(f"{model}:make_lm", "shakespeare-char/train", out, "--context", "12") == 0
    capsys.readouterr()
    assert main(["train", "--spec", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out.splitlines()[-1])["steps"] == 2
    assert _build(f"{model}:make_mlp", "sklearn-digits/train", out, "--context", "12") == 2
    assert "--context applies to language models" in capsys.readouterr().err


def test_a_spec_built_with_a_blob_url_trains_and_exports_without_it(tmp_path, capsys):
    model = _models(tmp_path)
    spec, store = tmp_path / "specs" / "j.json", tmp_path / "elsewhere"
    spec.parent.mkdir()
    assert _build(f"{model}:make_mlp", "sklearn-digits/train", spec, "--blob-url",
                  str(store)) == 0  # fmt: skip
    capsys.readouterr()
    assert not (tmp_path / "specs" / "j.blobs").exists() and store.is_dir()
    state = tmp_path / "final.state"
    assert main(["train", "--spec", str(spec), "--out-state", str(state), "--json"]) == 0
    capsys.readouterr()
    out = tmp_path / "w.safetensors"
    assert main(["job", "weights", "--spec", str(spec), "--state", str(state), "--out",
                 str(out)]) == 0  # fmt: skip
    capsys.readouterr()
    from safetensors.torch import load_file

    from agents.cli.job import load_factory

    load_factory(f"{model}:make_mlp")().load_state_dict(load_file(str(out)), strict=True)
    # the submitter's default finds the same store
    from agents.roles.submitter import spec_blob_url

    assert Path(spec_blob_url(_submitter_config(tmp_path, spec))) == store.resolve()
    # built again at the same path with the default store: the old record goes with it
    assert _build(f"{model}:make_mlp", "sklearn-digits/train", spec) == 0
    capsys.readouterr()
    assert not spec.with_suffix(".sources.json").exists()
    assert Path(spec_blob_url(_submitter_config(tmp_path, spec))) == spec.with_suffix(".blobs")


def _submitter_config(tmp: Path, spec: Path):
    from agents.core.config import AgentConfig
    from agents.roles.config import SubmitterConfig

    return SubmitterConfig(agent=AgentConfig(key="dev:1", data_dir=tmp), spec=str(spec))


def test_a_spec_of_a_packed_dataset_trains_without_its_stores(tmp_path, capsys, monkeypatch):
    from sklearn.datasets import load_digits

    raw = load_digits()
    np.save(tmp_path / "x.npy", (raw.data / 16.0).astype(np.float32))
    np.save(tmp_path / "y.npy", raw.target.astype(np.int64))
    assert main(["dataset", "pack", "--features", str(tmp_path / "x.npy"), "--labels",
                 str(tmp_path / "y.npy"), "--validation", "1/5", "--out",
                 str(tmp_path / "ds")]) == 0  # fmt: skip
    model = _models(tmp_path)
    spec = tmp_path / "job.json"
    assert _build(f"{model}:make_mlp", str(tmp_path / "ds" / "manifest.json"), spec) == 0
    capsys.readouterr()
    # no --data-store, no VTP_DATASET_STORES: the chunks sit beside the manifest, not the spec
    monkeypatch.delenv("VTP_DATASET_STORES", raising=False)
    assert main(["train", "--spec", str(spec), "--json"]) == 0
    last = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert last["steps"] == 2 and "test_accuracy" in last
    torch.set_num_threads(1)
    # the submitter (it loads the spec's dataset before posting) finds them the same way
    from agents.roles.errors import RoleError
    from agents.roles.submitter import load_spec, spec_fetch

    config = _submitter_config(tmp_path, spec)
    assert spec_fetch(config).stores == (str((tmp_path / "ds" / "blobs").resolve()),)
    job, data = load_spec(config.spec, spec_fetch(config))
    assert "0x" + data.root().hex() == job.dataset_root
    with pytest.raises(RoleError, match="dataset"):  # without the record: nowhere to look
        load_spec(config.spec, config.fetch)
