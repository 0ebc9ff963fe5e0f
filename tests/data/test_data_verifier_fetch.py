"""A drawn verifier of a job on a packed dataset fetches only the chunks its sampled segments'
batches read (issue #26, PROTOCOL §4.4), through the role's own code path: `Verifier.replay`
loads the job as every role does (load_job -> job_runtime: the split opened, not loaded) and
replays the segments from the solver's checkpoints. No chain: the role is built with
object.__new__ and its contracts are fakes (the kit of tests/roles/test_verifier_resilience.py).

The digits are packed at 1 KiB chunks (4 examples a chunk of X, 256 labels a chunk of Y) and
published to a store; the verifier's first store holds a corrupted and a missing copy of two
chunks its segments need. Counted three ways: the chunks the verifier's split holds, the chunk
files in its disk cache and its fetcher's tally, each against the chunks the segments' batches
touch (§4.1's schedule, worked out here apart from the role) and the dataset's chunk count.
A whistleblower re-checking an attestation of those segments replays on the same code path and
fetches the same chunks.

A version-3 job (the digits CNN) is loaded the same way (load_job) and one segment replayed on
its runtime: the same property for the general-model engine, and the same roots as the job on
the built-in name.
"""

from __future__ import annotations

import dataclasses
import shutil
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "roles"))

from rolefakes import FakeContract, decoded, in_rounds, recheck_now  # noqa: E402
from test_verifier_resilience import (  # noqa: E402
    MANAGER_ABI,
    OTHER,
    UNIT,
    Job,
    committed_events,
    solver_data,
    unit_tuple,
    unit_view,
    verdict_of,
    verifier,
    whistleblower,
)

from agents.__main__ import main  # noqa: E402
from agents.core.blobs import LocalDirBackend, open_blob_store  # noqa: E402
from agents.data import builtin, chunks, packed  # noqa: E402
from agents.dispute.graph import job_graph  # noqa: E402
from agents.dispute.trace import Computation  # noqa: E402
from agents.roles.jobs import load_job  # noqa: E402
from agents.training import spec as specs  # noqa: E402
from agents.training.engine import Engine  # noqa: E402
from agents.training.state import state_root  # noqa: E402

STEPS, EVERY = 20, 2  # 10 segments of 2 steps: each reads 2 batches of 32 examples
SAMPLED = [2, 7]
CHUNK_BYTES = 1024


def _pack_digits(tmp: Path, item_shape: tuple[int, ...]):
    """(manifest, the store it was published to, the manifest file) of the digits, each example
    of `item_shape`, packed from .npy with the built-in split's rule (so its root is
    sklearn-digits/train's: the root commits X as N x 64 whatever the shape)."""
    from sklearn.datasets import load_digits

    raw = load_digits()
    x = (raw.data.astype(np.float32) / np.float32(16.0)).astype(np.float32)
    np.save(tmp / "x.npy", x.reshape(-1, *item_shape))
    np.save(tmp / "y.npy", raw.target)
    good = tmp / "datastore"
    assert main(["dataset", "pack", "--features", str(tmp / "x.npy"), "--labels",
                 str(tmp / "y.npy"), "--validation", "0.2", "--chunk-bytes", str(CHUNK_BYTES),
                 "--out", str(tmp / "ds"), "--blob-url", str(good)]) == 0  # fmt: skip
    manifest_file = tmp / "ds" / "manifest.json"
    return packed.manifest_from_bytes(manifest_file.read_bytes()), good, manifest_file


