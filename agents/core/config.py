"""An agent's configuration: one frozen dataclass, from command-line flags and environment.

Every setting is a dataclass field whose metadata says how the command line offers it (its help,
its flag, its VTP_ environment variable; `setting`); agents/cli/options.py turns the fields into
flags and a parsed command line into the dataclass, with the precedence flag > environment
variable > default, every problem found reported at once, one line each, naming both the flag
and the variable, as a `ConfigError`. The role settings (agents/roles/config.py) are built the
same way.

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

import dataclasses
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any


class ConfigError(ValueError):
    """Invalid configuration; `problems` holds one line per issue."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("invalid agent configuration:\n  " + "\n  ".join(problems))
        self.problems = problems


#: The one default deployment file: what `deploy` writes, `make demo` too, and what every role
#: and `job status|fetch` read unless --deployment names another (here, in the light config
#: module, so the commands that only name it import no role code).
DEFAULT_DEPLOYMENT = Path("build/deployment.json")


def setting(
    default: Any = dataclasses.MISSING,
    help: str = "",
    *,
    parse: Callable[[str], Any] | None = None,
    flag: str | None = None,
    env: str | None = "",
    **more: Any,
) -> Any:
    """A config field offered on the command line: `help` its flag's help; `parse` turns one
    given string into the value (ValueError: why not; default: the field's type); `flag`
    (default --<name>, a bool's --no-<name> turns it off) and `env` (default VTP_<NAME>; None:
    no variable) name it; `more` are argparse's (metavar, choices, positional, nargs) or
    `default` as the help shows it. No default: required."""
    meta = {"help": help, "parse": parse, "flag": flag, "env": env, **more}
    if isinstance(default, list | dict | set):
        raise TypeError("a setting's default is immutable (a tuple)")
    return dataclasses.field(default=default, metadata=meta)


def _rpc(value: str) -> str:
    parsed = urllib.parse.urlparse(value)
    if parsed.scheme not in ("http", "https", "ws", "wss") or not parsed.hostname:
        raise ValueError("expected an http(s):// or ws(s):// URL with a host")
    return value


def _key(value: str) -> str:
    # here, not at the top: eth_account takes ~0.5 s to import, and commands without a key
    # (`job build`) parse their flags through this module
    from agents.core.keys import KeyConfigError, parse_key_source

    try:
        parse_key_source(value)
    except KeyConfigError as exc:
        raise ValueError(str(exc)) from None
    return value


def bounded(kind: type, what: str, ok: Callable[[Any], bool]) -> Callable[[str], Any]:
    """A setting's parser: `kind` of the text, for which `ok` holds; else "expected `what`"."""

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise ValueError(f"expected {what}") from None
        if not ok(value):
            raise ValueError(f"expected {what}")
        return value

    return parse


nonneg_int = bounded(int, "an integer >= 0", lambda n: n >= 0)
positive_int = bounded(int, "a whole number > 0", lambda n: n > 0)
positive = bounded(float, "a number > 0", lambda x: 0 < x < float("inf"))
nonneg = bounded(float, "a number >= 0", lambda x: 0 <= x < float("inf"))
seconds = bounded(float, "a number of seconds > 0", lambda x: 0 < x < float("inf"))


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


@dataclass(frozen=True)
class AgentConfig:
    key: str = setting(help="key source: keystore:/path, env:VAR or dev:N", parse=_key)
    data_dir: Path = setting(help="the agent's data folder")
    rpc_url: str | None = setting(None, "node RPC URL (default: private Anvil)", parse=_rpc)
    confirmations: int = setting(
        2, "blocks an event must be buried under before it is acted on", parse=nonneg_int
    )
    poll_interval: float = setting(1.0, "seconds between polls of the node", parse=seconds)
    receipt_timeout: float = setting(
        120.0, "seconds to wait for a receipt before reporting a pending tx", parse=seconds
    )
    blob_url: str | None = setting(
        None, "blob store: path, http(s)://host:port or s3://bucket?endpoint=...", parse=_blob
    )

    @property
    def db_path(self) -> Path:
        return self.data_dir / "agent.db"

    @property
    def blob_location(self) -> str:
        return self.blob_url or str(self.data_dir / "blobs")
