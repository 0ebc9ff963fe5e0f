"""Helpers of the dispute-game tests (conftest.py has the fixtures): example counts per
profile and provider, time travel, ape artifacts; the rest is agents/dispute/harness.py.

Runs on Anvil (`--network ethereum:local:foundry`) and on ape's py-evm chain
(`--network ethereum:local:test`): only ape's provider-neutral chain API (snapshot, restore,
mine) and web3.py with locally signed transactions are used.
"""

from __future__ import annotations

import os

from agents.dispute.harness import (  # noqa: F401 - re-exported for the tests
    CLOCK_BUDGET,
    Deployment,
    Job,
    deploy_game,
    make_job,
    open_game,
    open_segment_game,
)

EXAMPLES = {"ci": 1, "fuzz": 10}  # multiplier of each property test's CI example count
PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "ci")


def examples(ci: int, provider: str = "foundry") -> int:
    """Examples of a property test: its CI count (x10 under `make fuzz`); on ape's in-process
    py-evm chain, which runs a game ~8x slower than Anvil, a quarter of that."""
    n = ci * EXAMPLES.get(PROFILE, 1)
    return n if provider != "test" else max(3, n // 4)


def ape_artifacts(project):
    """Contract name -> (abi, creation bytecode) from ape's compiled project."""

    def get(name: str) -> tuple[list, str]:
        ct = getattr(project, name).contract_type
        abi = ct.model_dump(mode="json", by_alias=True)["abi"]
        return abi, ct.deployment_bytecode.bytecode

    return get


def advance(chain):
    def _advance(seconds: int) -> None:
        chain.mine(1, deltatime=int(seconds))

    return _advance
