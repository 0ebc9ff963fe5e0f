"""A version-3 (char GPT) dispute through the agents, measured (issue #25).

Run: `python -m bench.model_dispute_bench` (or `make bench`; two private Anvil runs of a few
minutes each). For each of two cheats — one element of a layer norm's backward pass, and one of
the first attention softmax's probabilities, both at step 1 of a char-GPT job (batch 2, AdamW,
4 steps, checkpoints every 2) — the job runs as `make demo DEMO=gpt` runs it (scripts/demo_gpt.py:
submitter, cheating solver, honest solver, replaying verifier, real dispute game) and the
bench records, from the chain: the game's moves in order with each one's gas (receipts'
gasUsed) and caller, the total and the costliest move, the challenge transaction's gas, the
dispute's chain time (ChallengeOpened's block to GameResolved's) and its wall time (a watcher
polling the chain from the challenge to the resolution), where the game narrowed the claim,
who was slashed and who finalized the unit. It fails (exit 1) unless the game narrowed the
claim to the cheat's step, node and element, the cheater alone was slashed and the honest
solver's redo completed the job.

Writes the key `model_e2e` of bench/results/dispute.json (bench/dispute_bench.py's file; its
other keys are kept as they are).
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from web3 import Web3

from agents.core.deploy import load_artifact
from scripts import demo_gpt
from scripts.demo import DemoError, guarded

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "results" / "dispute.json"
WORK = ROOT / "build" / "bench" / "model_dispute"
#: The job: the smallest that still has a step to cheat at (tests/roles/test_model_dispute_e2e.py).
CONFIG = demo_gpt.GptConfig(batch=2, steps=4, checkpoint_every=2, seed=5)
#: The layer norm backward's flipped element (the test's), and the softmax's (the demo's).
LAYER_NORM_ELEMENT = 37
POLL_S = 0.25
#: Contracts whose functions a move can call on the game's address (the trace phase runs
#: behind the game's DELEGATECALL, so its functions are called there too).
MOVE_ABIS = ("DisputeGame", "DisputeGameTrace", "JobManager")


def layer_norm_backward_cheat(spec: Path) -> dict:
    """Build the spec recording which nodes the layer norm's backward lowered to
    (tests/roles/model_nodes.py) and pick the test's node: the first layer norm backward's
    input gradient, its last full-size `mul`."""
    import pytest

    sys.path.insert(0, str(ROOT / "tests" / "roles"))
    from model_nodes import build_with_provenance, first_run

    with contextlib.redirect_stdout(io.StringIO()):
        nodes = build_with_provenance(pytest.MonkeyPatch(), demo_gpt.build_args(CONFIG, spec))
    graph = demo_gpt.load_spec(spec)[0].bundle.step
    ln = first_run(nodes["layer_norm_backward"])
    full = graph.nodes[ln[0]].shape
    node = max(i for i in ln if graph.nodes[i].op == "mul" and graph.nodes[i].shape == full)
    return {"operator": "layer norm backward", "step": demo_gpt.CHEAT_STEP, "node": node,
            "element": LAYER_NORM_ELEMENT}  # fmt: skip


def softmax_cheat(spec: Path) -> dict:
    """The demo's cheat: its attention-probabilities node, found by structure."""
    demo_gpt.build_spec(CONFIG, spec)
    graph = demo_gpt.load_spec(spec)[0].bundle.step
    return {"operator": "attention softmax", "step": demo_gpt.CHEAT_STEP,
            "node": demo_gpt.attention_probabilities_node(graph),
            "element": demo_gpt.CHEAT_ELEMENT}  # fmt: skip


@dataclass
class Watch:
    """Wall-clock instants (monotonic s) at which a poller first saw the challenge and the
    game's resolution: the dispute's wall time, as close as polling every POLL_S allows."""

    challenged: float | None = None
    resolved: float | None = None
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self, url: str, addresses: dict, first: int) -> None:
        w3 = Web3(Web3.HTTPProvider(url))
        manager = w3.eth.contract(address=addresses["JobManager"],
                                  abi=load_artifact("JobManager")["abi"])  # fmt: skip
        game = w3.eth.contract(address=addresses["DisputeGame"],
                               abi=load_artifact("DisputeGame")["abi"])  # fmt: skip
        while not self.stop.is_set() and self.resolved is None:
            if self.challenged is None and manager.events.ChallengeOpened().get_logs(
                from_block=first
            ):
                self.challenged = time.monotonic()
            if self.challenged is not None and game.events.GameResolved().get_logs(
                from_block=first
            ):
                self.resolved = time.monotonic()
            self.stop.wait(POLL_S)


def selectors() -> dict[bytes, str]:
    """Function name by 4-byte selector (tuple arguments expanded, as the chain hashes them)."""
    from eth_utils import function_abi_to_4byte_selector

    out = {}
    for name in MOVE_ABIS:
        for item in load_artifact(name)["abi"]:
            if item.get("type") == "function":
                out[bytes(function_abi_to_4byte_selector(item))] = item["name"]
    return out


