"""A running verifier whose checkpoints fail their root check, or are never published, logs an
error and falls back at once to its own replay from step 0 (no hang, no crash, never the bad
data): it attests the roots it computed and the job completes. The submitter, which cannot read
the final checkpoint either, requests it (PROTOCOL §6.11): the solver proves it holds it, and the
verifier, which holds it from its own replay, serves it, where the submitter reads it."""

from __future__ import annotations

import shutil

import pytest
import rolekit as rk

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]


def _copy_blobs(src, dst, corrupt: bool) -> int:
    """Copy every blob; with `corrupt`, flip a byte of each state blob (the large ones)."""
    n = 0
    for path in src.rglob("*"):
        if not path.is_file():
            continue
        target = dst / path.relative_to(src)
        target.parent.mkdir(parents=True, exist_ok=True)
        data = bytearray(path.read_bytes())
        if corrupt and len(data) > 4096:
            data[len(data) // 2] ^= 0x01
            n += 1
        target.write_bytes(bytes(data))
    return n


def test_verifier_refuses_corrupt_blobs_and_attests_from_its_own_replay(tmp_path):
    published = tmp_path / "published"  # where the solver says its checkpoints are
    submitter = rk.Party("submitter", "submitter", 1)
    solver = rk.Party(
        "solver", "solver", 2, ["--stake", "200", "--public-blob-url", str(published)]
    )
    verifier = rk.Party("verifier", "verifier", 5, ["--stake", "100"])
    with rk.chain() as (url, w3):
        addrs = rk.deploy(w3, {"verifyWindow": 60})
        rk.fund(w3, addrs["Token"], rk.dev_private_key(0), [submitter, solver, verifier])
        manager = rk.contract(w3, "JobManager", addrs["JobManager"])
        registry = rk.contract(w3, "NodeRegistry", addrs["NodeRegistry"])
        committed = manager.events.CheckpointsCommitted()
        # one solver and the only verifier: the claim window's and the challenge window's
        # waits after everyone acted are skipped on chain (rk.Warp)
        with rk.agents(tmp_path, url, addrs["JobManager"]) as ag, rk.Warp(url, addrs, claimants=1):
            ag.start(solver)
            ag.start(verifier)
            rk.wait_registered(registry, ag, [solver, verifier])
            ag.start(submitter, "--spec", str(rk.SPEC), "--claim-window", "8")

            def logged(text: str) -> bool:
                return any(text in m for m in ag.messages("verifier"))

            # corrupt state blobs where the locator points, published as the commitment lands
            # (the verifiers are drawn a block later, and only then read)
            rk.wait_for(
                "the commitment", lambda: committed.get_logs(from_block=0), 120, ag, ("solver",)
            )
            assert _copy_blobs(tmp_path / "blobs", published, corrupt=True) >= 2
            # the root check fails, logged; the verifier replays the job itself and attests
            rk.wait_for("a failed root check", lambda: logged("is corrupt"), 60, ag, ("verifier",))
            rk.wait_job_completed(ag, 150, ("verifier", "solver"))
            assert logged("own replay matches the commitment")
            # the submitter could not read the final state either: it read a holder's copy
            assert "final state received from a holder" in ag.log("submitter")
        attested = manager.events.Attested().get_logs(from_block=0)
        assert [e["args"]["verifier"] for e in attested] == [verifier.address]
        assert manager.functions.getJob(1).call()[4] == 2  # Completed
        assert manager.events.VerifierPenalised().get_logs(from_block=0) == []
        assert "Traceback" not in ag.log("verifier")
    shutil.rmtree(published, ignore_errors=True)


def test_verifier_attests_from_own_replay_when_checkpoints_are_withheld(tmp_path):
    """A solver commits the right roots but never publishes its checkpoints: the verifier's own
    replay from step 0 matches the commitment, so it attests from it and is not penalised."""
    withheld = tmp_path / "withheld"  # the locator points here; nothing is ever written
    submitter = rk.Party("submitter", "submitter", 1)
    solver = rk.Party("solver", "solver", 2, ["--stake", "200", "--public-blob-url", str(withheld)])
    verifier = rk.Party("verifier", "verifier", 5, ["--stake", "100"])
    with rk.chain() as (url, w3):
        # the verifier's read of the missing data fails at once and it replays the job itself:
        # 40 s is ample for the 400-step replay and the attestation
        addrs = rk.deploy(w3, {"verifyWindow": 40})
        rk.fund(w3, addrs["Token"], rk.dev_private_key(0), [submitter, solver, verifier])
        manager = rk.contract(w3, "JobManager", addrs["JobManager"])
        registry = rk.contract(w3, "NodeRegistry", addrs["NodeRegistry"])
        # one solver and the only verifier: the claim window's and the challenge window's
        # waits after everyone acted are skipped on chain (rk.Warp)
        with rk.agents(tmp_path, url, addrs["JobManager"]) as ag, rk.Warp(url, addrs, claimants=1):
            ag.start(solver)
            ag.start(verifier)
            rk.wait_registered(registry, ag, [solver, verifier])
            ag.start(submitter, "--spec", str(rk.SPEC), "--claim-window", "8")
            rk.wait_for(
                "the job completed on chain",
                lambda: manager.functions.getJob(1).call()[4] == 2,
                240,
                ag,
                ("verifier", "solver"),
            )
            assert any("checkpoints withheld" in m for m in ag.messages("verifier"))
            # nor could the submitter read its final checkpoint: it requested it, and read it
            # from the verifier that holds it from its own replay
            rk.wait_for(
                "the submitter's model",
                lambda: "final state received from a holder" in ag.log("submitter"),
                60,
                ag,
                ("submitter",),
            )
        attested = manager.events.Attested().get_logs(from_block=0)
        assert [e["args"]["verifier"] for e in attested] == [verifier.address]
        assert manager.events.VerifierPenalised().get_logs(from_block=0) == []
        assert "Traceback" not in ag.log("verifier")
