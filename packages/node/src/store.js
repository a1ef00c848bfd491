// The `hindsight:memory/store` import over a SQLite file, in the Rust host's schema: a file
// written here opens in the `hindsight` CLI and the Python example, and the other way round.
import Database from 'better-sqlite3';

function prefixEnd(prefix) {
  const end = Buffer.from(prefix);
  for (let i = end.length - 1; i >= 0; i--) {
    if (end[i] < 0xff) {
      end[i] += 1;
      return end.subarray(0, i + 1);
    }
  }
  return null;
}

/** An `expect` op did not hold: another writer committed first. */
export class Conflict extends Error {
  constructor(key) {
    super(`${key} changed since it was read`);
  }
}

/** The file layout the hosts write, in `PRAGMA user_version` (the Rust host's SQLITE_FORMAT). */
export const SQLITE_FORMAT = 1;
const KV_COLUMNS = '(key BLOB PRIMARY KEY NOT NULL, value BLOB NOT NULL)';

export class SqliteStore {
  constructor(path) {
    this.path = path;
    this.db = new Database(path, { timeout: 10_000 });
    const version = this.db.pragma('user_version', { simple: true });
    if (version > SQLITE_FORMAT) {
      this.db.close();
      throw new Error(`${path} is in hindsight's SQLite format ${version}; this version reads formats up to ${SQLITE_FORMAT}: open it with a newer hindsight`);
    }
    // The Rust host's settings: WAL readers never block the writer, an acknowledged commit
    // survives power loss, and a hard-forgotten memory's bytes are overwritten.
    this.db.pragma('journal_mode = WAL');
    this.db.pragma('synchronous = FULL');
    this.db.pragma('secure_delete = ON');
    if (version < SQLITE_FORMAT) this.migrate();
    this.getStmt = this.db.prepare('SELECT value FROM kv WHERE key = ?');
    this.putStmt = this.db.prepare('INSERT OR REPLACE INTO kv (key, value) VALUES (?, ?)');
    this.deleteStmt = this.db.prepare('DELETE FROM kv WHERE key = ?');
    this.applyOps = this.db.transaction((ops) => {
      for (const op of ops) {
        if (op.tag !== 'expect') continue;
        const [key, want] = op.val;
        const have = this.getStmt.get(Buffer.from(key));
        const same = have ? want !== undefined && Buffer.compare(have.value, Buffer.from(want)) === 0 : want === undefined;
        if (!same) throw new Conflict(key); // thrown inside the transaction: it rolls back
      }
      for (const op of ops) {
        if (op.tag === 'put') this.putStmt.run(Buffer.from(op.val[0]), op.val[1]);
        else if (op.tag === 'delete') this.deleteStmt.run(Buffer.from(op.val));
      }
    });
  }

  /** A file of format 0 (hindsight 0.1, or new) to the current layout, in one transaction. */
  migrate() {
    this.db.transaction(() => {
      if (this.db.pragma('user_version', { simple: true }) >= SQLITE_FORMAT) return;
      const row = this.db.prepare("SELECT sql FROM sqlite_master WHERE name = 'kv'").get();
      if (!row) {
        this.db.exec(`CREATE TABLE kv ${KV_COLUMNS}`);
      } else if (/WITHOUT ROWID/i.test(row.sql)) {
        this.db.exec(`CREATE TABLE kv_rowid ${KV_COLUMNS};
          INSERT INTO kv_rowid (key, value) SELECT key, value FROM kv ORDER BY key;
          DROP TABLE kv;
          ALTER TABLE kv_rowid RENAME TO kv;`);
      }
      this.db.pragma(`user_version = ${SQLITE_FORMAT}`);
    }).immediate();
  }

  /** Checkpoints the write-ahead log into the file and truncates it: erased bytes leave the log. */
  checkpoint() {
    this.db.pragma('wal_checkpoint(TRUNCATE)');
  }

  close() {
    if (!this.db.open) return;
    this.checkpoint();
    this.db.close();
  }

  get(key) {
    const row = this.getStmt.get(Buffer.from(key));
    return row ? new Uint8Array(row.value) : undefined;
  }

  scan(prefix, startAfter, limit) {
    let low = Buffer.from(prefix);
    let inclusive = true;
    if (startAfter !== undefined && Buffer.compare(Buffer.from(startAfter), low) >= 0) {
      low = Buffer.from(startAfter);
      inclusive = false;
    }
    const high = prefixEnd(prefix);
    let sql = `SELECT key, value FROM kv WHERE key ${inclusive ? '>=' : '>'} ?`;
    const args = [low];
    if (high) {
      sql += ' AND key < ?';
      args.push(high);
    }
    sql += ' ORDER BY key LIMIT ?';
    args.push(limit);
    return this.db.prepare(sql).all(...args).map((r) => [r.key.toString('utf8'), new Uint8Array(r.value)]);
  }

  /**
   * Every op or none, in one transaction: `{tag: 'put', val: [key, bytes]}`, `{tag: 'delete', val: key}`,
   * or `{tag: 'expect', val: [key, bytes | undefined]}`, which throws `Conflict` unless the key holds that now.
   */
  commit(ops) {
    this.applyOps.immediate(ops); // BEGIN IMMEDIATE: take the write lock before reading
    if (ops.some((op) => op.tag === 'delete')) this.checkpoint();
  }
}
