//! `hindsight-dev encoder --texts FILE`: how closely the engine's encoder reproduces tract's f32
//! vectors, text by text, and what each costs natively. The sandbox runs the same code.

use std::time::Instant;

use hindsight_engine::embed::{Embedder, InferencePath, TextEmbedder};
use hindsight_engine::index::dot;
use serde_json::json;

use crate::error::CliResult;
use crate::{EncoderArgs, Global};

pub fn run(g: &Global, args: &EncoderArgs) -> CliResult<()> {
    let dir = g.models.clone().unwrap_or_else(hindsight::Models::default_dir);
    let models = hindsight::Models::from_dir(&dir)?;
    let load = |path| Embedder::load_on(models.model(), models.tokenizer(), path);
    let ours = load(InferencePath::Encoder)?;
    let tract = load(InferencePath::Tract)?;
    let texts = crate::bench::read_texts(&args.texts)?;
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();

    let started = Instant::now();
    let a = TextEmbedder::embed_batch(&ours, &refs)?;
    let ours_s = started.elapsed().as_secs_f64();
    let started = Instant::now();
    let b = TextEmbedder::embed_batch(&tract, &refs)?;
    let tract_s = started.elapsed().as_secs_f64();

    let mut cosines: Vec<f32> = a.iter().zip(&b).map(|(x, y)| dot(x, y)).collect();
    let worst = cosines
        .iter()
        .enumerate()
        .min_by(|x, y| x.1.total_cmp(y.1))
        .map(|(i, _)| texts[i].clone())
        .unwrap_or_default();
    cosines.sort_by(f32::total_cmp);
    let mean = cosines.iter().map(|&c| c as f64).sum::<f64>() / cosines.len() as f64;
    let p1 = cosines[(cosines.len() - 1) / 100];
    let report = json!({
        "path": ours.path().as_str(),
        "fallback_reason": ours.fallback_reason(),
        "texts": texts.len(),
        "cosine": {"min": cosines[0], "p1": p1, "mean": mean},
        "worst_text": worst,
        "native_texts_per_s": {"encoder": texts.len() as f64 / ours_s, "tract": texts.len() as f64 / tract_s},
    });
    crate::print(g, &report, || {
        format!(
            "path: {}{}\n{} texts: cosine to tract min {:.5}, p1 {:.5}, mean {:.5}\nnatively: encoder {:.1} texts/s, tract {:.1} texts/s",
            ours.path().as_str(),
            ours.fallback_reason().map(|r| format!(" ({r})")).unwrap_or_default(),
            texts.len(),
            cosines[0],
            p1,
            mean,
            texts.len() as f64 / ours_s,
            texts.len() as f64 / tract_s,
        )
    });
    Ok(())
}
