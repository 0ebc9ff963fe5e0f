"""One transaction to post (issue #45): a job is posted with its dispute config, so no solver
ever sees it claimable without one (PROTOCOL §6.3, §7.2). On the real DisputeGame, wired as
`deploy_all` wires it: the config is the job's from the posting block on, the game reads it
there (`configOf`, and the game a challenge opens), and nobody can register another."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from eth_account import Account
from test_invariants import ARTIFACTS, _export_artifacts, _keys

from agents.core.deploy import deploy_all

E18 = 10**18
CONFIG = b"\x0c" * 32


@pytest.fixture(scope="module")
def world(chain, project, tmp_path_factory):
    abi_dir: Path = tmp_path_factory.mktemp("abi")
    _export_artifacts(project, abi_dir, (*ARTIFACTS, "OneStepProver", "DisputeGame"))
    w3 = chain.provider.web3
    keys = _keys()
    out = deploy_all(w3, keys[0], abi_dir, {"dispute_game": True})

    def contract(name: str, address: str):
        abi = json.loads((abi_dir / f"{name}.json").read_text())["abi"]
        return w3.eth.contract(address=address, abi=abi)

    manager = contract("JobManager", out["JobManager"])
    game = contract("DisputeGame", out["Arbiter"])
    token = contract("TestToken", out["Token"])
    submitter = Account.from_key(keys[1]).address
    send(w3, keys[0], token.functions.mint(submitter, 1_000 * E18))
    send(w3, keys[1], token.functions.approve(manager.address, 2**256 - 1))
    return w3, keys, manager, game


def send(w3, key: str, fn) -> dict:
    sender = Account.from_key(key).address
    receipt = w3.eth.wait_for_transaction_receipt(fn.transact({"from": sender}))
    assert receipt["status"] == 1
    return receipt


def params(w3, config: bytes) -> tuple:
    now = w3.eth.get_block("latest")["timestamp"]
    return (
        b"\x01" * 32, b"\x02" * 32, b"\x03" * 32, 8, 2, (0, 0, 0), 100 * E18, 10 * E18,
        now + 600, 3_600, config,
    )  # fmt: skip


def test_a_job_is_posted_with_its_dispute_config_in_one_transaction(world):
    w3, keys, manager, game = world
    receipt = send(w3, keys[1], manager.functions.postJob(params(w3, CONFIG)))
    (posted,) = manager.events.JobPosted().process_receipt(receipt)
    job_id = posted["args"]["jobId"]
    # the posting block already holds it: the job's record and the game agree
    block = receipt["blockNumber"]
    assert manager.functions.getJob(job_id).call(block_identifier=block)[-1] == CONFIG
    assert game.functions.configOf(job_id).call(block_identifier=block) == CONFIG
    # and it is the job's for good: the submitter cannot register another one
    with pytest.raises(Exception, match="ConfigAlreadyRegistered|0x"):
        game.functions.registerConfig(job_id, b"\x0d" * 32).call(
            {"from": Account.from_key(keys[1]).address}
        )
    assert game.functions.configOf(job_id).call() == CONFIG


def test_a_job_posted_without_a_config_is_registered_as_before(world):
    """A zero config (a round manager's unit, whose config comes with its placement) leaves
    the game's own registration, by the submitter, once."""
    w3, keys, manager, game = world
    receipt = send(w3, keys[1], manager.functions.postJob(params(w3, b"\x00" * 32)))
    job_id = manager.events.JobPosted().process_receipt(receipt)[0]["args"]["jobId"]
    assert game.functions.configOf(job_id).call() == b"\x00" * 32
    send(w3, keys[1], game.functions.registerConfig(job_id, CONFIG))
    assert game.functions.configOf(job_id).call() == CONFIG
