"""`python -m agents deploy`: deploy and wire the whole protocol on any EVM chain.

Production defaults (docs/PROTOCOL.md §6.4 parameters, the real dispute game, the attestation
court, the RoundManager for decomposed jobs) or a parameter file (`--config`, the keys of
`agents.core.deploy.deploy_all`); writes the deployment file every role reads (`--deployment`)
after every step, so a run cut off anywhere is finished by running the same command again, and a
finished one re-run sends nothing. Keys as the roles take them (keystore:/path, env:VAR, dev:N on
dev chains only). A chain that is not a dev chain needs an existing ERC-20 (`"token"`): the
mintable TestToken is for dev chains, where `--mint ACCOUNT=TOKENS` tops accounts up to that
balance (the local journey of the README funds its roles so; a re-run mints nothing more).
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from web3 import Web3

from agents.cli.errors import UserError
from agents.core.chain import ChainUnavailable, connect
from agents.core.deploy import (
    DEFAULT_ABI_DIR,
    TOKEN_UNIT,
    DeploymentError,
    Journal,
    deploy_all,
    load_artifact,
)
from agents.core.keys import DEV_CHAIN_IDS, KeyConfigError, load_account
from agents.roles.config import DEFAULT_DEPLOYMENT

FORMAT = "vtp.deployment.v1"
#: What `deploy` deploys unless --config says otherwise.
PRODUCTION = {"dispute_game": True, "attestation_court": True, "round_manager": True}
#: The keys a --config file may hold (deploy_all's params).
PARAM_KEYS = {
    "token",
    "registry_config",
    "manager_config",
    "arbiter",
    "mock_arbiter",
    "dispute_game",
    "clock_budget",
    "attestation_court",
    "court_clock_budget",
    "round_manager",
    "round_config",
}


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "deploy", help="deploy and wire the protocol on a chain", description=__doc__
    )
    p.add_argument("--rpc-url", required=True, help="the chain's JSON-RPC URL")
    p.add_argument("--key", required=True, help="deployer key: keystore:/path, env:VAR or dev:N")
    p.add_argument("--config", type=Path, help="deployment parameters (JSON; deploy_all's keys)")
    p.add_argument("--out", type=Path, default=DEFAULT_DEPLOYMENT,
                   help="the deployment file every role reads (default: %(default)s)")  # fmt: skip
    p.add_argument("--json", action="store_true", help="print the deployment as one JSON object")
    p.add_argument(
        "--mint",
        action="append",
        default=[],
        metavar="ACCOUNT=TOKENS",
        help="dev chains, with the TestToken: top ACCOUNT (0x address or a key: dev:N, "
        "keystore:/path, env:VAR) up to TOKENS test tokens (repeatable)",
    )
    p.set_defaults(func=run)


def load_params(path: Path | None) -> dict[str, Any]:
    """PRODUCTION overlaid with the --config file's keys; UserError for a bad file."""
    if path is None:
        return dict(PRODUCTION)
    try:
        given = json.loads(path.read_text())
    except FileNotFoundError:
        raise UserError(f"--config {path}: no such file") from None
    except (OSError, ValueError) as exc:
        raise UserError(f"--config {path}: not JSON ({exc})") from None
    if not isinstance(given, dict):
        raise UserError(f"--config {path}: expected a JSON object of deployment parameters")
    unknown = sorted(set(given) - PARAM_KEYS)
    if unknown:
        raise UserError(f"--config {path}: unknown keys {unknown}; known: {sorted(PARAM_KEYS)}")
    return PRODUCTION | given


def _resume(path: Path, chain_id: int, deployer: str, params: dict) -> dict[str, Any] | None:
    """The deployment file at `path` to resume, or None when there is none; UserError when it
    belongs to another chain, deployer or parameter set (a run must not mix two)."""
    if not path.exists():
        return None
    try:
        old = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise UserError(f"--out {path}: exists but is not a deployment file ({exc})") from None
    if not isinstance(old, dict) or old.get("format") != FORMAT:
        raise UserError(f"--out {path}: exists but is not a {FORMAT} file; choose another --out")
    for what, mine in (("chain_id", chain_id), ("deployer", deployer), ("params", params)):
        if old.get(what) != mine:
            raise UserError(
                f"--out {path}: a deployment with another {what} ({old.get(what)!r}, this run "
                f"{mine!r}); choose another --out to deploy anew"
            )
    return old


