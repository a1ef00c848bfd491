//! The write path's judgement from the command line: `eval --pairs` with and without an LLM, and
//! `unsupersede`.

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

use hindsight_tests::scripted_llm::{Reply, ScriptedLlm};
use hindsight_tests::{cli as hindsight, dev, hindsight_dev_bin, stdout_json};
use serde_json::{json, Value};

/// Pairs the rules judge right, and two they get wrong (a low-overlap update and a paraphrase).
const PAIRS: &[(&str, &str, &str, &str)] = &[
    ("p1", "The office Wi-Fi password is tiger42.", "The office Wi-Fi password is falcon77.", "supersede"),
    ("p2", "We use Jenkins for CI.", "We switched from Jenkins to GitHub Actions for CI.", "supersede"),
    (
        "p3",
        "The Redis cache TTL is 5 minutes.",
        "Cache entries in Redis expire after five minutes.",
        "duplicate",
    ),
    ("p4", "The staging DB listens on port 5433.", "The production DB listens on port 5432.", "keep_both"),
    ("p5", "用户的父亲住在成都。", "用户的母亲也住在成都。", "keep_both"),
    (
        "p6",
        "The marketing site is hosted on Heroku.",
        "Our landing pages are served from AWS ECS after the migration.",
        "supersede",
    ),
    (
        "p7",
        "The service-level objective for the API is 99.9% availability.",
        "The API SLO is three nines of uptime.",
        "duplicate",
    ),
];

fn write_pairs(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("pairs.jsonl");
    let lines: Vec<String> = PAIRS
        .iter()
        .map(|(id, old, new, label)| {
            let lang = if old.chars().any(|c| c > '\u{3000}') { "zh" } else { "en" };
            json!({"id": id, "lang": lang, "old": old, "new": new, "kind": "semantic", "label": label})
                .to_string()
        })
        .collect();
    std::fs::write(&path, lines.join("\n")).unwrap();
    path
}

#[test]
fn eval_pairs_prints_the_documented_figures() {
    let dir = tempfile::tempdir().unwrap();
    let pairs = write_pairs(dir.path());
    let out = dev(&["eval", "--pairs", pairs.to_str().unwrap(), "--json"]);
    let v = stdout_json(&out);
    assert_eq!(v["pairs"], 7);
    for label in ["supersede", "duplicate", "keep_both"] {
        for key in ["precision", "recall", "f1"] {
            assert!(v["per_label"][label][key].is_number(), "{label}.{key}: {v}");
        }
    }
    let errors: Vec<&str> = v["errors"].as_array().unwrap().iter().map(|e| e.as_str().unwrap()).collect();
    assert_eq!(errors, vec!["p6", "p7"], "the rules: {v}");
    assert_eq!(v["confusion"]["supersede"]["supersede"], 2);
    assert!((v["accuracy"].as_f64().unwrap() - 5.0 / 7.0).abs() < 1e-3, "{v}");
}

/// An LLM that knows the labels: the judge's answer for each pair it is shown.
fn oracle() -> ScriptedLlm {
    let labels: HashMap<&str, &str> = PAIRS.iter().map(|(_, _, new, label)| (*new, *label)).collect();
    ScriptedLlm::with(move |request| {
        let prompt = request["messages"][1]["content"].as_str().unwrap_or_default().to_string();
        if request["response_format"]["json_schema"]["name"] == "importance" || prompt.starts_with("Rate how useful") {
            let items = prompt.lines().filter(|l| l.split_once(": ").is_some_and(|(n, _)| n.parse::<u32>().is_ok())).count();
            let scores: Vec<Value> = (0..items).map(|i| json!({"item": i, "importance": 8})).collect();
            return Reply::content(json!({ "scores": scores }).to_string());
        }
        let new = prompt.lines().find_map(|l| l.strip_prefix("New memory 0: ")).unwrap_or_default();
        let candidate = prompt
            .lines()
            .find_map(|l| l.trim().strip_prefix("existing ").and_then(|r| r.split_once(':')).map(|(id, _)| id))
            .unwrap_or_default();
        let verdict = match labels.get(new.trim()).copied() {
            Some("supersede") => "update",
            Some("duplicate") => "duplicate",
            _ => "compatible",
        };
        Reply::content(
            json!({"judgements": [{"item": 0, "candidate": candidate, "verdict": verdict, "reason": "the oracle"}]})
                .to_string(),
        )
    })
    .unwrap()
}

#[test]
fn eval_pairs_uses_the_llm_when_one_is_configured() {
    let dir = tempfile::tempdir().unwrap();
    let pairs = write_pairs(dir.path());
    let llm = oracle();
    let out = Command::new(hindsight_dev_bin())
        .env("HINDSIGHT_LLM_URL", &llm.url)
        .args(["eval", "--pairs", pairs.to_str().unwrap(), "--json"])
        .output()
        .unwrap();
    let v = stdout_json(&out);
    assert_eq!(v["accuracy"], 1.0, "{v}");
    let judge_calls = llm
        .requests()
        .iter()
        .filter(|r| r["messages"][1]["content"].as_str().unwrap_or_default().contains("New memory 0:"))
        .count();
    assert_eq!(judge_calls, PAIRS.len(), "one judge call per retain that has candidates");
    assert_eq!(v["llm_usage"]["judge"]["calls"], PAIRS.len(), "{v}");
}

#[test]
fn a_bad_pairs_file_names_the_line_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.jsonl");
    std::fs::write(
        &path,
        "{\"id\":\"a\",\"old\":\"x y\",\"new\":\"x z\",\"label\":\"keep_both\"}\n{\"id\":\"b\",\"old\":\"x\",\"new\":\"y\",\"label\":\"same\"}\n",
    )
    .unwrap();
    let out = dev(&["eval", "--pairs", path.to_str().unwrap(), "--json"]);
    assert!(!out.status.success());
    let err: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(err["error"]["field"], "label", "{err}");
    assert_eq!(err["error"]["line"], 2, "{err}");
}

#[test]
fn a_wrong_supersede_is_undone_from_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("undo.db");
    let retain = |text: &str| {
        stdout_json(&hindsight(&db, &["retain", "--text", text, "--kind", "semantic", "--json"]))
    };
    let images = retain("The CDN cache TTL for images is 1 day");
    let images = images["id"].as_str().unwrap().to_string();
    let wrong = retain("The CDN cache TTL for images now is 7 days");
    assert_eq!(wrong["action"], "superseded", "{wrong}");
    let video = wrong["id"].as_str().unwrap().to_string();

    let back = stdout_json(&hindsight(&db, &["unsupersede", &images, "--json"]));
    assert_eq!(back["status"], "active");
    assert_eq!(back["conflicts_with"], json!([video]));
    let found = stdout_json(&hindsight(&db, &["recall", "--query", "CDN cache TTL for images", "--json"]));
    let ids: Vec<&str> =
        found["items"].as_array().unwrap().iter().map(|i| i["id"].as_str().unwrap()).collect();
    assert!(ids.contains(&images.as_str()) && ids.contains(&video.as_str()), "{found}");
    let again = hindsight(&db, &["unsupersede", &images]);
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("only a superseded memory"));
}
