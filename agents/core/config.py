"""An agent's configuration: one frozen dataclass, from command-line flags and environment.

Precedence: flag > environment variable > default. Every problem found is reported at once,
one line each, naming both the flag and the variable, as a `ConfigError`. Roles add their own
flags to `build_parser()`'s parser and read them from the same namespace.

| field           | flag               | environment          | default                 |
|-----------------|--------------------|----------------------|-------------------------|
| rpc_url         | --rpc-url          | VTP_RPC_URL          | none: a private Anvil   |
| key             | --key              | VTP_KEY              | required                |
| data_dir        | --data-dir         | VTP_DATA_DIR         | required                |
| confirmations   | --confirmations    | VTP_CONFIRMATIONS    | 2                       |
| poll_interval   | --poll-interval    | VTP_POLL_INTERVAL    | 1.0 s                   |
| receipt_timeout | --receipt-timeout  | VTP_RECEIPT_TIMEOUT  | 120 s                   |
| blob_url        | --blob-url         | VTP_BLOB_URL         | <data_dir>/blobs        |

The data folder is required on purpose: it is what lets a restarted agent resume without
double-sending, and a silent default could let two agents share one.
"""

from __future__ import annotations

import argparse
import os
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agents.core.keys import KeyConfigError, parse_key_source


class ConfigError(ValueError):
    """Invalid configuration; `problems` holds one line per issue."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("invalid agent configuration:\n  " + "\n  ".join(problems))
        self.problems = problems


@dataclass(frozen=True)
class AgentConfig:
    key: str
    data_dir: Path
    rpc_url: str | None = None
    confirmations: int = 2
    poll_interval: float = 1.0
    receipt_timeout: float = 120.0
    blob_url: str | None = None

    @property
    def db_path(self) -> Path:
        return self.data_dir / "agent.db"

    @property
    def blob_location(self) -> str:
        return self.blob_url or str(self.data_dir / "blobs")


@dataclass(frozen=True)
class _Field:
    name: str
    flag: str
    env: str
    parse: Callable[[str], Any]
    help: str


def _rpc(value: str) -> str:
    parsed = urllib.parse.urlparse(value)
    if parsed.scheme not in ("http", "https", "ws", "wss") or not parsed.hostname:
        raise ValueError("expected an http(s):// or ws(s):// URL with a host")
    return value


def _key(value: str) -> str:
    try:
        parse_key_source(value)
    except KeyConfigError as exc:
        raise ValueError(str(exc)) from None
    return value


def _nonneg_int(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        raise ValueError("expected an integer >= 0") from None
    if n < 0:
        raise ValueError("expected an integer >= 0")
    return n


def _positive_float(value: str) -> float:
    try:
        x = float(value)
    except ValueError:
        raise ValueError("expected a number of seconds > 0") from None
    if not x > 0 or x == float("inf"):
        raise ValueError("expected a number of seconds > 0")
    return x


def _blob(value: str) -> str:
    parsed = urllib.parse.urlparse(value)
    if parsed.scheme in ("", "file", "http", "https"):
        if parsed.scheme in ("http", "https") and not parsed.hostname:
            raise ValueError("an http(s) blob URL needs a host")
        return value
    if parsed.scheme == "s3":
        if not parsed.netloc:
            raise ValueError("an s3:// blob URL needs a bucket: s3://bucket[/prefix]")
        return value
    raise ValueError("expected a path, file://, http(s):// or s3:// URL")


FIELDS = (
    _Field("rpc_url", "--rpc-url", "VTP_RPC_URL", _rpc, "node RPC URL (default: private Anvil)"),
    _Field("key", "--key", "VTP_KEY", _key, "key source: keystore:/path, env:VAR or dev:N"),
    _Field("data_dir", "--data-dir", "VTP_DATA_DIR", Path, "the agent's data folder"),
    _Field("confirmations", "--confirmations", "VTP_CONFIRMATIONS", _nonneg_int,
           "blocks an event must be buried under before it is acted on"),
    _Field("poll_interval", "--poll-interval", "VTP_POLL_INTERVAL", _positive_float,
           "seconds between polls of the node"),
    _Field("receipt_timeout", "--receipt-timeout", "VTP_RECEIPT_TIMEOUT", _positive_float,
           "seconds to wait for a receipt before reporting a pending tx"),
    _Field("blob_url", "--blob-url", "VTP_BLOB_URL", _blob,
           "blob store: path, http(s)://host:port or s3://bucket?endpoint=..."),
)  # fmt: skip
REQUIRED = ("key", "data_dir")


def build_parser(
    prog: str | None = None, description: str | None = None
) -> argparse.ArgumentParser:
    """A parser with the core's flags (all default to None so the environment can fill in)."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    for f in FIELDS:
        parser.add_argument(f.flag, dest=f.name, default=None, help=f"{f.help} [{f.env}]")
    return parser


def config_from(namespace: argparse.Namespace, env: Mapping[str, str] | None = None) -> AgentConfig:
    """Merge parsed flags with the environment and validate; ConfigError lists every problem."""
    env = os.environ if env is None else env
    values: dict[str, Any] = {}
    problems: list[str] = []
    for f in FIELDS:
        raw = getattr(namespace, f.name, None)
        origin = f.flag
        if raw is None and env.get(f.env):
            raw, origin = env[f.env], f.env
        if raw is None:
            if f.name in REQUIRED:
                problems.append(f"{f.name}: required; pass {f.flag} or set {f.env}")
            continue
        try:
            values[f.name] = f.parse(str(raw))
        except ValueError as exc:
            problems.append(f"{f.name} ({origin}={str(raw)[:60]!r}): {exc}")
    if problems:
        raise ConfigError(problems)
    return AgentConfig(**values)


def load_config(
    argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None,
    parser: argparse.ArgumentParser | None = None,
) -> AgentConfig:  # fmt: skip
    parser = parser or build_parser()
    namespace = parser.parse_args(argv)
    return config_from(namespace, env)
