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

from agents.data.builtin import load_dataset

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
    with rk.cheat_caught_and_redone(tmp_path, spec, CHEAT, {"verifyWindow": 300}) as run:
        (resolved,) = run.manager.events.DisputeResolved().get_logs(from_block=0)
        assert resolved["args"]["challengerWon"] is True
        (opened,) = run.game.events.ReductionOpened().get_logs(from_block=0)
        assert (opened["args"]["element"], opened["args"]["terms"]) == (5, 100)
        picks = run.game.events.AccumulatorsPicked().get_logs(from_block=0)
        assert len(picks) == 2  # 101 positions: 16 parts of 6 or 7, then single steps
        (proved,) = run.game.events.AccumulationProved().get_logs(from_block=0)
        assert proved["args"]["claimed"] != proved["args"]["correct"]
        assert not run.game.events.ElementProved().get_logs(from_block=0)
        slashed = run.registry.events.NodeSlashed().get_logs(from_block=0)
        assert [e["args"]["node"] for e in slashed] == [run.cheater.address]
        (final,) = run.manager.events.UnitFinalized().get_logs(from_block=0)
        assert final["args"]["solver"] == run.honest.address
