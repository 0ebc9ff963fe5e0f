"""agents/core/rpc_errors.py against live clients: Anvil and Ganache 7.9 (the npm devDependency),
each started as `bench/clients_bench.py` starts it for the demo. The strings of
tests/core/test_rpc_errors.py were copied from these clients once; here the clients answer
now, so a client upgrade that rewords an answer fails here rather than in a demo run.

On each: a send whose nonce is taken reads NONCE_LOW, and a reverting call's custom error — in
eth_estimateGas's and eth_call's own shapes — decodes by `revert_data` to its selector. What
running these found: Ganache mines a nonce-0 transaction again each time it is sent (below).
(A nonce past the account's is queued by both clients, and Ganache's eager instamine answers
such a send only once it is mined: NONCE_HIGH is not observable on their default settings.)
The demo itself on Ganache runs in `make bench` (about 4 minutes: too long for CI).
"""

from __future__ import annotations

import json
import time
import urllib.request

import pytest
from eth_account import Account
from eth_utils import keccak

from agents.core.chain import dev_private_key, free_port
from agents.core.deploy import load_artifact
from agents.core.rpc_errors import SendError, classify_send_error, revert_data
from agents.core.tx import Action, reconcile_action
from bench.clients_bench import CHAIN_ID, clients, running

pytestmark = pytest.mark.timeout(180)

INSUFFICIENT = keccak(text="ERC20InsufficientBalance(address,uint256,uint256)")[:4]


class Rpc:
    def __init__(self, url: str) -> None:
        self.url = url
        self.ids = 0

    def answer(self, method: str, *params) -> dict:
        """The node's whole JSON-RPC answer: `result`, or `error` as the client shaped it."""
        self.ids += 1
        body = {"jsonrpc": "2.0", "id": self.ids, "method": method, "params": list(params)}
        request = urllib.request.Request(
            self.url, json.dumps(body).encode(), {"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read())

    def result(self, method: str, *params):
        got = self.answer(method, *params)
        assert "error" not in got, got
        return got["result"]

    def receipt(self, tx_hash: str) -> dict:
        for _ in range(600):
            got = self.result("eth_getTransactionReceipt", tx_hash)
            if got is not None:
                return got
            time.sleep(0.1)  # both clients automine: a block per transaction
        raise AssertionError(f"no receipt for {tx_hash}")


def dev_address(index: int) -> str:
    return Account.from_key(dev_private_key(index)).address


def _signed(key: str, nonce: int, **tx) -> str:
    tx = {"nonce": nonce, "gas": 3_000_000, "gasPrice": 2 * 10**9, "chainId": CHAIN_ID, **tx}
    return "0x" + Account.sign_transaction(tx, key).raw_transaction.hex().removeprefix("0x")


@pytest.fixture(params=["anvil", "ganache"], scope="module")
def node(request, tmp_path_factory):
    port = free_port()
    client = clients(port)[request.param]
    log = tmp_path_factory.mktemp(request.param) / "client.log"
    with running(client, port, log) as url:
        yield request.param, Rpc(url)


def _mined(rpc: Rpc, key: str, nonce: int, value: int) -> str:
    me = Account.from_key(key).address
    tx_hash = rpc.result("eth_sendRawTransaction", _signed(key, nonce, to=me, value=value))
    assert int(rpc.receipt(tx_hash)["status"], 16) == 1
    return tx_hash


def _count(rpc: Rpc, key: str) -> int:
    return int(rpc.result("eth_getTransactionCount", Account.from_key(key).address, "latest"), 16)


def test_a_taken_nonce_reads_as_nonce_low(node):
    _, rpc = node
    key = dev_private_key(8)
    nonce = _count(rpc, key)
    _mined(rpc, key, nonce, 1)
    _mined(rpc, key, nonce + 1, 2)
    # not nonce 0, which Ganache takes for no nonce (below)
    taken = rpc.answer(
        "eth_sendRawTransaction", _signed(key, nonce + 1, to=dev_address(8), value=3)
    )
    assert classify_send_error(taken["error"]["message"]) == SendError.NONCE_LOW, taken
    assert _count(rpc, key) == nonce + 2


def test_ganache_mines_a_nonce_0_transaction_again_however_often_it_is_sent(node):
    """Ganache 7.9 takes a signed transaction of nonce 0 (RLP's empty nonce) for one without a
    nonce: sent again after it was mined, the same bytes are mined again, at the account's next
    nonce (Anvil answers "nonce too low"). Any other used nonce is refused. So a sender must
    never re-broadcast what the chain's nonce says is consumed: `reconcile_action` re-signs at a
    fresh nonce then (the chain's nonce is read before the receipt), and the demo's send audit
    on Ganache finds no transaction sent twice (bench/results/clients.json)."""
    name, rpc = node
    key = dev_private_key(7)
    assert _count(rpc, key) == 0  # the account's first transaction
    raw = _signed(key, 0, to=dev_address(7), value=1)
    rpc.receipt(rpc.result("eth_sendRawTransaction", raw))
    again = rpc.answer("eth_sendRawTransaction", raw)
    if name == "ganache":
        assert "result" in again and _count(rpc, key) == 2, again
    else:
        assert classify_send_error(again["error"]["message"]) is SendError.NONCE_LOW, again
        assert _count(rpc, key) == 1
    assert reconcile_action(False, False, 1, 0) is Action.RESIGN


def test_a_custom_error_decodes_from_estimate_gas_and_call(node):
    _, rpc = node
    key = dev_private_key(9)
    me = Account.from_key(key).address
    token = load_artifact("TestToken")
    nonce = int(rpc.result("eth_getTransactionCount", me, "latest"), 16)
    deployed = rpc.result("eth_sendRawTransaction", _signed(key, nonce, data=token["bytecode"]))
    address = rpc.receipt(deployed)["contractAddress"]
    # transfer(me, 1) from an account holding nothing: ERC20InsufficientBalance(me, 0, 1)
    data = "0xa9059cbb" + me[2:].lower().rjust(64, "0") + "1".rjust(64, "0")
    call = {"from": me, "to": address, "data": data}
    for method, params in (("eth_estimateGas", (call,)), ("eth_call", (call, "latest"))):
        got = rpc.answer(method, *params)
        assert "error" in got, (method, got)
        payload = revert_data(got["error"].get("data"))
        assert payload[:4] == INSUFFICIENT, (method, got["error"])
