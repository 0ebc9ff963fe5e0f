"""A version-3 job as the roles load it (agents/roles/runtime.py), no chain: the digits CNN's spec,
bundle and S_0 published in a blob store and a getJob tuple that matches them.

- load_job gives a ModelRuntime whose dispute config is the one model_job_graph derives (what the
  submitter registers), and its claim account walks the same roots as its own training steps;
- each mismatch with the chain or the roles' limits is one JobRejected line: the initial state
  root, the registered config, --max-params (checked on the bundle: a version-3 spec carries no
  widths), a missing S_0;
- a state blob of the wrong size is a BadBlob (the solver's data, never an agent error).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from rolefakes import decoded

from agents.__main__ import main
from agents.core.blobs import open_blob_store
from agents.roles.artifacts import BadBlob
from agents.roles.jobs import JobRejected, load_job
from agents.roles.runtime import ModelRuntime
from agents.training import spec as specs

MODEL = Path(__file__).resolve().parents[2] / "examples" / "models" / "digits_cnn.py"


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    """(spec, the store holding it with its bundle and S_0, the chain's job tuple)."""
    tmp = tmp_path_factory.mktemp("cnn")
    out = tmp / "cnn.json"
    argv = ["job", "build", "--model", f"{MODEL}:make_model", "--dataset", "sklearn-digits/train",
            "--optimizer", "sgd", "--lr", "0.05", "--momentum", "0.9", "--batch", "4", "--steps",
            "4", "--checkpoint-every", "2", "--seed", "3", "--out", str(out)]  # fmt: skip
    assert main(argv) == 0
    spec = specs.load(out)
    store = open_blob_store(str(out.with_suffix(".blobs")))
    store.put(spec.canonical_bytes())
    job = [0] * 17
    job[1], job[10], job[13] = spec.steps, spec.checkpoint_every, spec.spec_hash()
    job[14], job[15] = bytes.fromhex(spec.dataset_root[2:]), bytes.fromhex(spec.state[2:])
    return spec, store, decoded("getJob", tuple(job))


def test_a_version_3_job_loads_with_its_config_and_replays_its_own_roots(published):
    spec, store, job = published
    ctx = load_job(7, job, [store], None)
    rt = ctx.runtime
    assert isinstance(rt, ModelRuntime) and ctx.spec == spec
    assert load_job(7, job, [store], rt.jg.config.hash()).jg.config == rt.jg.config
    st, roots = rt.initial_state(), [rt.state_root(rt.initial_state())]
    for t in range(spec.steps):
        st = rt.step(st, t)
        if (t + 1) % spec.checkpoint_every == 0:
            roots.append(rt.state_root(st))
    assert rt.computation(spec.steps, spec.checkpoint_every).checkpoint_roots() == roots
    assert rt.decode_state(rt.encode_state(st)).keys() == st.keys()
    assert rt.state_root(rt.decode_state(rt.encode_state(st))) == roots[-1]


def test_what_does_not_match_the_chain_or_my_limits_is_refused_in_one_line(published, tmp_path):
    spec, store, job = published
    wrong_s0 = job._replace(initialStateRoot=b"\x01" * 32)
    with pytest.raises(JobRejected, match="job 7: initial state root differs from the chain's"):
        load_job(7, wrong_s0, [store], None)
    with pytest.raises(JobRejected, match="job 7: registered dispute config 0x0101"):
        load_job(7, job, [store], b"\x01" * 32)
    n = load_job(7, job, [store], None).runtime.n_params
    with pytest.raises(JobRejected, match=f"job 7: the model has {n} parameters, over --max-p"):
        load_job(7, job, [store], None, max_params=n - 1)
    bare = open_blob_store(str(tmp_path / "bare"))  # the spec and bundle, not S_0
    bare.put(spec.canonical_bytes())
    bare.put(store.get(spec.graph))
    with pytest.raises(JobRejected, match=f"job 7: initial state {spec.state} not found"):
        load_job(7, job, [bare], None)


def test_a_state_blob_of_the_wrong_size_is_a_bad_blob(published):
    _, store, job = published
    rt = load_job(7, job, [store], None).runtime
    blob = rt.encode_state(rt.initial_state())
    for wrong in (blob[:-4], blob + b"\x00" * 4):
        with pytest.raises(BadBlob):
            rt.decode_state(wrong)


def test_a_role_keeps_the_spec_bundle_and_s0_so_its_store_alone_loads_the_job(published, tmp_path):
    # what `job fetch` reads from the store a solver's commitment names, the submitter's gone
    import logging

    from agents.roles.jobs import keep_job

    spec, store, job = published
    ctx = load_job(7, job, [store], None)
    mine = open_blob_store(str(tmp_path / "mine"))
    with pytest.raises(JobRejected, match="not found in any blob store"):
        load_job(7, job, [mine], None)
    keep_job(ctx, mine, logging.getLogger("test"))
    again = load_job(7, job, [mine], None).runtime
    assert again.job.bundle.hash() == ctx.runtime.job.bundle.hash()
    assert again.state_root(again.initial_state()) == bytes.fromhex(spec.state[2:])
    keep_job(ctx, mine, logging.getLogger("test"))  # a second load writes nothing new
    assert sum(1 for p in (tmp_path / "mine").rglob("*") if p.is_file()) == 3
