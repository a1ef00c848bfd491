//! The `hindsight` binary as a user runs it: separate processes over one SQLite file.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

fn hindsight(db: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hindsight"))
        .arg("--db")
        .arg(db)
        .args(args)
        .output()
        .expect("hindsight runs")
}

fn stdout_json(out: &Output) -> Value {
    assert!(out.status.success(), "failed: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)))
}

#[test]
fn a_second_process_recalls_what_the_first_retained() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("cli.db");
    let out = hindsight(
        &db,
        &[
            "retain",
            "--text",
            "Use pandas.read_csv(encoding='utf-8-sig') for CSV files with a BOM",
            "--kind",
            "procedural",
            "--tags",
            "csv,encoding",
            "--importance",
            "0.8",
            "--task-type",
            "data-cleaning",
            "--at",
            "2026-01-01T10:00:00Z",
            "--meta",
            "turn=D1:3",
            "--json",
        ],
    );
    let created = stdout_json(&out);
    assert_eq!(created["action"], "created");
    let id = created["id"].as_str().unwrap().to_string();

    let out = hindsight(
        &db,
        &["recall", "--query", "CSV file shows a BOM", "--k", "3", "--now", "2026-01-02", "--json"],
    );
    let v = stdout_json(&out);
    let first = &v["items"][0];
    assert_eq!(first["id"], id.as_str());
    assert_eq!(first["kind"], "procedural");
    assert_eq!(first["metadata"]["turn"], "D1:3");
    assert_eq!(first["occurred_at"], "2026-01-01T10:00:00Z");
    for factor in ["semantic", "lexical", "recency", "confidence", "importance", "total"] {
        assert!(first["score"][factor].is_number(), "score.{factor} missing: {first}");
    }
    assert!(v["prompt"].as_str().unwrap().contains("utf-8-sig"));

    let out = hindsight(&db, &["get", &id, "--json"]);
    assert_eq!(stdout_json(&out)["access_count"], 1);
    let out = hindsight(&db, &["stats", "--json"]);
    assert_eq!(stdout_json(&out)["active"], 1);
}

#[test]
fn a_jsonl_file_with_bad_lines_reports_them_and_stores_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("cli.db");
    let file = dir.path().join("items.jsonl");
    std::fs::write(
        &file,
        [
            r#"{"text":"first good line","kind":"semantic"}"#,
            r#"{"text":"importance too high","importance":7}"#,
            r#"{"text":"unknown kind","kind":"thought"}"#,
            r#"{"text": "malformed json""#,
            r#"{"text":""}"#,
            r#"{"text":"last good line","tags":["a","b"],"meta":{"turn":"D2:1"}}"#,
        ]
        .join("\n"),
    )
    .unwrap();
    let out = hindsight(&db, &["retain", "--file", file.to_str().unwrap(), "--json"]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "partial success exits 2: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<Value> =
        String::from_utf8(out.stdout).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let by_line = |n: u64| {
        lines.iter().find(|v| v["line"] == n).unwrap_or_else(|| panic!("no report for line {n}: {lines:?}"))
    };
    assert_eq!(by_line(1)["action"], "created");
    assert!(by_line(2)["error"].as_str().unwrap().starts_with("importance:"), "{}", by_line(2));
    assert!(by_line(3)["error"].as_str().unwrap().starts_with("kind: unknown value"), "{}", by_line(3));
    assert!(by_line(4)["error"].as_str().unwrap().contains("EOF"), "{}", by_line(4));
    assert!(by_line(5)["error"].as_str().unwrap().starts_with("content:"), "{}", by_line(5));
    assert_eq!(by_line(6)["action"], "created");
    let stats = stdout_json(&hindsight(&db, &["stats", "--json"]));
    assert_eq!(stats["active"], 2);
}

#[test]
fn commands_that_need_the_model_say_how_to_get_it() {
    let dir = tempfile::tempdir().unwrap();
    let out = hindsight(&dir.path().join("x.db"), &["--models", dir.path().to_str().unwrap(), "stats"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("hindsight model fetch"), "{err}");
}

#[test]
fn bad_flags_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("x.db");
    let out = hindsight(&db, &["retain", "--text", "x", "--kind", "thought"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("kind: unknown value"));
    let out = hindsight(&db, &["retain", "--text", "x", "--importance", "7"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("importance: must be a number from 0 to 1"));
    let out = hindsight(&db, &["retain", "--text", ""]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("content: must not be empty"));
    let out = hindsight(&db, &["recall", "--query", "x", "--now", "yesterday"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("now:"));
}
