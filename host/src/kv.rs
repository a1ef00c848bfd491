//! Store backends behind the component's `store` import: SQLite (the default, one file) and an
//! in-memory map for tests.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

use anyhow::Context;
use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};

pub enum KvOp {
    Put(String, Vec<u8>),
    Delete(String),
    /// The batch applies only if the key holds exactly this value (None: absent).
    Expect(String, Option<Vec<u8>>),
}

/// A commit refused because an `Expect` did not hold: another writer committed first.
#[derive(Debug)]
pub struct Conflict(pub String);

impl std::fmt::Display for Conflict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} changed since it was read", self.0)
    }
}

impl std::error::Error for Conflict {}

/// An ordered key-value space with atomic batches. Shared by every instance of a host.
pub trait Kv: Send + Sync {
    fn get(&self, key: &str) -> anyhow::Result<Option<Vec<u8>>>;
    fn scan(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        limit: u32,
    ) -> anyhow::Result<Vec<(String, Vec<u8>)>>;
    /// Applies every op or none; fails with `Conflict` when an `Expect` does not hold.
    fn commit(&self, ops: Vec<KvOp>) -> anyhow::Result<()>;
}

/// The smallest byte string greater than every string starting with `prefix`, if any.
fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

pub struct SqliteKv {
    conn: Mutex<Connection>,
}

impl SqliteKv {
    pub fn open(path: &Path) -> anyhow::Result<SqliteKv> {
        let mut conn =
            Connection::open(path).with_context(|| format!("opening database {}", path.display()))?;
        conn.busy_timeout(Duration::from_secs(10))?;
        // WAL: readers never block the writer. synchronous=FULL: an acknowledged commit survives
        // power loss, not only a killed process. secure_delete: a hard-forgotten memory's bytes
        // are overwritten, not left in free pages.
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "FULL")?;
        conn.pragma_update(None, "secure_delete", "ON")?;
        conn.execute_batch(&format!("CREATE TABLE IF NOT EXISTS kv {KV_COLUMNS};"))?;
        migrate_without_rowid(&mut conn)?;
        Ok(SqliteKv { conn: Mutex::new(conn) })
    }

    /// Moves the write-ahead log into the main file and truncates it.
    pub fn checkpoint(&self) -> anyhow::Result<()> {
        let conn = self.conn.lock().unwrap();
        conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
        Ok(())
    }
}

/// A rowid table, not WITHOUT ROWID: the latter keeps whole rows in its interior b-tree cells,
/// and SQLite reads a divider cell's entire overflow chain to compare keys, so a lookup next to
/// a 20 MB index segment read all of it (30,000 page reads per recall at 100k memories). Here
/// the key index holds keys only and a value is read only when its row is asked for.
const KV_COLUMNS: &str = "(key BLOB PRIMARY KEY NOT NULL, value BLOB NOT NULL)";

/// Files made before the change hold a WITHOUT ROWID table: copied once into the rowid layout,
/// in one transaction (another process doing the same waits, then finds it done).
fn migrate_without_rowid(conn: &mut Connection) -> anyhow::Result<()> {
    let old_layout = |conn: &Connection| -> rusqlite::Result<bool> {
        let sql: String =
            conn.query_row("SELECT sql FROM sqlite_master WHERE name = 'kv'", [], |r| r.get(0))?;
        Ok(sql.to_ascii_uppercase().contains("WITHOUT ROWID"))
    };
    if !old_layout(conn)? {
        return Ok(());
    }
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    if old_layout(&tx)? {
        tx.execute_batch(&format!(
            "CREATE TABLE kv_rowid {KV_COLUMNS};
             INSERT INTO kv_rowid (key, value) SELECT key, value FROM kv ORDER BY key;
             DROP TABLE kv;
             ALTER TABLE kv_rowid RENAME TO kv;"
        ))?;
    }
    tx.commit().context("moving the store to the rowid layout")?;
    Ok(())
}

impl Kv for SqliteKv {
    fn get(&self, key: &str) -> anyhow::Result<Option<Vec<u8>>> {
        let conn = self.conn.lock().unwrap();
        Ok(conn
            .query_row("SELECT value FROM kv WHERE key = ?1", [key.as_bytes()], |row| row.get(0))
            .optional()?)
    }

