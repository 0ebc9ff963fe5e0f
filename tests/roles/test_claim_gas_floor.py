"""A claim estimated before rivals' claims land still has gas enough when it lands last
(agents/roles/gas_floors.py, agents/core/tx.gas_limit): the race that ran a claim out of gas on
Ganache (85,939 given, 99,299 needed)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from eth_account import Account
from web3 import Web3

from agents.core.chain import AnvilConfig, connect, dev_private_key, local_anvil
from agents.core.deploy import DEFAULT_ABI_DIR
from agents.core.tx import TxRequest, gas_limit
from agents.roles.gas_floors import STATE_GAS_FLOORS, gas_floor

MARGIN = 1.2  # TxSender's default gas_margin


def test_the_gas_given_is_the_estimate_with_its_margin_but_never_under_the_floor() -> None:
    # the race: the estimate on a recycled record, the second claimant's need
    estimate, needed = 63_283, 99_299
    assert gas_limit(estimate, MARGIN) == 85_939 < needed  # what ran out of gas
    assert gas_limit(estimate, MARGIN, gas_floor(SimpleNamespace(fn_name="claim"))) >= needed
    # a dear estimate keeps its margin above the floor; a call without a floor is unchanged
    assert gas_limit(200_000, MARGIN, 150_000) == 250_000
    assert gas_floor(SimpleNamespace(fn_name="heartbeat")) == 0
    assert gas_limit(50_000, MARGIN, gas_floor(SimpleNamespace(fn_name="heartbeat"))) == 70_000


def test_the_floor_travels_with_the_request_not_with_its_identity() -> None:
    """An intent is bound to what it does (to, data, value): the floor is how it is sent."""
    a = TxRequest("0x" + "11" * 20, b"\x01", 0, None, 0)
    b = TxRequest("0x" + "11" * 20, b"\x01", 0, None, 150_000)
    assert a.digest("0x" + "22" * 20) == b.digest("0x" + "22" * 20)


SOLVERS = range(2, 18)  # MAX_CLAIMANTS = 16 of Anvil's 20 dev accounts
E18 = 10**18


@pytest.mark.chain
def test_a_claim_estimated_alone_lands_after_fifteen_rivals_and_is_mined() -> None:
    from bench.contracts_bench import CAP, Bench

    with local_anvil(AnvilConfig(accounts=20)) as url:
        w3 = connect(url)
        b = Bench(w3, DEFAULT_ABI_DIR)
        b.keys = [dev_private_key(i) for i in range(20)]
        b.addr = [Account.from_key(k).address for k in b.keys]
        b.nonce = {i: w3.eth.get_transaction_count(b.addr[i]) for i in range(20)}
        b.send(0, b.token.functions.mint(b.addr[1], 1_000 * E18))
        b.send(1, b.token.functions.approve(b.manager.address, 2**256 - 1))
        for i in SOLVERS:
            b.send(0, b.token.functions.mint(b.addr[i], 1_000 * E18))
            b.send(i, b.token.functions.approve(b.registry.address, 2**256 - 1))
            b.send(i, b.registry.functions.register(1, CAP, 300 * E18))
        _, unit, _ = b.post()

        def claim(i: int):
            return b.manager.functions.claim(unit, Web3.keccak(i.to_bytes(32, "big")))

        *rivals, me = SOLVERS
        estimate = claim(me).estimate_gas({"from": b.addr[me]})  # alone on the unit
        for i in rivals:
            b.send(i, claim(i))
        given = gas_limit(estimate, MARGIN, gas_floor(claim(me)))
        tx = claim(me).build_transaction(
            {"from": b.addr[me], "nonce": b.nonce[me], "chainId": b.chain_id, "gas": given}
        )
        signed = Account.sign_transaction(tx, b.keys[me])
        receipt = w3.eth.wait_for_transaction_receipt(
            w3.eth.send_raw_transaction(signed.raw_transaction)
        )
    used = int(receipt["gasUsed"])
    assert receipt["status"] == 1, f"ran out of gas: {given} given"
    # the race is real: the estimate's margin alone would not have carried it
    assert used > gas_limit(estimate, MARGIN)
    assert used <= STATE_GAS_FLOORS["claim"]
