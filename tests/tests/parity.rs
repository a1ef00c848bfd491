//! The scenario every host runs (examples/parity): the Node and Python hosts compare their
//! results with `expected.json`, which this test checks against the Rust host.
//! `HINDSIGHT_BLESS=1 cargo test -p hindsight-tests --test suite parity` rewrites it after a
//! deliberate change to scoring.

use std::path::PathBuf;

use hindsight::{types::Named, Kind};
use hindsight_tests::*;
use serde_json::{json, Value};

const TOLERANCE: f64 = 1e-4;

fn parity_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/parity")
}

fn read_json(name: &str) -> Value {
    let path = parity_dir().join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Runs the scenario on a fresh bank: per query, the top items' contents and total scores.
fn run_scenario(scenario: &Value) -> Value {
    let hs = memory();
    let now = scenario["now"].as_i64().unwrap();
    let bank = hs.bank(scenario["bank"].as_str().unwrap()).unwrap().at(now);
    let items: Vec<_> = scenario["memories"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let mut item = item(m["content"].as_str().unwrap());
            item.kind = Some(Kind::parse("kind", m["kind"].as_str().unwrap()).unwrap());
            item.tags =
                m["tags"].as_array().unwrap().iter().map(|t| t.as_str().unwrap().to_string()).collect();
            item.occurred_at = m["occurred_at"].as_i64();
            item
        })
        .collect();
    let outcomes = bank.retain(items).unwrap();
    assert!(outcomes.iter().all(|o| o.id.is_some()), "every scenario memory is stored: {outcomes:?}");
    let queries = scenario["queries"].as_array().unwrap();
    let results: Vec<Value> = queries
        .iter()
        .map(|q| {
            let text = q["query"].as_str().unwrap();
            let k = q["k"].as_u64().unwrap() as u32;
            let top = bank.recall(query(text, k)).unwrap();
            let items: Vec<Value> = top
                .items
                .iter()
                .map(|r| json!({"content": r.memory.content, "total": r.score.total}))
                .collect();
            json!({"query": text, "top": items})
        })
        .collect();
    json!({ "queries": results })
}

#[test]
fn rust_host_matches_the_expected_parity_results() {
    let actual = run_scenario(&read_json("scenario.json"));
    if std::env::var_os("HINDSIGHT_BLESS").is_some() {
        let text = serde_json::to_string_pretty(&actual).unwrap() + "\n";
        std::fs::write(parity_dir().join("expected.json"), text).unwrap();
        return;
    }
    let expected = read_json("expected.json");
    let (want, got) = (expected["queries"].as_array().unwrap(), actual["queries"].as_array().unwrap());
    assert_eq!(want.len(), got.len(), "number of queries");
    for (w, g) in want.iter().zip(got) {
        let (wt, gt) = (w["top"].as_array().unwrap(), g["top"].as_array().unwrap());
        let contents = |items: &[Value]| items.iter().map(|i| i["content"].clone()).collect::<Vec<_>>();
        assert_eq!(
            contents(wt),
            contents(gt),
            "top items for {:?} differ from expected.json (after a deliberate scoring change, rerun with HINDSIGHT_BLESS=1)",
            w["query"]
        );
        for (a, b) in wt.iter().zip(gt) {
            let (a, b) = (a["total"].as_f64().unwrap(), b["total"].as_f64().unwrap());
            assert!((a - b).abs() <= TOLERANCE, "score for {:?}: expected {a}, got {b}", w["query"]);
        }
    }
}
