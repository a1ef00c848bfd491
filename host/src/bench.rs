//! `hindsight bench`: the component against the same core run natively.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::kv::{Kv, KvOp};
use crate::Host;

pub const SHORT: &str = "Retry the flaky payments API.";
/// About 70 tokens.
pub const LONG: &str = "When the nightly export job fails because the payments API returns a 503 during the \
maintenance window between two and three in the morning, wait ten minutes and retry with exponential \
backoff, and never mark the export as failed before three attempts have been made, since the upstream \
team confirmed that the outage is routine and announced.";

pub fn percentile(samples: &mut [Duration], p: f64) -> f64 {
    samples.sort();
    let ix = ((samples.len() as f64 - 1.0) * p).round() as usize;
    samples[ix].as_secs_f64() * 1000.0
}

fn time_n(n: usize, mut f: impl FnMut()) -> Vec<Duration> {
    (0..n)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .collect()
}

/// Embedding latency (ms, p50) of a short and a ~70-token text, and per text in a batch of 16,
/// in the component and natively.
pub fn embed_latency(host: &mut Host, model: &[u8], tokenizer: &[u8], runs: usize) -> anyhow::Result<Value> {
    use hindsight_guest::embed_api::TextEmbedder;
    let native = hindsight_guest::embed::Embedder::load(model, tokenizer)?;
    let tokens = |t: &str| native.token_count(t).unwrap_or(0);
    let batch: Vec<String> = (0..16).map(|i| format!("{SHORT} Attempt {i} of the nightly export.")).collect();
    let batch_refs: Vec<&str> = batch.iter().map(String::as_str).collect();
    host.embed(&[SHORT.to_string()]).map_err(anyhow::Error::new)?; // warm-up: instantiate
    let mut out = serde_json::Map::new();
    for (name, text) in [("short", SHORT), ("long", LONG)] {
        let mut wasm = time_n(runs, || {
            host.embed(&[text.to_string()]).expect("embed in the component");
        });
        let mut nat = time_n(runs, || {
            native.embed(text).expect("embed natively");
        });
        out.insert(
            name.into(),
            json!({"tokens": tokens(text), "component_ms": percentile(&mut wasm, 0.5), "native_ms": percentile(&mut nat, 0.5)}),
        );
    }
    let mut wasm = time_n(runs.div_ceil(4), || {
        host.embed(&batch).expect("embed in the component");
    });
    let mut nat = time_n(runs.div_ceil(4), || {
        TextEmbedder::embed_batch(&native, &batch_refs).expect("embed natively");
    });
    out.insert(
        "batch16_per_text".into(),
        json!({"component_ms": percentile(&mut wasm, 0.5) / 16.0, "native_ms": percentile(&mut nat, 0.5) / 16.0}),
    );
    Ok(Value::Object(out))
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
        hindsight_guest::embed::normalize(&mut v);
        let tail = b.0.split_whitespace().take(4).collect::<Vec<_>>().join(" ");
        out.push((format!("{} Also: {tail}.", a.0), v));
    }
    out
}

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

/// Embeds nothing: a bank fed with vectors, for the native side of the comparison.
struct GivenVectors {
    dim: usize,
    id: String,
}

impl hindsight_guest::embed_api::TextEmbedder for GivenVectors {
    fn model_id(&self) -> &str {
        &self.id
    }
    fn dimension(&self) -> usize {
        self.dim
    }
    fn embed_batch(&self, _: &[&str]) -> hindsight_guest::Result<Vec<Vec<f32>>> {
        Err(hindsight_guest::Error::Model("this bench bank takes vectors only".into()))
    }
}

/// The host's SQLite store as the engine's `Store`, for the native side of the comparison: both
/// sides read and commit through the same store (recall commits access counts), so the ratio
/// measures the component rather than SQLite against an in-memory map.
struct NativeSqlite(crate::SqliteKv);

impl hindsight_guest::store::Store for NativeSqlite {
    fn get(&self, key: &str) -> hindsight_guest::Result<Option<Vec<u8>>> {
        self.0.get(key).map_err(store_error)
    }

