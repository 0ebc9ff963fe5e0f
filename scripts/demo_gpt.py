"""`make demo DEMO=gpt`: the char GPT of examples/models/char_gpt.py through the network.

`job build` lowers the GPT's training step (AdamW, gradient clipping) into a version-3 spec; on a
local chain (scripts/demo.py's deployment: the real dispute game, short deadlines) the submitter
posts it, a cheating solver alone online claims it and commits a run with one element of the
first attention softmax's probabilities flipped at step 1 (everything after it recomputed from
the wrong value). The honest verifier replays, challenges, and the game narrows the claim to that
step, that node and that element, which the chain recomputes: the cheater is slashed, the unit
re-opens, the honest solver (started once the cheater holds the unit) trains it and the job
completes. The trained model is then fetched as a user would (`python -m agents job fetch`),
loaded into the plain PyTorch module and sampled, and its validation loss is printed next to
plain PyTorch's (the same module from the same initial weights, torch.optim.AdamW on the same
batches for the same steps: bench/models.py's comparison).

Writes build/demo/gpt/report.json (the MLP demo's report, plus the fetch, the samples and the
validation losses), build/demo/gpt/demo.png, the fetched model.safetensors and the agents' logs
under build/demo/gpt/run/ (its own folder: the MLP demo's tests may run beside it).

Exit codes: 0 success, 1 the job did not complete, 2 a user error, as scripts/demo.py.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from web3 import Web3

from agents.core.deploy import load_artifact
from agents.training.ir import Graph
from scripts.demo import (
    REPO,
    DemoError,
    Processes,
    collect,
    deploy_params,
    first_unit_assigned,
    guarded,
    print_contracts,
    run,
    summary_table,
    wait_for,
)
from tools.devnet import JOB_PAY, Party

REPORT_DIR = REPO / "build" / "demo" / "gpt"
MODEL = REPO / "examples" / "models" / "char_gpt.py"
DATASET = "shakespeare-char/train"
#: The optimizer of char_gpt.py's docstring (the spec carries its binary32 values).
OPTIMIZER = {"lr": 0.003, "betas": (0.9, 0.99), "weight_decay": 0.1, "clip_norm": 1.0}
CHEAT_STEP = 1  # in the first segment, whatever the interval
CHEAT_MASK = 0x00400000  # the top mantissa bit of a probability in (0, 1): finite, and wrong
#: The flipped probability: head 0, query 5, key 3 of the first sequence (under the causal mask
#: a nonzero weight, so the flip reaches the attention's output).
CHEAT_ELEMENT = 32 * 5 + 3
#: The GPT's verifier loads the model and replays every step: a wider verify window than the
#: MLP's, and room in each side's game clock for a trace of ~1,200 nodes a step under load.
MANAGER_CONFIG = {"verifyWindow": 60, "verifiersPerUnit": 1}
CLOCK_BUDGET = 300
SAMPLE_PROMPTS = ("ROMEO:\n", "\n", "The ")
SAMPLE_CHARS = 80


@dataclass(frozen=True)
class GptConfig:
    """The demo job's size: `make demo DEMO=gpt` trains long enough to show some learning; the
    test runs the smallest job that still has a cheat to catch (4 steps)."""

    batch: int = 8
    steps: int = 60
    checkpoint_every: int = 20
    seed: int = 1


def parties(cheat: str) -> list[Party]:
    return [
        Party("submitter", "submitter", 1, list(JOB_PAY)),
        Party("solver-cheat", "solver", 2, ["--stake", "100", "--cheat", cheat]),
        Party("solver", "solver", 3, ["--stake", "200"]),
        Party("verifier", "verifier", 5, ["--stake", "100", "--replay-all"]),
    ]


def build_args(cfg: GptConfig, spec: Path) -> list[str]:
    """`job build`'s arguments for the char GPT of `cfg`, writing `spec`."""
    o = OPTIMIZER
    return ["--model", f"{MODEL}:make_model", "--dataset", DATASET,
            "--optimizer", "adamw", "--lr", str(o["lr"]), "--betas", "{},{}".format(*o["betas"]),
            "--weight-decay", str(o["weight_decay"]), "--clip-norm", str(o["clip_norm"]),
            "--batch", str(cfg.batch), "--steps", str(cfg.steps), "--checkpoint-every",
            str(cfg.checkpoint_every), "--seed", str(cfg.seed), "--out", str(spec),
            "--json"]  # fmt: skip


