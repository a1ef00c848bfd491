//! The entry point: a [`Hindsight`] built once and shared, from which banks are opened.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use hindsight_types::settings::Settings;
use hindsight_types::{Llm, MemoryStore, Query, RecallResult, Store};

use crate::models::Models;
use crate::pool::Pool;
use crate::runtime::{Runtime, RuntimeConfig, Timings};
use crate::usage::{self, LlmUsage, Metered};
use crate::wit::{self, WitInto};
use crate::{Error, Result};
use hindsight_types::{Principal, Right};

/// A stored key that still holds what was to be erased.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Trace {
    /// The store's key.
    pub key: String,
    /// The needle is in the key's name (an id).
    pub in_key: bool,
    /// The needle is in the stored value.
    pub in_value: bool,
}

/// hindsight: the memory engine in its sandbox, over a store, with an optional language model.
/// Cheap to clone and shareable across threads: clones use the same instances.
///
/// Calls block the calling thread until the engine answers; from async code, call through
/// `spawn_blocking`.
#[derive(Clone)]
pub struct Hindsight {
    pub(crate) pool: Arc<Pool>,
    /// When set, every bank call is checked against its rights.
    pub(crate) principal: Option<Arc<Principal>>,
    /// `spaces.shared_bank`: where distilled lessons marked for sharing go.
    pub(crate) shared_bank: Arc<str>,
    /// The engine's input limits: what is embedded ahead of a retain must be what it accepts.
    pub(crate) limits: Arc<hindsight_types::settings::Limits>,
}

impl std::fmt::Debug for Hindsight {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hindsight").field("workers", &self.pool.len()).finish_non_exhaustive()
    }
}

/// The key the engine-wide calls (embed, model id) are routed by: no bank has it.
const ENGINE_KEY: &str = "";

/// From this many texts, [`Hindsight::embed`] (and so a bank's retain) embeds across the
/// workers: below it, starting a second instance (~0.5 s) costs more than it saves.
pub(crate) const SPREAD_MIN: usize = 16;

/// Texts in one job of a spread embedding: enough to batch a model run (the engine's batch is
/// 16), few enough to share out.
const SPREAD_CHUNK_MIN: usize = 4;
const SPREAD_CHUNK_MAX: usize = 16;

impl Hindsight {
    /// Options for a new `Hindsight`.
    pub fn builder() -> Builder {
        Builder::default()
    }

    /// The same instances, acting as `principal`: every bank call is checked against its
    /// rights (an [`Error::Denied`] naming the bank and the right otherwise), [`Hindsight::banks`]
    /// lists only the banks it may read, and what it retains carries its name as the agent id
    /// unless the memory names one.
    pub fn as_principal(&self, principal: Principal) -> Hindsight {
        Hindsight { principal: Some(Arc::new(principal)), ..self.clone() }
    }

    /// Whether distilled lessons marked for sharing may go to `spaces.shared_bank`: always,
    /// unless the handle acts as a principal that may not write there.
    pub(crate) fn may_share(&self) -> bool {
        self.principal.as_ref().is_none_or(|p| p.may(Right::Write, &self.shared_bank))
    }

    /// The bank distilled lessons marked for sharing may be copied to (`spaces.shared_bank`).
    pub fn shared_bank(&self) -> &str {
        &self.shared_bank
    }

    /// The principal this handle acts as, if any.
    pub fn principal(&self) -> Option<&Principal> {
        self.principal.as_deref()
    }

