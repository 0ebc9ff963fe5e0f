"""The verifier's sealed attestation: its locally computed seal is the contract's `sealOf`, the
salt and roots it seals are stored before the seal is sent and survive a restart, and a verifier
killed -9 after sealing opens its seal once restarted (another drawn verifier stays silent, so
the seal cannot be opened before the challenge window closes: the kill always lands in time)."""

from __future__ import annotations

import os
import random

import pytest
import rolekit as rk

from agents.core.store import Store
from agents.roles.verifier import seal_of, sealed_attestation


def test_local_seal_equals_the_contracts_sealOf():
    rng = random.Random(8)
    with rk.chain() as (_, w3):
        addrs = rk.deploy(w3)
        manager = rk.contract(w3, "JobManager", addrs["JobManager"])
        for n in (0, 1, 3):
            unit_id = (rng.randrange(1, 2**64) << 32) | rng.randrange(2**32)
            attempt = rng.randrange(2**32)
            verifier = w3.to_checksum_address("0x" + os.urandom(20).hex())
            roots = [os.urandom(32) for _ in range(n)]
            salt = os.urandom(32)
            chain = manager.functions.sealOf(unit_id, attempt, verifier, roots, salt).call()
            assert bytes(chain) == seal_of(unit_id, attempt, verifier, roots, salt)
        # every input is bound: another attempt, verifier, root or salt gives another seal
        v = w3.to_checksum_address("0x" + "11" * 20)
        base = seal_of(5, 1, v, [b"\1" * 32], b"\2" * 32)
        assert base != seal_of(5, 2, v, [b"\1" * 32], b"\2" * 32)
        assert base != seal_of(5, 1, "0x" + "12" * 20, [b"\1" * 32], b"\2" * 32)
        assert base != seal_of(5, 1, v, [b"\3" * 32], b"\2" * 32)
        assert base != seal_of(5, 1, v, [b"\1" * 32], b"\3" * 32)


def test_sealed_attestation_keeps_its_salt_and_roots_across_a_restart(tmp_path):
    me = "0x" + "11" * 20
    path = tmp_path / "agent.sqlite"
    roots = [b"\1" * 32, b"\2" * 32]
    store = Store(path)
    first = sealed_attestation(store, 9 << 32, 0, me, roots)
    assert first[0] == roots and len(first[1]) == 32
    assert first[2] == seal_of(9 << 32, 0, me, roots, first[1])
    store.close()
    # restarted (the same data folder): the same roots, salt and seal, whatever it passes now
    store = Store(path)
    assert sealed_attestation(store, 9 << 32, 0, me, [b"\3" * 32]) == first
    # another attempt draws another salt
    other = sealed_attestation(store, 9 << 32, 1, me, roots)
    assert other[1] != first[1] and other[2] != first[2]
    store.close()


@pytest.mark.timeout(300)
def test_verifier_killed_after_sealing_opens_its_seal_once_restarted(tmp_path):
    spec = rk.write_spec(tmp_path / "spec.json", steps=400, every=200)
    submitter = rk.Party("submitter", "submitter", 1)
    solver = rk.Party("solver", "solver", 2, ["--stake", "200"])
    verifier = rk.Party("verifier", "verifier", 5, ["--stake", "100"])
    silent = rk.Party("silent", "verifier", 6, ["--stake", "100"])
    with rk.chain() as (url, w3):
        # a longer window than the kit's 25 s: the verifier loads the job, replays 400 steps and
        # keeps its start states before it seals, and the CI runs three suites on two cores
        addrs = rk.deploy(w3, {"verifiersPerUnit": 2, "verifyWindow": 45})
        rk.fund(w3, addrs["Token"], rk.dev_private_key(0), [submitter, solver, verifier, silent])
        manager = rk.contract(w3, "JobManager", addrs["JobManager"])
        registry = rk.contract(w3, "NodeRegistry", addrs["NodeRegistry"])

        def sealed() -> list:
            return manager.events.AttestationSealed().get_logs(from_block=0)

        with rk.agents(tmp_path, url, addrs["JobManager"]) as ag:
            for p in (solver, verifier, silent):
                ag.start(p)
            rk.wait_registered(registry, ag, [solver, verifier, silent])
            # registered, staked and online (heartbeatTtl 1 h): drawn, but it never seals
            ag.kill9("silent")
            ag.start(submitter, "--spec", str(spec), "--claim-window", "8", "--compute-time", "300")
            rk.wait_for("the verifier's seal", lambda: bool(sealed()), 150, ag, ("verifier",))
            ag.kill9("verifier")
            (seal,) = sealed()
            unit = int(seal["args"]["unitId"])
            assert manager.functions.getUnit(unit).call()[0] == 5  # Verifying: window still open
            assert manager.events.Attested().get_logs(from_block=0) == []  # killed before opening
            ag.start(verifier)
            rk.wait_job_completed(ag, 150)

        # the restarted verifier opened its seal (the stored roots and salt) after the window
        (opened,) = manager.events.Attested().get_logs(from_block=0)
        assert opened["args"]["verifier"] == verifier.address
        drawn = manager.events.VerifiersDrawn().get_logs(from_block=0)[-1]["args"]
        opened_at = w3.eth.get_block(opened["blockNumber"])["timestamp"]
        assert opened_at > drawn["challengeDeadline"]
        attempt = manager.functions.getUnit(unit).call()[10]
        ends = list(opened["args"]["endRoots"])
        salt = _salt(tmp_path, unit, attempt)
        assert seal["args"]["seal"] == seal_of(unit, attempt, verifier.address, ends, salt)
        # paid the fee; the silent one penalised; nothing sent twice
        (penalised,) = manager.events.VerifierPenalised().get_logs(from_block=0)
        assert penalised["args"]["verifier"] == silent.address
        (final,) = manager.events.UnitFinalized().get_logs(from_block=0)
        credited = manager.events.Credited().get_logs(
            from_block=final["blockNumber"], argument_filters={"account": verifier.address}
        )
        assert credited and credited[0]["args"]["amount"] > 0
        from tools.devnet import audit_sends

        assert audit_sends(w3, 0, {verifier.address: tmp_path / "verifier"}) == []


def _salt(run_dir, unit: int, attempt: int) -> bytes:
    """The salt the verifier stored in its data folder."""
    store = Store(run_dir / "verifier" / "agent.db")
    try:
        salt = store.get_secret(f"seal-salt:{unit}:{attempt}")
    finally:
        store.close()
    assert salt is not None
    return salt
