"""The explorer's start-up configuration and the deployment it reads.

`ExploreConfig` is built once from the command line (agents/cli/explore.py) and is all the app
sees; `Deployment` is the contracts' addresses from the file `deploy` (or a demo) wrote.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from web3 import Web3

DEFAULT_PORT = 8600


class ExploreError(Exception):
    """A mistake in the explorer's command line or deployment file: one line, exit 2."""


@dataclass(frozen=True)
class ExploreConfig:
    rpc_url: str | None  # None: the deployment file's
    deployment: Path
    port: int = DEFAULT_PORT
    host: str = "127.0.0.1"
    # dev chains only: also read a commitment's blobs from a local folder it names
    allow_local_locators: bool = False
    spec_stores: tuple[str, ...] = ()  # blob stores tried for specs and model bundles first
    poll_interval: float = 1.0  # seconds between event polls when no new head is pushed


@dataclass(frozen=True)
class Deployment:
    """The contracts the explorer reads, by the names `deploy` writes."""

    rpc_url: str | None
    block: int  # the deployment's first block: event scans start there
    contracts: dict[str, str]

    def address(self, name: str) -> str | None:
        value = self.contracts.get(name)
        return Web3.to_checksum_address(value) if value else None

    @classmethod
    def load(cls, path: Path) -> Deployment:
        try:
            record = json.loads(path.read_text())
            contracts = {str(k): str(v) for k, v in record["contracts"].items()}
            contracts["JobManager"]  # noqa: B018 - the one contract every page needs
        except FileNotFoundError:
            raise ExploreError(f"--deployment {path}: no such file (run `deploy` first)") from None
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ExploreError(f"--deployment {path}: not a deployment file ({exc})") from None
        for name, address in contracts.items():
            if not Web3.is_address(address):
                raise ExploreError(f"--deployment {path}: {name} {address!r} is not an address")
        return cls(record.get("rpc_url"), int(record.get("block", 0) or 0), contracts)
