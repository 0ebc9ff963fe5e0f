"""`dataset pack --blob-url` publishes to every blob store the project has — a writable HTTP
blob server and S3 (a local `moto_server`) here, a folder in test_data_pack.py — and a process
configured with that store alone trains on `manifest:0x…` read back from it."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from agents.__main__ import main
from agents.core.blobs import S3Backend, serving
from agents.data import chunks, datasets


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def moto_endpoint() -> Iterator[str]:
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
                break
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("moto_server did not start")
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}"
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=5)


def _arrays(tmp: Path) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(2)
    x, y = rng.standard_normal((500, 12)).astype(np.float32), rng.integers(0, 3, 500)
    np.save(tmp / "x.npy", x)
    np.save(tmp / "y.npy", y)
    return x, y


def _pack_to(tmp: Path, url: str, capsys) -> dict:
    inputs = ["--features", str(tmp / "x.npy"), "--labels", str(tmp / "y.npy")]
    args = ["--chunk-bytes", "2048", "--out", str(tmp / "ds"), "--blob-url", url, "--json"]
    assert main(["dataset", "pack", *inputs, *args]) == 0
    return json.loads(capsys.readouterr().out)


def _read_back(out: dict, url: str, x: np.ndarray) -> None:
    got = datasets.load_dataset(out["name"], chunks.FetchConfig((url,)))
    assert "0x" + got.root().hex() == out["root"]
    held = datasets.held_out(got)
    val = np.arange(500) % 10 == 9  # --validation 0.1: example i held out iff i mod 10 == 9
    assert np.array_equal(got.x.numpy(), x[~val]) and np.array_equal(held.x.numpy(), x[val])


def test_publish_to_a_writable_http_blob_server(tmp_path, capsys):
    x, _ = _arrays(tmp_path)
    with serving(tmp_path / "served", writable=True) as server:
        out = _pack_to(tmp_path, server.url, capsys)
        _read_back(out, server.url, x)
    served = [p for p in (tmp_path / "served").rglob("*") if p.is_file()]
    assert len(served) == out["chunks"] + 1  # every chunk and the manifest


def test_publish_to_s3(tmp_path, capsys, moto_endpoint, monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    S3Backend("vtp-data", endpoint_url=moto_endpoint, access_key="test",
              secret_key="test").ensure_bucket()  # fmt: skip
    url = f"s3://vtp-data/datasets?endpoint={moto_endpoint}"
    x, _ = _arrays(tmp_path)
    out = _pack_to(tmp_path, url, capsys)
    _read_back(out, url, x)


def test_check_fetches_and_verifies_every_chunk_and_names_a_missing_one(tmp_path, capsys):
    _arrays(tmp_path)
    out = _pack_to(tmp_path, str(tmp_path / "pub"), capsys)
    args = ["dataset", "check", "--dataset", out["name"], "--data-store", str(tmp_path / "pub")]
    assert main([*args, "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["root"] == out["root"] and got["chunks"] == out["chunks"] and not got["rejected"]
    victim = sorted(p for p in (tmp_path / "pub").rglob("*") if p.is_file()
                    and p.name != out["name"].removeprefix("manifest:0x"))[0]  # fmt: skip
    victim.unlink()  # a chunk (the manifest itself is kept)
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and victim.name in err and "none of the 1 dataset stores" in err
