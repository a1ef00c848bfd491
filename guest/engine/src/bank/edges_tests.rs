//! The hard edges a user and a security reviewer found in 0.1 (shared/reports/hard-edges-0.1.md),
//! one test per finding, named after it.

use std::rc::Rc;
use std::sync::Arc;

use hindsight_types::time::DAY_MS;
use hindsight_types::*;

use super::test_support::*;
use crate::llm::{LlmError, NoLlm};
use crate::store::MemoryStore;
use hindsight_types::Query;
use hindsight_types::{EndTask, NewTask};

#[test]
fn finding_06_soft_forget_then_restore_keeps_a_superseded_memory_superseded() {
    let store = Arc::new(MemoryStore::new());
    let mut bank = open(&store);
    let old =
        retain_one(&mut bank, semantic("The build server uses a timeout of 30 s for integration tests"), NOW);
    let new = retain_one(
        &mut bank,
        semantic("The build server now uses a timeout of 90 s for integration tests"),
        NOW + 1,
    );
    assert_eq!(new.action, RetainAction::Superseded, "{new:?}");
    let old = old.id.unwrap();
    bank.forget(&old, NOW + 2).unwrap();
    let back = bank.restore(&old, NOW + 3).unwrap();
    assert_eq!(back.status, Status::Superseded, "restore gives back the status it had");
    assert_eq!(back.superseded_by, new.id);
    let hits = bank.recall(query("integration test timeout")).unwrap();
    assert!(hits.items.iter().all(|r| r.memory.id != old), "{:?}", texts(&hits));
    let err = bank.restore(new.id.as_deref().unwrap(), NOW).unwrap_err();
    assert!(err.message().contains("only archived memories can be restored"), "{err}");
}

#[test]
fn finding_07_a_restored_memory_gets_back_its_confidence_and_a_dry_run_changes_nothing() {
    let store = Arc::new(MemoryStore::new());
    let mut bank = open(&store);
    let id = retain_one(&mut bank, semantic("The on-call rotation changes every Wednesday at 10:00"), NOW)
        .id
        .unwrap();
    let confidence = bank.record(&id).unwrap().confidence;
    let far = NOW + 36 * 365 * DAY_MS; // 2062: a typo of 2026
    let before: Vec<(String, Vec<u8>)> = store.scan("", None, 10_000).unwrap();
    let preview = bank.maintain_dry_run(far).unwrap();
    assert_eq!(preview.steps.len(), 1, "{preview:?}");
    assert_eq!(store.scan("", None, 10_000).unwrap(), before, "a dry run commits nothing");
    assert_eq!(bank.record(&id).unwrap().status, Status::Active);

    let report = bank.maintain(far).unwrap();
    assert_eq!(report.steps[0].action, MaintainAction::Archived);
    assert!(bank.record(&id).unwrap().confidence < 0.01);
    let back = bank.restore(&id, far).unwrap();
    assert_eq!((back.status, back.confidence), (Status::Active, confidence));
    // Undone whole: ageing resumes from where it was, not from 2062.
    let report = bank.maintain_dry_run(NOW + 40 * DAY_MS).unwrap();
    assert_eq!(report.decayed, 1, "{report:?}");
}

#[test]
fn finding_08_access_times_are_clamped_to_creation_and_the_wall_clock() {
    let store = Arc::new(MemoryStore::new());
    let mut bank = open(&store);
    let id =
        retain_one(&mut bank, semantic("The flaky payments test needs a fresh database"), NOW).id.unwrap();
    let year_9999 = 253_370_764_800_000;
    bank.recall(Query { now: Some(year_9999), ..query("flaky payments test") }).unwrap();
    let used = bank.record(&id).unwrap().last_accessed_at.unwrap();
    assert!(used <= hindsight_types::time::now(), "used in the future: {used}");
    let year_1900 = -2_208_988_800_000;
    bank.feedback(std::slice::from_ref(&id), FeedbackOutcome::Success, year_1900).unwrap();
    assert_eq!(bank.record(&id).unwrap().last_accessed_at, Some(NOW), "not used before it was created");
}