    fn scan(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        limit: u32,
    ) -> anyhow::Result<Vec<(String, Vec<u8>)>> {
        let conn = self.conn.lock().unwrap();
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
        let mut stmt = conn.prepare_cached(sql)?;
        let rows = stmt.query_map(params![lower, upper, limit], |row| {
            let key: Vec<u8> = row.get(0)?;
            let value: Vec<u8> = row.get(1)?;
            Ok((key, value))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (key, value) = row?;
            out.push((String::from_utf8(key).context("a stored key is not UTF-8")?, value));
        }
        Ok(out)
    }

    fn commit(&self, ops: Vec<KvOp>) -> anyhow::Result<()> {
        let mut conn = self.conn.lock().unwrap();
        // IMMEDIATE: the write lock is taken before the expectations are read, so no other
        // process can commit between the check and the writes.
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        for op in &ops {
            if let KvOp::Expect(key, want) = op {
                let have: Option<Vec<u8>> = tx
                    .query_row("SELECT value FROM kv WHERE key = ?1", [key.as_bytes()], |row| row.get(0))
                    .optional()?;
                if have != *want {
                    return Err(Conflict(key.clone()).into()); // dropping tx rolls back
                }
            }
        }
        {
            let mut put = tx.prepare_cached("INSERT OR REPLACE INTO kv (key, value) VALUES (?1, ?2)")?;
            let mut delete = tx.prepare_cached("DELETE FROM kv WHERE key = ?1")?;
            for op in &ops {
                match op {
                    KvOp::Put(k, v) => put.execute(params![k.as_bytes(), v])?,
                    KvOp::Delete(k) => delete.execute(params![k.as_bytes()])?,
                    KvOp::Expect(..) => 0,
                };
            }
        }
        tx.commit()?;
        Ok(())
    }
}

/// Keys and values in a map: for tests, and hosts that need no persistence.
#[derive(Default)]
pub struct MemoryKv {
    map: Mutex<BTreeMap<String, Vec<u8>>>,
}

impl MemoryKv {
    pub fn new() -> Self {
        Self::default()
    }
}

impl Kv for MemoryKv {
    fn get(&self, key: &str) -> anyhow::Result<Option<Vec<u8>>> {
        Ok(self.map.lock().unwrap().get(key).cloned())
    }

    fn scan(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        limit: u32,
    ) -> anyhow::Result<Vec<(String, Vec<u8>)>> {
        use std::ops::Bound;
        let map = self.map.lock().unwrap();
        let lower = match start_after {
            Some(after) if after >= prefix => Bound::Excluded(after.to_string()),
            _ => Bound::Included(prefix.to_string()),
        };
        Ok(map
            .range((lower, Bound::Unbounded))
            .take_while(|(k, _)| k.starts_with(prefix))
            .take(limit as usize)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect())
    }

    fn commit(&self, ops: Vec<KvOp>) -> anyhow::Result<()> {
        let mut map = self.map.lock().unwrap();
        for op in &ops {
            if let KvOp::Expect(key, want) = op {
                if map.get(key) != want.as_ref() {
                    return Err(Conflict(key.clone()).into());
                }
            }
        }
        for op in ops {
            match op {
                KvOp::Put(k, v) => {
                    map.insert(k, v);
                }
                KvOp::Delete(k) => {
                    map.remove(&k);
                }
                KvOp::Expect(..) => {}
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exercise(kv: &dyn Kv) {
        kv.commit(vec![
            KvOp::Put("b/x/m/1".into(), b"one".to_vec()),
            KvOp::Put("b/x/m/2".into(), b"two".to_vec()),
            KvOp::Put("b/x/m/3".into(), b"three".to_vec()),
            KvOp::Put("b/xy/m/1".into(), b"other bank".to_vec()),
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
        kv.commit(vec![KvOp::Delete("b/x/m/2".into())]).unwrap();
        assert_eq!(kv.get("b/x/m/2").unwrap(), None);
        assert_eq!(kv.get("b/x/m/3").unwrap().as_deref(), Some(&b"three"[..]));
    }

    #[test]
    fn memory_kv_scans_prefixes_in_order() {
        exercise(&MemoryKv::new());
    }

    #[test]
    fn sqlite_kv_scans_prefixes_in_order() {
        let dir = tempfile::tempdir().unwrap();
        exercise(&SqliteKv::open(&dir.path().join("t.db")).unwrap());
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
        let kv = SqliteKv::open(&path).unwrap();
        assert_eq!(kv.get("b/x/m/1").unwrap().as_deref(), Some(&[1u8][..]));
        assert_eq!(kv.get("b/z/seq").unwrap().as_deref(), Some(&[2u8, 3][..]));
        let sql: String = kv
            .conn
            .lock()
            .unwrap()
            .query_row("SELECT sql FROM sqlite_master WHERE name = 'kv'", [], |r| r.get(0))
            .unwrap();
        assert!(!sql.to_ascii_uppercase().contains("WITHOUT ROWID"), "{sql}");
        drop(kv);
        exercise(&SqliteKv::open(&path).unwrap());
    }
}
