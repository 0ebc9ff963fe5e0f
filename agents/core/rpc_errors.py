"""What a node's error answer means, in every client's own wording (pure: no I/O).

Each client words the same refusal its own way, and the sender acts on the meaning, not on the
words: a transaction the node already holds is no error; a nonce below the account's means ours
was taken (or mined); a nonce above it means a transaction of ours before it never reached the
node (a client without a queue refuses it); a transaction that was mined and failed (a client
that reports the failure as the answer to the send) is settled by its receipt. The table names
each client's wording so that a new client is one row, and the tests read the real strings.

Revert data, likewise, comes back in three shapes: a hex string (Anvil, Geth, Hardhat; Ganache's
eth_call), an object with `result` (Ganache 7's eth_estimateGas: {"message": "revert",
"result": "0x…", "programCounter": …}) or keyed by transaction hash (Ganache 6: {"0x<hash>":
{"error": "revert", "return": "0x…"}}); `revert_data` reads all three.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


class SendError(enum.StrEnum):
    """The meaning of an error answer to eth_sendRawTransaction."""

    KNOWN = "known"  # the node already holds this very transaction
    NONCE_LOW = "nonce_low"  # the nonce is used: ours was mined, or another tx took it
    NONCE_HIGH = "nonce_high"  # a nonce of ours before it is missing (no queue on this node)
    UNDERPRICED = "underpriced"  # another pool tx holds the nonce at a better price
    MINED_FAILED = "mined_failed"  # mined with status 0: the receipt settles it (TxFailed)
    OTHER = "other"  # refused for a reason the sender cannot act on


@dataclass(frozen=True)
class Wording:
    client: str
    text: str  # matched lower-case, anywhere in the message
    meaning: SendError


#: Read in order; no two rows' texts occur in one client's message.
SEND_ERROR_WORDING: tuple[Wording, ...] = (
    Wording("geth, anvil", "already known", SendError.KNOWN),
    Wording("openethereum, nethermind, hardhat 2", "known transaction", SendError.KNOWN),
    Wording("besu", "already imported", SendError.KNOWN),
    # Geth/Anvil "nonce too low: next nonce 4, tx nonce 3"; Hardhat "Nonce too low. Expected
    # nonce to be 4 but got 3."
    Wording("geth, anvil, hardhat", "nonce too low", SendError.NONCE_LOW),
    Wording("erigon", "nonce is too low", SendError.NONCE_LOW),
    Wording("anvil", "invalid nonce", SendError.NONCE_LOW),
    # Hardhat's automine keeps no queue: "Nonce too high. Expected nonce to be 0x2, but got
    # 0x4. Note that transactions can't be queued when automining."
    Wording("hardhat, geth", "nonce too high", SendError.NONCE_HIGH),
    Wording("geth, anvil, ganache", "underpriced", SendError.UNDERPRICED),
    # Hardhat mines the transaction and answers the send with its failure
    Wording("hardhat", "transaction ran out of gas", SendError.MINED_FAILED),
    Wording("hardhat", "transaction reverted", SendError.MINED_FAILED),
    Wording(
        "hardhat, ganache", "vm exception while processing transaction", SendError.MINED_FAILED
    ),
)

#: Ganache words a wrong nonce one way for both directions: "the tx doesn't have the correct
#: nonce. account has nonce of: 5 tx has nonce of: 4"; the two numbers tell which.
_GANACHE_NONCE = re.compile(
    r"doesn't have the correct nonce\. account has nonce of: (\d+) tx has nonce of: (\d+)"
)


def classify_send_error(message: str) -> SendError:
    """The meaning of a node's error answer to a send, from any client's wording."""
    m = message.lower()
    ganache = _GANACHE_NONCE.search(m)
    if ganache is not None:
        account, tx = int(ganache.group(1)), int(ganache.group(2))
        return SendError.NONCE_LOW if tx < account else SendError.NONCE_HIGH
    for row in SEND_ERROR_WORDING:
        if row.text in m:
            return row.meaning
    return SendError.OTHER


def _hex_bytes(value: Any) -> bytes | None:
    if isinstance(value, bytes):
        return value
    if isinstance(value, str) and value.startswith("0x"):
        try:
            return bytes.fromhex(value[2:])
        except ValueError:
            return None
    return None


def revert_data(data: Any) -> bytes:
    """The revert payload of an error's `data`, in whichever shape the client gave it (b"" when
    there is none)."""
    direct = _hex_bytes(data)
    if direct is not None:
        return direct
    if not isinstance(data, Mapping):
        return b""
    for field in ("data", "result", "return"):  # Anvil nests "data"; Ganache 7 "result"
        if field in data:
            found = revert_data(data[field])
            if found:
                return found
    for key, inner in data.items():  # Ganache 6: keyed by the transaction's hash
        if isinstance(key, str) and key.startswith("0x") and isinstance(inner, Mapping):
            found = revert_data(inner)
            if found:
                return found
    return b""


def transport_errors() -> tuple[type[BaseException], ...]:
    """What an async web3 client raises when the node cannot be reached or answers with an HTTP
    error (aiohttp's ClientError: a 503 is its ClientResponseError), times out or drops the
    connection: what the sender, the event streams and the roles' rounds retry."""
    import asyncio

    import aiohttp

    return (aiohttp.ClientError, asyncio.TimeoutError, ConnectionError, OSError)
