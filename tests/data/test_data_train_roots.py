"""A job on a packed dataset trains to the same checkpoint roots as the same data under its
built-in name (PROTOCOL §4.4): the sklearn digits packed from `.npy` (version-1 MLP and a
version-3 model built from the manifest's path) and the char corpus packed as a token stream
(version-3 GPT) — with the first dataset store holding a corrupted and a missing chunk, so the
job also completes on the fallback store."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from agents.__main__ import main
from agents.core.blobs import LocalDirBackend
from agents.data import builtin as data
from agents.data import packed, tokens

ROOT = Path(__file__).resolve().parents[2]
MODELS = ROOT / "examples" / "models"


def _train(capsys, spec: Path, *flags: str) -> list[dict]:
    assert main(["train", "--spec", str(spec), "--json", *flags]) == 0
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def _roots(lines: list[dict]) -> list[str]:
    return [d["root"] for d in lines if "root" in d]


def _damaged_copy(folder: Path, m: packed.Manifest, dst: Path) -> Path:
    """A store holding the pack with chunk 0 of the training features corrupted and the
    training labels' chunk 0 missing."""
    shutil.copytree(folder / "blobs", dst)
    store = LocalDirBackend(dst)
    x0, y0 = (t.chunks[0].address for t in m.splits[0].tensors)
    store.path(x0).write_bytes(b"\0" * len(store.read(x0)))
    store.path(y0).unlink()
    return dst


@pytest.fixture(scope="module")
def digits_pack(tmp_path_factory) -> tuple[Path, packed.Manifest]:
    from sklearn.datasets import load_digits

    d = tmp_path_factory.mktemp("digits")
    raw = load_digits()
    np.save(d / "x.npy", (raw.data.astype(np.float32) / np.float32(16.0)).reshape(-1, 1, 8, 8))
    np.save(d / "y.npy", raw.target)
    args = ["dataset", "pack", "--features", str(d / "x.npy"), "--labels", str(d / "y.npy"),
            "--validation", "0.2", "--chunk-bytes", "4096", "--out", str(d / "ds")]  # fmt: skip
    assert main(args) == 0
    return d / "ds", packed.manifest_from_bytes((d / "ds" / "manifest.json").read_bytes())


def test_version_1_digits_mlp_on_the_packed_digits(digits_pack, tmp_path, capsys):
    folder, m = digits_pack
    capsys.readouterr()
    builtin = json.loads((ROOT / "examples" / "digits-mlp.json").read_text())
    assert builtin["dataset"]["root"] == m.root
    spec = tmp_path / "packed.json"
    spec.write_text(json.dumps(builtin | {"dataset": {"name": m.name(), "root": m.root}}))
    bad = _damaged_copy(folder, m, tmp_path / "bad")
    flags = ("--steps", "30", "--every", "10")
    want = _train(capsys, ROOT / "examples" / "digits-mlp.json", *flags)
    got = _train(capsys, spec, *flags, "--data-store", str(bad), "--data-store",
                 str(folder / "blobs"), "--data-cache", str(tmp_path / "cache"))  # fmt: skip
    assert _roots(got) == _roots(want) and len(_roots(want)) == 4
    # the held-out split is the packed validation share: the built-in test split's accuracy
    assert got[-1]["test_accuracy"] == want[-1]["test_accuracy"]
    assert got[-1]["spec_hash"] != want[-1]["spec_hash"]  # the name differs, the roots do not


def test_version_3_model_built_from_the_manifest_path(digits_pack, tmp_path, capsys):
    folder, m = digits_pack
    common = ["--model", f"{MODELS}/digits_cnn.py:make_model", "--optimizer", "sgd", "--lr",
              "0.05", "--momentum", "0.9", "--batch", "16", "--steps", "4",
              "--checkpoint-every", "2", "--seed", "1", "--json"]  # fmt: skip
    specs = {}
    for key, ds in (("builtin", data.DIGITS_TRAIN), ("packed", str(folder / "manifest.json"))):
        out = tmp_path / f"{key}.json"
        assert main(["job", "build", *common, "--dataset", ds, "--out", str(out)]) == 0
        specs[key] = out
    by_name = tmp_path / "by-name.json"
    assert main(["job", "build", *common, "--dataset", m.name(), "--data-store",
                 str(folder / "blobs"), "--out", str(by_name)]) == 0  # fmt: skip
    capsys.readouterr()
    sp = json.loads(specs["packed"].read_text())
    assert sp["dataset"] == {"name": m.name(), "root": m.root}
    assert by_name.read_bytes() == specs["packed"].read_bytes()
    # the job's blob store holds the manifest; the chunks come from the dataset stores
    bad = _damaged_copy(folder, m, tmp_path / "bad")
    want = _train(capsys, specs["builtin"])
    got = _train(capsys, specs["packed"], "--data-store", str(bad), "--data-store",
                 str(folder / "blobs"))  # fmt: skip
    assert _roots(got) == _roots(want) and len(_roots(want)) == 3
    assert got[-1]["checkpoint_root"] == want[-1]["checkpoint_root"]


