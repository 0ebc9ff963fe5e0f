"""A dispute's opening of a data element of a packed dataset fetches only the chunks holding the
opened elements (issue #26, PROTOCOL §4.4): a chunk is an aligned subtree of its tensor's Merkle
tree, so an element's path is the proof inside its chunk, then the manifest's chunk roots above
it, and the tensor roots come from the manifest. The opening must be bit for bit the one the
whole tensor gives (what the chain checks: tests/data/test_data_dispute_e2e.py proves one).

Pure property test: random classification and token datasets of random sizes (a partial last
chunk, a tensor smaller than one chunk) and chunk sizes, random element sets, against the
whole-tensor opening (`trace.merkle_opening`). Then the disputes' own code paths, v1
(`Computation.element_openings`) and v3 (`ModelComputation.element_openings`, the digits CNN):
every node that reads the data, opened on the packed split, equals the same opening on the
built-in dataset, and the split holds no chunk beyond those its replayed batches read.
"""

from __future__ import annotations

import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "data"))
sys.path.insert(0, str(REPO / "tests" / "roles"))

from test_data_verifier_fetch import _cnn_job, _job_on, _pack_digits  # noqa: E402

from agents.core.blobs import BlobError, open_blob_store  # noqa: E402
from agents.data import builtin, chunks, packed  # noqa: E402
from agents.dispute.encoding import KIND_DATA_X, KIND_DATA_Y  # noqa: E402
from agents.dispute.graph import job_graph  # noqa: E402
from agents.dispute.model_graph import DATA_KINDS, model_job_graph  # noqa: E402
from agents.dispute.model_trace import ModelComputation  # noqa: E402
from agents.dispute.trace import Computation, merkle_opening  # noqa: E402
from agents.roles.jobs import load_job  # noqa: E402
from agents.training import merkle  # noqa: E402
from agents.training.engine import Engine  # noqa: E402


class DictStore:
    """The blob-store surface ChunkFetcher reads, over a dict; it counts what it serves."""

    backend = "dict"

    def __init__(self) -> None:
        self.blobs: dict[str, bytes] = {}
        self.served: list[str] = []

    def put(self, address: str, blob: bytes) -> None:
        self.blobs[address] = blob

    def get(self, address: str, max_bytes: int) -> bytes:
        if address not in self.blobs:
            raise BlobError(f"{address} not in the dict")
        self.served.append(address)
        return self.blobs[address]


def _whole_opening(arrays: list[np.ndarray], k: int, elems: set[int]) -> tuple:
    roots = [merkle.tensor_root(a) for a in arrays]
    proof = merkle.list_proof(merkle.DATASET_DOMAIN, roots, k).siblings
    return merkle_opening(arrays[k], list(proof), elems)


