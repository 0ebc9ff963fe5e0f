"""`python -m agents train`: run a job spec on the reproducible engine, print checkpoint roots.

A version-2 spec (R rounds x S shards) runs its whole decomposition here, unit after unit, and
prints every unit's checkpoint / final roots and every round's aggregation / global roots."""

from __future__ import annotations

import argparse
import json
import time

from agents.cli.errors import UserError
from agents.cli.options import add_options, build
from agents.data.builtin import Dataset
from agents.data.chunks import FetchConfig


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("train", help="train a job spec and print its checkpoint state roots")
    p.add_argument("--spec", required=True, help="job spec JSON file")
    p.add_argument(
        "--steps", type=int, help="train only the first N steps (default: spec T; version 1)"
    )
    p.add_argument("--every", type=int, help="print a root every K steps (default: spec k; v1)")
    p.add_argument("--threads", type=int, default=1, help="CPU threads (never changes bits)")
    p.add_argument(
        "--kernels",
        choices=("native", "torch", "triton"),
        default="native",
        help="native: C on the CPU; torch: portable; triton: the device kernels (CUDA)",
    )
    p.add_argument("--device", default="cpu", help="cpu or cuda (torch kernels on cuda)")
    p.add_argument("--json", action="store_true", help="one JSON object per line")
    p.add_argument("--blob-url", help="version 3: the job's blob store (default: recorded beside "
                   "the spec by job build, else <spec>.blobs)")  # fmt: skip
    p.add_argument("--out-state", help="version 3: write the final state to this file")
    add_options(p, FetchConfig)  # a packed dataset's stores (version 3: then the job's own)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:

    from agents.data import datasets as data
    from agents.training import spec
    from agents.training.engine import Engine, EngineConfig
    from agents.training.merkle import checkpoint_root

    job = spec.load(args.spec)
    fetch = build(FetchConfig, args)
    if job.version == spec.SPEC_VERSION_MODEL:
        # the given stores, then (agents/cli/job.py load_job) the ones recorded beside the spec
        # and the job's own blob store
        return _run_model(args, fetch)
    if args.out_state or args.blob_url:
        raise UserError("--out-state and --blob-url apply to version-3 specs")
    if job.version != spec.SPEC_VERSION and (args.steps is not None or args.every is not None):
        raise UserError(
            "--steps and --every apply to version-1 specs (a decomposed job runs whole)"
        )
    _check_run_args(args, job.steps)
    steps = job.steps if args.steps is None else args.steps
    every = job.checkpoint_every if args.every is None else args.every
    ds = data.load_dataset(job.dataset_name, fetch)
    if not isinstance(ds, Dataset):  # a packed token stream: only a version-3 model reads it
        raise UserError(f"dataset {job.dataset_name} is a token stream: it needs a version-3 spec")
    root = "0x" + ds.root().hex()
    if root != job.dataset_root:
        raise UserError(f"dataset {job.dataset_name} has root {root}, spec says {job.dataset_root}")
    cfg = EngineConfig(args.kernels, args.threads, args.device)
    out = _printer(args.json)
    if job.version != spec.SPEC_VERSION:
        return _run_decomposed(job, ds, cfg, out)
    eng = Engine(job, ds, cfg)
    t0, roots, final = time.perf_counter(), [], None
    for t, r, st in eng.train(steps, every):
        roots.append(r)
        final = st
        out({"step": t, "root": "0x" + r.hex()})
    summary: dict = {"steps": steps, "seconds": round(time.perf_counter() - t0, 3)}
    if steps == job.steps and every == job.checkpoint_every:
        summary["checkpoint_root"] = "0x" + checkpoint_root(roots).hex()
    test = data.held_out(ds)
    if test is not None:
        summary["test_accuracy"] = round(eng.accuracy(final, test), 6)
    summary["train_accuracy"] = round(eng.accuracy(final, ds), 6)
    summary["spec_hash"] = "0x" + job.spec_hash().hex()
    out(summary)
    return 0


def _run_decomposed(job, ds, cfg, out) -> int:
    from agents.data import datasets as data
    from agents.training.decompose import RoundResult, UnitEngine, rounds_root, run_job

    t0, g_roots, final = time.perf_counter(), [], None
    for ev in run_job(job, ds, cfg):
        if isinstance(ev, RoundResult):
            g_roots.append(ev.state_root)
            final = ev.state
            out(_round_line(ev))
        else:
            if not g_roots:  # G_0: unit (0, 0) starts from it
                g_roots.append(ev.roots[0])
            out({"round": ev.round, "shard": ev.shard, "checkpoint_root": _hex(ev.checkpoint_root),
                 "final_root": _hex(ev.final_root)})  # fmt: skip
    eng = UnitEngine(job, ds, 0, cfg)  # any shard's engine: accuracy only uses the forward ops
    summary: dict = {"rounds": job.rounds, "shards": job.shards, "local_steps": job.k_local}
    summary["seconds"] = round(time.perf_counter() - t0, 3)
    summary["rounds_root"] = _hex(rounds_root(g_roots))
    test = data.held_out(ds)
    if test is not None:
        summary["test_accuracy"] = round(eng.accuracy(final, test), 6)
    summary["train_accuracy"] = round(eng.accuracy(final, ds), 6)
    summary["spec_hash"] = _hex(job.spec_hash())
    out(summary)
    return 0


