"""Deploy the protocol from the exported ABI/bytecode JSON (build/abi) with web3.py.

Integrators and agents need only these artifacts; no ape at run time.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from eth_account import Account
from web3 import Web3

DEFAULT_ABI_DIR = Path(__file__).resolve().parents[2] / "build" / "abi"


def load_artifact(name: str, abi_dir: Path = DEFAULT_ABI_DIR) -> dict[str, Any]:
    path = Path(abi_dir) / f"{name}.json"
    if not path.exists():
        raise FileNotFoundError(f"{path} not found: run `make compile` first")
    return json.loads(path.read_text())


def deploy_contract(
    w3: Web3, private_key: str, name: str, *args: Any, abi_dir: Path = DEFAULT_ABI_DIR
) -> str:
    """Deploy artifact `name` with constructor `args`; return its checksummed address."""
    artifact = load_artifact(name, abi_dir)
    account = Account.from_key(private_key)
    factory = w3.eth.contract(abi=artifact["abi"], bytecode=artifact["bytecode"])
    tx = factory.constructor(*args).build_transaction(
        {
            "from": account.address,
            "nonce": w3.eth.get_transaction_count(account.address, "pending"),
            "chainId": w3.eth.chain_id,
        }
    )
    signed = account.sign_transaction(tx)
    receipt = w3.eth.wait_for_transaction_receipt(
        w3.eth.send_raw_transaction(signed.raw_transaction)
    )
    if receipt["status"] != 1:
        raise RuntimeError(f"deployment of {name} reverted (tx {receipt['transactionHash'].hex()})")
    return Web3.to_checksum_address(receipt["contractAddress"])


def deploy_all(
    w3: Web3,
    deployer_private_key: str,
    abi_dir: Path = DEFAULT_ABI_DIR,
    params: dict[str, Any] | None = None,
) -> dict[str, str]:
    """Deploy every protocol contract and wire them; return contract name -> address."""
    params = params or {}
    token = params.get("token") or deploy_contract(
        w3, deployer_private_key, "TestToken", abi_dir=abi_dir
    )
    return {"TestToken": token}
