//! The cross-host bench (examples/parity/scenario.json, "bench"): the Rust host's figures, to
//! set beside `npm run bench` in packages/node and `python3 bench.py` in packages/python.
//!
//! cargo run --release -p hindsight-dev --example host_bench

use std::time::Instant;

use hindsight::{types::Named, Hindsight, Kind, Memory, Query};
use serde_json::{json, Value};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let scenario: Value =
        serde_json::from_str(&std::fs::read_to_string(root.join("examples/parity/scenario.json"))?)?;
    let bench = &scenario["bench"];
    let (copies, runs, k) =
        (bench["copies"].as_u64().unwrap(), bench["runs"].as_u64().unwrap(), bench["k"].as_u64().unwrap());
    let now = scenario["now"].as_i64().unwrap();
    let dir = tempfile::tempdir()?;

    let t = Instant::now();
    let hs = Hindsight::builder().sqlite(dir.path().join("bench.db")).no_llm().open()?;
    let timings = hs.timings();
    hs.warm_up()?;
    let instantiate = t.elapsed() - timings.component_load;
    let bank = hs.bank(scenario["bank"].as_str().unwrap())?.at(now);

    let memories = scenario["memories"].as_array().unwrap();
    let t = Instant::now();
    for i in 0..copies {
        bank.retain(memories.iter().map(|m| {
            let mut item = Memory::new(format!("{} (case {i})", m["content"].as_str().unwrap())).force();
            item.kind = Some(Kind::parse("kind", m["kind"].as_str().unwrap()).unwrap());
            item.tags =
                m["tags"].as_array().unwrap().iter().map(|t| t.as_str().unwrap().to_string()).collect();
            item.occurred_at = m["occurred_at"].as_i64();
            item
        }))?;
    }
    let retain_s = t.elapsed().as_secs_f64();

    let queries: Vec<&str> =
        scenario["queries"].as_array().unwrap().iter().map(|q| q["query"].as_str().unwrap()).collect();
    let recall = |text: &str| bank.recall(Query::new(text).k(k as u32));
    recall(queries[0])?;
    let mut ms: Vec<f64> = Vec::new();
    for i in 0..runs as usize {
        let t = Instant::now();
        recall(queries[i % queries.len()])?;
        ms.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    ms.sort_by(f64::total_cmp);
    let pct = |p: f64| ms[((ms.len() - 1) as f64 * p).round() as usize];
    let out = json!({
        "host": "rust (wasmtime 48)",
        "component_load_ms": timings.component_load.as_secs_f64() * 1000.0,
        "component_from_cache": timings.component_from_cache,
        "instantiate_ms": instantiate.as_secs_f64() * 1000.0,
        "memories": copies as usize * memories.len(),
        "retain_s": retain_s,
        "recall_p50_ms": pct(0.5),
        "recall_p95_ms": pct(0.95),
    });
    println!("{}", serde_json::to_string_pretty(&out)?);
    Ok(())
}
