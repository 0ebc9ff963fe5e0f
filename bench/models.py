"""Bring-your-own-model figures for bench/results/engine.json (keys `cnn`, `mlp_adamw`, `gpt`,
`nanogpt`, `memory`).

For each example model (examples/models/, built as its docstring says; `nanogpt` is nanoGPT's
shakespeare-char configuration):
- `build_seconds`: `job build`'s lowering (trace + rewrite + encode), in this process;
- `step_ratio_cpu` / `step_ratio`: the reproducible engine's step (native kernels, 1 thread,
  the committed graph) / plain PyTorch float32 (the same module, autograd, torch.optim,
  1 thread) on the thread's CPU time (what the other jobs of a shared machine move least) and
  on wall time, both on the same batches, measured interleaved in one run (median of rounds);
  `portable_ratio`: the portable torch-ops path (the one CUDA runs);
- `verified_cost_ratio_cpu` / `verified_cost_ratio`: what the job costs verified — the
  solver's T engine steps and checkpoint roots, plus the verifiers' replay at the protocol's
  defaults (`verifiersPerUnit` x `segmentsPerVerifier` of the T/k segments, each replayed step
  an engine step, each segment's two end states hashed) — over plain PyTorch's T steps;
- whole training, same initial weights and batches: the engine's held-out metric against plain
  PyTorch's (`test_accuracy` for the CNN, `val_loss` for the GPT with the corpus's unigram
  baseline, and their ratio).
`memory`: `job build` (the whole command in a process of its own: its wall and CPU seconds, its
peak RSS), and the peak RSS of a solver training the built job 2 steps against plain PyTorch
training the module 2 steps, each in a process of its own.

Run alone: .venv/bin/python -m bench.engine_bench --only models (or `--only memory`, with
BENCH_MEMORY=make_nanogpt,make_gpt40m for the 43M point)
"""

from __future__ import annotations

import os
import statistics
import time
from pathlib import Path

import numpy as np
import torch

from agents.cli.job import load_factory
from agents.data import builtin as cdata
from agents.data import datasets, tokens
from agents.model import job as mj
from agents.model.lower import Optimizer, build_bundle
from agents.training import float32 as F
from agents.training.run import RunConfig
from agents.training.spec import ModelSpec

ROOT = Path(__file__).resolve().parents[1]

EXAMPLES = {
    "cnn": dict(file="digits_cnn.py", dataset=cdata.DIGITS_TRAIN, batch=32, steps=1000, every=100,
                opt=Optimizer("sgd", 0.05, momentum=0.9)),
    "mlp_adamw": dict(file="digits_mlp.py", dataset=cdata.DIGITS_TRAIN, batch=32, steps=300,
                      every=100, opt=Optimizer("adamw", 0.003, weight_decay=0.01)),
    "gpt": dict(file="char_gpt.py", dataset=tokens.TRAIN, batch=16, steps=600, every=100,
                opt=Optimizer("adamw", 0.003, betas=(0.9, 0.99), weight_decay=0.1,
                              clip_norm=1.0)),
    # nanoGPT's shakespeare-char configuration (10.8M parameters): max_iters 5000, a checkpoint
    # every eval_interval = 250 steps. Its step is timed, not trained whole (hours on a core).
    "nanogpt": dict(file="char_gpt.py", factory="make_nanogpt", dataset=tokens.TRAIN, batch=8,
                    steps=5000, every=250, train=False, portable=False, rounds=5, per_round=1,
                    opt=Optimizer("adamw", 0.001, betas=(0.9, 0.99), weight_decay=0.1,
                                  clip_norm=1.0)),
}  # fmt: skip
# The protocol's defaults (PROTOCOL §6.4): each of `verifiersPerUnit` verifiers replays
# `segmentsPerVerifier` of a unit's T/k segments.
VERIFIERS_PER_UNIT = 2
SEGMENTS_PER_VERIFIER = 2


def replay_share(steps: int, every: int) -> float:
    """Steps the verifiers replay per step the solver trains, at the defaults."""
    n = steps // every
    return VERIFIERS_PER_UNIT * min(SEGMENTS_PER_VERIFIER, n) / n


def _f32(v: float) -> float:
    return float(np.float32(v))


