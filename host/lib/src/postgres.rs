//! A store several hosts share: the same ordered key-value space as [`crate::SqliteStore`], in one
//! PostgreSQL table. Every commit is one transaction that takes a transaction-scoped advisory
//! lock before it reads its `expect`s, so commits from any number of hosts are serialised exactly
//! as SQLite's write lock serialises processes on one file, and two hosts never overwrite each
//! other's commits.

use std::collections::BTreeMap;
use std::sync::{Condvar, Mutex};
use std::time::Duration;

use hindsight_types::{Op, Store, StoreError};
use postgres::error::SqlState;
use postgres::{Client, Config, NoTls};

use crate::keys::prefix_end;
use crate::{Error, Result};

/// The table layout this host writes, kept in `hindsight_meta`. 1: `hindsight_kv (key bytea,
/// value bytea)`.
pub const POSTGRES_FORMAT: i64 = 1;

/// Connections a store keeps open unless told otherwise.
pub const DEFAULT_POOL_SIZE: usize = 4;

/// The advisory lock every commit (and the schema set-up) takes: one number for "hindsight's
/// tables in this database".
const LOCK: i64 = 0x6869_6e64_7369_6768; // "hindsigh"

/// Attempts at a call whose connection failed before anything could have been applied.
const ATTEMPTS: u32 = 4;
const FIRST_BACKOFF: Duration = Duration::from_millis(100);

/// An ordered key-value space in a PostgreSQL database, with a pool of connections.
pub struct PostgresStore {
    config: Config,
    /// Where it connects, without the password: for messages.
    target: String,
    pool: Mutex<Pool>,
    returned: Condvar,
}

struct Pool {
    idle: Vec<Client>,
    open: usize,
    size: usize,
}

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresStore").field("target", &self.target).finish_non_exhaustive()
    }
}

/// A connection taken from the pool, returned to it when dropped.
struct Lease<'a> {
    store: &'a PostgresStore,
    client: Option<Client>,
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        if let Some(client) = self.client.take() {
            self.store.give_back(client);
        }
    }
}

/// What went wrong with a call, and whether trying again on a new connection is safe.
enum Failure {
    /// The connection broke before the statement could change anything.
    Connection(String),
    /// Anything else: answered as it is.
    Store(StoreError),
}

impl PostgresStore {
    /// Connects to `url` (`postgres://user[:password]@host[:port]/dbname`, or the key=value form)
    /// with at most `pool_size` connections, and creates the table when it is missing. A database
    /// written by a newer hindsight is refused and left as it is.
    pub fn open(url: &str, pool_size: usize) -> Result<PostgresStore> {
        let config: Config = url
            .parse()
            .map_err(|e| Error::Config(format!("--db {}: not a PostgreSQL URL: {e}", redact(url))))?;
        if pool_size == 0 {
            return Err(Error::Config("pool size: must be at least 1".into()));
        }
        let store = PostgresStore {
            target: describe(&config),
            config,
            pool: Mutex::new(Pool { idle: Vec::new(), open: 0, size: pool_size }),
            returned: Condvar::new(),
        };
        store.set_up().map_err(Error::store)?;
        Ok(store)
    }

    /// Creates the tables once (under the lock, so two hosts starting together do not race) and
    /// checks the format.
    fn set_up(&self) -> std::result::Result<(), StoreError> {
        self.with_client(|client| {
            // Tables that exist are only read: a role without CREATE (or a read-only replica)
            // can use a database another role set up.
            let exists: bool = client
                .query_one("SELECT to_regclass('hindsight_meta') IS NOT NULL AND to_regclass('hindsight_kv') IS NOT NULL", &[])
                .map_err(|e| self.failure(e))?
                .get(0);
            if !exists {
                let mut tx = client.transaction().map_err(|e| self.failure(e))?;
                tx.execute("SELECT pg_advisory_xact_lock($1)", &[&LOCK]).map_err(|e| self.failure(e))?;
                tx.batch_execute(&format!(
                    "CREATE TABLE IF NOT EXISTS hindsight_kv (key bytea PRIMARY KEY, value bytea NOT NULL);
                     CREATE TABLE IF NOT EXISTS hindsight_meta (name text PRIMARY KEY, value bigint NOT NULL);
                     INSERT INTO hindsight_meta (name, value) VALUES ('format', {POSTGRES_FORMAT})
                       ON CONFLICT (name) DO NOTHING;"
                ))
                .map_err(|e| self.failure(e))?;
                tx.commit().map_err(|e| self.failure(e))?;
            }
            let format: Option<i64> = client
                .query_opt("SELECT value FROM hindsight_meta WHERE name = 'format'", &[])
                .map_err(|e| self.failure(e))?
                .map(|row| row.get(0));
            match format {
                Some(f) if f > POSTGRES_FORMAT => Err(Failure::Store(StoreError::failed(format!(
                    "{}: the tables are in format {f}, written by a newer hindsight; this one reads up to {POSTGRES_FORMAT}",
                    self.target
                )))),
                _ => Ok(()),
            }
        })
    }

