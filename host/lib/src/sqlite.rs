//! The default store: one SQLite file, WAL, atomic commits with `expect` checked inside the
//! write transaction, so several processes can share the file.

use std::path::Path;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use hindsight_types::{Op, Store, StoreError};
use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};

use crate::keys::prefix_end;
use crate::{Error, Result};

/// The file layout this host writes, kept in `PRAGMA user_version`. 0: hindsight 0.1 (a table
/// that may still be WITHOUT ROWID); 1: the rowid `kv` table.
pub const SQLITE_FORMAT: i64 = 1;

/// A rowid table, not WITHOUT ROWID: the latter keeps whole rows in its interior b-tree cells,
/// and SQLite reads a divider cell's whole overflow chain to compare keys, so a lookup next to a
/// large index segment read all of it. Here the key index holds keys only.
const KV_COLUMNS: &str = "(key BLOB PRIMARY KEY NOT NULL, value BLOB NOT NULL)";

/// An ordered key-value space in one SQLite file.
pub struct SqliteStore {
    conn: Mutex<Connection>,
    path: std::path::PathBuf,
    /// Opened read-only (this process may not write the file or its directory).
    read_only: bool,
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore").finish_non_exhaustive()
    }
}

fn failed(path: &Path, what: &str, e: impl std::fmt::Display) -> Error {
    Error::store(format!("{what} {}: {e}", path.display()))
}

impl SqliteStore {
    /// Opens the file (created when missing), migrating an older layout once, in one
    /// transaction. A file written by a newer hindsight is refused and left as it is.
    pub fn open(path: impl AsRef<Path>) -> Result<SqliteStore> {
        let path = path.as_ref();
        match SqliteStore::open_writable(path) {
            Err(e) if SqliteStore::is_read_only(path) => SqliteStore::open_read_only(path).map_err(|_| e),
            other => other,
        }
    }

    /// Whether `path` can only be read (a read-only file, or a read-only directory SQLite cannot
    /// put its write-ahead log in).
    fn is_read_only(path: &Path) -> bool {
        let read_only = |p: &Path| std::fs::metadata(p).is_ok_and(|m| m.permissions().readonly());
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
        path.is_file() && (read_only(path) || read_only(dir) || !writable(dir))
    }

    /// A database this process may only read: opened read-only, changing nothing (no
    /// migration); writes fail with [`StoreError::ReadOnly`] naming the file.
    fn open_read_only(path: &Path) -> Result<SqliteStore> {
        use rusqlite::OpenFlags;
        let flags =
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_URI | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let version = |conn: &Connection| conn.query_row("PRAGMA user_version", [], |r| r.get::<_, i64>(0));
        // SQLite reads a WAL database read-only when its -wal and -shm exist (a writer left them).
        // Without them it cannot create them here; then the file alone is the whole database
        // and `immutable` reads it as it stands. With a -wal but no usable -shm, reading the
        // file alone would miss commits: refused.
        let plain = Connection::open_with_flags(path, flags);
        let conn = match plain.and_then(|c| version(&c).map(|_| c)) {
            Ok(conn) => conn,
            Err(e) => {
                let wal = std::fs::metadata(format!("{}-wal", path.display())).map(|m| m.len()).unwrap_or(0);
                if wal > 0 {
                    return Err(failed(
                        path,
                        "reading (read-only, with a write-ahead log this process cannot use; a process that \
                         may write the file checkpoints it)",
                        e,
                    ));
                }
                let uri = format!("file:{}?immutable=1", path.display());
                Connection::open_with_flags(&uri, flags).map_err(|e| failed(path, "opening read-only", e))?
            }
        };
        let version = version(&conn).map_err(|e| failed(path, "reading", e))?;
        if version != SQLITE_FORMAT {
            return Err(Error::store(format!(
                "{} is read-only and in SQLite format {version}; this version needs {SQLITE_FORMAT} and cannot \
                 migrate a file it may not write",
                path.display()
            )));
        }
        Ok(SqliteStore { conn: Mutex::new(conn), path: path.to_path_buf(), read_only: true })
    }

