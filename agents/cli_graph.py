"""`python -m agents graph`: print the step graph (node list) of a job spec (PROTOCOL §2.3)."""

from __future__ import annotations

import argparse
import json


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("graph", help="print the node list of one training step")
    p.add_argument("--spec", required=True, help="job spec JSON file")
    p.add_argument("--json", action="store_true", help="one JSON object per node")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from agents.training import spec
    from agents.training.graph import build_step_graph

    job = spec.load(args.spec)
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
