"""A 2-round x 3-shard digits job on Anvil through the RoundManager, every role an OS process (the
`make demo DEMO=decomposed-mlp`, scripts/demo_decomposed.py): four solvers, a cheating solver,
two aggregators (one cheats and withholds its blob), a verifier, the submitter. One solver goes
offline holding a unit of round 0 (killed right after its claim, so it is selected and misses its
commit deadline): the unit is re-opened and taken by the spare solver. The cheating solver commits a
unit with one wrong weight update: the verifier wins the bisection game over it down to the one-step
proof at the unit's global step and shard batch, the cheater is slashed and the unit re-opened. The
cheating aggregator commits round 0 first and withholds its blob; the honest one makes it reveal the
disputed tensor on chain (killed -9 once its request is mined and restarted from its data folder)
and proves it wrong from the reveal, the cheater is slashed and the round re-aggregated. The job's
final state root equals, bit for bit, the engine's one-process run of the same spec, and its test
accuracy is within 2 points of the single solver with the same total steps."""

from __future__ import annotations

import json

import pytest
import rolekit as rk

from agents.core.deploy import DEFAULT_ABI_DIR, deploy_all
from scripts.demo_decomposed import BOND, DEPLOY_PARAMS, HONEST, local_run, scenario

pytestmark = [pytest.mark.timeout(900), pytest.mark.slow]


def test_two_by_three_job_with_offline_solver_and_cheating_aggregator(tmp_path):
    local = local_run()
    with rk.chain() as (url, w3):
        addrs = deploy_all(w3, rk.dev_private_key(0), DEFAULT_ABI_DIR, DEPLOY_PARAMS)
        # the waits for challenge windows in which nobody acts any more (every unit attested,
        # the honest aggregator's aggregate unchallenged) are skipped on chain (rk.Warp)
        with rk.Warp(url, addrs, trusted=(HONEST.address,)):
            out = scenario(w3, url, addrs, tmp_path)
    result, offline, cheater = out["result"], out["offline_solver"], out["cheating_aggregator"]

    # the job's result is the engine's one-process result, bit for bit
    assert result["final_state_root"] == local["final_state_root"]
    assert result["rounds"] == 2 and result["shards"] == 3
    # the offline solver's unit was re-opened and finished by another solver
    assert out["expired_assignments"] == [{"unit_job": out["offline_unit_job"], "solver": offline}]
    lost = next(u for u in result["units"] if u["job_id"] == out["offline_unit_job"])
    assert lost["attempts"] == 2 and lost["solver"] != offline
    for r in (0, 1):  # distinct solvers in each round
        assert len({u["solver"] for u in result["units"] if u["round"] == r}) == 3
    # the cheating solver's unit was disputed in the game, under its placement, and lost by the
    # one-step proof (not on time) at the faulty step; the unit was finished by another solver
    games = [g for g in out["unit_games"] if g["unit_job"] == out["cheated_unit_job"]]
    assert len(games) == 1, out["unit_games"]
    game = games[0]
    assert game["defender"] == out["cheating_solver"]
    assert game["challenger_won"] is True and game["by_timeout"] is False
    shard = next(u["shard"] for u in result["units"] if u["job_id"] == out["cheated_unit_job"])
    assert game["placement"] == [0, 3, shard]  # round 0: t0 = 0
    assert game["global_step"] == 117 and game["element"] == 5
    assert out["cheating_solver_slashed"] > 0
    redone = next(u for u in result["units"] if u["job_id"] == out["cheated_unit_job"])
    assert redone["attempts"] == 2 and redone["solver"] != out["cheating_solver"]
    assert all(g["challenger_won"] for g in out["unit_games"])  # no honest unit was disputed
    # the verifier replayed sampled segments of every finished unit (shard batches from G_r)
    # and attested: its replay agreed with the solvers' checkpoints
    finished = {u["job_id"] for u in result["units"]}
    assert {a["unit_job"] for a in out["attestations"]} == finished
    # the cheater withheld its aggregate's blob: the honest aggregator asked on chain for the
    # disputed tensor (w0, whose element 5 it changed), the cheater revealed leaf 0, and the
    # proof below was made from that reveal
    assert out["reveal_requests"][0]["round"] == 0
    assert out["reveal_requests"][0]["requester"] == out["honest_aggregator"]
    assert out["reveals"][0] == {"round": 0, "tensor": 0, "leaf": 0}
    # (the honest aggregator was killed -9 after its request and resumed from its data folder)
    assert "proof_sent_before_kill" in out["honest_aggregator_restarted"]
    # the cheater was caught in round 0 (and in round 1 if it won that race too), the round
    # re-aggregated by the honest aggregator
    proofs = out["fraud_proofs"]
    assert proofs and all(p["aggregator"] == cheater for p in proofs)
    assert proofs[0]["round"] == 0 and proofs[0]["challenger"] == out["honest_aggregator"]
    assert result["aggregations"][0]["attempts"] >= 2
    assert all(a["aggregator"] == out["honest_aggregator"] for a in result["aggregations"])
    # half of each slashed bond; the answered requests' bonds were held with the cheater's
    # aggregates, which were all overturned, and the honest aggregator took each back
    # (PROTOCOL §6.9): none of them reached the jackpot
    reveal_bond = BOND * 2_000 // 10_000
    assert out["round_manager_jackpot"] == len(proofs) * BOND // 2
    held = out["reveal_bonds_held"]
    assert len(held) == len(out["reveals"]) >= 1
    assert all(h["amount"] == reveal_bond for h in held)
    assert sorted(map(str, held)) == sorted(map(str, out["reveal_bonds_returned"]))
    # accuracy: reported, the engine's, and within 2 points of the single solver
    assert result["test_accuracy"] == pytest.approx(local["test_accuracy"], abs=1e-6)
    assert abs(result["test_accuracy"] - local["single_solver_test_accuracy"]) <= 0.02
    print(json.dumps({"test_accuracy": result["test_accuracy"], **local}))
