//! Tasks and hindsight in the core, with a scripted LLM.

use std::rc::Rc;
use std::sync::Arc;

use hindsight_types::time::DAY_MS;
use hindsight_types::*;

use super::test_support::*;
use super::*;
use crate::llm::{LlmError, NoLlm};
use crate::store::MemoryStore;
use hindsight_types::{EndTask, NewTask};

fn step(kind: StepKind, text: &str) -> TaskUpdate {
    TaskUpdate::Step(Step::new(kind, text).at(NOW))
}

fn tool(kind: StepKind, text: &str, error: bool) -> TaskUpdate {
    TaskUpdate::Step(Step { tool: Some("http".into()), error, ..Step::new(kind, text) }.at(NOW))
}

/// A data-cleaning task with six steps, one tool call timing out.
fn busy_task(bank: &mut Bank) -> String {
    let id = bank
        .begin_task(&NewTask::new("clean the vendor CSV export").task_type("data-cleaning"), NOW)
        .unwrap()
        .id;
    for u in [
        step(StepKind::Thought, "the headers look garbled"),
        tool(StepKind::ToolCall, "GET https://vendor.example/export.csv", false),
        tool(StepKind::ToolResult, "read timed out after 30 s", true),
        tool(StepKind::ToolCall, "GET https://vendor.example/export.csv?retry=1", false),
        tool(StepKind::ToolResult, "200 OK, 1.2 MB", false),
        step(StepKind::Answer, "cleaned file written with encoding utf-8-sig"),
        TaskUpdate::Fact("the vendor CSV is UTF-8 with a BOM".into()),
    ] {
        bank.update_task(&id, u, None, NOW).unwrap();
    }
    id
}

#[test]
fn a_busy_task_is_distilled_through_the_llm_and_verified() {
    let store = Arc::new(MemoryStore::new());
    let answer = r#"{"memories": [
        {"kind": "procedural", "content": "Read the vendor CSV with encoding utf-8-sig: it has a BOM", "task_type": "data-cleaning", "tags": ["csv"], "confidence": 0.9, "failure": "none"},
        {"kind": "semantic", "content": "The vendor export endpoint does not work", "confidence": 0.8, "failure": "transient"},
        {"kind": "semantic", "content": "The weather was fine", "confidence": 0.4}
    ]}"#;
    let llm = Scripted::new(vec![Ok(answer)]);
    let mut bank = open_with(&store, llm.clone(), Settings::default());
    let id = busy_task(&mut bank);
    let end = bank
        .end_task(&id, EndTask { outcome: Outcome::Success, detail: None, force: false }, true, NOW + DAY_MS)
        .unwrap();
    assert_eq!(end.method, DistillMethod::Llm);
    assert!(end.reason.contains("6 steps"), "{}", end.reason);
    assert_eq!(llm.requests()[0].operation, LlmOperation::Extract);
    assert!(llm.requests()[0].prompt.contains("read timed out"));

    let created: Vec<&Distilled> =
        end.items.iter().filter(|d| d.outcome.action == RetainAction::Created).collect();
    assert_eq!(created.len(), 2, "{:?}", end.items);
    let dropped = end.items.iter().find(|d| d.content == "The weather was fine").unwrap();
    assert_eq!(dropped.outcome.action, RetainAction::Filtered);
    assert!(dropped.outcome.reason.contains("below 0.7"));

    let transient = bank.record(created[1].outcome.id.as_ref().unwrap()).unwrap();
    assert_eq!(transient.kind, Kind::Episodic, "a transient failure is never a semantic memory");
    assert_eq!(transient.failure_type, Some(FailureType::Transient));
    assert!(transient.valid_until.is_some() && transient.importance < 0.5);
    let lesson = bank.record(created[0].outcome.id.as_ref().unwrap()).unwrap();
    assert_eq!(lesson.task_type.as_deref(), Some("data-cleaning"));
    assert!(lesson.metadata.contains(&("task".to_string(), id.clone())));
    assert!(bank.stored_task(&id).unwrap().is_ended());
}

