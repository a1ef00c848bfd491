//! Development aid: the rules judge over labelled pairs, with cosines precomputed.
//! `cargo run -p hindsight-dev --example judge_pairs -- PAIRS.jsonl VECTORS.json [-v]`
use std::collections::BTreeMap;

use hindsight_engine::judge::{judge, Nature, Verdict};
use hindsight_types::{Kind, Named};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let pairs = std::fs::read_to_string(&args[1]).unwrap();
    let vecs: BTreeMap<String, Vec<f32>> =
        serde_json::from_str(&std::fs::read_to_string(&args[2]).unwrap()).unwrap();
    let verbose = args.iter().any(|a| a == "-v");
    let labels = ["supersede", "duplicate", "keep_both"];
    let mut confusion = [[0u32; 3]; 3];
    for line in pairs.lines() {
        let p: serde_json::Value = serde_json::from_str(line).unwrap();
        let (old, new) = (p["old"].as_str().unwrap(), p["new"].as_str().unwrap());
        let c: f32 = vecs[old].iter().zip(&vecs[new]).map(|(a, b)| a * b).sum();
        let kind = Kind::parse("kind", p["kind"].as_str().unwrap()).unwrap();
        let j = judge(old, new, c, Nature::of(kind));
        let got = match j.verdict {
            Verdict::Update => 0,
            Verdict::Duplicate => 1,
            Verdict::Compatible => 2,
        };
        let want = labels.iter().position(|l| *l == p["label"].as_str().unwrap()).unwrap();
        confusion[want][got] += 1;
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
    for (i, l) in labels.iter().enumerate() {
        let tp = confusion[i][i] as f32;
        let fp: u32 = (0..3).filter(|&o| o != i).map(|o| confusion[o][i]).sum();
        let fn_: u32 = (0..3).filter(|&o| o != i).map(|o| confusion[i][o]).sum();
        println!(
            "{l:10} P {:.2} R {:.2} {:?}",
            tp / (tp + fp as f32).max(1.0),
            tp / (tp + fn_ as f32).max(1.0),
            confusion[i]
        );
    }
}
