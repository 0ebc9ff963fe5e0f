"""Typed contract bindings: the one place an agent binds a protocol contract (issue #27).

`bind` builds a web3 contract from the ABI exported to build/abi (tools/export_abi.py) with
`decode_tuples`: every call result is then decoded by the ABI's own names — a struct as a named
tuple of its components (`getUnit(u).call().status`), a view with several outputs as a named
tuple of its outputs (`verifierStatus(u, v).call().attestationHash`), arrays of structs as lists
of them. No field list is written by hand, and none is read by position (tools/positional_reads
fails `make lint` on one), so a field added to a struct shifts nothing an agent reads.

A view with several outputs some of which have no name (`returns (bool, uint64)`) would decode
to its first value alone (web3 names the outputs into a dict, where the empty names collide), so
`bind` names those outputs by position (`_0`, `_1`: the names a named tuple gives them anyway):
such a result is unpacked, never read by a name it does not have.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from web3 import Web3
from web3.contract import Contract

from agents.core.deploy import DEFAULT_ABI_DIR, load_artifact


def bind(w3: Web3, name: str, address: str, abi_dir: Path = DEFAULT_ABI_DIR) -> Contract:
    """Contract `name` (its build/abi artifact) at `address`, results decoded by ABI names."""
    abi = with_output_names(load_artifact(name, abi_dir)["abi"])
    return w3.eth.contract(address=Web3.to_checksum_address(address), abi=abi, decode_tuples=True)


def with_output_names(abi: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`abi` with each unnamed output of a function with several outputs named by position."""
    out = []
    for item in abi:
        outputs = item.get("outputs") or []
        if item.get("type") == "function" and len(outputs) > 1:
            named = [{**o, "name": o["name"] or f"_{i}"} for i, o in enumerate(outputs)]
            item = {**item, "outputs": named}
        out.append(item)
    return out
