//! `hindsight-dev bench`: latency and throughput of the component, beside the same core run
//! natively over the same kind of store.

use std::path::Path;
use std::time::{Duration, Instant};

use hindsight::{types::MaintainAction, Hindsight, Memory, Query, Settings};
use serde_json::{json, Value};

use crate::error::{CliError, CliResult};
use crate::{BenchArgs, Global};

pub const SHORT: &str = "Retry the flaky payments API.";
/// About 70 tokens.
pub const LONG: &str = "When the nightly export job fails because the payments API returns a 503 during the \
maintenance window between two and three in the morning, wait ten minutes and retry with exponential \
backoff, and never mark the export as failed before three attempts have been made, since the upstream \
team confirmed that the outage is routine and announced.";

fn percentile(samples: &mut [Duration], p: f64) -> f64 {
    samples.sort();
    let ix = ((samples.len() as f64 - 1.0) * p).round() as usize;
    samples[ix].as_secs_f64() * 1000.0
}

fn time_n(n: usize, mut f: impl FnMut() -> CliResult<()>) -> CliResult<Vec<Duration>> {
    (0..n)
        .map(|_| {
            let t = Instant::now();
            f()?;
            Ok(t.elapsed())
        })
        .collect()
}

fn normalize(v: &mut [f32]) {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
}

fn io(e: impl std::fmt::Display) -> CliError {
    CliError::new("config", e.to_string())
}

/// Realistic short agent-memory texts, combinatorially varied.
pub fn corpus_texts(n: usize) -> Vec<String> {
    const WHAT: &[&str] = &[
        "Reading the vendor CSV export",
        "Calling the payments API",
        "Deploying the web service to staging",
        "Running the nightly data pipeline",
        "Parsing large JSON log files",
        "Querying the analytics warehouse",
        "Scraping the product catalogue",
        "Generating the monthly revenue report",
        "Migrating the user table",
        "Training the churn model",
        "Uploading images to object storage",
        "Sending the weekly newsletter",
        "Rotating the database credentials",
        "Building the Docker image",
        "Syncing the CRM contacts",
        "Resizing thumbnails in batch",
        "Exporting invoices to Excel",
        "Indexing documents for search",
    ];
    const HOW: &[&str] = &[
        "failed with a timeout until retries with exponential backoff were added",
        "worked after setting encoding to utf-8-sig",
        "needs the API token from the secrets store",
        "must run with TZ=UTC or the dates shift by a day",
        "ran out of memory until it was streamed in chunks",
        "was rate limited, so requests now wait two seconds apart",
        "should use PostgreSQL as the user prefers",
        "broke because the legacy endpoint was removed",
        "is faster with a batch size of 500",
        "requires the staging VPN to be connected",
        "succeeded once the schema migration ran first",
        "must never touch the production bucket",
        "works best early in the morning before traffic peaks",
        "needed the header row frozen as the user asked",
        "gave wrong totals until refunds were subtracted",
    ];
    const WHEN: &[&str] = &[
        "last Monday",
        "during the release freeze",
        "for the Berlin office",
        "in the Q3 audit",
        "on the shared runner",
        "for the mobile team",
        "after the outage",
        "in the EU region",
    ];
    (0..n)
        .map(|i| {
            let w = WHAT[i % WHAT.len()];
            let h = HOW[(i / WHAT.len()) % HOW.len()];
            let t = WHEN[(i / (WHAT.len() * HOW.len())) % WHEN.len()];
            format!("{w} {t} {h}.")
        })
        .collect()
}

/// A deterministic generator (xorshift64*): bench corpora must be the same on every run.
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
    pub fn unit(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
    }
}

