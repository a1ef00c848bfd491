//! Profiling aid: embeds a text R times in the component (or natively with `native`), printing
//! the minimum and median; run under `perf record` with HINDSIGHT_PERFMAP=1 to see the guest's
//! functions.
//!
//! cargo run --release -p hindsight-dev --example embed_profile -- R [native] [short]
//!
//! With HINDSIGHT_COMPONENT=FILE it runs that component instead of the embedded one: a kernel
//! change is measured after the guest build alone, without relinking the host.

use std::time::Instant;

use hindsight::{Hindsight, Models};
use hindsight_engine::embed::Embedder;

const SHORT: &str = "Retry the flaky payments API.";
const LONG: &str = "When the nightly export job fails because the payments API returns a 503 during the \
maintenance window between two and three in the morning, wait ten minutes and retry with exponential \
backoff, and never mark the export as failed before three attempts have been made, since the upstream \
team confirmed that the outage is routine and announced.";

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let runs: usize = args.get(1).ok_or("usage: embed_profile RUNS [native] [short]")?.parse()?;
    let text = if args.iter().any(|a| a == "short") { SHORT } else { LONG };
    let models = Models::from_dir(Models::default_dir())?;
    let t = Instant::now();
    if args.iter().any(|a| a == "native") {
        let e = Embedder::load(models.model(), models.tokenizer()).map_err(|e| e.to_string())?;
        eprintln!("load {:?}", t.elapsed());
        report(runs, || drop(e.embed(text)));
    } else {
        let mut builder = Hindsight::builder().memory().no_llm().models(models);
        if let Some(file) = std::env::var_os("HINDSIGHT_COMPONENT") {
            builder = builder.component_file(file);
        }
        let hs = builder.open()?;
        hs.embed(&[text])?;
        eprintln!("load {:?}", t.elapsed());
        report(runs, || drop(hs.embed(&[text])));
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
