"""build/abi/protocol.json (tools/export_abi.py): the integrator's one file — every error and event
of the protocol's contracts and of the dev chain's token, the selector and topic tables, the enums
and the NatSpec (PROTOCOL §6.12). tests/js/journey.test.mjs drives a job with it alone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from eth_utils import keccak

from tools.export_abi import NOT_PROTOCOL, PROTOCOL_FORMAT, _signature

ABI_DIR = Path(__file__).resolve().parents[2] / "build" / "abi"


def _load(name: str) -> dict:
    path = ABI_DIR / name
    if not path.exists():
        pytest.fail(f"{path} is missing: run `make compile`")
    return json.loads(path.read_text())


def test_protocol_json_holds_every_error_and_event_of_errors_json_and_the_token_s():
    combined, errors = _load("protocol.json"), _load("errors.json")
    assert combined["format"] == PROTOCOL_FORMAT
    have = {(i["type"], _signature(i)) for i in combined["abi"]}
    assert {(i["type"], _signature(i)) for i in errors["abi"]} <= have
    token = _load("TestToken.json")["abi"]
    assert {(i["type"], _signature(i)) for i in token if i["type"] in ("error", "event")} <= have
    # the token's own errors, which a failed approve / transferFrom raises
    assert "ERC20InsufficientAllowance(address,uint256,uint256)" in combined["errors"].values()
    for selector, sig in combined["errors"].items():
        assert "0x" + keccak(text=sig)[:4].hex() == selector
    for topic, sig in combined["events"].items():
        assert "0x" + keccak(text=sig).hex() == topic
    assert set(combined["errors"].values()) == {
        _signature(i) for i in combined["abi"] if i["type"] == "error"
    }
    assert set(combined["events"].values()) == {
        _signature(i) for i in combined["abi"] if i["type"] == "event"
    }


def test_protocol_json_carries_the_enums_and_every_protocol_contract_s_natspec():
    combined = _load("protocol.json")
    assert combined["enums"] == _load("enums.json")
    assert combined["enums"]["IJobManager.UnitStatus"]["Open"] == 1
    index = _load("index.json")["contracts"]
    protocol = [
        n for n in index if not str(_load(f"{n}.json")["sourceId"]).startswith(NOT_PROTOCOL)
    ]
    assert set(combined["contracts"]) == set(protocol) | {"TestToken"}
    assert set(combined["natspec"]) == set(combined["contracts"])
    # the registry's errors are documented where they are declared (INodeRegistry)
    registry_errors = combined["natspec"]["INodeRegistry"]["userdoc"]["errors"]
    assert any(sig.startswith("StakeBelowMinimum(") for sig in registry_errors)
    assert combined["natspec"]["JobManager"]["userdoc"]["methods"]
    assert "MockArbiter" not in combined["natspec"]
