"""The submitter's path from the command line (issue #28 item 2): `submit` posts a small MLP job
and follows it (a solver and a verifier at work) until it completes; `job status` reads it from
chain; `job fetch` writes weights whose state root is the chain's and that load in plain
PyTorch with the reported test accuracy; a tampered checkpoint blob is refused (exit 2, one
line, nothing written)."""

from __future__ import annotations

import json

import pytest
import rolekit as rk
import torch
from safetensors.torch import load_file

from agents.__main__ import main
from agents.core.enums import JobStatus, UnitStatus
from agents.data import builtin
from agents.roles.artifacts import CheckpointReader
from agents.training.spec import load as load_spec

pytestmark = [pytest.mark.timeout(400), pytest.mark.slow]

JOB = 1


@pytest.fixture(scope="module")
def completed(tmp_path_factory):
    """A chain on which `submit` posted job 1 and followed it to completion; yields (tmp dir,
    deployment file, JobRead, submit's output)."""
    tmp = tmp_path_factory.mktemp("submit")
    spec = rk.write_spec(tmp / "spec.json", steps=120, every=40)
    submitter = rk.Party("submitter", "submit", 1)
    solver = rk.Party("solver", "solver", 2, ["--stake", "200"])
    verifier = rk.Party("verifier", "verifier", 5, ["--stake", "100"])
    with rk.chain() as (url, w3):
        addrs = rk.deploy(w3)
        rk.fund(w3, addrs["Token"], rk.dev_private_key(0), [submitter, solver, verifier])
        # what `deploy` writes, as far as the commands read it
        deployment = tmp / "deployment.json"
        deployment.write_text(json.dumps({"format": "vtp.deployment.v1", "rpc_url": url,
                                          "block": 0, "contracts": addrs}))  # fmt: skip
        registry = rk.contract(w3, "NodeRegistry", addrs["NodeRegistry"])
        # one solver and the only verifier: waits after everyone acted are skipped (rk.Warp)
        with rk.agents(tmp, url, addrs["JobManager"]) as ag, rk.Warp(url, addrs, claimants=1):
            ag.start(solver)
            ag.start(verifier)
            rk.wait_registered(registry, ag, [solver, verifier])
            ag.start(submitter, "--spec", str(spec), "--claim-window", "8",
                     "--deployment", str(deployment))  # fmt: skip
            rk.wait_job_completed(ag, 240, ("solver", "verifier"))
        yield tmp, deployment, rk.read_job(url, addrs["JobManager"], JOB), ag.log("submitter")


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_submit_follows_the_job_to_completion_with_its_view(completed):
    _, _, _, log = completed
    assert f"job {JOB} posted" in log
    views = [line for line in log.splitlines() if line.startswith(f"job {JOB}: ")]
    # the view was printed as the unit moved through its phases, the last one completed
    assert len(views) >= 3, log[-3000:]
    assert views[0].startswith(f"job {JOB}: open") and views[-1].startswith(f"job {JOB}: completed")
    assert "no disputes" in log and "finalized" in log


def test_job_status_reads_the_completed_job(completed, capsys):
    _, deployment, reader, _ = completed
    code, out, _ = _run(capsys, "job", "status", str(JOB), "--deployment", str(deployment),
                        "--json")  # fmt: skip
    assert code == 0
    got = json.loads(out)
    assert got["status"] == JobStatus.COMPLETED.name.lower()
    (unit,) = got["units"]
    assert unit["status"] == UnitStatus.FINALIZED.name.lower()
    assert unit["final_state_root"] == "0x" + reader.facts.units[0].final_root.hex()
    assert got["disputes"] == [] and got["escrow"] == 0
    code, out, _ = _run(capsys, "job", "status", str(JOB), "--deployment", str(deployment))
    assert code == 0 and out.startswith(f"job {JOB}: completed") and "finalized" in out
    code, _, err = _run(capsys, "job", "status", "99", "--deployment", str(deployment))
    assert code == 2 and err.strip() == f"error: no job 99 on JobManager {reader.manager}"


def _fetch(capsys, deployment, out, *extra):
    return _run(capsys, "job", "fetch", str(JOB), "--deployment", str(deployment), "--out",
                str(out), "--allow-local-locators", *extra)  # fmt: skip


