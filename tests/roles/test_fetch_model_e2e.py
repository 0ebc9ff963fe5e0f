"""`job fetch` of a version-3 job (issue #28 item 2): a small CNN built by `job build` from
examples/models/digits_cnn.py is posted with `submit` and trained by a solver, checked by a
verifier; `job fetch` writes weights whose state root is the chain's, which load strictly into
the plain PyTorch module and score the test accuracy fetch printed; a tampered final checkpoint
is refused (exit 2, one line, nothing written), as is a job that does not exist."""

from __future__ import annotations

import json

import pytest
import rolekit as rk
import torch
from safetensors.torch import load_file

from agents.__main__ import main
from agents.cli.job import load_factory
from agents.core.blobs import open_blob_store
from agents.data import builtin
from agents.roles.artifacts import CheckpointReader
from agents.roles.runtime import model_runtime_from_files
from agents.training.spec import load as load_spec

pytestmark = [pytest.mark.timeout(400), pytest.mark.slow]

JOB = 1
CNN = rk.REPO / "examples" / "models" / "digits_cnn.py"


def build_cnn(tmp, steps: int = 80, every: int = 40):
    """The CNN's spec (its blobs beside it, where `submit` reads them)."""
    spec = tmp / "cnn.json"
    assert main(["job", "build", "--model", f"{CNN}:make_model", "--dataset",
                 "sklearn-digits/train", "--optimizer", "sgd", "--lr", "0.05", "--momentum",
                 "0.9", "--batch", "32", "--steps", str(steps), "--checkpoint-every", str(every),
                 "--seed", "1", "--out", str(spec), "--json"]) == 0  # fmt: skip
    return spec


@pytest.fixture(scope="module")
def completed(tmp_path_factory):
    """A chain on which `submit` posted the CNN's job 1 and followed it to completion; yields
    (tmp dir, spec file, deployment file, JobRead)."""
    tmp = tmp_path_factory.mktemp("fetch")
    spec = build_cnn(tmp)
    submitter = rk.Party("submitter", "submit", 1)
    solver = rk.Party("solver", "solver", 2, ["--stake", "200"])
    verifier = rk.Party("verifier", "verifier", 5, ["--stake", "100"])
    with rk.chain() as (url, w3):
        addrs = rk.deploy(w3)
        rk.fund(w3, addrs["Token"], rk.dev_private_key(0), [submitter, solver, verifier])
        deployment = tmp / "deployment.json"
        deployment.write_text(json.dumps({"format": "vtp.deployment.v1", "rpc_url": url,
                                          "block": 0, "contracts": addrs}))  # fmt: skip
        registry = rk.contract(w3, "NodeRegistry", addrs["NodeRegistry"])
        with rk.agents(tmp, url, addrs["JobManager"]) as ag, rk.Warp(url, addrs, claimants=1):
            ag.start(solver)
            ag.start(verifier)
            rk.wait_registered(registry, ag, [solver, verifier])
            ag.start(submitter, "--spec", str(spec), "--claim-window", "8",
                     "--deployment", str(deployment))  # fmt: skip
            rk.wait_job_completed(ag, 300, ("solver", "verifier"))
        yield tmp, spec, deployment, rk.read_job(url, addrs["JobManager"], JOB)


def _fetch(capsys, deployment, out, *extra, job=JOB):
    capsys.readouterr()
    code = main(["job", "fetch", str(job), "--deployment", str(deployment), "--out", str(out),
                 "--allow-local-locators", *extra])  # fmt: skip
    got = capsys.readouterr()
    return code, got.out, got.err


def _final_checkpoint(spec_path, reader):
    """(runtime, the final checkpoint's reader) from the spec's own blobs and the solver's
    commitment."""
    spec = load_spec(spec_path)
    rt = model_runtime_from_files(spec, [open_blob_store(str(spec_path.with_suffix(".blobs")))])
    c = reader.commitment
    return rt, CheckpointReader(rt, c.locator, c.published_root, local_ok=True)


def test_fetch_writes_the_chains_weights_which_load_in_the_plain_module(completed, capsys):
    tmp, spec, deployment, reader = completed
    out = tmp / "model.safetensors"
    code, stdout, err = _fetch(capsys, deployment, out)
    assert code == 0, err
    (line,) = stdout.strip().splitlines()
    assert "matches the chain; test accuracy 0." in line
    printed = float(line.rsplit(" ", 1)[1])
    code, stdout, err = _fetch(capsys, deployment, tmp / "again.safetensors", "--json")
    got = json.loads(stdout)
    assert got["state_root"] == "0x" + reader.facts.units[0].final_root.hex()
    assert round(got["test_accuracy"], 4) == printed
    # the weights are the parameters of the checkpoint whose root the chain holds
    rt, blobs = _final_checkpoint(spec, reader)
    final = blobs.state(blobs.checkpoints - 1)
    weights = load_file(str(out))
    for name, module_name in rt.job.bundle.params.items():
        assert torch.equal(weights[module_name], final[name]), module_name
    # ... and load, strictly, into the plain PyTorch module, scoring what fetch printed
    module = load_factory(f"{CNN}:make_model")()
    module.load_state_dict(weights, strict=True)
    test = builtin.test_split_for("sklearn-digits/train")
    with torch.no_grad():
        pred = module(test.x.reshape(-1, 1, 8, 8)).argmax(-1)
    accuracy = float((pred == test.y.reshape(-1)).double().mean())
    assert got["test_accuracy"] > 0.5
    assert abs(accuracy - got["test_accuracy"]) <= 1 / test.n  # torch's sums vs the protocol's


def test_fetch_refuses_a_tampered_final_checkpoint_and_writes_nothing(completed, capsys):
    tmp, spec, deployment, reader = completed
    _, blobs = _final_checkpoint(spec, reader)
    path = blobs.store.backend.path(blobs.manifest.states[-1])
    good = path.read_bytes()
    bad = bytearray(good)
    bad[len(bad) // 2] ^= 0x01
    out = tmp / "tampered.safetensors"
    try:
        path.write_bytes(bytes(bad))
        code, stdout, err = _fetch(capsys, deployment, out)
    finally:
        path.write_bytes(good)
    assert code == 2 and stdout == ""
    assert len(err.strip().splitlines()) == 1, err
    assert "the final checkpoint does not check against the chain" in err
    assert not out.exists()


def test_fetch_of_a_job_that_does_not_exist_is_one_line(completed, capsys):
    tmp, _, deployment, reader = completed
    out = tmp / "none.safetensors"
    code, stdout, err = _fetch(capsys, deployment, out, job=7)
    assert code == 2 and stdout == ""
    assert err.strip() == f"error: no job 7 on JobManager {reader.manager}"
    assert not out.exists()
