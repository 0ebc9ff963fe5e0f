"""Agents survive kill -9: the solver is killed during training and again during a dispute,
restarted on the same data folder, and the job still completes, the solver wins its honest
dispute against a lying challenger, and the chain's history shows no transaction sent twice.
The whistleblower is killed in the middle of an attestation-court case and wins it once
restarted, again sending nothing twice (its job's submitter registered the dispute config only
with the job manager's game: the court copied it to its own)."""

from __future__ import annotations

from collections import Counter

import pytest
import rolekit as rk

from agents.core.chain import free_port

pytestmark = pytest.mark.timeout(420)


def test_solver_killed_in_training_and_in_dispute_resumes_and_wins(tmp_path):
    spec = rk.write_spec(tmp_path / "spec.json", steps=8000, every=800)
    submitter = rk.Party("submitter", "submitter", 1)
    # the solver serves its checkpoints over HTTP (same port across restarts)
    serve = f"127.0.0.1:{free_port()}"
    solver = rk.Party("solver", "solver", 2, ["--stake", "200", "--serve-blobs", serve])
    liar = rk.Party("liar", "verifier", 5, ["--stake", "100", "--cheat-challenge"])
    with rk.chain() as (url, w3):
        addrs = rk.deploy(w3, {"verifyWindow": 40})
        rk.fund(w3, addrs["Token"], rk.dev_private_key(0), [submitter, solver, liar])
        manager = rk.contract(w3, "JobManager", addrs["JobManager"])
        game = rk.contract(w3, "DisputeGame", addrs["DisputeGame"])
        registry = rk.contract(w3, "NodeRegistry", addrs["NodeRegistry"])
        # the windows' waits after everyone acted (the one solver claimed, the liar challenged
        # and lost) are skipped on chain (rk.Warp)
        with rk.agents(tmp_path, url, addrs["JobManager"]) as ag, rk.Warp(url, addrs, claimants=1):
            ag.start(solver)
            ag.start(liar)
            rk.wait_registered(registry, ag, [solver, liar])
            ag.start(submitter, "--spec", str(spec), "--claim-window", "8", "--compute-time", "300")
            blobs = tmp_path / "blobs"
            # 1. kill -9 during training: after the 2nd of 11 checkpoints is published
            rk.wait_for("training", lambda: rk.count_files(blobs) >= 3, 120, ag, ("solver",))
            ag.kill9("solver")
            published = rk.count_files(blobs)
            assert published < 12, "training finished before the kill"
            ag.start(solver)
            rk.wait_for(
                "resumed training",
                lambda: any(m.startswith("resuming unit") for m in ag.messages("solver")),
                60,
                ag,
                ("solver",),
            )
            # 2. kill -9 during the dispute: after the solver's first move
            rk.wait_for(
                "a dispute with a move",
                lambda: (
                    game.functions.gameCount().call() >= 1
                    and game.functions.progressOf(1).call()[2] >= 2
                ),
                150,
                ag,
                ("solver", "liar"),
            )
            ag.kill9("solver")
            ag.start(solver)
            rk.wait_job_completed(ag, 200, ("solver",))

        resolved = game.events.GameResolved().get_logs(from_block=0)
        assert len(resolved) == 1
        assert resolved[0]["args"]["challengerWon"] is False  # the honest solver won
        assert resolved[0]["args"]["byTimeout"] is False
        job = manager.functions.getJob(1).call()
        committed = manager.events.CheckpointsCommitted().get_logs(from_block=0)
        assert committed[-1]["args"]["blobLocator"].startswith(f"http://{serve}#0x")
        assert job[4] == 2  # Completed
        slashed = registry.events.NodeSlashed().get_logs(from_block=0)
        assert [e["args"]["node"] for e in slashed] == []  # the liar lost only its bond
        # No transaction sent twice: every successful call of the solver is distinct, except
        # withdraw() (same calldata, different credits) which must add up to what was credited.
        # ... and every mined transaction is the one recorded for exactly one intent
        from tools.devnet import audit_sends

        assert audit_sends(w3, 0, {solver.address: tmp_path / "solver"}) == []
        calls = rk.successful_calls(w3, solver.address)
        withdraw = manager.functions.withdraw()._encode_transaction_data()[2:]
        repeated = [c for c, n in Counter(calls).items() if n > 1 and c[1] != withdraw]
        assert repeated == [], repeated
        commit_sel = manager.functions.commitCheckpoints(
            0, b"\0" * 32, 0, b"\0" * 32, [], "x", b"\0" * 32
        )
        commit_sel = commit_sel._encode_transaction_data()[2:10]
        assert sum(1 for _, data in calls if data.startswith(commit_sel)) == 1
        credited = sum(
            e["args"]["amount"]
            for e in manager.events.Credited().get_logs(
                from_block=0, argument_filters={"account": solver.address}
            )
        )
        withdrawn = sum(
            e["args"]["amount"]
            for e in manager.events.Withdrawn().get_logs(
                from_block=0, argument_filters={"account": solver.address}
            )
        )
        assert credited > 0 and withdrawn <= credited
        assert manager.functions.credits(solver.address).call() == credited - withdrawn