#[test]
fn without_an_llm_the_rules_distil_facts_failures_and_the_answer() {
    let store = Arc::new(MemoryStore::new());
    let mut bank = open_with(&store, Rc::new(NoLlm), Settings::default());
    let id = busy_task(&mut bank);
    let end = bank
        .end_task(
            &id,
            EndTask { outcome: Outcome::Success, detail: Some("done".into()), force: false },
            true,
            NOW,
        )
        .unwrap();
    assert_eq!(end.method, DistillMethod::Rules);
    let memories: Vec<crate::record::Record> =
        end.items.iter().filter_map(|d| d.outcome.id.as_ref()).map(|i| bank.record(i).unwrap()).collect();
    assert!(memories
        .iter()
        .any(|m| m.kind == Kind::Semantic && m.content == "the vendor CSV is UTF-8 with a BOM"));
    let failure = memories.iter().find(|m| m.failure_type.is_some()).expect("the timeout");
    assert_eq!((failure.kind, failure.failure_type), (Kind::Episodic, Some(FailureType::Transient)));
    assert!(failure.content.contains("read timed out"));
    assert!(memories.iter().any(|m| m.content.contains("final answer: cleaned file written")));
}

#[test]
fn unusable_llm_output_is_an_error_and_the_task_stays_ended() {
    let store = Arc::new(MemoryStore::new());
    let llm = Scripted::new(vec![Ok("Sure! The agent learned a lot today.")]);
    let mut bank = open_with(&store, llm, Settings::default());
    let id = busy_task(&mut bank);
    let err = bank
        .end_task(&id, EndTask { outcome: Outcome::Failure, detail: None, force: false }, true, NOW)
        .unwrap_err();
    assert!(matches!(err, Error::Llm(_)), "{err}");
    assert!(err.message().contains("no JSON") && err.message().contains("task is ended"), "{err}");
    let task = bank.stored_task(&id).unwrap();
    assert_eq!(task.outcome, Some(Outcome::Failure));
    assert_eq!(bank.stats().unwrap().total, 0, "nothing guessed");
    let again = bank
        .end_task(&id, EndTask { outcome: Outcome::Failure, detail: None, force: false }, true, NOW)
        .unwrap_err();
    assert!(again.message().contains("already ended"));
    let llm_failed = Scripted::new(vec![Err(LlmError::Failed("HTTP 500 after 3 tries".into()))]);
    let mut bank = open_with(&store, llm_failed, Settings::default());
    let id = busy_task(&mut bank);
    assert!(bank
        .end_task(&id, EndTask { outcome: Outcome::Success, detail: None, force: false }, true, NOW)
        .unwrap_err()
        .message()
        .contains("HTTP 500"));
}

#[test]
fn a_short_task_is_not_distilled_unless_the_user_asks_or_it_is_forced() {
    let store = Arc::new(MemoryStore::new());
    let mut bank = open_with(&store, Rc::new(NoLlm), Settings::default());
    let quiet = bank.begin_task(&NewTask::new("rename a file"), NOW).unwrap().id;
    bank.update_task(&quiet, step(StepKind::Answer, "renamed"), None, NOW).unwrap();
    let end = bank
        .end_task(&quiet, EndTask { outcome: Outcome::Success, detail: None, force: false }, true, NOW)
        .unwrap();
    assert_eq!(end.method, DistillMethod::Skipped);
    assert!(end.reason.starts_with("not distilled"), "{}", end.reason);

    let asked = bank.begin_task(&NewTask::new("set up the report"), NOW).unwrap().id;
    bank.update_task(&asked, step(StepKind::UserMessage, "记住：报表一律用UTF-8导出"), None, NOW).unwrap();
    let end = bank
        .end_task(&asked, EndTask { outcome: Outcome::Success, detail: None, force: false }, true, NOW)
        .unwrap();
    assert_eq!(end.method, DistillMethod::Rules);
    assert!(end.items.iter().any(|d| d.content.contains("报表一律用UTF-8导出")));
}

#[test]
fn tasks_survive_reopening_and_are_listed() {
    let store = Arc::new(MemoryStore::new());
    let id = {
        let mut bank = open_with(&store, Rc::new(NoLlm), Settings::default());
        busy_task(&mut bank)
    };
    let bank = open_with(&store, Rc::new(NoLlm), Settings::default());
    let task = bank.stored_task(&id).unwrap();
    assert_eq!(task.steps.len(), 6);
    assert_eq!(bank.tasks(false).unwrap().len(), 1);
}