    fn open_writable(path: &Path) -> Result<SqliteStore> {
        let mut conn = Connection::open(path).map_err(|e| failed(path, "opening the database", e))?;
        conn.busy_timeout(Duration::from_secs(10)).map_err(|e| failed(path, "configuring", e))?;
        let version: i64 = conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(|e| failed(path, "reading", e))?;
        if version > SQLITE_FORMAT {
            return Err(Error::Unsupported(format!(
                "{} is in hindsight's SQLite format {version}; this version reads formats up to {SQLITE_FORMAT}: \
                 open it with a newer hindsight",
                path.display()
            )));
        }
        // WAL: readers never block the writer. synchronous=FULL: an acknowledged commit survives
        // power loss, not only a killed process. secure_delete: a hard-forgotten memory's bytes
        // are overwritten, not left in free pages.
        for (pragma, value) in [("journal_mode", "WAL"), ("synchronous", "FULL"), ("secure_delete", "ON")] {
            conn.pragma_update(None, pragma, value).map_err(|e| failed(path, "configuring", e))?;
        }
        if version < SQLITE_FORMAT {
            migrate(&mut conn).map_err(|e| failed(path, "migrating", e))?;
        }
        Ok(SqliteStore { conn: Mutex::new(conn), path: path.to_path_buf(), read_only: false })
    }

    /// Whether this store was opened read-only (writes fail with [`StoreError::ReadOnly`]).
    pub fn read_only(&self) -> bool {
        self.read_only
    }

    fn conn(&self) -> MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Brings a file of format 0 (or a new one) to the current layout in one transaction; another
/// process doing the same waits, then finds it done.
fn migrate(conn: &mut Connection) -> rusqlite::Result<()> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let version: i64 = tx.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    if version < SQLITE_FORMAT {
        let sql: Option<String> =
            tx.query_row("SELECT sql FROM sqlite_master WHERE name = 'kv'", [], |r| r.get(0)).optional()?;
        match sql {
            None => tx.execute_batch(&format!("CREATE TABLE kv {KV_COLUMNS};"))?,
            // 0.1 files made before the rowid layout: copied into it, once.
            Some(sql) if sql.to_ascii_uppercase().contains("WITHOUT ROWID") => tx.execute_batch(&format!(
                "CREATE TABLE kv_rowid {KV_COLUMNS};
                 INSERT INTO kv_rowid (key, value) SELECT key, value FROM kv ORDER BY key;
                 DROP TABLE kv;
                 ALTER TABLE kv_rowid RENAME TO kv;"
            ))?,
            Some(_) => {}
        }
        tx.pragma_update(None, "user_version", SQLITE_FORMAT)?;
    }
    tx.commit()
}

/// Whether this process may create files in `dir` (root may, whatever the mode says).
fn writable(dir: &Path) -> bool {
    let probe = dir.join(format!(".hindsight-write-probe-{}", std::process::id()));
    let ok = std::fs::File::create(&probe).is_ok();
    let _ = std::fs::remove_file(&probe);
    ok
}

impl SqliteStore {
    fn error(&self, e: rusqlite::Error) -> StoreError {
        if e.sqlite_error_code() == Some(rusqlite::ErrorCode::ReadOnly) {
            return self.read_only_error();
        }
        StoreError::Failed(format!("{}: {e}", self.path.display()))
    }

    fn read_only_error(&self) -> StoreError {
        StoreError::ReadOnly(format!(
            "{} is read-only for this process (the file, its -wal or -shm, or its directory): nothing was written",
            self.path.display()
        ))
    }

    /// Checkpoints the write-ahead log into the main file and truncates it: after a commit that
    /// deletes, no erased byte is left in the log, whichever other process holds the file.
    fn truncate_log(&self, conn: &Connection) -> Result<(), StoreError> {
        conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| r.get::<_, i64>(0))
            .map(drop)
            .map_err(|e| self.error(e))
    }
}