def make_job(name: str, kernels: str = "native"):
    ex = EXAMPLES[name]
    ds = datasets.load_dataset(ex["dataset"])
    lm = isinstance(ds, tokens.TokenDataset)
    torch.manual_seed(1)
    factory = f"{ROOT}/examples/models/{ex['file']}:{ex.get('factory', 'make_model')}"
    module = load_factory(factory)()
    opt = ex["opt"]
    t0 = time.perf_counter()
    item = (module.block_size,) if lm else cdata.item_shape(ex["dataset"])
    low = build_bundle(module, opt, ex["batch"], "lm" if lm else "classify", item, ds.classes)
    build_s = time.perf_counter() - t0
    st = dict(low.state)
    spec = ModelSpec(
        "0x" + low.bundle.hash().hex(), "0x" + mj.state_root(st).hex(), ex["dataset"],
        mj.dataset_root(ds), opt.kind,
        tuple((k, F.bits(np.float32(v))) for k, v in opt.hyper().items()), ex["batch"], 1,
        ex["steps"], ex.get("every", ex["steps"]),
    )  # fmt: skip
    return mj.ModelJob(spec, low.bundle, ds, RunConfig(kernels)), st, module, build_s


def plain_trainer(module: torch.nn.Module, st: dict, opt: Optimizer):
    """The same module, PyTorch's own autograd and optimizer, from the same initial weights."""
    module.load_state_dict({k.removeprefix("p."): v for k, v in st.items() if k.startswith("p.")},
                           strict=False)  # fmt: skip
    ps = list(module.parameters())
    if opt.kind == "sgd":
        o = torch.optim.SGD(ps, lr=_f32(opt.lr), momentum=_f32(opt.momentum))
    else:
        o = torch.optim.AdamW(ps, lr=_f32(opt.lr), betas=tuple(map(_f32, opt.betas)),
                              eps=_f32(opt.eps), weight_decay=_f32(opt.weight_decay))  # fmt: skip

    def step(x, y):
        o.zero_grad(set_to_none=True)
        logits = module(x)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                                 y.reshape(-1))  # fmt: skip
        loss.backward()
        if opt.clip_norm is not None:
            torch.nn.utils.clip_grad_norm_(ps, opt.clip_norm)
        o.step()
        return loss

    return step


def plain_metric(job: mj.ModelJob, module, name: str) -> dict:
    if job.bundle.task == "lm":
        x, y = tokens.load_tokens(tokens.VAL).eval_windows(module.block_size)
        with torch.no_grad():
            return {"val_loss": mj.lm_loss(module(x), y)}
    test = cdata.test_split_for(job.spec.dataset_name)
    with torch.no_grad():
        pred = module(test.x.reshape(test.n, *job.bundle.item_shape)).argmax(-1)
    return {"test_accuracy": float((pred == test.y.reshape(-1)).double().mean())}