#[test]
fn consolidation_needs_an_llm_and_links_its_sources() {
    let store = Arc::new(MemoryStore::new());
    let mut bank = open_with(&store, Rc::new(NoLlm), Settings::default());
    for t in ["cleaned sales.csv: filled missing prices", "cleaned users.csv: dropped rows missing emails"] {
        bank.retain(vec![Memory::new(t)], NOW).unwrap();
    }
    let err = bank.consolidate(None, NOW).unwrap_err();
    assert!(matches!(err, Error::Llm(_)) && err.message().contains("needs a language model"), "{err}");

    let llm = Scripted::new(vec![Ok(
        r#"{"memories":[{"kind":"semantic","content":"Data-cleaning tasks here usually involve missing values","confidence":0.85,"sources":[0,1]}]}"#,
    )]);
    let mut bank = open_with(&store, llm, Settings::default());
    let out = bank.consolidate(Some(NOW - DAY_MS), NOW).unwrap();
    let id = out[0].outcome.id.clone().unwrap();
    let m = bank.record(&id).unwrap();
    assert_eq!(m.kind, Kind::Semantic);
    let derived = m.metadata.iter().find(|(k, _)| k == "derived_from").unwrap();
    assert_eq!(derived.1.split(',').count(), 2);
}

/// Hard edge 0.2 #5: a lesson the LLM marks `share` is copied to the shared bank only when the
/// bank opts in, only when it passes the rule check (no secret, not the user's own words, not a
/// preference or constraint), and the task's own bank always keeps it.
#[test]
fn finding_0_2_05_a_shared_lesson_is_opt_in_rule_checked_and_kept_privately() {
    let answer = r#"{"memories": [
        {"kind": "procedural", "content": "Read the vendor CSV with encoding utf-8-sig: it has a BOM", "confidence": 0.9},
        {"kind": "semantic", "content": "The vendor export endpoint times out on files over 1 MB unless retried", "confidence": 0.9, "share": true},
        {"kind": "semantic", "content": "The user's ACME account password is SHARED-LEAK-555", "confidence": 0.9, "share": true},
        {"kind": "semantic", "content": "The user prefers CSV exports over Excel", "confidence": 0.9, "share": true, "tags": ["preference"]}
    ]}"#;
    let run = |share_lessons: bool| {
        let store = Arc::new(MemoryStore::new());
        let llm = Scripted::new(vec![Ok(answer)]);
        let mut settings = Settings::default();
        settings.spaces.shared_bank = "shared:data".into();
        settings.spaces.share_lessons = share_lessons;
        let mut bank = open_with(&store, llm.clone(), settings.clone());
        let id = busy_task(&mut bank);
        let end = bank
            .end_task(
                &id,
                EndTask { outcome: Outcome::Success, detail: None, force: false },
                true,
                NOW + DAY_MS,
            )
            .unwrap();
        assert!(llm.requests()[0].prompt.contains("share (true only for general knowledge"));
        (store, settings, bank, id, end)
    };

    // Off by default: everything stays in the task's bank.
    let (_, _, _, _, end) = run(false);
    assert!(end.items.iter().all(|d| d.bank == "test"), "{:?}", end.items);
    assert_eq!(end.items.len(), 4);

    let (store, settings, mut bank, id, end) = run(true);
    let banks: Vec<(&str, &str)> = end.items.iter().map(|d| (d.content.as_str(), d.bank.as_str())).collect();
    assert_eq!(
        banks,
        [
            ("Read the vendor CSV with encoding utf-8-sig: it has a BOM", "test"),
            ("The vendor export endpoint times out on files over 1 MB unless retried", "test"),
            ("The user's ACME account password is SHARED-LEAK-555", "test"),
            ("The user prefers CSV exports over Excel", "test"),
            ("The vendor export endpoint times out on files over 1 MB unless retried", "shared:data"),
        ]
    );
    let own_id = end.items[1].outcome.id.clone().unwrap();
    assert!(bank.record(&own_id).is_ok(), "the task's own bank keeps the shared lesson");
    let shared_id = end.items[4].outcome.id.clone().unwrap();
    let shared = Bank::open(
        "shared:data",
        Box::new(store.clone()),
        Rc::new(crate::test_support::HashEmbedder { dimension: 1024 }),
        Rc::new(NoLlm),
        Rc::new(settings),
    )
    .unwrap();
    assert_eq!(shared.state.slots.iter().flatten().count(), 1, "nothing else reached the shared bank");
    let copy = shared.state.memory(&shared_id).unwrap();
    assert!(
        copy.metadata.contains(&("shared_from".to_string(), format!("test/{id}"))),
        "{:?}",
        copy.metadata
    );
    // The copy names where it came from, not the private task it was distilled in.
    assert!(!copy.metadata.iter().any(|(k, _)| k == "task"), "{:?}", copy.metadata);
    assert_eq!(copy.task_description, None);
    assert!(bank.stored_task(&id).unwrap().distilled.is_some());
}