impl Drop for SqliteStore {
    /// The data goes into the main file as the store closes: a copy of the `.db` alone (a
    /// backup, a `cp`) then holds every commit, not an empty file beside a `-wal`.
    fn drop(&mut self) {
        if !self.read_only {
            let conn = self.conn.get_mut().unwrap_or_else(|p| p.into_inner());
            let _ = conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| r.get::<_, i64>(0));
        }
    }
}

impl Store for SqliteStore {
    fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        self.conn()
            .query_row("SELECT value FROM kv WHERE key = ?1", [key.as_bytes()], |row| row.get(0))
            .optional()
            .map_err(|e| self.error(e))
    }

    fn scan(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        limit: u32,
    ) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        let conn = self.conn();
        let lower: &[u8] = match start_after {
            Some(after) if after.as_bytes() >= prefix.as_bytes() => after.as_bytes(),
            _ => prefix.as_bytes(),
        };
        let inclusive = start_after.is_none_or(|after| after.as_bytes() < prefix.as_bytes());
        let upper = prefix_end(prefix.as_bytes());
        let sql = match (inclusive, upper.is_some()) {
            (true, true) => "SELECT key, value FROM kv WHERE key >= ?1 AND key < ?2 ORDER BY key LIMIT ?3",
            (false, true) => "SELECT key, value FROM kv WHERE key > ?1 AND key < ?2 ORDER BY key LIMIT ?3",
            (true, false) => "SELECT key, value FROM kv WHERE key >= ?1 AND ?2 IS NULL ORDER BY key LIMIT ?3",
            (false, false) => "SELECT key, value FROM kv WHERE key > ?1 AND ?2 IS NULL ORDER BY key LIMIT ?3",
        };
        let mut stmt = conn.prepare_cached(sql).map_err(|e| self.error(e))?;
        let rows = stmt
            .query_map(params![lower, upper, limit], |row| {
                Ok((row.get::<_, Vec<u8>>(0)?, row.get::<_, Vec<u8>>(1)?))
            })
            .map_err(|e| self.error(e))?;
        let mut out = Vec::new();
        for row in rows {
            let (key, value) = row.map_err(|e| self.error(e))?;
            let key = String::from_utf8(key).map_err(|_| StoreError::failed("a stored key is not UTF-8"))?;
            out.push((key, value));
        }
        Ok(out)
    }

    fn commit(&self, ops: Vec<Op>) -> Result<(), StoreError> {
        if self.read_only {
            return Err(self.read_only_error());
        }
        let mut conn = self.conn();
        // IMMEDIATE: the write lock is taken before the expectations are read, so no other
        // process can commit between the check and the writes.
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(|e| self.error(e))?;
        for op in &ops {
            if let Op::Expect(key, want) = op {
                let have: Option<Vec<u8>> = tx
                    .query_row("SELECT value FROM kv WHERE key = ?1", [key.as_bytes()], |row| row.get(0))
                    .optional()
                    .map_err(|e| self.error(e))?;
                if have != *want {
                    return Err(StoreError::Conflict(key.clone())); // dropping tx rolls back
                }
            }
        }
        {
            let mut put = tx
                .prepare_cached("INSERT OR REPLACE INTO kv (key, value) VALUES (?1, ?2)")
                .map_err(|e| self.error(e))?;
            let mut delete = tx.prepare_cached("DELETE FROM kv WHERE key = ?1").map_err(|e| self.error(e))?;
            for op in &ops {
                match op {
                    Op::Put(k, v) => put.execute(params![k.as_bytes(), v]).map_err(|e| self.error(e))?,
                    Op::Delete(k) => delete.execute(params![k.as_bytes()]).map_err(|e| self.error(e))?,
                    Op::Expect(..) => 0,
                };
            }
        }
        tx.commit().map_err(|e| self.error(e))?;
        if ops.iter().any(|op| matches!(op, Op::Delete(_))) {
            self.truncate_log(&conn)?;
        }
        Ok(())
    }

    fn checkpoint(&self) -> Result<(), StoreError> {
        if self.read_only {
            return Ok(());
        }
        let conn = self.conn();
        self.truncate_log(&conn)
    }
}

