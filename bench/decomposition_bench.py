"""Decomposition benchmark -> bench/results/decomposition.json.

Wall time of the 2-round x 3-shard digits job (examples/digits-2x3.json, T = 400 steps in all)
with S = 3 solver processes, one unit each per round, against the same total steps on one solver
(examples/digits-mlp.json, T = 400) in one process, on the same machine, measured in one run,
interleaved, median of rounds. The solver processes are started before timing (solvers are long
running); each round the parent sends G_r (a state blob, as the chain's solvers fetch it), the
S units train in parallel and return their final states, and the parent aggregates (the
aggregator's work). The decomposed run's G_R root is checked against the one-process
`run_job` root, bit for bit. A wider model (64 -> 1024 -> 10, same schedule) shows the
compute-bound case. `ratio` = decomposed wall / single wall (below 1: the decomposition is
faster); `cpus` is what the machine offers (S processes cannot beat one on fewer than S cores).

Run: .venv/bin/python -m bench.decomposition_bench  (about a minute on 2 cores)
"""

from __future__ import annotations

import dataclasses
import json
import multiprocessing as mp
import os
import platform
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agents.data import builtin as datasets  # noqa: E402
from agents.roles.artifacts import decode_state, encode_state  # noqa: E402
from agents.training import decompose as D  # noqa: E402
from agents.training import spec as S  # noqa: E402
from agents.training.engine import Engine, EngineConfig  # noqa: E402
from agents.training.state import state_root  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
OUT = Path(__file__).resolve().parent / "results" / "decomposition.json"
SPEC = REPO / "examples" / "digits-2x3.json"
SINGLE = REPO / "examples" / "digits-mlp.json"
ROUNDS = 3  # timed repetitions of each side (median)


def widen(spec: S.JobSpec, hidden: int) -> S.JobSpec:
    w = (spec.widths[0], hidden, spec.widths[-1])
    return dataclasses.replace(spec, widths=w)


def _worker(spec_json: str, shard: int, inbox: mp.Queue, outbox: mp.Queue) -> None:
    """One solver process: unit (r, shard) for each (r, G_r blob) it is sent."""
    os.environ["OMP_NUM_THREADS"] = "1"
    spec = S.parse_spec(json.loads(spec_json))
    eng = D.UnitEngine(spec, datasets.load_dataset(spec.dataset_name), shard, EngineConfig())
    outbox.put(("ready", shard, b""))
    while True:
        msg = inbox.get()
        if msg is None:
            return
        r, blob = msg
        res = eng.run_unit(r, decode_state(spec, blob))
        outbox.put(("done", shard, encode_state(res.final)))


class Pool:
    def __init__(self, spec: S.JobSpec) -> None:
        ctx = mp.get_context("spawn")
        self.spec = spec
        self.out: mp.Queue = ctx.Queue()
        self.ins = [ctx.Queue() for _ in range(spec.shards)]
        text = json.dumps(spec.to_obj())
        self.procs = [
            ctx.Process(target=_worker, args=(text, s, self.ins[s], self.out), daemon=True)
            for s in range(spec.shards)
        ]
        for p in self.procs:
            p.start()
        for _ in self.procs:
            assert self.out.get(timeout=300)[0] == "ready"

    def run(self, g0) -> dict:
        weights = D.aggregation_weights(datasets.load_dataset(self.spec.dataset_name).n,
                                        self.spec.shards)  # fmt: skip
        g = g0
        for r in range(self.spec.rounds):
            blob = encode_state(g)
            for q in self.ins:
                q.put((r, blob))
            finals: dict[int, bytes] = {}
            for _ in self.ins:
                _, s, data = self.out.get(timeout=600)
                finals[s] = data
            g = D.aggregate([decode_state(self.spec, finals[s]) for s in range(len(finals))],
                            weights)  # fmt: skip
        return g

    def close(self) -> None:
        for q in self.ins:
            q.put(None)
        for p in self.procs:
            p.join(timeout=30)


def measure(spec: S.JobSpec, single: S.JobSpec) -> dict:
    ds = datasets.load_dataset(spec.dataset_name)
    eng = Engine(single, ds)
    g0 = D.UnitEngine(spec, ds, 0).initial_state()
    want = state_root(list(D.run_job(spec, ds))[-1].state)
    pool = Pool(spec)
    dec_t, one_t = [], []
    try:
        for _ in range(ROUNDS):
            t = time.perf_counter()
            g = pool.run(g0)
            dec_t.append(time.perf_counter() - t)
            assert state_root(g) == want, "the parallel run's G_R differs from run_job's"
            t = time.perf_counter()
            for _ in eng.train():
                pass
            one_t.append(time.perf_counter() - t)
    finally:
        pool.close()
    dec, one = statistics.median(dec_t), statistics.median(one_t)
    return {
        "widths": list(spec.widths),
        "rounds": spec.rounds,
        "shards": spec.shards,
        "local_steps": spec.k_local,
        "total_steps": spec.steps,
        "steps_computed_decomposed": spec.rounds * spec.shards * spec.k_local,
        "steps_computed_single": single.steps,
        "decomposed_wall_s": round(dec, 4),
        "single_solver_wall_s": round(one, 4),
        "ratio": round(dec / one, 3),
        "root_matches_one_process_run": True,
    }


def main() -> int:
    torch_threads = 1
    os.environ["OMP_NUM_THREADS"] = str(torch_threads)
    spec, single = S.load(SPEC), S.load(SINGLE)
    results = {
        "what": "wall time of the R x S job with S solver processes / the same total steps "
        "on one solver (one process), same machine, one run, median of rounds",
        "note": "every path from S_0 to G_R has T steps, but the decomposed job computes S times "
        "as many (R x S x k_local), S units at a time: with S free cores the ratio tends to "
        "1 + aggregation and hand-over overheads; with fewer cores than S it is bounded below by "
        "S / cores",
        "cpus": os.cpu_count(),
        "machine": platform.machine(),
        "threads_per_process": torch_threads,
        "digits_2x3": measure(spec, single),
        "digits_2x3_wide_1024": measure(widen(spec, 1024), widen(single, 1024)),
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
