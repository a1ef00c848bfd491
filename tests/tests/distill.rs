//! Tasks and hindsight through the component and the library's OpenAI-compatible client, against
//! a local HTTP server that speaks the chat-completions protocol with scripted answers.

use std::time::Duration;

use hindsight::{
    llm::OpenAi,
    types::{DistillMethod, EndTask, FailureType, RetainAction, StepKind, TaskUpdate},
    Bank, Error, Hindsight, Kind, Outcome, Step, Task,
};
use hindsight_tests::scripted_llm::{Reply, ScriptedLlm};
use hindsight_tests::*;

fn llm_host(server: &ScriptedLlm) -> Hindsight {
    let llm = OpenAi::new(server.url.clone(), "scripted").backoff(Duration::from_millis(10));
    open(Hindsight::builder().memory().llm(llm))
}

fn step(kind: StepKind, text: &str, tool: Option<&str>, error: bool) -> Step {
    Step { tool: tool.map(String::from), error, ..Step::new(kind, text) }
}

/// Six steps, one tool call failing with a timeout: worth distilling.
fn run_task(agent: &Bank) -> Task {
    let task = agent
        .begin_task(
            hindsight::types::NewTask::new("export the weekly sales report").task_type("data-analysis"),
        )
        .unwrap();
    for s in [
        step(StepKind::Thought, "the report comes from the sales API", None, false),
        step(StepKind::ToolCall, "GET /v2/sales?week=47", Some("http"), false),
        step(StepKind::ToolResult, "read timed out after 30 s", Some("http"), true),
        step(StepKind::ToolCall, "GET /v2/sales?week=47&page_size=500", Some("http"), false),
        step(StepKind::ToolResult, "200 OK, 4,812 rows", Some("http"), false),
        Step {
            id: Some("answer".into()),
            ..step(StepKind::Answer, "report exported to sales-w47.xlsx", None, false)
        },
    ] {
        task.step(s).unwrap();
    }
    task
}

const LESSONS: &str = r#"{"memories": [
  {"kind": "procedural", "content": "Page the sales API with page_size=500: whole weeks time out", "task_type": "data-analysis", "tags": ["sales-api"], "confidence": 0.9, "failure": "none"},
  {"kind": "semantic", "content": "The sales API does not work", "confidence": 0.8, "failure": "transient"}
]}"#;

#[test]
fn a_finished_task_is_distilled_into_the_scripted_memories() {
    let server = ScriptedLlm::start(vec![Reply::content(format!("```json\n{LESSONS}\n```"))]).unwrap();
    let hs = llm_host(&server);
    let agent = bank(&hs, "agent");
    let task = run_task(&agent);
    let end = task.end(EndTask::new(Outcome::Success).detail("on time")).unwrap();
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
    let transient = agent.get(end.items[1].outcome.id.as_ref().unwrap()).unwrap();
    assert_eq!((transient.kind, transient.failure_type), (Kind::Episodic, Some(FailureType::Transient)));
    assert!(transient.valid_until.is_some());

    let hits = agent.recall(query("how do I fetch a week of sales data", 3)).unwrap();
    assert!(hits.prompt.contains("page_size=500"), "{}", hits.prompt);
    let usage = hs.llm_usage().unwrap();
    assert_eq!(usage["extract"].calls, 1);
    assert_eq!(usage["extract"].prompt_tokens, 100);
}

#[test]
fn malformed_model_output_is_a_clear_error_and_the_task_is_still_ended() {
    let server = ScriptedLlm::start(vec![Reply::content("I learned that the API is slow. {broken")]).unwrap();
    let hs = llm_host(&server);
    let agent = bank(&hs, "agent");
    let task = run_task(&agent);
    let err = task.end(Outcome::Failure).unwrap_err();
    let Error::Llm(message) = &err else { panic!("{err}") };
    assert!(message.contains("not the expected JSON") || message.contains("no JSON"), "{message}");
    assert!(message.contains("the task is ended and stored"), "{message}");
    assert_eq!(task.state().unwrap().outcome, Some(Outcome::Failure));
    assert_eq!(agent.stats().unwrap().total, 0, "no guessed memory");
    // Finding 26: an answer the engine cannot use counts as a failed call.
    let usage = &hs.llm_usage().unwrap()["extract"];
    assert_eq!((usage.calls, usage.failures), (1, 1), "{usage:?}");
}

#[test]
fn a_rate_limit_is_retried() {
    let server =
        ScriptedLlm::start(vec![Reply::Status(429, "slow down".into()), Reply::content(LESSONS)]).unwrap();
    let hs = llm_host(&server);
    let task = run_task(&bank(&hs, "agent"));
    let end = task.end(Outcome::Success).unwrap();
    assert_eq!(end.method, DistillMethod::Llm);
    assert_eq!(server.requests().len(), 2);
    assert_eq!(hs.llm_usage().unwrap()["extract"].failures, 0);
}

#[test]
fn persistent_server_errors_end_in_a_clear_error_after_bounded_retries() {
    let server = ScriptedLlm::start(vec![]).unwrap(); // every answer: HTTP 500
    let hs = llm_host(&server);
    let task = run_task(&bank(&hs, "agent"));
    let err = task.end(Outcome::Success).unwrap_err();
    assert!(err.to_string().contains("HTTP 500") && err.to_string().contains("after 3 tries"), "{err}");
    assert_eq!(server.requests().len(), 3);
}

#[test]
fn without_an_llm_the_rules_distil_and_a_timeout_stays_transient() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("tasks.db");
    let id = {
        let (hs, _) = sqlite(&db);
        let task = run_task(&bank(&hs, "agent"));
        // The same step id twice (a retried request) is one step.
        let answer = step(StepKind::Answer, "report exported to sales-w47.xlsx", None, false);
        let state = task.step(Step { id: Some("answer".into()), ..answer }).unwrap();
        assert_eq!(state.steps.len(), 6);
        task.fact("the sales API pages at most 500 rows").unwrap();
        task.id().to_string()
    };
    // A new host process on the same file: the task is there.
    let (hs, _) = sqlite(&db);
    let agent = bank(&hs, "agent");
    let task = agent.resume_task(&id).unwrap();
    let state = task.state().unwrap();
    assert_eq!((state.steps.len(), state.confirmed_facts.len(), state.version), (6, 1, 8));
    assert_eq!(state.tool_calls.len(), 2);
    let stale = task.update(TaskUpdate::Note("x".into()), Some(3)).unwrap_err();
    assert!(matches!(&stale, Error::Conflict(m) if m.contains("at version 8")), "{stale}");

    let end = task.end(Outcome::Success).unwrap();
    assert_eq!(end.method, DistillMethod::Rules);
    let memories: Vec<_> =
        end.items.iter().filter_map(|d| d.outcome.id.as_ref()).map(|i| agent.get(i).unwrap()).collect();
    assert!(memories
        .iter()
        .any(|m| m.kind == Kind::Semantic && m.content.contains("pages at most 500 rows")));
    let timeout = memories.iter().find(|m| m.content.contains("read timed out")).unwrap();
    assert_eq!((timeout.kind, timeout.failure_type), (Kind::Episodic, Some(FailureType::Transient)));
    assert!(memories.iter().all(|m| !(m.kind == Kind::Semantic && m.failure_type.is_some())));
}
