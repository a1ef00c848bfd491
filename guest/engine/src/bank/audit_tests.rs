//! Browse, correct, the recall log and its feedback loop, export/import and the model switch.

use std::rc::Rc;
use std::sync::Arc;

use hindsight_types::*;

use super::test_support::*;
use super::*;
use crate::llm::NoLlm;
use crate::store::MemoryStore;
use crate::test_support::HashEmbedder;
use hindsight_types::{EndTask, NewTask};
use hindsight_types::{Query, RecallResult};

fn with_audit(store: &Arc<MemoryStore>, change: impl FnOnce(&mut Settings)) -> Bank {
    let mut settings = Settings::default();
    change(&mut settings);
    open_with(store, Rc::new(NoLlm), settings)
}

fn forced(text: &str) -> Memory {
    Memory { force: true, ..semantic(text) }
}

fn id_of(outcome: RetainOutcome) -> String {
    outcome.id.unwrap()
}

#[test]
fn a_correction_supersedes_the_memory_and_lowers_similar_ones() {
    let store = Arc::new(MemoryStore::new());
    let mut bank = open(&store);
    let wrong = id_of(retain_one(&mut bank, forced("the staging database port is 5433"), NOW));
    let similar = id_of(retain_one(&mut bank, forced("the staging database port is 5433 today"), NOW));
    let other = id_of(retain_one(&mut bank, forced("lunch is served at noon in the cafeteria"), NOW));
    let before = bank.record(&similar).unwrap().confidence;

    let c = bank.correct(&wrong, "the staging database port is 6543", None, NOW + 1).unwrap();
    assert_eq!(c.superseded, wrong);
    assert_eq!(c.memory.source, Source::UserFeedback);
    assert!((c.memory.confidence - 0.95).abs() < 1e-6);
    assert_eq!(c.memory.supersedes, vec![wrong.clone()]);
    assert_eq!(c.cascade.iter().map(|x| x.id.as_str()).collect::<Vec<_>>(), vec![similar.as_str()]);
    let after = bank.record(&similar).unwrap().confidence;
    assert!((after - before * 0.9).abs() < 1e-6, "{before} -> {after}");
    assert_eq!(bank.record(&other).unwrap().confidence, bank.record(&other).unwrap().confidence);
    assert!(c.cascade.iter().all(|x| x.id != other));

    let old = bank.record(&wrong).unwrap();
    assert_eq!(old.status, Status::Superseded);
    assert_eq!(old.superseded_by.as_deref(), Some(c.memory.id.as_str()));
    let recalled = bank.recall(query("staging database port")).unwrap();
    assert!(recalled.items.iter().all(|r| r.memory.id != wrong), "the corrected memory is gone from recall");
    assert_eq!(recalled.items[0].memory.id, c.memory.id);
    let chain: Vec<String> = bank.history(&c.memory.id).unwrap().into_iter().map(|e| e.memory.id).collect();
    assert!(chain.contains(&wrong));

    // Reopened from the store: the same.
    let mut again = open(&store);
    assert_eq!(again.record(&wrong).unwrap().status, Status::Superseded);
    assert!(
        again.correct(&wrong, "port 7000", None, NOW + 2).is_err(),
        "a superseded memory is not corrected again"
    );
}