def build_spec(cfg: GptConfig, spec: Path) -> None:
    """`job build` of the char GPT (its blobs beside the spec, where the submitter reads them)."""
    from agents.__main__ import main as agents_main

    with contextlib.redirect_stdout(io.StringIO()):
        if agents_main(["job", "build", *build_args(cfg, spec)]) != 0:
            raise DemoError(f"job build of {MODEL.name} failed")


def attention_probabilities_node(step: Graph) -> int:
    """The first attention softmax's output in the step graph: the first 4-D (B, heads, T, T)
    `div` whose numerator is an `exp` (softmax lowers to sub-max, exp, sum, div)."""
    base = len(step.inputs)
    for i, node in enumerate(step.nodes):
        if node.op != "div" or len(node.shape) != 4 or node.shape[-1] != node.shape[-2]:
            continue
        src = node.inputs[0] - base
        if src >= 0 and step.nodes[src].op == "exp":
            return i
    raise DemoError("the GPT's step graph has no attention softmax")


def play_gpt(cfg: GptConfig, spec: Path, job, cheat: dict):
    """The scenario, as scripts/demo.py's `run` calls it once the parties are funded."""

    def play(w3: Web3, url: str, addresses: dict, started: float, marks: dict, first: int):
        run_dir = REPORT_DIR / "run"
        shutil.rmtree(run_dir, ignore_errors=True)
        run_dir.mkdir(parents=True)
        manager_addr = addresses["JobManager"]
        manager = w3.eth.contract(address=manager_addr, abi=load_artifact("JobManager")["abi"])
        registry = w3.eth.contract(
            address=addresses["NodeRegistry"], abi=load_artifact("NodeRegistry")["abi"]
        )
        by_name = {p.name: p for p in parties(cheat["fault"])}
        procs = Processes(run_dir)
        result_file = run_dir / "submitter-result.json"
        try:
            for name in ("solver-cheat", "verifier"):
                procs.start(by_name[name], url, manager_addr)
            wait_for(
                "registrations",
                lambda: all(
                    registry.functions.roleOf(by_name[n].address).call() != 0
                    for n in ("solver-cheat", "verifier")
                ),
                90,
                procs,
            )
            marks["registered"] = time.monotonic() - started
            procs.start(by_name["submitter"], url, manager_addr, "--spec", str(spec),
                        "--claim-window", "14", "--compute-time", "300", "--out",
                        str(result_file), "--mine-when-idle")  # fmt: skip
            wait_for(
                "the cheater's assignment",
                lambda: first_unit_assigned(manager),
                120,
                procs,
            )
            marks["assigned"] = time.monotonic() - started
            procs.start(by_name["solver"], url, manager_addr)
            done = lambda: procs.procs["submitter"].poll() is not None  # noqa: E731
            wait_for("job completion", done, 600, procs)
            if procs.procs["submitter"].returncode != 0:
                tail = (run_dir / "submitter.log").read_text()[-600:]
                raise DemoError(f"submitter exited with code "
                                f"{procs.procs['submitter'].returncode}: {tail}")  # fmt: skip
            marks["completed"] = time.monotonic() - started
        finally:
            procs.stop_all()
        result = json.loads(result_file.read_text())
        report = {"job": result, "cheat": cheat}
        report.update(collect(w3, addresses, first, run_dir, marks, list(by_name.values())))
        report["caught_at"] = caught_at(w3, addresses["DisputeGame"], first)
        report["fetch"] = fetch(result["job_id"])
        return report

    return play


def caught_at(w3: Web3, game_address: str, first: int) -> dict:
    """Where the dispute game narrowed the cheater's claim, from its events: the step, the
    node of that step's graph, and the element the chain recomputed (directly, or through a
    reduction's own bisection)."""
    game = w3.eth.contract(address=game_address, abi=load_artifact("DisputeGame")["abi"])

    def args(name: str, key: str) -> list[int]:
        logs = getattr(game.events, name)().get_logs(from_block=first)
        return [int(e["args"][key]) for e in logs]

    return {
        "steps": args("StepPicked", "step"),
        "nodes": args("NodePicked", "node"),
        "elements": args("ElementProved", "element") + args("ReductionOpened", "element"),
    }


