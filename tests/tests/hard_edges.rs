//! Regression tests for the 0.1 hard-edges report, through the `hindsight` binary: each test is
//! named after the finding it covers (`finding_NN_…`). The engine-level ones are in
//! guest/engine/src/bank/edges_tests.rs and the MCP ones in tests/mcp/test_hard_edges.py.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use hindsight_tests::scripted_llm::{Reply, ScriptedLlm};
use hindsight_tests::{cli as hindsight, hindsight_bin, stdout_json};
use serde_json::Value;

const SECRET: &str = "PLATYPUS-9981";

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `hindsight --db DB ARGS…` with extra environment variables.
fn hindsight_env(db: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(hindsight_bin());
    cmd.arg("--db").arg(db).args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("hindsight runs")
}

/// Which of the database, its -wal and its -shm contain `needle`.
fn files_holding(db: &Path, needle: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for suffix in ["", "-wal", "-shm"] {
        let path = PathBuf::from(format!("{}{suffix}", db.display()));
        if let Ok(bytes) = std::fs::read(&path) {
            if bytes.windows(needle.len()).any(|w| w == needle.as_bytes()) {
                found.push(path);
            }
        }
    }
    found
}

fn retain_json(db: &Path, text: &str, extra: &[&str]) -> Value {
    let mut args = vec!["retain", "--text", text, "--json"];
    args.extend_from_slice(extra);
    stdout_json(&hindsight(db, &args))
}

#[test]
fn finding_03_hard_forget_leaves_no_byte_in_the_database_wal_or_shm_while_another_connection_is_open() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("wal.db");
    let id = retain_json(&db, &format!("The staging database codename is {SECRET}"), &["--force"])["id"]
        .as_str()
        .unwrap()
        .to_string();
    retain_json(&db, "The user prefers tabs over spaces in Makefiles", &["--force"]);
    // Another process's connection (as an MCP server would hold), idle between its transactions.
    let other = rusqlite::Connection::open(&db).unwrap();
    let _: i64 = other.query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0)).unwrap();
    assert!(!files_holding(&db, SECRET).is_empty(), "the secret must be on disk before the forget");

    stdout_json(&hindsight(&db, &["forget", &id, "--hard", "--json"]));
    assert_eq!(files_holding(&db, SECRET), Vec::<PathBuf>::new());
    drop(other);
    assert_eq!(files_holding(&db, SECRET), Vec::<PathBuf>::new());
}

#[test]
fn finding_04_hard_forget_scrubs_the_task_record_and_task_delete_erases_it() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("task.db");
    let task =
        stdout_json(&hindsight(&db, &["task", "begin", "--goal", "Set up the guest network", "--json"]));
    let task = task["id"].as_str().unwrap().to_string();
    let fact = format!("The guest wifi network name is {SECRET}");
    stdout_json(&hindsight(&db, &["task", "fact", &task, "--text", &fact, "--json"]));
    let ended =
        stdout_json(&hindsight(&db, &["task", "end", &task, "--outcome", "success", "--force", "--json"]));
    let kept: Vec<&Value> = ended["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["content"].as_str().unwrap().contains(SECRET))
        .collect();
    assert_eq!(kept.len(), 1, "{ended}");
    let id = kept[0]["id"].as_str().unwrap();

    stdout_json(&hindsight(&db, &["forget", id, "--hard", "--json"]));
    let shown = hindsight(&db, &["task", "show", &task]);
    let shown = String::from_utf8(shown.stdout).unwrap();
    assert!(!shown.contains(SECRET) && shown.contains("[erased"), "{shown}");
    assert_eq!(files_holding(&db, SECRET), Vec::<PathBuf>::new());

    // A task's record can be erased whole, and then it is gone.
    let other =
        stdout_json(&hindsight(&db, &["task", "begin", "--goal", &format!("Rotate {SECRET}"), "--json"]));
    let other = other["id"].as_str().unwrap();
    let refused = hindsight(&db, &["task", "delete", other]);
    assert!(!refused.status.success() && stderr(&refused).contains("--hard"), "{}", stderr(&refused));
    stdout_json(&hindsight(&db, &["task", "delete", other, "--hard", "--json"]));
    assert!(!hindsight(&db, &["task", "show", other]).status.success());
    assert_eq!(files_holding(&db, SECRET), Vec::<PathBuf>::new());
}

