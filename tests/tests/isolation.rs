//! What the sandbox and the bank boundary promise, checked: the component imports nothing
//! beyond the store, the LLM and the WASI interfaces Rust's std needs; a component run under
//! the host's WASI context can reach no host file, directory, environment or socket; one bank
//! never sees another's memories, even by guessing ids.

use hindsight::{
    types::{FeedbackOutcome, TaskUpdate},
    Error,
};
use hindsight_tests::*;

#[test]
fn the_component_imports_only_the_store_the_llm_and_std_wasi() {
    let mut config = wasmtime::Config::new();
    config.wasm_component_model(true);
    let engine = wasmtime::Engine::new(&config).unwrap();
    let component = wasmtime::component::Component::new(&engine, hindsight_component::WASM).unwrap();
    let imports: Vec<String> =
        component.component_type().imports(&engine).map(|(name, _)| name.to_string()).collect();
    let allowed = |name: &str| {
        name.starts_with("hindsight:memory/store@")
            || name.starts_with("hindsight:memory/llm@")
            || name.starts_with("hindsight:memory/types@")
            || ["wasi:cli/", "wasi:io/", "wasi:clocks/", "wasi:random/", "wasi:filesystem/"]
                .iter()
                .any(|p| name.starts_with(p))
    };
    let unexpected: Vec<&String> = imports.iter().filter(|n| !allowed(n)).collect();
    assert!(unexpected.is_empty(), "unexpected imports: {unexpected:?} (all: {imports:?})");
    assert!(
        !imports.iter().any(|n| n.starts_with("wasi:sockets/") || n.starts_with("wasi:http/")),
        "{imports:?}"
    );
    // std links the filesystem interfaces, but the host grants no preopened directory, so
    // there is no file the guest can name.
}

#[test]
fn banks_in_one_host_and_store_never_see_each_other() {
    let hs = memory();
    let banks: Vec<_> = (0..12).map(|i| bank(&hs, &format!("tenant-{i}"))).collect();
    let mut ids = Vec::new();
    for (i, b) in banks.iter().enumerate() {
        let text = format!("tenant {i} stores invoices in bucket acme-{i}-invoices");
        ids.push(b.retain([item(&text)]).unwrap()[0].id.clone().unwrap());
    }
    let task = banks[0].begin_task("reconcile tenant 0 invoices").unwrap();
    task.update(TaskUpdate::Note("secret note".into()), None).unwrap();

    for (i, b) in banks.iter().enumerate() {
        let hits = b.recall(query("which bucket holds the invoices", 50)).unwrap();
        assert_eq!(hits.items.len(), 1, "{} sees only its own memory", b.id());
        assert_eq!(hits.items[0].memory.id, ids[i]);
        assert_eq!(b.stats().unwrap().total, 1);
        for (j, other) in ids.iter().enumerate().filter(|(j, _)| *j != i) {
            let not_found = |r: Result<(), Error>| matches!(r, Err(Error::NotFound { .. }));
            assert!(not_found(b.get(other).map(|_| ())), "{} got {j}'s memory by id", b.id());
            assert!(not_found(b.history(other).map(|_| ())));
            assert!(not_found(b.forget_hard(other).map(|_| ())));
            assert!(not_found(b.restore(other).map(|_| ())));
            assert!(not_found(b.feedback([other.clone()], FeedbackOutcome::Failure).map(|_| ())));
        }
        if i > 0 {
            assert!(b.tasks(hindsight::types::TaskFilter::All).unwrap().is_empty());
            assert!(matches!(b.resume_task(task.id()), Err(Error::NotFound { .. })));
        }
    }
    // Nothing a neighbour tried changed anything.
    for (i, b) in banks.iter().enumerate() {
        assert_eq!(b.get(&ids[i]).unwrap().confidence, 0.7);
    }
}

