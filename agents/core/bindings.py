"""Typed contract bindings: the one place an agent binds a protocol contract (issue #27).

`bind` builds a web3 contract from the ABI exported to build/abi (tools/export_abi.py) with
`decode_tuples`: every call result is then decoded by the ABI's own names — a struct as a named
tuple of its components (`getUnit(u).call().status`), a view with several outputs as a named
tuple of its outputs (`verifierStatus(u, v).call().attestationHash`), arrays of structs as lists
of them. No field list is written by hand, and none is read by position (tools/positional_reads
fails `make lint` on one), so a field added to a struct shifts nothing an agent reads.
"""

from __future__ import annotations

from pathlib import Path

from web3 import Web3
from web3.contract import Contract

from agents.core.deploy import DEFAULT_ABI_DIR, load_artifact


def bind(w3: Web3, name: str, address: str, abi_dir: Path = DEFAULT_ABI_DIR) -> Contract:
    """Contract `name` (its build/abi artifact) at `address`, results decoded by ABI names."""
    abi = load_artifact(name, abi_dir)["abi"]
    return w3.eth.contract(address=Web3.to_checksum_address(address), abi=abi, decode_tuples=True)