/// `size` (text, vector) pairs: real embeddings of the base texts, and beyond them blends of two
/// base vectors with a little noise (texts joined the same way), so large banks keep the
/// neighbourhood structure of real embeddings without embedding 100k texts.
pub fn derive_corpus(base: &[(String, Vec<f32>)], size: usize, seed: u64) -> Vec<(String, Vec<f32>)> {
    let mut rng = Rng::new(seed);
    let mut out: Vec<(String, Vec<f32>)> = base.iter().take(size).cloned().collect();
    while out.len() < size {
        let a = &base[(rng.next_u64() % base.len() as u64) as usize];
        let b = &base[(rng.next_u64() % base.len() as u64) as usize];
        let mut v: Vec<f32> = a.1.iter().zip(&b.1).map(|(x, y)| x + 0.35 * y + 0.03 * rng.unit()).collect();
        normalize(&mut v);
        let tail = b.0.split_whitespace().take(4).collect::<Vec<_>>().join(" ");
        out.push((format!("{} Also: {tail}.", a.0), v));
    }
    out
}

/// One seed for every size: a smaller bank is a prefix of a larger one (what the peer gets).
const CORPUS_SEED: u64 = 42;

pub const QUERIES: &[&str] = &[
    "the payments API keeps timing out",
    "garbled characters when reading a CSV",
    "which database should the new service use",
    "out of memory while parsing logs",
    "dates are off by one day in tests",
    "the scraper got blocked",
    "report totals look too high",
    "deploy to staging fails",
    "how big should batches be",
    "credentials rotation",
    "image upload to storage",
    "newsletter sending schedule",
    "Excel export layout",
    "search indexing is slow",
    "schema migration order",
    "VPN needed for staging",
    "legacy endpoint removed",
    "CRM sync problems",
    "thumbnail resizing job",
    "audit findings in Q3",
];

/// The engine settings a bench bank runs with: the caller's, with no capacity cap (the default
/// cap would archive most of a large bank), the vector buffer sealed into HNSW segments from
/// 16k vectors, and no query cache, unless the caller changed those.
fn bench_settings(mut settings: Settings) -> Settings {
    let defaults = Settings::default();
    // Every timed query embeds: the bench repeats its queries, which a cache would answer.
    if settings.recall.query_cache == defaults.recall.query_cache {
        settings.recall.query_cache = 0;
    }
    if settings.maintain.capacity == defaults.maintain.capacity {
        settings.maintain.capacity = u32::MAX;
    }
    if settings.index.seal_min == defaults.index.seal_min {
        settings.index.seal_min = 16_384;
    }
    if settings.index.buffer_max == defaults.index.buffer_max {
        settings.index.buffer_max = 32_768;
    }
    settings
}

/// Texts with their vectors.
pub type Corpus = Vec<(String, Vec<f32>)>;

/// Fills the bank "bench" with `corpus` (text, vector), a thousand per call. The derived corpus
/// repeats its base texts: stored as given, not deduplicated.
fn retain_corpus(hs: &Hindsight, bank: &str, corpus: &[(String, Vec<f32>)]) -> CliResult<()> {
    let bank = hs.bank(bank)?;
    for chunk in corpus.chunks(1000) {
        bank.retain(chunk.iter().map(|(t, v)| Memory::new(t.clone()).vector(v.clone()).force()))?;
    }
    Ok(())
}

/// The bench's recall: top 10, with the query's vector when given (no embedding).
pub fn query(text: &str, vector: Option<Vec<f32>>) -> Query {
    let q = Query::new(text).k(10);
    match vector {
        Some(v) => q.vector(v),
        None => q,
    }
}

/// Embedding latency (ms, p50) of a short and a ~70-token text, and per text in a batch of 16,
/// in the component (and natively).
fn embed_latency(hs: &Hindsight, native: &Native, runs: usize) -> CliResult<Value> {
    let batch: Vec<String> = (0..16).map(|i| format!("{SHORT} Attempt {i} of the nightly export.")).collect();
    hs.embed(&[SHORT])?; // warm-up: instantiate
    let mut out = serde_json::Map::new();
    for (name, text) in [("short", SHORT), ("long", LONG)] {
        let mut wasm = time_n(runs, || Ok(hs.embed(&[text]).map(drop)?))?;
        let mut nat = time_n(runs, || native.embed(&[text]).map(drop))?;
        out.insert(
            name.into(),
            json!({"tokens": native.tokens(text), "component_ms": percentile(&mut wasm, 0.5), "native_ms": native.figure(&mut nat)}),
        );
    }
    let refs: Vec<&str> = batch.iter().map(String::as_str).collect();
    let mut wasm = time_n(runs.div_ceil(4), || Ok(hs.embed(&batch).map(drop)?))?;
    let mut nat = time_n(runs.div_ceil(4), || native.embed(&refs).map(drop))?;
    out.insert(
        "batch16_per_text".into(),
        json!({"component_ms": percentile(&mut wasm, 0.5) / 16.0, "native_ms": native.figure(&mut nat).map(|m| m / 16.0)}),
    );
    Ok(Value::Object(out))
}

