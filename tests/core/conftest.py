"""Fixtures for the core tests: a private Anvil per module (never ape's provider).

Each chain-using test module gets its own Anvil from `local_anvil()` (stopped at module end),
so tests that switch automine off, reorg or roll back cannot disturb other modules; tests in
one module use distinct dev accounts so their nonces do not interfere.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from corekit import Chain

from agents.core.chain import AnvilConfig, connect, dev_private_key, local_anvil
from agents.core.deploy import deploy_contract, load_artifact


@pytest.fixture(scope="module")
def chain() -> Iterator[Chain]:
    with local_anvil(AnvilConfig(accounts=20)) as url:
        w3 = connect(url)
        token = deploy_contract(w3, dev_private_key(0), "TestToken")
        yield Chain(url, w3, token, load_artifact("TestToken")["abi"])