def test_job_fetch_writes_checked_weights_that_load_in_plain_pytorch(completed, capsys):
    tmp, deployment, reader, _ = completed
    out = tmp / "model.safetensors"
    code, stdout, err = _fetch(capsys, deployment, out, "--json")
    assert code == 0, err
    got = json.loads(stdout)
    chain_root = reader.facts.units[0].final_root
    assert got["state_root"] == "0x" + chain_root.hex()
    # the weights are the parameters of the checkpoint whose root the chain holds
    c = reader.commitment
    spec = load_spec(tmp / "spec.json")
    final = CheckpointReader(spec, c.locator, c.published_root, local_ok=True).state(3)
    weights = load_file(str(out))
    assert torch.equal(weights["0.weight"], final["w0"])
    assert torch.equal(weights["2.bias"], final["b1"].reshape(-1))
    # ... and load, strictly, into the plain PyTorch MLP, scoring what fetch reported
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
    model.load_state_dict(weights)
    test = builtin.test_split_for(spec.dataset_name)
    with torch.no_grad():
        accuracy = float((model(test.x).argmax(1) == test.y.reshape(-1)).double().mean())
    assert got["test_accuracy"] > 0.5
    assert abs(accuracy - got["test_accuracy"]) <= 0.01  # torch's float sums vs the protocol's


def test_job_fetch_refuses_a_tampered_checkpoint_and_writes_nothing(completed, capsys):
    tmp, deployment, reader, _ = completed
    c = reader.commitment
    spec = load_spec(tmp / "spec.json")
    blobs = CheckpointReader(spec, c.locator, c.published_root, local_ok=True)
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


def test_submit_no_follow_posts_and_exits_and_status_shows_the_claim_window(tmp_path, capsys):
    spec = rk.write_spec(tmp_path / "spec.json", steps=120, every=40)
    submitter = rk.Party("submitter", "submit", 1)
    with rk.chain() as (url, w3):
        addrs = rk.deploy(w3)
        rk.fund(w3, addrs["Token"], rk.dev_private_key(0), [submitter])
        deployment = tmp_path / "deployment.json"
        deployment.write_text(json.dumps({"rpc_url": url, "contracts": addrs}))
        common = ["--deployment", str(deployment), "--rpc-url", url, "--key", "dev:1",
                  "--data-dir", str(tmp_path / "sub"), "--blob-url", str(tmp_path / "blobs"),
                  "--poll-interval", "0.2", "--no-progress", "--spec", str(spec)]  # fmt: skip
        code, out, err = _run(capsys, "submit", *common, "--reward", "0")
        assert code == 2 and len(err.strip().splitlines()) == 1 and "--reward" in err
        code, out, err = _run(capsys, "submit", *common, "--claim-window", "600", "--no-follow")
        assert code == 0, err
        assert out.startswith(f"job {JOB} posted: `python -m agents job status {JOB} ")
        manager = rk.contract(w3, "JobManager", addrs["JobManager"])
        game = rk.contract(w3, "DisputeGame", addrs["DisputeGame"])
        assert any(bytes(game.functions.configOf(JOB).call()))  # solvers can take it
        code, out, _ = _run(capsys, "job", "status", str(JOB), "--deployment", str(deployment),
                            "--json")  # fmt: skip
        got = json.loads(out)
        assert code == 0 and got["status"] == "open" and got["escrow"] == 10 * 10**18  # default
        (unit,) = got["units"]
        assert unit["status"] == "open" and unit["window"] == "claim window"
        assert unit["time_left"].endswith(" left")
        # a second submit of the same spec from the same data folder follows it, posts nothing
        code, out, _ = _run(capsys, "submit", *common, "--no-follow")
        assert code == 0 and out.startswith(f"job {JOB} posted")
        assert manager.functions.jobCount().call() == 1
        code, _, err = _run(capsys, "job", "fetch", str(JOB), "--deployment", str(deployment),
                            "--out", str(tmp_path / "m.safetensors"))  # fmt: skip
        assert code == 2 and err.strip() == f"error: job {JOB} is open: it has no final model"