def test_whistleblower_killed_in_a_court_case_resumes_and_wins_it(tmp_path):
    """The whistleblower is killed -9 once its court challenge of a lazy verifier's false
    attestation is mined (the game still running: the verifier's clock has 15 s), restarted on
    the same data folder: it claims the game on the verifier's timeout, the verifier is slashed,
    the whistleblower withdraws its court credit, and it sent nothing twice."""
    spec = rk.write_spec(tmp_path / "spec.json", steps=4000, every=400)
    submitter = rk.Party("submitter", "submitter", 1)
    solver = rk.Party("solver", "solver", 2, ["--stake", "200"])
    lazy = rk.Party("lazy", "verifier", 6, ["--stake", "100", "--lazy"])
    whistleblower = rk.Party("whistleblower", "whistleblower", 7, ["--stake", "20"])
    with rk.chain() as (url, w3):
        addrs = rk.deploy(w3, {"verifyWindow": 40}, court_clock_budget=15)
        rk.fund(w3, addrs["Token"], rk.dev_private_key(0), [submitter, solver, lazy, whistleblower])
        court = rk.contract(w3, "AttestationCourt", addrs["AttestationCourt"])
        registry = rk.contract(w3, "NodeRegistry", addrs["NodeRegistry"])
        with rk.agents(tmp_path, url, addrs["JobManager"]) as ag:
            ag.start(solver)
            ag.start(lazy)
            ag.start(whistleblower, "--court", court.address)
            rk.wait_registered(registry, ag, [solver, lazy, whistleblower])
            # the submitter knows only the job manager's game (no --court): the court copies the
            # job's dispute config from there when the whistleblower challenges
            ag.start(submitter, "--spec", str(spec), "--claim-window", "8", "--compute-time", "300")
            rk.wait_for(
                "the court challenge",
                lambda: court.events.AttestationChallenged().get_logs(from_block=0) != [],
                180,
                ag,
                ("whistleblower",),
            )
            ag.kill9("whistleblower")
            assert court.events.AttestationRuled().get_logs(from_block=0) == [], "game over"
            ag.start(whistleblower, "--court", court.address)
            rk.wait_for(
                "the ruling and the whistleblower's withdrawal",
                lambda: court.events.Withdrawn().get_logs(from_block=0) != [],
                120,
                ag,
                ("whistleblower",),
            )
            rk.wait_job_completed(ag, 120, ("solver",))

        game = rk.contract(w3, "DisputeGame", court.functions.game().call())
        registered = game.events.ConfigRegistered().get_logs(from_block=0)
        assert [e["args"]["registrant"] for e in registered] == [court.address]
        challenged = court.events.AttestationChallenged().get_logs(from_block=0)
        assert len(challenged) == 1  # the restarted whistleblower did not challenge again
        assert challenged[0]["args"]["verifier"] == lazy.address
        ruled = court.events.AttestationRuled().get_logs(from_block=0)
        assert [(e["args"]["verifier"], e["args"]["falseAttestation"]) for e in ruled] == [
            (lazy.address, True)
        ]
        slashed = registry.events.NodeSlashed().get_logs(from_block=0)
        assert [e["args"]["node"] for e in slashed] == [lazy.address]
        withdrawn = court.events.Withdrawn().get_logs(from_block=0)
        assert [e["args"]["account"] for e in withdrawn] == [whistleblower.address]
        assert court.functions.credits(whistleblower.address).call() == 0
        from tools.devnet import audit_sends

        assert audit_sends(w3, 0, {whistleblower.address: tmp_path / "whistleblower"}) == []
