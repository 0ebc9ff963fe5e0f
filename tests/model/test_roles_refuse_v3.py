"""What the roles refuse of a version-3 job, each with one JobRejected line (never an agent
crash): a decomposed one posted as one job manager job (rounds x shards: it runs only as a
round manager's unit jobs, tests/roles/test_model_units.py), and one whose model bundle or
initial state is in no blob store they read. A plain version-3 spec is fetched like any other
(tests/roles/test_model_dispute_e2e.py runs one end to end)."""

from __future__ import annotations

import pytest

from agents.core.blobs import open_blob_store
from agents.roles.jobs import JobRejected, fetch_spec
from agents.roles.runtime import ChainJob, job_runtime
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


def _chain(spec) -> ChainJob:
    return ChainJob(spec.steps, spec.checkpoint_every, bytes.fromhex("33" * 32), b"\x22" * 32)


def _published(tmp_path, obj):
    spec = specs.parse_spec(obj)
    store = open_blob_store(str(tmp_path))
    store.put(spec.canonical_bytes())
    return spec, store


def test_a_version_3_spec_is_fetched(tmp_path):
    spec, store = _published(tmp_path, V3)
    assert fetch_spec(spec.spec_hash(), [store], "job 7") == spec


def test_a_decomposed_version_3_job_outside_a_round_manager_is_refused(tmp_path):
    obj = V3 | {
        "rounds": 2,
        "shards": 2,
        "local_steps": 2,
        "outer": {"kind": "average"},
        "aggregate": "0x" + "ab" * 32,
    }
    spec, store = _published(tmp_path, obj)
    with pytest.raises(JobRejected, match=r"job 7: .* \(2 rounds x 2 shards\) runs only as a"):
        job_runtime(spec, _chain(spec), [store], "job 7", 1 << 20, None)


def test_a_version_3_job_without_its_model_bundle_is_refused(tmp_path):
    spec, store = _published(tmp_path, V3)
    with pytest.raises(JobRejected, match="job 7: model bundle 0x1111.* not found in any blob"):
        job_runtime(spec, _chain(spec), [store], "job 7", 1 << 20, None)
