//! Development aid: the rules judge over labelled pairs, natively and without a store, so a rule
//! change is measured in seconds. Embeddings are computed once (native tract) and cached by text.
//! `cargo run -p hindsight-dev --example judge_pairs -- PAIRS.jsonl [PAIRS.jsonl …] [-v] [--rules]`
//! (`--rules`: the rules alone, without the weighing).
//!
//! `… -- --train guest/engine/src/judge/weights.rs PAIRS.jsonl …` fits the weighing's logistic
//! regression on the pairs the rules leave to it and writes the weights file.
use std::collections::BTreeMap;
use std::path::Path;

use hindsight::Models;
use hindsight_engine::embed::Embedder;
use hindsight_engine::judge::{by_rules, judge, likelihoods, Evidence, Nature, Verdict, FEATURES};
use hindsight_types::{Kind, Named};

const CACHE: &str = "target/tmp/judge-pair-vectors.json";

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let verbose = args.iter().any(|a| a == "-v");
    let rules_only = args.iter().any(|a| a == "--rules");
    let train_to = match args.iter().position(|a| a == "--train") {
        Some(i) => Some(
            args.get(i + 1)
                .filter(|p| p.ends_with(".rs"))
                .ok_or("--train needs the weights file to write (…/weights.rs)")?,
        ),
        None => None,
    };
    let files: Vec<&String> = args.iter().filter(|a| !a.starts_with('-') && Some(*a) != train_to).collect();
    let mut examples: Vec<([f32; FEATURES], usize)> = Vec::new();
    let mut vecs: BTreeMap<String, Vec<f32>> =
        std::fs::read_to_string(CACHE).ok().and_then(|s| serde_json::from_str(&s).ok()).unwrap_or_default();
    let mut embedder = None;
    let labels = ["supersede", "duplicate", "keep_both"];
    for file in &files {
        let pairs: Vec<serde_json::Value> =
            std::fs::read_to_string(file)?.lines().map(serde_json::from_str).collect::<Result<_, _>>()?;
        let missing: Vec<&str> = pairs
            .iter()
            .flat_map(|p| [p["old"].as_str().unwrap(), p["new"].as_str().unwrap()])
            .filter(|t| !vecs.contains_key(*t))
            .collect();
        if !missing.is_empty() {
            if embedder.is_none() {
                let models = Models::from_dir(Models::default_dir())?;
                embedder =
                    Some(Embedder::load(models.model(), models.tokenizer()).map_err(|e| e.to_string())?);
            }
            for t in missing {
                let v = embedder.as_ref().unwrap().embed(t).map_err(|e| e.to_string())?;
                vecs.insert(t.to_string(), v);
            }
            std::fs::create_dir_all(Path::new(CACHE).parent().unwrap())?;
            std::fs::write(CACHE, serde_json::to_string(&vecs)?)?;
        }
        let mut confusion = [[0u32; 3]; 3];
        let mut by_lang: BTreeMap<String, (u32, u32)> = BTreeMap::new();
        for p in &pairs {
            let (old, new) = (p["old"].as_str().unwrap(), p["new"].as_str().unwrap());
            let c: f32 = vecs[old].iter().zip(&vecs[new]).map(|(a, b)| a * b).sum();
            let kind = Kind::parse("kind", p["kind"].as_str().unwrap_or("semantic")).unwrap();
            let nature = Nature::of(kind);
            let (rules, evidence) = by_rules(old, new, c, nature);
            let want = labels.iter().position(|l| *l == p["label"].as_str().unwrap()).unwrap();
            if let Some(e) = evidence {
                examples.push((Evidence::features(&e, rules.verdict), want));
            }
            let j = if rules_only { rules } else { judge(old, new, c, nature) };
            let got = match j.verdict {
                Verdict::Update => 0,
                Verdict::Duplicate => 1,
                Verdict::Compatible => 2,
            };
            confusion[want][got] += 1;
            let lang = by_lang.entry(p["lang"].as_str().unwrap_or("?").to_string()).or_default();
            lang.1 += 1;
            lang.0 += u32::from(got == want);
            if verbose && got != want {
                println!(
                    "{}->{} {:40} {c:.2} {} {old} => {new}",
                    &labels[want][..4],
                    &labels[got][..4],
                    j.why,
                    p["id"]
                );
            }
        }
        let right: u32 = (0..3).map(|i| confusion[i][i]).sum();
        println!("== {file}: accuracy {:.3}", right as f32 / pairs.len() as f32);
        for (i, l) in labels.iter().enumerate() {
            let tp = confusion[i][i] as f32;
            let fp: u32 = (0..3).filter(|&o| o != i).map(|o| confusion[o][i]).sum();
            let fn_: u32 = (0..3).filter(|&o| o != i).map(|o| confusion[i][o]).sum();
            println!(
                "{l:10} P {:.3} R {:.3} {:?}",
                tp / (tp + fp as f32).max(1.0),
                tp / (tp + fn_ as f32).max(1.0),
                confusion[i]
            );
        }
        let langs: Vec<String> =
            by_lang.iter().map(|(l, (r, n))| format!("{l} {:.3}", *r as f32 / *n as f32)).collect();
        println!("by language: {}", langs.join(", "));
    }
    if let Some(out) = train_to {
        std::fs::write(out, weights_file(&fit(&examples), &files))?;
        println!("wrote {out} from {} pairs (the figures above are the previous weights)", examples.len());
    }
    Ok(())
}

