"""Packed datasets (PROTOCOL §4.4): pack throughput and root time of a 1 GiB dataset against raw
single-core keccak over the same bytes, and what a verifier replaying 2 segments fetches.

Run: `python -m bench.data_bench` (about 2 minutes on an idle core, 7 on 2 busy shared ones;
needs ~4 GiB of memory and ~2.2 GiB of temporary disk). Writes bench/results/data.json.

- Dataset: X float32 N x F (F = 256, so one example is 1 KiB) with N = 2^20 (exactly 1 GiB of
  features) and N uint32 labels, random; packed with --validation 0 so the whole of it is the
  training split the schedule draws from.
- Times (one run each, same process, one core: the hashers are single-threaded; the tree and
  batch hashers use SIMD lanes, a single stream cannot): `keccak_raw_s` / `keccak_pycryptodome_s`:
  the C / pycryptodome single-stream keccak-256 over X's 1 GiB, the faster of the two
  (`keccak_raw_best_s`) is the baseline of every ratio; `root_s`: the dataset root
  (merkle.dataset_root: leaf hashes + tree, the commitment a spec carries); `pack_s`: the whole
  pack at each chunk size — tree, chunk blobs (big-endian words), their keccak addresses, files
  written to a folder store (without fsync: the CLI fsyncs each blob, which measures the disk),
  and the same without the file writes (`pack_without_writes_vs_keccak`).
- Verifier: a job of T = 1000 steps, batch 32, a checkpoint every 10 steps; 2 segments drawn by
  a seeded RNG; the batches of their 20 steps are the §4.1 schedule (schedule.batch_indices). The
  verifier opens the split as the roles do (`ChunkFetcher.open_split`, through an HTTP blob
  server over the pack's folder: what agents/roles/runtime.py's job_data gives the engine) and
  replays both segments from their start states on it: each step's batch fetches the chunks it
  reads, each checked against its subtree root. The end roots are compared with the full run's
  (`replay_roots_match`). Reported: bytes fetched vs the dataset's bytes and vs the bytes of the
  chunks the batches touch (`chunks_for_examples` of the drawn indices: equal, nothing else is
  fetched), the chunks the split holds after the replay (`chunks_filled`, the same set), and the
  examples' own bytes (the floor any chunking has). `fetch_and_replay_s` is the replay with its
  fetches and checks.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from agents.core.blobs import LocalDirBackend, open_blob_store, serving  # noqa: E402
from agents.data import builtin as data  # noqa: E402
from agents.data import chunks, packed  # noqa: E402
from agents.training import merkle, native, schedule  # noqa: E402
from agents.training.keccak import keccak256_py  # noqa: E402

OUT = ROOT / "bench" / "results" / "data.json"
F = 256
N = 1 << 20  # N x F float32 = 1 GiB
STEPS, BATCH, EVERY, SEGMENTS, SEED = 1000, 32, 10, 2, 20261203
CHUNK_SIZES = (1 << 20, 1 << 16, 1 << 14)


class _Sink:
    """Writes chunk blobs into a folder store's layout, timing the writes apart."""

    def __init__(self, folder: Path) -> None:
        self.backend = LocalDirBackend(folder)
        self.seconds = 0.0

    def __call__(self, address: str, blob: bytes) -> None:
        t0 = time.perf_counter()
        p = self.backend.path(address)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(blob)
        self.seconds += time.perf_counter() - t0


