"""Partial, checked chunk fetches (agents/data/chunks.py, PROTOCOL §4.4): only the chunks a
piece of work touches; a corrupted or missing chunk is detected, fetched from the next store and
never used; the disk cache keeps to its budget and re-checks what it holds."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from agents.__main__ import main
from agents.core.blobs import LocalDirBackend, open_blob_store, serving
from agents.data import builtin as data
from agents.data import chunks, datasets, packed
from agents.training import merkle, schedule

N, F, CHUNK = 300, 10, 1024  # x: 3000 elements = 47 leaves -> 12 chunks of 4 leaves


@pytest.fixture
def ds(tmp_path, capsys) -> tuple[Path, packed.Manifest, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(5)
    x = rng.standard_normal((N, F)).astype(np.float32)
    y = rng.integers(0, 4, N)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)
    assert main(["dataset", "pack", "--features", str(tmp_path / "x.npy"), "--labels",
                 str(tmp_path / "y.npy"), "--validation", "0", "--chunk-bytes", str(CHUNK),
                 "--out", str(tmp_path / "ds"), "--json"]) == 0  # fmt: skip
    out = json.loads(capsys.readouterr().out)
    return tmp_path / "ds", packed.manifest_from_bytes(Path(out["manifest"]).read_bytes()), x, y


def _copy_store(src: Path, dst: Path) -> LocalDirBackend:
    shutil.copytree(src / "blobs", dst)
    return LocalDirBackend(dst)


def _fetcher(m, *urls, cache=None) -> chunks.ChunkFetcher:
    return chunks.ChunkFetcher(m, [open_blob_store(str(u)) for u in urls], cache)


def test_the_whole_split_materialises_to_the_packed_arrays(ds):
    folder, m, x, y = ds
    got = _fetcher(m, folder / "blobs").load()
    assert np.array_equal(got.x.numpy(), x) and np.array_equal(got.y.numpy()[0], y)
    assert "0x" + got.root().hex() == m.root and got.classes == 4
    assert len(m.splits[0].tensor("x").chunks) == 12


def test_corrupted_and_missing_chunks_come_from_the_next_store_and_are_never_used(ds, tmp_path):
    folder, m, x, y = ds
    bad = _copy_store(folder, tmp_path / "bad")
    xs = m.splits[0].tensor("x").chunks
    corrupt, missing = xs[3].address, xs[7].address
    blob = bytearray(bad.read(corrupt))
    blob[5] ^= 1
    bad.path(corrupt).write_bytes(bytes(blob))
    bad.path(missing).unlink()
    f = _fetcher(m, tmp_path / "bad", folder / "blobs")
    got = f.load()
    assert np.array_equal(got.x.numpy(), x) and "0x" + got.root().hex() == m.root
    assert len(f.stats.rejected) == 2
    assert corrupt in f.stats.rejected[0] and "corrupt" in f.stats.rejected[0]
    assert missing in f.stats.rejected[1] and "not in" in f.stats.rejected[1]
    # with no good copy anywhere the chunk is refused, never handed out
    only_bad = _fetcher(m, tmp_path / "bad")
    for i in (3, 7):
        with pytest.raises(chunks.ChunkUnavailable, match=xs[i].address):
            only_bad.chunk("train", "x", i)


def test_a_bad_chunk_from_an_http_store_falls_back(ds, tmp_path):
    folder, m, x, _ = ds
    bad = _copy_store(folder, tmp_path / "bad")
    addr = m.splits[0].tensor("x").chunks[0].address
    bad.path(addr).write_bytes(b"\0" * len(bad.read(addr)))
    with serving(tmp_path / "bad") as server:
        f = _fetcher(m, server.url, folder / "blobs")
        assert np.array_equal(f.chunk("train", "x", 0), x.reshape(-1)[:256].view(np.uint32))
    assert len(f.stats.rejected) == 1 and addr in f.stats.rejected[0]


def test_a_manifest_pointing_at_the_wrong_blob_is_caught_by_the_subtree_root(ds):
    folder, m, _, _ = ds
    t = m.splits[0].tensor("x")
    swapped = (dataclasses.replace(t.chunks[0], address=t.chunks[1].address), *t.chunks[1:])
    t2 = dataclasses.replace(t, chunks=swapped)
    split = dataclasses.replace(m.splits[0], tensors=(t2, m.splits[0].tensors[1]))
    m2 = dataclasses.replace(m, splits=(split,))
    f = _fetcher(m2, folder / "blobs")
    with pytest.raises(chunks.ChunkUnavailable):
        f.chunk("train", "x", 0)
    assert "subtree root" in f.stats.rejected[0]


def test_only_the_chunks_a_batch_touches_are_fetched(ds):
    folder, m, x, y = ds
    f = _fetcher(m, folder / "blobs")
    idx = schedule.batch_indices(7, 3, 8, N).tolist()
    need = f.chunks_for_examples("train", idx)
    per = 4 * 64  # elements per chunk
    want = {("x", e // per) for i in idx for e in (i * F, i * F + F - 1)}
    want |= {("y", i // per) for i in idx}
    assert need == want
    xs, ys = f.examples("train", idx)
    assert np.array_equal(xs.numpy(), x[idx]) and np.array_equal(ys.numpy(), y[idx])
    assert f.stats.chunks == len(need) < 12 + 2
    assert f.stats.bytes == sum(len(LocalDirBackend(folder / "blobs").read(
        m.splits[0].tensor(t).chunks[c].address)) for t, c in need)  # fmt: skip


def test_token_windows_touch_the_chunks_that_hold_them(tmp_path, capsys):
    t = (np.arange(5000) * 7) % 11
    np.save(tmp_path / "t.npy", t)
    args = ["--tokens", str(tmp_path / "t.npy"), "--vocab", "11", "--chunk-bytes", "1024"]
    assert main(["dataset", "pack", *args, "--out", str(tmp_path / "ds"), "--json"]) == 0
    m = packed.manifest_from_bytes((tmp_path / "ds" / "manifest.json").read_bytes())
    f = _fetcher(m, tmp_path / "ds" / "blobs")
    assert f.chunks_for_windows("train", [0, 250, 1020], 10) == {
        ("tokens", 0), ("tokens", 1), ("tokens", 3), ("tokens", 4)}  # fmt: skip
    got = f.load()
    assert np.array_equal(got.tokens.numpy(), t[:4500]) and got.classes == 11
    assert "0x" + got.root().hex() == m.root


def test_the_cache_serves_repeats_keeps_its_budget_and_rechecks(ds, tmp_path):
    folder, m, x, _ = ds
    budget = 5 * CHUNK
    cache = chunks.DiskCache(tmp_path / "cache", budget)
    f = _fetcher(m, folder / "blobs", cache=cache)
    f.chunk("train", "x", 0)
    f.chunk("train", "x", 0)
    assert (f.stats.chunks, f.stats.cache_hits) == (1, 1)
    for i in range(12):
        f.chunk("train", "x", i)
    assert cache.used <= budget
    assert sum(p.stat().st_size for p in (tmp_path / "cache").iterdir()) == cache.used
    last = m.splits[0].tensor("x").chunks[11].address
    (tmp_path / "cache" / last).write_bytes(b"\1" * CHUNK)  # the disk rots
    before = f.stats.chunks
    assert np.array_equal(f.chunk("train", "x", 11), x.reshape(-1)[11 * 256 :].view(np.uint32))
    assert f.stats.chunks == before + 1 and "cache" in f.stats.rejected[-1]


def test_load_dataset_by_name_reads_the_configured_stores(ds, tmp_path):
    folder, m, x, _ = ds
    fetch = chunks.FetchConfig((str(tmp_path / "nowhere"), str(folder / "blobs")))
    got = datasets.load_dataset(m.name(), fetch)
    assert np.array_equal(got.x.numpy(), x) and datasets.shape(m.name(), fetch) == (N, F)
    assert datasets.held_out(got) is None  # packed with --validation 0
    with pytest.raises(chunks.ChunkUnavailable, match="none of the dataset stores"):
        datasets.load_dataset(m.name())


def test_a_data_element_is_opened_against_the_dataset_root_from_its_chunk_alone(ds):
    """The one-step proof of the batch gather opens one element of X or Y (§3 element proof):
    from one fetched chunk and the manifest it is the proof the whole tensor would give."""
    folder, m, x, y = ds
    f = _fetcher(m, folder / "blobs")
    for tensor, arr in (("x", x), ("y", y.reshape(1, -1))):
        t = m.splits[0].tensor(tensor)
        droot = bytes.fromhex(t.data_root[2:])
        for e in (0, t.numel // 2 + 3, t.numel - 1):
            i = e // (t.chunk_leaves * 64)
            got = packed.element_proof_from_chunk(t, i, f.chunk("train", tensor, i), e)
            assert got == merkle.element_proof(arr, e)
            assert merkle.verify_element_proof(droot, t.numel, got)
            want = arr.reshape(-1).view(np.uint32)[e] if tensor == "x" else arr[0, e]
            assert merkle.element_value_bits(got, e) == int(want)
    assert f.stats.chunks <= 6


def test_a_dataset_over_the_max_is_refused_before_any_chunk(ds, tmp_path):
    folder, m, _, _ = ds
    cfg = chunks.FetchConfig((str(folder / "blobs"),), max_dataset_bytes=m.data_bytes() - 1)
    with pytest.raises(data.DatasetError, match=r"over --max-dataset-mib"):
        chunks.open_packed(m.name(), cfg)
    assert chunks.open_packed(m.name(), dataclasses.replace(cfg, max_dataset_bytes=None))


def _chunk0(o: dict) -> None:
    c = o["splits"]["train"]["tensors"][0]["chunks"][0]
    c[0] = "0x" + "11" * 32


TAMPER = {
    "format": (lambda o: o.update(format="vtp.dataset.v0"), "format"),
    "kind": (lambda o: o.update(kind="images"), "kind"),
    "rule": (lambda o: o["split"].update(rule="tail"), "split.rule"),
    "chunk_root": (_chunk0, "chunk roots do not give its data root"),
    "data_root": (lambda o: o["splits"]["train"]["tensors"][1].update(
        data_root="0x" + "22" * 32), "chunk roots do not give"),
    "split_root": (lambda o: o["splits"]["train"].update(root="0x" + "33" * 32), "its tensors"),
    "root": (lambda o: o.update(root="0x" + "44" * 32), "training split's root"),
    "rows": (lambda o: o["splits"]["train"]["tensors"][0].update(rows=299), "wrong shape"),
    "huge": (lambda o: o["splits"]["train"]["tensors"][0].update(rows=1 << 40), "do not cover"),
    "chunk_bytes": (lambda o: o.update(chunk_bytes=3000), "chunk_bytes"),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(TAMPER))
def test_a_tampered_manifest_is_refused_on_parse(ds, case):
    _, m, _, _ = ds
    obj = json.loads(m.canonical_bytes())
    edit, needle = TAMPER[case]
    edit(obj)
    with pytest.raises(data.DatasetError, match=needle):
        packed.manifest_from_bytes(json.dumps(obj).encode())


def test_an_opened_split_fetches_a_chunk_once_and_refuses_labels_outside_its_classes(ds):
    """A split opened for the roles fills each chunk once, as reads need it; a chunk whose labels
    reach the manifest's class count (its roots can still be right: a hostile packer) stops the
    read before anything is trained on it."""
    folder, m, x, y = ds
    f = _fetcher(m, str(folder / "blobs"))
    split = f.open_split("train")
    assert split.filler.filled == set() and f.stats.chunks == 0
    split.prepare([0, 1, 299])
    split.prepare([1, 299])
    assert f.stats.chunks == len(f.chunks_for_examples("train", [0, 1, 299]))
    np.testing.assert_array_equal(split.x[[0, 299]].numpy(), x[[0, 299]])
    assert split.y[0, 299] == y[299]
    lying = _fetcher(dataclasses.replace(m, classes=int(y.max())), str(folder / "blobs"))
    with pytest.raises(data.DatasetError, match=r"chunk 0 of train\.y holds label 3, outside"):
        lying.open_split("train").prepare([0])
