//! Seeing, correcting and moving a bank through the `hindsight` binary: list, correct, the
//! recall log's feedback loop (recall --task, cited answers, feedback --used), explain, audit,
//! export → import, and reembed with a second model.

use std::path::Path;

use hindsight_tests::{cli as hindsight, stdout_json, UNRELATED};
use serde_json::Value;

fn retain(db: &Path, text: &str) -> String {
    let v =
        stdout_json(&hindsight(db, &["retain", "--text", text, "--kind", "semantic", "--force", "--json"]));
    v["id"].as_str().unwrap().to_string()
}

fn ids(v: &Value) -> Vec<String> {
    v["items"].as_array().unwrap().iter().map(|i| i["id"].as_str().unwrap().to_string()).collect()
}

#[test]
fn a_correction_through_the_cli_supersedes_lists_and_explains() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("panel.db");
    let wrong = retain(&db, "The staging database listens on port 5433");
    let near = retain(&db, "The staging database port is 5433 for every service");
    for text in UNRELATED {
        retain(&db, text);
    }
    let listed = stdout_json(&hindsight(&db, &["list", "--limit", "3", "--json"]));
    assert_eq!(listed["total"], 7);
    assert_eq!(ids(&listed).len(), 3);
    let cursor = listed["next_cursor"].as_str().unwrap().to_string();
    let rest = stdout_json(&hindsight(&db, &["list", "--limit", "10", "--cursor", &cursor, "--json"]));
    assert_eq!(ids(&rest).len(), 4);
    assert!(rest["next_cursor"].is_null());
    let chinese = stdout_json(&hindsight(&db, &["list", "--text", "周报", "--json"]));
    assert_eq!(chinese["total"], 1);

    let c = stdout_json(&hindsight(
        &db,
        &["correct", &wrong, "--text", "The staging database listens on port 6543", "--json"],
    ));
    let fixed = c["memory"]["id"].as_str().unwrap().to_string();
    assert_eq!(c["superseded"], wrong.as_str());
    assert_eq!(c["memory"]["source"], "user-feedback");
    assert_eq!(c["memory"]["confidence"], 0.95);
    let cascade: Vec<&str> =
        c["cascade"].as_array().unwrap().iter().map(|x| x["id"].as_str().unwrap()).collect();
    assert_eq!(cascade, vec![near.as_str()]);

    let old = stdout_json(&hindsight(&db, &["get", &wrong, "--json"]));
    assert_eq!(old["status"], "superseded");
    assert_eq!(old["superseded_by"], fixed.as_str());
    let recalled = stdout_json(&hindsight(&db, &["recall", "--query", "staging database port", "--json"]));
    assert!(!ids(&recalled).contains(&wrong), "the corrected memory is gone from recall");
    assert_eq!(ids(&recalled)[0], fixed);
    let superseded = stdout_json(&hindsight(&db, &["list", "--status", "superseded", "--json"]));
    assert_eq!(ids(&superseded), vec![wrong.clone()]);

    let x = stdout_json(&hindsight(&db, &["explain", &fixed, "--json"]));
    assert_eq!(x["provenance"]["source"], "user-feedback");
    assert_eq!(x["provenance"]["supersedes"][0], wrong.as_str());
    assert_eq!(x["counts"]["recalled"], 1);
    assert_eq!(x["recalls"][0]["query"], "staging database port");
    assert_eq!(x["recalls"][0]["rank"], 1);
    let bad = hindsight(&db, &["list", "--status", "gone", "--json"]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stdout).contains("status"));
}

#[test]
fn a_cited_answer_feeds_the_tasks_outcome_back_and_the_audit_sees_it() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("loop.db");
    let useful = retain(&db, "Read the vendor CSV export with encoding utf-8-sig");
    let noise = retain(&db, "The vendor CSV export arrives every Monday at 6am");
    for text in UNRELATED {
        retain(&db, text);
    }
    let task = stdout_json(&hindsight(&db, &["task", "begin", "--goal", "clean the vendor CSV", "--json"]));
    let task = task["id"].as_str().unwrap().to_string();
    let r = stdout_json(&hindsight(
        &db,
        &["recall", "--query", "vendor CSV export encoding", "--k", "2", "--task", &task, "--json"],
    ));
    let handle = r["items"].as_array().unwrap().iter().find(|i| i["id"] == useful.as_str()).unwrap()
        ["handle"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(r["prompt"].as_str().unwrap().contains(&format!("[{handle}]")));
    let answer = format!("Decoded the file with utf-8-sig [{handle}].");
    stdout_json(&hindsight(&db, &["task", "step", &task, "--type", "answer", "--text", &answer, "--json"]));
    let end = stdout_json(&hindsight(&db, &["task", "end", &task, "--outcome", "success", "--json"]));
    assert_eq!(end["cited"], serde_json::json!([useful]));
    assert_eq!(end["unused"], serde_json::json!([noise]));
    let m = stdout_json(&hindsight(&db, &["explain", &useful, "--json"]));
    assert_eq!(m["counts"]["cited"], 1);
    assert_eq!(m["counts"]["helpful"], 1);
    assert_eq!(m["feedback"][0]["event"], "cited");

    for _ in 0..5 {
        stdout_json(&hindsight(
            &db,
            &["recall", "--query", "vendor CSV export Monday", "--k", "1", "--json"],
        ));
    }
    let audit = stdout_json(&hindsight(&db, &["audit", "--json"]));
    let never_useful: Vec<&str> =
        audit["never_useful"].as_array().unwrap().iter().map(|i| i["id"].as_str().unwrap()).collect();
    assert_eq!(never_useful, vec![noise.as_str()]);
    assert_eq!(audit["most_useful"][0]["id"], useful.as_str());
    stdout_json(&hindsight(&db, &["feedback", "--used", &noise, "--json"]));
    let audit = stdout_json(&hindsight(&db, &["audit", "--json"]));
    assert!(audit["never_useful"].as_array().unwrap().is_empty(), "reported use counts: {audit}");
}