#[test]
fn finding_07_maintain_refuses_a_far_future_now_and_dry_run_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("maintain.db");
    let id = retain_json(&db, "Run the ETL job after the nightly backup finishes", &[])["id"]
        .as_str()
        .unwrap()
        .to_string();
    let before = stdout_json(&hindsight(&db, &["get", &id, "--json"]));

    let refused = hindsight(&db, &["maintain", "--now", "2062-01-01T00:00:00Z"]);
    assert!(!refused.status.success());
    assert!(stderr(&refused).contains("--allow-future"), "{}", stderr(&refused));

    // A dry run changes nothing, so it needs no --allow-future.
    let dry =
        stdout_json(&hindsight(&db, &["maintain", "--now", "2062-01-01T00:00:00Z", "--dry-run", "--json"]));
    assert_eq!(dry["dry_run"], true);
    assert!(dry["archived"].as_u64().unwrap() >= 1, "{dry}");
    let after = stdout_json(&hindsight(&db, &["get", &id, "--json"]));
    assert_eq!(after["status"], "active");
    assert_eq!(after["confidence"], before["confidence"]);

    // Done for real and undone: the confidence comes back with the status.
    stdout_json(&hindsight(&db, &["maintain", "--now", "2062-01-01T00:00:00Z", "--allow-future", "--json"]));
    assert_eq!(stdout_json(&hindsight(&db, &["get", &id, "--json"]))["status"], "archived");
    let restored = stdout_json(&hindsight(&db, &["restore", &id, "--json"]));
    assert_eq!(restored["status"], "active");
    assert_eq!(restored["confidence"], before["confidence"]);
}

#[test]
fn finding_08_recall_in_the_future_does_not_move_access_times_past_the_wall_clock() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("access.db");
    let id = retain_json(&db, "The billing API rate limit is 100 requests per minute", &[])["id"]
        .as_str()
        .unwrap()
        .to_string();
    stdout_json(&hindsight(
        &db,
        &["recall", "--query", "billing API rate limit", "--now", "9999-01-01", "--json"],
    ));
    let m = stdout_json(&hindsight(&db, &["get", &id, "--json"]));
    let last = m["last_accessed_at"].as_str().unwrap();
    assert!(last < "2100", "last_accessed_at {last} is past the wall clock");
}

#[test]
fn finding_09_output_into_a_closed_pipe_ends_quietly() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("pipe.db");
    let lines: String = (0..300)
        .map(|i| format!("{{\"text\":\"CSV export number {i} needs the utf-8-sig encoding and a header row\",\"force\":true}}\n"))
        .collect();
    let file = dir.path().join("many.jsonl");
    std::fs::write(&file, lines).unwrap();
    assert!(hindsight(&db, &["retain", "--file", file.to_str().unwrap(), "--json"]).status.success());

    for args in [
        &["recall", "--query", "csv", "--k", "1000", "--json"][..],
        &["task", "list", "--all", "--json"][..],
        &["maintain", "--dry-run", "--json"][..],
    ] {
        let mut child = Command::new(hindsight_bin())
            .arg("--db")
            .arg(&db)
            .args(args)
            .env("RUST_BACKTRACE", "1")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // The reader goes away before anything is written, like `| head -c 0`.
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        let err = stderr(&out);
        assert!(!err.contains("panicked") && !err.contains("Broken pipe"), "{args:?}: {err}");
        #[cfg(unix)]
        {
            use std::os::unix::process::ExitStatusExt;
            let quiet = out.status.code() == Some(0) || out.status.signal() == Some(libc_sigpipe());
            assert!(quiet, "{args:?}: {:?}", out.status);
        }
    }
}

#[cfg(unix)]
fn libc_sigpipe() -> i32 {
    13
}

