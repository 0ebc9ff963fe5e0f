"""A dispute bisected through a dot product's accumulator chain, end to end through the agents
(PROTOCOL §7.10).

The job's first layer reads 100 features, so each element of `fwd0.mm` is a dot product of
K = 100 terms: more than the honest challenger proves in one move (`DIRECT_TERMS` = 64). The
cheating solver flips the sign of one such element at step 13; the honest verifier replays,
challenges, narrows the game to that element, opens its reduction and bisects the chain
(ceil(log_16 101) = 2 rounds) down to one accumulation step, which the chain recomputes: the
cheater is slashed, an honest solver redoes the unit and the job completes."""

from __future__ import annotations

import json

import pytest
import rolekit as rk

from agents.training.data import load_dataset

pytestmark = pytest.mark.timeout(420)
DATASET = "synthetic/n=256,f=100,c=4,seed=3"
CHEAT = "element:step=13,node=2,element=5,mask=0x80000000"  # node 2 = fwd0.mm, (16, 16)


def _spec(path):
    spec = {
        "version": 1,
        "model": {"arch": "mlp", "widths": [100, 16, 4]},
        "dataset": {"name": DATASET, "root": "0x" + load_dataset(DATASET).root().hex()},
        "lr": "0x3dcccccd",
        "momentum": "0x3f666666",
        "batch": 16,
        "seed": 1,
        "steps": 20,
        "checkpoint_every": 10,
    }
    path.write_text(json.dumps(spec))
    return path


def test_a_cheat_in_a_long_dot_product_is_bisected_and_slashed(tmp_path):
    spec = _spec(tmp_path / "spec.json")
    submitter = rk.Party("submitter", "submitter", 1)
    cheater = rk.Party("solver-cheat", "solver", 2, ["--stake", "100", "--cheat", CHEAT])
    honest = rk.Party("solver", "solver", 3, ["--stake", "200"])
    verifier = rk.Party("verifier", "verifier", 5, ["--stake", "100"])
    with rk.chain() as (url, w3):
        addrs = rk.deploy(w3, {"verifyWindow": 300})
        rk.fund(w3, addrs["Token"], rk.dev_private_key(0), [submitter, cheater, honest, verifier])
        manager = rk.contract(w3, "JobManager", addrs["JobManager"])
        registry = rk.contract(w3, "NodeRegistry", addrs["NodeRegistry"])
        game = rk.contract(w3, "DisputeGame", addrs["DisputeGame"])
        unit = 1 << 32
        with rk.agents(tmp_path, url, addrs["JobManager"]) as ag:
            # the cheater is the only solver online when the job is posted
            ag.start(cheater)
            ag.start(verifier)
            rk.wait_registered(registry, ag, [cheater, verifier])
            ag.start(submitter, "--spec", str(spec), "--claim-window", "8", "--compute-time", "300")
            rk.wait_for(
                "the cheater's assignment",
                lambda: manager.functions.getUnit(unit).call()[0] >= 3,  # Assigned or later
                120,
                ag,
                ("solver-cheat", "verifier", "submitter"),
            )
            ag.start(honest)
            rk.wait_for(
                "the dispute's result",
                lambda: bool(manager.events.DisputeResolved().get_logs(from_block=0)),
                240,
                ag,
                ("verifier", "submitter"),
            )
            # the honest solver redoes the unit; the verifier attests; skip the challenge window
            rk.wait_for(
                "the second draw's attestation",
                lambda: rk.attested_after_second_draw(manager),
                180,
                ag,
                ("solver", "verifier", "submitter"),
            )
            rk.jump_past(w3, manager.functions.getUnit(unit).call()[4])
            rk.wait_job_completed(ag, 120, ("solver",))

        (resolved,) = manager.events.DisputeResolved().get_logs(from_block=0)
        assert resolved["args"]["challengerWon"] is True
        (opened,) = game.events.ReductionOpened().get_logs(from_block=0)
        assert (opened["args"]["element"], opened["args"]["terms"]) == (5, 100)
        picks = game.events.AccumulatorsPicked().get_logs(from_block=0)
        assert len(picks) == 2  # 101 positions: 16 parts of 6 or 7, then single steps
        (proved,) = game.events.AccumulationProved().get_logs(from_block=0)
        assert proved["args"]["claimed"] != proved["args"]["correct"]
        assert not game.events.ElementProved().get_logs(from_block=0)
        slashed = [e["args"]["node"] for e in registry.events.NodeSlashed().get_logs(from_block=0)]
        assert slashed == [cheater.address]
        (final,) = manager.events.UnitFinalized().get_logs(from_block=0)
        assert final["args"]["solver"] == honest.address