#[test]
fn finding_10_hard_forget_leaves_no_dangling_reference() {
    let store = Arc::new(MemoryStore::new());
    let mut bank = open(&store);
    let text = |s: u32| format!("The build server uses a timeout of {s} s for integration tests");
    let a = retain_one(&mut bank, semantic(&text(30)), NOW).id.unwrap();
    let b = retain_one(&mut bank, semantic(&text(60).replace("uses", "now uses")), NOW + 1).id.unwrap();
    let c = retain_one(&mut bank, semantic(&text(90).replace("uses", "now uses")), NOW + 2).id.unwrap();
    assert_eq!(bank.record(&a).unwrap().superseded_by.as_deref(), Some(b.as_str()));
    assert_eq!(bank.record(&b).unwrap().superseded_by.as_deref(), Some(c.as_str()));
    let p = retain_one(&mut bank, semantic("Deploys run on Tuesdays").parallel(), NOW).id.unwrap();
    let q = retain_one(&mut bank, semantic("Deploys never run on Tuesdays").parallel(), NOW).id.unwrap();

    bank.erase(&b, NOW + 3).unwrap();
    bank.erase(&q, NOW + 3).unwrap();
    for m in store.scan("b/test/m/", None, 1000).unwrap() {
        let text = String::from_utf8(m.1).unwrap();
        assert!(!text.contains(&b) && !text.contains(&q), "{} still names an erased id: {text}", m.0);
    }
    assert_eq!(bank.record(&a).unwrap().superseded_by.as_deref(), Some(c.as_str()), "relinked past the gap");
    assert_eq!(bank.record(&c).unwrap().supersedes, vec![a.clone()]);
    let chain: Vec<String> = bank.history(&c).unwrap().into_iter().map(|e| e.memory.id).collect();
    assert!(chain.contains(&a), "{chain:?}");
    assert!(bank.record(&p).unwrap().conflicts_with.is_empty());

    // A memory merged into (or replaced by) an erased memory with no successor is current again.
    bank.erase(&c, NOW + 4).unwrap();
    let a_now = bank.record(&a).unwrap();
    assert_eq!((a_now.status, a_now.superseded_by), (Status::Active, None));
}

#[test]
fn finding_04_hard_forget_scrubs_the_task_it_came_from_and_a_task_can_be_erased() {
    let store = Arc::new(MemoryStore::new());
    let mut bank = open(&store);
    let task = bank.begin_task(&NewTask::new("set up the office network"), NOW).unwrap().id;
    bank.update_task(
        &task,
        TaskUpdate::Fact("The guest wifi network name is PLATYPUS-9981".into()),
        None,
        NOW,
    )
    .unwrap();
    let remember = Step::user_message("remember this: the guest wifi network name is PLATYPUS-9981");
    bank.update_task(&task, TaskUpdate::Step(remember), None, NOW).unwrap();
    let end = bank
        .end_task(&task, EndTask { outcome: Outcome::Success, detail: None, force: false }, true, NOW)
        .unwrap();
    assert_eq!(end.method, DistillMethod::Rules);
    // Every record the distillation made: an item merged into another keeps its own (`related`).
    let made: std::collections::BTreeSet<String> =
        end.items.iter().flat_map(|d| d.outcome.id.iter().chain(d.outcome.related.iter()).cloned()).collect();
    assert_eq!(made.len(), 2, "{end:?}");

    // Erasing the memory erases the record merged into it too (it says the same thing).
    let survivor =
        end.items.iter().find_map(|d| d.outcome.related.as_ref().and(d.outcome.id.clone())).unwrap();
    let receipt = bank.erase(&survivor, NOW + DAY_MS).unwrap();
    let erased: std::collections::BTreeSet<String> =
        receipt.memories.iter().map(|m| m.trim_start_matches("test/").to_string()).collect();
    assert_eq!(erased, made, "{receipt:?}");
    assert_eq!(receipt.tasks, [format!("test/{task}")], "{receipt:?}");
    assert!(!store.contains_bytes(b"PLATYPUS"), "the text is in no stored byte");
    let scrubbed = bank.stored_task(&task).unwrap();
    assert!(scrubbed.confirmed_facts[0].starts_with("[erased 2026-01-02"), "{scrubbed:?}");
    assert!(scrubbed.steps[0].text.starts_with("[erased"), "{scrubbed:?}");

    bank.delete_task(&task).unwrap();
    assert!(matches!(bank.stored_task(&task), Err(Error::NotFound { .. })));
    assert!(!store.contains_bytes(task.as_bytes()));
}