/// A task with a fact the rules keep, ended by a failing LLM.
fn task_with_fact(db: &Path) -> String {
    let task = stdout_json(&hindsight(db, &["task", "begin", "--goal", "Import the vendor CSV", "--json"]));
    let task = task["id"].as_str().unwrap().to_string();
    stdout_json(&hindsight(
        db,
        &["task", "fact", &task, "--text", "The vendor CSV export is UTF-16 encoded", "--json"],
    ));
    task
}

/// `task end --force` with the LLM at `llm` and HINDSIGHT_LLM_RETRIES=0.
fn end_with_one_try(db: &Path, llm: &ScriptedLlm, task: &str) -> Output {
    hindsight_env(
        db,
        &["--llm-url", &llm.url, "task", "end", task, "--outcome", "success", "--force", "--json"],
        &[("HINDSIGHT_LLM_RETRIES", "0")],
    )
}

/// An LLM server that answers after 20 s.
fn hanging_llm() -> ScriptedLlm {
    ScriptedLlm::with(|_| {
        std::thread::sleep(Duration::from_secs(20));
        Reply::content("{}")
    })
    .unwrap()
}

#[test]
fn finding_11_a_task_whose_distillation_failed_can_be_distilled_again() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("distill.db");
    let llm = ScriptedLlm::start(vec![]).unwrap();
    let task = task_with_fact(&db);
    let failed = end_with_one_try(&db, &llm, &task);
    assert!(!failed.status.success() || String::from_utf8_lossy(&failed.stdout).contains("failed"));
    let again = stdout_json(&hindsight(&db, &["task", "distill", &task, "--rules", "--json"]));
    assert_eq!(again["method"], "rules", "{again}");
    assert!(again["items"]
        .as_array()
        .unwrap()
        .iter()
        .any(|i| i["content"].as_str().unwrap().contains("UTF-16")));
    let twice = hindsight(&db, &["task", "distill", &task, "--rules"]);
    assert!(!twice.status.success() && stderr(&twice).contains("already"), "{}", stderr(&twice));
}

#[test]
fn finding_12_llm_url_flag_honours_the_other_llm_variables() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("llm.db");
    let llm = ScriptedLlm::start(vec![]).unwrap();
    let task = task_with_fact(&db);
    end_with_one_try(&db, &llm, &task);
    let distill_calls = llm.requests().len();
    assert_eq!(distill_calls, 1, "HINDSIGHT_LLM_RETRIES=0 means one request, got {distill_calls}");

    let bogus =
        hindsight_env(&db, &["--llm-url", &llm.url, "stats"], &[("HINDSIGHT_LLM_JSON_MODE", "bogus")]);
    assert!(!bogus.status.success());
    assert!(stderr(&bogus).contains("HINDSIGHT_LLM_JSON_MODE"), "{}", stderr(&bogus));
}

#[test]
fn finding_13_retried_steps_without_an_id_are_separate_and_with_one_are_recorded_once() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("steps.db");
    let task = stdout_json(&hindsight(&db, &["task", "begin", "--goal", "Call the flaky API", "--json"]));
    let task = task["id"].as_str().unwrap().to_string();
    for _ in 0..3 {
        let step = ["task", "step", &task, "--type", "tool-call", "--tool", "http", "--text", "GET /orders"];
        stdout_json(&hindsight(&db, &[&step[..], &["--json"]].concat()));
    }
    for _ in 0..2 {
        let step =
            ["task", "step", &task, "--type", "tool-result", "--text", "503", "--step-id", "r1", "--json"];
        stdout_json(&hindsight(&db, &step));
    }
    let shown = stdout_json(&hindsight(&db, &["task", "show", &task, "--json"]));
    assert_eq!(shown["steps"].as_array().unwrap().len(), 4, "{shown}");
}

