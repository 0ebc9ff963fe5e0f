"""build/abi/errors.json (tools/export_abi.py): one ABI with every custom error and event of the
protocol's contracts, so a client in any language decodes any revert or log of the protocol from
one file (PROTOCOL §9 integrators)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from eth_utils import keccak

from tools.export_abi import NOT_PROTOCOL, _signature, errors_and_events

ABI_DIR = Path(__file__).resolve().parents[2] / "build" / "abi"


def _artifacts() -> dict[str, dict]:
    if not (ABI_DIR / "errors.json").exists():
        pytest.fail(f"{ABI_DIR / 'errors.json'} is missing: run `make compile`")
    names = json.loads((ABI_DIR / "index.json").read_text())["contracts"]
    return {n: json.loads((ABI_DIR / f"{n}.json").read_text()) for n in names}


def test_every_protocol_error_and_event_is_in_errors_json():
    combined = json.loads((ABI_DIR / "errors.json").read_text())
    have = {(i["type"], _signature(i)) for i in combined["abi"]}
    wanted = set()
    for art in _artifacts().values():
        if str(art["sourceId"]).startswith(NOT_PROTOCOL):
            continue
        wanted |= {
            (i["type"], _signature(i)) for i in art["abi"] if i["type"] in ("error", "event")
        }
    assert wanted and wanted == have
    for selector, sig in combined["selectors"].items():
        assert "0x" + keccak(text=sig)[:4].hex() == selector
    # the errors of the contracts a job touches are all decodable from this one file
    for sig in ("NotAReduction(uint8)", "CutsMismatch(bytes32,bytes32)", "NotAWalk(uint256)"):
        assert sig in combined["selectors"].values()


def test_test_contracts_are_left_out():
    combined = json.loads((ABI_DIR / "errors.json").read_text())
    have = {(i["type"], _signature(i)) for i in combined["abi"]}

    def items(protocol: bool) -> set[tuple[str, str]]:
        return {
            (i["type"], _signature(i))
            for art in _artifacts().values()
            if str(art["sourceId"]).startswith(NOT_PROTOCOL) != protocol
            for i in art["abi"]
            if i["type"] in ("error", "event")
        }

    test_only = items(False) - items(True)
    assert test_only and not (test_only & have)


def test_a_selector_shared_by_two_errors_is_refused(monkeypatch):
    import eth_utils

    one = {"type": "error", "name": "Bad", "inputs": [{"type": "uint256", "name": "x"}]}
    other = {"type": "error", "name": "Worse", "inputs": []}
    assert len(errors_and_events({"A": [one], "B": [one]})["abi"]) == 1  # the same error once
    monkeypatch.setattr(eth_utils, "keccak", lambda text: b"\x00" * 32)  # every selector clashes
    with pytest.raises(ValueError, match="share 0x00000000"):
        errors_and_events({"A": [one], "B": [other]})
