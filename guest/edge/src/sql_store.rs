//! The store in one SQL table, reached a statement at a time: Spin's `spin:sqlite` at the edge
//! (`--features spin`), any SQLite connection in tests. The table's primary key gives the ordered
//! prefix scan, a transaction the atomic commit, and the `expect`s are read inside it:
//!
//! ```sql
//! CREATE TABLE hindsight_kv (key TEXT PRIMARY KEY, value BLOB NOT NULL) WITHOUT ROWID
//! ```
//!
//! SQLite compares TEXT keys by their UTF-8 bytes, the order of Rust's `str`, so a scan returns
//! keys in the order the engine expects.

use std::time::{Duration, Instant};

use hindsight_types::{Op, Store, StoreError};

/// A value bound to or read from a statement (the subset of SQLite's types the store uses).
#[derive(Debug, Clone, PartialEq)]
pub enum SqlValue {
    Integer(i64),
    Text(String),
    Blob(Vec<u8>),
    Null,
}

/// Why a statement failed: the database was busy (another writer's transaction), or anything else.
#[derive(Debug, Clone, PartialEq)]
pub enum SqlError {
    Busy(String),
    Failed(String),
}

/// One connection: runs a statement with positional parameters (`?1`, `?2`, …) and returns its
/// rows.
pub trait Sql: Send + Sync {
    fn execute(&self, statement: &str, params: &[SqlValue]) -> Result<Vec<Vec<SqlValue>>, SqlError>;
}

/// How long a commit waits for another instance's transaction before it gives up.
const BUSY_WAIT: Duration = Duration::from_secs(10);

pub struct SqlStore<C: Sql> {
    conn: C,
}

pub(crate) fn failed(what: &str, e: SqlError) -> StoreError {
    match e {
        SqlError::Busy(m) | SqlError::Failed(m) => StoreError::Failed(format!("sqlite {what}: {m}")),
    }
}

impl<C: Sql> SqlStore<C> {
    /// The store over `conn`, creating its table the first time.
    pub fn open(conn: C) -> Result<SqlStore<C>, StoreError> {
        conn.execute(
            "CREATE TABLE IF NOT EXISTS hindsight_kv (key TEXT PRIMARY KEY, value BLOB NOT NULL) WITHOUT ROWID",
            &[],
        )
        .map_err(|e| failed("creating the table", e))?;
        // A hard-forgotten memory's bytes are overwritten, not left in free pages. A host that
        // refuses the pragma (a remote database) keeps its own rules.
        let _ = conn.execute("PRAGMA secure_delete = ON", &[]);
        Ok(SqlStore { conn })
    }

    /// Runs `statement`, waiting while another connection holds the database (`BEGIN
    /// IMMEDIATE`, and a `COMMIT` that waits for readers, may be told it is busy).
    fn patiently(&self, statement: &str, what: &str) -> Result<(), StoreError> {
        let started = Instant::now();
        loop {
            match self.conn.execute(statement, &[]) {
                Ok(_) => return Ok(()),
                Err(SqlError::Busy(_)) if started.elapsed() < BUSY_WAIT => {
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(e) => return Err(failed(what, e)),
            }
        }
    }

    /// The body of a commit, inside the transaction: every `expect` against the state before the
    /// commit (as the other stores check them), then the writes.
    fn apply(&self, ops: &[Op]) -> Result<(), StoreError> {
        for op in ops {
            if let Op::Expect(key, expected) = op {
                if self.get(key)?.as_ref() != expected.as_ref() {
                    return Err(StoreError::Conflict(key.clone()));
                }
            }
        }
        for op in ops {
            match op {
                Op::Put(key, value) => {
                    self.conn
                        .execute(
                            "INSERT OR REPLACE INTO hindsight_kv (key, value) VALUES (?1, ?2)",
                            &[SqlValue::Text(key.clone()), SqlValue::Blob(value.clone())],
                        )
                        .map_err(|e| failed("writing", e))?;
                }
                Op::Delete(key) => {
                    self.conn
                        .execute("DELETE FROM hindsight_kv WHERE key = ?1", &[SqlValue::Text(key.clone())])
                        .map_err(|e| failed("deleting", e))?;
                }
                Op::Expect(..) => {}
            }
        }
        Ok(())
    }
}

impl<C: Sql> Store for SqlStore<C> {
    fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let rows = self
            .conn
            .execute("SELECT value FROM hindsight_kv WHERE key = ?1", &[SqlValue::Text(key.to_string())])
            .map_err(|e| failed("reading", e))?;
        rows.into_iter().next().map(|mut row| take_blob(&mut row, 0)).transpose()
    }