#[test]
fn finding_14_an_invalid_utf8_line_is_reported_by_number_and_the_rest_goes_in() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("utf8.db");
    let file = dir.path().join("u.jsonl");
    std::fs::write(
        &file,
        b"{\"text\":\"ok one about csv\"}\n{\"text\":\"bad \xff\"}\n{\"text\":\"ok two about json\"}\n",
    )
    .unwrap();
    let out = hindsight(&db, &["retain", "--file", file.to_str().unwrap(), "--json"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let reports: Vec<Value> =
        String::from_utf8(out.stdout).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let bad = reports.iter().find(|r| r["line"] == 2).expect("line 2 is reported");
    assert!(bad["error"]["message"].as_str().unwrap().contains("UTF-8"), "{bad}");
    assert_eq!(stdout_json(&hindsight(&db, &["stats", "--json"]))["active"], 2);
}

#[test]
fn finding_15_the_deadline_bounds_llm_calls() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("deadline.db");
    let llm = hanging_llm();
    let task = task_with_fact(&db);
    let started = Instant::now();
    let out = hindsight(
        &db,
        &[
            "--llm-url",
            &llm.url,
            "--deadline-ms",
            "3000",
            "task",
            "end",
            &task,
            "--outcome",
            "success",
            "--force",
        ],
    );
    let took = started.elapsed();
    assert!(took < Duration::from_secs(12), "the call took {took:?} with a 3 s deadline");
    assert!(!out.status.success());
    assert!(stderr(&out).contains("deadline"), "{}", stderr(&out));
    // Nothing was lost: the task can still be distilled.
    stdout_json(&hindsight(&db, &["task", "distill", &task, "--rules", "--json"]));
}

#[test]
fn finding_17_a_hanging_llm_costs_a_retain_one_timeout_and_the_reason_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("hang.db");
    let llm = hanging_llm();
    let started = Instant::now();
    let out = hindsight_env(
        &db,
        &["--llm-url", &llm.url, "retain", "--text", "Builds run on the big runner at night", "--json"],
        &[("HINDSIGHT_LLM_TIMEOUT_MS", "1500")],
    );
    let took = started.elapsed();
    let outcome = stdout_json(&out);
    assert_eq!(outcome["action"], "created");
    assert!(took < Duration::from_secs(10), "{took:?}");
    assert!(outcome["reason"].as_str().unwrap().contains("timeout of 1500 ms"), "{outcome}");
}

#[test]
fn finding_17_a_retain_asks_the_optional_importance_question_once() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("importance.db");
    let llm = ScriptedLlm::start(vec![]).unwrap();
    let out = hindsight(
        &db,
        &[
            "--llm-url",
            &llm.url,
            "retain",
            "--text",
            "Deploys go out on Tuesdays after the change review",
            "--json",
        ],
    );
    assert_eq!(stdout_json(&out)["action"], "created");
    assert!(llm.requests().len() <= 1, "{} requests for one optional answer", llm.requests().len());
}

#[test]
fn finding_18_a_file_import_is_not_a_conversation_unless_asked() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("seq.db");
    let file = dir.path().join("big.jsonl");
    std::fs::write(
        &file,
        "{\"text\":\"The redis cache is flushed every night at 2am\"}\n\
         {\"text\":\"nginx client_max_body_size must be 50m for the upload endpoint\"}\n",
    )
    .unwrap();
    assert!(hindsight(&db, &["retain", "--file", file.to_str().unwrap()]).status.success());
    let found = stdout_json(&hindsight(&db, &["recall", "--query", "redis", "--k", "2", "--json"]));
    for item in found["items"].as_array().unwrap() {
        if item["content"].as_str().unwrap().contains("nginx") {
            assert_eq!(item["score"]["lexical"], 0.0, "{item}");
        }
    }
}

#[test]
fn finding_20_task_steps_are_capped_by_count_and_size() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("caps.db");
    let settings = dir.path().join("settings.json");
    std::fs::write(&settings, r#"{"tasks": {"max_steps": 3}}"#).unwrap();
    let s = settings.to_str().unwrap();
    let task = stdout_json(&hindsight(&db, &["--settings", s, "task", "begin", "--goal", "g", "--json"]));
    let task = task["id"].as_str().unwrap().to_string();
    for i in 0..3 {
        let text = format!("step {i}");
        stdout_json(&hindsight(
            &db,
            &["--settings", s, "task", "step", &task, "--type", "thought", "--text", &text, "--json"],
        ));
    }
    let over =
        hindsight(&db, &["--settings", s, "task", "step", &task, "--type", "thought", "--text", "one more"]);
    assert!(!over.status.success() && stderr(&over).contains("max_steps"), "{}", stderr(&over));
    let big = "x".repeat(40_000);
    let over = hindsight(&db, &["task", "step", &task, "--type", "thought", "--text", &big]);
    assert!(!over.status.success() && stderr(&over).contains("bytes"), "{}", stderr(&over));
    let shown = stdout_json(&hindsight(&db, &["task", "show", &task, "--json"]));
    assert_eq!(shown["steps"].as_array().unwrap().len(), 3);
}

