//! What a call costs: counted per call, totalled per operation in the bank, and capped by the
//! token budget.

use std::sync::Arc;

use hindsight_types::time::DAY_MS;
use hindsight_types::*;

use super::test_support::*;
use super::*;
use crate::store::MemoryStore;

const LESSON: &str = r#"{"memories": [
    {"kind": "procedural", "content": "Read the vendor CSV with encoding utf-8-sig: it has a BOM", "confidence": 0.9, "failure": "none"}
]}"#;

fn task(bank: &mut Bank) -> String {
    let id = bank.begin_task(&NewTask::new("clean the vendor CSV export"), NOW).unwrap().id;
    for text in ["the headers look garbled", "re-read it as utf-8-sig", "cleaned file written"] {
        bank.update_task(&id, TaskUpdate::Step(Step::new(StepKind::Thought, text).at(NOW)), None, NOW)
            .unwrap();
    }
    id
}

fn end(bank: &mut Bank, id: &str) -> TaskEnd {
    let end = EndTask { outcome: Outcome::Success, detail: None, force: true };
    bank.metered("task_end", |b| b.end_task(id, end, false, NOW + DAY_MS)).unwrap()
}

#[test]
fn a_task_end_costs_what_the_llm_counted_and_the_bank_keeps_the_totals() {
    let store = Arc::new(MemoryStore::new());
    let llm = Scripted::new(vec![Ok(LESSON)]);
    let mut bank = open_with(&store, llm.clone(), Settings::default());
    let id = task(&mut bank);
    let ended = end(&mut bank, &id);
    assert_eq!(ended.method, DistillMethod::Llm, "{}", ended.reason);
    let asked = llm.requests().len() as u32;
    assert!(asked >= 1);
    let usage = bank.last_usage();
    assert_eq!(usage.llm_calls, asked);
    assert_eq!((usage.prompt_tokens, usage.completion_tokens), (10 * asked as u64, 5 * asked as u64));
    assert!(usage.embed_texts >= 1, "the lesson was embedded: {usage:?}");
    assert!(!usage.over_budget);

    bank.metered("retain", |b| b.retain(vec![semantic("a"), semantic("b c")], NOW)).unwrap();
    // The script has run out: the importance call made fails, and counts, without tokens.
    let asked_by_retain = llm.requests().len() as u32 - asked;
    assert_eq!(bank.last_usage().llm_calls, asked_by_retain);
    assert_eq!(bank.last_usage().prompt_tokens, 0);
    assert_eq!(bank.last_usage().embed_texts, 2);
    bank.metered("retain", |b| b.retain(vec![semantic("the deploy script is blue-green")], NOW)).unwrap();
    bank.metered("recall", |b| b.recall(query("deploy"))).unwrap();
    assert_eq!(bank.last_usage().embed_texts, 1);

    // The totals are in the store: another instance reads them.
    let stats = open_with(&store, llm, Settings::default()).stats().unwrap();
    let of = |op: &str| stats.usage.iter().find(|u| u.operation == op).cloned().unwrap_or_default();
    assert_eq!(of("retain").calls, 2);
    assert_eq!(of("retain").embed_texts, 3);
    assert_eq!(of("recall").calls, 1);
    assert_eq!(of("task_end").calls, 1);
    assert_eq!(of("task_end").prompt_tokens, 10 * asked as u64);
    assert_eq!(of("task_end").llm_calls, asked as u64);
}

#[test]
fn over_the_token_budget_a_task_is_distilled_by_rules_and_the_result_says_so() {
    let store = Arc::new(MemoryStore::new());
    let llm = Scripted::new(vec![Ok(LESSON)]);
    let mut settings = Settings::default();
    settings.limits.llm_token_budget = 50;
    let mut bank = open_with(&store, llm.clone(), settings);
    let id = task(&mut bank);
    let ended = end(&mut bank, &id);
    assert_eq!(ended.method, DistillMethod::Rules);
    assert!(ended.reason.contains("over limits.llm_token_budget"), "{}", ended.reason);
    assert!(llm.requests().is_empty(), "no call was made");
    let usage = bank.last_usage();
    assert!(usage.over_budget);
    assert_eq!((usage.llm_calls, usage.prompt_tokens), (0, 0));
    let stats = bank.stats().unwrap();
    assert_eq!(stats.usage.iter().find(|u| u.operation == "task_end").unwrap().over_budget, 1);
    let again = task(&mut bank);
    end(&mut bank, &again);
    let totals = bank.stats().unwrap().usage;
    let task_end = totals.iter().find(|u| u.operation == "task_end").unwrap();
    assert_eq!((task_end.calls, task_end.over_budget), (2, 2), "{totals:?}");
}

#[test]
fn unmetered_calls_count_nothing_and_store_no_totals() {
    let store = Arc::new(MemoryStore::new());
    let mut bank = open(&store);
    retain_one(&mut bank, semantic("the deploy script is blue-green"), NOW);
    assert_eq!(bank.last_usage(), Usage::default());
    assert!(bank.stats().unwrap().usage.is_empty());
}

#[test]
fn a_recall_from_a_bank_that_holds_nothing_does_not_make_it() {
    let store = Arc::new(MemoryStore::new());
    let mut bank = open(&store);
    bank.metered("recall", |b| b.recall(query("anything"))).unwrap();
    assert_eq!(bank.last_usage().embed_texts, 1, "counted for the caller");
    assert_eq!(store.len(), 0, "nothing stored");
}
