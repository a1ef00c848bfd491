//! The `hindsight` binary as a user runs it: separate processes over one SQLite file.

use hindsight_tests::{cli as hindsight, stdout_json};
use serde_json::Value;

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
    let error = |n: u64| by_line(n)["error"].clone();
    assert_eq!(error(2)["field"], "importance", "{}", by_line(2));
    assert_eq!(error(2)["line"], 2);
    assert_eq!(error(3)["field"], "kind", "{}", by_line(3));
    assert!(error(3)["message"].as_str().unwrap().contains("unknown value"), "{}", by_line(3));
    assert!(error(4)["message"].as_str().unwrap().contains("EOF"), "{}", by_line(4));
    assert_eq!(error(5)["field"], "content", "{}", by_line(5));
    assert_eq!(by_line(6)["action"], "created");
    let stats = stdout_json(&hindsight(&db, &["stats", "--json"]));
    assert_eq!(stats["active"], 2);
}

#[test]
fn commands_that_need_the_model_say_how_to_get_it() {
    let dir = tempfile::tempdir().unwrap();
    let out = hindsight(
        &dir.path().join("x.db"),
        &["--models", dir.path().to_str().unwrap(), "retain", "--text", "x"],
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("hindsight model fetch"), "{err}");
}

#[test]
fn bad_flags_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("x.db");
    let failed_with = |args: &[&str], needles: &[&str]| {
        let out = hindsight(&db, args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded");
        for needle in needles {
            assert!(err.contains(needle), "{args:?}: {needle:?} not in {err}");
        }
    };
    failed_with(
        &["retain", "--text", "x", "--kind", "thought"],
        &["'thought'", "--kind", "episodic, semantic, procedural"],
    );
    failed_with(
        &["retain", "--text", "x", "--importance", "7"],
        &["importance: must be a number from 0 to 1"],
    );
    failed_with(
        &["retain", "--text", "x", "--confidence", "-0.1"],
        &["confidence: must be a number from 0 to 1, got -0.1"],
    );
    failed_with(&["retain", "--text", ""], &["content: must not be empty"]);
    failed_with(&["retain", "--text", "", "--json"], &[]);
    failed_with(&["recall", "--query", "x", "--now", "yesterday"], &["now:"]);
    let out = hindsight(&db, &["retain", "--text", "x", "--importance", "7", "--json"]);
    let error: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(error["error"]["kind"], "invalid-input", "{error}");
    assert_eq!(error["error"]["field"], "importance", "{error}");
}