#[test]
fn finding_21_workers_are_capped() {
    let dir = tempfile::tempdir().unwrap();
    let out = hindsight(&dir.path().join("w.db"), &["mcp", "--workers", "64"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("workers"), "{}", stderr(&out));
}

#[test]
fn finding_23_read_commands_do_not_create_a_database_and_banks_lists_the_banks() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("missing.db");
    for args in [&["stats"][..], &["recall", "--query", "x"][..], &["banks"][..], &["task", "list"][..]] {
        let out = hindsight(&db, args);
        assert!(!out.status.success(), "{args:?}");
        assert!(stderr(&out).contains("no database at"), "{args:?}: {}", stderr(&out));
        assert!(!db.exists(), "{args:?} created the database");
    }
    retain_json(&db, "The user wants metric units", &["--force"]);
    stdout_json(&hindsight(
        &db,
        &["--bank", "ops", "retain", "--text", "Deploys need a change ticket", "--json"],
    ));
    let banks = stdout_json(&hindsight(&db, &["banks", "--json"]));
    assert_eq!(banks["banks"], serde_json::json!(["default", "ops"]));
    // A recall in a bank that does not exist says so, and names the ones that do.
    let out = hindsight(&db, &["--bank", "opps", "recall", "--query", "change ticket"]);
    assert!(out.status.success());
    assert!(stderr(&out).contains("default, ops"), "{}", stderr(&out));
}

#[test]
fn finding_24_control_and_bidi_characters_are_escaped_in_text_output() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("esc.db");
    let text = "\u{1b}[31m red \u{7} about terminal colours \u{202e}reversed";
    let id = retain_json(&db, text, &["--force"])["id"].as_str().unwrap().to_string();
    for args in [&["recall", "--query", "terminal colours"][..], &["get", &id][..]] {
        let out = hindsight(&db, args);
        let shown = String::from_utf8(out.stdout).unwrap();
        assert!(shown.contains("terminal colours"), "{args:?}: {shown}");
        for raw in ['\u{1b}', '\u{7}', '\u{202e}'] {
            assert!(!shown.contains(raw), "{args:?} printed {raw:?} raw: {shown:?}");
        }
    }
    // JSON output keeps the exact text (escaped by JSON itself).
    let json = stdout_json(&hindsight(&db, &["get", &id, "--json"]));
    assert_eq!(json["content"], text);
}