/// A fresh bank holding `texts`, retained through the component 32 per call (each call's
/// embedding spread across the workers) with `workers` instances (the library's default for
/// `None`), started before the clock is; with the ingest rate in items per second. The
/// directory holds the bank's database.
fn timed_ingest(
    g: &Global,
    settings: &Settings,
    workers: Option<usize>,
    texts: &[String],
) -> CliResult<(tempfile::TempDir, hindsight::Bank, f64)> {
    let dir = tempfile::tempdir().map_err(io)?;
    let hs = crate::builder(g, workers)?
        .with_settings(settings.clone())
        .sqlite(dir.path().join("ingest.db"))
        .open()?;
    hs.warm_up()?;
    let bank = hs.bank("bench-ingest")?;
    let start = Instant::now();
    for chunk in texts.chunks(32) {
        bank.retain(chunk.iter().map(|t| Memory::new(t.clone())))?;
    }
    let per_s = texts.len() as f64 / start.elapsed().as_secs_f64();
    Ok((dir, bank, per_s))
}

/// How many 20-word corpus texts the ingest figures retain (the peer ingests the same ones).
const CORPUS_INGEST: usize = 512;

/// Memories per second retained with `workers` instances, embedding included (20-word texts).
fn retain_throughput(g: &Global, settings: &Settings, n: usize, workers: usize) -> CliResult<f64> {
    Ok(timed_ingest(g, settings, Some(workers), &corpus_texts(n))?.2)
}

/// On `texts`: ingest with embedding (one instance per core) into a fresh bank, then recall p50
/// with the query embedded each time.
fn text_bench(
    g: &Global,
    settings: &Settings,
    texts: &[String],
    queries: &[(String, Vec<f32>)],
    runs: usize,
) -> CliResult<Value> {
    let (_dir, bank, ingest_per_s) = timed_ingest(g, settings, None, texts)?;
    for (text, _) in queries.iter().take(5) {
        bank.recall(query(text, None))?;
    }
    let mut samples = Vec::with_capacity(runs);
    for i in 0..runs {
        let t = Instant::now();
        bank.recall(query(&queries[i % queries.len()].0, None))?;
        samples.push(t.elapsed());
    }
    Ok(json!({
        "ingest_embed_items": texts.len(),
        "ingest_embed_per_s": ingest_per_s,
        "query_embed_p50_ms": percentile(&mut samples, 0.5),
        "path": bank.stats()?.inference,
    }))
}

/// `--texts`: JSON lines with a "text" or "content" string.
pub fn read_texts(path: &Path) -> CliResult<Vec<String>> {
    let bytes = crate::read_input(path)?;
    let mut texts = Vec::new();
    for (i, line) in String::from_utf8_lossy(&bytes).lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let value: Value = serde_json::from_str(line)
            .map_err(|e| CliError::field("texts", format!("line {}: not JSON: {e}", i + 1)))?;
        match value.get("text").or_else(|| value.get("content")).and_then(Value::as_str) {
            Some(text) if !text.trim().is_empty() => texts.push(text.to_string()),
            _ => return Err(CliError::field("texts", format!("line {}: needs a \"text\" string", i + 1))),
        }
    }
    if texts.is_empty() {
        return Err(CliError::field("texts", "holds no texts"));
    }
    Ok(texts)
}

