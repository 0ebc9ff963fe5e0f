"""`make demo DEMO=gpt` (scripts/demo_gpt.py): the char GPT through the network.

- end to end (slow: about 4 minutes on a loaded 2-core machine), on the smallest job that has a
  cheat to catch (batch 2, 4 steps): the cheater's flipped attention probability is caught at
  that node and element, the cheater slashed, the honest retrain completes the job, `job fetch`
  writes the model whose root the chain holds, which plain PyTorch loads, scores and samples;
  its validation loss next to plain PyTorch's own training's; the report JSON as the MLP demo's.
  The demo runs on an Anvil this module starts (`--rpc-url`), so that the chain outlives it;
- the explorer on that chain, in a real browser (Debian's chromium, the checks of
  tests/roles/explorer_checks.py): the jobs page, the job's loss curve, the cheater slashed
  and the retrain, the dispute down to the node's operator and the element the chain recomputed,
  a new job appearing live. The scenario is run once for both (CI time: it is the costly part);
  the demo's own private chain, started and stopped, is tests/foundation/test_demo.py's;
- fast, without a chain: the node the demo cheats at is the first attention softmax's output
  (as the lowering's provenance records it, tests/roles/model_nodes.py), and the demo's local
  side (the fetched weights in the plain module, its samples, plain PyTorch's training) on a
  state the engine trained.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from explorer_checks import check_explorer
from model_nodes import build_with_provenance, first_run
from safetensors.torch import save_file

from agents.cli.job import load_job
from agents.core.chain import AnvilConfig, local_anvil
from agents.model.job import module_state_dict
from scripts import demo_gpt

REPO = Path(__file__).resolve().parents[2]
SMALL = ["--batch", "2", "--steps", "4", "--checkpoint-every", "2"]


def _leftovers(marker: str) -> list[str]:
    out = subprocess.run(["pgrep", "-af", marker], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if "pgrep" not in line]


@pytest.fixture(scope="module")
def demo_chain():
    """The GPT demo run on a chain of this module's (automining, as the demo's private one):
    (rpc url, the demo's finished process); the chain stays up for the explorer's checks."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    with local_anvil(AnvilConfig()) as url:
        cmd = [sys.executable, "-m", "scripts.demo_gpt", *SMALL, "--rpc-url", url]
        proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=840)
        yield url, proc


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_make_demo_gpt_catches_the_cheat_fetches_and_samples_the_model(demo_chain):
    url, proc = demo_chain
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads((demo_gpt.REPORT_DIR / "report.json").read_text())
    time.sleep(0.5)
    assert _leftovers(str(demo_gpt.REPORT_DIR / "run")) == [], "demo left agent processes running"
    assert report["rpc_url"] == url and report["private_chain"] is False

    job = report["job"]
    assert job["status"] == "completed" and job["attempts"] == 2
    o = report["outcomes"]
    assert o["solver-cheat"]["outcome"] == "slashed" and o["solver-cheat"]["slashed"] == 100
    assert o["solver-cheat"]["paid"] == 0
    assert o["solver"]["paid"] > 0 and o["verifier"]["paid"] > 0
    assert o["verifier"]["slashed"] == 0 and o["solver"]["slashed"] == 0
    (game,) = report["disputes"]
    assert game["defender"] == "solver-cheat" and game["winner"] == "verifier"
    assert game["by_timeout"] is False
    assert report["duplicate_transactions"] == [] and report["timeline"]
    # caught at the cheated node and element (the game's events, as the demo reported them)
    cheat = report["cheat"]
    assert report["caught_at"] == {"steps": [demo_gpt.CHEAT_STEP], "nodes": [cheat["node"]],
                                   "elements": [demo_gpt.CHEAT_ELEMENT]}  # fmt: skip
    assert "(attention softmax)" in proc.stdout
    # the fetched model is the chain's, and plain PyTorch scores it as the protocol did
    fetched = report["fetch"]
    assert fetched["state_root"] == job["final_state_root"]
    assert fetched["val_loss"] == job["val_loss"]
    v = report["val_loss"]
    assert abs(v["fetched_in_pytorch"] - v["protocol"]) <= 1e-4
    assert abs(v["plain_pytorch"] - v["protocol"]) <= 1e-2  # 4 steps: float orders apart
    assert len(report["samples"]) == len(demo_gpt.SAMPLE_PROMPTS)
    for prompt, text in zip(demo_gpt.SAMPLE_PROMPTS, report["samples"], strict=True):
        assert text.startswith(prompt) and len(text) == len(prompt) + demo_gpt.SAMPLE_CHARS
    assert "samples from the fetched model" in proc.stdout
    assert f"plain PyTorch {v['plain_pytorch']:.4f}" in proc.stdout
    assert "solver-cheat" in proc.stdout and "slashed" in proc.stdout
    png = (demo_gpt.REPORT_DIR / "demo.png").read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n")


