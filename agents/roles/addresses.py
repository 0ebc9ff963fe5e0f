"""The protocol contracts a role talks to: the JobManager's address and those of the contracts
wired to it (court, RoundManager), from the command line or the deployment file."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from web3 import Web3

from agents.roles.errors import RoleError


def manager_address(args: argparse.Namespace) -> str:
    if args.manager:
        if not Web3.is_address(args.manager):
            raise RoleError(f"--manager {args.manager!r} is not an address")
        return Web3.to_checksum_address(args.manager)
    path = Path(args.deployment)
    if not path.exists():
        raise RoleError(
            f"no --manager given and {path} does not exist (run `make demo` or pass --manager 0x…)"
        )
    try:
        return Web3.to_checksum_address(json.loads(path.read_text())["contracts"]["JobManager"])
    except (ValueError, KeyError) as exc:
        raise RoleError(f"{path}: no contracts.JobManager address ({exc})") from None


def companion_address(
    args: argparse.Namespace, manager: str, flag: str, contract: str
) -> str | None:
    """A contract wired to this JobManager: `--<flag>` if given, else the deployment file's
    `contract` entry when that file describes this manager."""
    given = getattr(args, flag, None)
    if given:
        if not Web3.is_address(given):
            raise RoleError(f"--{flag.replace('_', '-')} {given!r} is not an address")
        return Web3.to_checksum_address(given)
    path = Path(getattr(args, "deployment", "") or "")
    if not path.is_file():
        return None
    try:
        contracts = json.loads(path.read_text())["contracts"]
    except (ValueError, KeyError):
        return None
    if contracts.get("JobManager", "").lower() != manager.lower():
        return None
    address = contracts.get(contract)
    return Web3.to_checksum_address(address) if address else None


def court_address(args: argparse.Namespace, manager: str) -> str | None:
    return companion_address(args, manager, "court", "AttestationCourt")


def deployment_block(path: str | Path, manager: str) -> int:
    """The block the deployment file at `path` was started at (`deploy` records it) when it
    describes this manager: no job of it is older, so event scans start there. 0 otherwise."""
    try:
        record = json.loads(Path(path).read_text())
        if record["contracts"]["JobManager"].lower() == manager.lower():
            return int(record.get("block", 0))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        pass
    return 0
