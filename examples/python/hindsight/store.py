"""The `hindsight:memory/store` import over a SQLite file, in the Rust host's schema.

A file written here opens in the `hindsight` CLI and the Node example, and the other way round.
"""

import sqlite3
from typing import List, Optional, Tuple

SCHEMA = "CREATE TABLE IF NOT EXISTS kv (key BLOB PRIMARY KEY NOT NULL, value BLOB NOT NULL)"


class Conflict(Exception):
    """An `expect` op did not hold: another writer committed first."""


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
    def __init__(self, path: str):
        # isolation_level=None: transactions are ours; BEGIN IMMEDIATE takes the write lock first.
        self.conn = sqlite3.connect(path, isolation_level=None, timeout=10.0)
        # The Rust host's settings: WAL readers never block the writer, an acknowledged commit
        # survives power loss, and a hard-forgotten memory's bytes are overwritten.
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=FULL")
        self.conn.execute("PRAGMA secure_delete=ON")
        self.conn.execute(SCHEMA)

    def close(self) -> None:
        self.conn.close()

    def get(self, key: str) -> Optional[bytes]:
        row = self.conn.execute("SELECT value FROM kv WHERE key = ?", (key.encode(),)).fetchone()
        return None if row is None else bytes(row[0])

    def scan(self, prefix: str, start_after: Optional[str], limit: int) -> List[Tuple[str, bytes]]:
        low = prefix.encode()
        inclusive = True
        if start_after is not None and start_after.encode() >= low:
            low, inclusive = start_after.encode(), False
        high = _prefix_end(prefix.encode())
        sql = "SELECT key, value FROM kv WHERE key " + (">=" if inclusive else ">") + " ?"
        args: list = [low]
        if high is not None:
            sql += " AND key < ?"
            args.append(high)
        sql += " ORDER BY key LIMIT ?"
        args.append(limit)
        return [(bytes(k).decode(), bytes(v)) for k, v in self.conn.execute(sql, args)]

    def commit(self, ops: List[Tuple[str, object]]) -> None:
        """Applies every op or none: ("put", (key, value)), ("delete", key), or ("expect", (key,
        value or None)), which raises `Conflict` unless the key holds exactly that now."""
        # IMMEDIATE: the write lock is taken before the expectations are read.
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            for tag, payload in ops:
                if tag == "expect":
                    key, want = payload  # type: ignore[misc]
                    if self.get(key) != (None if want is None else bytes(want)):
                        raise Conflict(f"{key} changed since it was read")
            for tag, payload in ops:
                if tag == "put":
                    key, value = payload  # type: ignore[misc]
                    self.conn.execute("INSERT OR REPLACE INTO kv (key, value) VALUES (?, ?)", (key.encode(), value))
                elif tag == "delete":
                    self.conn.execute("DELETE FROM kv WHERE key = ?", (payload.encode(),))  # type: ignore[union-attr]
            self.conn.execute("COMMIT")
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
