"""The protocol contracts a role talks to: the JobManager's address and those of the contracts
wired to it (court, RoundManager), from the command line or the deployment file."""

from __future__ import annotations

import json
from pathlib import Path

from web3 import Web3

from agents.roles.config import RoleConfig
from agents.roles.errors import RoleError

#: The deployment file's name of each contract wired to a JobManager, by the config field that
#: names it instead.
COMPANIONS = {"court": "AttestationCourt", "round_manager": "RoundManager", "lens": "JobLens"}


def manager_address(given: str | None, deployment: Path) -> str:
    """--manager (checked as it was parsed), else the deployment file's JobManager."""
    if given:
        return Web3.to_checksum_address(given)
    if not deployment.exists():
        raise RoleError(
            f"no --manager given and {deployment} does not exist (run `make demo` or `deploy`, "
            "or pass --manager 0x…)"
        )
    try:
        contracts = json.loads(deployment.read_text())["contracts"]
        return Web3.to_checksum_address(contracts["JobManager"])
    except (ValueError, KeyError, TypeError) as exc:
        raise RoleError(f"{deployment}: no contracts.JobManager address ({exc})") from None


def companion_address(config: RoleConfig, which: str, manager: str) -> str | None:
    """A contract wired to this JobManager (`which`: court, round_manager or lens): the config's
    if given, else the deployment file's when that file describes this manager."""
    given = {"court": config.court, "round_manager": config.round_manager, "lens": config.lens}
    if given[which]:
        return given[which]
    path = config.deployment
    if not path.is_file():
        return None
    try:
        contracts = json.loads(path.read_text())["contracts"]
    except (ValueError, KeyError):
        return None
    if contracts.get("JobManager", "").lower() != manager.lower():
        return None
    address = contracts.get(COMPANIONS[which])
    return Web3.to_checksum_address(address) if address else None


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
