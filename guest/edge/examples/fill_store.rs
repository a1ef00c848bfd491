//! Fills an edge data directory's file store with N memories (given random unit vectors, so no
//! embedding), for measuring how long the edge takes to open a large bank:
//! `cargo run -p hindsight-edge --example fill_store -- DATA 100000` (the dev profile builds the
//! engine at opt-level 3); `tests/edge/bench.py --fill 100000` runs it and times the edge on it.

use std::sync::Arc;
use std::time::Instant;

use hindsight_edge::FileStore;
use hindsight_engine::Engine;
use hindsight_types::Memory;

fn main() {
    let mut args = std::env::args().skip(1);
    let data = std::path::PathBuf::from(args.next().expect("DATA directory"));
    let n: usize = args.next().map_or(100_000, |n| n.parse().expect("a count"));
    let model = std::fs::read(data.join("model.onnx")).expect("model.onnx");
    let tokenizer = std::fs::read(data.join("tokenizer.json")).expect("tokenizer.json");
    let engine = Engine::new(&model, &tokenizer, "").expect("engine");
    let dimension = engine.embed(&["x"]).expect("embed")[0].len();
    let store = Arc::new(FileStore::open(data.join("store")).expect("store"));
    let mut bank = engine.open_bank("default", Box::new(store.clone())).expect("bank");
    let started = Instant::now();
    let mut seed = 42u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed >> 11) as f32 / (1u64 << 53) as f32 - 0.5
    };
    let now = 1_780_000_000_000;
    for start in (0..n).step_by(500) {
        let items: Vec<Memory> = (start..(start + 500).min(n))
            .map(|i| {
                let mut v: Vec<f32> = (0..dimension).map(|_| next()).collect();
                let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
                v.iter_mut().for_each(|x| *x /= norm);
                let mut m = Memory::new(format!(
                    "Synthetic memory {i}: service {} needs setting {} set",
                    i % 977,
                    i % 131
                ));
                m.vector = Some(v);
                m.force = true;
                m
            })
            .collect();
        bank.retain(items, now).expect("retain");
    }
    bank.reindex(now).expect("reindex");
    println!(
        "{n} memories in {:.1} s; store generation {}, log {} bytes",
        started.elapsed().as_secs_f64(),
        store.generation(),
        store.log_bytes()
    );
}
