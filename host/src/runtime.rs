//! Loading, sandboxing and calling the component.
//!
//! One `Host` owns a wasmtime engine, the compiled component (from the on-disk cache when it can)
//! and at most one live instance. A trap (memory cap, deadline, guest bug) throws the instance
//! away; the next call builds a fresh one and its banks reopen from the store, which holds
//! everything acknowledged.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context};
use sha2::{Digest, Sha256};
use wasmtime::component::{Component, Linker, ResourceAny, ResourceTable};
use wasmtime::{Config, Engine, Store, StoreLimits, StoreLimitsBuilder};
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

use crate::bindings::exports::hindsight::memory::engine as guest;
use crate::bindings::hindsight::memory::{llm, store, types};
use crate::bindings::Memory as MemoryWorld;
use crate::kv::{Conflict, Kv, KvOp};
use crate::llm::{LlmClient, LlmConfig};

/// The component this host was built with.
pub const BUILT_WASM: &[u8] = include_bytes!(env!("HINDSIGHT_WASM_PATH"));
const BUILT_WASM_SHA256: &str = env!("HINDSIGHT_WASM_SHA256");

const EPOCH_TICK: Duration = Duration::from_millis(10);

#[derive(Debug, Clone)]
pub struct HostConfig {
    /// A component file to use instead of the built-in one.
    pub component: Option<PathBuf>,
    /// Where compiled components are cached.
    pub cache_dir: Option<PathBuf>,
    /// Cap on the guest's linear memory.
    pub memory_limit_bytes: usize,
    /// Wall-clock limit of one call into the guest.
    pub call_deadline: Duration,
    /// Engine settings (JSON text).
    pub settings: String,
    /// The language model lent to the engine; none: the engine's rule-based paths.
    pub llm: Option<LlmConfig>,
}

impl Default for HostConfig {
    fn default() -> Self {
        HostConfig {
            component: None,
            cache_dir: default_cache_dir(),
            // The model needs ~155 MiB; each memory ~1.5 KiB of vector plus its record, so 1 GiB
            // holds a 100k-memory bank with room to spare.
            memory_limit_bytes: 1024 << 20,
            call_deadline: Duration::from_secs(120),
            settings: String::new(),
            llm: None,
        }
    }
}

pub fn default_cache_dir() -> Option<PathBuf> {
    dirs::cache_dir().map(|d| d.join("hindsight").join("components"))
}

/// A failure of a call: the engine said no (with its typed error), or the instance died.
#[derive(Debug)]
pub enum CallError {
    Engine(types::Error),
    /// The guest trapped (memory cap, deadline, bug) or the host failed; the instance is gone.
    Trap(anyhow::Error),
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Engine(e) => {
                let (kind, msg) = match e {
                    types::Error::InvalidInput(m) => ("invalid input", m),
                    types::Error::NotFound(m) => ("not found", m),
                    types::Error::Store(m) => ("store error", m),
                    types::Error::Model(m) => ("model error", m),
                    types::Error::Limit(m) => ("limit exceeded", m),
                    types::Error::Corrupt(m) => ("corrupt data", m),
                    types::Error::Llm(m) => ("language model error", m),
                };
                write!(f, "{kind}: {msg}")
            }
            CallError::Trap(e) => write!(f, "the component stopped: {e:#}"),
        }
    }
}

impl std::error::Error for CallError {}

impl CallError {
    /// For a single-item retain: "importance: …" rather than the batch's "items[0].importance: …".
    pub fn without_item_prefix(self) -> CallError {
        let strip = |m: String| m.strip_prefix("items[0].").map(str::to_string).unwrap_or(m);
        match self {
            CallError::Engine(types::Error::InvalidInput(m)) => {
                CallError::Engine(types::Error::InvalidInput(strip(m)))
            }
            CallError::Engine(types::Error::Limit(m)) => CallError::Engine(types::Error::Limit(strip(m))),
            other => other,
        }
    }
}

pub type CallResult<T> = Result<T, CallError>;

pub struct HostState {
    wasi: WasiCtx,
    table: ResourceTable,
    limits: Limits,
    kv: Arc<dyn Kv>,
    llm: Option<Arc<LlmClient>>,
}

/// wasmtime's limits plus a record of how large linear memory has grown.
struct Limits {
    inner: StoreLimits,
    memory_bytes: usize,
}

