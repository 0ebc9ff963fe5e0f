"""Packed-dataset tests: `train` and `configure` set where this process fetches packed datasets
from (a module global, agents/core/chunks.py); each test starts from the environment's."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from agents.core import chunks


@pytest.fixture(autouse=True)
def _fresh_fetch_config() -> Iterator[None]:
    chunks.configure(None)
    yield
    chunks.configure(None)