    /// Runs `f` on a pooled connection, retrying on a new one (with backoff) while the
    /// connection failed before anything was applied.
    fn with_client<T>(
        &self,
        mut f: impl FnMut(&mut Client) -> std::result::Result<T, Failure>,
    ) -> std::result::Result<T, StoreError> {
        let mut backoff = FIRST_BACKOFF;
        let mut attempt = 1;
        loop {
            let outcome = match self.take() {
                Ok(client) => {
                    // Given back (or counted out) even if `f` panics.
                    let mut lease = Lease { store: self, client: Some(client) };
                    f(lease.client.as_mut().expect("leased"))
                }
                Err(e) => Err(e),
            };
            match outcome {
                Ok(value) => return Ok(value),
                Err(Failure::Store(e)) => return Err(e),
                Err(Failure::Connection(message)) if attempt >= ATTEMPTS => {
                    return Err(StoreError::failed(format!(
                        "{}: {message} (after {attempt} attempts)",
                        self.target
                    )))
                }
                Err(Failure::Connection(_)) => {
                    // The server went away: every idle connection is dead too.
                    self.drop_idle();
                    std::thread::sleep(backoff);
                    backoff *= 2;
                    attempt += 1;
                }
            }
        }
    }

    fn take(&self) -> std::result::Result<Client, Failure> {
        let mut pool = self.pool.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if let Some(client) = pool.idle.pop() {
                if !client.is_closed() {
                    return Ok(client);
                }
                pool.open -= 1;
                continue;
            }
            if pool.open < pool.size {
                pool.open += 1;
                drop(pool);
                return self.config.connect(NoTls).map_err(|e| {
                    let mut pool = self.pool.lock().unwrap_or_else(|p| p.into_inner());
                    pool.open -= 1;
                    self.returned.notify_one();
                    Failure::Connection(format!("connecting: {}", cause(&e)))
                });
            }
            pool = self.returned.wait(pool).unwrap_or_else(|p| p.into_inner());
        }
    }

    fn drop_idle(&self) {
        let mut pool = self.pool.lock().unwrap_or_else(|p| p.into_inner());
        pool.open -= pool.idle.len();
        pool.idle.clear();
        self.returned.notify_all();
    }

    fn give_back(&self, client: Client) {
        let mut pool = self.pool.lock().unwrap_or_else(|p| p.into_inner());
        if client.is_closed() {
            pool.open -= 1;
        } else {
            pool.idle.push(client);
        }
        self.returned.notify_one();
    }

    /// A statement's error: a broken connection may be retried; a refusal to write is
    /// read-only; the rest fails naming the database and the cause.
    fn failure(&self, e: postgres::Error) -> Failure {
        if e.is_closed() || e.as_db_error().is_none() && e.code().is_none() {
            return Failure::Connection(cause(&e));
        }
        match e.code() {
            Some(c)
                if *c == SqlState::READ_ONLY_SQL_TRANSACTION || *c == SqlState::INSUFFICIENT_PRIVILEGE =>
            {
                Failure::Store(StoreError::ReadOnly(format!("{}: {}", self.target, cause(&e))))
            }
            _ => Failure::Store(StoreError::failed(format!("{}: {}", self.target, cause(&e)))),
        }
    }
}

impl Store for PostgresStore {
    fn erasure_remains(&self) -> Vec<String> {
        vec!["PostgreSQL keeps the deleted rows' old versions (dead tuples) in table hindsight_kv until it is \
              vacuumed: run VACUUM hindsight_kv (autovacuum does, eventually)"
            .into()]
    }

    fn get(&self, key: &str) -> std::result::Result<Option<Vec<u8>>, StoreError> {
        self.with_client(|client| {
            let row = client
                .query_opt("SELECT value FROM hindsight_kv WHERE key = $1", &[&key.as_bytes()])
                .map_err(|e| self.failure(e))?;
            Ok(row.map(|r| r.get(0)))
        })
    }

