"""Until version-3 operators have one-step proofs on chain, no role takes part in a version-3
job: a posted version-3 spec is refused with JobRejected (never an agent crash)."""

from __future__ import annotations

import pytest

from agents.core.blobs import open_blob_store
from agents.roles.jobs import JobRejected, fetch_spec
from agents.training import spec as specs

V3 = {
    "version": 3,
    "model": {"graph": "0x" + "11" * 32, "state": "0x" + "22" * 32},
    "dataset": {"name": "sklearn-digits/train", "root": "0x" + "33" * 32},
    "optimizer": {"kind": "sgd", "lr": "0x3d4ccccd", "momentum": "0x3f666666"},
    "batch": 8,
    "seed": 1,
    "steps": 4,
    "checkpoint_every": 2,
}


def test_a_version_3_spec_is_refused_by_every_role(tmp_path):
    spec = specs.parse_spec(V3)
    store = open_blob_store(str(tmp_path))
    store.put(spec.canonical_bytes())
    with pytest.raises(JobRejected, match="version-3"):
        fetch_spec(spec.spec_hash(), [store], "job 7")