def _check_run_args(args, steps_max: int) -> None:
    import torch

    if args.threads < 1:
        raise UserError("--threads must be >= 1")
    if args.steps is not None and not 1 <= args.steps <= steps_max:
        raise UserError(f"--steps must be in [1, {steps_max}] (the spec's T), got {args.steps}")
    if args.every is not None and args.every < 1:
        raise UserError(f"--every must be >= 1, got {args.every}")
    if args.device not in ("cpu", "cuda") and not args.device.startswith("cuda:"):
        raise UserError(f"--device must be cpu or cuda, got {args.device!r}")
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        raise UserError("--device cuda: no CUDA device is available here")
    _check_kernels(args)


def _check_kernels(args) -> None:
    from agents.training.registry import triton_problem

    if args.kernels == "triton" and (problem := triton_problem(args.device)):
        raise UserError(f"--kernels triton: {problem}")


def _run_model(args, fetch) -> int:
    """A version-3 job: checkpoint roots and batch losses, then the held-out metric."""
    from agents.cli.job import load_job
    from agents.training.merkle import checkpoint_root
    from agents.training.run import RunConfig

    cfg = RunConfig(args.kernels, args.threads, args.device)
    job, st = load_job(args.spec, args.blob_url, cfg, fetch)
    _check_run_args(args, job.spec.steps)
    out = _printer(args.json)
    if job.spec.shards > 1 or job.spec.rounds > 1:
        if args.steps is not None or args.every is not None:
            raise UserError("--steps and --every apply to undecomposed specs")
        return _run_model_rounds(job, st, out, args)
    steps = job.spec.steps if args.steps is None else args.steps
    every = job.spec.checkpoint_every if args.every is None else args.every
    t0, roots = time.perf_counter(), []
    for t, r, s, loss in job.train(st, steps, every):
        roots.append(r)
        st = s
        line = {"step": t, "root": _hex(r)}
        if loss is not None:
            line["loss"] = round(loss, 6)
        out(line)
    seconds = time.perf_counter() - t0
    summary: dict = {"steps": steps, "seconds": round(seconds, 3)}
    if steps == job.spec.steps and every == job.spec.checkpoint_every:
        summary["checkpoint_root"] = _hex(checkpoint_root(roots))
    return _finish_model(job, st, summary, args, out)


def _run_model_rounds(job, st, out, args) -> int:
    from agents.model.job import RoundRun
    from agents.training.decompose import rounds_root

    t0, g_roots = time.perf_counter(), [job_root(job.aggregation.initial(st))]
    for ev in job.run_rounds(st):
        if isinstance(ev, RoundRun):
            g_roots.append(ev.state_root)
            st = ev.state
            out(_round_line(ev))
        else:
            out({"round": ev.round, "shard": ev.shard, "checkpoint_root": _hex(ev.checkpoint_root),
                 "final_root": _hex(ev.roots[-1]), "loss": round(ev.loss, 6)})  # fmt: skip
    s = job.spec
    summary: dict = {"rounds": s.rounds, "shards": s.shards, "local_steps": s.k_local,
                     "outer": s.outer}  # fmt: skip
    summary["seconds"] = round(time.perf_counter() - t0, 3)
    summary["rounds_root"] = _hex(rounds_root(g_roots))
    # the job's result G_R: the step state of H_R (what `job fetch` writes as the state_dict)
    st = job.aggregation.unit_start(st)
    summary["final_root"] = _hex(job_root(st))
    return _finish_model(job, st, summary, args, out)


def _finish_model(job, st, summary: dict, args, out) -> int:
    """The held-out metric, the spec hash and (--out-state) the final state, then the summary."""
    from agents.model.job import encode_state

    summary |= {k: round(v, 6) for k, v in job.evaluate(st).items()}
    summary["spec_hash"] = _hex(job.spec.spec_hash())
    if args.out_state:
        with open(args.out_state, "wb") as f:
            f.write(encode_state(st))
        summary["state"] = args.out_state
    out(summary)
    return 0


def job_root(st) -> bytes:
    from agents.model.job import state_root

    return state_root(st)


def _round_line(ev) -> dict:
    """A round's line (either kind of round result): its aggregation root and G_{r+1}."""
    return {"round": ev.round, "aggregation_root": _hex(ev.aggregation_root),
            "state_root": _hex(ev.state_root)}  # fmt: skip


def _hex(b: bytes) -> str:
    return "0x" + b.hex()


def _printer(as_json: bool):
    def emit(obj: dict) -> None:
        if as_json:
            print(json.dumps(obj), flush=True)
        else:
            print("  ".join(f"{k}={v}" for k, v in obj.items()), flush=True)

    return emit