    /// Recalls from several banks as one (a private bank, then shared ones): their memories in
    /// one candidate pool, ranked together; on equal scores the bank listed first wins. Each item
    /// names its bank, and the prompt block marks memories from the banks after the first as
    /// shared. Acting as a principal, the banks it may not read are skipped and named in
    /// [`RecallResult::skipped_banks`] (an [`Error::Denied`] when it may read none).
    pub fn recall<I, S>(&self, banks: I, query: impl Into<Query>) -> Result<RecallResult>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut readable = Vec::new();
        let mut skipped = Vec::new();
        for bank in banks {
            let bank: String = bank.into();
            hindsight_types::validate_bank_id(&bank)?;
            if readable.contains(&bank) {
                return Err(Error::invalid("banks", format!("{bank:?} is listed twice")));
            }
            match &self.principal {
                Some(p) if !p.may(Right::Read, &bank) => skipped.push(bank),
                _ => readable.push(bank),
            }
        }
        if readable.is_empty() {
            return Err(match (&self.principal, skipped.is_empty()) {
                (Some(p), false) => Error::Denied(format!(
                    "principal {:?} may read none of the banks {}",
                    p.name(),
                    skipped.join(", ")
                )),
                _ => Error::invalid("banks", "must name at least one bank"),
            });
        }
        let query: wit::types::RecallQuery = query.into().wit_into();
        let first = readable[0].clone();
        let mut result: RecallResult = self
            .pool
            .call(&first, move |w| {
                w.with_banks(&readable, |b, s, handles| {
                    b.call_recall_with(s, handles[0], &handles[1..], &query)
                })
            })?
            .wit_into();
        result.skipped_banks = skipped;
        Ok(result)
    }

    /// Embeds texts with the engine's model (unit-length vectors), inside the sandbox. Many
    /// texts are shared out among the workers, so they embed on every core.
    pub fn embed<S: AsRef<str>>(&self, texts: &[S]) -> Result<Vec<Vec<f32>>> {
        self.embed_spread(texts, false)
    }

    /// Embeds texts as a bank's retain does, for [`Bank::embed_missing`](crate::Bank::embed_missing):
    /// each text's vector followed by its sentence keys.
    pub(crate) fn embed_keyed<S: AsRef<str>>(&self, texts: &[S]) -> Result<Vec<Vec<f32>>> {
        self.embed_spread(texts, true)
    }

    fn embed_spread<S: AsRef<str>>(&self, texts: &[S], keyed: bool) -> Result<Vec<Vec<f32>>> {
        let texts: Vec<String> = texts.iter().map(|t| t.as_ref().to_string()).collect();
        let workers = self.spread_workers();
        if texts.len() < SPREAD_MIN || workers == 1 {
            return self.pool.call(ENGINE_KEY, move |w| {
                w.with_engine(|e, s, h| {
                    if keyed {
                        e.call_embed_keyed(s, h, &texts)
                    } else {
                        e.call_embed(s, h, &texts)
                    }
                })
            });
        }
        // A model run pads its texts to the longest: chunks of similar length, shortest first,
        // dealt in turn. At most two chunks wait on a worker at a time, so a call for another
        // bank on that worker waits for two chunks at most, not the whole batch.
        let mut order: Vec<usize> = (0..texts.len()).collect();
        order.sort_by_key(|&i| texts[i].len());
        let chunk = texts.len().div_ceil(2 * workers).clamp(SPREAD_CHUNK_MIN, SPREAD_CHUNK_MAX);
        let mut vectors = vec![Vec::new(); texts.len()];
        let mut in_flight = std::collections::VecDeque::new();
        let mut place = |ix: &[usize], job: crate::pool::Pending<Vec<Vec<f32>>>| -> Result<()> {
            let answer = job.wait()?;
            if answer.len() != ix.len() {
                return Err(Error::Trap(format!(
                    "embed returned {} vectors for {} texts",
                    answer.len(),
                    ix.len()
                )));
            }
            for (&i, v) in ix.iter().zip(answer) {
                vectors[i] = v;
            }
            Ok(())
        };
        for (n, ix) in order.chunks(chunk).enumerate() {
            if in_flight.len() == 2 * workers {
                let (done, job) = in_flight.pop_front().expect("in flight");
                place(done, job)?;
            }
            let batch: Vec<String> = ix.iter().map(|&i| texts[i].clone()).collect();
            let job = self.pool.submit_on(n % workers, move |w| {
                w.with_engine(|e, s, h| {
                    if keyed {
                        e.call_embed_keyed(s, h, &batch)
                    } else {
                        e.call_embed(s, h, &batch)
                    }
                })
            })?;
            in_flight.push_back((ix, job));
        }
        for (ix, job) in in_flight {
            place(ix, job)?;
        }
        Ok(vectors)
    }

    /// How many workers a spread embedding uses: more instances than cores would only take
    /// turns (and each holds the model).
    pub(crate) fn spread_workers(&self) -> usize {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        self.pool.len().min(cores)
    }

    /// The embedding model's id, as recorded on every memory.
    pub fn model_id(&self) -> Result<String> {
        self.pool.call(ENGINE_KEY, |w| w.with_engine(|e, s, h| Ok(Ok(e.call_model_id(s, h)?))))
    }

    /// The ids of the banks in the store, in byte order (acting as a principal: those it may
    /// read). The engine lists them: it alone knows its key layout.
    pub fn banks(&self) -> Result<Vec<String>> {
        let banks = self.pool.call(ENGINE_KEY, |w| w.with_engine(|e, s, h| e.call_banks(s, h)))?;
        Ok(banks
            .into_iter()
            .filter(|id| self.principal.as_ref().is_none_or(|p| p.may(Right::Read, id)))
            .collect())
    }

    /// Every stored key whose name or value holds `needle` (a memory's text, or its id), across
    /// every bank: what a hard forget must leave none of (`hindsight verify-erasure`). A host's
    /// own files (a database's journal) are the host's to scan. It reads every bank, so a
    /// principal is refused.
    pub fn traces(&self, needle: &str) -> Result<Vec<Trace>> {
        if needle.trim().is_empty() {
            return Err(Error::invalid("text", "must not be empty"));
        }
        if let Some(p) = &self.principal {
            return Err(Error::invalid(
                "principal",
                format!("{} may not scan every bank: verify erasure as the store's operator", p.name()),
            ));
        }
        let store = &self.pool.runtime().store;
        let mut traces = Vec::new();
        let mut after: Option<String> = None;
        loop {
            let page = store.scan("", after.as_deref(), 2048).map_err(|e| Error::store(e.to_string()))?;
            let full = page.len() == 2048;
            for (key, value) in &page {
                let in_key = key.contains(needle);
                let in_value = value.windows(needle.len()).any(|w| w == needle.as_bytes());
                if in_key || in_value {
                    traces.push(Trace { key: key.clone(), in_key, in_value });
                }
            }
            if !full {
                return Ok(traces);
            }
            after = page.last().map(|(k, _)| k.clone());
        }
    }

    /// LLM calls, failures and tokens by operation, as counted in the store.
    pub fn llm_usage(&self) -> Result<BTreeMap<String, LlmUsage>> {
        Ok(usage::read(&*self.pool.runtime().store)?)
    }

    /// How long loading the component took, and whether it came precompiled from the cache.
    pub fn timings(&self) -> Timings {
        self.pool.runtime().timings
    }

    /// sha256 of the component's wasm: identifies the engine build.
    pub fn component_sha256(&self) -> &str {
        &self.pool.runtime().component_sha256
    }

    /// Starts every worker's instance now (each loads the model), so that first calls do not
    /// wait for it.
    pub fn warm_up(&self) -> Result<()> {
        let starting = (0..self.pool.len())
            .map(|w| self.pool.submit_on(w, |worker| worker.warm_up()))
            .collect::<Result<Vec<_>>>()?;
        starting.into_iter().try_for_each(|w| w.wait())
    }

    /// Drops the live instances; the next call starts fresh ones, which read everything from the
    /// store.
    pub fn reset(&self) -> Result<()> {
        for w in (0..self.pool.len()).filter(|&w| self.pool.is_running(w)) {
            self.pool.call_on(w, |worker| {
                worker.discard();
                Ok(())
            })?;
        }
        Ok(())
    }

    /// Moves the store's write-ahead log into its main data (SQLite: a checkpoint that truncates
    /// the log), so nothing erased stays on disk beside it. Servers call it when they stop.
    pub fn checkpoint(&self) -> Result<()> {
        Ok(self.pool.runtime().store.checkpoint()?)
    }

    /// Bytes of linear memory the largest live instance has grown to.
    pub fn instance_memory_bytes(&self) -> Result<usize> {
        let mut most = 0;
        for w in (0..self.pool.len()).filter(|&w| self.pool.is_running(w)) {
            most = most.max(self.pool.call_on(w, |worker| Ok(worker.memory_bytes()))?);
        }
        Ok(most)
    }
}