def bench_one(name: str, rounds: int = 7, per_round: int = 5) -> dict:
    torch.set_num_threads(1)
    ex = EXAMPLES[name]
    rounds, per_round = ex.get("rounds", rounds), ex.get("per_round", per_round)
    job, st0, module, build_s = make_job(name)
    portable = mj.ModelJob(job.spec, job.bundle, job.data, RunConfig("torch"))
    plain = plain_trainer(module, st0, ex["opt"])
    keys = ["engine", "plain"] + (["portable"] if ex.get("portable", True) else [])
    times: dict[str, list[float]] = {k: [] for k in keys}
    cpu: dict[str, list[float]] = {k: [] for k in keys}
    st_e, st_p = dict(st0), dict(st0)
    job.step(dict(st0), 0)  # the plan, the native library and the allocator warm up
    plain(*job.batch(0))
    t = 0
    for _ in range(rounds):
        for key in keys:
            t0, c0 = time.perf_counter(), time.thread_time()
            for k in range(per_round):
                if key == "engine":
                    st_e, _ = job.step(st_e, t + k)
                elif key == "portable":
                    st_p, _ = portable.step(st_p, t + k)
                else:
                    plain(*job.batch(t + k))
            times[key].append((time.perf_counter() - t0) / per_round)
            cpu[key].append((time.thread_time() - c0) / per_round)
        t += per_round
    med = {k: statistics.median(v) for k, v in times.items()}
    mcpu = {k: statistics.median(v) for k, v in cpu.items()}
    share = replay_share(job.spec.steps, job.spec.checkpoint_every)
    walls, cpus = [], []
    for _ in range(9):
        t0, c0 = time.perf_counter(), time.thread_time()
        mj.state_root(st_e)
        walls.append(time.perf_counter() - t0)
        cpus.append(time.thread_time() - c0)
    root_s, root_cpu = statistics.median(walls), statistics.median(cpus)
    steps, every = job.spec.steps, job.spec.checkpoint_every
    # roots per job: the solver's S_0 … S_T checkpoints; two per replayed segment
    roots = steps // every + 1 + 2 * VERIFIERS_PER_UNIT * min(SEGMENTS_PER_VERIFIER,
                                                               steps // every)  # fmt: skip

    def verified(engine: float, plain: float, root: float) -> float:
        return round((engine * steps * (1 + share) + root * roots) / (plain * steps), 2)

    out = {
        "build_seconds": round(build_s, 3),
        "nodes": len(job.bundle.step.nodes),
        "params": mj.n_params(job.bundle),
        "batch": job.spec.batch,
        "engine_step_ms": round(1e3 * med["engine"], 3),
        "plain_step_ms": round(1e3 * med["plain"], 3),
        "engine_step_cpu_ms": round(1e3 * mcpu["engine"], 3),
        "plain_step_cpu_ms": round(1e3 * mcpu["plain"], 3),
        "step_ratio": round(med["engine"] / med["plain"], 2),
        # the same on the thread's CPU time: what other jobs on a shared machine do not move
        "step_ratio_cpu": round(mcpu["engine"] / mcpu["plain"], 2),
        # solver + verifiers' replay (VERIFIERS_PER_UNIT × SEGMENTS_PER_VERIFIER of T/k
        # segments) and every state root hashed, over plain PyTorch training of the same T steps
        "steps": steps,
        "checkpoint_every": every,
        "replay_share": round(share, 3),
        "state_root_ms": round(1e3 * root_s, 3),
        "state_roots": roots,
        "verified_cost_ratio": verified(med["engine"], med["plain"], root_s),
        "verified_cost_ratio_cpu": verified(mcpu["engine"], mcpu["plain"], root_cpu),
    }
    if "portable" in med:
        out["portable_step_ms"] = round(1e3 * med["portable"], 3)
        out["portable_ratio"] = round(med["portable"] / med["plain"], 2)
    if not ex.get("train", True):
        return out
    # whole training from the same S_0 on the same batches
    job, start, module, _ = make_job(name)
    t0 = time.perf_counter()
    st = start
    for _t, _r, state, _loss in job.train(start):
        st = state
    out["train_steps"] = job.spec.steps
    out["engine_train_seconds"] = round(time.perf_counter() - t0, 2)
    out["engine"] = job.evaluate(st)
    plain = plain_trainer(module, st0, EXAMPLES[name]["opt"])
    module.train()
    t0 = time.perf_counter()
    for t in range(job.spec.steps):
        plain(*job.batch(t))
    out["plain_train_seconds"] = round(time.perf_counter() - t0, 2)
    module.eval()
    out["plain"] = plain_metric(job, module, name)
    if job.bundle.task == "lm":
        out["unigram_val_loss"] = tokens.load_tokens(tokens.VAL).unigram_loss()
        out["val_loss_ratio"] = round(out["engine"]["val_loss"] / out["plain"]["val_loss"], 4)
    return out


# Peak resident memory, each in a process of its own (ru_maxrss is a process's high-water
# mark): `job build` (the whole command: the interpreter's start and imports included), the
# solver training 2 steps from the built spec, plain PyTorch 2 steps.
_BUILD = ["-m", "agents", "job", "build", "--dataset", "shakespeare-char/train", "--optimizer",
          "adamw", "--lr", "0.001", "--betas", "0.9,0.99", "--weight-decay", "0.1",
          "--clip-norm", "1.0", "--batch", "8", "--steps", "5000", "--checkpoint-every", "250",
          "--seed", "1", "--max-params", str(1 << 28), "--json"]  # fmt: skip
_CHILD = {
    "solver": """
import sys, torch
from agents.cli.job import load_job
torch.set_num_threads(1)
job, st = load_job(sys.argv[2], None)
for t in range(2):
    st, _ = job.step(st, t)
""",
    "plain": """
import sys, torch
from agents.cli.job import load_factory
from bench.models import EXAMPLES, plain_trainer
torch.set_num_threads(1)
torch.manual_seed(1)
m = load_factory(sys.argv[1])()
step = plain_trainer(m, {}, EXAMPLES["nanogpt"]["opt"])
x = torch.randint(0, 84, (8, m.block_size))
for t in range(2):
    step(x, x)
""",
}
# Runs a command as its only child and reports the child's output, CPU seconds and peak RSS
# (RUSAGE_CHILDREN: this process waited for nothing else).
_WRAP = """
import json, resource, subprocess, sys
res = subprocess.run(sys.argv[1:], capture_output=True, text=True)
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"rc": res.returncode, "stdout": res.stdout, "stderr": res.stderr[-2000:],
                  "cpu": ru.ru_utime + ru.ru_stime, "maxrss_kib": ru.ru_maxrss}))
"""


