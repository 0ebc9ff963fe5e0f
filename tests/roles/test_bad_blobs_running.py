"""A running verifier whose checkpoints are missing, then fail their root check, logs an error
and retries (no hang, no crash); once the right data appears it attests and the job completes."""

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


def test_verifier_logs_and_retries_bad_blobs_then_attests(tmp_path):
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
        # one solver and the only verifier: the claim window's and the challenge window's
        # waits after everyone acted are skipped on chain (rk.Warp)
        with rk.agents(tmp_path, url, addrs["JobManager"]) as ag, rk.Warp(url, addrs, claimants=1):
            ag.start(solver)
            ag.start(verifier)
            rk.wait_registered(registry, ag, [solver, verifier])
            ag.start(submitter, "--spec", str(rk.SPEC), "--claim-window", "8")

            def logged(text: str) -> bool:
                return any(text in m for m in ag.messages("verifier"))

            # 1. nothing published where the locator points: an error, and the verifier retries
            rk.wait_for(
                "a missing-data error",
                lambda: logged("checkpoints unusable"),
                120,
                ag,
                ("verifier",),
            )
            # 2. corrupt state blobs: the root check fails, logged, retried
            assert _copy_blobs(tmp_path / "blobs", published, corrupt=True) >= 2
            rk.wait_for(
                "a failed root check", lambda: logged("failed its check"), 60, ag, ("verifier",)
            )
            assert ag.procs["verifier"].poll() is None  # still running
            # 3. the right data: it replays, attests, and the job completes
            _copy_blobs(tmp_path / "blobs", published, corrupt=False)
            rk.wait_job_completed(ag, 150, ("verifier", "solver"))
        attested = manager.events.Attested().get_logs(from_block=0)
        assert [e["args"]["verifier"] for e in attested] == [verifier.address]
        assert manager.functions.getJob(1).call()[4] == 2  # Completed
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
        # the verifier replays the job itself once half the window left at its first miss has
        # passed (data only late is fetched before then): 40 s leaves about 20 s for the
        # 400-step replay and the attestation
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
        attested = manager.events.Attested().get_logs(from_block=0)
        assert [e["args"]["verifier"] for e in attested] == [verifier.address]
        assert manager.events.VerifierPenalised().get_logs(from_block=0) == []
        assert "Traceback" not in ag.log("verifier")
