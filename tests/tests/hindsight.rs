//! Tasks and hindsight through the component and the host's LLM client, against a local HTTP
//! server that speaks the chat-completions protocol with scripted answers.

use std::sync::Arc;
use std::time::Duration;

use hindsight::llm::LlmConfig;
use hindsight::scripted_llm::{Reply, ScriptedLlm};
use hindsight::types::{
    DistillMethod, Error, FailureType, MemoryKind, RetainAction, Step, StepKind, TaskOutcome, TaskUpdate,
};
use hindsight::{CallError, Host, HostConfig, MemoryKv};
use hindsight_tests::{host_with, NOW};

fn llm_host(server: &ScriptedLlm) -> Host {
    let mut llm = LlmConfig::new(server.url.clone(), "scripted");
    llm.backoff = Duration::from_millis(10);
    host_with(Arc::new(MemoryKv::new()), HostConfig { llm: Some(llm), ..HostConfig::default() })
}

fn step(kind: StepKind, text: &str, tool: Option<&str>, error: bool) -> TaskUpdate {
    TaskUpdate::Step(Step { at: NOW, kind, text: text.into(), tool: tool.map(String::from), error })
}

/// Six steps, one tool call failing with a timeout: worth distilling.
fn run_task(host: &mut Host) -> String {
    let id = host
        .task_begin("agent", "export the weekly sales report", Some("data-analysis"), Some(NOW))
        .unwrap()
        .id;
    for u in [
        step(StepKind::Thought, "the report comes from the sales API", None, false),
        step(StepKind::ToolCall, "GET /v2/sales?week=47", Some("http"), false),
        step(StepKind::ToolResult, "read timed out after 30 s", Some("http"), true),
        step(StepKind::ToolCall, "GET /v2/sales?week=47&page_size=500", Some("http"), false),
        step(StepKind::ToolResult, "200 OK, 4,812 rows", Some("http"), false),
        step(StepKind::Answer, "report exported to sales-w47.xlsx", None, false),
    ] {
        host.task_update("agent", &id, &u, None, Some(NOW)).unwrap();
    }
    id
}

const LESSONS: &str = r#"{"memories": [
  {"kind": "procedural", "content": "Page the sales API with page_size=500: whole weeks time out", "task_type": "data-analysis", "tags": ["sales-api"], "confidence": 0.9, "failure": "none"},
  {"kind": "semantic", "content": "The sales API does not work", "confidence": 0.8, "failure": "transient"}
]}"#;

#[test]
fn a_finished_task_is_distilled_into_the_scripted_memories() {
    let server = ScriptedLlm::start(vec![Reply::content(format!("```json\n{LESSONS}\n```"))]).unwrap();
    let mut host = llm_host(&server);
    let id = run_task(&mut host);
    let end = host.task_end("agent", &id, TaskOutcome::Success, Some("on time"), false, Some(NOW)).unwrap();
    assert_eq!(end.method, DistillMethod::Llm, "{}", end.reason);
    let contents: Vec<&str> = end.items.iter().map(|d| d.content.as_str()).collect();
    assert_eq!(
        contents,
        vec!["Page the sales API with page_size=500: whole weeks time out", "The sales API does not work"]
    );
    assert!(end.items.iter().all(|d| d.outcome.action == RetainAction::Created));

    let request = &server.requests()[0];
    assert_eq!(request["model"], "scripted");
    assert_eq!(request["response_format"]["type"], "json_schema");
    assert!(request["messages"][1]["content"].as_str().unwrap().contains("read timed out after 30 s"));

    // The transient failure is a short-lived episode, never a standing "does not work".
    let transient = host.get("agent", end.items[1].outcome.id.as_ref().unwrap()).unwrap();
    assert_eq!(
        (transient.kind, transient.failure_type),
        (MemoryKind::Episodic, Some(FailureType::Transient))
    );
    assert!(transient.valid_until.is_some());

    let hits =
        host.recall("agent", &hindsight_tests::query("how do I fetch a week of sales data", 3)).unwrap();
    assert!(hits.prompt.contains("page_size=500"), "{}", hits.prompt);
    let usage = host.llm_usage().unwrap();
    assert_eq!(usage["extract"].calls, 1);
    assert_eq!(usage["extract"].prompt_tokens, 100);
}