def _child(argv: list[str]) -> dict:
    """{stdout, wall, cpu (s), rss_mb (peak)} of a Python command in a process of its own."""
    import json
    import subprocess
    import sys

    t0 = time.perf_counter()
    res = subprocess.run([sys.executable, "-c", _WRAP, sys.executable, *argv], cwd=ROOT,
                         capture_output=True, text=True, timeout=3000)  # fmt: skip
    wall = time.perf_counter() - t0
    out = json.loads(res.stdout)
    if res.returncode or out["rc"]:
        raise RuntimeError(f"{argv[:4]} failed: {out['stderr']}")
    return {"stdout": out["stdout"], "wall": wall, "cpu": out["cpu"],
            "rss_mb": round(out["maxrss_kib"] / 1024, 1)}  # fmt: skip


def bench_memory(factory: str) -> dict:
    """`job build`'s seconds and peak RSS, and the peak RSS of a solver training the built job
    against plain PyTorch training the module (batch 8, context 256, AdamW with clipping)."""
    import json
    import tempfile

    ref = f"{ROOT}/examples/models/char_gpt.py:{factory}"
    with tempfile.TemporaryDirectory() as tmp:
        spec = f"{tmp}/job.json"
        build = _child([*_BUILD, "--model", ref, "--out", spec])
        report = json.loads(build["stdout"].splitlines()[-1])
        solver = _child(["-c", _CHILD["solver"], ref, spec])
        plain = _child(["-c", _CHILD["plain"], ref, spec])
    return {
        "params": report["params"],
        "nodes": report["nodes"],
        # the whole command (the interpreter's start and imports included) on a shared machine:
        # its CPU seconds, its wall seconds, and the command's own wall seconds after imports
        "build_cpu_seconds": round(build["cpu"], 2),
        "build_seconds": round(build["wall"], 2),
        "build_command_seconds": report["seconds"],
        "build_peak_rss_mb": build["rss_mb"],
        "solver_peak_rss_mb": solver["rss_mb"],
        "plain_peak_rss_mb": plain["rss_mb"],
        "solver_over_plain_rss": round(solver["rss_mb"] / plain["rss_mb"], 2),
    }


def bench_models() -> dict:
    res = {}
    for name in EXAMPLES:
        res[name] = bench_one(name)
        print(name, res[name], flush=True)
    res["memory"] = bench_memory_points()
    return res


def bench_memory_points() -> dict:
    """`memory`: bench_memory at each factory of BENCH_MEMORY (default make_nanogpt; the 43M
    point, make_gpt40m, takes long: BENCH_MEMORY=make_nanogpt,make_gpt40m), and the line
    through them to GPT-2 small where there are two."""
    out = {}
    for factory in os.environ.get("BENCH_MEMORY", "make_nanogpt").split(","):
        out[factory] = bench_memory(factory)
        print(factory, out[factory], flush=True)
    if len(out) >= 2:
        out["to_124m"] = scale_to(out, GPT2_SMALL)
    return out


GPT2_SMALL = 124_439_808  # GPT-2 small's parameters (12 layers, d = 768, its 50,257 tokens)


def scale_to(points: dict, params: int) -> dict:
    """Each figure at `params`, on the line through the two measured points of fewest and most
    parameters (an extrapolation, not a measurement: memory grows with the state, ~linearly)."""
    lo, hi = sorted(points.values(), key=lambda r: r["params"])[:: len(points) - 1]
    out: dict = {"params": params, "how": "linear through the measured points "
                 f"{lo['params']} and {hi['params']} (extrapolated, not measured)"}  # fmt: skip
    for k in ("build_cpu_seconds", "build_peak_rss_mb", "solver_peak_rss_mb",
              "plain_peak_rss_mb"):  # fmt: skip
        per = (hi[k] - lo[k]) / (hi["params"] - lo["params"])
        out[k] = round(hi[k] + per * (params - hi["params"]), 1)
        out[f"{k}_per_million_params"] = round(per * 1e6, 3)
    out["solver_over_plain_rss"] = round(out["solver_peak_rss_mb"] / out["plain_peak_rss_mb"], 2)
    return out
