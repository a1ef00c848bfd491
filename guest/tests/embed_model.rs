//! The real model, natively: the rewrite, pooling and normalisation give sensible similarities.

use std::path::PathBuf;
use std::time::Instant;

use hindsight_guest::embed::{gather_before_dequantize, Embedder};
use hindsight_guest::index::dot;

fn models_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("HINDSIGHT_MODELS") {
        return PathBuf::from(dir);
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache"));
    cache.join("hindsight").join("models")
}

fn load() -> (Vec<u8>, Vec<u8>) {
    let dir = models_dir();
    let read = |name: &str| {
        std::fs::read(dir.join(name)).unwrap_or_else(|e| {
            panic!("{}: {e}; run `cargo run -p hindsight -- model fetch` first", dir.join(name).display())
        })
    };
    (read("model.onnx"), read("tokenizer.json"))
}

#[test]
fn related_sentences_score_higher_than_unrelated_ones() {
    let (model, tokenizer) = load();
    let start = Instant::now();
    let embedder = Embedder::load(&model, &tokenizer).unwrap();
    eprintln!("load: {:?}", start.elapsed());
    assert_eq!(embedder.dimension(), 384);
    let texts = [
        "The CSV file had garbled Chinese characters until we used utf-8-sig encoding",
        "Fix the encoding of a Chinese CSV export",
        "The user prefers PostgreSQL for new services",
    ];
    let v: Vec<Vec<f32>> = texts.iter().map(|t| embedder.embed(t).unwrap()).collect();
    for x in &v {
        assert!((dot(x, x) - 1.0).abs() < 1e-4, "unit length");
    }
    let related = dot(&v[0], &v[1]);
    let unrelated = dot(&v[0], &v[2]);
    eprintln!("related {related:.3} unrelated {unrelated:.3}");
    assert!(related > 0.5, "related {related}");
    assert!(unrelated < 0.3, "unrelated {unrelated}");

    // A batch pads the shorter texts: masked pooling must give the same vectors.
    let refs: Vec<&str> = texts.to_vec();
    let batch = embedder.embed_batch(&refs).unwrap();
    for (a, b) in batch.iter().zip(&v) {
        assert!(dot(a, b) > 0.9999, "batched embedding differs: {}", dot(a, b));
    }

    let short = "Retry the flaky payments API.";
    let long = "When the nightly export job fails because the payments API returns a 503 during the \
                maintenance window between two and three in the morning, wait ten minutes and retry \
                with exponential backoff, and never mark the export as failed before three attempts \
                have been made, since the upstream team confirmed the outage is routine.";
    eprintln!(
        "tokens: short {} long {}",
        embedder.token_count(short).unwrap(),
        embedder.token_count(long).unwrap()
    );
    for text in [short, long] {
        let start = Instant::now();
        for _ in 0..5 {
            embedder.embed(text).unwrap();
        }
        eprintln!("native embed ({} tokens): {:?}", embedder.token_count(text).unwrap(), start.elapsed() / 5);
    }
}

#[test]
fn the_rewrite_moves_the_word_table_gather_before_dequantisation() {
    let (model, _) = load();
    let mut proto =
        tract_onnx::prelude::Framework::proto_model_for_read(&tract_onnx::onnx(), &mut &model[..]).unwrap();
    let rewritten = gather_before_dequantize(&mut proto);
    assert!(rewritten >= 1, "no gather rewritten");
    let graph = proto.graph.unwrap();
    let table_read_whole = graph.node.iter().any(|n| {
        n.op_type == "Cast" && n.input.iter().any(|i| i == "inner.embeddings.word_embeddings.weight_q")
    });
    assert!(!table_read_whole, "the int8 word table is still dequantised whole");
}
