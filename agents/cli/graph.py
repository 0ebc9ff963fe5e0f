"""`python -m agents graph`: print the step graph (node list) of a job spec (PROTOCOL §2.3; a
version-3 spec's committed graph, §2.7, read from its blob store)."""

from __future__ import annotations

import argparse
import json


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("graph", help="print the node list of one training step")
    p.add_argument("--spec", required=True, help="job spec JSON file")
    p.add_argument("--json", action="store_true", help="one JSON object per node")
    p.add_argument("--blob-url", help="version 3: the job's blob store (default <spec>.blobs)")
    p.set_defaults(func=run)


def _run_model(args: argparse.Namespace) -> int:
    from agents.cli.job import load_job

    job, _ = load_job(args.spec, args.blob_url)
    g = job.bundle.step
    names = {i: v.name for i, v in enumerate(g.inputs)}
    base = len(g.inputs)
    for i, n in enumerate(g.nodes):
        if args.json:
            print(json.dumps({"index": i, "op": n.op, "inputs": list(n.inputs),
                              "attrs": list(n.attrs)[:16], "shape": list(n.shape),
                              "dtype": n.dtype}))  # fmt: skip
        else:
            ins = ", ".join(names.get(v, f"%{v - base}") for v in n.inputs)
            shape = "x".join(map(str, n.shape)) or "scalar"
            print(f"{i:5d}  {n.op:<15} {shape:>14} {n.dtype}  {ins}")
    if not args.json:
        outs = ", ".join(f"{k}<-%{vid - base}" for k, vid in g.outputs if vid >= base)
        print(f"outputs: {outs}")
    return 0


def run(args: argparse.Namespace) -> int:
    from agents.training import spec
    from agents.training.graph import build_step_graph

    job = spec.load(args.spec)
    if job.version == spec.SPEC_VERSION_MODEL:
        return _run_model(args)
    g = build_step_graph(job.widths, job.batch)
    for n in g.nodes:
        if args.json:
            print(json.dumps(n.to_obj()))
        else:
            shape = f"{n.shape[0]}x{n.shape[1]}"
            ins = ", ".join(n.inputs)
            print(f"{n.index:4d}  {n.name:<14} {n.op:<13} {shape:>11} {n.dtype}  {ins}")
    if not args.json:
        nxt = ", ".join(f"{k}<-{v}" for k, v in g.next_state.items())
        print(f"next state: {nxt}")
        print(f"lr={float(job.lr)!r} momentum={float(job.momentum)!r} batch={job.batch}")
    return 0