def test_token_stream_packed_from_npy_trains_like_the_char_corpus(tmp_path, capsys):
    text, vocab = tokens._corpus()
    table = np.zeros(128, dtype=np.int64)
    table[[ord(c) for c in vocab]] = np.arange(len(vocab))
    ids = table[np.frombuffer(text.encode("ascii"), dtype=np.uint8)].astype(np.uint16)
    np.save(tmp_path / "t.npy", ids)
    assert main(["dataset", "pack", "--tokens", str(tmp_path / "t.npy"), "--vocab",
                 str(len(vocab)), "--validation", "0.1", "--out", str(tmp_path / "ds"),
                 "--json"]) == 0  # fmt: skip
    out = json.loads(capsys.readouterr().out)
    assert out["root"] == "0x" + tokens.load_tokens(tokens.TRAIN).root().hex()
    m = packed.manifest_from_bytes(Path(out["manifest"]).read_bytes())
    assert m.splits[1].root == "0x" + tokens.load_tokens(tokens.VAL).root().hex()
    common = ["--model", f"{MODELS}/char_gpt.py:make_model", "--optimizer", "adamw", "--lr",
              "0.003", "--batch", "4", "--steps", "2", "--checkpoint-every", "1", "--seed", "1",
              "--json"]  # fmt: skip
    specs = {}
    for key, ds in (("builtin", tokens.TRAIN), ("packed", out["manifest"])):
        specs[key] = tmp_path / f"{key}.json"
        assert main(["job", "build", *common, "--dataset", ds, "--out", str(specs[key])]) == 0
    capsys.readouterr()
    bad = _damaged_copy_tokens(tmp_path / "ds", m, tmp_path / "bad")
    want = _train(capsys, specs["builtin"])
    got = _train(capsys, specs["packed"], "--data-store", str(bad), "--data-store",
                 str(tmp_path / "ds" / "blobs"))  # fmt: skip
    assert _roots(got) == _roots(want) and len(_roots(want)) == 3
    assert got[-1]["checkpoint_root"] == want[-1]["checkpoint_root"]
    # the held-out metric reads the packed validation split: the built-in val split's numbers
    assert got[-1]["val_loss"] == want[-1]["val_loss"]


def _damaged_copy_tokens(folder: Path, m: packed.Manifest, dst: Path) -> Path:
    shutil.copytree(folder / "blobs", dst)
    store = LocalDirBackend(dst)
    refs = m.splits[0].tensor("tokens").chunks
    store.path(refs[0].address).write_bytes(b"\1" * len(store.read(refs[0].address)))
    store.path(refs[-1].address).unlink()
    return dst


def test_a_segment_replays_to_the_same_root_from_only_the_chunks_its_batches_touch(tmp_path):
    """A verifier's replay of steps [20, 30) from S_20 on the opened split (chunks fetched as the
    batches read them) gives the full run's S_30, and fetches a fraction of the dataset."""
    from agents.core.blobs import open_blob_store
    from agents.data import chunks
    from agents.training import spec as sp
    from agents.training.engine import Engine
    from agents.training.state import state_root

    full = data.synthetic(4096, 16, 4, 3)
    np.save(tmp_path / "x.npy", full.x.numpy())
    np.save(tmp_path / "y.npy", full.y.numpy()[0])
    assert main(["dataset", "pack", "--features", str(tmp_path / "x.npy"), "--labels",
                 str(tmp_path / "y.npy"), "--classes", "4", "--validation", "0",
                 "--chunk-bytes", "1024", "--out", str(tmp_path / "ds")]) == 0  # fmt: skip
    m = packed.manifest_from_bytes((tmp_path / "ds" / "manifest.json").read_bytes())
    assert m.root == "0x" + full.root().hex()
    obj = json.loads((ROOT / "examples" / "digits-mlp.json").read_text())
    obj |= {"model": {"arch": "mlp", "widths": [16, 32, 4]}, "batch": 8, "steps": 40,
            "checkpoint_every": 10, "dataset": {"name": m.name(), "root": m.root}}  # fmt: skip
    spec = sp.parse_spec(obj)
    eng = Engine(spec, full)
    states = {t: st for t, _, st in eng.train()}
    f = chunks.ChunkFetcher(m, [open_blob_store(str(tmp_path / "ds" / "blobs"))])
    split = f.open_split("train")
    assert split.root() == full.root() and f.stats.chunks == 0  # opening fetches nothing
    st = states[20]
    replay = Engine(spec, split)
    for t in range(20, 30):
        st = replay.step(st, t)
    assert state_root(st) == state_root(states[30])
    # exactly the chunks the 80 draws touch (of 256 feature + 16 label chunks), nothing else
    need = f.chunks_for_examples("train", chunks.step_indices(spec.seed, range(20, 30), 8, 4096))
    assert split.filler.filled == need
    assert f.stats.chunks == len(need) <= 80 + 16
    assert f.stats.bytes == 1024 * len(need) < sum(4 * t.numel for t in m.splits[0].tensors) / 2
    # a step outside the segment fetches its own batch's chunks first, and is the full run's
    assert state_root(replay.step(states[0], 0)) == state_root(eng.step(states[0], 0))
    assert f.stats.chunks > len(need)
