"""The `hindsight:memory/store` import over one SQLite file, in the Rust host's layout.

A file written here opens in the `hindsight` CLI and the npm package, and the other way round:
one `kv` table of BLOB keys and values (format 1 in `PRAGMA user_version`), WAL, and commits
whose `expect` ops are checked inside the write transaction, so several processes can share it.
"""

from __future__ import annotations

import sqlite3
import threading
from typing import List, Optional, Sequence, Tuple, Union

SQLITE_FORMAT = 1
KV_COLUMNS = "(key BLOB PRIMARY KEY NOT NULL, value BLOB NOT NULL)"

# An op: ("put", (key, value)), ("delete", key) or ("expect", (key, value or None)).
Op = Tuple[str, object]


class StoreConflict(Exception):
    """An `expect` did not hold: another writer committed first. Nothing was applied."""


class StoreFailed(Exception):
    """Anything else (I/O, a locked or read-only file). Nothing was applied."""


def _prefix_end(prefix: bytes) -> Optional[bytes]:
    """The smallest key greater than every key starting with `prefix`."""
    end = bytearray(prefix)
    while end:
        last = end.pop()
        if last < 0xFF:
            end.append(last + 1)
            return bytes(end)
    return None


class SqliteStore:
    """An ordered key-value space in one SQLite file (created when missing)."""

    def __init__(self, path: Union[str, "object"]):
        self.path = str(path)
        self._lock = threading.RLock()
        # isolation_level=None: the transactions are ours; BEGIN IMMEDIATE takes the write lock.
        self.conn = sqlite3.connect(self.path, isolation_level=None, timeout=10.0, check_same_thread=False)
        version = self.conn.execute("PRAGMA user_version").fetchone()[0]
        if version > SQLITE_FORMAT:
            self.conn.close()
            from .errors import HindsightError
            raise HindsightError("unsupported", f"{self.path} is in hindsight's SQLite format {version}; this "
                                 f"version reads formats up to {SQLITE_FORMAT}: open it with a newer hindsight")
        # The Rust host's settings: WAL readers never block the writer, an acknowledged commit
        # survives power loss, and a hard-forgotten memory's bytes are overwritten.
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=FULL")
        self.conn.execute("PRAGMA secure_delete=ON")
        if version < SQLITE_FORMAT:
            self._migrate()

    def _migrate(self) -> None:
        """Brings a 0.1 file (or a new one) to the current layout in one transaction."""
        c = self.conn
        c.execute("BEGIN IMMEDIATE")
        try:
            if c.execute("PRAGMA user_version").fetchone()[0] < SQLITE_FORMAT:
                row = c.execute("SELECT sql FROM sqlite_master WHERE name = 'kv'").fetchone()
                if row is None:
                    c.execute(f"CREATE TABLE kv {KV_COLUMNS}")
                elif "WITHOUT ROWID" in row[0].upper():
                    c.execute(f"CREATE TABLE kv_rowid {KV_COLUMNS}")
                    c.execute("INSERT INTO kv_rowid (key, value) SELECT key, value FROM kv ORDER BY key")
                    c.execute("DROP TABLE kv")
                    c.execute("ALTER TABLE kv_rowid RENAME TO kv")
                c.execute(f"PRAGMA user_version = {SQLITE_FORMAT}")
            c.execute("COMMIT")
        except BaseException:
            c.execute("ROLLBACK")
            raise

    def close(self) -> None:
        with self._lock:
            self.conn.close()

    def get(self, key: str) -> Optional[bytes]:
        with self._lock:
            row = self.conn.execute("SELECT value FROM kv WHERE key = ?", (key.encode(),)).fetchone()
        return None if row is None else bytes(row[0])

    def scan(self, prefix: str, start_after: Optional[str], limit: int) -> List[Tuple[str, bytes]]:
        """Keys starting with `prefix`, in byte order, after `start_after` when given, at most
        `limit`."""
        low, inclusive = prefix.encode(), True
        if start_after is not None and start_after.encode() >= low:
            low, inclusive = start_after.encode(), False
        high = _prefix_end(prefix.encode())
        sql = "SELECT key, value FROM kv WHERE key " + (">=" if inclusive else ">") + " ?"
        args: list = [low]
        if high is not None:
            sql += " AND key < ?"
            args.append(high)
        sql += " ORDER BY key LIMIT ?"
        args.append(int(limit))
        with self._lock:
            rows = self.conn.execute(sql, args).fetchall()
        return [(bytes(k).decode("utf-8"), bytes(v)) for k, v in rows]

    def commit(self, ops: Sequence[Op]) -> None:
        """Applies every op or none; raises `StoreConflict` when an `expect` does not hold."""
        with self._lock:
            c = self.conn
            # IMMEDIATE: the write lock is taken before the expectations are read.
            c.execute("BEGIN IMMEDIATE")
            try:
                for tag, payload in ops:
                    if tag == "expect":
                        key, want = payload  # type: ignore[misc]
                        row = c.execute("SELECT value FROM kv WHERE key = ?", (key.encode(),)).fetchone()
                        have = None if row is None else bytes(row[0])
                        if have != (None if want is None else bytes(want)):
                            raise StoreConflict(key)
                deleted = False
                for tag, payload in ops:
                    if tag == "put":
                        key, value = payload  # type: ignore[misc]
                        c.execute("INSERT OR REPLACE INTO kv (key, value) VALUES (?, ?)", (key.encode(), bytes(value)))
                    elif tag == "delete":
                        c.execute("DELETE FROM kv WHERE key = ?", (str(payload).encode(),))
                        deleted = True
                    elif tag != "expect":
                        raise StoreFailed(f"unknown op {tag!r}")
                c.execute("COMMIT")
            except BaseException:
                c.execute("ROLLBACK")
                raise
            if deleted:
                self.checkpoint()

    def checkpoint(self) -> None:
        """Moves the write-ahead log into the main file and truncates it, so no erased byte stays
        in the log."""
        with self._lock:
            self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