def game_moves(w3: Web3, addresses: dict, first: int, names: dict[str, str]) -> dict:
    """The game's moves (transactions to the game between the challenge and the resolution),
    the challenge, and the dispute's chain time, from the chain."""
    manager = w3.eth.contract(address=addresses["JobManager"],
                              abi=load_artifact("JobManager")["abi"])  # fmt: skip
    game = w3.eth.contract(address=addresses["DisputeGame"],
                           abi=load_artifact("DisputeGame")["abi"])  # fmt: skip
    (opened,) = manager.events.ChallengeOpened().get_logs(from_block=first)
    (resolved,) = game.events.GameResolved().get_logs(from_block=first)
    by_selector = selectors()
    moves = []
    for n in range(opened["blockNumber"], resolved["blockNumber"] + 1):
        for tx in w3.eth.get_block(n, full_transactions=True)["transactions"]:
            if tx["to"] != addresses["DisputeGame"]:
                continue
            gas = int(w3.eth.get_transaction_receipt(tx["hash"])["gasUsed"])
            name = by_selector.get(bytes(tx["input"][:4]), "0x" + bytes(tx["input"][:4]).hex())
            moves.append({"move": name, "by": names.get(tx["from"], tx["from"]), "gas": gas})
    challenge_gas = int(w3.eth.get_transaction_receipt(opened["transactionHash"])["gasUsed"])
    stamp = lambda ev: int(w3.eth.get_block(ev["blockNumber"])["timestamp"])  # noqa: E731
    by_name: dict[str, int] = {}
    for m in moves:
        by_name[m["move"]] = by_name.get(m["move"], 0) + m["gas"]
    finalized = manager.events.UnitFinalized().get_logs(from_block=first)
    costliest = max(moves, key=lambda m: m["gas"])
    return {
        "moves": len(moves),
        "total_gas": sum(m["gas"] for m in moves),
        "costliest_move": costliest,
        "gas_by_move_name": by_name,
        "move_list": moves,
        "challenge_gas": challenge_gas,
        "by_timeout": bool(resolved["args"]["byTimeout"]),
        "chain_time_s": stamp(resolved) - stamp(opened),
        "unit_finalized_by": [names.get(e["args"]["solver"]) for e in finalized],
    }


def measured(cheat: dict, spec: Path) -> dict:
    """Run the job with `cheat` through the agents; the dispute's figures."""
    watch = Watch()
    figures: dict = {}

    def wrap(play_fn):
        def play(w3, url, addresses, started, marks, first):
            poller = threading.Thread(target=watch.run, args=(url, addresses, first), daemon=True)
            poller.start()
            try:
                report = play_fn(w3, url, addresses, started, marks, first)
            finally:
                watch.stop.set()
                poller.join()
            names = {p.address: p.name for p in demo_gpt.parties("")}
            figures.update(game_moves(w3, addresses, first, names))
            return report

        return play

    report = guarded(lambda: demo_gpt.play_cheat(cheat, spec, CONFIG, None, None, wrap))
    if isinstance(report, int):
        raise DemoError(f"the {cheat['operator']} run failed (exit {report})")
    if watch.challenged is None or watch.resolved is None:
        raise DemoError("the watcher saw no challenge or no resolution")
    outcomes = report["outcomes"]
    return {
        "cheat": report["cheat"],
        "caught_at": report["caught_at"],
        "disputes": report["disputes"],
        "slashed": sorted(n for n, o in outcomes.items() if o["slashed"]),
        "stake_slashed": {n: o["slashed"] for n, o in outcomes.items() if o["slashed"]},
        "job_status": report["job"].get("status"),
        "wall_s": round(watch.resolved - watch.challenged, 2),
        "run_wall_s": report["wall_time_s"],
    } | figures


def check(run: dict) -> list[str]:
    """What the run must show; each failure as one line."""
    c, at = run["cheat"], run["caught_at"]
    bad = []
    if at["steps"] != [c["step"]] or at["nodes"] != [c["node"]] or at["elements"] != [c["element"]]:
        bad.append(f"narrowed to {at}, not step {c['step']} node {c['node']} el {c['element']}")
    if [g["winner"] for g in run["disputes"]] != ["verifier"]:
        bad.append(f"disputes {run['disputes']}: the verifier did not win the one game")
    if run["by_timeout"]:
        bad.append("the game ended by timeout, not by the chain's recomputation")
    if run["job_status"] != "completed":
        bad.append(f"the job ended {run['job_status']!r}, not completed")
    if run["unit_finalized_by"] != ["solver"]:
        bad.append(f"the unit was finalized by {run['unit_finalized_by']}, not the honest solver")
    if run["slashed"] != ["solver-cheat"]:
        bad.append(f"slashed {run['slashed']}, not the cheater alone")
    return bad


def main() -> int:
    runs = {}
    for label, pick in (("layer_norm_backward", layer_norm_backward_cheat),
                        ("attention_softmax", softmax_cheat)):  # fmt: skip
        spec = WORK / label / "gpt.json"
        shutil.rmtree(spec.parent, ignore_errors=True)
        spec.parent.mkdir(parents=True)
        cheat = pick(spec)
        print(f"== {label}: {cheat}", flush=True)
        try:
            run = measured(cheat, spec)
        except DemoError as e:
            print(f"error: {label}: {e}", file=sys.stderr)
            return 1
        print(json.dumps({k: v for k, v in run.items() if k != "move_list"}), flush=True)
        failures = check(run)
        if failures:
            print(f"error: {label}: " + "; ".join(failures), file=sys.stderr)
            return 1
        runs[label] = run
    results = json.loads(OUT.read_text()) if OUT.exists() else {}
    results["model_e2e"] = {"job": CONFIG.__dict__ | {"model": "examples/models/char_gpt.py"},
                            "runs": runs}  # fmt: skip
    OUT.write_text(json.dumps(results, indent=1) + "\n")
    print(f"wrote the key model_e2e of {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