impl wasmtime::ResourceLimiter for Limits {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let allowed = self.inner.memory_growing(current, desired, maximum)?;
        if allowed {
            self.memory_bytes = self.memory_bytes.max(desired);
        }
        Ok(allowed)
    }

    fn table_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        self.inner.table_growing(current, desired, maximum)
    }

    fn memory_grow_failed(&mut self, error: wasmtime::Error) -> wasmtime::Result<()> {
        self.inner.memory_grow_failed(error)
    }

    fn instances(&self) -> usize {
        self.inner.instances()
    }

    fn tables(&self) -> usize {
        self.inner.tables()
    }

    fn memories(&self) -> usize {
        self.inner.memories()
    }
}

impl WasiView for HostState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView { ctx: &mut self.wasi, table: &mut self.table }
    }
}

impl types::Host for HostState {}

impl store::Host for HostState {
    fn get(&mut self, key: String) -> Result<Option<Vec<u8>>, String> {
        self.kv.get(&key).map_err(|e| format!("{e:#}"))
    }

    fn scan(
        &mut self,
        prefix: String,
        start_after: Option<String>,
        limit: u32,
    ) -> Result<Vec<(String, Vec<u8>)>, String> {
        self.kv.scan(&prefix, start_after.as_deref(), limit).map_err(|e| format!("{e:#}"))
    }

    fn commit(&mut self, ops: Vec<store::Op>) -> Result<(), store::CommitError> {
        let ops = ops
            .into_iter()
            .map(|op| match op {
                store::Op::Put((k, v)) => KvOp::Put(k, v),
                store::Op::Delete(k) => KvOp::Delete(k),
                store::Op::Expect((k, v)) => KvOp::Expect(k, v),
            })
            .collect();
        self.kv.commit(ops).map_err(|e| match e.downcast_ref::<Conflict>() {
            Some(conflict) => store::CommitError::Conflict(conflict.to_string()),
            None => store::CommitError::Failed(format!("{e:#}")),
        })
    }
}

impl llm::Host for HostState {
    fn complete(&mut self, request: llm::Request) -> Result<llm::Response, llm::LlmError> {
        match &self.llm {
            Some(client) => client.complete(&request),
            None => Err(llm::LlmError::Unavailable("this host has no language model configured".into())),
        }
    }
}

/// A live instance: its store, the engine resource and the banks it has opened.
struct Instance {
    store: Store<HostState>,
    world: MemoryWorld,
    engine: ResourceAny,
    banks: HashMap<String, ResourceAny>,
}

impl Instance {
    /// The bank's resource, opened on first use and kept for the instance's life.
    fn bank_handle(&mut self, bank: &str) -> wasmtime::Result<Result<ResourceAny, types::Error>> {
        if let Some(h) = self.banks.get(bank) {
            return Ok(Ok(*h));
        }
        let opened = self.world.hindsight_memory_engine().engine().call_open_bank(
            &mut self.store,
            self.engine,
            bank,
        )?;
        if let Ok(h) = &opened {
            self.banks.insert(bank.to_string(), *h);
        }
        Ok(opened)
    }
}

pub struct Host {
    engine: Engine,
    component: Component,
    linker: Arc<Linker<HostState>>,
    kv: Arc<dyn Kv>,
    llm: Option<Arc<LlmClient>>,
    model: Arc<Vec<u8>>,
    tokenizer: Arc<Vec<u8>>,
    config: HostConfig,
    instance: Option<Instance>,
    component_sha256: String,
    _ticker: Arc<EpochTicker>,
    pub timings: Timings,
}

/// Advances the engine's epoch every tick so call deadlines fire; stops when the last host
/// sharing the engine is dropped.
struct EpochTicker {
    stop: Arc<AtomicBool>,
}

impl EpochTicker {
    fn start(engine: &Engine) -> anyhow::Result<EpochTicker> {
        let stop = Arc::new(AtomicBool::new(false));
        let engine = engine.clone();
        let stopped = stop.clone();
        std::thread::Builder::new().name("hindsight-epoch".into()).spawn(move || {
            while !stopped.load(Ordering::Relaxed) {
                std::thread::sleep(EPOCH_TICK);
                engine.increment_epoch();
            }
        })?;
        Ok(EpochTicker { stop })
    }
}