/// Recall p50 (ms) of one query asked again and again in a small bank: the query's embedding
/// comes from the engine's cache (`recall.query_cache`) after the first.
fn repeated_recall(hs: &Hindsight, runs: usize) -> CliResult<f64> {
    let bank = hs.bank("bench-repeat")?;
    bank.retain(corpus_texts(64).into_iter().map(Memory::new))?;
    let query = query(QUERIES[0], None);
    bank.recall(query.clone())?;
    let mut samples = time_n(runs, || Ok(bank.recall(query.clone()).map(drop)?))?;
    Ok(percentile(&mut samples, 0.5))
}

/// Recall timings over `runs` queries: (with query embedding, without).
fn time_recalls(
    hs: &Hindsight,
    bank: &str,
    queries: &[(String, Vec<f32>)],
    runs: usize,
) -> CliResult<(Vec<Duration>, Vec<Duration>)> {
    let bank = hs.bank(bank)?;
    let mut with_embed = Vec::new();
    let mut no_embed = Vec::new();
    for i in 0..runs {
        let (text, vector) = &queries[i % queries.len()];
        let t = Instant::now();
        bank.recall(query(text, None))?;
        with_embed.push(t.elapsed());
        let t = Instant::now();
        bank.recall(query(text, Some(vector.clone())))?;
        no_embed.push(t.elapsed());
    }
    Ok((with_embed, no_embed))
}

/// One bank size: build it from vectors; time recall, `maintain` (which seals the vector buffer
/// into an HNSW segment), recall again, and opening the maintained bank; then the same core
/// natively, and the HNSW index's recall@10 against an exact scan.
fn size_bench(
    g: &Global,
    settings: &Settings,
    base: &[(String, Vec<f32>)],
    queries: &[(String, Vec<f32>)],
    size: usize,
    runs: usize,
) -> CliResult<Value> {
    let corpus = derive_corpus(base, size, CORPUS_SEED);
    let dir = tempfile::tempdir().map_err(io)?;
    let db = dir.path().join("bench.db");
    // With a PostgreSQL --db the bank goes there, under a name of its own (the database may be
    // shared); otherwise into a fresh SQLite file.
    let postgres = crate::postgres_url(g);
    let bank = match postgres {
        Some(_) => format!("bench-{size}-{}", hindsight::time::now()),
        None => "bench".to_string(),
    };
    let open = || -> CliResult<Hindsight> {
        let b = crate::builder(g, Some(1))?.with_settings(settings.clone());
        Ok(match postgres {
            Some(url) => b.postgres_pool(url, g.db_pool),
            None => b.sqlite(&db),
        }
        .open()?)
    };
    let hs = open()?;
    let t = Instant::now();
    retain_corpus(&hs, &bank, &corpus)?;
    let ingest_per_s = size as f64 / t.elapsed().as_secs_f64();
    let build_memory = hs.instance_memory_bytes()?;
    let (_, before) = time_recalls(&hs, &bank, queries, runs)?;
    let t = Instant::now();
    let report = hs.bank(&bank)?.maintain()?;
    let maintain_ms = t.elapsed().as_secs_f64() * 1000.0;
    drop(hs);
    let bytes = match postgres {
        Some(_) => None,
        None => Some(
            std::fs::metadata(&db).map_err(io)?.len()
                + std::fs::metadata(db.with_extension("db-wal")).map(|m| m.len()).unwrap_or(0),
        ),
    };

    let hs = open()?;
    hs.warm_up()?; // instantiate the engine first: open time is the bank's alone
    let t = Instant::now();
    hs.bank(&bank)?.stats()?;
    let open_ms = t.elapsed().as_secs_f64() * 1000.0;
    let (mut with_embed, mut no_embed) = time_recalls(&hs, &bank, queries, runs)?;
    let guest_memory = hs.instance_memory_bytes()?;
    let native = native::size_bench(settings, &dir.path().join("native.db"), &corpus, queries, runs)?;
    Ok(json!({
        "size": size,
        "store": if postgres.is_some() { "postgres" } else { "sqlite" },
        "ingest_given_vectors_per_s": ingest_per_s,
        "recall_p50_ms": percentile(&mut with_embed.clone(), 0.5),
        "recall_p99_ms": percentile(&mut with_embed, 0.99),
        "recall_noembed_p50_ms": percentile(&mut no_embed.clone(), 0.5),
        "recall_noembed_p99_ms": percentile(&mut no_embed, 0.99),
        "native_recall_noembed_p50_ms": native.recall_p50_ms,
        "open_ms": open_ms,
        "bytes_per_memory": bytes.map(|b| b as f64 / size as f64),
        "guest_memory_mib": guest_memory as f64 / (1 << 20) as f64,
        "build_guest_memory_mib": build_memory as f64 / (1 << 20) as f64,
        "hnsw_recall_at_10": native.hnsw_recall_at_10,
        "maintain_ms": maintain_ms,
        "maintain_sealed": report.sealed,
        "maintain_merged": report.count(MaintainAction::Merged),
        "maintain_archived": report.count(MaintainAction::Archived),
        "recall_noembed_p50_before_maintain_ms": percentile(&mut before.clone(), 0.5),
    }))
}

