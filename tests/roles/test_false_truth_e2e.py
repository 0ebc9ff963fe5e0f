"""A forced round whose solver seals a false truth (PROTOCOL §8.1), end to end with the agents.

Every round is forced; the solver (`--false-truth`) publishes its checkpoints with one perturbed,
as a forced round does, but the "true" list it seals is itself wrong at that checkpoint. So its
reveal judges the honest verifier — whose replay ends on the real state — WRONG, like the lazy
one. A WRONG verdict trusts the solver's C: the honest verifier's lock S is held, not slashed,
and the agent contests, challenging the revealed C with the root of its own full replay. The
solver cannot defend the false C in the game and loses on time; the unit re-opens, the solver
loses its collateral, and the honest verifier keeps its whole stake."""

from __future__ import annotations

import pytest
import rolekit as rk

pytestmark = pytest.mark.timeout(420)
TOKEN = 10**18
STAKE = 700


def test_a_false_sealed_truth_is_contested_and_the_wronged_verifier_keeps_its_stake(tmp_path):
    spec = rk.write_spec(tmp_path / "spec.json", steps=400, every=200)  # 2 segments
    submitter = rk.Party("submitter", "submitter", 1)
    solver = rk.Party("solver", "solver", 2, ["--stake", "200", "--false-truth"])
    honest = rk.Party("verifier", "verifier", 5, ["--stake", str(STAKE), "--replay-all"])
    lazy = rk.Party("verifier-lazy", "verifier", 6, ["--stake", str(STAKE), "--lazy"])
    with rk.chain() as (url, w3):
        cfg = {"forcedErrorBps": 10_000, "lazySlashFactor": 4, "verifiersPerUnit": 2}
        # game clocks: long enough for the reveal to void the game over the published root, short
        # so that the solver, which cannot move in the game over its false C, times out soon
        addrs = rk.deploy(w3, {**cfg, "verifyWindow": 90}, clock_budget=60)
        rk.fund(w3, addrs["Token"], rk.dev_private_key(0), [submitter, solver, honest, lazy])
        manager = rk.contract(w3, "JobManager", addrs["JobManager"])
        registry = rk.contract(w3, "NodeRegistry", addrs["NodeRegistry"])
        with rk.agents(tmp_path, url, addrs["JobManager"]) as ag:
            for p in (solver, honest, lazy):
                ag.start(p)
            rk.wait_registered(registry, ag, [solver, honest, lazy])
            # fee <= 2 % of the reward: the jackpot cap at forcedErrorBps = 10 000
            ag.start(
                submitter,
                *("--spec", str(spec), "--claim-window", "8", "--compute-time", "300"),
                *("--reward", "100", "--verification-fee", "2"),
            )
            names = ("solver", "verifier", "verifier-lazy")
            rk.wait_for(
                "the forced error's reveal",
                lambda: bool(manager.events.ForcedErrorRevealed().get_logs(from_block=0)),
                240,
                ag,
                names,
            )

            def overturned() -> bool:
                resolved = manager.events.DisputeResolved().get_logs(from_block=0)
                return any(e["args"]["challengerWon"] for e in resolved)

            rk.wait_for("the contest of the revealed root", overturned, 150, ag, names)
            assert any("FALSE TRUTH" in m for m in ag.messages("solver"))

        (revealed,) = manager.events.ForcedErrorRevealed().get_logs(from_block=0)
        unit = revealed["args"]["unitId"]
        # both verifiers were judged WRONG: the lazy one copied P, the honest one replayed the
        # real state, which the false C does not hold
        judged = manager.events.AttestationJudgedWrong().get_logs(from_block=0)
        assert sorted(e["args"]["verifier"] for e in judged) == sorted(
            [honest.address, lazy.address]
        )
        # the honest verifier challenged twice: the published root (voided by the reveal), then
        # the revealed C, which it won
        opened = manager.events.ChallengeOpened().get_logs(from_block=0)
        assert [e["args"]["challenger"] for e in opened] == [honest.address] * 2
        assert opened[1]["blockNumber"] > revealed["blockNumber"]
        (won,) = [
            e for e in manager.events.DisputeResolved().get_logs(from_block=0)
            if e["args"]["challengerWon"]
        ]  # fmt: skip
        assert won["args"]["gameId"] == opened[1]["args"]["gameId"]
        # at that ruling the unit re-opened: the honest verifier's stake is whole and unlocked,
        # nobody was penalised for this attempt, and the solver lost its collateral
        at = won["blockNumber"]
        node = registry.functions.getNode(honest.address).call(block_identifier=at)
        assert node[8] == STAKE * TOKEN and node[9] == 0  # stake, locked
        assert not manager.events.VerifierPenalised().get_logs(from_block=0, to_block=at)
        slashed = registry.events.NodeSlashed().get_logs(from_block=0, to_block=at)
        assert [e["args"]["node"] for e in slashed] == [solver.address]
        assert manager.functions.getUnit(unit).call(block_identifier=at)[0] == 1  # Open