#[test]
fn malformed_model_output_is_a_clear_error_and_the_task_is_still_ended() {
    let server = ScriptedLlm::start(vec![Reply::content("I learned that the API is slow. {broken")]).unwrap();
    let mut host = llm_host(&server);
    let id = run_task(&mut host);
    let err = host.task_end("agent", &id, TaskOutcome::Failure, None, false, Some(NOW)).unwrap_err();
    let CallError::Engine(Error::Llm(message)) = &err else { panic!("{err}") };
    assert!(message.contains("not the expected JSON") || message.contains("no JSON"), "{message}");
    assert!(message.contains("the task is ended and stored"), "{message}");
    let task = host.task_state("agent", &id).unwrap();
    assert_eq!(task.outcome, Some(TaskOutcome::Failure));
    assert_eq!(host.stats("agent").unwrap().total, 0, "no guessed memory");
}

#[test]
fn a_rate_limit_is_retried() {
    let server =
        ScriptedLlm::start(vec![Reply::Status(429, "slow down".into()), Reply::content(LESSONS)]).unwrap();
    let mut host = llm_host(&server);
    let id = run_task(&mut host);
    let end = host.task_end("agent", &id, TaskOutcome::Success, None, false, Some(NOW)).unwrap();
    assert_eq!(end.method, DistillMethod::Llm);
    assert_eq!(server.requests().len(), 2);
    assert_eq!(host.llm_usage().unwrap()["extract"].failures, 0);
}

#[test]
fn persistent_server_errors_end_in_a_clear_error_after_bounded_retries() {
    let server = ScriptedLlm::start(vec![]).unwrap(); // every answer: HTTP 500
    let mut host = llm_host(&server);
    let id = run_task(&mut host);
    let err = host.task_end("agent", &id, TaskOutcome::Success, None, false, Some(NOW)).unwrap_err();
    assert!(err.to_string().contains("HTTP 500") && err.to_string().contains("after 3 tries"), "{err}");
    assert_eq!(server.requests().len(), 3);
}

#[test]
fn without_an_llm_the_rules_distil_and_a_timeout_stays_transient() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("tasks.db");
    let id = {
        let (mut host, _) = hindsight_tests::sqlite_host(&db);
        let id = run_task(&mut host);
        // The same step twice (a retried request) is one step.
        let again = step(StepKind::Answer, "report exported to sales-w47.xlsx", None, false);
        let state = host.task_update("agent", &id, &again, None, Some(NOW)).unwrap();
        assert_eq!(state.steps.len(), 6);
        host.task_update(
            "agent",
            &id,
            &TaskUpdate::Fact("the sales API pages at most 500 rows".into()),
            None,
            Some(NOW),
        )
        .unwrap();
        id
    };
    // A new host process on the same file: the task is there.
    let (mut host, _) = hindsight_tests::sqlite_host(&db);
    let state = host.task_state("agent", &id).unwrap();
    assert_eq!((state.steps.len(), state.confirmed_facts.len(), state.version), (6, 1, 8));
    assert_eq!(state.tool_calls.len(), 2);
    let stale =
        host.task_update("agent", &id, &TaskUpdate::Note("x".into()), Some(3), Some(NOW)).unwrap_err();
    assert!(stale.to_string().contains("version: stale"), "{stale}");

    let end = host.task_end("agent", &id, TaskOutcome::Success, None, false, Some(NOW)).unwrap();
    assert_eq!(end.method, DistillMethod::Rules);
    let memories: Vec<_> = end
        .items
        .iter()
        .filter_map(|d| d.outcome.id.as_ref())
        .map(|i| host.get("agent", i).unwrap())
        .collect();
    assert!(memories
        .iter()
        .any(|m| m.kind == MemoryKind::Semantic && m.content.contains("pages at most 500 rows")));
    let timeout = memories.iter().find(|m| m.content.contains("read timed out")).unwrap();
    assert_eq!((timeout.kind, timeout.failure_type), (MemoryKind::Episodic, Some(FailureType::Transient)));
    assert!(memories.iter().all(|m| !(m.kind == MemoryKind::Semantic && m.failure_type.is_some())));
}