    fn scan(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        limit: u32,
    ) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        // Keys with the prefix are the range [prefix, prefix_end): the index seeks to its start
        // and the scan stops at its end.
        let (lower, op) = match start_after {
            Some(after) if after >= prefix => (after, ">"),
            _ => (prefix, ">="),
        };
        let mut params = vec![SqlValue::Text(lower.to_string())];
        let upper = match prefix_end(prefix) {
            Some(end) => {
                params.push(SqlValue::Text(end));
                " AND key < ?3"
            }
            None => "",
        };
        params.insert(1, SqlValue::Integer(limit as i64));
        let rows = self
            .conn
            .execute(
                &format!(
                    "SELECT key, value FROM hindsight_kv WHERE key {op} ?1{upper} ORDER BY key LIMIT ?2"
                ),
                &params,
            )
            .map_err(|e| failed("scanning", e))?;
        rows.into_iter()
            .map(|mut row| {
                let value = take_blob(&mut row, 1)?;
                match row.swap_remove(0) {
                    SqlValue::Text(key) => Ok((key, value)),
                    other => Err(StoreError::Failed(format!("sqlite: a key is {other:?}, not text"))),
                }
            })
            .collect()
    }

    fn commit(&self, ops: Vec<Op>) -> Result<(), StoreError> {
        if ops.is_empty() {
            return Ok(());
        }
        self.patiently("BEGIN IMMEDIATE", "beginning a transaction")?;
        let done = self.apply(&ops).and_then(|()| self.patiently("COMMIT", "committing"));
        if done.is_err() {
            // Nothing of a refused or failed commit stays.
            let _ = self.conn.execute("ROLLBACK", &[]);
        }
        done
    }

    fn checkpoint(&self) -> Result<(), StoreError> {
        // In WAL mode erased bytes may still be in the log: move it into the file and empty it.
        // In the default rollback mode there is nothing to do; a host that refuses the pragma (a
        // remote database) keeps its own rules.
        let started = Instant::now();
        loop {
            let Ok(rows) = self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)", &[]) else { return Ok(()) };
            // One row: busy (1 when a reader kept the checkpoint from finishing), log, checkpointed.
            let busy = rows.first().and_then(|r| r.first()) == Some(&SqlValue::Integer(1));
            if !busy {
                return Ok(());
            }
            if started.elapsed() >= BUSY_WAIT {
                return Err(StoreError::Failed("sqlite: a reader kept the log from being emptied".into()));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

/// Column `column` of `row` as bytes, taken out of the row (a `Null` is left in its place).
fn take_blob(row: &mut [SqlValue], column: usize) -> Result<Vec<u8>, StoreError> {
    let Some(cell) = row.get_mut(column) else {
        return Err(StoreError::Failed(format!("sqlite: a row has no column {column}")));
    };
    match std::mem::replace(cell, SqlValue::Null) {
        SqlValue::Blob(bytes) => Ok(bytes),
        // A value written by another tool as text is still its bytes.
        SqlValue::Text(text) => Ok(text.into_bytes()),
        other => Err(StoreError::Failed(format!("sqlite: a value is {other:?}, not a blob"))),
    }
}

/// The least string above every string that starts with `prefix` (none for the empty prefix, or
/// one made only of the last code point): the prefix with its last character raised by one.
fn prefix_end(prefix: &str) -> Option<String> {
    let mut chars: Vec<char> = prefix.chars().collect();
    while let Some(last) = chars.pop() {
        let next = match last as u32 + 1 {
            0xD800 => Some('\u{E000}'),
            n => char::from_u32(n),
        };
        if let Some(next) = next {
            chars.push(next);
            return Some(chars.into_iter().collect());
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A rusqlite connection as the store's [`Sql`], mapping SQLite's busy errors as Spin's host
    /// reports them.
    struct Rusqlite(std::sync::Mutex<rusqlite::Connection>);

    impl Sql for Rusqlite {
        fn execute(&self, statement: &str, params: &[SqlValue]) -> Result<Vec<Vec<SqlValue>>, SqlError> {
            use rusqlite::types::{Value, ValueRef};
            let error = |e: rusqlite::Error| match e.sqlite_error_code() {
                Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked) => {
                    SqlError::Busy(e.to_string())
                }
                _ => SqlError::Failed(e.to_string()),
            };
            let conn = self.0.lock().unwrap();
            let mut stmt = conn.prepare(statement).map_err(error)?;
            let columns = stmt.column_count();
            let params: Vec<Value> = params
                .iter()
                .map(|p| match p {
                    SqlValue::Integer(i) => Value::Integer(*i),
                    SqlValue::Text(t) => Value::Text(t.clone()),
                    SqlValue::Blob(b) => Value::Blob(b.clone()),
                    SqlValue::Null => Value::Null,
                })
                .collect();
            let mut rows = stmt.query(rusqlite::params_from_iter(params)).map_err(error)?;
            let mut out = Vec::new();
            while let Some(row) = rows.next().map_err(error)? {
                out.push(
                    (0..columns)
                        .map(|c| match row.get_ref(c).expect("column") {
                            ValueRef::Integer(i) => SqlValue::Integer(i),
                            ValueRef::Text(t) => SqlValue::Text(String::from_utf8_lossy(t).into_owned()),
                            ValueRef::Blob(b) => SqlValue::Blob(b.to_vec()),
                            ValueRef::Null | ValueRef::Real(_) => SqlValue::Null,
                        })
                        .collect(),
                );
            }
            Ok(out)
        }
    }

    fn store(path: &std::path::Path) -> SqlStore<Rusqlite> {
        SqlStore::open(Rusqlite(std::sync::Mutex::new(rusqlite::Connection::open(path).unwrap()))).unwrap()
    }

    fn put(k: &str, v: &str) -> Op {
        Op::Put(k.into(), v.as_bytes().to_vec())
    }

    fn keys(found: Vec<(String, Vec<u8>)>) -> Vec<String> {
        found.into_iter().map(|(k, _)| k).collect()
    }

    #[test]
    fn a_scan_returns_the_prefix_in_key_order_and_pages_after_a_key() {
        let dir = tempfile::tempdir().unwrap();
        let s = store(&dir.path().join("db"));
        let all = ["a", "b/", "b/1", "b/10", "b/2", "b/é", "b/\u{10FFFF}", "b0", "c/1"];
        s.commit(all.iter().rev().map(|k| put(k, k)).collect()).unwrap();
        assert_eq!(
            keys(s.scan("b/", None, 100).unwrap()),
            ["b/", "b/1", "b/10", "b/2", "b/é", "b/\u{10FFFF}"]
        );
        assert_eq!(keys(s.scan("b/", Some("b/10"), 2).unwrap()), ["b/2", "b/é"]);
        assert_eq!(
            keys(s.scan("b/", Some("a"), 1).unwrap()),
            ["b/"],
            "a start before the prefix is the prefix"
        );
        assert_eq!(s.scan("", None, 100).unwrap().len(), all.len());
        assert_eq!(s.get("b/2").unwrap().unwrap(), b"b/2");
        assert_eq!(s.get("b/3").unwrap(), None);
        assert_eq!(prefix_end("b/"), Some("b0".into()));
        assert_eq!(prefix_end("a\u{10FFFF}"), Some("b".into()));
        assert_eq!(prefix_end("\u{D7FF}"), Some("\u{E000}".into()));
        assert_eq!(prefix_end(""), None);
    }

    #[test]
    fn a_failed_expect_applies_nothing_of_its_commit() {
        let dir = tempfile::tempdir().unwrap();
        let a = store(&dir.path().join("db"));
        let b = store(&dir.path().join("db"));
        a.commit(vec![Op::Expect("seq".into(), None), put("seq", "1"), put("x", "one")]).unwrap();
        let lost = b.commit(vec![put("y", "lost"), Op::Expect("seq".into(), None), put("seq", "1")]);
        assert!(matches!(&lost, Err(StoreError::Conflict(k)) if k == "seq"), "{lost:?}");
        assert_eq!(b.get("y").unwrap(), None, "the put before the failed expect was rolled back");
        b.commit(vec![
            Op::Expect("seq".into(), Some(b"1".to_vec())),
            put("seq", "2"),
            Op::Delete("x".into()),
        ])
        .unwrap();
        assert_eq!(a.get("seq").unwrap().unwrap(), b"2");
        assert_eq!(a.get("x").unwrap(), None);
        // An expect reads the state before the commit, not the commit's own puts (as every store).
        a.commit(vec![put("fresh", "1"), Op::Expect("fresh".into(), None)]).unwrap();
        assert_eq!(b.get("fresh").unwrap().unwrap(), b"1");
    }

    #[test]
    fn a_writer_waits_for_another_connections_transaction() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let s = store(&path);
        let holder = rusqlite::Connection::open(&path).unwrap();
        holder.execute_batch("BEGIN IMMEDIATE; INSERT INTO hindsight_kv VALUES ('held', x'01')").unwrap();
        let release = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            holder.execute_batch("COMMIT").unwrap();
        });
        let started = Instant::now();
        s.commit(vec![Op::Expect("held".into(), Some(vec![1])), put("after", "1")]).unwrap();
        assert!(started.elapsed() >= Duration::from_millis(150), "it waited for the other transaction");
        release.join().unwrap();
        assert_eq!(s.get("after").unwrap().unwrap(), b"1");
    }

    #[test]
    fn a_bank_on_the_sql_store_survives_a_reopen() {
        use hindsight_engine::test_support::HashEmbedder;
        use hindsight_engine::{Engine, Query};
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let engine =
            Engine::with_embedder(std::rc::Rc::new(HashEmbedder { dimension: 64 }), Default::default());
        let now = 1_780_000_000_000;
        let mut bank = engine.open_bank("agent", Box::new(store(&path))).unwrap();
        let mut item = hindsight_types::Memory::new("The deploy script needs the VPN to be up");
        item.force = true;
        bank.retain(vec![item], now).unwrap();
        drop(bank);
        let mut again = engine.open_bank("agent", Box::new(store(&path))).unwrap();
        let query = Query { query: "deploy script VPN".into(), now: Some(now), ..Default::default() };
        let found = again.recall(query).unwrap();
        assert_eq!(found.items[0].memory.content, "The deploy script needs the VPN to be up");
    }
}
