"""Bring-your-own-model figures for bench/results/engine.json (keys `cnn`, `gpt`, `mlp_adamw`).

For each example model (examples/models/, built with the command its docstring gives):
- `build_seconds`: `job build`'s lowering (trace + rewrite + encode), in this process;
- `step_ratio`: the reproducible engine's step time (native kernels, 1 thread, the committed
  graph) / plain PyTorch float32 (the same module, autograd, torch.optim, 1 thread), both on
  the same batches, measured interleaved in one run (median of rounds); `portable_ratio`: the
  same for the portable torch-ops path (the one CUDA runs);
- whole training, same initial weights and batches: the engine's held-out metric against plain
  PyTorch's (`test_accuracy` for the CNN, `val_loss` for the GPT with the corpus's unigram
  baseline, and their ratio).

Run alone: .venv/bin/python -m bench.engine_bench --only models
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

import numpy as np
import torch

from agents.cli_job import load_factory
from agents.model import job as mj
from agents.model.lower import Optimizer, build_bundle
from agents.model.run import RunConfig
from agents.training import data as cdata
from agents.training import float32 as F
from agents.training import tokens
from agents.training.spec import ModelSpec

ROOT = Path(__file__).resolve().parents[1]

EXAMPLES = {
    "cnn": dict(file="digits_cnn.py", dataset=cdata.DIGITS_TRAIN, batch=32, steps=1000,
                opt=Optimizer("sgd", 0.05, momentum=0.9)),
    "mlp_adamw": dict(file="digits_mlp.py", dataset=cdata.DIGITS_TRAIN, batch=32, steps=300,
                      opt=Optimizer("adamw", 0.003, weight_decay=0.01)),
    "gpt": dict(file="char_gpt.py", dataset=tokens.TRAIN, batch=16, steps=600,
                opt=Optimizer("adamw", 0.003, betas=(0.9, 0.99), weight_decay=0.1,
                              clip_norm=1.0)),
}  # fmt: skip


def _f32(v: float) -> float:
    return float(np.float32(v))


def make_job(name: str, kernels: str = "native"):
    ex = EXAMPLES[name]
    ds = mj.load_data(ex["dataset"])
    lm = isinstance(ds, tokens.TokenDataset)
    torch.manual_seed(1)
    module = load_factory(f"{ROOT}/examples/models/{ex['file']}:make_model")()
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
        ex["steps"], ex["steps"],
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
    job, st0, module, build_s = make_job(name)
    portable = mj.ModelJob(job.spec, job.bundle, job.data, RunConfig("torch"))
    plain = plain_trainer(module, st0, EXAMPLES[name]["opt"])
    times: dict[str, list[float]] = {"engine": [], "portable": [], "plain": []}
    st_e, st_p = dict(st0), dict(st0)
    t = 0
    for _ in range(rounds):
        for key in times:
            t0 = time.perf_counter()
            for k in range(per_round):
                if key == "engine":
                    st_e, _ = job.step(st_e, t + k)
                elif key == "portable":
                    st_p, _ = portable.step(st_p, t + k)
                else:
                    plain(*job.batch(t + k))
            times[key].append((time.perf_counter() - t0) / per_round)
        t += per_round
    med = {k: statistics.median(v) for k, v in times.items()}
    out = {
        "build_seconds": round(build_s, 3),
        "nodes": len(job.bundle.step.nodes),
        "params": mj.n_params(job.bundle),
        "batch": job.spec.batch,
        "engine_step_ms": round(1e3 * med["engine"], 3),
        "portable_step_ms": round(1e3 * med["portable"], 3),
        "plain_step_ms": round(1e3 * med["plain"], 3),
        "step_ratio": round(med["engine"] / med["plain"], 2),
        "portable_ratio": round(med["portable"] / med["plain"], 2),
    }
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


def bench_models() -> dict:
    res = {}
    for name in EXAMPLES:
        res[name] = bench_one(name)
        print(name, res[name], flush=True)
    return res