    fn scan(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        limit: u32,
    ) -> hindsight_guest::Result<Vec<(String, Vec<u8>)>> {
        self.0.scan(prefix, start_after, limit).map_err(store_error)
    }

    fn commit(&self, ops: Vec<hindsight_guest::store::Op>) -> hindsight_guest::Result<()> {
        use hindsight_guest::store::Op;
        let ops = ops
            .into_iter()
            .map(|op| match op {
                Op::Put(k, v) => KvOp::Put(k, v),
                Op::Delete(k) => KvOp::Delete(k),
                Op::Expect(k, v) => KvOp::Expect(k, v),
            })
            .collect();
        self.0.commit(ops).map_err(|e| match e.downcast_ref::<crate::kv::Conflict>() {
            Some(conflict) => hindsight_guest::Error::Conflict(conflict.to_string()),
            None => store_error(e),
        })
    }
}

fn store_error(e: anyhow::Error) -> hindsight_guest::Error {
    hindsight_guest::Error::Store(format!("{e:#}"))
}

fn new_memory(text: &str, vector: Option<Vec<f32>>) -> crate::types::NewMemory {
    crate::types::NewMemory { vector, ..crate::convert::new_memory(text) }
}

/// Fills the bank "bench" with `corpus` (text, vector), a thousand per call. The derived corpus
/// repeats its base texts: stored as given, not deduplicated.
pub fn retain_corpus(host: &mut Host, corpus: &[(String, Vec<f32>)]) -> anyhow::Result<()> {
    for chunk in corpus.chunks(1000) {
        let items: Vec<_> = chunk
            .iter()
            .map(|(t, v)| crate::types::NewMemory { force: true, ..new_memory(t, Some(v.clone())) })
            .collect();
        ok(host.retain("bench", &items, None))?;
    }
    Ok(())
}

/// The bench's recall: top 10, with the query's vector when given (no embedding).
pub fn query(text: &str, vector: Option<Vec<f32>>) -> crate::types::RecallQuery {
    crate::types::RecallQuery { vector, ..crate::convert::recall_query(text, 10) }
}

fn ok<T>(r: crate::CallResult<T>) -> anyhow::Result<T> {
    r.map_err(anyhow::Error::new)
}

/// Memories per second retained through the component, embedding included (20-word texts).
pub fn retain_throughput(host: &mut Host, n: usize) -> anyhow::Result<f64> {
    let texts = corpus_texts(n);
    let start = Instant::now();
    for chunk in texts.chunks(32) {
        let items: Vec<_> = chunk.iter().map(|t| new_memory(t, None)).collect();
        ok(host.retain("bench-retain", &items, None))?;
    }
    Ok(n as f64 / start.elapsed().as_secs_f64())
}

/// The engine settings a bench bank runs with: the caller's, with no capacity cap unless the
/// caller set one (the default cap of 10,000 active memories would archive most of a large
/// bank), and the vector buffer sealed into HNSW segments from 16k vectors.
pub fn bench_settings(user: &str) -> anyhow::Result<String> {
    let mut v: Value = if user.trim().is_empty() { json!({}) } else { serde_json::from_str(user)? };
    let maintain = v
        .as_object_mut()
        .ok_or_else(|| anyhow::anyhow!("settings: expected a JSON object"))?
        .entry("maintain")
        .or_insert_with(|| json!({}));
    if let Some(m) = maintain.as_object_mut() {
        m.entry("capacity").or_insert(json!(u32::MAX));
    }
    // Segments are what the bench measures: seal at 16k / 32k unless the caller chose.
    let index = v.as_object_mut().expect("an object").entry("index").or_insert_with(|| json!({}));
    if let Some(ix) = index.as_object_mut() {
        ix.entry("seal_min").or_insert(json!(16384));
        ix.entry("buffer_max").or_insert(json!(32768));
    }
    Ok(v.to_string())
}

