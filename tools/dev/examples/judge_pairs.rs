//! Development aid: the rules judge over labelled pairs, natively and without a store, so a rule
//! change is measured in seconds. Embeddings are computed once (native tract) and cached by text.
//! `cargo run -p hindsight-dev --example judge_pairs -- PAIRS.jsonl [PAIRS.jsonl …] [-v]`
use std::collections::BTreeMap;
use std::path::Path;

use hindsight::Models;
use hindsight_engine::embed::Embedder;
use hindsight_engine::judge::{judge, Nature, Verdict};
use hindsight_types::{Kind, Named};

const CACHE: &str = "target/tmp/judge-pair-vectors.json";

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let verbose = args.iter().any(|a| a == "-v");
    let files: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
    let mut vecs: BTreeMap<String, Vec<f32>> =
        std::fs::read_to_string(CACHE).ok().and_then(|s| serde_json::from_str(&s).ok()).unwrap_or_default();
    let mut embedder = None;
    let labels = ["supersede", "duplicate", "keep_both"];
    for file in files {
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
            let j = judge(old, new, c, Nature::of(kind));
            let got = match j.verdict {
                Verdict::Update => 0,
                Verdict::Duplicate => 1,
                Verdict::Compatible => 2,
            };
            let want = labels.iter().position(|l| *l == p["label"].as_str().unwrap()).unwrap();
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
    Ok(())
}