#[test]
fn finding_25_a_read_only_database_opens_for_reading() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("ro.db");
    retain_json(&db, "The read-only replica lags by up to a minute", &["--force"]);
    // Run as an unprivileged user (root ignores permissions); skip where that is not possible.
    let nobody = |args: &[&str], env: &[(&str, &Path)]| {
        let mut cmd = Command::new("runuser");
        cmd.args(["-u", "nobody", "--"]).arg(hindsight_bin()).args(args);
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.output()
    };
    let usable = matches!(nobody(&["--version"], &[]), Ok(o) if o.status.success());
    if !usable {
        hindsight_tests::skip("cannot run hindsight as the user nobody here");
        return;
    }
    // nobody may read the database and the model but write neither (root owns them, mode 0755/0644),
    // and needs a cache of its own for the compiled component.
    let cache = dir.path().join("cache");
    let models = dir.path().join("models");
    std::fs::create_dir_all(cache.join("hindsight/components")).unwrap();
    std::fs::create_dir_all(&models).unwrap();
    let home_models = hindsight::Models::default_dir();
    for f in ["model.onnx", "tokenizer.json"] {
        std::fs::copy(home_models.join(f), models.join(f)).unwrap();
    }
    if let Some(newest) = newest_compiled_component() {
        std::fs::copy(&newest, cache.join("hindsight/components").join(newest.file_name().unwrap())).unwrap();
    }
    let chmod = |p: &Path, mode: u32| {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
    };
    chmod(dir.path(), 0o755);
    chmod(&models, 0o755);
    let _ = Command::new("chown").args(["-R", "nobody"]).arg(&cache).status();
    let env = [("XDG_CACHE_HOME", cache.as_path()), ("HINDSIGHT_MODELS", models.as_path())];
    let db_arg = db.to_str().unwrap();
    let out = nobody(&["--db", db_arg, "stats", "--json"], &env).unwrap();
    assert!(out.status.success(), "stats on a read-only database: {}", stderr(&out));
    let out = nobody(&["--db", db_arg, "recall", "--query", "replica lag", "--json"], &env).unwrap();
    assert!(out.status.success(), "recall on a read-only database: {}", stderr(&out));
    let out = nobody(&["--db", db_arg, "retain", "--text", "a write", "--force"], &env).unwrap();
    assert!(!out.status.success());
    assert!(stderr(&out).contains(db_arg), "the error names the file: {}", stderr(&out));
}

fn newest_compiled_component() -> Option<PathBuf> {
    let dir = hindsight::defaults::cache_dir().join("components");
    std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
        .max()
        .map(|(_, p)| p)
}

#[test]
fn finding_26_future_events_active_restores_and_credentials_are_refused_or_hidden() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("misc.db");
    let future = hindsight(&db, &["retain", "--text", "An event far ahead", "--at", "9999-12-31T23:59:59Z"]);
    assert!(!future.status.success() && stderr(&future).contains("occurred_at"), "{}", stderr(&future));
    let id =
        retain_json(&db, "The user wants metric units", &["--force"])["id"].as_str().unwrap().to_string();
    let restore = hindsight(&db, &["restore", &id]);
    assert!(!restore.status.success() && stderr(&restore).contains("only archived"), "{}", stderr(&restore));

    let file = dir.path().join("many.jsonl");
    std::fs::write(&file, "{\"text\":\"one line about csv files\"}\n").unwrap();
    let batch = hindsight(&db, &["retain", "--file", file.to_str().unwrap(), "--batch", "1001"]);
    assert!(!batch.status.success() && stderr(&batch).contains("batch"), "{}", stderr(&batch));

    let llm = ScriptedLlm::start(vec![]).unwrap();
    let with_password = llm.url.replace("http://", "http://user:pw-SECRET@");
    let out = hindsight_env(
        &db,
        &["--llm-url", &with_password, "retain", "--text", "Builds run on the big runner", "--json"],
        &[("HINDSIGHT_LLM_RETRIES", "0")],
    );
    let all = format!("{}{}", String::from_utf8_lossy(&out.stdout), stderr(&out));
    assert!(!all.contains("pw-SECRET"), "{all}");
}

#[test]
fn finding_28_negative_numbers_parse_as_values() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("neg.db");
    retain_json(&db, "The user wants metric units", &["--force"]);
    for (args, field) in [
        (&["retain", "--text", "x y z", "--confidence", "-0.1"][..], "confidence"),
        (&["recall", "--query", "units", "--k", "-1"][..], "k"),
    ] {
        let out = hindsight(&db, args);
        let err = stderr(&out);
        assert!(
            !out.status.success() && err.contains(field) && !err.contains("unexpected argument"),
            "{args:?}: {err}"
        );
    }
    let out = hindsight(&db, &["recall", "--query", "units", "--min-score", "-1", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = hindsight(&db, &["retain", "--text", "an old event", "--at", "-0001-01-01T00:00:00Z"]);
    let err = stderr(&out);
    assert!(!out.status.success() && err.contains("at") && !err.contains("unexpected argument"), "{err}");
}

#[test]
fn finding_34_command_line_flags_are_defaults_for_every_line_of_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("flags.db");
    let file = dir.path().join("same.jsonl");
    let line = "{\"text\":\"The nightly ETL job must run after the backup finishes\"}\n";
    std::fs::write(&file, format!("{line}{line}")).unwrap();
    let out =
        hindsight(&db, &["retain", "--file", file.to_str().unwrap(), "--force", "--tags", "etl", "--json"]);
    let reports: Vec<Value> =
        String::from_utf8(out.stdout).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert!(reports.iter().all(|r| r["action"] == "created"), "--force applies to each line: {reports:?}");
    let found = stdout_json(&hindsight(&db, &["recall", "--query", "ETL backup", "--json"]));
    assert!(found["items"].as_array().unwrap().iter().all(|i| i["tags"] == serde_json::json!(["etl"])));
}

