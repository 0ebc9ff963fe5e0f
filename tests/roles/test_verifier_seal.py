"""The verifier's sealed attestation: its locally computed seal is the contract's `sealOf`, and
the salt and roots it seals are stored before the seal is sent and survive a restart."""

from __future__ import annotations

import os
import random

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
