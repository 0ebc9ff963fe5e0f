"""Issue #40's "Must show", smaller for CI (`make demo DEMO=decomposed` runs the full 3 rounds x 4
shards, scripts/demo_decomposed_gpt.py): the char GPT decomposed into 2 rounds x 2 shards, version
3, outer Nesterov, every role an OS process on Anvil. A cheating solver's unit (one element of a
parameter update flipped) is challenged by the verifier, bisected to that element and proven on
chain at the unit's placement, the cheater slashed and the unit retrained by an honest solver; a
cheating aggregator's H_1 (one element of the outer-updated state wrong) is challenged by the
honest aggregator in the round manager's game and proven wrong, the round re-aggregated. The job
completes and `job fetch --decomposed` returns G_R on `train --spec`'s root."""

from __future__ import annotations

import pytest
import rolekit as rk

from agents.core.chain import dev_private_key
from agents.core.deploy import DEFAULT_ABI_DIR, deploy_all
from scripts import demo_decomposed_gpt as demo

pytestmark = [pytest.mark.timeout(1500), pytest.mark.slow]


def test_a_cheating_solver_and_a_cheating_aggregator_lose_and_the_job_completes(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    spec, local, fault = demo.build(run_dir, rounds=2, shards=2)
    with rk.chain() as (url, w3):
        addrs = deploy_all(w3, dev_private_key(0), DEFAULT_ABI_DIR, demo.deploy_params())
        # waits nobody acts in (attested units, the honest aggregator's aggregate) are skipped
        with rk.Warp(url, addrs, trusted=(demo.HONEST.address,)):
            out = demo.scenario(w3, url, addrs, run_dir, spec, fault, shards=2)
        fetched = demo.fetch(url, addrs, run_dir)
    result = out["result"]
    # the cheating solver's unit: challenged, lost by one-step proof, slashed, retrained
    (game,) = [g for g in out["unit_games"] if g["unit_job"] == out["cheated_unit_job"]]
    assert game["defender"] == out["cheating_solver"] and game["challenger_won"], game
    assert not game["by_timeout"] and game["element"] is not None, game
    assert out["cheating_solver_slashed"] > 0
    redone = next(u for u in result["units"] if u["job_id"] == out["cheated_unit_job"])
    assert redone["attempts"] == 2 and redone["solver"] != out["cheating_solver"]
    # the cheating aggregate of round 0 (and of round 1 if the cheater won that race too):
    # challenged by the honest aggregator, proven wrong at one element, re-aggregated
    assert out["aggregates"][0]["aggregator"] == demo.CHEATER.address
    challenges = out["aggregate_challenges"]
    assert challenges[0]["round"] == 0
    assert {c["challenger"] for c in challenges} == {demo.HONEST.address}
    assert [g["challenger_won"] for g in out["aggregate_games"]] == [True] * len(challenges)
    proved = out["aggregate_elements_proved"]
    assert len(proved) == len(challenges) and all(p["claimed"] != p["correct"] for p in proved)
    assert out["cheating_aggregator_credits"] == 0
    assert result["aggregations"][0]["attempts"] == 2
    assert {a["aggregator"] for a in result["aggregations"]} == {demo.HONEST.address}
    # the job completed on the one-process run's root, and job fetch returns it
    assert result["final_state_root"] == local["final_root"] == fetched["state_root"]