#[test]
fn finding_0_2_08_the_database_file_alone_holds_every_commit_after_a_command() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("w.db");
    retain_json(&db, "only in the wal? port 9911", &["--force"]);
    // A plain copy of the .db (no -wal beside it) is a whole database.
    let copy = dir.path().join("copy.db");
    std::fs::copy(&db, &copy).unwrap();
    let stats = stdout_json(&hindsight(&copy, &["stats", "--json"]));
    assert_eq!(stats["active"], 1, "{stats}");
    assert_eq!(stats["exists"], true);
    // A file that holds no such bank says so rather than reporting an empty one silently.
    let out = hindsight(&copy, &["--bank", "nosuchbank", "stats", "--json"]);
    assert_eq!(stdout_json(&out)["exists"], false);
    assert!(stderr(&out).contains("nosuchbank"), "{}", stderr(&out));
}

#[test]
fn finding_0_2_12_a_task_cites_memories_of_other_banks_and_they_get_its_feedback() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("cite.db");
    let shared = stdout_json(&hindsight(
        &db,
        &[
            "--bank",
            "shared",
            "retain",
            "--text",
            "The X-200 firmware update fails unless the battery is above 50%",
            "--force",
            "--json",
        ],
    ))["id"]
        .as_str()
        .unwrap()
        .to_string();
    let before = stdout_json(&hindsight(&db, &["--bank", "shared", "get", &shared, "--json"]))["confidence"]
        .as_f64()
        .unwrap();
    let sup = ["--bank", "agent:support"];
    // The support bank's own memory, recalled beside the shared one.
    hindsight(
        &db,
        &[&sup[..], &["retain", "--text", "Reboot the X-200 before any firmware update", "--force"]].concat(),
    );
    let task = stdout_json(&hindsight(
        &db,
        &[&sup[..], &["task", "begin", "--goal", "update the X-200 firmware", "--json"]].concat(),
    ))["id"]
        .as_str()
        .unwrap()
        .to_string();
    let recalled = stdout_json(&hindsight(
        &db,
        &[
            &sup[..],
            &[
                "recall",
                "--banks",
                "agent:support,shared",
                "--query",
                "X-200 firmware update fails",
                "--k",
                "2",
                "--task",
                &task,
                "--json",
            ],
        ]
        .concat(),
    ));
    let item = recalled["items"].as_array().unwrap().iter().find(|i| i["id"] == shared.as_str()).cloned();
    let handle = item.expect("the shared memory is recalled")["handle"].as_str().unwrap().to_string();
    let answer = format!("Charged the battery above 50% as [{handle}] says, then it worked");
    let out =
        hindsight(&db, &[&sup[..], &["task", "step", &task, "--type", "answer", "--text", &answer]].concat());
    assert!(out.status.success(), "{}", stderr(&out));
    let ended = stdout_json(&hindsight(
        &db,
        &[&sup[..], &["task", "end", &task, "--outcome", "success", "--force", "--json"]].concat(),
    ));
    let cited: Vec<&str> = ended["cited"].as_array().unwrap().iter().map(|c| c.as_str().unwrap()).collect();
    assert_eq!(cited, [format!("shared/{shared}")], "{ended}");
    let after = stdout_json(&hindsight(&db, &["--bank", "shared", "get", &shared, "--json"]))["confidence"]
        .as_f64()
        .unwrap();
    assert!(after > before, "the cited shared memory's confidence {before} -> {after}");
}
