//! Helpers shared by the end-to-end tests: hosts over the real built component and model.

use std::path::Path;
use std::sync::Arc;

use hindsight::types::{NewMemory, RecallQuery};
use hindsight::{models, Host, HostConfig, Kv, MemoryKv, SqliteKv};

/// 2026-01-01T00:00:00Z: tests pass time in, never read the clock.
pub const NOW: i64 = 1_767_225_600_000;
pub const DAY_MS: i64 = 86_400_000;

pub fn host_with(kv: Arc<dyn Kv>, config: HostConfig) -> Host {
    let files = models::load(&models::models_dir(None)).unwrap_or_else(|e| panic!("{e:#}"));
    Host::new(kv, files.model, files.tokenizer, config).expect("host starts")
}

pub fn memory_host() -> Host {
    host_with(Arc::new(MemoryKv::new()), HostConfig::default())
}

pub fn sqlite_host(path: &Path) -> (Host, Arc<SqliteKv>) {
    let kv = Arc::new(SqliteKv::open(path).expect("database opens"));
    (host_with(kv.clone(), HostConfig::default()), kv)
}

pub fn item(text: &str) -> NewMemory {
    hindsight::convert::new_memory(text)
}

pub fn query(text: &str, k: u32) -> RecallQuery {
    RecallQuery { now: Some(NOW), ..hindsight::convert::recall_query(text, k) }
}

/// The contents recalled for `text`, best first.
pub fn recall_texts(host: &mut Host, bank: &str, text: &str, k: u32) -> Vec<String> {
    host.recall(bank, &query(text, k)).expect("recall").items.into_iter().map(|r| r.memory.content).collect()
}

/// A few memories that have nothing to do with CSV files or encodings.
pub const UNRELATED: &[&str] = &[
    "The deploy script needs the STAGING_TOKEN secret before it can push images",
    "The user prefers PostgreSQL over MySQL for new services",
    "Retry the payments API with exponential backoff when it returns 503",
    "用户喜欢在周一上午收到周报",
    "Run the integration tests with TZ=UTC or the date assertions fail",
];
