//! Loading, sandboxing and calling the component: one wasmtime engine and compiled component per
//! `Hindsight`, and per worker at most one live instance. A trap (memory cap, deadline, engine
//! bug) throws that instance away; the next call builds a fresh one and its banks reopen from the
//! store, which holds everything acknowledged.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hindsight_types::{Llm, Store};
use sha2::{Digest, Sha256};
use wasmtime::component::{Component, HasSelf, Linker, ResourceAny, ResourceTable};
use wasmtime::{Config, Engine, StoreLimits, StoreLimitsBuilder};
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

use crate::wit::{guest, llm, store, types, Memory as World, WitInto};
use crate::{Error, Result};

const EPOCH_TICK: Duration = Duration::from_millis(10);

/// What every instance gets beyond the store and the llm: clocks and randomness. No preopened
/// directory (so no file to name), no environment or arguments, stdio discarded, no TCP, UDP or
/// name lookup.
pub fn sandbox_wasi() -> WasiCtxBuilder {
    let mut wasi = WasiCtxBuilder::new();
    wasi.allow_tcp(false).allow_udp(false).allow_ip_name_lookup(false);
    wasi
}

pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// How long the expensive start-up steps took.
#[derive(Debug, Clone, Copy, Default)]
pub struct Timings {
    /// Compiling the component, or loading it precompiled from the cache.
    pub component_load: Duration,
    /// Whether it came precompiled from the cache.
    pub component_from_cache: bool,
}

/// Everything the workers share: the engine, the compiled component, the lent store and model.
pub(crate) struct Runtime {
    engine: Engine,
    component: Component,
    linker: Linker<HostState>,
    pub(crate) store: Arc<dyn Store>,
    llm: Option<Arc<dyn Llm>>,
    model: Vec<u8>,
    tokenizer: Vec<u8>,
    settings: String,
    memory_limit: usize,
    deadline: Duration,
    pub(crate) component_sha256: String,
    pub(crate) timings: Timings,
    _ticker: EpochTicker,
}

pub(crate) struct RuntimeConfig {
    pub store: Arc<dyn Store>,
    pub llm: Option<Arc<dyn Llm>>,
    pub model: Vec<u8>,
    pub tokenizer: Vec<u8>,
    pub settings: String,
    pub memory_limit: usize,
    pub deadline: Duration,
    pub component: Option<PathBuf>,
    pub cache_dir: Option<PathBuf>,
}