impl Drop for EpochTicker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// How long the expensive steps took, for `--verbose` and the benchmarks.
#[derive(Debug, Default, Clone)]
pub struct Timings {
    pub component_load: Duration,
    pub component_from_cache: bool,
    pub instantiate: Duration,
}

/// The interfaces the component imports, as `package/interface@version` names.
pub fn component_imports(config: &HostConfig) -> anyhow::Result<Vec<String>> {
    let engine = wasm_engine()?;
    let (component, _) = load_component(&engine, BUILT_WASM, BUILT_WASM_SHA256, config.cache_dir.as_deref())?;
    Ok(component.component_type().imports(&engine).map(|(name, _)| name.to_string()).collect())
}

/// What the guest is granted beyond the store and the llm: clocks and randomness. No preopened
/// directory (so no file to name), no environment or arguments, stdio discarded, no TCP, UDP or
/// name lookup. Tests run a probe component under this same context.
pub fn sandbox_wasi() -> WasiCtxBuilder {
    let mut wasi = WasiCtxBuilder::new();
    wasi.allow_tcp(false).allow_udp(false).allow_ip_name_lookup(false);
    wasi
}

fn wasm_engine() -> anyhow::Result<Engine> {
    let mut config = Config::new();
    config.wasm_component_model(true);
    config.epoch_interruption(true);
    config.cranelift_opt_level(wasmtime::OptLevel::Speed);
    // `HINDSIGHT_PERFMAP=1`: name the guest's functions for `perf` (/tmp/perf-PID.map).
    if std::env::var_os("HINDSIGHT_PERFMAP").is_some() {
        config.profiler(wasmtime::ProfilingStrategy::PerfMap);
    }
    Ok(Engine::new(&config)?)
}

/// Loads the compiled component from the cache, or compiles and caches it. The cache key is the
/// wasmtime version and the wasm's sha256, so a new build or a new wasmtime never loads stale code.
pub fn load_component(
    engine: &Engine,
    wasm: &[u8],
    sha256: &str,
    cache_dir: Option<&Path>,
) -> anyhow::Result<(Component, bool)> {
    let Some(dir) = cache_dir else {
        return Ok((Component::new(engine, wasm)?, false));
    };
    // The engine's compatibility hash covers the wasmtime version and every setting that
    // changes compiled code.
    let mut engine_hash = std::collections::hash_map::DefaultHasher::new();
    engine.precompile_compatibility_hash().hash(&mut engine_hash);
    let path = dir.join(format!("hindsight-{:016x}-{}.cwasm", engine_hash.finish(), &sha256[..32]));
    if path.exists() {
        // SAFETY: the file was written by `Component::serialize` of this same wasmtime version
        // (it is in the name) into the user's own cache directory; deserialize checks the
        // engine configuration and refuses a mismatch, in which case we recompile below.
        match unsafe { Component::deserialize_file(engine, &path) } {
            Ok(component) => return Ok((component, true)),
            Err(_) => {
                let _ = std::fs::remove_file(&path);
            }
        }
    }
    let component =
        Component::new(engine, wasm).map_err(anyhow::Error::from).context("compiling the component")?;
    if std::fs::create_dir_all(dir).is_ok() {
        if let Ok(bytes) = component.serialize() {
            // Write then rename, so a concurrent reader never sees half a file.
            let tmp = path.with_extension(format!("tmp{}", std::process::id()));
            if std::fs::write(&tmp, bytes).is_ok() {
                let _ = std::fs::rename(&tmp, &path);
                prune_cache(dir, &path);
            }
        }
    }
    Ok((component, false))
}

/// Each build leaves a ~60 MB compiled component behind: keep the few newest.
fn prune_cache(dir: &Path, keep: &Path) {
    const KEEP: usize = 4;
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    let mut compiled: Vec<(std::time::SystemTime, PathBuf)> = entries
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| {
            p.extension().is_some_and(|x| x == "cwasm")
                && p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("hindsight-"))
        })
        .filter_map(|p| Some((std::fs::metadata(&p).ok()?.modified().ok()?, p)))
        .collect();
    compiled.sort_by_key(|entry| std::cmp::Reverse(entry.0));
    for (_, old) in compiled.into_iter().skip(KEEP) {
        if old != keep {
            let _ = std::fs::remove_file(old);
        }
    }
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