#[cfg(test)]
mod tests {
    use hindsight_types::MemoryStore;

    use super::*;

    fn exercise(kv: &dyn Store) {
        kv.commit(vec![
            Op::Put("b/x/m/1".into(), b"one".to_vec()),
            Op::Put("b/x/m/2".into(), b"two".to_vec()),
            Op::Put("b/x/m/3".into(), b"three".to_vec()),
            Op::Put("b/xy/m/1".into(), b"other bank".to_vec()),
        ])
        .unwrap();
        let all = kv.scan("b/x/", None, 10).unwrap();
        assert_eq!(
            all.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(),
            ["b/x/m/1", "b/x/m/2", "b/x/m/3"]
        );
        let page = kv.scan("b/x/", Some("b/x/m/1"), 1).unwrap();
        assert_eq!(page[0].0, "b/x/m/2");
        assert_eq!(page.len(), 1);
        kv.commit(vec![Op::Delete("b/x/m/2".into())]).unwrap();
        assert_eq!(kv.get("b/x/m/2").unwrap(), None);
        assert_eq!(kv.get("b/x/m/3").unwrap().as_deref(), Some(&b"three"[..]));
        let err =
            kv.commit(vec![Op::Expect("b/x/m/3".into(), None), Op::Delete("b/x/m/3".into())]).unwrap_err();
        assert_eq!(err, StoreError::Conflict("b/x/m/3".into()));
        assert!(kv.get("b/x/m/3").unwrap().is_some(), "a refused commit applies nothing");
    }

    #[test]
    fn memory_store_scans_prefixes_in_order() {
        exercise(&MemoryStore::new());
    }

    #[test]
    fn sqlite_store_scans_prefixes_in_order() {
        let dir = tempfile::tempdir().unwrap();
        exercise(&SqliteStore::open(dir.path().join("t.db")).unwrap());
    }

    #[test]
    fn a_file_in_the_old_without_rowid_layout_is_moved_with_everything_in_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.db");
        {
            let conn = Connection::open(&path).unwrap();
            conn.execute_batch(
                "CREATE TABLE kv (key BLOB PRIMARY KEY NOT NULL, value BLOB NOT NULL) WITHOUT ROWID;
                 INSERT INTO kv VALUES (CAST('b/x/m/1' AS BLOB), x'01'), (CAST('b/z/seq' AS BLOB), x'0203');",
            )
            .unwrap();
        }
        let kv = SqliteStore::open(&path).unwrap();
        assert_eq!(kv.get("b/x/m/1").unwrap().as_deref(), Some(&[1u8][..]));
        assert_eq!(kv.get("b/z/seq").unwrap().as_deref(), Some(&[2u8, 3][..]));
        let (sql, version): (String, i64) = {
            let conn = kv.conn();
            let sql =
                conn.query_row("SELECT sql FROM sqlite_master WHERE name = 'kv'", [], |r| r.get(0)).unwrap();
            (sql, conn.query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap())
        };
        assert!(!sql.to_ascii_uppercase().contains("WITHOUT ROWID"), "{sql}");
        assert_eq!(version, SQLITE_FORMAT);
        drop(kv);
        exercise(&SqliteStore::open(&path).unwrap());
    }

    #[test]
    fn a_file_from_a_newer_hindsight_is_refused_and_left_unchanged() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("new.db");
        {
            let conn = Connection::open(&path).unwrap();
            conn.execute_batch(
                "CREATE TABLE kv (key BLOB PRIMARY KEY, value BLOB); PRAGMA user_version = 9;",
            )
            .unwrap();
        }
        let before = std::fs::read(&path).unwrap();
        let err = SqliteStore::open(&path).unwrap_err();
        assert!(
            matches!(&err, Error::Unsupported(m) if m.contains("format 9") && m.contains("up to 1")),
            "{err}"
        );
        assert_eq!(std::fs::read(&path).unwrap(), before, "nothing written");
        assert!(!dir.path().join("new.db-wal").exists());
    }
}
