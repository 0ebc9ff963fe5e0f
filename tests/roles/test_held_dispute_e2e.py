"""A challenger's win held for a forced round's reveal, end to end (PROTOCOL §6.6, audit F4).

Forced errors are on (forcedErrorBps 1), so a challenger's win before the end of the round's
reveal slot (the challenge deadline + 2 · revealWindow) is held: the unit stays Disputed until
someone applies it with `settleDispute`. The job has two segments (a one-segment round is never
forced, so its win is not held), and at 1 basis point its round is forced once in 10,000 runs:
no reveal voids the dispute. The cheating solver (the demo's cheat, PROTOCOL §7.8) commits a
wrong root, the honest verifier (sampling both segments) challenges it and wins the game long
before the slot ends (a 300 s challenge window), the win is held, and once the slot is over
(chain time skipped) the agents — the winning verifier or the submitter's keeper — settle it:
the cheater is slashed, the unit re-opens, an honest solver redoes it and the job completes."""

from __future__ import annotations

import pytest
import rolekit as rk
from web3 import Web3

pytestmark = pytest.mark.timeout(420)
CHEAT = "element:step=217,node=2,element=5,mask=0x40000000"


def test_a_held_win_is_settled_by_the_agents_and_the_unit_redone(tmp_path):
    spec = rk.write_spec(tmp_path / "spec.json", steps=400, every=200)
    submitter = rk.Party("submitter", "submitter", 1)
    cheater = rk.Party("solver-cheat", "solver", 2, ["--stake", "100", "--cheat", CHEAT])
    honest = rk.Party("solver", "solver", 3, ["--stake", "200"])
    verifier = rk.Party("verifier", "verifier", 5, ["--stake", "100"])
    with rk.chain() as (url, w3):
        addrs = rk.deploy(w3, {"forcedErrorBps": 1, "verifyWindow": 300})
        rk.fund(w3, addrs["Token"], rk.dev_private_key(0), [submitter, cheater, honest, verifier])
        manager = rk.contract(w3, "JobManager", addrs["JobManager"])
        registry = rk.contract(w3, "NodeRegistry", addrs["NodeRegistry"])
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
                "the held win",
                lambda: bool(manager.events.DisputeResultHeld().get_logs(from_block=0)),
                240,
                ag,
                ("verifier", "submitter"),
            )
            (held,) = manager.events.DisputeResultHeld().get_logs(from_block=0)
            until = held["args"]["until"]
            assert manager.functions.getUnit(unit).call()[0] == 6  # still Disputed
            # nothing is settled before the slot ends; then the agents settle it
            assert not manager.events.DisputeResolved().get_logs(from_block=0)
            rk.jump_past(w3, until)
            rk.wait_for(
                "the settlement",
                lambda: bool(manager.events.DisputeResolved().get_logs(from_block=0)),
                60,
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
        assert resolved["args"]["gameId"] == held["args"]["gameId"]
        # applied by a settleDispute after the slot, sent by the winner or the submitter's keeper
        tx = w3.eth.get_transaction(resolved["transactionHash"])
        settle = manager.functions.settleDispute(unit)._encode_transaction_data()
        assert tx["to"] == manager.address and Web3.to_hex(tx["input"]) == settle
        assert tx["from"] in (verifier.address, submitter.address)
        assert w3.eth.get_block(resolved["blockNumber"])["timestamp"] > until
        (opened,) = manager.events.ChallengeOpened().get_logs(from_block=0)
        assert opened["args"]["challenger"] == verifier.address
        slashed = [e["args"]["node"] for e in registry.events.NodeSlashed().get_logs(from_block=0)]
        assert slashed == [cheater.address]
        (final,) = manager.events.UnitFinalized().get_logs(from_block=0)
        assert final["args"]["solver"] == honest.address
        assert manager.functions.getUnit(unit).call()[10] == 1  # the second attempt