pub fn run(g: &Global, builder: hindsight::Builder, settings: &Settings, args: &BenchArgs) -> CliResult<()> {
    let size_list = hindsight::types::split_list(&args.sizes)
        .into_iter()
        .map(|size| {
            size.parse().map_err(|_| CliError::field("sizes", format!("{size:?} is not a whole number")))
        })
        .collect::<CliResult<Vec<usize>>>()?;
    let with_query_cache = settings.clone();
    let settings = bench_settings(settings.clone());
    let dir = tempfile::tempdir().map_err(io)?;
    let hs = builder.with_settings(with_query_cache).sqlite(dir.path().join("bench.db")).open()?;
    let models_dir = g.models.clone().unwrap_or_else(hindsight::Models::default_dir);
    let models = hindsight::Models::from_dir(&models_dir)?;
    let native = Native::load(&models)?;
    let embed = embed_latency(&hs, &native, args.runs)?;
    let recall_repeated_p50_ms = repeated_recall(&hs, args.runs)?;
    drop(hs);
    // One worker, then one per core (the library's default up to 4).
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()).min(4);
    let mut retain_by_workers = serde_json::Map::new();
    let mut retain_per_s = 0.0;
    for workers in if cores > 1 { vec![1, cores] } else { vec![1] } {
        retain_per_s = retain_throughput(g, &settings, CORPUS_INGEST, workers)?;
        retain_by_workers.insert(workers.to_string(), json!(retain_per_s));
    }
    let cache = hindsight::defaults::cache_dir().join("bench");
    let (base, queries) = base_corpus(&models, &native, &cache, 2000)?;
    let texts = match &args.texts {
        Some(path) => read_texts(path)?,
        None => corpus_texts(300),
    };
    let on_texts = match args.peer.is_some() || args.texts.is_some() {
        true => Some(text_bench(g, &settings, &texts, &queries, args.runs)?),
        false => None,
    };
    let mut sizes = Vec::new();
    for &size in &size_list {
        let mut row = size_bench(g, &settings, &base, &queries, size, args.runs)?;
        row["retain_per_s"] = json!(retain_per_s);
        row["retain_per_s_by_workers"] = json!(retain_by_workers);
        row["recall_repeated_query_p50_ms"] = json!(recall_repeated_p50_ms);
        if g.json && args.peer.is_none() {
            println!("{row}");
        } else if !g.json {
            eprintln!("{}", serde_json::to_string_pretty(&row).expect("json"));
        }
        sizes.push(row);
    }
    if g.json && args.peer.is_none() {
        println!("{}", json!({"embed": embed}));
    } else if !g.json {
        println!("{}", serde_json::to_string_pretty(&json!({"embed": embed, "sizes": sizes})).expect("json"));
    }
    let Some(on_texts) = on_texts else { return Ok(()) };
    let mut ours = on_texts;
    ours["embed_short_ms"] = embed["short"]["component_ms"].clone();
    ours["ingest_corpus_items"] = json!(CORPUS_INGEST);
    ours["ingest_corpus_per_s"] = json!(retain_per_s);
    ours["sizes"] = json!(sizes);
    if args.peer.is_none() {
        let texts = json!({"texts": ours});
        crate::print(g, &texts, || serde_json::to_string_pretty(&texts).expect("json"));
        return Ok(());
    }
    let corpus = derive_corpus(&base, size_list.iter().copied().max().unwrap_or(0), CORPUS_SEED);
    let corpus_texts = corpus_texts(CORPUS_INGEST);
    let inputs = crate::peer::Inputs {
        texts: &texts,
        corpus_texts: &corpus_texts,
        queries: &queries,
        corpus: &corpus,
        sizes: &size_list,
        runs: args.runs,
    };
    let chroma = crate::peer::chroma(&models_dir, &inputs)?;
    if g.json {
        for row in crate::peer::rows_by_size(&ours, &chroma) {
            println!("{row}");
        }
    } else {
        println!("\n{}", crate::peer::table(&ours, &chroma));
    }
    Ok(())
}

