"""`python -m agents deploy` (agents/cli/deploy.py) on a private Anvil: the production set of
contracts wired and written where the roles read it; a re-run sends nothing; a run cut off at any
point (before a step's transaction left, or after it was mined but before its result was
recorded) is finished by running it again, without a step sent twice; bad input is one line,
exit 2, nothing sent."""

from __future__ import annotations

import json

import pytest
from eth_account import Account
from web3 import Web3

import agents.cli.deploy as cli
from agents.__main__ import main
from agents.core.chain import AnvilConfig, connect, dev_private_key, local_anvil
from agents.core.config import AgentConfig
from agents.core.deploy import load_artifact
from agents.roles.addresses import companion_address, manager_address
from agents.roles.config import RoleConfig

DEPLOYER = Account.from_key(dev_private_key(0)).address


class Crash(Exception):
    """The deployer process dying at a chosen point."""


def _deploy(url: str, out, *extra: str) -> int:
    return main(["deploy", "--rpc-url", url, "--key", "dev:0", "--out", str(out), *extra])


def _sent(w3: Web3) -> int:
    return w3.eth.get_transaction_count(DEPLOYER)


def test_deploy_wires_the_protocol_where_roles_read_it_and_a_rerun_sends_nothing(tmp_path, capsys):
    out = tmp_path / "deployment.json"
    with local_anvil(AnvilConfig()) as url:
        w3 = connect(url)
        assert _deploy(url, out) == 0
        record = json.loads(out.read_text())
        assert record["complete"] and record["format"] == cli.FORMAT
        contracts = record["contracts"]
        for name in ("Token", "NodeRegistry", "JobManager", "DisputeGame", "OneStepProver",
                     "AttestationCourt", "CourtGame", "RoundManager"):  # fmt: skip
            assert w3.eth.get_code(contracts[name]), name
        manager = w3.eth.contract(contracts["JobManager"], abi=load_artifact("JobManager")["abi"])
        assert manager.functions.arbiter().call() == contracts["DisputeGame"]
        config = RoleConfig(agent=AgentConfig(key="dev:1", data_dir=tmp_path), deployment=out)
        assert manager_address(None, out) == contracts["JobManager"]
        court = companion_address(config, "court", contracts["JobManager"])
        assert court == contracts["AttestationCourt"]
        sent = _sent(w3)
        assert sent == len(record["steps"]["done"])  # one transaction per step
        capsys.readouterr()
        assert _deploy(url, out) == 0
        assert _sent(w3) == sent
        assert "already complete (nothing sent)" in capsys.readouterr().out
        assert json.loads(out.read_text())["contracts"] == contracts


@pytest.mark.parametrize("when", ["before-send", "after-mined"])
@pytest.mark.parametrize("at_step", [1, 5, 9])
def test_a_cut_off_deployment_is_finished_by_running_it_again(tmp_path, monkeypatch, when, at_step):
    out = tmp_path / "deployment.json"
    write = cli._write

    def crashing(path, record):
        steps = record["steps"]
        done, sent = len(steps["done"]), len(steps["sent"])
        if when == "before-send" and sent == at_step and done == at_step - 1:
            write(path, record)  # the hash is on record; the process dies before sending
            raise Crash
        if when == "after-mined" and done == at_step:
            raise Crash  # mined, but the result never reached the file
        write(path, record)

    with local_anvil(AnvilConfig()) as url:
        w3 = connect(url)
        monkeypatch.setattr(cli, "_write", crashing)
        with pytest.raises(Crash):
            _deploy(url, out)
        half = json.loads(out.read_text())
        assert not half["complete"]
        monkeypatch.setattr(cli, "_write", write)
        assert _deploy(url, out) == 0
        record = json.loads(out.read_text())
        assert record["complete"]
        # every step sent exactly once: as many transactions as steps, none reverted
        assert _sent(w3) == len(record["steps"]["done"])
        for step, address in half["steps"]["done"].items():
            assert record["steps"]["done"][step] == address
        manager = w3.eth.contract(
            record["contracts"]["JobManager"], abi=load_artifact("JobManager")["abi"]
        )
        assert manager.functions.arbiter().call() == record["contracts"]["DisputeGame"]


def _one_line_error(capsys, code: int, needle: str) -> None:
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and needle in err, err


def test_bad_input_is_one_line_and_sends_nothing(tmp_path, capsys):
    out = tmp_path / "deployment.json"
    bad = tmp_path / "params.json"
    bad.write_text(json.dumps({"manager_config": {}, "colour": "red"}))
    with local_anvil(AnvilConfig()) as url:
        w3 = connect(url)
        _one_line_error(capsys, _deploy(url, out, "--config", str(bad)), "unknown keys ['colour']")
        bad.write_text("{not json")
        _one_line_error(capsys, _deploy(url, out, "--config", str(bad)), "not JSON")
        other = tmp_path / "other.json"
        other.write_text(json.dumps({"format": cli.FORMAT, "chain_id": 1, "deployer": DEPLOYER}))
        _one_line_error(capsys, _deploy(url, other), "another chain_id")
        assert _sent(w3) == 0 and not out.exists()
    _one_line_error(capsys, _deploy("http://127.0.0.1:9", out), "no chain there")


def test_a_non_dev_chain_refuses_dev_keys_and_the_test_token(tmp_path, capsys, monkeypatch):
    out = tmp_path / "deployment.json"
    with local_anvil(AnvilConfig(chain_id=1337)) as url:
        _one_line_error(capsys, _deploy(url, out), "refusing Anvil dev key")
        key = Account.create()
        monkeypatch.setenv("VTP_DEPLOYER_KEY", key.key.hex())
        args = ["deploy", "--rpc-url", url, "--key", "env:VTP_DEPLOYER_KEY", "--out", str(out)]
        _one_line_error(capsys, main(args), "not a dev chain")
        assert not out.exists()


def test_mint_tops_dev_accounts_up_to_their_balance_once(tmp_path, capsys):
    out = tmp_path / "deployment.json"
    other = Account.create().address
    holder = Account.from_key(dev_private_key(1)).address
    with local_anvil(AnvilConfig()) as url:
        w3 = connect(url)
        assert _deploy(url, out, "--mint", "dev:1=1000", "--mint", f"{other}=2.5") == 0
        token_address = json.loads(out.read_text())["contracts"]["Token"]
        token = w3.eth.contract(token_address, abi=load_artifact("TestToken")["abi"])
        assert token.functions.balanceOf(holder).call() == 1000 * 10**18
        assert token.functions.balanceOf(other).call() == 25 * 10**17
        assert f"minted 1000 test tokens to {holder}" in capsys.readouterr().out
        # a re-run tops up to the same balance: nothing lacks, nothing is sent
        sent = _sent(w3)
        assert _deploy(url, out, "--mint", "dev:1=1000") == 0
        assert _sent(w3) == sent
        # a higher target mints only the difference
        assert _deploy(url, out, "--mint", "dev:1=1500") == 0
        assert token.functions.balanceOf(holder).call() == 1500 * 10**18
        for bad in ("dev:1", "dev:1=-3", "dev:1=lots", "=5", "nokey=5"):
            _one_line_error(capsys, _deploy(url, out, "--mint", bad), "--mint")
