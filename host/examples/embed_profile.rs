//! Profiling aid: embeds a text R times in the component (or natively with `native`).
//!
//! cargo run -p hindsight --example embed_profile -- R [native] [short]

use std::sync::Arc;
use std::time::Instant;

use hindsight::{models, Host, HostConfig, SqliteKv};

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let runs: usize = args[1].parse()?;
    let native = args.iter().any(|a| a == "native");
    let text =
        if args.iter().any(|a| a == "short") { hindsight::bench::SHORT } else { hindsight::bench::LONG };
    let files = models::load(&models::models_dir(None))?;
    let t = Instant::now();
    if native {
        let e = hindsight_guest::embed::Embedder::load(&files.model, &files.tokenizer)?;
        eprintln!("load {:?}", t.elapsed());
        report(runs, || {
            e.embed(text).unwrap();
        });
    } else {
        let dir = tempfile::tempdir()?;
        let mut host = Host::new(
            Arc::new(SqliteKv::open(&dir.path().join("e.db"))?),
            files.model,
            files.tokenizer,
            HostConfig::default(),
        )?;
        host.embed(&[text.to_string()]).map_err(anyhow::Error::new)?;
        eprintln!("load {:?}", t.elapsed());
        report(runs, || {
            host.embed(&[text.to_string()]).unwrap();
        });
    }
    Ok(())
}

/// Minimum and median: the machine's other load only ever adds time.
fn report(runs: usize, mut f: impl FnMut()) {
    let mut ms: Vec<f64> = (0..runs)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64() * 1000.0
        })
        .collect();
    ms.sort_by(f64::total_cmp);
    eprintln!("{runs} embeds: min {:.1} ms, median {:.1} ms", ms[0], ms[runs / 2]);
}