    fn scan(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        limit: u32,
    ) -> std::result::Result<Vec<(String, Vec<u8>)>, StoreError> {
        // Bounded on both sides so the index scan stops at the prefix's end.
        let lower = prefix.as_bytes();
        let upper = prefix_end(lower);
        let after = start_after.map(str::as_bytes);
        let limit = i64::from(limit);
        let rows = self.with_client(|client| {
            client
                .query(
                    "SELECT key, value FROM hindsight_kv
                     WHERE key >= $1 AND ($2::bytea IS NULL OR key < $2)
                       AND ($3::bytea IS NULL OR key > $3)
                     ORDER BY key LIMIT $4",
                    &[&lower, &upper.as_deref(), &after, &limit],
                )
                .map_err(|e| self.failure(e))
        })?;
        rows.into_iter()
            .map(|row| {
                let key: Vec<u8> = row.get(0);
                let key = String::from_utf8(key)
                    .map_err(|_| StoreError::failed(format!("{}: a key is not UTF-8", self.target)))?;
                Ok((key, row.get(1)))
            })
            .collect()
    }

    fn commit(&self, ops: Vec<Op>) -> std::result::Result<(), StoreError> {
        let mut expects = Vec::new();
        // The last op on a key decides it: one batched upsert and one batched delete.
        let mut last: BTreeMap<&str, Option<&[u8]>> = BTreeMap::new();
        for op in &ops {
            match op {
                Op::Expect(key, want) => expects.push((key, want)),
                Op::Put(key, value) => {
                    last.insert(key, Some(value));
                }
                Op::Delete(key) => {
                    last.insert(key, None);
                }
            }
        }
        let (mut put_keys, mut put_values, mut deletes) = (Vec::new(), Vec::new(), Vec::new());
        for (key, value) in last {
            match value {
                Some(v) => {
                    put_keys.push(key.as_bytes());
                    put_values.push(v);
                }
                None => deletes.push(key.as_bytes()),
            }
        }
        self.with_client(|client| {
            let mut tx = client.transaction().map_err(|e| self.failure(e))?;
            tx.execute("SELECT pg_advisory_xact_lock($1)", &[&LOCK]).map_err(|e| self.failure(e))?;
            for (key, want) in &expects {
                let have: Option<Vec<u8>> = tx
                    .query_opt("SELECT value FROM hindsight_kv WHERE key = $1", &[&key.as_bytes()])
                    .map_err(|e| self.failure(e))?
                    .map(|r| r.get(0));
                if have != **want {
                    return Err(Failure::Store(StoreError::Conflict((*key).clone())));
                }
            }
            if !deletes.is_empty() {
                tx.execute("DELETE FROM hindsight_kv WHERE key = ANY($1)", &[&deletes])
                    .map_err(|e| self.failure(e))?;
            }
            if !put_keys.is_empty() {
                tx.execute(
                    "INSERT INTO hindsight_kv (key, value) SELECT * FROM unnest($1::bytea[], $2::bytea[])
                     ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
                    &[&put_keys, &put_values],
                )
                .map_err(|e| self.failure(e))?;
            }
            // A connection lost while COMMIT is in flight leaves the outcome unknown: not retried.
            tx.commit().map_err(|e| match self.failure(e) {
                Failure::Connection(m) => Failure::Store(StoreError::failed(format!(
                    "{}: the connection broke while committing, so whether the commit applied is unknown: {m}",
                    self.target
                ))),
                other => other,
            })
        })
    }
}

/// An error with its source chain: the postgres crate's own message is often only "db error".
fn cause(e: &postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        return format!("{} ({})", db.message(), db.code().code());
    }
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

/// `user@host:port/dbname`, for messages (never the password).
fn describe(config: &Config) -> String {
    let host = config
        .get_hosts()
        .first()
        .map(|h| match h {
            postgres::config::Host::Tcp(name) => name.clone(),
            postgres::config::Host::Unix(path) => path.display().to_string(),
        })
        .unwrap_or_else(|| "localhost".into());
    let port = config.get_ports().first().copied().unwrap_or(5432);
    format!(
        "postgres://{}@{host}:{port}/{}",
        config.get_user().unwrap_or(""),
        config.get_dbname().unwrap_or("")
    )
}

/// The URL with any password replaced, for messages.
pub(crate) fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let userinfo = &url[scheme + 3..at];
            match userinfo.split_once(':') {
                Some((user, _)) => format!("{}{user}:***{}", &url[..scheme + 3], &url[at..]),
                None => url.to_string(),
            }
        }
        _ => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_never_show_the_password() {
        assert_eq!(redact("postgres://bob:s3cret@db:5432/mem"), "postgres://bob:***@db:5432/mem");
        assert_eq!(redact("postgres://bob@db/mem"), "postgres://bob@db/mem");
        let err = PostgresStore::open("postgres://bob:s3cret@db:notaport/mem", 1).unwrap_err();
        assert!(!err.to_string().contains("s3cret"), "{err}");
    }
}