impl Runtime {
    pub(crate) fn new(config: RuntimeConfig) -> Result<Runtime> {
        let engine = wasm_engine()?;
        let start = Instant::now();
        let (wasm, component_sha256) = match &config.component {
            Some(path) => {
                let wasm = std::fs::read(path)
                    .map_err(|e| Error::Config(format!("reading the component {}: {e}", path.display())))?;
                let sha = sha256_hex(&wasm);
                (std::borrow::Cow::Owned(wasm), sha)
            }
            None => (
                std::borrow::Cow::Borrowed(hindsight_component::WASM),
                hindsight_component::SHA256.to_string(),
            ),
        };
        let (component, from_cache) =
            load_component(&engine, &wasm, &component_sha256, config.cache_dir.as_deref()).map_err(|e| {
                let what = config.component.as_ref().map_or("the built-in component".to_string(), |p| {
                    format!("the component {}", p.display())
                });
                Error::Config(format!("{what} could not be compiled (is it a hindsight component?): {e}"))
            })?;
        let component_load = start.elapsed();
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker).map_err(host_failure)?;
        World::add_to_linker::<_, HasSelf<_>>(&mut linker, |s| s).map_err(host_failure)?;
        let ticker = EpochTicker::start(&engine)?;
        Ok(Runtime {
            engine,
            component,
            linker,
            store: config.store,
            llm: config.llm,
            model: config.model,
            tokenizer: config.tokenizer,
            settings: config.settings,
            memory_limit: config.memory_limit,
            deadline: config.deadline,
            component_sha256,
            timings: Timings { component_load, component_from_cache: from_cache },
            _ticker: ticker,
        })
    }

    fn deadline_ticks(&self) -> u64 {
        (self.deadline.as_millis() / EPOCH_TICK.as_millis()).max(1) as u64
    }

    fn instantiate(&self) -> Result<Instance> {
        let limits = Limits {
            inner: StoreLimitsBuilder::new()
                .memory_size(self.memory_limit)
                .trap_on_grow_failure(true)
                .build(),
            memory_bytes: 0,
            refused: false,
        };
        let state = HostState {
            wasi: sandbox_wasi().build(),
            table: ResourceTable::new(),
            limits,
            store: self.store.clone(),
            llm: self.llm.clone(),
            deadline_at: Instant::now() + self.deadline,
        };
        let mut store = wasmtime::Store::new(&self.engine, state);
        store.limiter(|s| &mut s.limits);
        store.set_epoch_deadline(self.deadline_ticks());
        let world = World::instantiate(&mut store, &self.component, &self.linker)
            .map_err(|e| self.describe_trap(e, &store))?;
        let engine = match world.hindsight_memory_api().engine().call_create(
            &mut store,
            &self.model,
            &self.tokenizer,
            &self.settings,
        ) {
            Ok(created) => created?,
            Err(trap) => return Err(self.describe_trap(trap, &store)),
        };
        Ok(Instance { store, world, engine, banks: HashMap::new() })
    }

    /// A trap as one line that says what happened, not the guest's backtrace.
    fn describe_trap(&self, err: wasmtime::Error, store: &wasmtime::Store<HostState>) -> Error {
        const AFTER: &str = "the instance was discarded and the next call starts a fresh one from the store";
        if store.data().limits.refused {
            return Error::Trap(format!(
                "the call needed more memory than the cap of {} MiB; {AFTER}",
                self.memory_limit >> 20
            ));
        }
        let why = match err.downcast_ref::<wasmtime::Trap>() {
            Some(wasmtime::Trap::Interrupt) => {
                format!("the call passed its deadline of {} ms", self.deadline.as_millis())
            }
            Some(wasmtime::Trap::OutOfFuel) => "the call ran out of fuel".to_string(),
            Some(other) => format!("trap: {other}"),
            None => format!("{err:#}"),
        };
        Error::Trap(format!("{why}; {AFTER}"))
    }
}

fn host_failure(e: wasmtime::Error) -> Error {
    Error::Config(format!("setting up the wasmtime host: {e:#}"))
}

fn wasm_engine() -> Result<Engine> {
    let mut config = Config::new();
    config.wasm_component_model(true);
    config.epoch_interruption(true);
    config.cranelift_opt_level(wasmtime::OptLevel::Speed);
    // `HINDSIGHT_PERFMAP=1`: name the guest's functions for `perf` (/tmp/perf-PID.map).
    if std::env::var_os("HINDSIGHT_PERFMAP").is_some() {
        config.profiler(wasmtime::ProfilingStrategy::PerfMap);
    }
    Engine::new(&config).map_err(host_failure)
}

