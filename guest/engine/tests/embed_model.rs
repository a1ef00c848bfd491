//! The real model, natively: the rewrite, pooling and normalisation give sensible similarities.

use hindsight_engine::embed::{gather_before_dequantize, Embedder};
use hindsight_engine::index::dot;
use hindsight_types::defaults::{models_dir, MODEL_FILE, TOKENIZER_FILE};

fn load() -> (Vec<u8>, Vec<u8>) {
    let dir = models_dir();
    let read = |name: &str| {
        std::fs::read(dir.join(name)).unwrap_or_else(|e| {
            panic!("{}: {e}; run `hindsight model fetch` first", dir.join(name).display())
        })
    };
    (read(MODEL_FILE), read(TOKENIZER_FILE))
}

#[test]
fn related_sentences_score_higher_than_unrelated_ones() {
    let (model, tokenizer) = load();
    let embedder = Embedder::load(&model, &tokenizer).unwrap();
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
    assert!(related > 0.5, "related {related}");
    assert!(unrelated < 0.3, "unrelated {unrelated}");

    // A batch pads the shorter texts: masked pooling must give the same vectors.
    let refs: Vec<&str> = texts.to_vec();
    let batch = embedder.embed_batch(&refs).unwrap();
    for (a, b) in batch.iter().zip(&v) {
        assert!(dot(a, b) > 0.9999, "batched embedding differs: {}", dot(a, b));
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