@pytest.fixture(scope="module")
def gpt_spec(tmp_path_factory):
    """The demo's small GPT spec, built with the lowering's provenance recorded."""
    tmp = tmp_path_factory.mktemp("gpt")
    spec = tmp / "gpt.json"
    o = demo_gpt.OPTIMIZER
    argv = ["--model", f"{demo_gpt.MODEL}:make_model", "--dataset", demo_gpt.DATASET,
            "--optimizer", "adamw", "--lr", str(o["lr"]), "--betas", "{},{}".format(*o["betas"]),
            "--weight-decay", str(o["weight_decay"]), "--clip-norm", str(o["clip_norm"]),
            "--batch", "2", "--steps", "4", "--checkpoint-every", "2", "--seed", "1", "--out",
            str(spec)]  # fmt: skip
    with pytest.MonkeyPatch.context() as mp:
        nodes = build_with_provenance(mp, argv)
    return spec, nodes


def test_the_demo_cheats_at_the_first_attention_softmax_output(gpt_spec):
    spec, nodes = gpt_spec
    job, _ = load_job(str(spec), None)
    node = demo_gpt.attention_probabilities_node(job.bundle.step)
    assert node == first_run(nodes["softmax"])[-1]
    assert job.bundle.step.nodes[node].shape[-1] ** 2 > demo_gpt.CHEAT_ELEMENT


def test_the_local_side_loads_samples_and_compares_with_plain_pytorch(gpt_spec, tmp_path):
    spec, _ = gpt_spec
    job, start = load_job(str(spec), None)
    *_, (_, _, final, _) = job.train(start)
    weights = tmp_path / "model.safetensors"
    save_file(module_state_dict(job.bundle, final), str(weights))
    protocol = job.evaluate(final)["val_loss"]
    got = demo_gpt.local_side(protocol, job, start, weights)
    v = got["val_loss"]
    assert abs(v["fetched_in_pytorch"] - protocol) <= 1e-4
    assert abs(v["plain_pytorch"] - protocol) <= 1e-2
    # untrained weights score worse than the trained ones: the comparison sees the training
    untrained = tmp_path / "s0.safetensors"
    save_file(module_state_dict(job.bundle, start), str(untrained))
    before = demo_gpt.local_side(protocol, job, start, untrained)["val_loss"]
    assert before["fetched_in_pytorch"] > v["fetched_in_pytorch"]
    module = demo_gpt.fetched_module(weights)
    a, b = (demo_gpt.sample(module, "ROMEO:", 40, seed=3) for _ in range(2))
    assert a == b and a.startswith("ROMEO:") and len(a) == 46  # seeded: the same text
    assert demo_gpt.sample(module, "ROMEO:", 40, seed=4) != a


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_explorer_shows_the_demo_in_a_browser(demo_chain):
    url, proc = demo_chain
    assert proc.returncode == 0, proc.stderr[-2000:]
    check_explorer(url, json.loads((demo_gpt.REPORT_DIR / "report.json").read_text()))
