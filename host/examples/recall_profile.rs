//! Profiling aid: builds (once) a bench bank of N memories in DB, then opens it and runs R
//! recalls without query embedding, printing phase timings. Run under `perf record` with
//! HINDSIGHT_PERFMAP=1 to see the guest's functions.
//!
//! cargo run -p hindsight --example recall_profile -- DB N R

use std::sync::Arc;
use std::time::Instant;

use hindsight::{models, Host, HostConfig, SqliteKv};

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let db = std::path::PathBuf::from(&args[1]);
    let n: usize = args[2].parse()?;
    let runs: usize = args[3].parse()?;
    let files = models::load(&models::models_dir(None))?;
    let settings = hindsight::bench::bench_settings("")?;
    let make = || -> anyhow::Result<Host> {
        let config = HostConfig { settings: settings.clone(), ..HostConfig::default() };
        Host::new(Arc::new(SqliteKv::open(&db)?), files.model.clone(), files.tokenizer.clone(), config)
    };
    let cache = dirs::cache_dir().map(|d| d.join("hindsight").join("bench"));
    let (base, queries) =
        hindsight::bench::base_corpus(&files.model, &files.tokenizer, cache.as_deref(), 2000)?;
    let fresh = !db.exists();
    let mut host = make()?;
    if fresh {
        let t = Instant::now();
        let corpus = hindsight::bench::derive_corpus(&base, n, n as u64);
        hindsight::bench::retain_corpus(&mut host, &corpus)?;
        host.maintain("bench", None).map_err(anyhow::Error::new)?;
        eprintln!("built {n} in {:?}", t.elapsed());
        drop(host);
        host = make()?;
    }
    host.model_id().map_err(anyhow::Error::new)?;
    let t = Instant::now();
    host.stats("bench").map_err(anyhow::Error::new)?;
    eprintln!("open {:?}", t.elapsed());
    let t = Instant::now();
    for i in 0..runs {
        let (text, vector) = &queries[i % queries.len()];
        host.recall("bench", &hindsight::bench::query(text, Some(vector.clone())))
            .map_err(anyhow::Error::new)?;
    }
    eprintln!("{runs} recalls: {:?} each", t.elapsed() / runs.max(1) as u32);
    Ok(())
}