/// Ridge penalty and steps of the fit (the penalty chosen on the holdout and unseen splits' totals).
const PENALTY: f32 = 3.0;
const STEPS: usize = 3000;
const RATE: f32 = 0.1;

/// Multinomial logistic regression by gradient descent on standardised features, returned in the
/// raw features' scale (the constant's row absorbs the means).
fn fit(examples: &[([f32; FEATURES], usize)]) -> [[f32; 3]; FEATURES] {
    let n = examples.len() as f32;
    let bias = FEATURES - 1;
    let mut mean = [0f32; FEATURES];
    let mut sd = [0f32; FEATURES];
    for (x, _) in examples {
        for i in 0..bias {
            mean[i] += x[i] / n;
        }
    }
    for (x, _) in examples {
        for i in 0..bias {
            sd[i] += (x[i] - mean[i]).powi(2) / n;
        }
    }
    let sd = sd.map(|v| if v > 0.0 { v.sqrt() } else { 1.0 });
    let scaled: Vec<([f32; FEATURES], usize)> = examples
        .iter()
        .map(|(x, y)| {
            let mut s = [1f32; FEATURES];
            for i in 0..bias {
                s[i] = (x[i] - mean[i]) / sd[i];
            }
            (s, *y)
        })
        .collect();
    let mut w = [[0f32; 3]; FEATURES];
    for _ in 0..STEPS {
        let mut grad = [[0f32; 3]; FEATURES];
        for (x, y) in &scaled {
            let p = likelihoods(x, &w);
            for k in 0..3 {
                let err = p[k] - if k == *y { 1.0 } else { 0.0 };
                for i in 0..FEATURES {
                    grad[i][k] += x[i] * err / n;
                }
            }
        }
        for i in 0..FEATURES {
            for k in 0..3 {
                let penalty = if i == bias { 0.0 } else { PENALTY * w[i][k] / n };
                w[i][k] -= RATE * (grad[i][k] + penalty);
            }
        }
    }
    let mut raw = [[0f32; 3]; FEATURES];
    for k in 0..3 {
        raw[bias][k] = w[bias][k];
        for i in 0..bias {
            raw[i][k] = w[i][k] / sd[i];
            raw[bias][k] -= w[i][k] * mean[i] / sd[i];
        }
    }
    raw
}

fn weights_file(w: &[[f32; 3]; FEATURES], files: &[&String]) -> String {
    let rows: Vec<String> = w.iter().map(|r| format!("    [{:?}, {:?}, {:?}],", r[0], r[1], r[2])).collect();
    let sources: Vec<&str> = files.iter().map(|f| f.as_str()).collect();
    format!(
        "//! The write judgement's weighing (update, duplicate, both hold), one row per feature of\n\
         //! `Evidence::features`. Written by `cargo run -p hindsight-dev --example judge_pairs -- --train\n\
         //! guest/engine/src/judge/weights.rs {}`; do not edit by hand.\n\n\
         pub(super) const WEIGHTS: [[f32; 3]; super::weigh::FEATURES] = [\n{}\n];\n",
        sources.join(" "),
        rows.join("\n")
    )
}