enum StoreChoice {
    Unset,
    Memory,
    #[cfg(feature = "sqlite")]
    Sqlite(PathBuf),
    #[cfg(feature = "postgres")]
    Postgres {
        url: String,
        pool: usize,
    },
    Given(Arc<dyn Store>),
}

enum ModelsChoice {
    DefaultDir,
    Dir(PathBuf),
    Given(Models),
}

enum LlmChoice {
    FromEnv,
    Nothing,
    Given(Arc<dyn Llm>),
}

/// Options for a [`Hindsight`]; [`Builder::open`] makes it. A store must be chosen; everything
/// else has a default.
pub struct Builder {
    store: StoreChoice,
    models: ModelsChoice,
    llm: LlmChoice,
    settings: Settings,
    workers: Option<usize>,
    memory_limit: usize,
    deadline: Duration,
    component: Option<PathBuf>,
    cache_dir: Option<PathBuf>,
}

impl Default for Builder {
    fn default() -> Self {
        Builder {
            store: StoreChoice::Unset,
            models: ModelsChoice::DefaultDir,
            llm: LlmChoice::FromEnv,
            settings: Settings::default(),
            workers: None,
            // The model needs ~155 MiB; each memory ~1.5 KiB of vector plus its record, so 1 GiB
            // holds a 100k-memory bank with room to spare.
            memory_limit: Builder::DEFAULT_MEMORY_LIMIT,
            deadline: Builder::DEFAULT_DEADLINE,
            component: None,
            cache_dir: Some(hindsight_types::defaults::cache_dir().join("components")),
        }
    }
}