/// Builds `tests/components/sandbox-probe` (a wasm32-wasip2 command, std only: seconds).
fn sandbox_probe() -> std::path::PathBuf {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let target_dir = root.join("target").join("test-components");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = std::process::Command::new(cargo)
        .args(["build", "--quiet", "--release", "--target", "wasm32-wasip2", "--manifest-path"])
        .arg(root.join("tests/components/sandbox-probe/Cargo.toml"))
        .arg("--target-dir")
        .arg(&target_dir)
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .status()
        .expect("cargo runs");
    assert!(status.success(), "building the sandbox probe failed");
    target_dir.join("wasm32-wasip2/release/sandbox-probe.wasm")
}

struct ProbeState {
    wasi: wasmtime_wasi::WasiCtx,
    table: wasmtime::component::ResourceTable,
}

impl wasmtime_wasi::WasiView for ProbeState {
    fn ctx(&mut self) -> wasmtime_wasi::WasiCtxView<'_> {
        wasmtime_wasi::WasiCtxView { ctx: &mut self.wasi, table: &mut self.table }
    }
}

/// Runs the probe with `wasi` (its stdout captured); returns the bit set of what it reached.
fn run_probe(wasm: &std::path::Path, wasi: &mut wasmtime_wasi::WasiCtxBuilder) -> u32 {
    use wasmtime::component::{Component, Linker};
    let stdout = wasmtime_wasi::p2::pipe::MemoryOutputPipe::new(1024);
    let wasi = wasi.stdout(stdout.clone()).build();
    let mut config = wasmtime::Config::new();
    config.wasm_component_model(true);
    let engine = wasmtime::Engine::new(&config).unwrap();
    let component = Component::from_file(&engine, wasm).unwrap();
    let mut linker = Linker::new(&engine);
    wasmtime_wasi::p2::add_to_linker_sync(&mut linker).unwrap();
    let mut store = wasmtime::Store::new(&engine, ProbeState { wasi, table: Default::default() });
    let command =
        wasmtime_wasi::p2::bindings::sync::Command::instantiate(&mut store, &component, &linker).unwrap();
    command.wasi_cli_run().call_run(&mut store).unwrap().expect("the probe ran to the end");
    let printed = String::from_utf8(stdout.contents().to_vec()).unwrap();
    printed.trim().parse().unwrap_or_else(|_| panic!("probe printed {printed:?}"))
}

#[test]
fn a_component_in_the_hosts_sandbox_reaches_no_host_file_directory_environment_or_socket() {
    let probe = sandbox_probe();
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("secret.txt");
    std::fs::write(&secret, "tenant A's API key").unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port().to_string();
    let args = ["probe".to_string(), secret.to_str().unwrap().to_string(), port];

    // The probe works: given the capabilities, it reaches the file, the directory, the
    // environment, the socket and writes (so a 0 below means "refused", not "never tried").
    let mut open = wasmtime_wasi::WasiCtxBuilder::new();
    open.args(&args)
        .env("HOME", "/root")
        .inherit_network()
        .allow_tcp(true)
        .preopened_dir(dir.path(), dir.path().to_str().unwrap(), wasmtime_wasi::FsPerms::ReadWrite)
        .unwrap()
        .preopened_dir("/", "/", wasmtime_wasi::FsPerms::ReadOnly)
        .unwrap();
    assert_eq!(run_probe(&probe, &mut open), 1 | 2 | 4 | 8 | 16 | 32);
    std::fs::remove_file(secret.with_extension("written")).unwrap();

    // The host's own context (plus the arguments and a stdout to report on, which are data, not
    // capabilities): nothing.
    let mut sandboxed = hindsight::__private::sandbox_wasi();
    sandboxed.args(&args);
    let reached = run_probe(&probe, &mut sandboxed);
    assert_eq!(reached, 0, "bits: 1 file, 2 /etc/passwd, 4 directory, 8 environment, 16 tcp, 32 write");
    assert!(!secret.with_extension("written").exists());
}