#[test]
fn list_filters_orders_and_pages_stably_under_writes() {
    let store = Arc::new(MemoryStore::new());
    let mut bank = open(&store);
    for i in 0..7 {
        let m = Memory {
            tags: vec![if i % 2 == 0 { "even" } else { "odd" }.into()],
            ..forced(&format!("fact number {i} about csv files"))
        };
        retain_one(&mut bank, m, NOW + i);
    }
    retain_one(
        &mut bank,
        Memory { kind: Some(Kind::Procedural), ..forced("how to restart the worker") },
        NOW + 10,
    );
    let all = bank.list(&ListQuery::default()).unwrap();
    assert_eq!(all.total, 8);
    assert_eq!(all.items[0].content, "how to restart the worker", "newest first");
    assert_eq!(bank.list(&ListQuery::default().kind(Kind::Procedural)).unwrap().total, 1);
    assert_eq!(bank.list(&ListQuery::default().tag("even")).unwrap().total, 4);
    assert_eq!(bank.list(&ListQuery::default().text("NUMBER 3")).unwrap().total, 1);

    let first = bank.list(&ListQuery::default().limit(3)).unwrap();
    assert_eq!(first.items.len(), 3);
    // A write between pages neither shifts nor repeats anything.
    retain_one(&mut bank, forced("written between pages"), NOW + 20);
    let mut seen: Vec<String> = first.items.iter().map(|m| m.id.clone()).collect();
    let mut cursor = first.next_cursor.clone();
    while let Some(c) = cursor {
        let page = bank.list(&ListQuery::default().limit(3).after(c)).unwrap();
        seen.extend(page.items.iter().map(|m| m.id.clone()));
        cursor = page.next_cursor;
    }
    assert_eq!(seen.len(), 8, "every memory of the first listing once: {seen:?}");
    let unique: std::collections::BTreeSet<&String> = seen.iter().collect();
    assert_eq!(unique.len(), 8);
    assert!(bank.list(&ListQuery::default().after("bogus")).is_err());
    assert!(bank.list(&ListQuery::default().limit(0)).is_err());
}

#[test]
fn the_recall_log_is_bounded_and_can_keep_only_hashes() {
    let store = Arc::new(MemoryStore::new());
    let mut bank = with_audit(&store, |s| {
        s.audit.max_entries = 3;
        s.audit.store_queries = false;
    });
    retain_one(&mut bank, forced("the deploy script needs bash 5"), NOW);
    for i in 0..5 {
        bank.recall(Query { agent_id: Some("alice".into()), ..query(&format!("deploy script {i}")) })
            .unwrap();
    }
    let log = bank.recall_log(|_| true).unwrap();
    assert_eq!(log.iter().map(|e| e.seq).collect::<Vec<_>>(), vec![2, 3, 4], "the oldest dropped");
    assert!(log.iter().all(|e| e.query.is_none() && e.query_hash.len() == 16));
    assert_eq!(log[0].agent_id.as_deref(), Some("alice"));
    assert_eq!(log[0].hits.len(), 1);
    assert_eq!(store.scan("b/test/r/", None, 100).unwrap().len(), 3, "dropped entries leave the store");
}

#[test]
fn a_task_end_feeds_its_outcome_back_to_the_memories_its_answer_cites() {
    let store = Arc::new(MemoryStore::new());
    let mut bank = open(&store);
    let used = id_of(retain_one(&mut bank, forced("read the vendor csv with utf-8-sig"), NOW));
    let ignored = id_of(retain_one(&mut bank, forced("the vendor csv has 12 columns"), NOW));
    let task = bank.begin_task(&NewTask::new("clean the vendor csv"), NOW).unwrap().id;
    let r = bank.recall(Query { task_id: Some(task.clone()), ..query("vendor csv") }).unwrap();
    let handle = |id: &str| r.items.iter().find(|i| i.memory.id == id).unwrap().handle.clone().unwrap();
    assert!(r.prompt.contains(&format!("[{}]", handle(&used))));
    // A second recall for the task keeps each memory's handle.
    let again = bank.recall(Query { task_id: Some(task.clone()), ..query("csv columns") }).unwrap();
    assert!(again
        .items
        .iter()
        .all(|i| r.items.iter().any(|j| j.memory.id == i.memory.id && j.handle == i.handle)));

    let before = bank.record(&used).unwrap().confidence;
    let answer = format!("Used utf-8-sig as [{}] says.", handle(&used));
    bank.update_task(&task, TaskUpdate::Step(Step::new(StepKind::Answer, answer).at(NOW)), None, NOW)
        .unwrap();
    let end = bank
        .end_task(&task, EndTask { outcome: Outcome::Success, detail: None, force: false }, true, NOW + 1)
        .unwrap();
    assert_eq!(end.cited, vec![used.clone()]);
    assert_eq!(end.unused, vec![ignored.clone()]);
    let m = bank.record(&used).unwrap();
    assert!(m.confidence > before && m.cited == 1 && m.helpful == 1);
    let i = bank.record(&ignored).unwrap();
    assert_eq!((i.cited, i.helpful), (0, 0));
    assert_eq!(i.events.last().unwrap().event, UseEvent::RecalledNotUsed);

    let x = bank.explain(&used).unwrap();
    assert_eq!(x.recalls.len(), 2);
    assert!(x
        .events
        .iter()
        .any(|e| e.event == UseEvent::Cited && e.task_id.as_deref() == Some(task.as_str())));
    assert!(
        bank.recall(Query { task_id: Some(task), ..query("csv") }).is_err(),
        "an ended task takes no recall"
    );
}