def _touched(m: packed.Manifest, spec, segments: list[int]) -> set[tuple[str, int]]:
    """The (tensor, chunk) pairs the batches of these segments read (§4.1), worked out from
    the schedule and the manifest alone."""
    steps = [t for s in segments for t in range(s * EVERY, (s + 1) * EVERY)]
    idx = chunks.step_indices(spec.seed, steps, spec.batch, m.splits[0].n)
    x, y = m.splits[0].tensor("x"), m.splits[0].tensor("y")
    per_x, per_y = x.chunk_leaves * 64, y.chunk_leaves * 64  # elements a chunk
    need: set[tuple[str, int]] = set()
    for i in np.unique(idx).tolist():  # example i: X's row i, Y's element i
        need.update(
            ("x", c) for c in range(i * x.cols // per_x, ((i + 1) * x.cols - 1) // per_x + 1)
        )
        need.add(("y", i // per_y))
    return need


def _chunk_count(m: packed.Manifest) -> int:
    return sum(len(t.chunks) for t in m.splits[0].tensors)


def _address(m: packed.Manifest, key: tuple[str, int]) -> str:
    return m.splits[0].tensor(key[0]).chunks[key[1]].address


def _job_on(name: str, root: str) -> specs.JobSpec:
    spec = specs.load(REPO / "examples" / "digits-mlp.json")
    return dataclasses.replace(
        spec, dataset_name=name, dataset_root=root, steps=STEPS, checkpoint_every=EVERY
    )


def _packed_job(tmp_path: Path) -> tuple[packed.Manifest, Path, Job, int]:
    """(manifest, its store, the job on it, N): the digits MLP job of STEPS steps on the packed
    digits; the solver's honest run is the same job on the built-in name (the same data, so the
    same roots)."""
    m, good, _ = _pack_digits(tmp_path, (64,))
    spec = _job_on(m.name(), m.root)
    ds = builtin.load_dataset(builtin.DIGITS_TRAIN)
    engine = Engine(_job_on(builtin.DIGITS_TRAIN, m.root), ds)
    honest = Computation(engine, STEPS, EVERY)
    t = [0] * 17  # IJobManager.Job
    t[1], t[10], t[13] = STEPS, EVERY, spec.spec_hash()
    t[14], t[15] = ds.root(), state_root(engine.initial_state())
    return m, good, Job(spec, engine, honest, decoded("getJob", tuple(t))), ds.n


def test_a_drawn_verifier_fetches_only_the_chunks_its_segments_batches_touch(tmp_path):
    m, good, job, n = _packed_job(tmp_path)
    spec = job.spec
    touched = _touched(m, spec, SAMPLED)
    assert len(touched) < _chunk_count(m) // 2  # a real saving, or the test proves nothing
    bad = tmp_path / "badstore"
    shutil.copytree(good, bad)
    first, second = sorted(touched)[0], sorted(touched)[-1]
    LocalDirBackend(bad).path(_address(m, first)).write_bytes(b"\0" * CHUNK_BYTES)
    LocalDirBackend(bad).path(_address(m, second)).unlink()
    cache = tmp_path / "chunk-cache"
    fetch = chunks.FetchConfig((str(bad), str(good)), str(cache), 64 << 20)

    with solver_data(tmp_path, job) as data:
        manager = FakeContract(
            getJob=lambda j: job.tuple_,
            sampledSegments=lambda u, v: SAMPLED,
            getUnit=lambda u: unit_tuple(data.checkpoint_root),
        )
        manager.events = committed_events(data.locator, data.checkpoint_root)
        game = FakeContract(configOf=lambda j: job_graph(spec, n).config.hash())
        v = verifier(tmp_path, manager=manager, game=game)
        v.config = dataclasses.replace(v.config, fetch=fetch)
        v.agent.blobs.put(spec.canonical_bytes())
        u = unit_view(data)
        in_rounds(v, lambda: v.replay(u), lambda: verdict_of(v, u) is not None)
        rec = v.agent.store.get_record("verdict", f"{u.unit_id}:{u.attempt}")
        assert rec.state == "agree"
        assert rec.data["end_roots"] == ["0x" + data.roots[s + 1].hex() for s in SAMPLED]

    split = v._replay_jobs.get(1).runtime.engine.data
    assert split.filler.filled == touched  # the chunks the replay read, and no other
    assert split.filler.chunk_count == _chunk_count(m)
    cached = {p.name for p in cache.iterdir() if p.name.startswith("0x")}
    assert cached == {_address(m, k) for k in touched}
    stats = split.filler.fetcher.stats
    assert stats.chunks == len(touched)
    assert stats.bytes < m.data_bytes() // 2
    # the bad copies were seen, dropped and fetched again from the next store
    assert len(stats.rejected) == 2 and all("badstore" in line for line in stats.rejected)
    corrupt, missing = _address(m, first), _address(m, second)
    assert any(corrupt in line and "corrupt" in line for line in stats.rejected)
    assert any(missing in line and "not in" in line for line in stats.rejected)


def test_a_whistleblower_rechecking_an_attestation_fetches_only_its_segments_chunks(tmp_path):
    m, good, job, n = _packed_job(tmp_path)
    fetch = chunks.FetchConfig((str(good),))
    with solver_data(tmp_path, job) as data:
        manager = FakeContract(
            MANAGER_ABI,
            getJob=lambda j: job.tuple_,
            getUnit=lambda u: unit_tuple(data.checkpoint_root),
        )
        manager.events = committed_events(data.locator, data.checkpoint_root)
        game = FakeContract(
            configOf=lambda j: job_graph(job.spec, n).config.hash(), placementOf=lambda j: (0, 0, 0)
        )
        w = whistleblower(tmp_path, manager=manager, game=game)
        w.config = dataclasses.replace(w.config, fetch=fetch)
        w.agent.blobs.put(job.spec.canonical_bytes())
        key = f"{UNIT}:{OTHER}:9"
        ends = ["0x" + data.roots[s + 1].hex() for s in SAMPLED]
        record = {
            "unit": UNIT,
            "verifier": OTHER,
            "block": 9,
            "segments": SAMPLED,
            "end_roots": ends,
        }
        w.agent.store.put_record("attestation", key, "new", record)
        recheck_now(w, key)
        assert w.agent.store.get_record("attestation", key).state == "true"
    split = w.jobs.get(1).runtime.engine.data
    assert split.filler.filled == _touched(m, job.spec, SAMPLED)


CNN = REPO / "examples" / "models" / "digits_cnn.py"


def _cnn_job(tmp: Path, dataset: str, name: str) -> tuple[specs.ModelSpec, object, tuple]:
    out = tmp / f"{name}.json"
    argv = ["job", "build", "--model", f"{CNN}:make_model", "--dataset", dataset, "--optimizer",
            "sgd", "--lr", "0.05", "--momentum", "0.9", "--batch", "4", "--steps", "8",
            "--checkpoint-every", "2", "--seed", "3", "--out", str(out)]  # fmt: skip
    assert main(argv) == 0
    spec = specs.load(out)
    store = open_blob_store(str(out.with_suffix(".blobs")))
    store.put(spec.canonical_bytes())
    t = [0] * 17  # IJobManager.Job
    t[1], t[10], t[13] = spec.steps, spec.checkpoint_every, spec.spec_hash()
    t[14], t[15] = bytes.fromhex(spec.dataset_root[2:]), bytes.fromhex(spec.state[2:])
    return spec, store, decoded("getJob", tuple(t))


def test_a_version_3_replay_fetches_only_its_segments_chunks_and_reaches_the_builtin_roots(
    tmp_path,
):
    m, good, manifest_file = _pack_digits(tmp_path, (1, 8, 8))  # the CNN reads 1 x 8 x 8
    fetch = chunks.FetchConfig((str(good),))
    spec, store, job = _cnn_job(tmp_path, str(manifest_file), "packed")
    ref, ref_store, ref_job = _cnn_job(tmp_path, builtin.DIGITS_TRAIN, "builtin")
    assert spec.dataset_name == m.name() and spec.dataset_root == ref.dataset_root
    rt = load_job(3, job, [store], None, fetch=fetch).runtime
    built = load_job(4, ref_job, [ref_store], None).runtime
    segment = 2
    ref_st = built.initial_state()
    for t in range(segment * 2):  # the solver's S at the segment's start (the built-in run)
        ref_st = built.step(ref_st, t)
    st = ref_st
    assert rt.job.data.filler.filled == set()  # nothing fetched to load the job
    for t in range(segment * 2, segment * 2 + 2):
        st, ref_st = rt.step(st, t), built.step(ref_st, t)
    assert rt.state_root(st) == built.state_root(ref_st)
    idx = chunks.step_indices(spec.seed, [segment * 2, segment * 2 + 1], spec.batch, m.splits[0].n)
    fetcher = rt.job.data.filler.fetcher
    assert rt.job.data.filler.filled == fetcher.chunks_for_examples("train", idx)
    assert len(rt.job.data.filler.filled) <= 2 * 2 * spec.batch < _chunk_count(m)
