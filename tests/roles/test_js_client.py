"""Integration via the ABI: a JavaScript client (ethers, from npm) loads build/abi JSON, posts
a job on Anvil and reads its events; web3.py checks the chain agrees."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from agents.core.chain import AnvilConfig, connect, dev_private_key, local_anvil
from agents.core.deploy import DEFAULT_ABI_DIR, deploy_all, load_artifact
from agents.training import spec as specs
from agents.training.data import load_dataset
from agents.training.engine import Engine
from agents.training.state import state_root

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "tests" / "roles" / "js" / "post_job.mjs"


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_javascript_client_posts_a_job_and_reads_its_events(tmp_path):
    spec = specs.load(REPO / "examples" / "digits-mlp.json")
    data = load_dataset(spec.dataset_name)
    params = {
        "specHash": "0x" + spec.spec_hash().hex(),
        "datasetRoot": "0x" + data.root().hex(),
        "initialStateRoot": "0x" + state_root(Engine(spec, data).initial_state()).hex(),
        "steps": spec.steps,
        "checkpointInterval": spec.checkpoint_every,
        "reward": str(100 * 10**18),
        "verificationFee": str(10 * 10**18),
    }
    (tmp_path / "params.json").write_text(json.dumps(params))
    with local_anvil(AnvilConfig()) as url:
        w3 = connect(url)
        addrs = deploy_all(w3, dev_private_key(0), DEFAULT_ABI_DIR, {"mock_arbiter": True})
        (tmp_path / "deployment.json").write_text(json.dumps(addrs))
        proc = subprocess.run(
            [
                "node",
                str(SCRIPT),
                url,
                dev_private_key(3),
                str(tmp_path / "deployment.json"),
                str(tmp_path / "params.json"),
            ],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        out = json.loads(proc.stdout.strip().splitlines()[-1])
        manager = w3.eth.contract(
            address=addrs["JobManager"], abi=load_artifact("JobManager")["abi"]
        )
        job = manager.functions.getJob(int(out["jobId"])).call()
        receipt = w3.eth.get_transaction_receipt(out["txHash"])
    assert int(out["jobId"]) == 1
    assert receipt["status"] == 1
    names = [e["name"] for e in out["events"]]
    assert names == ["JobPosted", "UnitOpened"]
    posted = out["events"][0]["args"]
    assert posted["specHash"] == params["specHash"]
    assert posted["submitter"] == w3.eth.account.from_key(dev_private_key(3)).address
    assert out["events"][1]["args"]["unitId"] == str(1 << 32)
    assert "0x" + bytes(job[13]).hex() == params["specHash"]  # the chain agrees
    assert job[5] == 100 * 10**18 and job[1] == spec.steps