#[test]
fn eval_reports_recall_at_k_in_the_documented_json() {
    let dir = tempfile::tempdir().unwrap();
    let turns = dir.path().join("turns.jsonl");
    let questions = dir.path().join("questions.jsonl");
    let turn = |conv: &str, dia: &str, date: &str, speaker: &str, text: &str| {
        serde_json::json!({"conv_id": conv, "dia_id": dia, "session": 1, "session_date": date,
                           "speaker": speaker, "text": text})
        .to_string()
    };
    std::fs::write(
        &turns,
        [
            turn("c1", "D1:1", "2023-05-08T13:56:00", "Ann", "I adopted a grey cat named Pixel yesterday"),
            turn("c1", "D1:2", "2023-05-08T13:56:00", "Bob", "Congrats! I started learning the cello"),
            turn("c1", "D2:1", "2023-06-01T10:00:00", "Ann", "We hiked up Mount Tamalpais this weekend"),
            turn(
                "c2",
                "D1:1",
                "2023-01-02T09:00:00",
                "Cy",
                "My sister moved to Lisbon for a job in robotics",
            ),
            turn("c2", "D1:2", "2023-01-02T09:00:00", "Di", "I am baking sourdough bread every Sunday"),
        ]
        .join("\n"),
    )
    .unwrap();
    let q = |conv: &str, question: &str, category: u32, evidence: &[&str]| {
        serde_json::json!({"conv_id": conv, "qid": "q", "question": question, "answer": null,
                           "category": category, "evidence": evidence})
        .to_string()
    };
    std::fs::write(
        &questions,
        [
            q("c1", "What is the name of Ann's cat?", 4, &["D1:1"]),
            q("c1", "Which instrument is Bob learning?", 4, &["D1:2"]),
            q("c2", "Where did Cy's sister move?", 1, &["D1:1"]),
            q("c2", "What does Di bake?", 5, &["D1:2"]),
            q("c2", "A question without evidence", 5, &[]),
        ]
        .join("\n"),
    )
    .unwrap();
    let eval = |args: &[&str]| {
        std::process::Command::new(hindsight_tests::hindsight_dev_bin())
            .arg("eval")
            .args(args)
            .args(["--k", "1,3", "--json", "--no-cache"])
            .output()
            .unwrap()
    };
    let on_the_turns = ["--turns", turns.to_str().unwrap(), "--questions", questions.to_str().unwrap()];
    let v = stdout_json(&eval(&[&on_the_turns[..], &["--ablate", "all"][..]].concat()));
    assert_eq!(v["questions"], 4, "questions without evidence are not counted: {v}");
    assert_eq!(v["overall"]["1"], 100.0, "{v}");
    assert_eq!(v["overall"]["3"], 100.0, "{v}");
    assert_eq!(v["cat1_4"]["1"], 100.0, "{v}");
    assert_eq!(v["per_category"]["4"]["1"], 100.0, "{v}");
    assert!(v["per_category"]["5"].is_object() && v["seconds"].is_number(), "{v}");
    let per_question = v["per_question"].as_array().unwrap();
    assert_eq!(per_question.len(), 4, "{v}");
    assert!(per_question.iter().all(|q| q["qid"] == "q" && q["recall"]["1"] == 1.0), "{v}");

    // --ablate all: one run per default-on arm, each a full report.
    let mut arms: Vec<&str> = v["ablations"].as_object().unwrap().keys().map(String::as_str).collect();
    arms.sort_unstable();
    assert_eq!(
        arms,
        [
            "addressee_penalty",
            "context_previous",
            "embed_without_names",
            "entity_expansion",
            "gathering_lexical",
            "index_dates",
            "person_prior",
            "question_penalty",
            "sentence_keys"
        ],
        "{v}"
    );
    assert!(v["ablations"]["person_prior"]["per_category"]["4"]["1"].is_number(), "{v}");
    // With --json an error is JSON on stdout too.
    let failed = |out: std::process::Output| {
        assert!(!out.status.success());
        serde_json::from_slice::<Value>(&out.stdout).unwrap()["error"].clone()
    };
    let unknown = failed(eval(&[&on_the_turns[..], &["--ablate", "nonsense"][..]].concat()));
    assert_eq!(unknown["field"], "ablate", "{unknown}");
    assert!(unknown["message"].as_str().unwrap().contains("\"nonsense\" is not an arm"), "{unknown}");

    // --compare: B misses the first question at k = 1, so B lost one question there and won none.
    let mut worse = v.clone();
    worse["per_question"][0]["recall"]["1"] = serde_json::json!(0.0);
    let (a, b) = (dir.path().join("a.json"), dir.path().join("b.json"));
    std::fs::write(&a, v.to_string()).unwrap();
    std::fs::write(&b, worse.to_string()).unwrap();
    let cmp = stdout_json(&eval(&["--compare", a.to_str().unwrap(), b.to_str().unwrap()]));
    let row = |group: &str, k: u64| {
        cmp["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["group"] == group && r["k"] == k)
            .unwrap_or_else(|| panic!("no {group} R@{k} row: {cmp}"))
            .clone()
    };
    let overall = row("overall", 1);
    assert_eq!((overall["a"].as_f64(), overall["b"].as_f64()), (Some(100.0), Some(75.0)), "{cmp}");
    assert_eq!((overall["won"].as_u64(), overall["lost"].as_u64()), (Some(0), Some(1)), "{cmp}");
    assert_eq!(overall["sign_p"], 1.0, "{cmp}");
    assert_eq!(row("overall", 3)["lost"], 0, "{cmp}");
    let not_a_run = failed(eval(&["--compare", a.to_str().unwrap(), turns.to_str().unwrap()]));
    assert_eq!(not_a_run["field"], "compare", "{not_a_run}");
}

#[test]
fn feedback_history_maintain_and_superseded_recall_from_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("cli.db");
    let retain = |text: &str, at: &str| {
        stdout_json(&hindsight(&db, &["retain", "--text", text, "--kind", "semantic", "--at", at, "--json"]))
    };
    let old = retain("The team deploys with Jenkins", "2026-01-01");
    let new = retain("The team now deploys with GitHub Actions instead", "2026-02-01");
    assert_eq!(new["action"], "superseded", "{new}");
    assert_eq!(new["related"], old["id"]);
    let (old_id, new_id) = (old["id"].as_str().unwrap(), new["id"].as_str().unwrap());

    let recall = |extra: &[&str]| {
        let mut args = vec!["recall", "--query", "how does the team deploy", "--now", "2026-02-02", "--json"];
        args.extend_from_slice(extra);
        let v = stdout_json(&hindsight(&db, &args));
        v["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["id"].as_str().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(recall(&[]), vec![new_id.to_string()]);
    assert_eq!(recall(&["--include-superseded"]).len(), 2);

    let history = stdout_json(&hindsight(&db, &["history", old_id, "--json"]));
    let events: Vec<&str> =
        history["entries"].as_array().unwrap().iter().map(|e| e["event"].as_str().unwrap()).collect();
    assert_eq!(events, vec!["created", "created", "superseded"]);

    let fb = stdout_json(&hindsight(
        &db,
        &["feedback", "--ids", new_id, "--outcome", "correction", "--now", "2026-02-03", "--json"],
    ));
    assert_eq!(fb["memories"][0]["confidence"], 0.35);
    let bad = hindsight(&db, &["feedback", "--ids", new_id, "--outcome", "great"]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("possible values: success, failure, correction"));

    let report =
        stdout_json(&hindsight(&db, &["maintain", "--now", "2027-12-01", "--allow-future", "--json"]));
    assert_eq!(report["archived"], 1, "{report}");
    assert_eq!(report["steps"][0]["id"], new_id);
    assert!(report["seconds"].is_number());
}

#[test]
fn a_task_from_the_command_line_ends_in_rule_based_memories_without_an_llm() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("cli.db");
    let begun = stdout_json(&hindsight(
        &db,
        &["task", "begin", "--goal", "rotate the API keys", "--task-type", "ops", "--json"],
    ));
    let id = begun["id"].as_str().unwrap().to_string();
    let step = |args: &[&str]| {
        let mut all = vec!["task", "step", id.as_str()];
        all.extend_from_slice(args);
        all.push("--json");
        stdout_json(&hindsight(&db, &all))
    };
    let call =
        ["--type", "tool-call", "--text", "vault rotate payments", "--tool", "vault", "--step-id", "c1"];
    step(&call);
    let twice = step(&call);
    assert_eq!(twice["steps"].as_array().unwrap().len(), 1, "the same step id twice is one step");
    step(&[
        "--type",
        "tool-result",
        "--text",
        "permission denied: policy rotate-keys missing",
        "--tool",
        "vault",
        "--error",
    ]);
    step(&["--type", "user-message", "--text", "remember this: payments keys rotate through the ops role"]);
    let fact = stdout_json(&hindsight(
        &db,
        &["task", "fact", &id, "--text", "the ops role may rotate keys", "--json"],
    ));
    let version = fact["version"].as_u64().unwrap().to_string();
    let stale = hindsight(&db, &["task", "note", &id, "--text", "x", "--expect-version", "1"]);
    assert!(!stale.status.success());
    assert!(String::from_utf8_lossy(&stale.stderr).contains("the update was made against 1"));
    stdout_json(&hindsight(
        &db,
        &["task", "note", &id, "--text", "x", "--expect-version", &version, "--json"],
    ));

    let end = stdout_json(&hindsight(
        &db,
        &["task", "end", &id, "--outcome", "failure", "--detail", "no permission", "--json"],
    ));
    assert_eq!(end["method"], "rules", "{end}");
    let items = end["items"].as_array().unwrap();
    assert!(items.iter().any(|i| i["content"].as_str().unwrap().contains("permission denied")), "{end}");
    // The user's "remember this" restates the confirmed fact: kept, merged into it at most.
    assert!(items.iter().all(|i| matches!(i["action"].as_str(), Some("created" | "merged"))), "{end}");
    let shown = stdout_json(&hindsight(&db, &["task", "show", &id, "--json"]));
    assert_eq!(shown["outcome"], "failure");
    let listed = stdout_json(&hindsight(&db, &["task", "list", "--all", "--json"]));
    assert_eq!(listed["tasks"].as_array().unwrap().len(), 1);
    let consolidate = hindsight(&db, &["consolidate"]);
    assert!(String::from_utf8_lossy(&consolidate.stderr).contains("needs a language model"));
    let stats = stdout_json(&hindsight(&db, &["stats", "--json"]));
    assert!(stats["llm_usage"].is_object());
}

#[test]
fn share_copies_into_a_shared_bank_and_recall_searches_several_banks_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("spaces.db");
    let retain = |bank: &str, text: &str| {
        let out = hindsight(&db, &["--bank", bank, "retain", "--text", text, "--json"]);
        stdout_json(&out)["id"].as_str().unwrap().to_string()
    };
    retain("agent:coder", "Lunch orders go through the office chat");
    let original =
        retain("agent:support", "Vendor model X-200 fails its firmware update over Wi-Fi; use USB");
    let shared = stdout_json(&hindsight(
        &db,
        &["--bank", "agent:support", "share", &original, "--to", "shared", "--json"],
    ));
    assert_eq!(shared["action"], "created");
    let copy =
        stdout_json(&hindsight(&db, &["--bank", "shared", "get", shared["id"].as_str().unwrap(), "--json"]));
    assert_eq!(copy["metadata"]["shared_from"], format!("agent:support/{original}"));

    let v = stdout_json(&hindsight(
        &db,
        &[
            "recall",
            "--banks",
            "agent:coder,shared",
            "--query",
            "firmware update fails",
            "--k",
            "2",
            "--json",
        ],
    ));
    let banks: Vec<&str> =
        v["items"].as_array().unwrap().iter().map(|i| i["bank"].as_str().unwrap()).collect();
    assert_eq!(banks, ["shared", "agent:coder"]);
    assert!(v["prompt"].as_str().unwrap().contains("shared, from shared]"), "{v}");
}
