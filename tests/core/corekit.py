"""Helpers shared by the core tests (imported by name: tests/ is not a package)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

from web3 import AsyncWeb3, Web3
from web3.providers.rpc import AsyncHTTPProvider


@dataclass
class Chain:
    url: str
    w3: Web3
    token: str  # TestToken address
    token_abi: list

    def rpc(self, method: str, params: list | None = None):
        response = self.w3.provider.make_request(method, params or [])
        if "error" in response:
            raise RuntimeError(f"{method}: {response['error']}")
        return response["result"]

    def token_contract(self):
        return self.w3.eth.contract(address=self.token, abi=self.token_abi)


@contextlib.asynccontextmanager
async def async_w3(url: str) -> AsyncIterator[AsyncWeb3]:
    w3 = AsyncWeb3(AsyncHTTPProvider(url, request_kwargs={"timeout": 10}))
    try:
        yield w3
    finally:
        await w3.provider.disconnect()