impl Host {
    pub fn new(
        kv: Arc<dyn Kv>,
        model: Vec<u8>,
        tokenizer: Vec<u8>,
        config: HostConfig,
    ) -> anyhow::Result<Host> {
        let engine = wasm_engine()?;
        let start = Instant::now();
        let (wasm, component_sha256) = match &config.component {
            Some(path) => {
                let wasm =
                    std::fs::read(path).with_context(|| format!("reading component {}", path.display()))?;
                let sha = sha256_hex(&wasm);
                (std::borrow::Cow::Owned(wasm), sha)
            }
            None => (std::borrow::Cow::Borrowed(BUILT_WASM), BUILT_WASM_SHA256.to_string()),
        };
        let (component, from_cache) =
            load_component(&engine, &wasm, &component_sha256, config.cache_dir.as_deref())?;
        let component_load = start.elapsed();
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker)?;
        MemoryWorld::add_to_linker::<_, wasmtime::component::HasSelf<_>>(&mut linker, |s| s)?;

        let ticker = Arc::new(EpochTicker::start(&engine)?);
        let llm = config.llm.clone().map(|c| Arc::new(LlmClient::new(c, kv.clone())));
        Ok(Host {
            engine,
            component,
            linker: Arc::new(linker),
            kv,
            llm,
            model: Arc::new(model),
            tokenizer: Arc::new(tokenizer),
            config,
            instance: None,
            component_sha256,
            _ticker: ticker,
            timings: Timings { component_load, component_from_cache: from_cache, ..Default::default() },
        })
    }

    /// Another host over the same compiled component, store and LLM, with its own instance (made
    /// on first use): a pool's workers are siblings, so the component is loaded once.
    pub fn sibling(&self) -> Host {
        Host {
            engine: self.engine.clone(),
            component: self.component.clone(),
            linker: self.linker.clone(),
            kv: self.kv.clone(),
            llm: self.llm.clone(),
            model: self.model.clone(),
            tokenizer: self.tokenizer.clone(),
            config: self.config.clone(),
            instance: None,
            component_sha256: self.component_sha256.clone(),
            _ticker: self._ticker.clone(),
            timings: Timings { instantiate: Duration::ZERO, ..self.timings.clone() },
        }
    }

    fn deadline_ticks(&self) -> u64 {
        (self.config.call_deadline.as_millis() / EPOCH_TICK.as_millis()).max(1) as u64
    }

    fn instantiate(&mut self) -> CallResult<Instance> {
        let start = Instant::now();
        let wasi = sandbox_wasi().build();
        // trap_on_grow_failure: an allocation past the cap stops the call with a clear trap
        // instead of surfacing as a guest-side out-of-memory abort.
        let inner = StoreLimitsBuilder::new()
            .memory_size(self.config.memory_limit_bytes)
            .trap_on_grow_failure(true)
            .build();
        let limits = Limits { inner, memory_bytes: 0 };
        let state = HostState {
            wasi,
            table: ResourceTable::new(),
            limits,
            kv: self.kv.clone(),
            llm: self.llm.clone(),
        };
        let mut store = Store::new(&self.engine, state);
        store.limiter(|s| &mut s.limits);
        store.set_epoch_deadline(self.deadline_ticks());
        let world = MemoryWorld::instantiate(&mut store, &self.component, &self.linker)
            .map_err(|e| CallError::Trap(e.into()))?;
        let engine = world
            .hindsight_memory_engine()
            .engine()
            .call_create(&mut store, &self.model, &self.tokenizer, &self.config.settings)
            .map_err(|e| CallError::Trap(describe_trap(e.into(), self.config.memory_limit_bytes)))?
            .map_err(CallError::Engine)?;
        self.timings.instantiate = start.elapsed();
        Ok(Instance { store, world, engine, banks: HashMap::new() })
    }

    /// Runs `f` against the live instance (made on demand) under the call deadline; a trap
    /// discards the instance.
    fn with_instance<T>(
        &mut self,
        f: impl FnOnce(&mut Instance) -> wasmtime::Result<Result<T, types::Error>>,
    ) -> CallResult<T> {
        if self.instance.is_none() {
            self.instance = Some(self.instantiate()?);
        }
        let ticks = self.deadline_ticks();
        let memory_cap = self.config.memory_limit_bytes;
        let instance = self.instance.as_mut().expect("instance just made");
        instance.store.set_epoch_deadline(ticks);
        match f(instance) {
            Ok(result) => result.map_err(CallError::Engine),
            Err(trap) => {
                self.instance = None;
                Err(CallError::Trap(describe_trap(trap.into(), memory_cap)))
            }
        }
    }

    fn with_bank<T>(
        &mut self,
        bank: &str,
        f: impl FnOnce(
            &guest::GuestBank,
            &mut Store<HostState>,
            ResourceAny,
        ) -> wasmtime::Result<Result<T, types::Error>>,
    ) -> CallResult<T> {
        self.with_instance(|inst| match inst.bank_handle(bank)? {
            Ok(handle) => f(&inst.world.hindsight_memory_engine().bank(), &mut inst.store, handle),
            Err(e) => Ok(Err(e)),
        })
    }

    /// sha256 of the component's wasm: identifies the engine build (cache keys, reports).
    pub fn component_sha256(&self) -> &str {
        &self.component_sha256
    }

    pub fn model_id(&mut self) -> CallResult<String> {
        self.with_instance(|inst| {
            let id =
                inst.world.hindsight_memory_engine().engine().call_model_id(&mut inst.store, inst.engine)?;
            Ok(Ok(id))
        })
    }

    pub fn embed(&mut self, texts: &[String]) -> CallResult<Vec<Vec<f32>>> {
        self.with_instance(|inst| {
            inst.world.hindsight_memory_engine().engine().call_embed(&mut inst.store, inst.engine, texts)
        })
    }

    pub fn retain(
        &mut self,
        bank: &str,
        items: &[types::NewMemory],
        now: Option<i64>,
    ) -> CallResult<Vec<types::RetainOutcome>> {
        self.with_bank(bank, |b, store, h| b.call_retain(store, h, items, now))
    }

    pub fn recall(&mut self, bank: &str, query: &types::RecallQuery) -> CallResult<types::RecallResult> {
        self.with_bank(bank, |b, store, h| b.call_recall(store, h, query))
    }

    pub fn get(&mut self, bank: &str, id: &str) -> CallResult<types::Memory> {
        self.with_bank(bank, |b, store, h| b.call_get(store, h, id))
    }

    pub fn forget(&mut self, bank: &str, id: &str, hard: bool, now: Option<i64>) -> CallResult<()> {
        self.with_bank(bank, |b, store, h| b.call_forget(store, h, id, hard, now))
    }

    pub fn restore(&mut self, bank: &str, id: &str, now: Option<i64>) -> CallResult<types::Memory> {
        self.with_bank(bank, |b, store, h| b.call_restore(store, h, id, now))
    }

    pub fn stats(&mut self, bank: &str) -> CallResult<types::Stats> {
        self.with_bank(bank, |b, store, h| b.call_stats(store, h))
    }

    pub fn feedback(
        &mut self,
        bank: &str,
        ids: &[String],
        outcome: types::FeedbackOutcome,
        now: Option<i64>,
    ) -> CallResult<Vec<types::Memory>> {
        self.with_bank(bank, |b, store, h| b.call_feedback(store, h, ids, outcome, now))
    }

    pub fn history(&mut self, bank: &str, id: &str) -> CallResult<Vec<types::HistoryEntry>> {
        self.with_bank(bank, |b, store, h| b.call_history(store, h, id))
    }

    pub fn maintain(&mut self, bank: &str, now: Option<i64>) -> CallResult<types::MaintainReport> {
        self.with_bank(bank, |b, store, h| b.call_maintain(store, h, now))
    }

    /// Starts a task; returns its state (the task resource is released: resume by id).
    pub fn task_begin(
        &mut self,
        bank: &str,
        goal: &str,
        task_type: Option<&str>,
        now: Option<i64>,
    ) -> CallResult<types::TaskState> {
        self.with_instance(|inst| {
            let handle = inst.bank_handle(bank)?;
            let handle = match handle {
                Ok(h) => h,
                Err(e) => return Ok(Err(e)),
            };
            let api = inst.world.hindsight_memory_engine();
            let task = match api.bank().call_begin_task(&mut inst.store, handle, goal, task_type, now)? {
                Ok(t) => t,
                Err(e) => return Ok(Err(e)),
            };
            let state = api.task().call_state(&mut inst.store, task);
            task.resource_drop(&mut inst.store)?;
            state
        })
    }

    /// Runs `f` on the task `id` of `bank` (resumed from the store), then releases it.
    fn with_task<T>(
        &mut self,
        bank: &str,
        id: &str,
        f: impl FnOnce(
            &guest::GuestTask,
            &mut Store<HostState>,
            ResourceAny,
        ) -> wasmtime::Result<Result<T, types::Error>>,
    ) -> CallResult<T> {
        self.with_instance(|inst| {
            let handle = match inst.bank_handle(bank)? {
                Ok(h) => h,
                Err(e) => return Ok(Err(e)),
            };
            let api = inst.world.hindsight_memory_engine();
            let task = match api.bank().call_resume_task(&mut inst.store, handle, id)? {
                Ok(t) => t,
                Err(e) => return Ok(Err(e)),
            };
            let result = f(&api.task(), &mut inst.store, task);
            task.resource_drop(&mut inst.store)?;
            result
        })
    }

    pub fn task_state(&mut self, bank: &str, id: &str) -> CallResult<types::TaskState> {
        self.with_task(bank, id, |t, store, h| t.call_state(store, h))
    }

    pub fn task_update(
        &mut self,
        bank: &str,
        id: &str,
        update: &types::TaskUpdate,
        expected_version: Option<u32>,
        now: Option<i64>,
    ) -> CallResult<types::TaskState> {
        self.with_task(bank, id, |t, store, h| t.call_update(store, h, update, expected_version, now))
    }

    pub fn task_end(
        &mut self,
        bank: &str,
        id: &str,
        outcome: types::TaskOutcome,
        detail: Option<&str>,
        force: bool,
        now: Option<i64>,
    ) -> CallResult<types::TaskEnd> {
        self.with_task(bank, id, |t, store, h| t.call_end(store, h, outcome, detail, force, now))
    }

    pub fn tasks(&mut self, bank: &str, include_ended: bool) -> CallResult<Vec<types::TaskState>> {
        self.with_bank(bank, |b, store, h| b.call_tasks(store, h, include_ended))
    }

    pub fn consolidate(
        &mut self,
        bank: &str,
        since: Option<i64>,
        now: Option<i64>,
    ) -> CallResult<Vec<types::Distilled>> {
        self.with_bank(bank, |b, store, h| b.call_consolidate(store, h, since, now))
    }

    /// LLM token usage by operation, from the store.
    pub fn llm_usage(&self) -> anyhow::Result<std::collections::BTreeMap<String, crate::llm::Usage>> {
        crate::llm::usage(&*self.kv)
    }

    /// Bytes of linear memory the live instance has grown to (0 without one).
    pub fn guest_memory_bytes(&self) -> usize {
        self.instance.as_ref().map_or(0, |inst| inst.store.data().limits.memory_bytes)
    }

    /// Changes the per-call deadline from the next call on.
    pub fn set_call_deadline(&mut self, deadline: Duration) {
        self.config.call_deadline = deadline;
    }

    /// Drops the live instance (tests use this to prove the store, not the instance, holds the data).
    pub fn discard_instance(&mut self) {
        self.instance = None;
    }
}

fn describe_trap(err: anyhow::Error, memory_cap: usize) -> anyhow::Error {
    const AFTER: &str = "the instance was discarded and the next call reopens the bank from the store";
    if let Some(trap) = err.downcast_ref::<wasmtime::Trap>() {
        let why = match trap {
            wasmtime::Trap::Interrupt => "the call passed its deadline".to_string(),
            wasmtime::Trap::OutOfFuel => "the call ran out of fuel".to_string(),
            other => format!("trap: {other}"),
        };
        return anyhow!("{why}; {AFTER}");
    }
    // A refused memory.grow: say so in one line, not with the guest's allocator backtrace.
    if format!("{err:#}").contains("forcing trap when growing memory") {
        return anyhow!(
            "the call needed more memory than the cap of {} MiB (--memory-mib); {AFTER}",
            memory_cap >> 20
        );
    }
    err.context(AFTER)
}
