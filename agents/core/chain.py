"""Chain access shared by every role: connect to an RPC URL, or start a private Anvil.

`connect` fails fast with `ChainUnavailable` (one clear line) instead of a stack trace when the
node cannot be reached. `local_anvil` starts the npm-shipped `anvil` on a free 127.0.0.1 port and
always stops it, even when the body raises.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from web3 import AsyncWeb3, Web3
from web3.providers.rpc import AsyncHTTPProvider, HTTPProvider
from web3.providers.rpc.utils import ExceptionRetryConfiguration
from web3.types import RPCEndpoint

REPO_ROOT = Path(__file__).resolve().parents[2]
# Anvil's well-known dev mnemonic; its keys are only ever used on a dev chain.
DEV_MNEMONIC = "test test test test test test test test test test test junk"


class ChainUnavailable(RuntimeError):
    """The RPC endpoint could not be reached or did not answer like an Ethereum node."""


@dataclass(frozen=True)
class AnvilConfig:
    chain_id: int = 31337
    accounts: int = 20
    balance_eth: int = 10_000
    block_time: float | None = None  # None = automine: a block per transaction
    startup_timeout_s: float = 20.0
    extra_args: tuple[str, ...] = ()


def anvil_binary() -> str:
    """The anvil binary shipped by the npm package, falling back to one on PATH.

    The platform package's binary is preferred over the `.bin/anvil` Node wrapper: one process
    instead of two, so stopping (or the parent dying) takes the chain down with it.
    """
    npm_scope = REPO_ROOT / "node_modules" / "@foundry-rs"
    for binary in sorted(npm_scope.glob("anvil-*/bin/anvil")):
        if os.access(binary, os.X_OK):
            return str(binary)
    local = REPO_ROOT / "node_modules" / ".bin" / "anvil"
    if local.exists():
        return str(local)
    found = shutil.which("anvil")
    if found is None:
        raise ChainUnavailable("anvil not found: run `make setup` (npm ci) first")
    return found


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def connect(rpc_url: str, timeout_s: float = 5.0, attempts: int = 1) -> Web3:
    """A connected Web3 for `rpc_url`, or ChainUnavailable naming the URL and the reason.

    `attempts` > 1 retries the first call with backoff (0.5 s doubling): a long-running agent
    should survive one dropped connection at start-up; a one-shot probe should fail fast."""
    if not rpc_url.startswith(("http://", "https://")):
        raise ChainUnavailable(f"unsupported RPC URL {rpc_url!r}: expected http:// or https://")
    # The probe is not retried (a wrong URL fails fast); later calls are (see _read_retries).
    # eth_chainId is cached (web3 asks for it twice per eth_call, to validate the call's
    # chain id: two of every three requests of a role's round); nothing else is.
    provider = HTTPProvider(
        rpc_url,
        request_kwargs={"timeout": timeout_s},
        exception_retry_configuration=None,
        cache_allowed_requests=True,
        cacheable_requests={RPCEndpoint("eth_chainId")},
    )
    w3 = Web3(provider)
    for attempt in range(max(1, attempts)):
        try:
            w3.eth.chain_id  # noqa: B018 - a cheap call that proves the node answers
            break
        except Exception as exc:  # any transport or decoding failure means "not usable"
            if attempt + 1 >= max(1, attempts):
                reason = _reason(exc, timeout_s)
                raise ChainUnavailable(f"cannot reach RPC {rpc_url}: {reason}") from None
            time.sleep(0.5 * 2**attempt)
    provider.exception_retry_configuration = _read_retries()
    return w3


def async_provider(rpc_url: str, timeout_s: float = 10.0) -> AsyncHTTPProvider:
    """The HTTP provider of an AsyncWeb3: an agent's one client (agents/core/runtime.py) and the
    one-shot `job` commands'. eth_chainId is cached: web3 asks for it with every eth_call (to
    validate the call's chain id), two of every three requests of a role's round otherwise;
    nothing else is. Transport failures of reads are retried by web3's default (aiohttp's
    ClientError and timeouts, 5 times from 0.125 s doubling)."""
    if not rpc_url.startswith(("http://", "https://")):
        raise ChainUnavailable(f"unsupported RPC URL {rpc_url!r}: expected http:// or https://")
    return AsyncHTTPProvider(
        rpc_url,
        request_kwargs={"timeout": timeout_s},
        cache_allowed_requests=True,
        cacheable_requests={RPCEndpoint("eth_chainId")},
    )


async def async_connect(rpc_url: str, timeout_s: float = 10.0) -> AsyncWeb3:
    """A connected AsyncWeb3 for `rpc_url` (its chain id read once), or ChainUnavailable naming
    the URL and the reason; the caller disconnects it (`await w3.provider.disconnect()`)."""
    w3 = AsyncWeb3(async_provider(rpc_url, timeout_s))
    try:
        await w3.eth.chain_id
    except Exception as exc:  # any transport or decoding failure means "not usable"
        await w3.provider.disconnect()
        text = str(exc).splitlines()[0][:160] if str(exc) else type(exc).__name__
        raise ChainUnavailable(f"cannot reach RPC {rpc_url}: {text}") from None
    return w3


def _read_retries() -> ExceptionRetryConfiguration:
    """Retry transient transport failures of reads (and of re-sending the same signed bytes,
    which is idempotent) with backoff: 0.25 s doubling, about 8 s in all, enough to ride out a
    dropped connection, an HTTP 429/503 from a busy provider or a node restart. web3's default
    lists only the built-in ConnectionError, which requests' ConnectionError is not."""
    import requests

    return ExceptionRetryConfiguration(
        errors=(ConnectionError, requests.ConnectionError, requests.HTTPError, requests.Timeout),
        retries=6,
        backoff_factor=0.25,
    )


