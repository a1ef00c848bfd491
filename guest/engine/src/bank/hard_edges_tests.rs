//! The hard edges a security reviewer and a new user found in 0.2
//! (shared/reports/hard-edges-0.2.md) that the engine answers for, one test per finding, named
//! after it. Rights (findings 1, 9, 16 over MCP) are the dispatcher's: `hindsight-mcp`.

use std::rc::Rc;
use std::sync::Arc;

use hindsight_types::time::DAY_MS;
use hindsight_types::*;

use super::test_support::*;
use super::*;
use crate::llm::NoLlm;
use crate::store::MemoryStore;
use crate::test_support::HashEmbedder;

fn sibling(store: &Arc<MemoryStore>, id: &str) -> Bank {
    Bank::open(
        id,
        Box::new(store.clone()),
        Rc::new(HashEmbedder { dimension: 64 }),
        Rc::new(NoLlm),
        Rc::new(Settings::default()),
    )
    .unwrap()
}

/// An export of a bank holding one memory and one recall, as `hindsight export` writes it.
fn exported(store: &Arc<MemoryStore>) -> Vec<String> {
    let mut bank = open(store);
    retain_one(&mut bank, semantic("The CDN cache TTL for images is 1 day"), NOW);
    bank.recall(query("CDN TTL")).unwrap();
    bank.export_page(None, 1000, false, NOW).unwrap().lines
}

