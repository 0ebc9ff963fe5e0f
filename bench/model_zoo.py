"""The models people train today, through the protocol's engine -> bench/results/model_zoo.json.

For each example (issue #41: `llama`, `resnet` as their docstrings build them; `hf_gpt2`,
`hf_llama`, `hf_qwen2`: Hugging Face models from small configs with `job build --hf-config`, 300
steps of AdamW with a warmup and cosine schedule, when the `.[hf]` extra is installed):
- `build_seconds`, `nodes`, `params`, `state_tensors`;
- `roots_identical`: the first 2 steps' checkpoint roots on native 1 and 2 threads and portable
  1 and 2 threads are one set;
- `first_50_max_rel_loss`: the largest |engine - plain| / plain of the first 50 per-step losses,
  plain PyTorch on the same initial weights and batches with torch's own optimizer, LambdaLR over
  the same schedule and dropout masks from the same stream (agents/model/plain.py), the two
  trained side by side; `first_50_max_rel_loss_from_plain_state`: the same, each engine step
  started from PyTorch's state at that step (its weights, buffers and optimizer state): the
  error of one step, without the drift of BatchNorm's sensitive training;
- the whole training: the engine's held-out metric and plain PyTorch's (`val_loss` for a
  language model, `test_accuracy` for digits), `metric_ratio` and `within_1_percent`;
- `engine_step_ms` / `plain_step_ms`: median step times over the training (1 thread).

Run: .venv/bin/python -m bench.model_zoo [--only llama] (about 5 minutes on 2 cores)
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agents.__main__ import main as cli  # noqa: E402
from agents.cli.job import load_factory, load_job  # noqa: E402
from agents.data import tokens  # noqa: E402
from agents.data.datasets import held_out  # noqa: E402
from agents.model import job as mj  # noqa: E402
from agents.model.lower import Optimizer, Recipe  # noqa: E402
from agents.model.plain import PlainTrainer, load_state, protocol_state  # noqa: E402
from agents.model.schedule import warmup_decay  # noqa: E402
from agents.training.run import RunConfig  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "results" / "model_zoo.json"

# name -> (model ref, dataset, job build flags, Optimizer, schedule(steps), batch, steps)
EXAMPLES = {
    "llama": (
        "examples/models/llama.py:make_model", tokens.TRAIN,
        ["--optimizer", "adamw", "--lr", "0.003", "--betas", "0.9,0.95", "--weight-decay", "0.1",
         "--no-decay-bias-norm", "--clip-norm", "1.0", "--warmup", "60", "--decay", "cosine",
         "--min-lr", "0.0003"],
        Optimizer("adamw", 0.003, betas=(0.9, 0.95), weight_decay=0.1, clip_norm=1.0,
                  no_decay_1d=True),
        lambda steps: warmup_decay(steps, 0.003, 60, "cosine", 0.0003), 16, 600,
    ),
    "resnet": (
        "examples/models/resnet.py:make_model", "sklearn-digits/train",
        ["--optimizer", "nesterov", "--lr", "0.05", "--momentum", "0.9", "--decay", "cosine"],
        Optimizer("nesterov", 0.05, momentum=0.9),
        lambda steps: warmup_decay(steps, 0.05, 0, "cosine", 0.0), 32, 600,
    ),
}  # fmt: skip
# Hugging Face models from small configs (the `.[hf]` extra): name -> config factory
HF_FLAGS = ["--optimizer", "adamw", "--lr", "0.003", "--betas", "0.9,0.95", "--weight-decay",
            "0.1", "--no-decay-bias-norm", "--clip-norm", "1.0", "--warmup", "30", "--decay",
            "cosine", "--min-lr", "0.0003"]  # fmt: skip
HF_OPT = Optimizer("adamw", 0.003, betas=(0.9, 0.95), weight_decay=0.1, clip_norm=1.0,
                   no_decay_1d=True)  # fmt: skip


def hf_configs() -> dict:
    import transformers as tf

    common = dict(vocab_size=84, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, max_position_embeddings=32)  # fmt: skip
    return {
        "hf_gpt2": tf.GPT2Config(vocab_size=84, n_positions=32, n_embd=64, n_layer=2, n_head=4,
                                 attn_pdrop=0.0),
        "hf_llama": tf.LlamaConfig(hidden_size=64, intermediate_size=176,
                                   tie_word_embeddings=True, **common),
        "hf_qwen2": tf.Qwen2Config(hidden_size=64, intermediate_size=176, **common),
    }  # fmt: skip


try:  # the Hugging Face examples when the extra is installed
    for _name in hf_configs():
        EXAMPLES[_name] = (
            "hf",
            tokens.TRAIN,
            HF_FLAGS,
            HF_OPT,
            lambda steps: warmup_decay(steps, 0.003, 30, "cosine", 0.0003),
            16,
            300,
        )
except ImportError:
    pass


def plain_metric(job: mj.ModelJob, module: torch.nn.Module) -> dict:
    module.eval()
    ds = held_out(job.data)
    with torch.no_grad():
        if job.bundle.task == "lm":
            x, y = ds.eval_windows(job.bundle.item_shape[0])
            out = module(x)
            return {"val_loss": mj.lm_loss(out if isinstance(out, torch.Tensor) else out.logits,
                                           y)}  # fmt: skip
        pred = module(ds.x.reshape(ds.n, *job.bundle.item_shape)).argmax(-1)
        return {"test_accuracy": float((pred == ds.y.reshape(-1)).double().mean())}


def _module(ref: str, name: str, tmp: Path) -> torch.nn.Module:
    if ref != "hf":
        return load_factory(str(ROOT / ref))()
    import transformers as tf

    return tf.AutoModelForCausalLM.from_config(tf.AutoConfig.from_pretrained(tmp / f"{name}.cfg"))


def bench_one(name: str, tmp: Path) -> dict:
    ref, dataset, flags, opt, schedule, batch, steps = EXAMPLES[name]
    spec = tmp / f"{name}.json"
    if ref == "hf":
        hf_configs()[name].to_json_file(str(tmp / f"{name}.cfg"))
        model = ["--hf-config", str(tmp / f"{name}.cfg")]
    else:
        model = ["--model", str(ROOT / ref)]
    t0 = time.perf_counter()
    argv = ["job", "build", *model, "--dataset", dataset, *flags, "--batch", str(batch),
            "--steps", str(steps), "--checkpoint-every", str(steps // 6), "--seed", "1",
            "--out", str(spec)]  # fmt: skip
    assert cli(argv) == 0
    out: dict = {"build_seconds": round(time.perf_counter() - t0, 2), "batch": batch,
                 "steps": steps, "recipe": " ".join(flags)}  # fmt: skip
    roots = set()
    for cfg in (RunConfig("native", 1), RunConfig("native", 2), RunConfig("torch", 1),
                RunConfig("torch", 2)):  # fmt: skip
        job, st = load_job(str(spec), None, cfg)
        roots.add(tuple(r for _t, r, _s, _l in job.train(st, steps=2, every=1)))
    torch.set_num_threads(1)
    out["roots_identical"] = len(roots) == 1
    job, st = load_job(str(spec), None)
    out |= {"nodes": len(job.bundle.step.nodes), "params": mj.n_params(job.bundle),
            "state_tensors": len(job.bundle.state)}  # fmt: skip
    torch.manual_seed(1)
    module = load_state(_module(ref, name, tmp), job.bundle, st)
    plain = PlainTrainer(module, opt, Recipe(schedule=schedule(steps)), seed=job.spec.seed)
    worst = worst_step = 0.0
    e_ms, p_ms = [], []
    for t in range(steps):
        x, y = job.batch(t)
        if t < 50:
            _, from_plain = job.step(protocol_state(job.bundle, plain), t)
        t1 = time.perf_counter()
        st, loss = job.step(st, t)
        t2 = time.perf_counter()
        want = plain.step(x, y, t)
        e_ms.append(t2 - t1)
        p_ms.append(time.perf_counter() - t2)
        if t < 50:
            worst = max(worst, abs(loss - want) / abs(want))
            worst_step = max(worst_step, abs(from_plain - want) / abs(want))
    out["first_50_max_rel_loss"] = float(f"{worst:.3g}")
    out["first_50_max_rel_loss_from_plain_state"] = float(f"{worst_step:.3g}")
    out["engine_step_ms"] = round(1e3 * statistics.median(e_ms), 2)
    out["plain_step_ms"] = round(1e3 * statistics.median(p_ms), 2)
    out["engine"] = job.evaluate(st)
    out["plain"] = plain_metric(job, module)
    key = next(iter(out["engine"]))
    out["metric_ratio"] = round(out["engine"][key] / out["plain"][key], 5)
    out["within_1_percent"] = abs(out["metric_ratio"] - 1) <= 0.01
    if job.bundle.task == "lm":
        out["unigram_val_loss"] = round(tokens.load_tokens(tokens.VAL).unigram_loss(), 4)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--only", action="append", choices=sorted(EXAMPLES))
    args = ap.parse_args()
    res = json.loads(OUT.read_text()) if OUT.exists() else {}
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.only or sorted(EXAMPLES):
            res[name] = bench_one(name, Path(tmp))
            print(name, json.dumps(res[name]), flush=True)
    res["bench_seconds"] = round(time.perf_counter() - t0, 1)
    res["torch"] = torch.__version__
    OUT.write_text(json.dumps(res, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
