"""Gas of the one-step proof of every operator of the example models (PROTOCOL §7.7).

Run: `python -m bench.graph_prover_bench [--only llama]` (starts a private Anvil, ~10 minutes).
Writes bench/results/graph_prover.json.

For the CNN (examples/models/digits_cnn.py), the char GPT (examples/models/char_gpt.py, as
its docstring builds it: batch 16, context 32, AdamW), the LLaMA-style model
(examples/models/llama.py: RMSNorm, SwiGLU, RoPE, GQA, tied embeddings, its recipe's schedule)
and the ResNet (examples/models/resnet.py: BatchNorm, residual blocks, dropout), one training
step from the initial state is traced; for every operator type of the step graph, elements of
its nodes are drawn (the largest nodes first, then random ones) and the gas of
`OneStepProver.evaluate` over the element (openings of everything the element reads, verified)
is measured with eth_estimateGas (a direct proof over a block's gas is counted, never a move), as
is one `accumulate` step of every reduction (the move a dispute over a long reduction ends
with, §7.10). `evaluate` is what proveElement spends on top of the game's own checks; for a
reduction of more than `ModelComputation.direct_terms` terms the challenger bisects instead,
and its costliest move is the accumulation step. Then one whole game per operator type of each
model (a cheater flipping an element of one of its nodes, the honest challenger): the gas of
each of its moves (the trace walked down 64 nodes a round, §7.3) and its costliest move.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from web3.exceptions import ContractLogicError

from agents.dispute.harness import open_game
from agents.dispute.model_graph import (
    StepValues,
    element_chain,
    model_job_graph,
    node_reads,
    openings,
    proof_context,
    term_reads,
)
from agents.dispute.model_trace import ModelComputation
from agents.training.registry import OPS

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "results" / "graph_prover.json"
MODELS = ROOT / "examples" / "models"
JOBS = {
    "cnn": ("digits_cnn.py:make_model", "sklearn-digits/train", "16"),
    "gpt": ("char_gpt.py:make_model", "shakespeare-char/train", "16"),
    "llama": ("llama.py:make_model", "shakespeare-char/train", "16"),
    "resnet": ("resnet.py:make_model", "sklearn-digits/train", "16"),
}
# A 12-layer GPT (d = 256): one game, a cheat at a middle step and in a middle layer.
DEEP = ("char_gpt.py:make_deep", "shakespeare-char/train", "2")
# the examples' own recipes where they have one (a schedule's table, parameter groups): the
# graphs their docstrings build, over 2 steps
RECIPES = {
    "llama": ["--betas", "0.9,0.95", "--weight-decay", "0.1", "--no-decay-bias-norm",
              "--clip-norm", "1.0", "--warmup", "1", "--decay", "cosine", "--min-lr", "0.0003"],
}  # fmt: skip
PER_OP = 4
BLOCK_GAS = 30_000_000  # Anvil's block gas limit: a direct proof above it cannot be estimated
# the moves from the trace root to the disputed node (PROTOCOL §7.3)
TRACE_WALK = (
    "postTraceRoot",
    "pickTraceSubtree",
    "postTraceSubtree",
    "pickStateSubtree",
    "postStateSubtree",
    "pickNode",
    "proveProducer",
)


def build(tmp: Path, name: str, batch: str | None = None, steps: int = 2):
    """(job, S_0) of an example model (batch 16 as its docstring builds it, or `batch`)."""
    from agents.cli.job import load_job

    model, dataset, default_batch = DEEP if name == "deep" else JOBS[name]
    batch = batch or default_batch
    out = tmp / f"{name}-{batch}.json"
    subprocess.run(
        [sys.executable, "-m", "agents", "job", "build", "--model", f"{MODELS}/{model}",
         "--dataset", dataset, "--optimizer", "adamw", "--lr", "0.003", "--batch", batch,
         "--steps", str(steps), "--checkpoint-every", "1", "--seed", "1", "--out", str(out),
         *RECIPES.get(name, [])],
        check=True, capture_output=True,
    )  # fmt: skip
    return load_job(str(out), None)


def measure(prover, name: str, tmp: Path) -> dict:
    job, st = build(tmp, name)
    jg = model_job_graph(job)
    _, trace = job.trace_step(st, 0)
    sv = StepValues.of(job, jg, st, 0, trace)
    roots = sv.node_roots()
    g = jg.graph
    rng = random.Random(0)
    by_op = defaultdict(list)
    for i, n in enumerate(g.nodes):
        by_op[n.op].append(i)
    report = {}
    for op, nodes in sorted(by_op.items()):
        largest = max(nodes, key=lambda i: jg.nodes[i].numel)
        picks = [largest] + [rng.choice(nodes) for _ in range(PER_OP - 1)]
        direct, step, terms, over = 0, 0, 0, 0
        for i in picks:
            desc = jg.nodes[i]
            e = rng.randrange(desc.numel)
            r, c = divmod(e, desc.cols)
            ctx = proof_context(sv, 0, i, roots)
            ops = openings(sv, i, node_reads(g, i, e, sv.values), roots)
            fn = prover.functions.evaluate(ctx, desc.encode(), r, c, ops)
            try:
                direct = max(direct, fn.estimate_gas())
            except ContractLogicError:  # a long reduction proved whole: over a block's gas
                over += 1
                direct = max(direct, BLOCK_GAS)
            if OPS[op].chain is not None and g.nodes[i].dtype == "f32":
                acc = element_chain(g, i, e, sv.values)
                terms = max(terms, len(acc) - 2)
                j = rng.randrange(len(acc) - 2)
                ops = openings(sv, i, term_reads(g, i, e, j, sv.values), roots)
                fn = prover.functions.accumulate(ctx, desc.encode(), r, c, j + 1, int(acc[j]), ops)
                step = max(step, fn.estimate_gas())
        report[op] = {"nodes": len(nodes), "largest_numel": jg.nodes[largest].numel,
                      "evaluate_max_gas": direct}  # fmt: skip
        if over:  # the challenger bisects these (§7.10): the direct proof is never a move
            report[op]["evaluate_over_block_gas"] = over
        if terms:
            report[op] |= {"max_terms": terms, "accumulate_step_max_gas": step}
        worst = min(direct, step) if terms else direct
        print(f"{name:4s} {op:15s} nodes={len(nodes):4d} gas={worst} direct={direct}", flush=True)
    # the costliest last move of a dispute over each operator: the direct proof, or for a
    # reduction the cheaper of that and one accumulation step (the challenger chooses, §7.10)
    costliest = {
        op: min(v["evaluate_max_gas"], v.get("accumulate_step_max_gas", v["evaluate_max_gas"]))
        for op, v in report.items()
    }
    return {"nodes": len(g.nodes), "batch": job.spec.batch, "operators": report,
            "costliest_last_move": max(costliest.values())}  # fmt: skip


def games(dep, name: str, tmp: Path) -> dict:
    """One cheat per operator type of the model's step (a flipped element of one of its nodes at
    step 0 or 1), each played to the end against the honest challenger: moves, the costliest
    move and the wall time of each game."""
    from agents.adversaries.liars import model_element_cheats
    from agents.dispute.client import run_game
    from agents.dispute.player import Challenger, Defender

    job, st = build(tmp, name, steps=2)
    jg = model_job_graph(job)
    honest = ModelComputation(job, jg, st, 2, 1)
    n_ops = len({n.op for n in jg.graph.nodes})
    out: dict = {}
    for op, fault, cheat in model_element_cheats(job, jg, st, honest, 2, 1, n_ops, seed=3):
        if op in out:
            continue
        gid = open_game(dep, _Handle(job, jg), cheat, honest)
        started = time.monotonic()
        rec = run_game(gid, (Defender(cheat, jg), dep.defender),
                       (Challenger(honest, jg), dep.challenger), _advance(dep))  # fmt: skip
        wall = time.monotonic() - started
        fn, gas = max(rec.moves, key=lambda m: m[1])
        walk = [f for f, _ in rec.moves if f in TRACE_WALK]
        out[op] = {"fault": {"step": fault.step, "node": fault.node, "element": fault.element},
                   "challenger_won": rec.winner == 2, "moves": len(rec.moves),
                   "trace_walk_moves": len(walk), "costliest_move": fn, "costliest_gas": gas,
                   "move_gas": [[f, g] for f, g in rec.moves],
                   "wall_s": round(wall, 2)}  # fmt: skip
        print(f"game {name:4s} {op:15s} moves={len(rec.moves)} {fn}={gas}", flush=True)
    return out


def deep_game(dep, tmp: Path) -> dict:
    """The 12-layer GPT: a cheater flips one element of the first matmul of layer 6 (of 0 … 11)
    at step 2 of 4 (checkpoints every 2), played to the end against the honest challenger."""
    from agents.adversaries.faults import Fault, FaultyModelComputation
    from agents.dispute.client import run_game
    from agents.dispute.player import Challenger, Defender

    steps, every = 4, 2
    job, st = build(tmp, "deep", steps=steps)
    jg = model_job_graph(job)
    honest = ModelComputation(job, jg, st, steps, every)
    matmuls = [i for i, n in enumerate(jg.graph.nodes) if n.op == "matmul"]
    node = matmuls[6 * 6]  # forward matmuls: 6 per block (qkv, q·k, ·v, proj, fc, fc2)
    # an element of v (columns 2d … 3d of the qkv product) at position 3: read by every later
    # position (a query at position 0 attends only to itself, so its softmax is 1 whatever
    # the query is, and a flipped q or k there changes nothing)
    d = 256
    fault = Fault("element", 2, node, 3 * 3 * d + 2 * d + 7, 1 << 30)
    cheat = FaultyModelComputation(job, jg, st, steps, every, fault=fault)
    assert cheat.final_root() != honest.final_root()
    gid = open_game(dep, _Handle(job, jg), cheat, honest)
    started = time.monotonic()
    rec = run_game(gid, (Defender(cheat, jg), dep.defender),
                   (Challenger(honest, jg), dep.challenger), _advance(dep))  # fmt: skip
    fn, gas = max(rec.moves, key=lambda m: m[1])
    out = {"layers": 12, "d": 256, "nodes": len(jg.graph.nodes),
           "state_tensors": len(jg.config.state_names), "params": sum(
               v.numel() for k, v in st.items() if k.startswith("p.")),
           "fault": {"step": fault.step, "node": node, "element": fault.element},
           "challenger_won": rec.winner == 2, "moves": len(rec.moves),
           "costliest_move": fn, "costliest_gas": gas,
           "move_gas": [[f, g] for f, g in rec.moves],
           "wall_s": round(time.monotonic() - started, 2)}  # fmt: skip
    print(f"deep game: moves={len(rec.moves)} {fn}={gas} won={rec.winner == 2}", flush=True)
    return out


def summary(games: dict) -> dict:
    """The costliest move over every game of a model, and the range of move counts."""
    worst = max(games.values(), key=lambda g: g["costliest_gas"])
    moves = [g["moves"] for g in games.values()]
    return {"costliest_move": worst["costliest_move"], "costliest_gas": worst["costliest_gas"],
            "moves_min": min(moves), "moves_max": max(moves),
            "trace_walk_moves": max(g["trace_walk_moves"] for g in games.values())}  # fmt: skip


class _Handle:
    def __init__(self, job, jg):
        self.spec, self.data, self.jg = job.spec, job.data, jg


def _advance(dep):
    def go(seconds: int) -> None:
        dep.w3.provider.make_request("evm_increaseTime", [int(seconds)])
        dep.w3.provider.make_request("evm_mine", [])

    return go


def main() -> int:
    import argparse

    from ape import project

    from agents.core.chain import AnvilConfig, connect, local_anvil
    from agents.dispute.harness import deploy_game

    def artifacts(name: str) -> tuple[list, str]:
        ct = getattr(project, name).contract_type
        return ct.model_dump(mode="json", by_alias=True)["abi"], ct.deployment_bytecode.bytecode

    ap = argparse.ArgumentParser()
    ap.add_argument("--only", action="append", choices=sorted(JOBS),
                    help="measure these models and keep the file's others")  # fmt: skip
    ap.add_argument(
        "--deep-only",
        action="store_true",
        help="measure only the 12-layer GPT game and keep the file's models",
    )
    cli = ap.parse_args()
    names = [] if cli.deep_only else cli.only or list(JOBS)
    # An Anvil of our own: ape's records every EVM step (--steps-tracing), gigabytes for a
    # postTrace of the GPT's 1,204 roots.
    with local_anvil(AnvilConfig()) as url, tempfile.TemporaryDirectory() as tmp:
        dep = deploy_game(connect(url), artifacts)
        results = {name: measure(dep.prover, name, Path(tmp)) for name in names}
        for name in names:
            results[name]["games"] = games(dep, name, Path(tmp))
            results[name]["games_summary"] = summary(results[name]["games"])
        # the deep game with every model or alone (--only keeps the file's)
        deep = deep_game(dep, Path(tmp)) if names == list(JOBS) or cli.deep_only else None
    if OUT.exists():
        kept = json.loads(OUT.read_text())
        results = kept["models"] | results
        deep = deep or kept.get("deep_gpt_game")
    out = {
        "what": "per operator type of the example models' training steps: the gas of "
        "OneStepProver.evaluate (the direct proof of one element) and, for the reductions, of "
        "one accumulate step (the bisection's last move), the most over the drawn elements; "
        "and one whole dispute game per operator type (a cheater flipping an element of a "
        "node of that type, the honest challenger) with the gas of every move (the trace "
        "walked 64 nodes a round, PROTOCOL §7.3) and its costliest move",
        "direct_terms_v3": ModelComputation.direct_terms,
        "models": results,
        "deep_gpt_game": deep,
    }
    OUT.write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