/// Recall timings over `runs` queries: (with query embedding, without).
fn time_recalls(
    host: &mut Host,
    queries: &[(String, Vec<f32>)],
    runs: usize,
) -> anyhow::Result<(Vec<Duration>, Vec<Duration>)> {
    let mut with_embed = Vec::new();
    let mut no_embed = Vec::new();
    for i in 0..runs {
        let (text, vector) = &queries[i % queries.len()];
        let t = Instant::now();
        ok(host.recall("bench", &query(text, None)))?;
        with_embed.push(t.elapsed());
        let t = Instant::now();
        ok(host.recall("bench", &query(text, Some(vector.clone()))))?;
        no_embed.push(t.elapsed());
    }
    Ok((with_embed, no_embed))
}

/// One bank size: build it from vectors; time recall, `maintain` (which seals the vector
/// buffer into an HNSW segment), recall again, and opening the maintained bank; then the same
/// core natively, and the HNSW index's recall@10 against an exact scan.
pub fn size_bench(
    make_host: &dyn Fn(&std::path::Path) -> anyhow::Result<Host>,
    settings: &str,
    base: &[(String, Vec<f32>)],
    queries: &[(String, Vec<f32>)],
    size: usize,
    runs: usize,
) -> anyhow::Result<Value> {
    let corpus = derive_corpus(base, size, size as u64);
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("bench.db");
    let mut host = make_host(&db)?;
    retain_corpus(&mut host, &corpus)?;
    let build_memory = host.guest_memory_bytes();
    let (_, before) = time_recalls(&mut host, queries, runs)?;
    let t = Instant::now();
    let report = ok(host.maintain("bench", None))?;
    let maintain_ms = t.elapsed().as_secs_f64() * 1000.0;
    drop(host);
    let bytes = std::fs::metadata(&db)?.len()
        + std::fs::metadata(db.with_extension("db-wal")).map(|m| m.len()).unwrap_or(0);

    let mut host = make_host(&db)?;
    ok(host.model_id())?; // instantiate the engine first: open time is the bank's alone
    let t = Instant::now();
    ok(host.stats("bench"))?;
    let open_ms = t.elapsed().as_secs_f64() * 1000.0;
    let (mut with_embed, mut no_embed) = time_recalls(&mut host, queries, runs)?;
    let guest_memory = host.guest_memory_bytes();

    // The same core, natively, over the same kind of store, maintained the same way.
    let embedder = std::rc::Rc::new(GivenVectors { dim: base[0].1.len(), id: "bench".into() });
    let engine =
        hindsight_guest::Engine::with_embedder(embedder, hindsight_guest::Settings::from_json(settings)?);
    let native_store = NativeSqlite(crate::SqliteKv::open(&dir.path().join("native.db"))?);
    let mut bank = engine.open_bank("bench", Box::new(native_store))?;
    let mut ids = Vec::with_capacity(corpus.len());
    for chunk in corpus.chunks(1000) {
        let items = chunk
            .iter()
            .map(|(t, v)| hindsight_guest::NewMemory {
                vector: Some(v.clone()),
                force: true,
                ..hindsight_guest::NewMemory::text(t)
            })
            .collect();
        ids.extend(bank.retain(items, 0)?.into_iter().filter_map(|o| o.id));
    }
    bank.maintain(0)?;
    let mut native: Vec<Duration> = Vec::new();
    for i in 0..runs {
        let (text, vector) = &queries[i % queries.len()];
        let q = hindsight_guest::RecallQuery {
            query: text.clone(),
            k: Some(10),
            now: 0,
            vector: Some(vector.clone()),
            ..Default::default()
        };
        let t = Instant::now();
        bank.recall(q)?;
        native.push(t.elapsed());
    }
    let hnsw_recall = index_recall_at_10(&mut bank, &corpus, &ids, queries)?;
    Ok(json!({
        "size": size,
        "recall_p50_ms": percentile(&mut with_embed.clone(), 0.5),
        "recall_p99_ms": percentile(&mut with_embed, 0.99),
        "recall_noembed_p50_ms": percentile(&mut no_embed.clone(), 0.5),
        "recall_noembed_p99_ms": percentile(&mut no_embed, 0.99),
        "native_recall_noembed_p50_ms": percentile(&mut native, 0.5),
        "open_ms": open_ms,
        "bytes_per_memory": bytes as f64 / size as f64,
        "guest_memory_mib": guest_memory as f64 / (1 << 20) as f64,
        "build_guest_memory_mib": build_memory as f64 / (1 << 20) as f64,
        "hnsw_recall_at_10": hnsw_recall,
        "maintain_ms": maintain_ms,
        "maintain_sealed": report.sealed,
        "maintain_merged": report.steps.iter().filter(|s| s.action == crate::types::MaintainAction::Merged).count(),
        "maintain_archived": report.steps.iter().filter(|s| s.action == crate::types::MaintainAction::Archived).count(),
        "recall_noembed_p50_before_maintain_ms": percentile(&mut before.clone(), 0.5),
    }))
}

