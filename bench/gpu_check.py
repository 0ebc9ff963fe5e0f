"""Device check (issue #29): the three example jobs on a GPU against the CPU's roots, and the
step time against plain PyTorch on the same GPU -> bench/results/gpu.json.

For each example (bench/models.py's EXAMPLES, a few steps each): the checkpoint roots of the
CPU run (native kernels) and of the device runs — the Triton device kernels
(agents/training/triton_ops.py) and the portable torch path — must be identical; then their
step times are timed against plain PyTorch fp32 on the same device (TF32 off), interleaved,
median of rounds. One run takes a few minutes on one GPU.

Run: .venv/bin/python -m bench.gpu_check [--device cuda] [--steps 4]
(`--device cpu` with TRITON_INTERPRET=1 compares the roots on the CPU, the device kernels
interpreted, without timing: a dry run of this script, slow: `--only cnn --steps 1`.)
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

from agents.model import job as mj
from agents.training.run import RunConfig
from bench.models import EXAMPLES, make_job, plain_trainer

OUT = Path(__file__).resolve().parent / "results" / "gpu.json"


def roots(job: mj.ModelJob, st: dict, steps: int) -> list[str]:
    return ["0x" + r.hex() for _t, r, _s, _l in job.train(st, steps, 1)]


def check(name: str, device: str, steps: int, rounds: int = 5, per_round: int = 3) -> dict:
    cpu, st0, module, _ = make_job(name, "native")
    want = roots(cpu, st0, steps)
    out: dict = {"steps_compared": steps}
    jobs = {}
    for kernels in ("triton", "torch"):  # the device kernels, and the portable path
        jobs[kernels] = mj.ModelJob(cpu.spec, cpu.bundle, cpu.data, RunConfig(kernels, 1, device))
        got = roots(jobs[kernels], {k: v.to(device) for k, v in st0.items()}, steps)
        out[f"{kernels}_roots_identical"] = want == got
        out[f"{kernels}_first_difference"] = next(
            (i for i, (a, b) in enumerate(zip(want, got, strict=True)) if a != b), None
        )
    out["roots_identical"] = out["triton_roots_identical"] and out["torch_roots_identical"]
    if not device.startswith("cuda"):  # a dry run: interpreted kernels have no speed to measure
        return out
    module = module.to(device)
    plain = plain_trainer(module, {k: v.to(device) for k, v in st0.items()}, EXAMPLES[name]["opt"])
    times: dict[str, list[float]] = {"triton": [], "torch": [], "plain": []}
    states = {k: {n: v.to(device) for n, v in st0.items()} for k in jobs}
    t = 0
    for _ in range(rounds):
        for key in times:
            if device.startswith("cuda"):
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            for k in range(per_round):
                if key == "plain":
                    x, y = cpu.batch(t + k)
                    plain(x.to(device), y.to(device))
                else:
                    states[key], _ = jobs[key].step(states[key], t + k)
            if device.startswith("cuda"):
                torch.cuda.synchronize()
            times[key].append((time.perf_counter() - t0) / per_round)
        t += per_round
    med = {k: statistics.median(v) for k, v in times.items()}
    out |= {f"{k}_step_ms": round(1e3 * v, 3) for k, v in med.items()}
    out["step_ratio"] = round(med["triton"] / med["plain"], 2)
    out["portable_ratio"] = round(med["torch"] / med["plain"], 2)
    return out


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.gpu_check")
    p.add_argument("--device", default="cuda")
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--only", choices=sorted(EXAMPLES), action="append", help="these examples")
    args = p.parse_args(argv)
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("error: no CUDA device here (run this on the GPU machine)", file=sys.stderr)
        return 2
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    res: dict = {"device": args.device, "torch": torch.__version__}
    if args.device.startswith("cuda"):
        res["gpu"] = torch.cuda.get_device_name(0)
    names = args.only or list(EXAMPLES)
    for name in names:
        res[name] = check(name, args.device, args.steps)
        print(name, res[name], flush=True)
    res["all_roots_identical"] = all(res[n]["roots_identical"] for n in names)
    if args.device.startswith("cuda"):
        OUT.write_text(json.dumps(res, indent=2) + "\n")
    else:
        print(json.dumps(res))
    return 0 if res["all_roots_identical"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
