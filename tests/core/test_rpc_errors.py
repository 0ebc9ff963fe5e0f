"""Node error answers read by meaning, from each client's real wording (agents/core/rpc_errors):
the strings below are what Anvil, Hardhat (2 and 3's EDR) and Ganache 7 answer."""

from __future__ import annotations

import pytest
from eth_abi import encode
from eth_utils import keccak
from web3.exceptions import ContractLogicError

from agents.core.rpc_errors import SendError, classify_send_error, revert_data
from agents.core.tx import ErrorDecoder, revert_error

SEND_ANSWERS = [
    # Anvil / Geth
    ("nonce too low: next nonce 4, tx nonce 3", SendError.NONCE_LOW),
    ("already known", SendError.KNOWN),
    ("replacement transaction underpriced", SendError.UNDERPRICED),
    # Hardhat 2 and Hardhat 3 (EDR)
    ("Nonce too low. Expected nonce to be 4 but got 3.", SendError.NONCE_LOW),
    (
        "Nonce too high. Expected nonce to be 2 but got 4. Note that transactions can't be "
        "queued when automining.",
        SendError.NONCE_HIGH,
    ),
    (
        "Nonce too high. Expected nonce to be 0x2, but got 0x4. Note that transactions can't be "
        "queued when automining.",
        SendError.NONCE_HIGH,
    ),
    ("Transaction ran out of gas", SendError.MINED_FAILED),
    ("Transaction reverted without a reason string", SendError.MINED_FAILED),
    (
        "VM Exception while processing transaction: reverted with custom error "
        "'NotAssigned(4294967296)'",
        SendError.MINED_FAILED,
    ),
    ("Known transaction: 0x6f1e", SendError.KNOWN),
    # Ganache 7: one wording for both directions, told apart by its numbers
    (
        "the tx doesn't have the correct nonce. account has nonce of: 5 tx has nonce of: 4",
        SendError.NONCE_LOW,
    ),
    (
        "the tx doesn't have the correct nonce. account has nonce of: 5 tx has nonce of: 7",
        SendError.NONCE_HIGH,
    ),
    ("transaction underpriced", SendError.UNDERPRICED),
    # what nobody can act on
    ("insufficient funds for gas * price + value", SendError.OTHER),
    ("intrinsic gas too low", SendError.OTHER),
]


@pytest.mark.parametrize(("message", "meaning"), SEND_ANSWERS)
def test_each_clients_wording_is_read_by_its_meaning(message: str, meaning: SendError) -> None:
    assert classify_send_error(message) is meaning


def test_web3s_rendering_of_the_rpc_error_is_read_too() -> None:
    """web3 raises Web3RPCError whose text is the error object's repr."""
    text = str({"code": -32603, "message": "Transaction ran out of gas"})
    assert classify_send_error(text) is SendError.MINED_FAILED


NAMED = {"type": "error", "name": "NotAssigned", "inputs": [{"name": "unitId", "type": "uint256"}]}
PAYLOAD = keccak(text="NotAssigned(uint256)")[:4] + encode(["uint256"], [1 << 32])
HEX = "0x" + PAYLOAD.hex()


@pytest.mark.parametrize(
    "data",
    [
        HEX,  # Anvil, Geth, Hardhat; Ganache's eth_call
        {"data": HEX},  # nested once
        # Ganache 7's eth_estimateGas (the real answer's fields)
        {"hash": None, "programCounter": 16, "result": HEX, "reason": None, "message": "revert"},
        # Ganache 6: keyed by the transaction's hash
        {
            "0x" + "ab" * 32: {"error": "revert", "program_counter": 16, "return": HEX},
            "stack": "RuntimeError: VM Exception while processing transaction: revert",
            "name": "RuntimeError",
        },
    ],
)
def test_the_custom_errors_name_survives_every_clients_revert_shape(data) -> None:
    assert revert_data(data) == PAYLOAD
    exc = ContractLogicError("execution reverted: VM Exception while processing", data=data)
    reverted = revert_error(exc, ErrorDecoder([NAMED]), "gas estimation")
    assert reverted.error_name == "NotAssigned"
    assert reverted.error_args == {"unitId": 1 << 32}


def test_no_revert_data_is_no_payload() -> None:
    assert revert_data(None) == b""
    assert revert_data({"message": "revert", "result": "0x"}) == b""
    assert revert_data("not hex") == b""
