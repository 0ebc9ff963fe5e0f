"""`python -m agents dataset pack` (PROTOCOL §4.4): packed roots equal the built-in datasets'
roots, every input format, publishing, and every bad input refused in one line (exit 2) with
nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from agents.__main__ import main
from agents.core.blobs import LocalDirBackend
from agents.data import builtin as data
from agents.data import packed
from agents.training import merkle


@pytest.fixture(scope="module")
def digits(tmp_path_factory) -> Path:
    """sklearn's digits as the user would save them: all 1797 examples, pixels / 16."""
    from sklearn.datasets import load_digits

    d = tmp_path_factory.mktemp("digits")
    raw = load_digits()
    np.save(d / "x.npy", (raw.data.astype(np.float32) / np.float32(16.0)).astype(np.float32))
    np.save(d / "y.npy", raw.target.astype(np.int64))
    return d


def _pack(args: list[str], capsys) -> dict:
    assert main(["dataset", "pack", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("chunk_bytes", ["1048576", "1024"])
def test_digits_packed_with_the_builtin_split_have_the_builtin_roots(digits, tmp_path, capsys,
                                                                     chunk_bytes):  # fmt: skip
    out = _pack(["--features", str(digits / "x.npy"), "--labels", str(digits / "y.npy"),
                 "--validation", "1/5", "--chunk-bytes", chunk_bytes, "--out",
                 str(tmp_path / "ds")], capsys)  # fmt: skip
    assert out["root"] == "0x" + data.load_dataset(data.DIGITS_TRAIN).root().hex()
    raw = Path(out["manifest"]).read_bytes()
    m = packed.manifest_from_bytes(raw)
    assert m.splits[1].root == "0x" + data.load_dataset(data.DIGITS_TEST).root().hex()
    assert out["name"] == m.name() == packed.NAME_PREFIX + "0x" + merkle.keccak256(raw).hex()
    assert m.classes == 10 and m.item_shape == (64,) and m.validation == (1, 5)
    x = m.splits[0].tensor("x")
    assert len(x.chunks) == (1 if chunk_bytes == "1048576" else -(-1438 * 64 // 256))
    # the folder is a blob store holding every chunk and the manifest itself
    store = LocalDirBackend(tmp_path / "ds" / "blobs")
    assert store.read(m.address()) == raw
    assert all(store.exists(c.address) for s in m.splits for t in s.tensors for c in t.chunks)


def test_chunk_proofs_open_a_chunk_against_the_data_root(digits, tmp_path, capsys):
    out = _pack(["--features", str(digits / "x.npy"), "--labels", str(digits / "y.npy"),
                 "--chunk-bytes", "4096", "--out", str(tmp_path / "ds")], capsys)  # fmt: skip
    t = packed.manifest_from_bytes(Path(out["manifest"]).read_bytes()).splits[0].tensor("x")
    roots = [bytes.fromhex(c.root[2:]) for c in t.chunks]
    droot = bytes.fromhex(t.data_root[2:])
    for i in (0, 7, len(roots) - 1):
        sib = packed.chunk_proof(roots, i, t.chunk_leaves, t.numel)
        assert packed.verify_chunk_proof(droot, roots[i], i, sib)
        assert not packed.verify_chunk_proof(droot, roots[i], i ^ 1, sib)
    assert len(sib) == merkle.depth_for(len(roots))


def test_npz_and_safetensors_inputs_give_the_npy_root(digits, tmp_path, capsys):
    x, y = np.load(digits / "x.npy"), np.load(digits / "y.npy")
    np.savez(tmp_path / "d.npz", feats=x, labels=y)
    from safetensors.numpy import save_file

    save_file({"x": x, "y": y}, str(tmp_path / "d.safetensors"))
    base = _pack(["--features", str(digits / "x.npy"), "--labels", str(digits / "y.npy"),
                  "--out", str(tmp_path / "a")], capsys)  # fmt: skip
    npz = _pack(["--features", f"{tmp_path}/d.npz:feats", "--labels", f"{tmp_path}/d.npz:labels",
                 "--out", str(tmp_path / "b")], capsys)  # fmt: skip
    st = _pack(["--features", f"{tmp_path}/d.safetensors:x", "--labels",
                f"{tmp_path}/d.safetensors:y", "--out", str(tmp_path / "c")], capsys)  # fmt: skip
    assert base["root"] == npz["root"] == st["root"]
    assert base["name"] == npz["name"] == st["name"]  # same manifest bytes, same address


def test_tokens_pack_like_the_char_corpus_split(tmp_path, capsys):
    t = np.arange(1000, dtype=np.int32) % 7
    np.save(tmp_path / "t.npy", t)
    out = _pack(["--tokens", str(tmp_path / "t.npy"), "--vocab", "7", "--chunk-bytes", "256",
                 "--out", str(tmp_path / "ds")], capsys)  # fmt: skip
    m = packed.manifest_from_bytes(Path(out["manifest"]).read_bytes())
    assert (m.splits[0].n, m.splits[1].n) == (900, 100)  # floor(9 L / 10), as §4.3
    want = merkle.root_list(merkle.DATASET_DOMAIN, [merkle.tensor_root(t[:900].reshape(1, -1))])
    assert out["root"] == "0x" + want.hex()


def test_blob_url_publishes_manifest_and_chunks(digits, tmp_path, capsys):
    out = _pack(["--features", str(digits / "x.npy"), "--labels", str(digits / "y.npy"),
                 "--chunk-bytes", "65536", "--out", str(tmp_path / "ds"), "--blob-url",
                 str(tmp_path / "pub")], capsys)  # fmt: skip
    m = packed.manifest_from_bytes(Path(out["manifest"]).read_bytes())
    pub = LocalDirBackend(tmp_path / "pub")
    assert pub.read(m.address()) == Path(out["manifest"]).read_bytes()
    assert all(pub.exists(c.address) for s in m.splits for t in s.tensors for c in t.chunks)


def test_plain_output_names_root_and_manifest(digits, tmp_path, capsys):
    args = ["dataset", "pack", "--features", str(digits / "x.npy"), "--labels",
            str(digits / "y.npy"), "--out", str(tmp_path / "ds")]  # fmt: skip
    assert main(args) == 0
    line = capsys.readouterr().out
    assert line.count("\n") == 1 and "root=0x" in line and f"{tmp_path}/ds/manifest.json" in line


# -- bad input: one line naming the file and the problem, exit 2, nothing written -------------


def _write(tmp_path: Path, name: str, a) -> str:
    p = tmp_path / name
    np.save(p, a, allow_pickle=True)
    return str(p)


GOOD_X = np.zeros((20, 3), dtype=np.float32)
GOOD_Y = np.arange(20) % 2


def _nan_x():
    x = GOOD_X.copy()
    x[4, 1] = np.nan
    return x


def _inf_x():
    x = GOOD_X.copy()
    x[2, 0] = -np.inf
    return x


BAD = {
    "ragged": (lambda p: ["--features", _write(p, "x.npy", np.array([[1.0, 2.0], [3.0]],
               dtype=object)), "--labels", _write(p, "y.npy", GOOD_Y)], "x.npy", "ragged"),
    "float64": (lambda p: ["--features", _write(p, "x.npy", GOOD_X.astype(np.float64)),
                "--labels", _write(p, "y.npy", GOOD_Y)], "x.npy", "float32"),
    "float_labels": (lambda p: ["--features", _write(p, "x.npy", GOOD_X), "--labels",
                     _write(p, "y.npy", GOOD_Y.astype(np.float32))], "y.npy", "integers"),
    "count": (lambda p: ["--features", _write(p, "x.npy", GOOD_X), "--labels",
              _write(p, "y.npy", GOOD_Y[:19])], "y.npy", "19 labels for 20"),
    "nan": (lambda p: ["--features", _write(p, "x.npy", _nan_x()), "--labels",
            _write(p, "y.npy", GOOD_Y)], "x.npy", "NaN or infinite"),
    "inf": (lambda p: ["--features", _write(p, "x.npy", _inf_x()), "--labels",
            _write(p, "y.npy", GOOD_Y)], "x.npy", "example 2"),
    "label_ge_classes": (lambda p: ["--features", _write(p, "x.npy", GOOD_X), "--labels",
                         _write(p, "y.npy", GOOD_Y * 3), "--classes", "3"], "y.npy",
                         "label 3"),
    "token_ge_vocab": (lambda p: ["--tokens", _write(p, "t.npy", np.arange(50)), "--vocab",
                       "49"], "t.npy", "token 49"),
    "ragged_tokens": (lambda p: ["--tokens", _write(p, "t.npy", np.zeros((5, 2), np.int64)),
                      "--vocab", "4"], "t.npy", "1-D"),
    "empty_validation": (lambda p: ["--features", _write(p, "x.npy", GOOD_X[:1]), "--labels",
                         _write(p, "y.npy", np.array([1])), "--classes", "2", "--validation",
                         "0.5"], "x.npy", "validation split has 0"),
    "empty_train": (lambda p: ["--tokens", _write(p, "t.npy", np.arange(10) % 3), "--vocab", "3",
                    "--validation", "0.95"], "t.npy", "train split has 0"),
    "too_large": (lambda p: ["--features", _write(p, "x.npy", np.zeros((1 << 18, 2), np.float32)),
                  "--labels", _write(p, "y.npy", np.zeros(1 << 18, np.int64)),
                  "--classes", "2", "--max-dataset-mib", "2"], "x.npy", "over --max-dataset-mib 2"),
    "npz_without_name": (lambda p: ["--features", _npz(p), "--labels",
                         _write(p, "y.npy", GOOD_Y)], "d.npz", "name one"),
}  # fmt: skip


def _npz(p: Path) -> str:
    np.savez(p / "d.npz", a=GOOD_X, b=GOOD_X)
    return str(p / "d.npz")


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_is_one_line_exit_2_and_writes_nothing(case, tmp_path, capsys):
    make, file, needle = BAD[case]
    inputs = tmp_path / "in"
    inputs.mkdir()
    args = make(inputs)
    out, pub = tmp_path / "work" / "ds", tmp_path / "pub"
    out.parent.mkdir()
    assert main(["dataset", "pack", *args, "--out", str(out), "--blob-url", str(pub)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert file in err and needle in err, err
    assert list(out.parent.iterdir()) == [] and not pub.exists()


def test_an_existing_out_folder_is_refused(digits, tmp_path, capsys):
    (tmp_path / "ds").mkdir()
    (tmp_path / "ds" / "keep").write_text("mine")
    args = ["dataset", "pack", "--features", str(digits / "x.npy"), "--labels",
            str(digits / "y.npy"), "--out", str(tmp_path / "ds")]  # fmt: skip
    assert main(args) == 2
    assert "not an empty folder" in capsys.readouterr().err
    assert [p.name for p in (tmp_path / "ds").iterdir()] == ["keep"]


def test_a_version_1_spec_on_a_token_stream_is_one_line(tmp_path, capsys):
    np.save(tmp_path / "t.npy", np.arange(500) % 5)
    out = _pack(["--tokens", str(tmp_path / "t.npy"), "--vocab", "5", "--out",
                 str(tmp_path / "ds")], capsys)  # fmt: skip
    spec = json.loads(
        (Path(__file__).resolve().parents[2] / "examples/digits-mlp.json").read_text()
    )
    spec["dataset"] = {"name": out["name"], "root": out["root"]}
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    args = [
        "train",
        "--spec",
        str(tmp_path / "spec.json"),
        "--data-store",
        str(tmp_path / "ds/blobs"),
    ]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "token stream" in err and "version-3" in err