#[test]
fn the_audit_finds_never_useful_memories_and_maintain_may_archive_them() {
    let store = Arc::new(MemoryStore::new());
    let mut bank = with_audit(&store, |s| s.maintain.archive_unused = true);
    let noisy = id_of(retain_one(&mut bank, forced("the office plant needs water on mondays"), NOW));
    let useful = id_of(retain_one(&mut bank, forced("the plant food is in the left drawer"), NOW));
    let quiet = id_of(retain_one(&mut bank, forced("quarterly taxes are due in april"), NOW));
    for _ in 0..5 {
        bank.recall(Query { k: Some(2), ..query("office plant") }).unwrap();
    }
    bank.report_used(std::slice::from_ref(&useful), None, NOW).unwrap();
    let audit = bank.audit().unwrap();
    assert_eq!(audit.never_useful.iter().map(|i| i.id.as_str()).collect::<Vec<_>>(), vec![noisy.as_str()]);
    assert_eq!(audit.never_recalled.iter().map(|i| i.id.as_str()).collect::<Vec<_>>(), vec![quiet.as_str()]);
    assert_eq!(audit.most_useful[0].id, useful);
    assert_eq!(audit.log_entries, 5);

    let report = bank.maintain(NOW + 1).unwrap();
    let archived: Vec<&str> = report.steps.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(archived, vec![noisy.as_str()]);
    assert!(report.steps[0].reason.contains("never useful"));
    assert_eq!(bank.record(&noisy).unwrap().status, Status::Archived);
}

