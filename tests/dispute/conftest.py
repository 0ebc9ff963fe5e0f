"""Fixtures of the dispute-game tests: the game deployed once per session behind a recording
job manager (dispute_fixtures.deploy_game) and a chain snapshot per test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from dispute_fixtures import Deployment, ape_artifacts, deploy_game
from web3 import Web3


@pytest.fixture(scope="session")
def w3(chain) -> Web3:
    return chain.provider.web3


@pytest.fixture(scope="session")
def dep(w3, project) -> Deployment:
    return deploy_game(w3, ape_artifacts(project))


@pytest.fixture
def snapshot(chain) -> Iterator[None]:
    sid = chain.snapshot()
    yield
    chain.restore(sid)
