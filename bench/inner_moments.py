"""How a decomposed job's inner AdamW state should cross rounds (issue #40 item 1; PROTOCOL §5.2).

Run: `python -m bench.inner_moments [--rounds 8] [--shards 4] [--steps 1600]` (about 5 minutes).
Writes bench/results/inner_moments.json.

The char GPT (examples/models/char_gpt.py, batch 16, AdamW lr 3e-3) decomposed into R rounds x
S shards with the Nesterov outer optimizer (lr 0.7, momentum 0.9) is trained three ways, each
unit on the engine, each round's parameters aggregated by the job's aggregation graph:
  averaged   — the units' AdamW moments and step count averaged with the parameters (what the
               aggregation graph commits today: the whole step state is round state);
  reset      — every unit starts its round from fresh AdamW state (moments 0, step 0);
  per_shard  — unit s starts from its own previous unit's AdamW state (DiLoCo's choice).
The held-out loss of G_R's parameters, and the bytes each solver moves per round (its unit's
start state down, its final state up: parameters and, for `averaged`, the AdamW state).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from agents.__main__ import main as cli
from agents.cli.job import load_job

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "results" / "inner_moments.json"
MODELS = ROOT / "examples" / "models"


def run(job, st, how: str) -> tuple[float, list[float]]:
    """G_R's held-out loss and each round's, for one way of carrying the inner state."""
    s = job.spec
    agg = job.aggregation
    params = set(job.bundle.params)
    h = agg.initial(st)
    fresh = {n: st[n] for n in agg.step_names if n not in params}  # S_0's optimizer state
    kept: list[dict | None] = [None] * s.shards
    losses = []
    for r in range(s.rounds):
        g = agg.unit_start(h)
        units = []
        for shard in range(s.shards):
            start = dict(g)
            if how == "reset" or (how == "per_shard" and kept[shard] is None):
                start |= fresh
            elif how == "per_shard":
                start |= kept[shard]
            u = job.run_unit(r, shard, start)
            kept[shard] = {n: u.final[n] for n in fresh}
            units.append(u.final)
        h, _ = agg.run(h, units, job.cfg)
        losses.append(job.evaluate(agg.unit_start(h))["val_loss"])
    return losses[-1], losses


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--shards", type=int, default=4)
    ap.add_argument("--steps", type=int, default=1600)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        spec = Path(tmp) / "gpt.json"
        argv = ["job", "build", "--model", f"{MODELS}/char_gpt.py:make_model", "--dataset",
                "shakespeare-char/train", "--optimizer", "adamw", "--lr", "0.003", "--batch", "16",
                "--steps", str(args.steps), "--checkpoint-every", str(args.steps // args.rounds),
                "--seed", "1", "--rounds", str(args.rounds), "--shards", str(args.shards),
                "--outer", "nesterov", "--out", str(spec)]  # fmt: skip
        assert cli(argv) == 0
        job, st = load_job(str(spec), None)
        params = sum(st[n].numel() for n in job.bundle.params)
        step_state = sum(t.numel() for t in st.values())
        results = {}
        for how in ("averaged", "reset", "per_shard"):
            t0 = time.monotonic()
            final, losses = run(job, st, how)
            moved = 2 * 4 * (step_state if how == "averaged" else params)
            by_round = [round(x, 5) for x in losses]
            results[how] = {"val_loss": round(final, 5), "val_loss_by_round": by_round,
                            "bytes_per_solver_per_round": moved,
                            "seconds": round(time.monotonic() - t0, 1)}  # fmt: skip
            print(how, results[how], flush=True)
        k = job.spec.k_local
        S = job.spec.shards
        allreduce = k * 2 * 2 * (S - 1) / S * 4 * params  # ring all-reduce, sent + received
    out = {
        "what": "the char GPT decomposed R x S with the Nesterov outer optimizer: held-out loss "
        "of G_R when the inner AdamW state is averaged, reset, or kept per shard, and the bytes "
        "each solver moves per round (start state down, final state up) against a ring "
        "all-reduce of the gradients at every one of the round's k_local steps",
        "rounds": args.rounds, "shards": args.shards, "local_steps": job.spec.k_local,
        "params": params, "step_state_elements": step_state,
        "allreduce_bytes_per_solver_per_round": int(allreduce),
        "results": results,
    }  # fmt: skip
    OUT.write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
