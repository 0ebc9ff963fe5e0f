"""Device check (issue #29): the three example jobs on a GPU against the CPU's roots, and the
step time against plain PyTorch on the same GPU -> bench/results/gpu.json.

For each example (bench/models.py's EXAMPLES, a few steps each): the checkpoint roots of the
CPU run (native kernels) and of the device run (the portable torch path, the one CUDA runs)
must be identical; then the device's step time is timed against plain PyTorch fp32 on the
same device (TF32 off: `torch.backends.*.allow_tf32 = False`), interleaved, median of rounds.
One run takes a few minutes on one GPU.

Run: .venv/bin/python -m bench.gpu_check [--device cuda] [--steps 4]
(`--device cpu` runs the same comparison on the CPU's portable path: a dry run of this script.)
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
from agents.model.run import RunConfig
from bench.models import EXAMPLES, _plain, make_job

OUT = Path(__file__).resolve().parent / "results" / "gpu.json"


def roots(job: mj.ModelJob, st: dict, steps: int) -> list[str]:
    return ["0x" + r.hex() for _t, r, _s, _l in job.train(st, steps, 1)]


def check(name: str, device: str, steps: int, rounds: int = 5, per_round: int = 3) -> dict:
    cpu, st0, module, _ = make_job(name, "native")
    dev = mj.ModelJob(cpu.spec, cpu.bundle, cpu.data, RunConfig("torch", 1, device))
    st_dev = {k: v.to(device) for k, v in st0.items()}
    want, got = roots(cpu, st0, steps), roots(dev, st_dev, steps)
    module = module.to(device)
    plain = _plain(module, st_dev, EXAMPLES[name]["opt"])
    times: dict[str, list[float]] = {"engine": [], "plain": []}
    st, t = dict(st_dev), 0
    for _ in range(rounds):
        for key in times:
            if device.startswith("cuda"):
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            for k in range(per_round):
                if key == "engine":
                    st, _ = dev.step(st, t + k)
                else:
                    x, y = dev.batch(t + k)
                    plain(x.to(device), y.to(device))
            if device.startswith("cuda"):
                torch.cuda.synchronize()
            times[key].append((time.perf_counter() - t0) / per_round)
        t += per_round
    med = {k: statistics.median(v) for k, v in times.items()}
    return {
        "steps_compared": steps,
        "roots_identical": want == got,
        "first_difference": next(
            (i for i, (a, b) in enumerate(zip(want, got, strict=True)) if a != b), None
        ),
        "engine_step_ms": round(1e3 * med["engine"], 3),
        "plain_step_ms": round(1e3 * med["plain"], 3),
        "step_ratio": round(med["engine"] / med["plain"], 2),
    }


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.gpu_check")
    p.add_argument("--device", default="cuda")
    p.add_argument("--steps", type=int, default=4)
    args = p.parse_args(argv)
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("error: no CUDA device here (run this on the GPU machine)", file=sys.stderr)
        return 2
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    res: dict = {"device": args.device, "torch": torch.__version__}
    if args.device.startswith("cuda"):
        res["gpu"] = torch.cuda.get_device_name(0)
    for name in EXAMPLES:
        res[name] = check(name, args.device, args.steps)
        print(name, res[name], flush=True)
    res["all_roots_identical"] = all(res[n]["roots_identical"] for n in EXAMPLES)
    if args.device.startswith("cuda"):
        OUT.write_text(json.dumps(res, indent=2) + "\n")
    else:
        print(json.dumps(res))
    return 0 if res["all_roots_identical"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