/// Real embeddings of the base texts and the queries (natively when built with the native
/// engine, else through the component), cached on disk.
fn base_corpus(
    models: &hindsight::Models,
    native: &Native,
    cache: &Path,
    n: usize,
) -> CliResult<(Corpus, Corpus)> {
    use sha2::Digest;
    let hex = |b: &[u8]| sha2::Sha256::digest(b).iter().map(|x| format!("{x:02x}")).collect::<String>();
    let texts = corpus_texts(n);
    let key = hex(format!("{}{}", hex(models.model()), texts.join("\n")).as_bytes());
    let path = cache.join(format!("bench-corpus-{}.json", &key[..16]));
    if let Ok(bytes) = std::fs::read(&path) {
        if let Ok(corpus) = serde_json::from_slice::<(Corpus, Corpus)>(&bytes) {
            return Ok(corpus);
        }
    }
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let vectors = native.embed_or_component(models, &refs)?;
    let base: Corpus = texts.into_iter().zip(vectors).collect();
    let qvectors = native.embed_or_component(models, QUERIES)?;
    let queries: Corpus = QUERIES.iter().map(|q| q.to_string()).zip(qvectors).collect();
    std::fs::create_dir_all(cache).map_err(io)?;
    std::fs::write(&path, serde_json::to_vec(&(&base, &queries)).expect("json")).map_err(io)?;
    Ok((base, queries))
}

pub use native::Native;

mod native {
    //! The same engine core, natively, over the same kind of store.

    use std::path::Path;
    use std::rc::Rc;
    use std::time::{Duration, Instant};

    use hindsight_engine::embed::{Embedder, TextEmbedder};
    use hindsight_engine::{Engine, Query};

    use super::{percentile, CliError, CliResult, Rng};

    pub struct Native(Embedder);

    fn engine_error(e: hindsight_engine::Error) -> CliError {
        CliError::new("model", e.to_string())
    }

    impl Native {
        pub fn load(models: &hindsight::Models) -> CliResult<Native> {
            Ok(Native(Embedder::load(models.model(), models.tokenizer()).map_err(engine_error)?))
        }

        pub fn embed(&self, texts: &[&str]) -> CliResult<Vec<Vec<f32>>> {
            TextEmbedder::embed_batch(&self.0, texts).map_err(engine_error)
        }

        pub fn embed_or_component(&self, _: &hindsight::Models, texts: &[&str]) -> CliResult<Vec<Vec<f32>>> {
            self.embed(texts)
        }

        pub fn tokens(&self, text: &str) -> Option<usize> {
            self.0.token_count(text).ok()
        }

        pub fn figure(&self, samples: &mut [Duration]) -> Option<f64> {
            Some(percentile(samples, 0.5))
        }
    }

    /// Embeds nothing: a bank fed with vectors.
    struct GivenVectors {
        dim: usize,
        id: String,
    }

