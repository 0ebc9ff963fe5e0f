"""Gas of an aggregation dispute at scale (PROTOCOL §7.2, §7.10; issue #40's bound: the costliest
move at most 500k gas with S = 64 units and 2^20-element tensors).

Run: `python -m bench.aggregation_gas [--shards 64] [--side 1024]` (starts a private Anvil).
Writes bench/results/aggregation_gas.json.

The round: a step state of one parameter `p.w` (side × side float32 elements, 2^20 by default)
aggregated over S units with the Nesterov outer optimizer (its momentum buffer `outer.p.w` is
round state), H_r and the S unit states random. For each cheat — one element of the units'
weighted average (the matmul over the S unit stacks, disputed through its accumulator chain),
of the outer-updated parameter, and of the new momentum buffer — a whole game is played
against the honest challenger on Anvil through the agents' players, with the gas of every
move. Every move opens at most one unit's element.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch

from agents.adversaries.faults import Fault, FaultyAggregation
from agents.dispute.aggregation import AggregationComputation, aggregation_job_graph
from agents.model.aggregate import Aggregation, Outer, aggregation_graph
from agents.training import decompose
from agents.training.ir import Value

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "results" / "aggregation_gas.json"
MOVE_GAS = 500_000


class _Handle:
    def __init__(self, jg):
        self.jg = jg


def _advance(dep):
    def go(seconds: int) -> None:
        dep.w3.provider.make_request("evm_increaseTime", [int(seconds)])
        dep.w3.provider.make_request("evm_mine", [])

    return go


def round_account(shards: int, side: int, seed: int = 0) -> AggregationComputation:
    state = [Value("p.w", (side, side), "f32")]
    weights = decompose.aggregation_weights(shards * 1000 + 7, shards)
    agg = Aggregation.of(aggregation_graph(state, ["p.w"], weights, Outer.nesterov(0.7, 0.9)))
    gen = torch.Generator().manual_seed(seed)
    h = {n: torch.randn(side, side, generator=gen) for n in agg.round_names}
    g = h["p.w"]
    units = [{"p.w": g + 0.01 * torch.randn(side, side, generator=gen)} for _ in range(shards)]
    return AggregationComputation(agg, aggregation_job_graph(agg), h, units)


def main() -> int:
    from ape import project

    from agents.core.chain import AnvilConfig, connect, local_anvil
    from agents.dispute.client import run_game
    from agents.dispute.harness import deploy_game, register_job
    from agents.dispute.player import Challenger, Defender

    ap = argparse.ArgumentParser()
    ap.add_argument("--shards", type=int, default=64)
    ap.add_argument("--side", type=int, default=1024, help="p.w is side x side")
    args = ap.parse_args()

    def artifacts(name: str) -> tuple[list, str]:
        ct = getattr(project, name).contract_type
        return ct.model_dump(mode="json", by_alias=True)["abi"], ct.deployment_bytecode.bytecode

    t0 = time.monotonic()
    honest = round_account(args.shards, args.side)
    jg = honest.jg
    nodes = jg.graph.nodes
    matmul = next(i for i, n in enumerate(nodes) if n.op == "matmul")
    outputs = dict(jg.graph.outputs)
    n_in = len(jg.graph.inputs)
    cheats = {
        "units_average": matmul,
        "outer_updated_parameter": outputs["p.w"] - n_in,
        "outer_momentum_buffer": outputs["outer.p.w"] - n_in,
    }
    numel = args.side * args.side
    honest.final_root()
    honest.units_root()
    print(f"honest account: {time.monotonic() - t0:.1f} s", flush=True)
    results: dict = {}
    with local_anvil(AnvilConfig()) as url:
        dep = deploy_game(connect(url), artifacts)
        for k, (what, node) in enumerate(cheats.items()):
            fault = Fault("element", 0, node, (k * 7919 + numel // 3) % numel, 1 << 29)
            cheat = FaultyAggregation(honest.agg, jg, honest.h, honest.units, fault=fault)
            assert cheat.final_root() != honest.final_root()
            job_id = register_job(dep, _Handle(jg))
            roots = [honest.claimed_root(0), cheat.final_root()]
            units = honest.units_root()
            dep.deployer.transact("openSegment", job_id << 32, dep.defender.address,
                                  dep.challenger.address, units, 0, 1, roots)  # fmt: skip
            gid = dep.game.functions.gameCount().call()
            started = time.monotonic()
            rec = run_game(gid, (Defender(cheat, jg), dep.defender),
                           (Challenger(honest, jg), dep.challenger), _advance(dep))  # fmt: skip
            fn, gas = max(rec.moves, key=lambda m: m[1])
            results[what] = {
                "node": node, "op": nodes[node].op, "element": fault.element,
                "challenger_won": rec.winner == 2, "moves": len(rec.moves),
                "costliest_move": fn, "costliest_gas": gas,
                "move_gas": [[f, g] for f, g in rec.moves],
                "wall_s": round(time.monotonic() - started, 1),
            }  # fmt: skip
            print(f"{what}: won={rec.winner == 2} moves={len(rec.moves)} {fn}={gas}", flush=True)
            cheat.release()
    worst = max(results.values(), key=lambda r: r["costliest_gas"])
    out = {
        "what": "whole aggregation disputes (the honest challenger against an aggregator with "
        "one element wrong) over a Nesterov round of S units of one side x side parameter: the "
        "gas of every move and the costliest",
        "shards": args.shards,
        "elements_per_tensor": numel,
        "graph_nodes": len(nodes),
        "bound_gas": MOVE_GAS,
        "costliest_move": worst["costliest_move"],
        "costliest_gas": worst["costliest_gas"],
        "within_bound": all(r["costliest_gas"] <= MOVE_GAS for r in results.values()),
        "all_won_by_the_challenger": all(r["challenger_won"] for r in results.values()),
        "games": results,
        "torch": torch.__version__,
        "numpy": np.__version__,
    }
    OUT.write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps({k: v for k, v in out.items() if k != "games"}))
    return 0 if out["within_bound"] and out["all_won_by_the_challenger"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
