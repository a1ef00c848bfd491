//! `hindsight bench`: the component against the same core run natively.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

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
