"""agents.core.deploy.deploy_all: deploys, wires and reports clear errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from eth_account import Account
from test_invariants import _export_artifacts, _keys

from agents.core.deploy import DEFAULT_MANAGER_CONFIG, DeploymentError, deploy_all


@pytest.fixture(scope="module")
def abi_dir(project, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("abi")
    _export_artifacts(project, out)
    return out


def _contract(w3, abi_dir: Path, name: str, address: str):
    abi = json.loads((abi_dir / f"{name}.json").read_text())["abi"]
    return w3.eth.contract(address=address, abi=abi)


def test_deployAll_wiresEverything(chain, abi_dir):
    w3 = chain.provider.web3
    key = _keys()[0]
    out = deploy_all(w3, key, abi_dir, {"mock_arbiter": True, "manager_config": {"taxBps": 300}})
    assert set(out) == {
        "TestToken",
        "Token",
        "NodeRegistry",
        "JobManager",
        "JobManagerExtension",
        "MockArbiter",
        "Arbiter",
        "JobLens",
    }
    registry = _contract(w3, abi_dir, "NodeRegistry", out["NodeRegistry"])
    manager = _contract(w3, abi_dir, "JobManager", out["JobManager"])
    arbiter = _contract(w3, abi_dir, "MockArbiter", out["MockArbiter"])
    assert registry.functions.token().call() == out["Token"]
    assert registry.functions.isSlasher(out["JobManager"]).call()
    assert manager.functions.registry().call() == out["NodeRegistry"]
    assert manager.functions.arbiter().call() == out["MockArbiter"]
    # the rare paths run on the manager's storage from the extension deployed for it
    assert manager.functions.extension().call() == out["JobManagerExtension"]
    assert arbiter.functions.jobManager().call() == out["JobManager"]
    lens = _contract(w3, abi_dir, "JobLens", out["JobLens"])
    assert lens.functions.manager().call() == out["JobManager"]
    config = manager.functions.config().call()
    assert config[3] == 300 and config[0] == DEFAULT_MANAGER_CONFIG["claimWindow"]


def test_deployAll_givenTokenAndArbiter(chain, abi_dir):
    w3 = chain.provider.web3
    key = _keys()[0]
    first = deploy_all(w3, key, abi_dir)
    assert "Arbiter" not in first and "MockArbiter" not in first
    other = Account.from_key(_keys()[9]).address
    second = deploy_all(w3, key, abi_dir, {"token": first["Token"], "arbiter": other})
    assert second["Token"] == first["Token"] and "TestToken" not in second
    manager = _contract(w3, abi_dir, "JobManager", second["JobManager"])
    assert manager.functions.arbiter().call() == other


def test_deployAll_unknownConfigField_raises(chain, abi_dir):
    with pytest.raises(DeploymentError, match="unknown config field 'bogus'"):
        deploy_all(chain.provider.web3, _keys()[0], abi_dir, {"manager_config": {"bogus": 1}})


def test_deployAll_tokenWithoutCode_raises(chain, abi_dir):
    stranger = Account.from_key(_keys()[9]).address
    with pytest.raises(DeploymentError, match="no contract"):
        deploy_all(chain.provider.web3, _keys()[0], abi_dir, {"token": stranger})


def test_deployAll_invalidConfig_namesStep(chain, abi_dir):
    with pytest.raises(DeploymentError, match="JobManager"):
        deploy_all(chain.provider.web3, _keys()[0], abi_dir, {"manager_config": {"taxBps": 10_000}})