/// The bank's vector index (HNSW segments plus the exact buffer) against an exact scan of
/// every vector: the share of the true 10 nearest it returns, over the bench queries and 80
/// corpus vectors nudged off their rows. None when nothing is sealed (the index is exact).
fn index_recall_at_10(
    bank: &mut hindsight_guest::Bank,
    corpus: &[(String, Vec<f32>)],
    ids: &[String],
    queries: &[(String, Vec<f32>)],
) -> anyhow::Result<Option<f64>> {
    if bank.index_segments() == 0 {
        return Ok(None);
    }
    let mut rng = Rng::new(97);
    let mut probes: Vec<Vec<f32>> = queries.iter().map(|q| q.1.clone()).collect();
    for _ in 0..80 {
        let row = &corpus[(rng.next_u64() % corpus.len() as u64) as usize].1;
        let mut v: Vec<f32> = row.iter().map(|x| x + 0.05 * rng.unit()).collect();
        hindsight_guest::embed::normalize(&mut v);
        probes.push(v);
    }
    let mut found = 0usize;
    for probe in &probes {
        let mut exact: Vec<(f32, usize)> =
            corpus.iter().enumerate().map(|(i, (_, v))| (hindsight_guest::index::dot(probe, v), i)).collect();
        exact.select_nth_unstable_by(9, |a, b| b.0.total_cmp(&a.0));
        let truth: std::collections::HashSet<&str> =
            exact[..10].iter().map(|(_, i)| ids[*i].as_str()).collect();
        let got = bank.nearest(probe, 10)?;
        found += got.iter().filter(|(id, _)| truth.contains(id.as_str())).count();
    }
    Ok(Some(found as f64 / (probes.len() * 10) as f64))
}

/// Texts with their vectors.
pub type Corpus = Vec<(String, Vec<f32>)>;

/// Real embeddings of the base texts and the queries, made natively once and cached on disk.
pub fn base_corpus(
    model: &[u8],
    tokenizer: &[u8],
    cache: Option<&std::path::Path>,
    n: usize,
) -> anyhow::Result<(Corpus, Corpus)> {
    use hindsight_guest::embed_api::TextEmbedder;
    let texts = corpus_texts(n);
    let key = crate::runtime::sha256_hex(
        format!("{}{}", crate::runtime::sha256_hex(model), texts.join("\n")).as_bytes(),
    );
    let path = cache.map(|d| d.join(format!("bench-corpus-{}.json", &key[..16])));
    if let Some(p) = path.as_ref().filter(|p| p.is_file()) {
        let (b, q): (Corpus, Corpus) = serde_json::from_slice(&std::fs::read(p)?)?;
        return Ok((b, q));
    }
    let embedder = hindsight_guest::embed::Embedder::load(model, tokenizer)?;
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let vectors = TextEmbedder::embed_batch(&embedder, &refs)?;
    let base: Vec<(String, Vec<f32>)> = texts.into_iter().zip(vectors).collect();
    let qvectors = TextEmbedder::embed_batch(&embedder, QUERIES)?;
    let queries: Vec<(String, Vec<f32>)> = QUERIES.iter().map(|q| q.to_string()).zip(qvectors).collect();
    if let Some(p) = path {
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(p, serde_json::to_vec(&(&base, &queries))?)?;
    }
    Ok((base, queries))
}