#[test]
fn finding_11_a_task_whose_distillation_failed_is_distilled_again() {
    let store = Arc::new(MemoryStore::new());
    let llm = Scripted::new(vec![Err(LlmError::Failed("HTTP 500 (after 3 tries)".into()))]);
    let mut bank = open_with(&store, llm, Settings::default());
    let task = bank.begin_task(&NewTask::new("rotate the API keys"), NOW).unwrap().id;
    bank.update_task(&task, TaskUpdate::Fact("the ops role may rotate keys".into()), None, NOW).unwrap();
    let err = bank
        .end_task(&task, EndTask { outcome: Outcome::Success, detail: None, force: true }, true, NOW)
        .unwrap_err();
    assert!(err.message().contains("task distill"), "{err}");
    assert_eq!(bank.stats().unwrap().total, 0);

    let end = bank.distill_task(&task, true, true, NOW + 1).unwrap();
    assert_eq!(end.method, DistillMethod::Rules);
    assert_eq!(end.items.len(), 1);
    assert!(bank.stored_task(&task).unwrap().distilled.is_some());
    let again = bank.distill_task(&task, true, true, NOW + 2).unwrap_err();
    assert!(again.message().contains("already distilled"), "{again}");

    // A skipped task (short, not forced) can be distilled too.
    let short = bank.begin_task(&NewTask::new("look up the VPN address"), NOW).unwrap().id;
    bank.update_task(&short, TaskUpdate::Fact("the VPN is vpn.example.com".into()), None, NOW).unwrap();
    let skipped = bank
        .end_task(&short, EndTask { outcome: Outcome::Success, detail: None, force: false }, true, NOW)
        .unwrap();
    assert_eq!(skipped.method, DistillMethod::Skipped);
    assert_eq!(bank.distill_task(&short, true, true, NOW).unwrap().items.len(), 1);
}

#[test]
fn finding_19_a_tool_error_is_never_tagged_as_the_users_constraint() {
    let store = Arc::new(MemoryStore::new());
    let mut bank = open(&store);
    let tool = Memory::new("Error from server (Forbidden): deployments.apps is forbidden for the ci user")
        .source(Source::ToolResult);
    let outcome = retain_one(&mut bank, tool, NOW);
    assert!(!outcome.reason.contains("constraint"), "{}", outcome.reason);
    let id = outcome.id.unwrap();
    assert!(!bank.record(&id).unwrap().has_tag(crate::record::TAG_CONSTRAINT));
    let user = Memory::new("Deployments must never run on Fridays").source(Source::UserExplicit);
    let id = retain_one(&mut bank, user, NOW).id.unwrap();
    assert!(bank.record(&id).unwrap().has_tag(crate::record::TAG_CONSTRAINT));
}

#[test]
fn finding_16_the_prompt_leaves_out_memories_with_no_evidence_of_relevance() {
    let store = Arc::new(MemoryStore::new());
    let mut bank = open_with(&store, Rc::new(NoLlm), Settings::default());
    bank.retain(vec![Memory::new("The DATABASE_URL secret lives in the CI settings")], NOW).unwrap();
    let hits = bank.recall(query("quarterly revenue report in Chinese")).unwrap();
    assert_eq!(hits.items.len(), 1, "recall still lists it");
    assert!(!hits.items[0].in_prompt);
    assert_eq!(hits.prompt, "", "the prompt block leaves it out");
    let hits = bank.recall(query("where is the DATABASE_URL secret")).unwrap();
    assert!(hits.items[0].in_prompt && hits.prompt.contains("DATABASE_URL"), "{}", hits.prompt);
}

#[test]
fn finding_26_an_event_dated_in_the_future_is_refused() {
    let store = Arc::new(MemoryStore::new());
    let mut bank = open(&store);
    let far = Memory::new("The release happened").occurred_at(NOW + 400 * DAY_MS);
    let err = bank.retain(vec![far], NOW).unwrap_err();
    assert!(err.message().starts_with("items[0].occurred_at: "), "{err}");
    assert_eq!(bank.stats().unwrap().total, 0);
}