impl Builder {
    /// The most workers (instances) one `Hindsight` runs: each holds the model, ~160 MiB.
    pub const MAX_WORKERS: usize = 16;

    /// One call's deadline unless set (every host's default: tests/conformance/defaults.json).
    pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(120);

    /// Each instance's memory cap unless set.
    pub const DEFAULT_MEMORY_LIMIT: usize = 1 << 30;

    /// Keeps the banks in a SQLite file (created when missing).
    #[cfg(feature = "sqlite")]
    pub fn sqlite(mut self, path: impl Into<PathBuf>) -> Self {
        self.store = StoreChoice::Sqlite(path.into());
        self
    }

    /// Keeps the banks in a PostgreSQL database (`postgres://user@host:port/dbname`) that other
    /// hosts may share, through a pool of [`crate::DEFAULT_POOL_SIZE`] connections (see
    /// [`Builder::postgres_pool`]).
    #[cfg(feature = "postgres")]
    pub fn postgres(mut self, url: impl Into<String>) -> Self {
        self.store = StoreChoice::Postgres { url: url.into(), pool: crate::postgres::DEFAULT_POOL_SIZE };
        self
    }

    /// Keeps the banks in a PostgreSQL database with at most `connections` open at once.
    #[cfg(feature = "postgres")]
    pub fn postgres_pool(mut self, url: impl Into<String>, connections: usize) -> Self {
        self.store = StoreChoice::Postgres { url: url.into(), pool: connections };
        self
    }

    /// Keeps the banks in memory only: gone when the last clone is dropped.
    pub fn memory(mut self) -> Self {
        self.store = StoreChoice::Memory;
        self
    }

    /// Keeps the banks in any store (a shared one lets several hosts serve the same banks).
    pub fn store(mut self, store: impl Store + 'static) -> Self {
        self.store = StoreChoice::Given(Arc::new(store));
        self
    }

