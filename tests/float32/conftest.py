"""Fixtures for the Float32 / RepOps / TensorMerkle tests: one deployment per module."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def deployer(accounts):
    return accounts[0]


@pytest.fixture(scope="session")
def f32h(project, deployer):
    """The deployed Float32Harness."""
    return deployer.deploy(project.Float32Harness)


@pytest.fixture(scope="session")
def ops_h(project, deployer):
    """The deployed OpHarness."""
    return deployer.deploy(project.OpHarness)