    impl TextEmbedder for GivenVectors {
        fn model_id(&self) -> &str {
            &self.id
        }
        fn dimension(&self) -> usize {
            self.dim
        }
        fn inference(&self) -> &str {
            "none"
        }
        fn embed_batch(&self, _: &[&str]) -> hindsight_engine::Result<Vec<Vec<f32>>> {
            Err(hindsight_engine::Error::Model("this bench bank takes vectors only".into()))
        }
    }

    pub struct SizeFigures {
        pub recall_p50_ms: Option<f64>,
        pub hnsw_recall_at_10: Option<f64>,
    }

    pub fn size_bench(
        settings: &hindsight::Settings,
        db: &Path,
        corpus: &[(String, Vec<f32>)],
        queries: &[(String, Vec<f32>)],
        runs: usize,
    ) -> CliResult<SizeFigures> {
        let embedder = Rc::new(GivenVectors { dim: corpus[0].1.len(), id: "bench".into() });
        let engine = Engine::with_embedder(embedder, settings.clone());
        let store = hindsight::store::SqliteStore::open(db)?;
        let mut bank = engine.open_bank("bench", Box::new(store)).map_err(engine_error)?;
        let mut ids = Vec::with_capacity(corpus.len());
        for chunk in corpus.chunks(1000) {
            let items = chunk
                .iter()
                .map(|(t, v)| hindsight::Memory::new(t.clone()).vector(v.clone()).force())
                .collect();
            ids.extend(bank.retain(items, 0).map_err(engine_error)?.into_iter().filter_map(|o| o.id));
        }
        bank.maintain(0).map_err(engine_error)?;
        let mut samples: Vec<Duration> = Vec::new();
        for i in 0..runs {
            let (text, vector) = &queries[i % queries.len()];
            let q = Query {
                query: text.clone(),
                k: Some(10),
                now: Some(0),
                vector: Some(vector.clone()),
                ..Default::default()
            };
            let t = Instant::now();
            bank.recall(q).map_err(engine_error)?;
            samples.push(t.elapsed());
        }
        let hnsw = index_recall_at_10(&mut bank, corpus, &ids, queries)?;
        Ok(SizeFigures { recall_p50_ms: Some(percentile(&mut samples, 0.5)), hnsw_recall_at_10: hnsw })
    }

    /// The bank's vector index (HNSW segments plus the exact buffer) against an exact scan of
    /// every vector: the share of the true 10 nearest it returns, over the bench queries and 80
    /// corpus vectors nudged off their rows. None when nothing is sealed (the index is exact).
    fn index_recall_at_10(
        bank: &mut hindsight_engine::Bank,
        corpus: &[(String, Vec<f32>)],
        ids: &[String],
        queries: &[(String, Vec<f32>)],
    ) -> CliResult<Option<f64>> {
        if bank.index_segments() == 0 {
            return Ok(None);
        }
        let mut rng = Rng::new(97);
        let mut probes: Vec<Vec<f32>> = queries.iter().map(|q| q.1.clone()).collect();
        for _ in 0..80 {
            let row = &corpus[(rng.next_u64() % corpus.len() as u64) as usize].1;
            let mut v: Vec<f32> = row.iter().map(|x| x + 0.05 * rng.unit()).collect();
            super::normalize(&mut v);
            probes.push(v);
        }
        let mut found = 0usize;
        for probe in &probes {
            let mut exact: Vec<(f32, usize)> = corpus
                .iter()
                .enumerate()
                .map(|(i, (_, v))| (hindsight_engine::index::dot(probe, v), i))
                .collect();
            exact.select_nth_unstable_by(9, |a, b| b.0.total_cmp(&a.0));
            let truth: std::collections::HashSet<&str> =
                exact[..10].iter().map(|(_, i)| ids[*i].as_str()).collect();
            let got = bank.nearest(probe, 10).map_err(engine_error)?;
            found += got.iter().filter(|(id, _)| truth.contains(id.as_str())).count();
        }
        Ok(Some(found as f64 / (probes.len() * 10) as f64))
    }
}
