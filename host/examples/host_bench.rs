//! The cross-host bench (examples/parity/scenario.json, "bench"): the Rust host's figures, to
//! set beside `npm run bench` in examples/node and `python3 bench.py` in examples/python.
//!
//! cargo run -p hindsight --example host_bench

use std::sync::Arc;
use std::time::Instant;

use hindsight::types::NewMemory;
use hindsight::{convert, models, Host, HostConfig, SqliteKv};
use serde_json::{json, Value};

fn main() -> anyhow::Result<()> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let scenario: Value =
        serde_json::from_str(&std::fs::read_to_string(root.join("examples/parity/scenario.json"))?)?;
    let bench = &scenario["bench"];
    let (copies, runs, k) =
        (bench["copies"].as_u64().unwrap(), bench["runs"].as_u64().unwrap(), bench["k"].as_u64().unwrap());
    let now = scenario["now"].as_i64().unwrap();
    let bank = scenario["bank"].as_str().unwrap();
    let dir = tempfile::tempdir()?;

    let files = models::load(&models::models_dir(None))?;
    let kv = Arc::new(SqliteKv::open(&dir.path().join("bench.db"))?);
    let mut host = Host::new(kv, files.model, files.tokenizer, HostConfig::default())?;
    host.model_id().map_err(anyhow::Error::new)?;

    let memories = scenario["memories"].as_array().unwrap();
    let t = Instant::now();
    for i in 0..copies {
        let items: Vec<NewMemory> = memories
            .iter()
            .map(|m| NewMemory {
                kind: Some(convert::parse_kind(m["kind"].as_str().unwrap()).unwrap()),
                tags: m["tags"].as_array().unwrap().iter().map(|t| t.as_str().unwrap().to_string()).collect(),
                occurred_at: m["occurred_at"].as_i64(),
                force: true,
                ..convert::new_memory(&format!("{} (case {i})", m["content"].as_str().unwrap()))
            })
            .collect();
        host.retain(bank, &items, Some(now)).map_err(anyhow::Error::new)?;
    }
    let retain_s = t.elapsed().as_secs_f64();

    let queries: Vec<&str> =
        scenario["queries"].as_array().unwrap().iter().map(|q| q["query"].as_str().unwrap()).collect();
    let recall = |host: &mut Host, text: &str| {
        let query = hindsight::types::RecallQuery { now: Some(now), ..convert::recall_query(text, k as u32) };
        host.recall(bank, &query).map_err(anyhow::Error::new)
    };
    recall(&mut host, queries[0])?;
    let mut ms: Vec<f64> = Vec::new();
    for i in 0..runs as usize {
        let t = Instant::now();
        recall(&mut host, queries[i % queries.len()])?;
        ms.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    ms.sort_by(f64::total_cmp);
    let pct = |p: f64| ms[((ms.len() - 1) as f64 * p).round() as usize];
    let out = json!({
        "host": "rust (wasmtime 48)",
        "component_load_ms": host.timings.component_load.as_secs_f64() * 1000.0,
        "component_from_cache": host.timings.component_from_cache,
        "instantiate_ms": host.timings.instantiate.as_secs_f64() * 1000.0,
        "memories": copies as usize * memories.len(),
        "retain_s": retain_s,
        "recall_p50_ms": pct(0.5),
        "recall_p95_ms": pct(0.95),
    });
    println!("{}", serde_json::to_string_pretty(&out)?);
    Ok(())
}