def _reason(exc: Exception, timeout_s: float) -> str:
    """A short human reason for a failed RPC call (no nested urllib3 repr)."""
    import requests

    if isinstance(exc, requests.exceptions.Timeout):
        return f"no answer within {timeout_s:g} s"
    if isinstance(exc, requests.exceptions.ConnectionError):
        text = str(exc)
        for marker in ("Connection refused", "Name or service not known", "No route to host"):
            if marker in text:
                return marker.lower()
        return "connection failed"
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text[:160]


@contextlib.contextmanager
def local_anvil(config: AnvilConfig | None = None) -> Iterator[str]:
    """Start Anvil on a free loopback port, yield its RPC URL, stop it on exit."""
    config = config or AnvilConfig()
    port = free_port()
    cmd = [
        anvil_binary(),
        "--host", "127.0.0.1",
        "--port", str(port),
        "--chain-id", str(config.chain_id),
        "--accounts", str(config.accounts),
        "--balance", str(config.balance_eth),
        "--mnemonic", DEV_MNEMONIC,
        "--silent",
        *config.extra_args,
    ]  # fmt: skip
    if config.block_time is not None:
        cmd += ["--block-time", str(config.block_time)]
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
        preexec_fn=_die_with_parent,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(proc, url, config.startup_timeout_s)
        yield url
    finally:
        _stop(proc)


def _die_with_parent() -> None:
    """Ask Linux to SIGTERM the child when the process that started it dies (even by kill -9),
    so a crashed test or demo never leaves an orphaned Anvil behind. No-op elsewhere."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGTERM)
    except (OSError, AttributeError):
        pass


def _wait_ready(proc: subprocess.Popen, url: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            err = proc.stderr.read().decode(errors="replace").strip() if proc.stderr else ""
            raise ChainUnavailable(f"anvil exited with code {proc.returncode}: {err[:200]}")
        try:
            connect(url, timeout_s=1.0)
            return
        except ChainUnavailable:
            time.sleep(0.05)
    raise ChainUnavailable(f"anvil did not answer on {url} within {timeout_s:.0f} s")


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, 15)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, 9)
            proc.wait(timeout=5)
    if proc.stderr:
        proc.stderr.close()


def dev_private_key(index: int) -> str:
    """Private key of Anvil's dev account `index` (dev chains only)."""
    from eth_account import Account

    Account.enable_unaudited_hdwallet_features()
    acct = Account.from_mnemonic(DEV_MNEMONIC, account_path=f"m/44'/60'/0'/0/{index}")
    return acct.key.hex()
