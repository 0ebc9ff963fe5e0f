"""Engine benchmark -> bench/results/engine.json.

step_ratio[W]: reproducible engine step time / plain torch float32 step time (nn.Linear +
F.cross_entropy + autograd + torch.optim.SGD with momentum) for an MLP 64 -> W -> 10, batch 64,
same batches (both draw them with the keccak schedule; its cost is reported separately), same
thread count (1), measured interleaved in one run (median of rounds). The native engine path is
what `python -m agents train` runs; `portable_*` is the pure-torch-ops path (CUDA-capable).
step_two_hidden_layers: the same for 64 -> W -> W -> 10 (compute-bound at W = 1024).
merkle_ratio: state-commitment throughput (state root of a 64 MB state) / raw single-core
keccak-256 streaming throughput over a 64 MB buffer, using the fastest raw keccak-256 here.
Also: time to commit a 1M- and a 10M-parameter state (parameters + momentum buffers).

Also the bring-your-own-model examples under `cnn`, `mlp_adamw`, `gpt` (bench/models.py).

Run: .venv/bin/python -m bench.engine_bench  (about 4 minutes on 2 cores; `--only models`
refreshes just the model figures, `--only memory` just `memory`: BENCH_MEMORY below)
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as Fn
from Crypto.Hash import keccak as pyk

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agents.data import builtin as data  # noqa: E402
from agents.training import float32 as F  # noqa: E402
from agents.training import merkle, native  # noqa: E402
from agents.training import spec as S  # noqa: E402
from agents.training.engine import Engine, EngineConfig  # noqa: E402
from agents.training.keccak import keccak256_stream_native  # noqa: E402
from agents.training.state import init_state  # noqa: E402

OUT = Path(__file__).resolve().parent / "results" / "engine.json"
THREADS = 1
BATCH = 64
MB64 = 64 << 20


def make_spec(widths, ds) -> S.JobSpec:
    return S.parse_spec(
        {
            "version": 1,
            "model": {"arch": "mlp", "widths": list(widths)},
            "dataset": {"name": ds.name, "root": "0x" + ds.root().hex()},
            "lr": f"0x{F.bits(np.float32(0.05)):08x}",
            "momentum": f"0x{F.bits(np.float32(0.9)):08x}",
            "batch": BATCH,
            "seed": 1,
            "steps": 1000,
            "checkpoint_every": 1000,
        }
    )


def plain_torch(widths, eng: Engine):
    """The same model, data and batches on stock torch float32 (what a normal trainer does)."""
    layers = []
    for i in range(len(widths) - 1):
        lin = torch.nn.Linear(widths[i], widths[i + 1])
        with torch.no_grad():
            lin.weight.copy_(eng.initial_state()[f"w{i}"])
            lin.bias.zero_()
        layers += [lin, torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers[:-1])
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    x, y = eng.data.x, eng.data.y.reshape(-1)

    def step(t: int) -> None:
        idx = eng.batch(t).reshape(-1)  # same keccak batch schedule as the engine
        loss = Fn.cross_entropy(model(x[idx]), y[idx])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return step


def time_steps(fn, t0: int, n: int) -> float:
    start = time.perf_counter()
    for t in range(t0, t0 + n):
        fn(t)
    return (time.perf_counter() - start) / n


def bench_steps(widths, rounds: int, per_round: int, portable_steps: int) -> dict:
    ds = data.synthetic(4096, widths[0], widths[-1], 1)
    sp = make_spec(widths, ds)
    eng = Engine(sp, ds, EngineConfig("native", THREADS))
    st = {"s": eng.initial_state()}

    def repro(t):
        st["s"] = eng.step(st["s"], t)

    plain = plain_torch(widths, eng)
    time_steps(repro, 0, 5)
    time_steps(plain, 0, 5)
    r_times, p_times = [], []
    for r in range(rounds):  # interleaved, so load changes hit both sides alike
        r_times.append(time_steps(repro, r * per_round, per_round))
        p_times.append(time_steps(plain, r * per_round, per_round))
    out = {
        "widths": list(widths),
        "repro_step_ms": round(1e3 * statistics.median(r_times), 4),
        "torch_step_ms": round(1e3 * statistics.median(p_times), 4),
    }
    out["step_ratio"] = round(out["repro_step_ms"] / out["torch_step_ms"], 3)
    # both sides draw the batch with the keccak schedule; its share of either step time:
    out["batch_schedule_ms"] = round(1e3 * time_steps(eng.batch, 0, 50), 4)
    if portable_steps:
        port = Engine(sp, ds, EngineConfig("torch", THREADS))
        ps = {"s": port.initial_state()}

        def portable(t):
            ps["s"] = port.step(ps["s"], t)

        out["portable_torch_ops_step_ms"] = round(1e3 * time_steps(portable, 0, portable_steps), 3)
        out["portable_step_ratio"] = round(
            out["portable_torch_ops_step_ms"] / out["torch_step_ms"], 2
        )
    return out


def best_of(fn, n: int = 3) -> float:
    best = float("inf")
    for _ in range(n):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def bench_merkle() -> dict:
    buf = np.random.default_rng(0).integers(0, 2**32, MB64 // 4, dtype=np.uint64)
    buf = buf.astype(np.uint32)
    raw = buf.tobytes()
    mbs = MB64 / 2**20
    w = torch.from_numpy(buf.view(np.float32).reshape(2, 2048, 4096).copy())
    # a 64 MB state: a 2048 x 4096 weight and its momentum buffer (random bits, so some NaNs)
    state = [("w0", w[0]), ("m.w0", w[1])]
    jobs = {
        "keccak256_pycryptodome": lambda: pyk.new(digest_bits=256, data=raw).digest(),
        "sha3_256_openssl_hashlib": lambda: hashlib.sha3_256(raw).digest(),
        "state_commit": lambda: merkle.state_root(state),
    }
    if native.available():
        jobs["keccak256_c_single_stream"] = lambda: keccak256_stream_native(raw)
    best = dict.fromkeys(jobs, float("inf"))
    for _ in range(5):  # interleaved rounds, best of each: background load hits all alike
        for k, fn in jobs.items():
            best[k] = min(best[k], best_of(fn, 1))
    commit_s = best.pop("state_commit")
    raw_rates = {k: mbs / v for k, v in best.items()}
    keccak_only = {k: v for k, v in raw_rates.items() if k.startswith("keccak256")}
    base_name = max(keccak_only, key=keccak_only.get)
    commit_rate = mbs / commit_s
    out = {
        "state_bytes": MB64,
        "state_commit_MBps": round(commit_rate, 1),
        "raw_MBps": {k: round(v, 1) for k, v in raw_rates.items()},
        "baseline": base_name,
        "merkle_ratio": round(commit_rate / keccak_only[base_name], 3),
        "merkle_ratio_vs_openssl_sha3": round(
            commit_rate / raw_rates["sha3_256_openssl_hashlib"], 3
        ),
        "keccak_simd_lanes": _lanes(),
    }
    for label, widths in (("1M", (1000, 999, 1)), ("10M", (3163, 3160, 1))):
        st = init_state(widths, 1)
        n_params = sum(v.numel() for k, v in st.items() if not k.startswith("m."))
        t = best_of(lambda st=st: merkle.state_root(list(st.items())))
        out[f"commit_{label}_params_s"] = round(t, 4)
        out[f"commit_{label}_params_detail"] = f"{n_params} params + momentum, widths {widths}"
    return out


def _lanes() -> int:
    flags = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    return 8 if " avx512f" in flags else 4 if " avx2" in flags else 2


def main() -> None:
    from bench.models import bench_memory_points, bench_models

    if sys.argv[1:] == ["--only", "models"]:  # refresh the model figures, keep the rest
        res = json.loads(OUT.read_text())
        res.update(bench_models())
        OUT.write_text(json.dumps(res, indent=2) + "\n")
        return
    if sys.argv[1:] == ["--only", "memory"]:  # `job build`'s and training's memory rows alone
        res = json.loads(OUT.read_text())
        res["memory"] = bench_memory_points()
        OUT.write_text(json.dumps(res, indent=2) + "\n")
        return
    torch.set_num_threads(THREADS)
    t0 = time.time()
    res: dict = {
        "machine": {
            "cpu": next(
                (
                    line.split(":", 1)[1].strip()
                    for line in Path("/proc/cpuinfo").read_text().splitlines()
                    if line.startswith("model name")
                ),
                platform.processor(),
            ),
            "cores": os.cpu_count(),
            "torch": torch.__version__,
            "threads": THREADS,
            "native_kernels": native.available(),
            "load_average_at_start": os.getloadavg(),
        },
        "ratio_basis": "`*_cpu` ratios: the measuring thread's CPU time (time.thread_time), what "
        "the other jobs of this shared 2-core machine move least; the others: wall time "
        "(time.perf_counter). Every ratio is of two figures measured interleaved in one run.",
        "batch": BATCH,
    }
    steps = {}
    for w in (64, 256, 1024):
        steps[str(w)] = bench_steps((64, w, 10), rounds=9, per_round=30, portable_steps=5)
        print("one hidden layer", steps[str(w)], flush=True)
    res["step"] = steps
    res["step_ratio"] = {k: v["step_ratio"] for k, v in steps.items()}
    two = {}
    for w in (64, 256, 1024):
        two[str(w)] = bench_steps((64, w, w, 10), rounds=5, per_round=10, portable_steps=0)
        print("two hidden layers", two[str(w)], flush=True)
    res["step_two_hidden_layers"] = two
    res["merkle"] = bench_merkle()
    print("merkle", res["merkle"], flush=True)
    res["merkle_ratio"] = res["merkle"]["merkle_ratio"]
    res.update(bench_models())  # cnn, mlp_adamw, gpt: bench/models.py
    res["bench_seconds"] = round(time.time() - t0, 1)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(res, indent=2) + "\n")
    print(json.dumps({"step_ratio": res["step_ratio"], "merkle_ratio": res["merkle_ratio"]}))


if __name__ == "__main__":
    main()
