"""AttestationCourt guards (the full path — a lazy verifier disputed, slashed, the whistleblower
paid — runs in test_demo_e2e): only whistleblowers dispute, only recorded attestations, the game
is wired once, and only the court's game may report a result."""

from __future__ import annotations

import pytest
from eth_account import Account
from eth_utils import keccak
from web3.exceptions import ContractCustomError

from agents.core.chain import AnvilConfig, connect, dev_private_key, local_anvil
from agents.core.deploy import DEFAULT_ABI_DIR, deploy_all, load_artifact

TOKEN = 10**18


def _reverts(fn, sender: str, error: str) -> None:
    """The call reverts with custom error `error` (matched by its 4-byte selector)."""
    item = next(
        i
        for i in load_artifact("AttestationCourt")["abi"]
        if i.get("type") == "error" and i["name"] == error
    )
    selector = keccak(text=f"{error}({','.join(i['type'] for i in item['inputs'])})")[:4].hex()
    with pytest.raises(ContractCustomError) as info:
        fn.call({"from": sender})
    assert selector in str(getattr(info.value, "data", "") or info.value), (error, info.value)


def test_court_guards():
    with local_anvil(AnvilConfig()) as url:
        w3 = connect(url)
        addrs = deploy_all(
            w3,
            dev_private_key(0),
            DEFAULT_ABI_DIR,
            {
                "dispute_game": True,
                "attestation_court": True,
            },
        )
        court = w3.eth.contract(
            address=addrs["AttestationCourt"], abi=load_artifact("AttestationCourt")["abi"]
        )
        registry = w3.eth.contract(
            address=addrs["NodeRegistry"], abi=load_artifact("NodeRegistry")["abi"]
        )
        assert registry.functions.isSlasher(addrs["AttestationCourt"]).call()
        assert registry.functions.isSlasher(addrs["JobManager"]).call()
        assert court.functions.game().call() == addrs["CourtGame"]
        assert court.functions.bond().call() == 10 * TOKEN
        assert court.functions.penalty().call() == 20 * TOKEN
        game = w3.eth.contract(address=addrs["CourtGame"], abi=load_artifact("DisputeGame")["abi"])
        assert game.functions.manager().call() == addrs["AttestationCourt"]
        deployer = Account.from_key(dev_private_key(0)).address
        stranger = Account.from_key(dev_private_key(4)).address
        unit = 1 << 32
        # not a whistleblower (unregistered)
        fn = court.functions.challengeAttestation(unit, stranger, 0, [b"\1" * 32], b"\2" * 32, [])
        _reverts(fn, stranger, "NotWhistleblower")
        # the game is wired once, by the deployer only
        _reverts(court.functions.setGame(addrs["DisputeGame"]), deployer, "GameAlreadySet")
        _reverts(court.functions.setGame(addrs["DisputeGame"]), stranger, "NotDeployer")
        # only the court's game reports results
        _reverts(court.functions.onDisputeResolved(1, unit, True), stranger, "NotArbiter")
        _reverts(court.functions.withdraw(), stranger, "NothingToWithdraw")
