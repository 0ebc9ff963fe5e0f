"""Where an agent's signing key comes from, and the one rule about Anvil's dev keys.

Key sources (one string, as config carries it):

* ``keystore:/path/to/keyfile.json`` - an eth-account (Web3 Secret Storage) keystore; the
  password comes from the file named by ``VTP_KEY_PASSWORD_FILE`` or from ``VTP_KEY_PASSWORD``.
* ``env:VARNAME`` - a 0x-hex private key in an environment variable.
* ``dev:N`` - Anvil's well-known dev account N: only on a dev chain (chain id 31337).

Dev keys are public (derived from "test test ... junk"), so they are refused on any other
chain, and so is any keystore/env key that turns out to be one of them. Error messages name the
source, never the key.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from eth_account import Account
from eth_account.signers.local import LocalAccount
from eth_utils import keccak

DEV_CHAIN_IDS = frozenset({31337})
DEV_KEYS_CHECKED = 20  # Anvil's default account count (and ours)
PASSWORD_ENV = "VTP_KEY_PASSWORD"
PASSWORD_FILE_ENV = "VTP_KEY_PASSWORD_FILE"
_HEX_KEY = re.compile(r"^(0x)?[0-9a-fA-F]{64}$")


class KeyConfigError(ValueError):
    """The key source is unusable; the message is one line and holds no secret."""


@dataclass(frozen=True)
class KeySource:
    kind: str  # "keystore" | "env" | "dev"
    value: str  # path, variable name or account index

    def __str__(self) -> str:
        return f"{self.kind}:{self.value}"


def parse_key_source(spec: str) -> KeySource:
    kind, sep, value = spec.partition(":")
    if not sep or not value:
        raise KeyConfigError(f"key source {spec!r}: expected keystore:/path, env:VARNAME or dev:N")
    if kind == "keystore":
        return KeySource(kind, value)
    if kind == "env":
        if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", value):
            raise KeyConfigError(f"key source {spec!r}: {value!r} is not a variable name")
        return KeySource(kind, value)
    if kind == "dev":
        if not value.isdigit():
            raise KeyConfigError(f"key source {spec!r}: dev:N needs an account index")
        return KeySource(kind, value)
    raise KeyConfigError(f"key source {spec!r}: unknown kind {kind!r} (keystore, env or dev)")


@lru_cache(maxsize=1)
def _dev_addresses() -> frozenset[str]:
    from agents.core.chain import dev_private_key

    return frozenset(Account.from_key(dev_private_key(i)).address for i in range(DEV_KEYS_CHECKED))


def is_dev_account(address: str) -> bool:
    return address in _dev_addresses()


def load_account(
    source: KeySource | str, chain_id: int, env: Mapping[str, str] | None = None
) -> LocalAccount:
    """The account for `source` on chain `chain_id`; KeyConfigError on any problem."""
    src = parse_key_source(source) if isinstance(source, str) else source
    env = os.environ if env is None else env
    if src.kind == "dev":
        if chain_id not in DEV_CHAIN_IDS:
            raise KeyConfigError(
                f"refusing Anvil dev key {src} on chain id {chain_id}: dev keys are public; "
                "use keystore:/path or env:VARNAME"
            )
        from agents.core.chain import dev_private_key

        account = Account.from_key(dev_private_key(int(src.value)))
    elif src.kind == "env":
        raw = env.get(src.value)
        if not raw:
            raise KeyConfigError(f"key source {src}: environment variable {src.value} is not set")
        if not _HEX_KEY.match(raw.strip()):
            raise KeyConfigError(f"key source {src}: {src.value} is not a 32-byte hex key")
        account = Account.from_key(raw.strip())
    else:
        account = _from_keystore(Path(src.value), env)
    if chain_id not in DEV_CHAIN_IDS and is_dev_account(account.address):
        raise KeyConfigError(
            f"refusing key from {src} on chain id {chain_id}: it is one of Anvil's public dev keys"
        )
    return account


def _password(env: Mapping[str, str], path: Path) -> str:
    pw_file = env.get(PASSWORD_FILE_ENV)
    if pw_file:
        try:
            return Path(pw_file).read_text().rstrip("\r\n")
        except OSError as exc:
            raise KeyConfigError(
                f"keystore {path}: cannot read password file {pw_file}: {exc.strerror}"
            ) from None
    password = env.get(PASSWORD_ENV)
    if password is None:
        raise KeyConfigError(
            f"keystore {path} needs a password: set {PASSWORD_FILE_ENV} or {PASSWORD_ENV}"
        )
    return password


def _from_keystore(path: Path, env: Mapping[str, str]) -> LocalAccount:
    try:
        keyfile = json.loads(path.read_text())
    except FileNotFoundError:
        raise KeyConfigError(f"keystore {path} not found") from None
    except (OSError, ValueError) as exc:
        raise KeyConfigError(f"keystore {path} is not a readable JSON keystore: {exc}") from None
    password = _password(env, path)
    try:
        key = Account.decrypt(keyfile, password)
    except ValueError:
        raise KeyConfigError(f"keystore {path}: wrong password (or corrupt file)") from None
    return Account.from_key(key)


def write_keystore(
    private_key: str | bytes, path: Path, password: str, iterations: int | None = None
) -> Path:
    """Encrypt a key into a keystore file (owner-only permissions).

    `iterations` lowers the scrypt cost for tests; production keeps eth-account's default.
    """
    keyfile = Account.encrypt(private_key, password, kdf="scrypt", iterations=iterations)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump(keyfile, fh)
    return path


def derived_secret(account: LocalAccount, *words: int) -> bytes:
    """A secret only the key's holder can compute, the same after every restart: keccak of the
    private key followed by `words`, each a 32-byte big-endian word (a solver's forced-error
    secret of a unit's attempt: words = (unit, attempt)). The key's bytes stay here, beside the
    account they came from: a role asks for the secret and never handles the key."""
    data = bytes(account.key) + b"".join(w.to_bytes(32, "big") for w in words)
    return keccak(data)
