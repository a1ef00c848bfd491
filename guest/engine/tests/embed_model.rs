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

#[test]
fn the_encoder_runs_the_default_model_and_agrees_with_tract() {
    use hindsight_engine::embed::InferencePath;
    let (model, tokenizer) = load();
    let ours = Embedder::load(&model, &tokenizer).unwrap();
    assert_eq!(ours.path(), InferencePath::Encoder, "fell back: {:?}", ours.fallback_reason());
    let tract = Embedder::load_on(&model, &tokenizer, InferencePath::Tract).unwrap();
    assert_eq!(tract.path(), InferencePath::Tract);
    let texts = [
        "Caroline: I went to the LGBTQ support group yesterday and it was so powerful.",
        "ok",
        "The deploy failed because the migration locked the users table for eleven minutes; \
         running it with CONCURRENTLY fixed it, and the user wants every migration reviewed \
         for locks before it ships to production again next quarter.",
        "用户喜欢用 PostgreSQL",
        "",
    ];
    let a = ours.embed_batch(&texts).unwrap();
    let b = tract.embed_batch(&texts).unwrap();
    for ((x, y), t) in a.iter().zip(&b).zip(texts) {
        let c = dot(x, y);
        assert!(c >= 0.995, "cosine {c} on {t:?}");
    }
}

/// The second model (an f32 export with another graph layout): `./dev test` fetches it and names
/// its directory in HINDSIGHT_TEST_MODELS_L3.
#[test]
fn the_encoder_runs_the_l3_model_and_agrees_with_tract() {
    use hindsight_engine::embed::InferencePath;
    let Ok(dir) = std::env::var("HINDSIGHT_TEST_MODELS_L3") else {
        eprintln!("skipped: HINDSIGHT_TEST_MODELS_L3 names no directory with the second model");
        return;
    };
    let dir = std::path::Path::new(&dir);
    let model = std::fs::read(dir.join(MODEL_FILE)).unwrap();
    let tokenizer = std::fs::read(dir.join(TOKENIZER_FILE)).unwrap();
    let ours = Embedder::load(&model, &tokenizer).unwrap();
    assert_eq!(ours.path(), InferencePath::Encoder, "fell back: {:?}", ours.fallback_reason());
    let tract = Embedder::load_on(&model, &tokenizer, InferencePath::Tract).unwrap();
    let texts = ["Melanie: we went camping at the lake with the kids", "用户喜欢用 PostgreSQL", "x"];
    for (x, y) in ours.embed_batch(&texts).unwrap().iter().zip(&tract.embed_batch(&texts).unwrap()) {
        assert!(dot(x, y) >= 0.995, "cosine {}", dot(x, y));
    }
}

#[test]
fn a_graph_the_encoder_does_not_know_runs_on_tract_and_says_why() {
    use hindsight_engine::embed::InferencePath;
    let (model, tokenizer) = load();
    // Renaming the word table (same length, so the protobuf stays valid) hides the BERT layout
    // from the encoder; tract does not care about names.
    let (old, new) = (&b"word_embeddings"[..], &b"word_embeddingX"[..]);
    let mut bytes = model.clone();
    let mut i = 0;
    while let Some(at) = bytes[i..].windows(old.len()).position(|w| w == old) {
        bytes[i + at..i + at + old.len()].copy_from_slice(new);
        i += at + old.len();
    }
    let embedder = Embedder::load(&bytes, &tokenizer).unwrap();
    assert_eq!(embedder.path(), InferencePath::Tract);
    assert!(
        embedder.fallback_reason().unwrap().contains("word_embeddings"),
        "{:?}",
        embedder.fallback_reason()
    );
    let v = embedder.embed("still embeds").unwrap();
    assert!((dot(&v, &v) - 1.0).abs() < 1e-4);
}

#[test]
fn a_long_text_is_embedded_in_windows_so_its_end_counts() {
    use hindsight_engine::embed::TextEmbedder;
    let (model, tokenizer) = load();
    let embedder = Embedder::load(&model, &tokenizer).unwrap();
    let filler =
        "We talked about the garden, the weather and our plans for the weekend at length. ".repeat(40);
    let long = format!("{filler}Our new dentist is Dr. Okafor, whose practice is on Pine Street.");
    let question = embedder.embed("Who is our dentist now?").unwrap();
    // One model run reads the first 512 tokens only; the windows cover the whole text.
    let truncated = embedder.embed(&long).unwrap();
    let windowed = TextEmbedder::embed_batch(&embedder, &[&long]).unwrap().remove(0);
    assert!((dot(&windowed, &windowed) - 1.0).abs() < 1e-4, "unit length");
    let (before, after) = (dot(&truncated, &question), dot(&windowed, &question));
    assert!(after > before + 0.05, "the fact at the end moved the vector: {before} -> {after}");

    // A text the model's training length holds is one piece, embedded as before bit for bit.
    let short = "Our new dentist is Dr. Okafor, whose practice is on Pine Street.";
    assert_eq!(TextEmbedder::embed_batch(&embedder, &[short]).unwrap()[0], embedder.embed(short).unwrap());
}

#[test]
fn sentence_keys_come_from_the_same_run_and_agree_between_encoder_and_tract() {
    use hindsight_engine::embed::{InferencePath, TextEmbedder};
    let (model, tokenizer) = load();
    let ours = Embedder::load_on(&model, &tokenizer, InferencePath::Encoder).unwrap();
    let tract = Embedder::load_on(&model, &tokenizer, InferencePath::Tract).unwrap();
    let chatty =
        "Melanie: Yep, Caroline. Taking care of ourselves is vital. I'm off to go swimming with the kids.";
    let single = "Melanie: I'm off to go swimming with the kids.";
    let a = ours.embed_keyed(&[chatty, single]).unwrap();
    let b = tract.embed_keyed(&[chatty, single]).unwrap();
    // The keys cost no model run of their own: the vector is the one embed_batch makes.
    assert_eq!(a[0].vector, TextEmbedder::embed_batch(&ours, &[chatty]).unwrap()[0]);
    assert_eq!(a[0].sentences.len(), 3);
    assert!(a[1].sentences.is_empty(), "one sentence: its vector is its key");
    for (x, y) in a[0].sentences.iter().zip(&b[0].sentences) {
        assert!(dot(x, y) > 0.995, "encoder and tract keys differ: {}", dot(x, y));
    }
    // Each key is its own sentence's: a question about one sentence is nearest that one's key.
    let nearest = |q: &str| {
        let q = ours.embed(q).unwrap();
        let scores: Vec<f32> = a[0].sentences.iter().map(|k| dot(k, &q)).collect();
        (0..scores.len()).max_by(|&i, &j| scores[i].total_cmp(&scores[j])).unwrap()
    };
    assert_eq!(nearest("Who went swimming with the children?"), 2);
    assert_eq!(nearest("Is self-care important?"), 1);
}
