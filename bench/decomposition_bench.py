"""Time-to-loss of decomposed version-3 jobs -> bench/results/decomposition.json (issue #40).

Two language models on `shakespeare-char` (examples/models/char_gpt.py): the char GPT
(`make_model`: 2 layers, d = 64) and a 4-layer, d = 128 GPT (`make_4layer`), AdamW inner steps.
Each is built by `job build --rounds R --shards S --outer {average,nesterov}` for S = 1, 2, 4, 8
at the same k_local (the same R and k_local for every S: S shards consume S times the data in a
round), and trained the verified way: every inner step is the engine running the committed step
graph (`ModelJob.step`, which `run_unit` loops), every round is the job's committed aggregation
graph (`Aggregation.run`), the held-out loss is the committed forward graph (`evaluate`).

Simulated wall time (the S units of a round run side by side on S machines):
    round = k_local x t_step + t_agg + transfers
    t_step    the median measured engine step time of the model (one thread; the same for every
              S: a solver's unit is k_local steps of one shard whatever S is);
    t_agg     the median measured time of the run's aggregation graph (at S);
    transfers the round's blobs at 100 Mbit/s, one after another on the aggregator's link: the
              S unit results up (each the whole step state: PROTOCOL §5.2 averages the AdamW
              moments), H_{r+1} down to the blob store, G_{r+1} down to a solver.
The S = 1 plain run (`average` with one shard: weight 1, §4's batches: plain training) is the
baseline: its wall time is rounds x k_local x t_step, no transfer, no aggregation. Its final
held-out loss is the target; every other run stops at the first round whose loss reaches it.
`speedup` = the baseline's time / the run's simulated time at that round (None: not reached).

Bytes per solver per round (sent + received: its unit's final state up, G_r down) against a
ring all-reduce of the gradients (sent + received 2 x 2(S-1)/S x 4 x params) at each of the
round's k_local steps.

Run: nice -n 10 .venv/bin/python -m bench.decomposition_bench [--models char_gpt,gpt_4x128]
     [--rounds R] [--local-steps K] [--outer-lr X --outer-momentum X] [--no-tune]
     (33 minutes on the shared 2-core machine at load 4.5-10: the two models side by side)
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import multiprocessing as mp
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agents.__main__ import main as cli  # noqa: E402
from agents.cli.job import load_job  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "results" / "decomposition.json"
GPT = ROOT / "examples" / "models" / "char_gpt.py"
LINK_BYTES_PER_S = 100e6 / 8  # 100 Mbit/s
SHARDS = (1, 2, 4, 8)
# model -> (factory, batch, inner lr, rounds, k_local)
MODELS = {
    "char_gpt": ("make_model", 16, 3e-3, 20, 100),
    "gpt_4x128": ("make_4layer", 16, 1e-3, 12, 50),
}
# the outer optimizer's tuning: extra S = 4 Nesterov runs at these (lr, momentum)
TUNE = {"char_gpt": ((1.0, 0.9), (0.5, 0.9))}


def build(tmp: Path, model: str, shards: int, outer: str, rounds: int, k: int,
          outer_lr: float, outer_mu: float) -> Path:  # fmt: skip
    factory, batch, lr, _, _ = MODELS[model]
    out = tmp / f"{model}-{shards}-{outer}.json"
    argv = ["job", "build", "--model", f"{GPT}:{factory}", "--dataset", "shakespeare-char/train",
            "--optimizer", "adamw", "--lr", str(lr), "--batch", str(batch),
            "--steps", str(rounds * k), "--checkpoint-every", str(k), "--seed", "1",
            "--rounds", str(rounds), "--shards", str(shards), "--outer", outer,
            "--out", str(out)]  # fmt: skip
    if outer == "nesterov":
        argv += ["--outer-lr", str(outer_lr), "--outer-momentum", str(outer_mu)]
    with contextlib.redirect_stdout(io.StringIO()):
        assert cli(argv) == 0, argv
    return out


def train(spec: Path, target: float | None) -> dict:
    """Run the decomposed job round by round on the engine: the held-out loss after each round,
    every unit's per-step time, every aggregation's time; stop once `target` is reached."""
    job, st = load_job(str(spec), None)
    s, agg = job.spec, job.aggregation
    h = agg.initial(st)
    losses = [job.evaluate(st)["val_loss"]]
    step_s, agg_s = [], []
    for r in range(s.rounds):
        g = agg.unit_start(h)
        finals = []
        for shard in range(s.shards):
            u, t0 = g, time.perf_counter()
            for i in range(s.k_local):  # ModelJob.run_unit's loop, without its checkpoint roots
                u, _ = job.step(u, r * s.k_local + i, shard)
            step_s.append((time.perf_counter() - t0) / s.k_local)
            finals.append(u)
        t0 = time.perf_counter()
        h, _ = agg.run(h, finals, job.cfg)
        agg_s.append(time.perf_counter() - t0)
        losses.append(job.evaluate(agg.unit_start(h))["val_loss"])
        if target is not None and losses[-1] <= target:
            break
    step_elems = sum(h[n].numel() for n in agg.step_names)
    round_elems = sum(h[n].numel() for n in agg.round_names)
    params = sum(st[n].numel() for n in job.bundle.params)
    return {"losses": losses, "step_s": step_s, "agg_s": agg_s, "k_local": s.k_local,
            "shards": s.shards, "unit_bytes": 4 * step_elems, "round_bytes": 4 * round_elems,
            "params": params}  # fmt: skip


def bench_model(model: str, rounds: int, k: int, outer_lr: float, outer_mu: float,
                shards=SHARDS, outers=("nesterov", "average"), tune=()) -> dict:  # fmt: skip
    """Every run of one model (in its own process: see main): S1-average first, its final
    loss the target of the others; `tune`: extra S = 4 Nesterov runs at other (lr, momentum)."""
    torch.set_num_threads(1)  # one solver = one thread here: step times comparable across S
    runs: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as tmp:
        order = [(1, "average", outer_lr, outer_mu)]
        order += [(S, o, outer_lr, outer_mu) for o in outers for S in shards
                  if (S, o) != (1, "average")]  # fmt: skip
        order += [(4, "nesterov", lr, mu) for lr, mu in tune]
        target = None
        for S, outer, lr, mu in order:
            t0 = time.monotonic()
            spec = build(Path(tmp), model, S, outer, rounds, k, lr, mu)
            res = train(spec, None if S == 1 else target)
            if (S, outer) == (1, "average"):
                target = res["losses"][-1]
            res |= {"seconds": round(time.monotonic() - t0, 1), "outer": outer}
            if outer == "nesterov":
                res |= {"outer_lr": lr, "outer_momentum": mu}
            name = f"S{S}-{outer}" + (f"-lr{lr:g}-m{mu:g}" if (lr, mu) != (outer_lr, outer_mu)
                                      and outer == "nesterov" else "")  # fmt: skip
            runs[name] = res
            print(model, name, [round(x, 4) for x in res["losses"]], res["seconds"], flush=True)
    t_step = statistics.median(x for r in runs.values() for x in r["step_s"])
    base = runs["S1-average"]
    t_base = rounds * k * t_step
    out_runs = {}
    for name, r in runs.items():
        S = r["shards"]
        t_agg = statistics.median(r["agg_s"])
        xfer = (S * r["unit_bytes"] + r["round_bytes"] + r["unit_bytes"]) / LINK_BYTES_PER_S
        t_round = k * t_step + t_agg + xfer
        hit = next((i for i, x in enumerate(r["losses"]) if i and x <= target), None)
        sent_recv = 2 * r["unit_bytes"]
        allreduce = k * 2 * 2 * (S - 1) / S * 4 * r["params"]
        out_runs[name] = {
            "shards": S, "outer": r["outer"],
            **{key: r[key] for key in ("outer_lr", "outer_momentum") if key in r},
            "val_loss_by_round": [round(x, 5) for x in r["losses"]],
            "sim_seconds_by_round": [round(i * t_round, 3) for i in range(len(r["losses"]))],
            "round_sim_seconds": round(t_round, 4), "agg_seconds": round(t_agg, 5),
            "transfer_seconds": round(xfer, 4),
            "rounds_to_target": hit,
            "speedup_to_target": round(t_base / (hit * t_round), 3) if hit else None,
            "bytes_per_solver_per_round": sent_recv,
            "allreduce_bytes_per_solver_per_round": int(allreduce),
            "allreduce_over_decomposed": round(allreduce / sent_recv, 2) if S > 1 else None,
            "real_seconds": r["seconds"],
        }  # fmt: skip
    return {
        "rounds": rounds, "k_local": k, "params": base["params"],
        "step_state_bytes": base["unit_bytes"],
        "batch": MODELS[model][1], "inner_lr": MODELS[model][2],
        "step_seconds_median": round(t_step, 5),
        "baseline": "S1-average (plain training on one machine, no transfers)",
        "baseline_seconds": round(t_base, 3), "target_val_loss": round(target, 5),
        "runs": out_runs,
    }  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--rounds", type=int, help="override every model's R")
    ap.add_argument("--local-steps", type=int, help="override every model's k_local")
    ap.add_argument("--outer-lr", type=float, default=0.7)
    ap.add_argument("--outer-momentum", type=float, default=0.9)
    ap.add_argument("--shards", default=",".join(map(str, SHARDS)), help="(tuning) S values")
    ap.add_argument("--outers", default="nesterov,average", help="(tuning) outer optimizers")
    ap.add_argument(
        "--no-tune",
        dest="tune",
        action="store_false",
        help="skip the extra outer (lr, momentum) runs of TUNE",
    )
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args()
    load = os.getloadavg()[0]
    t0 = time.monotonic()
    names = args.models.split(",")
    jobs = []
    for m in names:
        _, _, _, rounds, k = MODELS[m]
        tune = TUNE.get(m, ()) if args.tune else ()
        jobs.append((m, args.rounds or rounds, args.local_steps or k, args.outer_lr,
                     args.outer_momentum, tuple(int(x) for x in args.shards.split(",")),
                     tuple(args.outers.split(",")), tune))  # fmt: skip
    # the models side by side, one process each (each run inside a model is sequential: its
    # S units are timed one after another and the simulated wall time puts them side by side)
    with mp.get_context("spawn").Pool(len(jobs)) as pool:
        models = dict(zip(names, pool.starmap(bench_model, jobs), strict=True))
    out = {
        "what": "time-to-loss of decomposed version-3 jobs (S shards x k_local AdamW steps a "
        "round, outer Nesterov or plain averaging) on the engine and the committed aggregation "
        "graph: held-out loss against simulated wall time (rounds x (k_local x measured step "
        "time + measured aggregation time + the round's blobs at 100 Mbit/s)); speed-up to the "
        "S=1 plain run's final loss; bytes per solver per round against per-step ring all-reduce",
        "outer_lr": args.outer_lr, "outer_momentum": args.outer_momentum,
        "link_mbit_s": 100, "cpus": os.cpu_count(), "torch_threads_per_model": 1,
        "processes": len(jobs),
        "load_at_start": round(load, 2), "load_at_end": round(os.getloadavg()[0], 2),
        "machine": platform.machine(), "seconds": round(time.monotonic() - t0, 1),
        "models": models,
    }  # fmt: skip
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