def _write(path: Path, record: dict[str, Any]) -> None:
    """Atomic: a crash leaves the old file or the new one, never half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(record, indent=2) + "\n")
    os.replace(tmp, path)


def run(args: argparse.Namespace) -> int:
    params = load_params(args.config)
    try:
        w3 = connect(args.rpc_url)
        chain_id = w3.eth.chain_id
    except (ChainUnavailable, OSError, ValueError) as exc:
        raise UserError(f"--rpc-url {args.rpc_url}: no chain there ({exc})") from None
    try:
        account = load_account(args.key, chain_id)
    except KeyConfigError as exc:
        raise UserError(str(exc)) from None
    if chain_id not in DEV_CHAIN_IDS and not params.get("token"):
        raise UserError(
            f'chain id {chain_id} is not a dev chain: set "token" (an existing ERC-20) in '
            "--config; the mintable TestToken is for dev chains only"
        )
    mints = parse_mints(args.mint, chain_id)
    if mints and (chain_id not in DEV_CHAIN_IDS or params.get("token")):
        raise UserError('--mint: only on a dev chain with the TestToken (no "token" in --config)')
    old = _resume(args.out, chain_id, account.address, params)
    record: dict[str, Any] = old or {
        "format": FORMAT,
        "rpc_url": args.rpc_url,
        "chain_id": chain_id,
        "deployer": account.address,
        "params": params,
        "block": w3.eth.block_number,
        "complete": False,
        "contracts": {},
        "steps": {"sent": {}, "done": {}},
    }

    def save(journal: Journal) -> None:
        record["steps"] = {"sent": journal.sent, "done": journal.done}
        _write(args.out, record)

    journal = Journal(dict(record["steps"]["sent"]), dict(record["steps"]["done"]), save)
    before = w3.eth.get_transaction_count(account.address)
    try:
        contracts = deploy_all(
            w3, "0x" + bytes(account.key).hex(), DEFAULT_ABI_DIR, params, journal
        )
    except FileNotFoundError as exc:
        raise UserError(str(exc)) from None
    except DeploymentError as exc:
        raise UserError(
            f"deployment stopped at {exc} (run again to resume from {args.out})"
        ) from None
    record["contracts"] = contracts
    record["complete"] = True
    _write(args.out, record)
    minted = mint(w3, account, contracts["Token"], mints)
    sent = w3.eth.get_transaction_count(account.address) - before
    if args.json:
        print(
            json.dumps(
                {"deployment": str(args.out), "transactions": sent, "minted": minted, **record}
            )
        )
        return 0
    state = "resumed and completed" if old and not old.get("complete") else "complete"
    if old and old.get("complete"):
        state = "already complete (nothing sent)"
    print(f"deployment {state} on chain {chain_id}: {sent} transactions; wrote {args.out}")
    for name, address in contracts.items():
        print(f"  {name:<16} {Web3.to_checksum_address(address)}")
    for address, tokens in minted.items():
        print(f"  minted {tokens:g} test tokens to {address}")
    return 0


def parse_mints(given: list[str], chain_id: int) -> dict[str, int]:
    """--mint ACCOUNT=TOKENS as {checksum address: token units}; UserError for a bad one."""
    out: dict[str, int] = {}
    for item in given:
        who, sep, amount = item.rpartition("=")
        try:
            tokens = float(amount)
        except ValueError:
            tokens = -1.0
        if not sep or not who or not tokens > 0:
            raise UserError(f"--mint {item!r}: expected ACCOUNT=TOKENS with TOKENS > 0")
        if Web3.is_address(who):
            address = Web3.to_checksum_address(who)
        else:
            try:
                address = load_account(who, chain_id).address
            except KeyConfigError as exc:
                raise UserError(f"--mint {item!r}: {exc}") from None
        out[address] = round(tokens * TOKEN_UNIT)
    return out


def mint(w3: Web3, sender: Any, token: str, wanted: dict[str, int]) -> dict[str, float]:
    """Mint each account what it lacks of its wanted balance (so a re-run mints nothing);
    {address: tokens minted} of the ones that lacked any."""
    contract = w3.eth.contract(address=token, abi=load_artifact("TestToken")["abi"])
    minted: dict[str, float] = {}
    for address, target in wanted.items():
        lacking = target - contract.functions.balanceOf(address).call()
        if lacking <= 0:
            continue
        tx = contract.functions.mint(address, lacking).build_transaction(
            {
                "from": sender.address,
                "nonce": w3.eth.get_transaction_count(sender.address, "pending"),
                "chainId": w3.eth.chain_id,
            }
        )
        tx_hash = w3.eth.send_raw_transaction(sender.sign_transaction(tx).raw_transaction)
        if w3.eth.wait_for_transaction_receipt(tx_hash, timeout=120)["status"] != 1:
            raise UserError(f"--mint: minting to {address} reverted")
        minted[address] = lacking / TOKEN_UNIT
    return minted