def _holding(t: packed.TensorEntry, elems: set[int]) -> set[tuple[str, int]]:
    per = t.chunk_leaves * merkle.LEAF_ELEMS
    return {(t.name, (e // merkle.LEAF_ELEMS) * merkle.LEAF_ELEMS // per) for e in elems}


def _random_dataset(rng: np.random.Generator, store: DictStore, chunk_bytes: int):
    """(manifest, the train split's arrays as the engine commits them) of a random dataset."""
    cfg = packed.PackConfig(validation=Fraction(0), chunk_bytes=chunk_bytes)
    if rng.random() < 0.5:
        n, f = int(rng.integers(1, 400)), int(rng.integers(1, 40))
        x = rng.standard_normal((n, f)).astype(np.float32)
        y = rng.integers(0, 7, n)
        y[0] = 6  # the class count is the largest label + 1
        m = packed.pack_classification(x, y, None, cfg, store.put)
        return m, [x, y.reshape(1, -1)]
    toks = rng.integers(0, 50, int(rng.integers(2, 20000)))
    m = packed.pack_tokens(toks, 50, cfg, store.put)
    return m, [toks.reshape(1, -1)]


@pytest.mark.parametrize("seed", range(6))
def test_a_packed_opening_is_the_whole_tensor_opening_from_only_its_chunks(seed):
    rng = np.random.default_rng(seed)
    for _ in range(8):
        chunk_bytes = 1 << int(rng.integers(8, 14))  # 1 to 32 leaves a chunk
        store = DictStore()
        m, arrays = _random_dataset(rng, store, chunk_bytes)
        split = chunks.ChunkFetcher(m, [store]).open_split()
        for k, t in enumerate(m.splits[0].tensors):
            for _ in range(4):
                before = set(split.filler.filled)
                size = int(rng.integers(1, 6))
                elems = {int(e) for e in rng.integers(0, t.numel, size)}
                if rng.random() < 0.3:
                    elems.add(t.numel - 1)  # the partial last chunk, its padding leaves
                got = split.open_elements(k, elems)
                assert got == _whole_opening(arrays, k, elems)
                assert split.filler.filled == before | _holding(t, elems)
        # fetched: once each, the chunks some opening held, whatever the dataset's size
        assert len(store.served) == len(split.filler.filled)


def test_a_v1_dispute_opens_data_elements_fetching_no_chunk_its_batches_did_not_read(tmp_path):
    m, good, _ = _pack_digits(tmp_path, (64,))
    fetcher = chunks.ChunkFetcher(m, [open_blob_store(str(good))])
    split = fetcher.open_split()
    steps, every, t = 20, 2, 3
    packed_comp = Computation(Engine(_job_on(m.name(), m.root), split), steps, every)
    ds = builtin.load_dataset(builtin.DIGITS_TRAIN)
    ref = Computation(Engine(_job_on(builtin.DIGITS_TRAIN, m.root), ds), steps, every)
    jg = job_graph(_job_on(m.name(), m.root), ds.n)
    readers = [i for i, d in enumerate(jg.nodes)
               if any(o.kind in (KIND_DATA_X, KIND_DATA_Y) for o in d.inputs)]  # fmt: skip
    assert readers  # the batch gather and the loss's labels
    roots = ref.trace_roots(t)
    for i in readers:
        for element in (0, 17):  # batch row 0 of X, label 17 of Y
            got = packed_comp.element_openings(jg, roots, t, i, element)
            assert got == ref.element_openings(jg, roots, t, i, element)
            assert any(o[3] for o in got)  # a data element was opened
    idx = chunks.step_indices(_job_on(m.name(), m.root).seed, range(t + 1), 32, m.splits[0].n)
    read = fetcher.chunks_for_examples("train", idx)
    assert split.filler.filled <= read and len(read) < split.filler.chunk_count
    assert fetcher.stats.chunks == len(split.filler.filled)


def test_a_v3_dispute_opens_batch_elements_fetching_no_chunk_its_batches_did_not_read(tmp_path):
    m, good, manifest_file = _pack_digits(tmp_path, (1, 8, 8))
    fetch = chunks.FetchConfig((str(good),))
    spec, store, job = _cnn_job(tmp_path, str(manifest_file), "packed")
    ref_spec, ref_store, ref_job = _cnn_job(tmp_path, builtin.DIGITS_TRAIN, "builtin")
    rt = load_job(3, job, [store], None, fetch=fetch).runtime
    ref_rt = load_job(4, ref_job, [ref_store], None).runtime
    jg, t = model_job_graph(rt.job), 3
    comp = ModelComputation(rt.job, jg, rt.initial_state(), 8, 2)
    ref = ModelComputation(ref_rt.job, model_job_graph(ref_rt.job), ref_rt.initial_state(), 8, 2)
    readers = [i for i, d in enumerate(jg.nodes) if any(o.kind in DATA_KINDS for o in d.inputs)]
    assert readers
    roots = ref.trace_roots(t)
    for i in readers:
        for element in (0, 3):  # the batch holds 4 examples
            got = comp.element_openings(jg, roots, t, i, element)
            assert got == ref.element_openings(ref.jg, roots, t, i, element)
            assert any(o[3] for o in got)
    split = rt.job.data
    idx = chunks.step_indices(spec.seed, range(t + 1), spec.batch, m.splits[0].n)
    assert split.filler.filled <= split.filler.fetcher.chunks_for_examples("train", idx)
    assert len(split.filler.filled) < split.filler.chunk_count