#[test]
fn finding_0_2_02_a_recall_log_sequence_from_a_file_cannot_break_recall() {
    let mut lines = exported(&Arc::new(MemoryStore::new()));
    let recall = lines.iter().position(|l| l.starts_with(r#"{"recall""#)).unwrap();
    let mut forged: serde_json::Value = serde_json::from_str(&lines[recall]).unwrap();
    forged["recall"]["seq"] = serde_json::json!(100_000_000_000u64);
    lines.push(forged.to_string());
    let target = Arc::new(MemoryStore::new());
    let mut bank = open(&target);
    let report = bank.import_lines(&lines, 1, false, false, NOW).unwrap();
    assert_eq!(report.log_entries, 2);
    let bounds = bank.log_bounds().unwrap();
    assert_eq!((bounds.first, bounds.next), (0, 2), "renumbered from the bank's own log");
    // Recall works, and keeps working: the log's pruning has nothing to walk.
    for _ in 0..3 {
        assert_eq!(texts(&bank.recall(query("CDN TTL")).unwrap()), ["The CDN cache TTL for images is 1 day"]);
    }
    // Bounds damaged some other way are pruned by what is stored, not by every number between.
    bank.store
        .commit(vec![bank.log_bounds_op(&audit::LogBounds { first: 0, next: 100_000_000_000 })])
        .unwrap();
    bank.recall(query("CDN TTL")).unwrap();
    assert!(bank.recall_log(|_| true).unwrap().len() <= Settings::default().audit.max_entries as usize);
}

#[test]
fn finding_0_2_03_a_hard_forget_reaches_reinforcing_tasks_and_shared_copies() {
    let store = Arc::new(MemoryStore::new());
    let mut bank = open(&store);
    let id = retain_one(&mut bank, semantic("The backup NAS root hostname is WOMBAT-4490"), NOW).id.unwrap();
    // A task whose fact reinforces the memory instead of making one.
    let task = bank.begin_task(&NewTask::new("remember the NAS"), NOW).unwrap().id;
    bank.update_task(&task, TaskUpdate::Fact("NAS root hostname is WOMBAT-4490".into()), None, NOW).unwrap();
    let remember = Step::user_message("remember this: WOMBAT-4490 is the NAS root hostname");
    bank.update_task(&task, TaskUpdate::Step(remember), None, NOW).unwrap();
    let end = bank.end_task(&task, EndTask::new(Outcome::Success), true, NOW).unwrap();
    assert!(end.items.iter().any(|d| d.outcome.id.as_deref() == Some(id.as_str())), "{end:?}");
    // A copy shared into another bank, and a copy of that copy.
    let copy_item = bank.get(&id).unwrap().shared_copy("test");
    let mut shared = sibling(&store, "shared");
    let copy = retain_one(&mut shared, copy_item, NOW).id.unwrap();
    let mut team = sibling(&store, "team");
    let copy_of_copy =
        retain_one(&mut team, shared.get(&copy).unwrap().shared_copy("shared"), NOW).id.unwrap();

    let receipt = bank.erase(&id, NOW + DAY_MS).unwrap();
    assert!(!store.contains_bytes(b"WOMBAT"), "the text is in no stored byte");
    // The memory, its copies, and the task's items merged into it (they say the same thing).
    for erased in [format!("test/{id}"), format!("shared/{copy}"), format!("team/{copy_of_copy}")] {
        assert!(receipt.memories.contains(&erased), "{erased}: {receipt:?}");
    }
    assert!(receipt.memories.iter().all(|m| m.starts_with("test/")
        || m == &format!("shared/{copy}")
        || m == &format!("team/{copy_of_copy}")));
    assert_eq!(receipt.tasks, [format!("test/{task}")]);
    assert!(bank.task(&task).unwrap().confirmed_facts[0].starts_with("[erased"));
}

#[test]
fn finding_0_2_04_a_search_over_several_banks_logs_its_query_only_in_the_first() {
    let store = Arc::new(MemoryStore::new());
    let mut coder = sibling(&store, "agent:coder");
    let mut shared = sibling(&store, "shared");
    retain_one(&mut coder, semantic("The coder's firmware notes: flash with the USB cable"), NOW);
    retain_one(&mut shared, semantic("The X-200 firmware update fails unless on battery"), NOW);
    let q =
        Query { agent_id: Some("coder".into()), ..query("coder private: salary of Bob is 183000 firmware") };
    recall_across(&mut [&mut coder, &mut shared], q).unwrap();
    let logged = |b: &Bank| b.recall_log(|_| true).unwrap();
    let mine = logged(&coder);
    assert_eq!(mine[0].query.as_deref(), Some("coder private: salary of Bob is 183000 firmware"));
    let theirs = logged(&shared);
    assert_eq!(theirs.len(), 1);
    assert_eq!(theirs[0].query, None, "the other bank's readers see the hash only");
    assert_eq!(theirs[0].query_hash, mine[0].query_hash);
    assert_eq!(theirs[0].agent_id.as_deref(), Some("coder"));
    assert!(!store.contains_bytes(b"salary of Bob") || mine[0].query.is_some());
}

#[test]
fn finding_0_2_11_a_shared_copy_is_recalled_once_beside_its_original() {
    let store = Arc::new(MemoryStore::new());
    let mut support = sibling(&store, "agent:support");
    let mut shared = sibling(&store, "shared");
    let id = retain_one(
        &mut support,
        semantic("The X-200 firmware update fails unless the battery is above 50%"),
        NOW,
    )
    .id
    .unwrap();
    retain_one(&mut shared, support.get(&id).unwrap().shared_copy("agent:support"), NOW);
    retain_one(&mut shared, semantic("The X-300 router needs a reboot after its update"), NOW);
    let q = Query { k: Some(2), ..query("X-200 firmware update fails") };
    let found = recall_across(&mut [&mut support, &mut shared], q).unwrap();
    let banks: Vec<(&str, &str)> =
        found.items.iter().map(|i| (i.bank.as_str(), i.memory.content.as_str())).collect();
    assert_eq!(banks.len(), 2);
    assert_eq!(
        banks[0],
        ("agent:support", "The X-200 firmware update fails unless the battery is above 50%")
    );
    assert_eq!(banks[1], ("shared", "The X-300 router needs a reboot after its update"), "{banks:?}");
}

#[test]
fn finding_0_2_15_import_checks_every_field_and_link_it_stores() {
    let source = Arc::new(MemoryStore::new());
    let lines = exported(&source);
    let memory_line = lines.iter().position(|l| l.starts_with(r#"{"memory""#)).unwrap();
    let forged = |change: &dyn Fn(&mut serde_json::Value)| {
        let mut v: serde_json::Value = serde_json::from_str(&lines[memory_line]).unwrap();
        change(&mut v);
        let mut out = lines.clone();
        out[memory_line] = v.to_string();
        out
    };
    let refused = |lines: Vec<String>, what: &str| {
        let target = Arc::new(MemoryStore::new());
        let mut bank = open(&target);
        let err = bank.import_lines(&lines, 1, false, true, NOW).unwrap_err();
        assert!(err.message().contains(what), "{what}: {err}");
    };
    refused(forged(&|v| v["memory"]["tags"] = serde_json::json!(vec!["t"; 3000])), "tags");
    refused(forged(&|v| v["memory"]["metadata"] = serde_json::json!(vec![["k", "v"]; 3000])), "metadata");
    refused(forged(&|v| v["memory"]["agent_id"] = serde_json::json!("x".repeat(100_000))), "agent_id");
    refused(forged(&|v| v["memory"]["context"] = serde_json::json!("not json {")), "context");
    refused(forged(&|v| v["memory"]["created_at"] = serde_json::json!(253_402_300_799_000i64)), "created_at");
    refused(
        forged(&|v| {
            let id = v["memory"]["id"].clone();
            v["memory"]["superseded_by"] = id;
            v["memory"]["status"] = serde_json::json!("superseded");
        }),
        "superseded_by",
    );
    refused(forged(&|v| v["unknown"] = serde_json::json!(1)), "unknown field");
    refused(forged(&|v| v["task"] = serde_json::json!({"id": "t1"})), "expected one of a memory");
    let mut twice = lines.clone();
    twice.push(lines[memory_line].clone());
    refused(twice, "appears twice");

    // A supersede chain that loops back across lines.
    let mut a: serde_json::Value = serde_json::from_str(&lines[memory_line]).unwrap();
    let mut b = a.clone();
    a["memory"]["id"] = "ma".into();
    a["memory"]["superseded_by"] = "mb".into();
    a["memory"]["status"] = "superseded".into();
    b["memory"]["id"] = "mb".into();
    b["memory"]["superseded_by"] = "ma".into();
    b["memory"]["status"] = "superseded".into();
    refused(vec![lines[0].clone(), a.to_string(), b.to_string()], "loop back");

    // A link to a memory the file does not hold is dropped when the import ends.
    let mut dangling: serde_json::Value = serde_json::from_str(&lines[memory_line]).unwrap();
    dangling["memory"]["superseded_by"] = "m-not-in-the-file".into();
    dangling["memory"]["status"] = "superseded".into();
    let id = dangling["memory"]["id"].as_str().unwrap().to_string();
    let target = Arc::new(MemoryStore::new());
    let mut bank = open(&target);
    bank.import_lines(&[lines[0].clone(), dangling.to_string()], 1, false, false, NOW).unwrap();
    bank.reindex(NOW).unwrap();
    let m = bank.get(&id).unwrap();
    assert_eq!((m.status, m.superseded_by), (Status::Active, None));
}

#[test]
fn finding_0_2_07_a_bank_is_deleted_whole_and_made_again_cleanly() {
    let store = Arc::new(MemoryStore::new());
    let mut bank = open(&store);
    retain_one(&mut bank, semantic("The half-imported note"), NOW);
    bank.begin_task(&NewTask::new("a task"), NOW).unwrap();
    let mut other = open(&store);
    other.recall(query("note")).unwrap();
    assert!(bank.delete_bank().unwrap() > 0);
    assert!(!store.contains_bytes(b"half-imported"));
    assert!(!banks(&*store).unwrap().contains(&"test".to_string()));
    // Made again: an instance that had the old bank open catches up instead of taking the new
    // bank's first commit for the one it applied.
    retain_one(&mut bank, semantic("A new note after the delete"), NOW);
    assert_eq!(texts(&other.recall(query("note")).unwrap()), ["A new note after the delete"]);
}

#[test]
fn finding_0_2_16_distilled_and_corrected_memories_carry_who_wrote_them() {
    let store = Arc::new(MemoryStore::new());
    let mut bank = open(&store);
    let trajectory = Trajectory {
        agent_id: Some("support".into()),
        facts: vec!["The vendor portal logs out after 10 minutes idle".into()],
        steps: vec![Step::user_message("remember this: the vendor portal logs out after 10 minutes idle")],
        ..Trajectory::new("check the vendor portal", Outcome::Success)
    };
    let end = bank.distill_trajectory(trajectory, true, NOW).unwrap();
    let id = end.items[0].outcome.id.clone().unwrap();
    assert_eq!(bank.get(&id).unwrap().agent_id.as_deref(), Some("support"));
    let fixed = bank
        .correct(&id, "The vendor portal logs out after 15 minutes idle", Some("dropbox"), NOW + 1)
        .unwrap();
    assert_eq!(fixed.memory.agent_id.as_deref(), Some("dropbox"));
}

#[test]
fn a_trajectory_with_a_refused_step_leaves_no_task() {
    let store = Arc::new(MemoryStore::new());
    let mut bank = open(&store);
    let trajectory = Trajectory {
        steps: vec![Step::thought("fine"), Step::thought("   ")],
        ..Trajectory::new("a goal", Outcome::Success)
    };
    let err = bank.distill_trajectory(trajectory, true, NOW).unwrap_err();
    assert!(err.message().starts_with("steps[1].text"), "{err}");
    assert!(bank.tasks(true).unwrap().is_empty());
}

#[test]
fn finding_0_2_12_a_task_cites_another_banks_memory_even_before_its_own_bank_holds_one() {
    let store = Arc::new(MemoryStore::new());
    let mut support = sibling(&store, "agent:support");
    let mut shared = sibling(&store, "shared");
    let tip = retain_one(
        &mut shared,
        semantic("The X-200 firmware update fails unless the battery is above 50%"),
        NOW,
    )
    .id
    .unwrap();
    let task = support.begin_task(&NewTask::new("update the X-200 firmware"), NOW).unwrap().id;
    let q = Query { task_id: Some(task.clone()), ..query("X-200 firmware update fails") };
    let r = recall_across(&mut [&mut support, &mut shared], q).unwrap();
    let handle = r.items.iter().find(|i| i.memory.id == tip).unwrap().handle.clone().unwrap();
    let answer = format!("Charged the battery above 50% as [{handle}] says, then it worked");
    support
        .update_task(&task, TaskUpdate::Step(Step::new(StepKind::Answer, answer).at(NOW)), None, NOW)
        .unwrap();
    let end = support
        .end_task(&task, EndTask { outcome: Outcome::Success, detail: None, force: false }, true, NOW + 1)
        .unwrap();
    assert_eq!(end.cited, vec![format!("shared/{tip}")]);
}