def fetch(job_id: int) -> dict:
    """`python -m agents job fetch` as a user runs it, against the demo's deployment file."""
    out = REPORT_DIR / "model.safetensors"
    out.unlink(missing_ok=True)
    deployment = REPORT_DIR / "deployment.json"
    cmd = [sys.executable, "-m", "agents", "job", "fetch", str(job_id), "--deployment",
           str(deployment), "--out", str(out), "--allow-local-locators"]  # fmt: skip
    env = dict(os.environ, PYTHONPATH=str(REPO))
    res = subprocess.run([*cmd, "--json"], cwd=REPO, env=env, capture_output=True, text=True)
    if res.returncode != 0:
        raise DemoError(f"job fetch failed: {res.stderr.strip()[:400]}")
    return {"command": " ".join(["python", *cmd[1:]]), **json.loads(res.stdout)}


def fetched_module(path: Path) -> torch.nn.Module:
    """The plain PyTorch GPT of char_gpt.py with the fetched weights, strictly loaded."""
    from safetensors.torch import load_file

    from agents.cli.job import load_factory

    module = load_factory(f"{MODEL}:make_model")()
    module.load_state_dict(load_file(str(path)), strict=True)
    return module.eval()


@torch.no_grad()
def sample(module: torch.nn.Module, prompt: str, chars: int, seed: int) -> str:
    """`chars` characters after `prompt`, drawn from the model's softmax with a fixed seed."""
    from agents.data import tokens

    vocab = tokens.load_tokens(tokens.VAL).vocab
    index = {c: i for i, c in enumerate(vocab)}
    ids = torch.tensor([[index[c] for c in prompt]], dtype=torch.long)
    gen = torch.Generator().manual_seed(seed)
    for _ in range(chars):
        logits = module(ids[:, -module.block_size :])[0, -1].double()
        nxt = torch.multinomial(torch.softmax(logits, -1), 1, generator=gen)
        ids = torch.cat([ids, nxt.reshape(1, 1)], dim=1)
    return tokens.decode(tokens.load_tokens(tokens.VAL), ids[0].tolist())


def plain_pytorch_val_loss(job, start: dict) -> float:
    """The same module trained by plain PyTorch (autograd, torch.optim.AdamW, clipping) from
    the job's S_0 on the job's batches for the job's steps: bench/models.py's comparison."""
    from agents.cli.job import load_factory
    from agents.model.lower import Optimizer
    from bench.models import plain_metric, plain_trainer

    o = OPTIMIZER
    opt = Optimizer("adamw", o["lr"], betas=o["betas"], weight_decay=o["weight_decay"],
                    clip_norm=o["clip_norm"])  # fmt: skip
    module = load_factory(f"{MODEL}:make_model")()
    step = plain_trainer(module, start, opt)
    module.train()
    for t in range(job.spec.steps):
        step(*job.batch(t))
    module.eval()
    return plain_metric(job, module, "gpt")["val_loss"]


def local_side(protocol_val_loss: float, job, start: dict, weights: Path) -> dict:
    """What the user does with the fetched model (`weights`): its samples and validation loss
    in plain PyTorch, and plain PyTorch's own training's validation loss."""
    from agents.data import tokens
    from agents.model.job import lm_loss

    module = fetched_module(weights)
    x, y = tokens.load_tokens(tokens.VAL).eval_windows(module.block_size)
    with torch.no_grad():
        fetched = lm_loss(module(x), y)
    samples = [sample(module, p, SAMPLE_CHARS, seed=i) for i, p in enumerate(SAMPLE_PROMPTS)]
    return {
        "samples": samples,
        "val_loss": {
            "protocol": protocol_val_loss,
            "fetched_in_pytorch": fetched,
            "plain_pytorch": plain_pytorch_val_loss(job, start),
            "unigram_baseline": tokens.load_tokens(tokens.VAL).unigram_loss(),
            "steps": job.spec.steps,
        },
    }