#[test]
fn export_then_import_into_an_empty_store_recalls_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("from.db");
    let wrong = retain(&db, "The nightly backup runs at 01:00 UTC");
    let erased = retain(&db, "The admin codename is hunter2-secret");
    for text in UNRELATED {
        retain(&db, text);
    }
    stdout_json(&hindsight(
        &db,
        &["correct", &wrong, "--text", "The nightly backup runs at 03:00 UTC", "--json"],
    ));
    stdout_json(&hindsight(&db, &["forget", &erased, "--hard", "--json"]));
    stdout_json(&hindsight(&db, &["recall", "--query", "backup schedule", "--json"]));

    let out = hindsight(&db, &["export", "--vectors"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(!text.contains("hunter2"), "a hard-forgotten memory is not exported");
    let header: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(header["hindsight_export"], 1);
    assert!(header["embedding_model"].as_str().unwrap().starts_with("onnx-"));
    let file = dir.path().join("bank.jsonl");
    std::fs::write(&file, &text).unwrap();

    let copy = dir.path().join("to.db");
    let report = stdout_json(&hindsight(&copy, &["import", "--file", file.to_str().unwrap(), "--json"]));
    assert_eq!(report["memories"], 7);
    assert_eq!(report["embedded"], 0);
    assert_eq!(report["log_entries"], 1);
    let query = ["recall", "--query", "when does the backup run", "--now", "2026-12-01", "--json"];
    let scores = |v: &Value| -> Vec<(String, String)> {
        v["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| (i["id"].as_str().unwrap().to_string(), i["score"]["total"].to_string()))
            .collect()
    };
    let (a, b) = (stdout_json(&hindsight(&db, &query)), stdout_json(&hindsight(&copy, &query)));
    assert_eq!(scores(&a), scores(&b));
    for args in [["history", &wrong, "--json"], ["get", &wrong, "--json"]] {
        let (mut a, mut b) = (stdout_json(&hindsight(&db, &args)), stdout_json(&hindsight(&copy, &args)));
        for v in [&mut a, &mut b] {
            if let Some(m) = v.as_object_mut() {
                m.remove("last_accessed_at");
            }
        }
        assert_eq!(a, b, "{args:?}");
    }
    let stats = |db: &Path| {
        let mut v = stdout_json(&hindsight(db, &["stats", "--json"]));
        // What each operation cost is the bank's history, not its contents: not exported.
        for k in ["sequence", "llm_usage", "usage"] {
            v.as_object_mut().unwrap().remove(k);
        }
        v
    };
    assert_eq!(stats(&db), stats(&copy));

    // Into a bank that holds memories: refused, nothing lost.
    let again = hindsight(&copy, &["import", "--file", file.to_str().unwrap(), "--json"]);
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stdout).contains("empty bank"));
    assert_eq!(stdout_json(&hindsight(&copy, &["stats", "--json"]))["total"], 7);
}

/// Needs the second model: `./dev test` fetches it (`model fetch --name minilm-l3`) and names its
/// directory in HINDSIGHT_TEST_MODELS_L3.
#[test]
fn reembed_moves_a_bank_to_another_model() {
    let Ok(l3) = std::env::var("HINDSIGHT_TEST_MODELS_L3") else {
        hindsight_tests::skip(
            "HINDSIGHT_TEST_MODELS_L3 names no directory with the second model (./dev test sets it)",
        );
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("reembed.db");
    let csv = retain(&db, "Read the vendor CSV export with encoding utf-8-sig");
    for text in UNRELATED {
        retain(&db, text);
    }
    let before = stdout_json(&hindsight(&db, &["stats", "--json"]));
    let done = stdout_json(&hindsight(&db, &["reembed", "--models", &l3, "--json"]));
    assert_eq!(done["memories"], 6);
    assert_ne!(done["embedding_model"], before["embedding_model"]);
    // The default model no longer opens the bank; the new one recalls from it.
    let old = hindsight(&db, &["recall", "--query", "csv encoding", "--json"]);
    assert!(!old.status.success());
    let new = stdout_json(&hindsight(
        &db,
        &["--models", &l3, "recall", "--query", "garbled characters in a CSV file", "--json"],
    ));
    assert_eq!(ids(&new)[0], csv);
    let after = stdout_json(&hindsight(&db, &["--models", &l3, "stats", "--json"]));
    assert_eq!(after["embedding_model"], done["embedding_model"]);
    assert_eq!(after["total"], before["total"]);
}