    /// Reads the embedding model from `dir` (default: [`Models::default_dir`]).
    pub fn models_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.models = ModelsChoice::Dir(dir.into());
        self
    }

    /// Uses this model and tokenizer.
    pub fn model_bytes(mut self, model: impl Into<Vec<u8>>, tokenizer: impl Into<Vec<u8>>) -> Self {
        self.models = ModelsChoice::Given(Models::from_bytes(model, tokenizer));
        self
    }

    /// Uses models already read.
    pub fn models(mut self, models: Models) -> Self {
        self.models = ModelsChoice::Given(models);
        self
    }

    /// Lends the engine this language model (for importance scores, conflict verdicts,
    /// distillation and consolidation). Default: an OpenAI-compatible endpoint from the
    /// `HINDSIGHT_LLM_*` variables when `HINDSIGHT_LLM_URL` is set, else none.
    pub fn llm(mut self, llm: impl Llm + 'static) -> Self {
        self.llm = LlmChoice::Given(Arc::new(llm));
        self
    }

    /// No language model: the engine uses its rules everywhere.
    pub fn no_llm(mut self) -> Self {
        self.llm = LlmChoice::Nothing;
        self
    }

    /// Changes engine settings, e.g. `.settings(|s| s.maintain.capacity = 500)`.
    pub fn settings(mut self, change: impl FnOnce(&mut Settings)) -> Self {
        change(&mut self.settings);
        self
    }

    /// Uses these engine settings.
    pub fn with_settings(mut self, settings: Settings) -> Self {
        self.settings = settings;
        self
    }

    /// Instances serving banks in parallel, 1 to [`Builder::MAX_WORKERS`] (default: the cores, at most
    /// 4). Each bank stays on one; each instance holds the model (~160 MiB) and starts on first
    /// use.
    pub fn workers(mut self, workers: usize) -> Self {
        self.workers = Some(workers);
        self
    }

    /// Caps each instance's memory (default 1 GiB): a call past it stops with a `Trap` error.
    pub fn memory_limit(mut self, bytes: usize) -> Self {
        self.memory_limit = bytes;
        self
    }

    /// Limits one call into the engine (default 120 s): a call past it stops with a `Trap` error.
    pub fn deadline(mut self, deadline: Duration) -> Self {
        self.deadline = deadline;
        self
    }

    /// Runs this component file instead of the built-in one.
    pub fn component_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.component = Some(path.into());
        self
    }

    /// Where compiled components are cached (default `~/.cache/hindsight/components`); `None`
    /// compiles at every start.
    pub fn cache_dir(mut self, dir: Option<PathBuf>) -> Self {
        self.cache_dir = dir;
        self
    }

    /// Loads the component (precompiled from the cache when it can) and the model; instances
    /// start on first use.
    pub fn open(self) -> Result<Hindsight> {
        self.settings.validate()?;
        let workers = match self.workers {
            Some(n) if (1..=Self::MAX_WORKERS).contains(&n) => n,
            Some(n) => {
                return Err(Error::invalid(
                    "workers",
                    format!("must be from 1 to {}, got {n}", Self::MAX_WORKERS),
                ))
            }
            None => std::thread::available_parallelism().map_or(1, |n| n.get()).min(4),
        };
        if self.memory_limit < 64 << 20 {
            return Err(Error::invalid(
                "memory_limit",
                format!("{} MiB is too small: the engine needs ~160 MiB", self.memory_limit >> 20),
            ));
        }
        if self.deadline.is_zero() {
            return Err(Error::invalid("deadline", "must be longer than zero"));
        }
        let store: Arc<dyn Store> = match self.store {
            StoreChoice::Unset => {
                return Err(Error::Config(
                    "no store chosen: use .sqlite(path), .memory() or .store(..) on the builder".into(),
                ))
            }
            StoreChoice::Memory => Arc::new(MemoryStore::new()),
            #[cfg(feature = "sqlite")]
            StoreChoice::Sqlite(path) => Arc::new(crate::sqlite::SqliteStore::open(&path)?),
            #[cfg(feature = "postgres")]
            StoreChoice::Postgres { url, pool } => {
                Arc::new(crate::postgres::PostgresStore::open(&url, pool)?)
            }
            StoreChoice::Given(store) => store,
        };
        let models = match self.models {
            ModelsChoice::DefaultDir => Models::from_dir(Models::default_dir())?,
            ModelsChoice::Dir(dir) => Models::from_dir(dir)?,
            ModelsChoice::Given(models) => models,
        };
        let llm: Option<Arc<dyn Llm>> = match self.llm {
            LlmChoice::Nothing => None,
            LlmChoice::Given(llm) => Some(llm),
            #[cfg(feature = "openai")]
            LlmChoice::FromEnv => crate::openai::OpenAi::from_env()?.map(|c| Arc::new(c) as Arc<dyn Llm>),
            #[cfg(not(feature = "openai"))]
            LlmChoice::FromEnv => None,
        };
        let llm = llm.map(|llm| Arc::new(Metered { llm, store: store.clone() }) as Arc<dyn Llm>);
        let shared_bank: Arc<str> = self.settings.spaces.shared_bank.as_str().into();
        let limits = Arc::new(self.settings.limits.clone());
        let runtime = Runtime::new(RuntimeConfig {
            store,
            llm,
            model: models.model,
            tokenizer: models.tokenizer,
            settings: serde_json::to_string(&self.settings).expect("settings serialise"),
            memory_limit: self.memory_limit,
            deadline: self.deadline,
            component: self.component,
            cache_dir: self.cache_dir,
        })?;
        Ok(Hindsight {
            pool: Arc::new(Pool::new(Arc::new(runtime), workers)),
            principal: None,
            shared_bank,
            limits,
        })
    }
}