/// Loads the compiled component from the cache, or compiles and caches it. The cache key is the
/// engine's compatibility hash and the wasm's sha256, so a new build or a new wasmtime never loads
/// stale code.
pub fn load_component(
    engine: &Engine,
    wasm: &[u8],
    sha256: &str,
    cache_dir: Option<&Path>,
) -> wasmtime::Result<(Component, bool)> {
    let Some(dir) = cache_dir else {
        return Ok((Component::new(engine, wasm)?, false));
    };
    let mut engine_hash = std::collections::hash_map::DefaultHasher::new();
    engine.precompile_compatibility_hash().hash(&mut engine_hash);
    let path = dir.join(format!("hindsight-{:016x}-{}.cwasm", engine_hash.finish(), &sha256[..32]));
    if path.exists() {
        // SAFETY: the file was written by `Component::serialize` of a wasmtime with this same
        // compatibility hash (it is in the name) into the user's own cache directory;
        // deserialize checks the engine configuration and refuses a mismatch, in which case we
        // recompile below.
        match unsafe { Component::deserialize_file(engine, &path) } {
            Ok(component) => return Ok((component, true)),
            Err(_) => {
                let _ = std::fs::remove_file(&path);
            }
        }
    }
    let component = Component::new(engine, wasm)?;
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

/// Each build leaves a compiled component behind: keep the few newest.
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

/// Advances the engine's epoch every tick so call deadlines fire; stops with the runtime.
struct EpochTicker {
    stop: Arc<AtomicBool>,
}

impl EpochTicker {
    fn start(engine: &Engine) -> Result<EpochTicker> {
        let stop = Arc::new(AtomicBool::new(false));
        let engine = engine.clone();
        let stopped = stop.clone();
        std::thread::Builder::new()
            .name("hindsight-epoch".into())
            .spawn(move || {
                while !stopped.load(Ordering::Relaxed) {
                    std::thread::sleep(EPOCH_TICK);
                    engine.increment_epoch();
                }
            })
            .map_err(|e| Error::Config(format!("starting the deadline ticker thread: {e}")))?;
        Ok(EpochTicker { stop })
    }
}

impl Drop for EpochTicker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

pub(crate) struct HostState {
    wasi: WasiCtx,
    table: ResourceTable,
    limits: Limits,
    store: Arc<dyn Store>,
    llm: Option<Arc<dyn Llm>>,
    /// When the current call must be done: LLM calls made for it get the time left, no more.
    deadline_at: Instant,
}

/// wasmtime's limits, plus how large linear memory has grown and whether a growth was refused
/// (so a trap past the cap is told apart from others without reading wasmtime's message).
struct Limits {
    inner: StoreLimits,
    memory_bytes: usize,
    refused: bool,
}

impl wasmtime::ResourceLimiter for Limits {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let allowed = self.inner.memory_growing(current, desired, maximum);
        match &allowed {
            Ok(true) => self.memory_bytes = self.memory_bytes.max(desired),
            _ => self.refused = true,
        }
        allowed
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
        self.refused = true;
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
    fn get(&mut self, key: String) -> Result<Option<Vec<u8>>, store::StoreError> {
        self.store.get(&key).map_err(WitInto::wit_into)
    }

    fn scan(
        &mut self,
        prefix: String,
        start_after: Option<String>,
        limit: u32,
    ) -> Result<Vec<(String, Vec<u8>)>, store::StoreError> {
        self.store.scan(&prefix, start_after.as_deref(), limit).map_err(WitInto::wit_into)
    }

    fn commit(&mut self, ops: Vec<store::Op>) -> Result<(), store::StoreError> {
        self.store.commit(ops.wit_into()).map_err(WitInto::wit_into)
    }
}

impl llm::Host for HostState {
    /// Asks the model, within the time the current call has left: a model that hangs cannot
    /// hold the call past its deadline (the call's error then says the deadline passed).
    fn complete(&mut self, request: llm::Request) -> Result<llm::Response, llm::LlmError> {
        let Some(model) = self.llm.clone() else {
            return Err(llm::LlmError::Unavailable(
                "no language model is configured (set HINDSIGHT_LLM_URL, or pass one to the host)".into(),
            ));
        };
        let left = self.deadline_at.saturating_duration_since(Instant::now());
        let passed = || {
            llm::LlmError::Failed(
                "the LLM call did not answer before the call's deadline (--deadline-ms)".into(),
            )
        };
        if left.is_zero() {
            return Err(passed());
        }
        let request: hindsight_types::LlmRequest = request.wit_into();
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        let asked = std::thread::Builder::new().name("hindsight-llm".into()).spawn(move || {
            let _ = tx.send(model.complete(&request));
        });
        if asked.is_err() {
            return Err(llm::LlmError::Failed("could not start the LLM call's thread".into()));
        }
        match rx.recv_timeout(left) {
            Ok(answer) => answer.map(WitInto::wit_into).map_err(WitInto::wit_into),
            Err(_) => Err(passed()),
        }
    }
}

/// A live instance: its store, the engine resource and the banks it has opened.
pub(crate) struct Instance {
    store: wasmtime::Store<HostState>,
    world: World,
    engine: ResourceAny,
    banks: HashMap<String, ResourceAny>,
}

/// What runs on one worker thread: the shared runtime and this worker's instance, if live.
pub(crate) struct Worker {
    runtime: Arc<Runtime>,
    instance: Option<Instance>,
    /// Epoch ticks a call may take, when a test shortens the runtime's deadline.
    deadline_ticks: Option<u64>,
}

/// A call into the guest: the engine's answer, or a trap.
type GuestCall<T> = wasmtime::Result<Result<T, types::Error>>;

/// Where a metered call leaves what it cost, for the bank handle that made it.
pub(crate) type UsageSlot = Arc<std::sync::Mutex<Option<hindsight_types::Usage>>>;

impl Worker {
    pub(crate) fn new(runtime: Arc<Runtime>) -> Worker {
        Worker { runtime, instance: None, deadline_ticks: None }
    }

    /// Runs `f` against the live instance (made on demand) under the call deadline; a trap
    /// discards the instance.
    fn with_instance<T>(&mut self, f: impl FnOnce(&mut Instance) -> GuestCall<T>) -> Result<T> {
        if self.instance.is_none() {
            self.instance = Some(self.runtime.instantiate()?);
        }
        let instance = self.instance.as_mut().expect("instance just made");
        let ticks = self.deadline_ticks.unwrap_or_else(|| self.runtime.deadline_ticks());
        instance.store.set_epoch_deadline(ticks);
        instance.store.data_mut().deadline_at = Instant::now() + EPOCH_TICK * ticks as u32;
        instance.store.data_mut().limits.refused = false;
        match f(instance) {
            Ok(result) => result.map_err(Into::into),
            Err(trap) => {
                let instance = self.instance.take().expect("the instance that trapped");
                Err(self.runtime.describe_trap(trap, &instance.store))
            }
        }
    }

    /// [`Worker::with_bank`] for a call the engine meters: what it cost (whether it succeeded
    /// or not) is left in `slot`.
    pub(crate) fn with_bank_metered<T>(
        &mut self,
        bank: &str,
        slot: &UsageSlot,
        f: impl FnOnce(&guest::GuestBank, &mut wasmtime::Store<HostState>, ResourceAny) -> GuestCall<T>,
    ) -> Result<T> {
        self.with_bank(bank, |b, s, h| {
            let out = f(b, &mut *s, h)?;
            let usage = b.call_last_usage(&mut *s, h)?;
            *slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(usage.wit_into());
            Ok(out)
        })
    }

    /// Runs `f` on `bank`'s resource, opening the bank on first use.
    pub(crate) fn with_bank<T>(
        &mut self,
        bank: &str,
        f: impl FnOnce(&guest::GuestBank, &mut wasmtime::Store<HostState>, ResourceAny) -> GuestCall<T>,
    ) -> Result<T> {
        self.with_banks(&[bank.to_string()], |api, store, handles| f(api, store, handles[0]))
    }

    /// Runs `f` on the resources of `banks` (in that order), opening each on first use.
    pub(crate) fn with_banks<T>(
        &mut self,
        banks: &[String],
        f: impl FnOnce(&guest::GuestBank, &mut wasmtime::Store<HostState>, &[ResourceAny]) -> GuestCall<T>,
    ) -> Result<T> {
        self.with_instance(|inst| {
            let mut handles = Vec::with_capacity(banks.len());
            for bank in banks {
                let handle = match inst.banks.get(bank) {
                    Some(h) => *h,
                    None => {
                        let opened = inst.world.hindsight_memory_api().engine().call_open_bank(
                            &mut inst.store,
                            inst.engine,
                            bank,
                        )?;
                        match opened {
                            Ok(h) => {
                                inst.banks.insert(bank.to_string(), h);
                                h
                            }
                            Err(e) => return Ok(Err(e)),
                        }
                    }
                };
                handles.push(handle);
            }
            f(&inst.world.hindsight_memory_api().bank(), &mut inst.store, &handles)
        })
    }

    /// Runs `f` on the engine resource.
    pub(crate) fn with_engine<T>(
        &mut self,
        f: impl FnOnce(&guest::GuestEngine, &mut wasmtime::Store<HostState>, ResourceAny) -> GuestCall<T>,
    ) -> Result<T> {
        self.with_instance(|inst| {
            f(&inst.world.hindsight_memory_api().engine(), &mut inst.store, inst.engine)
        })
    }

    /// Starts the instance now, if it is not live.
    pub(crate) fn warm_up(&mut self) -> Result<()> {
        self.with_instance(|_| Ok(Ok(())))
    }

    /// Drops the live instance; the next call starts a fresh one.
    pub(crate) fn discard(&mut self) {
        self.instance = None;
    }

    /// Makes the next calls on this worker time out after one tick (or restores the deadline).
    #[cfg(test)]
    pub(crate) fn hurry(&mut self, hurry: bool) {
        self.deadline_ticks = hurry.then_some(1);
    }

    /// Bytes of linear memory the live instance has grown to (0 without one).
    pub(crate) fn memory_bytes(&self) -> usize {
        self.instance.as_ref().map_or(0, |i| i.store.data().limits.memory_bytes)
    }
}