#[test]
fn export_then_import_into_an_empty_store_gives_the_same_bank() {
    let store = Arc::new(MemoryStore::new());
    let mut bank = open(&store);
    let old = id_of(retain_one(&mut bank, forced("the api key lives in vault path secret/api"), NOW));
    retain_one(&mut bank, forced("the api rate limit is 100 requests per minute"), NOW);
    bank.correct(&old, "the api key lives in vault path secret/api-v2", None, NOW + 1).unwrap();
    let task = bank.begin_task(&NewTask::new("call the api"), NOW).unwrap().id;
    bank.recall(Query { task_id: Some(task), ..query("api key") }).unwrap();

    let mut lines = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let page = bank.export_page(cursor.as_deref(), 2, true, NOW).unwrap();
        lines.extend(page.lines);
        match page.next {
            Some(n) => cursor = Some(n),
            None => break,
        }
    }
    assert!(lines[0].contains("\"hindsight_export\":1") && lines[0].contains("hash-test-embedder"));

    let copy_store = Arc::new(MemoryStore::new());
    let mut copy = open(&copy_store);
    let report = copy.import_lines(&lines[..3], 1, false, false, NOW).unwrap();
    let rest = copy.import_lines(&lines[3..], 4, false, false, NOW).unwrap();
    assert_eq!(report.memories + rest.memories, 3);
    assert_eq!(report.embedded + rest.embedded, 0, "the vectors came with the file");
    let mut copy = open(&copy_store);
    let (a, b) = (bank.recall(query("api key vault")).unwrap(), copy.recall(query("api key vault")).unwrap());
    assert_eq!(texts(&a), texts(&b));
    let scores = |r: &RecallResult| r.items.iter().map(|i| i.score.total).collect::<Vec<_>>();
    assert_eq!(scores(&a), scores(&b));
    let (sa, sb) = (bank.stats().unwrap(), copy.stats().unwrap());
    assert_eq!((sa.total, sa.active, sa.superseded), (sb.total, sb.active, sb.superseded));
    assert_eq!(bank.history(&old).unwrap(), copy.history(&old).unwrap());
    assert_eq!(bank.tasks(true).unwrap(), copy.tasks(true).unwrap());
    assert_eq!(bank.recall_log(|_| true).unwrap().len() - 1, copy.recall_log(|_| true).unwrap().len() - 1);

    // Not into a bank that holds memories; not another model's vectors without reembed.
    assert!(
        matches!(copy.import_lines(&lines, 1, false, false, NOW), Err(Error::InvalidInput(f)) if f.field == "bank")
    );
    let other = Arc::new(MemoryStore::new());
    let mut wider = open_dim(&other, 32, Rc::new(NoLlm), Settings::default());
    let err = wider.import_lines(&lines, 1, false, false, NOW).unwrap_err();
    assert!(matches!(&err, Error::InvalidInput(f) if f.field == "embedding_model"), "{err:?}");
    let re = wider.import_lines(&lines, 1, true, false, NOW).unwrap();
    assert_eq!(re.embedded, 3);
    assert!(copy.import_lines(&["{\"memory\": 1}".into()], 1, false, false, NOW).is_err());

    // A file checked first stores nothing, and a bad record in it is named by its line.
    let empty = Arc::new(MemoryStore::new());
    let mut fresh = open(&empty);
    let mut bad = lines.clone();
    let forged = bad[1].replacen("\"confidence\":", "\"confidence\":7.5,\"x\":", 1);
    bad[1] = forged;
    let err = fresh.import_lines(&bad, 1, false, true, NOW).unwrap_err();
    assert!(
        matches!(&err, Error::InvalidInput(f) if f.field == "line 2" && f.message.contains("confidence")),
        "{err:?}"
    );
    assert!(fresh.import_lines(&lines, 1, false, true, NOW).is_ok());
    assert_eq!(fresh.stats().unwrap().total, 0, "a check stores nothing");
    assert!(fresh.export_page(None, 10, false, NOW).is_err(), "an empty bank has nothing to export");
}

#[test]
fn a_model_switch_is_staged_then_one_commit() {
    let store = Arc::new(MemoryStore::new());
    let mut bank = open(&store);
    for i in 0..5 {
        retain_one(&mut bank, forced(&format!("memory {i} about the build cache")), NOW);
    }
    let new_model = HashEmbedder { dimension: 32 };
    let (model, dim) = ("hash-32", 32);
    let first = bank.reembed_pending(model, dim, 3).unwrap();
    assert_eq!(first.len(), 3);
    let embed = |batch: &[(String, String)]| embedded(&new_model, batch);
    bank.stage_vectors(model, dim, embed(&first)).unwrap();
    // A crash here: a fresh instance resumes after what was staged, and still answers.
    let mut resumed = open(&store);
    assert_eq!(resumed.recall(query("build cache")).unwrap().items.len(), 3);
    let rest = resumed.reembed_pending(model, dim, 10).unwrap();
    assert_eq!(rest.len(), 2);
    assert!(rest.iter().all(|(id, _)| first.iter().all(|(f, _)| f != id)));
    resumed.stage_vectors(model, dim, embed(&rest)).unwrap();
    assert!(resumed.reembed_pending(model, dim, 10).unwrap().is_empty());
    assert_eq!(resumed.switch_model(model, dim, NOW).unwrap(), 5);
    assert!(matches!(open_dim_result(&store, 64), Err(Error::Model(_))), "the old model no longer opens it");
    assert!(store.scan("b/test/rv/", None, 10).unwrap().is_empty());
}

/// A pending batch (id, text) embedded by `model`, as a host stages it.
fn embedded(model: &HashEmbedder, batch: &[(String, String)]) -> Vec<(String, Vec<f32>)> {
    let texts: Vec<&str> = batch.iter().map(|(_, t)| t.as_str()).collect();
    let vectors = crate::embed::TextEmbedder::embed_batch(model, &texts).unwrap();
    batch.iter().map(|(id, _)| id.clone()).zip(vectors).collect()
}

