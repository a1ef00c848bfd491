//! Fixtures shared by the end-to-end tests: `Hindsight` over the real built component and model,
//! a fixed clock, the `hindsight` binary, a scripted OpenAI-compatible server, a seeded generator.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;

use hindsight::{
    store::{SqliteStore, Store},
    Bank, Builder, Hindsight, Memory, Query,
};

pub mod scripted_llm;

pub use hindsight::time::DAY_MS;

/// 2026-01-01T00:00:00Z: tests pass time in, never read the clock.
pub const NOW: i64 = 1_767_225_600_000;

/// A builder with nothing but the test defaults: no LLM (tests script their own).
pub fn builder() -> Builder {
    Hindsight::builder().no_llm()
}

/// Opens a builder, or fails the test with the error.
pub fn open(builder: Builder) -> Hindsight {
    builder.open().unwrap_or_else(|e| panic!("hindsight opens: {e}"))
}

/// Banks in memory.
pub fn memory() -> Hindsight {
    open(builder().memory())
}

/// Banks in `store`.
pub fn over(store: Arc<dyn Store>) -> Hindsight {
    open(builder().store(store))
}

/// Banks in a SQLite file, and the store (for checkpoints).
pub fn sqlite(path: &Path) -> (Hindsight, Arc<SqliteStore>) {
    let store = Arc::new(SqliteStore::open(path).expect("database opens"));
    (open(builder().store(store.clone())), store)
}

/// Bank `id` at [`NOW`].
pub fn bank(hs: &Hindsight, id: &str) -> Bank {
    hs.bank(id).expect("a valid bank id").at(NOW)
}

pub fn item(text: &str) -> Memory {
    Memory::new(text)
}

pub fn query(text: &str, k: u32) -> Query {
    Query::new(text).k(k)
}

/// The contents recalled for `text`, best first.
pub fn recall_texts(bank: &Bank, text: &str, k: u32) -> Vec<String> {
    bank.recall(query(text, k)).expect("recall").items.into_iter().map(|r| r.memory.content).collect()
}

/// A few memories that have nothing to do with CSV files or encodings.
pub const UNRELATED: &[&str] = &[
    "The deploy script needs the STAGING_TOKEN secret before it can push images",
    "The user prefers PostgreSQL over MySQL for new services",
    "Retry the payments API with exponential backoff when it returns 503",
    "用户喜欢在周一上午收到周报",
    "Run the integration tests with TZ=UTC or the date assertions fail",
];

/// The `hindsight` binary this workspace built (beside the test executables' directory).
pub fn hindsight_bin() -> PathBuf {
    let exe = std::env::current_exe().expect("the test executable");
    let dir = exe.parent().and_then(Path::parent).expect("target/<profile>");
    let bin = dir.join(format!("hindsight{}", std::env::consts::EXE_SUFFIX));
    assert!(bin.is_file(), "{} is missing: build the workspace (cargo build --workspace)", bin.display());
    bin
}

/// The `hindsight-dev` tools binary this workspace built (bench, eval).
pub fn hindsight_dev_bin() -> PathBuf {
    hindsight_bin().with_file_name(format!("hindsight-dev{}", std::env::consts::EXE_SUFFIX))
}

/// Runs `hindsight-dev ARGS…`.
pub fn dev(args: &[&str]) -> Output {
    Command::new(hindsight_dev_bin()).args(args).output().expect("hindsight-dev runs")
}

/// Runs `hindsight --db DB ARGS…`.
pub fn cli(db: &Path, args: &[&str]) -> Output {
    Command::new(hindsight_bin()).arg("--db").arg(db).args(args).output().expect("hindsight runs")
}

/// The command's stdout as JSON, after checking it succeeded.
pub fn stdout_json(out: &Output) -> serde_json::Value {
    assert!(out.status.success(), "failed: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)))
}

/// A PostgreSQL server for the tests: `HINDSIGHT_TEST_POSTGRES` (a URL) when set, else a
/// throwaway cluster started by `tests/postgres/cluster.sh` and stopped when this process exits.
/// `Err` says why there is none (the caller skips, printing it).
pub fn postgres_server() -> Result<&'static str, String> {
    static SERVER: std::sync::OnceLock<Result<String, String>> = std::sync::OnceLock::new();
    SERVER
        .get_or_init(|| {
            if let Ok(url) = std::env::var("HINDSIGHT_TEST_POSTGRES") {
                return Ok(url);
            }
            let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("postgres/cluster.sh");
            let dir = std::env::temp_dir().join(format!("hindsight-test-pg-{}", std::process::id()));
            let out = Command::new("bash").arg(&script).arg("start").arg(&dir).output().map_err(|e| e.to_string())?;
            if !out.status.success() {
                return Err(format!(
                    "HINDSIGHT_TEST_POSTGRES is unset and no server could be started: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                ));
            }
            // Stops the cluster once this test process is gone.
            let watch = format!(
                "while kill -0 {pid} 2>/dev/null; do sleep 1; done; bash '{script}' stop '{dir}'; rm -rf '{dir}'",
                pid = std::process::id(),
                script = script.display(),
                dir = dir.display()
            );
            Command::new("sh")
                .arg("-c")
                .arg(watch)
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .map_err(|e| e.to_string())?;
            Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
        })
        .as_deref()
        .map_err(|e| e.clone())
}

/// A test that cannot run here says why and returns; under `HINDSIGHT_REQUIRE_SERVICES=1` (CI,
/// where every service is installed) it fails instead, so a broken install cannot pass as green.
pub fn skip(why: &str) {
    if std::env::var("HINDSIGHT_REQUIRE_SERVICES").as_deref() == Ok("1") {
        panic!("this test would skip, and HINDSIGHT_REQUIRE_SERVICES=1: {why}");
    }
    eprintln!("skipped: {why}");
}

/// A new, empty database on the test server, as a URL; `None` (after [`skip`]) when there is no
/// server.
pub fn postgres_database(name: &str) -> Option<String> {
    let server = match postgres_server() {
        Ok(url) => url,
        Err(why) => {
            skip(&why);
            return None;
        }
    };
    let name = format!("{name}_{}", std::process::id());
    let mut admin = postgres::Client::connect(server, postgres::NoTls).expect("the test server answers");
    admin.batch_execute(&format!("DROP DATABASE IF EXISTS {name}")).expect("drop database");
    admin.batch_execute(&format!("CREATE DATABASE {name}")).expect("create database");
    let base = server.rsplit_once('/').expect("a URL with a database").0;
    Some(format!("{base}/{name}"))
}

/// A deterministic generator (xorshift64*): test data must be the same on every run.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
    /// Uniform in [-1, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
    }
}