def play_cheat(cheat: dict, spec: Path, cfg: GptConfig, rpc_url: str | None, key: str | None,
               wrap=None) -> dict:  # fmt: skip
    """Deploy and run the job of `spec` with the cheater flipping `cheat`'s element (its
    `operator`, `step`, `node`, `element`; the `fault` string is added here). `wrap`, when
    given, wraps the scenario's play function (bench/model_dispute_bench.py watches the game
    from it)."""
    fault = (f"element:step={cheat['step']},node={cheat['node']},"
             f"element={cheat['element']},mask={CHEAT_MASK:#x}")  # fmt: skip
    cheat = {**cheat, "fault": fault}
    job, _ = load_spec(spec)
    play_fn = play_gpt(cfg, spec, job, cheat)
    params = deploy_params(MANAGER_CONFIG, CLOCK_BUDGET)
    report = run(rpc_url, key, params=params, parties=parties(fault),
                 deployment=REPORT_DIR / "deployment.json",
                 play_fn=wrap(play_fn) if wrap else play_fn)  # fmt: skip
    report["config"] = cfg.__dict__
    return report


def load_spec(spec: Path):
    """The job of `spec` and its initial state, as the agents load them."""
    from agents.cli.job import load_job

    return load_job(str(spec), None)


def run_gpt(cfg: GptConfig, rpc_url: str | None, key: str | None) -> dict:
    REPORT_DIR.mkdir(parents=True, exist_ok=True)
    spec = REPORT_DIR / "gpt.json"
    shutil.rmtree(spec.with_suffix(".blobs"), ignore_errors=True)
    build_spec(cfg, spec)
    job, start = load_spec(spec)
    node = attention_probabilities_node(job.bundle.step)
    cheat = {"operator": "attention softmax", "step": CHEAT_STEP, "node": node,
             "element": CHEAT_ELEMENT}  # fmt: skip
    report = play_cheat(cheat, spec, cfg, rpc_url, key)
    report.update(local_side(report["job"]["val_loss"], job, start, Path(report["fetch"]["out"])))
    return report


def write_outputs(report: dict, cfg: GptConfig) -> None:
    from scripts.plots import demo_figure

    (REPORT_DIR / "report.json").write_text(json.dumps(report, indent=2) + "\n")
    demo_figure(report, REPORT_DIR / "demo.png", cfg.checkpoint_every)


def print_result(report: dict) -> None:
    g = report["disputes"][0] if report["disputes"] else None
    c = report["cheat"]
    print(summary_table(report))
    at = report["caught_at"]
    print(f"the cheat: step {c['step']}, node {c['node']} ({c['operator']}), element "
          f"{c['element']}; the game narrowed it to step(s) {at['steps']}, node(s) "
          f"{at['nodes']}, element(s) {at['elements']}"
          + (f"; {g['winner']} won it" if g is not None else ""))  # fmt: skip
    f = report["fetch"]
    print(f"fetched: {f['command']}\n  -> {f['out']} ({f['tensors']} tensors), state root "
          f"{f['state_root'][:18]}… matches the chain")  # fmt: skip
    v = report["val_loss"]
    print(f"validation loss after {v['steps']} steps: protocol {v['protocol']:.4f}, fetched "
          f"weights in PyTorch {v['fetched_in_pytorch']:.4f}, plain PyTorch "
          f"{v['plain_pytorch']:.4f} (unigram baseline {v['unigram_baseline']:.4f})")  # fmt: skip
    print("samples from the fetched model (seeded):")
    for text in report["samples"]:
        for line in text.splitlines() or [""]:
            print(f"  | {line}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make demo DEMO=gpt", description=__doc__.splitlines()[0])
    parser.add_argument("--rpc-url", help="use this dev chain instead of starting a private Anvil")
    parser.add_argument("--key", help="deployer private key (default: Anvil dev account 0)")
    d = GptConfig()
    parser.add_argument("--batch", type=int, default=d.batch)
    parser.add_argument("--steps", type=int, default=d.steps)
    parser.add_argument("--checkpoint-every", type=int, default=d.checkpoint_every)
    parser.add_argument("--seed", type=int, default=d.seed)
    args = parser.parse_args(argv)
    cfg = GptConfig(args.batch, args.steps, args.checkpoint_every, args.seed)
    if cfg.steps <= CHEAT_STEP:
        parser.error(f"--steps must be > {CHEAT_STEP}: the cheat is at step {CHEAT_STEP}")
    report = guarded(lambda: run_gpt(cfg, args.rpc_url, args.key))
    if isinstance(report, int):
        return report
    print_contracts(report)
    print()
    print_result(report)
    write_outputs(report, cfg)
    print(f"wrote {REPORT_DIR / 'report.json'} and {REPORT_DIR / 'demo.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
