"""Per-agent persistence in one SQLite file (WAL mode), so a restarted agent resumes.

What lives here: event-stream cursors and block checkpoints, delivered events (for retraction
after a reorg), the per-handler "handled" state that makes handlers idempotent, transaction
intents (recorded before broadcast: the heart of "no double-send"), and the role-level records
(jobs, games) and secrets.

The schema is versioned with `PRAGMA user_version`; `MIGRATIONS[i]` upgrades version i to i+1,
so an agent started on an old data folder upgrades it in place, and a data folder written by a
newer agent is refused instead of being misread.

Thread safety: one connection guarded by a re-entrant lock; `transaction()` groups writes
atomically (and nests by joining the outer transaction). The asyncio code of the core calls it
directly: each statement is a local, sub-millisecond write, and WAL + synchronous=NORMAL keeps
commits cheap while remaining crash-consistent (a crash loses at most the last commits, never
corrupts, and the tx intent is committed before the broadcast it describes).
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MIGRATIONS: list[str] = [
    # 0 -> 1: the initial schema.
    """
    CREATE TABLE cursors (
        stream TEXT PRIMARY KEY,
        block_number INTEGER NOT NULL,
        block_hash TEXT            -- NULL: before the first block, nothing to check
    );
    CREATE TABLE checkpoints (
        stream TEXT NOT NULL,
        block_number INTEGER NOT NULL,
        block_hash TEXT NOT NULL,
        PRIMARY KEY (stream, block_number)
    );
    CREATE TABLE delivered (
        stream TEXT NOT NULL,
        event_id TEXT NOT NULL,
        block_number INTEGER NOT NULL,
        log_index INTEGER NOT NULL,
        payload TEXT NOT NULL,      -- JSON of the raw log, to rebuild the event for retraction
        retracted INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (stream, event_id)
    );
    CREATE INDEX delivered_by_block ON delivered (stream, block_number);
    CREATE TABLE handled (
        handler TEXT NOT NULL,
        event_id TEXT NOT NULL,
        state TEXT NOT NULL CHECK (state IN ('applied', 'retracted')),
        PRIMARY KEY (handler, event_id)
    );
    CREATE TABLE intents (
        intent_id TEXT PRIMARY KEY,
        sender TEXT NOT NULL,
        request_digest TEXT NOT NULL,
        nonce INTEGER NOT NULL,
        raw_tx TEXT NOT NULL,
        tx_hash TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('pending', 'mined', 'failed')),
        broadcasts INTEGER NOT NULL DEFAULT 0,
        resigns INTEGER NOT NULL DEFAULT 0,
        block_number INTEGER,
        gas_used INTEGER,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL
    );
    CREATE INDEX intents_pending ON intents (sender, status, nonce);
    CREATE TABLE records (
        kind TEXT NOT NULL,         -- 'job', 'game', ... (roles choose)
        record_id TEXT NOT NULL,
        state TEXT NOT NULL,
        data TEXT NOT NULL,         -- JSON
        updated_at REAL NOT NULL,
        PRIMARY KEY (kind, record_id)
    );
    CREATE TABLE secrets (
        name TEXT PRIMARY KEY,
        value BLOB NOT NULL
    );
    """,
]
SCHEMA_VERSION = len(MIGRATIONS)


class StoreError(RuntimeError):
    pass


@dataclass(frozen=True)
class Cursor:
    block_number: int  # last block fully processed; start_block - 1 before anything
    block_hash: str | None


@dataclass(frozen=True)
class Checkpoint:
    block_number: int
    block_hash: str


@dataclass(frozen=True)
class Intent:
    intent_id: str
    sender: str
    request_digest: str
    nonce: int
    raw_tx: str
    tx_hash: str
    status: str  # pending | mined | failed
    broadcasts: int
    resigns: int
    block_number: int | None
    gas_used: int | None


@dataclass(frozen=True)
class Record:
    kind: str
    record_id: str
    state: str
    data: dict[str, Any]
    updated_at: float


class Store:
    """One agent's SQLite database. `Store(":memory:")` for pure-logic tests."""

    def __init__(self, path: str | Path, clock_wall: Any = None) -> None:
        import time

        self.path = str(path)
        self._wall = clock_wall or time.time
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        self._depth = 0
        self._conn = sqlite3.connect(
            self.path, isolation_level=None, check_same_thread=False, timeout=30.0
        )
        if self.path != ":memory:":
            # Secrets and signed transactions live here: owner-only.
            os.chmod(self.path, 0o600)
            self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.execute("PRAGMA foreign_keys=ON")
        self._migrate()

    # --- plumbing --------------------------------------------------------------------------
    def _migrate(self) -> None:
        with self._lock:
            version = self._conn.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise StoreError(
                    f"{self.path}: schema version {version} is newer than this agent's "
                    f"{SCHEMA_VERSION}; upgrade the agent"
                )
            for target in range(version, SCHEMA_VERSION):
                self._conn.execute("BEGIN IMMEDIATE")
                try:
                    for statement in _split_sql(MIGRATIONS[target]):
                        self._conn.execute(statement)
                    self._conn.execute(f"PRAGMA user_version = {target + 1}")
                    self._conn.execute("COMMIT")
                except BaseException:
                    self._conn.execute("ROLLBACK")
                    raise

    @property
    def schema_version(self) -> int:
        with self._lock:
            return int(self._conn.execute("PRAGMA user_version").fetchone()[0])

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """Group writes atomically; nested calls join the outermost transaction."""
        with self._lock:
            if self._depth:
                self._depth += 1
                try:
                    yield
                finally:
                    self._depth -= 1
                return
            self._conn.execute("BEGIN IMMEDIATE")
            self._depth = 1
            try:
                yield
            except BaseException:
                self._depth = 0
                self._conn.execute("ROLLBACK")
                raise
            self._depth = 0
            self._conn.execute("COMMIT")

    def _exec(self, sql: str, params: tuple[Any, ...] = ()) -> None:
        with self._lock:
            self._conn.execute(sql, params)

    # Reads fetch under the lock too: the connection is shared between threads.
    def _one(self, sql: str, params: tuple[Any, ...] = ()) -> Any:
        with self._lock:
            return self._conn.execute(sql, params).fetchone()

    def _all(self, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
        with self._lock:
            return self._conn.execute(sql, params).fetchall()

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    # --- event stream ----------------------------------------------------------------------
    def get_cursor(self, stream: str) -> Cursor | None:
        row = self._one("SELECT block_number, block_hash FROM cursors WHERE stream = ?", (stream,))
        return Cursor(row[0], row[1]) if row else None

    def set_cursor(self, stream: str, cursor: Cursor) -> None:
        self._exec(
            "INSERT INTO cursors (stream, block_number, block_hash) VALUES (?, ?, ?) "
            "ON CONFLICT (stream) DO UPDATE SET block_number = excluded.block_number, "
            "block_hash = excluded.block_hash",
            (stream, cursor.block_number, cursor.block_hash),
        )

    def add_checkpoint(self, stream: str, checkpoint: Checkpoint) -> None:
        self._exec(
            "INSERT OR REPLACE INTO checkpoints (stream, block_number, block_hash) "
            "VALUES (?, ?, ?)",
            (stream, checkpoint.block_number, checkpoint.block_hash),
        )

    def checkpoints(self, stream: str) -> list[Checkpoint]:
        """Newest first."""
        rows = self._all(
            "SELECT block_number, block_hash FROM checkpoints WHERE stream = ? "
            "ORDER BY block_number DESC",
            (stream,),
        )
        return [Checkpoint(n, h) for n, h in rows]

    def drop_checkpoints_above(self, stream: str, block_number: int) -> None:
        self._exec(
            "DELETE FROM checkpoints WHERE stream = ? AND block_number > ?",
            (stream, block_number),
        )

    def prune_checkpoints(self, stream: str, keep: int, protect: int = -1) -> None:
        """Keep the newest `keep` checkpoints and the `protect` one (the stream's anchor)."""
        self._exec(
            "DELETE FROM checkpoints WHERE stream = ? AND block_number != ? AND block_number "
            "NOT IN (SELECT block_number FROM checkpoints WHERE stream = ? "
            "ORDER BY block_number DESC LIMIT ?)",
            (stream, protect, stream, keep),
        )

    def record_delivered(
        self, stream: str, event_id: str, block_number: int, log_index: int, payload: dict
    ) -> None:
        self._exec(
            "INSERT INTO delivered (stream, event_id, block_number, log_index, payload) "
            "VALUES (?, ?, ?, ?, ?) ON CONFLICT (stream, event_id) DO UPDATE SET retracted = 0",
            (stream, event_id, block_number, log_index, json.dumps(payload)),
        )

    def delivered_above(self, stream: str, block_number: int) -> list[dict]:
        """Payloads of live (unretracted) deliveries above a block, newest first."""
        rows = self._all(
            "SELECT payload FROM delivered WHERE stream = ? AND block_number > ? "
            "AND retracted = 0 ORDER BY block_number DESC, log_index DESC",
            (stream, block_number),
        )
        return [json.loads(r[0]) for r in rows]

    def mark_retracted(self, stream: str, event_id: str) -> None:
        self._exec(
            "UPDATE delivered SET retracted = 1 WHERE stream = ? AND event_id = ?",
            (stream, event_id),
        )

    def handled_state(self, handler: str, event_id: str) -> str | None:
        row = self._one(
            "SELECT state FROM handled WHERE handler = ? AND event_id = ?", (handler, event_id)
        )
        return row[0] if row else None

    def set_handled(self, handler: str, event_id: str, state: str) -> None:
        self._exec(
            "INSERT INTO handled (handler, event_id, state) VALUES (?, ?, ?) "
            "ON CONFLICT (handler, event_id) DO UPDATE SET state = excluded.state",
            (handler, event_id, state),
        )

    # --- transaction intents ---------------------------------------------------------------
    def get_intent(self, intent_id: str) -> Intent | None:
        row = self._one(f"SELECT {_INTENT_COLS} FROM intents WHERE intent_id = ?", (intent_id,))
        return Intent(*row) if row else None

    def pending_intents(self, sender: str) -> list[Intent]:
        rows = self._all(
            f"SELECT {_INTENT_COLS} FROM intents WHERE sender = ? AND status = 'pending' "
            "ORDER BY nonce",
            (sender,),
        )
        return [Intent(*r) for r in rows]

    def intents(self, sender: str | None = None) -> list[Intent]:
        if sender is None:
            rows = self._all(f"SELECT {_INTENT_COLS} FROM intents ORDER BY nonce")
        else:
            rows = self._all(
                f"SELECT {_INTENT_COLS} FROM intents WHERE sender = ? ORDER BY nonce", (sender,)
            )
        return [Intent(*r) for r in rows]

    def record_intent(
        self,
        intent_id: str,
        sender: str,
        request_digest: str,
        nonce: int,
        raw_tx: str,
        tx_hash: str,
    ) -> None:
        now = self._wall()
        self._exec(
            "INSERT INTO intents (intent_id, sender, request_digest, nonce, raw_tx, tx_hash, "
            "status, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, 'pending', ?, ?)",
            (intent_id, sender, request_digest, nonce, raw_tx, tx_hash, now, now),
        )

    def resign_intent(self, intent_id: str, nonce: int, raw_tx: str, tx_hash: str) -> None:
        """Replace the signed tx of a pending intent whose nonce went to another transaction."""
        self._exec(
            "UPDATE intents SET nonce = ?, raw_tx = ?, tx_hash = ?, resigns = resigns + 1, "
            "updated_at = ? WHERE intent_id = ? AND status = 'pending'",
            (nonce, raw_tx, tx_hash, self._wall(), intent_id),
        )

    def count_broadcast(self, intent_id: str) -> None:
        self._exec(
            "UPDATE intents SET broadcasts = broadcasts + 1, updated_at = ? WHERE intent_id = ?",
            (self._wall(), intent_id),
        )

    def finish_intent(self, intent_id: str, status: str, block_number: int, gas_used: int) -> None:
        self._exec(
            "UPDATE intents SET status = ?, block_number = ?, gas_used = ?, updated_at = ? "
            "WHERE intent_id = ?",
            (status, block_number, gas_used, self._wall(), intent_id),
        )

    def reopen_intent(self, intent_id: str) -> None:
        """A finished intent whose transaction left the chain (reorg, rollback, a node restarted
        from an older state) is pending again: its same signed bytes are broadcast again."""
        self._exec(
            "UPDATE intents SET status = 'pending', block_number = NULL, gas_used = NULL, "
            "updated_at = ? WHERE intent_id = ?",
            (self._wall(), intent_id),
        )

    # --- role records: jobs, games, ... ---------------------------------------------------------
    def put_record(self, kind: str, record_id: str, state: str, data: dict[str, Any]) -> None:
        self._exec(
            "INSERT INTO records (kind, record_id, state, data, updated_at) "
            "VALUES (?, ?, ?, ?, ?) ON CONFLICT (kind, record_id) DO UPDATE SET "
            "state = excluded.state, data = excluded.data, updated_at = excluded.updated_at",
            (kind, record_id, state, json.dumps(data, sort_keys=True), self._wall()),
        )

    def get_record(self, kind: str, record_id: str) -> Record | None:
        row = self._one(
            "SELECT kind, record_id, state, data, updated_at FROM records "
            "WHERE kind = ? AND record_id = ?",
            (kind, record_id),
        )
        return _record(row) if row else None

    def list_records(
        self, kind: str, state: str | None = None, not_state: str | None = None
    ) -> list[Record]:
        """Records of `kind`, in `state` if given, not in `not_state` if given (a role's closed
        records stay stored, for its history and to know an event again, but are not read)."""
        sql = "SELECT kind, record_id, state, data, updated_at FROM records WHERE kind = ?"
        params: tuple[Any, ...] = (kind,)
        if state is not None:
            sql += " AND state = ?"
            params += (state,)
        if not_state is not None:
            sql += " AND state != ?"
            params += (not_state,)
        return [_record(r) for r in self._all(sql + " ORDER BY record_id", params)]

    # Convenience names for the two record kinds every role has.
    def put_job(self, job_id: str, state: str, data: dict[str, Any]) -> None:
        self.put_record("job", job_id, state, data)

    def get_job(self, job_id: str) -> Record | None:
        return self.get_record("job", job_id)

    def put_game(self, game_id: str, state: str, data: dict[str, Any]) -> None:
        self.put_record("game", game_id, state, data)

    def get_game(self, game_id: str) -> Record | None:
        return self.get_record("game", game_id)

    # --- secrets (commit-reveal salts, forced-error seeds, ...) ------------------------------
    def put_secret(self, name: str, value: bytes) -> None:
        """Store a secret; refuses to overwrite, since a changed salt breaks a commitment."""
        with self.transaction():
            existing = self.get_secret(name)
            if existing is not None and existing != value:
                raise StoreError(f"secret {name!r} already set to a different value")
            self._exec("INSERT OR IGNORE INTO secrets (name, value) VALUES (?, ?)", (name, value))

    def get_secret(self, name: str) -> bytes | None:
        row = self._one("SELECT value FROM secrets WHERE name = ?", (name,))
        return bytes(row[0]) if row else None


_INTENT_COLS = (
    "intent_id, sender, request_digest, nonce, raw_tx, tx_hash, status, broadcasts, resigns, "
    "block_number, gas_used"
)


def _record(row: tuple) -> Record:
    return Record(row[0], row[1], row[2], json.loads(row[3]), row[4])


def _split_sql(script: str) -> list[str]:
    # Our migration scripts have no ';' inside literals, so a plain split is exact. (We avoid
    # executescript(), which would COMMIT our open transaction and break migration atomicity.)
    out = []
    for part in script.split(";"):
        lines = [ln.split("--", 1)[0] for ln in part.splitlines()]
        stmt = "\n".join(lines).strip()
        if stmt:
            out.append(stmt)
    return out