def _replay_indices() -> tuple[list[int], list[int]]:
    segs = sorted(random.Random(SEED).sample(range(STEPS // EVERY), SEGMENTS))
    idx: list[int] = []
    for s in segs:
        for t in range(s * EVERY, (s + 1) * EVERY):
            idx += schedule.batch_indices(SEED, t, BATCH, N).tolist()
    return segs, idx


def _span_bytes(t: packed.TensorEntry, c: int) -> int:
    first, end = t.chunk_span(c)
    return 4 * (end - first)


def _full_run(x: np.ndarray, y: np.ndarray, root: str, segs: list[int]):
    """The job's spec and the full run's states at the sampled segments' ends."""
    from agents.training import spec as sp
    from agents.training.engine import Engine

    obj = json.loads((ROOT / "examples" / "digits-mlp.json").read_text())
    obj |= {"model": {"arch": "mlp", "widths": [F, 64, 10]}, "batch": BATCH, "seed": SEED,
            "steps": STEPS, "checkpoint_every": EVERY,
            "dataset": {"name": "bench", "root": root}}  # fmt: skip
    spec = sp.parse_spec(obj)
    ds = data.Dataset("bench", torch.from_numpy(x), torch.from_numpy(y.reshape(1, -1)))
    eng = Engine(spec, ds)
    st, states = eng.initial_state(), {}
    for t in range((segs[-1] + 1) * EVERY):
        if t % EVERY == 0:
            states[t] = st
        st = eng.step(st, t)
    states[(segs[-1] + 1) * EVERY] = st
    return spec, states


def _replays_match(spec, split, states: dict, segs: list[int]) -> bool:
    """Each sampled segment replayed from its start state on the opened split (fetching as the
    batches read it) ends at the full run's state root (what the verifier attests or
    challenges)."""
    from agents.training.engine import Engine
    from agents.training.state import state_root

    eng = Engine(spec, split)
    for s in segs:
        st = states[s * EVERY]
        for t in range(s * EVERY, (s + 1) * EVERY):
            st = eng.step(st, t)
        if state_root(st) != state_root(states[(s + 1) * EVERY]):
            return False
    return True


def main() -> int:
    if not native.available():
        print("error: the C hashers are unavailable (gcc?)", file=sys.stderr)
        return 1
    rng = np.random.default_rng(SEED)
    x = rng.standard_normal((N, F), dtype=np.float32)
    y = rng.integers(0, 10, N, dtype=np.int64)
    dataset_bytes = x.nbytes + 4 * N
    out: dict = {"features": [N, F], "dataset_bytes": dataset_bytes, "runs": []}

    t0 = time.perf_counter()
    digest = (np.empty(32, np.uint8),)
    native.lib().vtp_keccak256(x.ctypes.data, x.nbytes, digest[0].ctypes.data)
    keccak_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    keccak256_py(memoryview(x).cast("B"))
    keccak_py_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    root = "0x" + merkle.dataset_root(x, y.reshape(1, -1)).hex()
    root_s = time.perf_counter() - t0
    gib = x.nbytes / 2**30
    base_s = min(keccak_s, keccak_py_s)  # the faster single-core, single-stream keccak here
    out |= {
        "keccak_raw_s": round(keccak_s, 3),
        "keccak_raw_MiBps": round(x.nbytes / 2**20 / keccak_s, 1),
        "keccak_pycryptodome_s": round(keccak_py_s, 3),
        "root_s": round(root_s, 3),
        "keccak_raw_best_s": round(base_s, 3),
        "root_vs_keccak": round(root_s / base_s, 3),
        "root": root,
    }
    segs, idx = _replay_indices()
    out["verifier"] = {"steps": STEPS, "batch": BATCH, "checkpoint_every": EVERY,
                       "segments": segs, "examples_drawn": len(idx),
                       "distinct_examples": len(set(idx)),
                       "example_bytes": len(set(idx)) * (F * 4 + 4)}  # fmt: skip
    spec, states = _full_run(x, y, root, segs)
    for chunk_bytes in CHUNK_SIZES:
        tmp = Path(tempfile.mkdtemp(prefix="vtp-data-bench-"))
        try:
            cfg = packed.PackConfig(packed.Fraction(0), chunk_bytes, 2 << 30)
            sink = _Sink(tmp / "blobs")
            t0 = time.perf_counter()
            m = packed.pack_classification(x, y, 10, cfg, sink)
            pack_s = time.perf_counter() - t0
            assert m.root == root, "a packed dataset's root is the arrays' dataset root"
            raw = m.canonical_bytes()
            run: dict = {
                "chunk_bytes": chunk_bytes,
                "chunks": sum(len(t.chunks) for t in m.splits[0].tensors),
                "manifest_bytes": len(raw),
                "pack_s": round(pack_s, 3),
                "pack_MiBps": round(dataset_bytes / 2**20 / pack_s, 1),
                "pack_vs_keccak": round(pack_s / (base_s * dataset_bytes / x.nbytes), 3),
                "of_which_file_writes_s": round(sink.seconds, 3),
                "pack_without_writes_vs_keccak": round(
                    (pack_s - sink.seconds) / (base_s * dataset_bytes / x.nbytes), 3
                ),
            }
            with serving(tmp / "blobs") as server:
                f = chunks.ChunkFetcher(m, [open_blob_store(server.url)])
                t0 = time.perf_counter()
                split = f.open_split("train")
                match = _replays_match(spec, split, states, segs)
                replay_s = time.perf_counter() - t0
            need = f.chunks_for_examples("train", idx)
            touched = sum(_span_bytes(m.splits[0].tensor(t), c) for t, c in need)
            assert split.filler is not None
            run["verifier"] = {
                "chunks_touched": len(need),
                "chunks_filled": len(split.filler.filled),
                "filled_is_touched": split.filler.filled == need,
                "bytes_touched": touched,
                "bytes_fetched": f.stats.bytes,
                "fetched_vs_touched": round(f.stats.bytes / touched, 6),
                "fetched_vs_dataset": round(f.stats.bytes / dataset_bytes, 6),
                "rejected": len(f.stats.rejected),
                "fetch_and_replay_s": round(replay_s, 3),
                "replay_roots_match": match,
            }
            out["runs"].append(run)
            print(json.dumps(run), flush=True)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    out["dataset_GiB"] = round(gib, 3)
    out["cpu"] = os.cpu_count()
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps({k: v for k, v in out.items() if k != "runs"}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