fn open_dim_result(store: &Arc<MemoryStore>, dimension: usize) -> Result<Bank> {
    Bank::open(
        "test",
        Box::new(store.clone()),
        Rc::new(HashEmbedder { dimension }),
        Rc::new(NoLlm),
        Rc::new(Settings::default()),
    )
}

#[test]
fn a_hard_forget_erases_the_id_from_the_recall_log_and_task_handles() {
    let store = Arc::new(MemoryStore::new());
    let mut bank = open(&store);
    let secret = id_of(retain_one(&mut bank, forced("the door code is 4711"), NOW));
    let task = bank.begin_task(&NewTask::new("open the door"), NOW).unwrap().id;
    bank.recall(Query { task_id: Some(task.clone()), ..query("door code") }).unwrap();
    bank.erase(&secret, NOW).unwrap();
    assert!(bank.recall_log(|e| e.hits.iter().any(|h| h.id == secret)).unwrap().is_empty());
    assert!(!bank.stored_task(&task).unwrap().handles.contains(&secret));
    let dump: Vec<u8> = store
        .scan("b/test/", None, 1000)
        .unwrap()
        .into_iter()
        .flat_map(|(k, v)| [k.into_bytes(), v].concat())
        .collect();
    assert!(!String::from_utf8_lossy(&dump).contains(&secret), "the erased id is nowhere in the store");
}

#[test]
fn memories_written_during_a_reembed_are_embedded_by_the_next_run() {
    let store = Arc::new(MemoryStore::new());
    let mut bank = open(&store);
    let early = id_of(retain_one(&mut bank, forced("memory about the cache"), NOW));
    let model = HashEmbedder { dimension: 16 };
    let embed = |batch: &[(String, String)]| embedded(&model, batch);
    let pending = bank.reembed_pending("hash-16", 16, 10).unwrap();
    assert_eq!(pending.len(), 1);
    bank.stage_vectors("hash-16", 16, embed(&pending)).unwrap();
    // Staged past the end; a memory that sorts before the run's position is missed by it.
    store.commit(vec![Op::Delete(format!("b/test/rv/{early}"))]).unwrap();
    let err = bank.switch_model("hash-16", 16, NOW).unwrap_err();
    assert!(matches!(&err, Error::Conflict(m) if m.contains("run reembed again")), "{err:?}");
    let again = bank.reembed_pending("hash-16", 16, 10).unwrap();
    assert_eq!(
        again.iter().map(|(id, _)| id.as_str()).collect::<Vec<_>>(),
        vec![early.as_str()],
        "only the missed one"
    );
    bank.stage_vectors("hash-16", 16, embed(&again)).unwrap();
    assert_eq!(bank.switch_model("hash-16", 16, NOW).unwrap(), 1);
}

#[test]
fn an_exported_memory_keeps_its_sentence_keys_when_imported_again() {
    let store = Arc::new(MemoryStore::new());
    let mut bank = open(&store);
    retain_one(
        &mut bank,
        forced("Good morning to you all. The api key lives in vault path secret/api."),
        NOW,
    );
    let page = bank.export_page(None, 10, true, NOW).unwrap();
    let copy_store = Arc::new(MemoryStore::new());
    let mut copy = open(&copy_store);
    let report = copy.import_lines(&page.lines, 1, false, false, NOW).unwrap();
    assert_eq!(report.embedded, 0, "the vector and its keys came with the file");
    let similarity = |b: &mut Bank| b.recall(query("vault api key")).unwrap().items[0].score.similarity;
    let (here, there) = (similarity(&mut bank), similarity(&mut copy));
    assert!((here - there).abs() < 1e-3, "{here} here, {there} imported");
    let mut plain = open_dim(&Arc::new(MemoryStore::new()), 64, Rc::new(NoLlm), {
        let mut s = Settings::default();
        s.recall.sentence_keys = false;
        s
    });
    retain_one(
        &mut plain,
        forced("Good morning to you all. The api key lives in vault path secret/api."),
        NOW,
    );
    let without = similarity(&mut plain);
    assert!(here > without + 0.01, "the keys count: {here} with, {without} without");
}
