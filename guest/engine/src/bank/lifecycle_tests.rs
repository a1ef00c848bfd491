//! One test per lifecycle rule: write filter, dedup, merge, conflict, feedback, decay, expiry,
//! capacity. Time is passed in; the LLM, where one is needed, is scripted.

use std::rc::Rc;
use std::sync::Arc;

use hindsight_types::time::DAY_MS;
use hindsight_types::*;

use super::test_support::*;
use crate::llm::NoLlm;
use crate::store::MemoryStore;
use hindsight_types::Query;

#[test]
fn a_changed_preference_supersedes_the_old_one() {
    let store = Arc::new(MemoryStore::new());
    let mut bank = open(&store);
    let java = retain_one(&mut bank, semantic("user prefers Java"), NOW);
    let java_id = java.id.clone().unwrap();
    let java_confidence = bank.record(&java_id).unwrap().confidence;
    let python = retain_one(&mut bank, semantic("user now prefers Python"), NOW + DAY_MS);
    assert_eq!(python.action, RetainAction::Superseded, "{python:?}");
    assert_eq!(python.related.as_deref(), Some(java_id.as_str()));
    let python_id = python.id.unwrap();

    let hits = bank.recall(query("which language does the user prefer")).unwrap();
    assert_eq!(texts(&hits), vec!["user now prefers Python"]);
    let old = bank.record(&java_id).unwrap();
    assert_eq!(old.status, Status::Superseded);
    assert_eq!(old.superseded_by.as_deref(), Some(python_id.as_str()));
    assert!((old.confidence - java_confidence / 2.0).abs() < 1e-6);

    let history = bank.history(&python_id).unwrap();
    let events: Vec<(HistoryEvent, &str)> = history.iter().map(|e| (e.event, e.memory.id.as_str())).collect();
    assert_eq!(
        events,
        vec![
            (HistoryEvent::Created, java_id.as_str()),
            (HistoryEvent::Created, python_id.as_str()),
            (HistoryEvent::Superseded, java_id.as_str()),
        ]
    );
    assert_eq!(history[2].at, NOW + DAY_MS);
    assert_eq!(bank.history(&java_id).unwrap(), history, "the same chain from either end");

    let all = bank.recall(Query { include_superseded: true, ..query("user prefers") }).unwrap();
    assert_eq!(all.items.len(), 2);
    assert!(all.prompt.contains("superseded, no longer current"), "{}", all.prompt);
}

#[test]
fn a_parallel_memory_stands_beside_the_one_it_contradicts() {
    let store = Arc::new(MemoryStore::new());
    let mut bank = open(&store);
    let first = retain_one(&mut bank, semantic("export jobs should use the bulk API"), NOW).id.unwrap();
    let second = retain_one(
        &mut bank,
        Memory { parallel: true, ..semantic("export jobs should not use the bulk API") },
        NOW,
    );
    assert_eq!(second.action, RetainAction::Created);
    assert_eq!(second.related.as_deref(), Some(first.as_str()));
    let hits = bank.recall(query("export jobs bulk API")).unwrap();
    assert_eq!(hits.items.len(), 2);
    assert!(hits.items.iter().all(|r| !r.conflicting.is_empty()));
    assert!(hits.prompt.contains("judge by the situation"), "{}", hits.prompt);
}

#[test]
fn the_same_fact_three_times_is_one_reinforced_memory() {
    let store = Arc::new(MemoryStore::new());
    let mut bank = open(&store);
    let text = "the staging database lives on host db-stage-2";
    let first = retain_one(&mut bank, semantic(text), NOW);
    let c0 = bank.record(first.id.as_ref().unwrap()).unwrap().confidence;
    for day in 1..=2 {
        let again = retain_one(&mut bank, semantic(text), NOW + day * DAY_MS);
        assert_eq!(again.action, RetainAction::Reinforced);
        assert_eq!(again.id, first.id);
    }
    assert_eq!(bank.stats().unwrap().total, 1);
    let m = bank.record(first.id.as_ref().unwrap()).unwrap();
    assert_eq!((m.access_count, m.reinforcements), (2, 2));
    assert!((m.confidence - (c0 + 0.1)).abs() < 1e-5, "{}", m.confidence);
    assert_eq!(m.last_accessed_at, Some(NOW + 2 * DAY_MS));
}

#[test]
fn a_close_memory_of_the_same_kind_is_merged() {
    let store = Arc::new(MemoryStore::new());
    let mut bank = open(&store);
    // The same values in other words: a duplicate, not close enough to reinforce outright.
    let first = retain_one(
        &mut bank,
        Memory { importance: Some(0.3), ..semantic("the build server in the basement has 64 GB of RAM") },
        NOW,
    );
    let second = retain_one(
        &mut bank,
        Memory { importance: Some(0.9), ..semantic("the build server in the basement has 65536 MB of RAM") },
        NOW,
    );
    assert_eq!(second.action, RetainAction::Merged, "{second:?}");
    assert_eq!(second.id, first.id);
    let survivor = bank.record(first.id.as_ref().unwrap()).unwrap();
    assert_eq!(survivor.importance, 0.9);
    let absorbed = bank.record(second.related.as_ref().unwrap()).unwrap();
    assert_eq!(absorbed.status, Status::Merged);
    assert_eq!(absorbed.superseded_by, first.id);
    let history = bank.history(first.id.as_ref().unwrap()).unwrap();
    assert!(history.iter().any(|e| e.event == HistoryEvent::Merged && e.other == first.id));
    // A duplicate of another kind is not merged into it: it reinforces it.
    let third = retain_one(
        &mut bank,
        Memory {
            kind: Some(Kind::Procedural),
            ..Memory::new("the build server in the basement has 64 GB of RAM")
        },
        NOW,
    );
    assert_eq!(third.action, RetainAction::Reinforced, "{third:?}");
}

#[test]
fn filler_is_filtered_with_its_reason_and_force_stores_it() {
    let store = Arc::new(MemoryStore::new());
    let mut bank = open(&store);
    let out = bank
        .retain(
            vec![Memory::new("好的"), Memory::new("ok, thanks!"), Memory::new("never deploy on Fridays")],
            NOW,
        )
        .unwrap();
    assert_eq!(out[0].action, RetainAction::Filtered);
    assert_eq!(out[0].id, None);
    assert!(out[0].reason.starts_with("filler"), "{}", out[0].reason);
    assert_eq!(out[1].action, RetainAction::Filtered);
    assert_eq!(out[2].action, RetainAction::Created);
    assert!(out[2].reason.contains("constraint"), "{}", out[2].reason);
    let kept = bank.record(out[2].id.as_ref().unwrap()).unwrap();
    assert!(kept.has_tag("constraint"));
    assert_eq!(bank.stats().unwrap().total, 1);

    let forced = retain_one(&mut bank, Memory { force: true, ..Memory::new("好的") }, NOW);
    assert_eq!(forced.action, RetainAction::Created);
    assert_eq!(bank.record(forced.id.as_ref().unwrap()).unwrap().content, "好的");
}

#[test]
fn repeats_within_one_call_are_filtered() {
    let store = Arc::new(MemoryStore::new());
    let mut bank = open(&store);
    let out = bank
        .retain(vec![Memory::new("build with --release"), Memory::new("Build with --release.")], NOW)
        .unwrap();
    assert_eq!(out[1].action, RetainAction::Filtered);
    assert!(out[1].reason.contains("items[0]"), "{}", out[1].reason);
}

#[test]
fn an_llm_scores_importance_and_low_scores_are_dropped() {
    let store = Arc::new(MemoryStore::new());
    let llm = Scripted::new(vec![Ok(
        "```json\n{\"scores\":[{\"item\":0,\"importance\":3},{\"item\":1,\"importance\":8}]}\n```",
    )]);
    let mut bank = open_with(&store, llm.clone(), Settings::default());
    let out = bank
        .retain(
            vec![
                Memory::new("the weather was nice during the run"),
                Memory::new("the export job needs 4 GB of memory"),
                Memory::new("always gzip the export"),
            ],
            NOW,
        )
        .unwrap();
    assert_eq!(out[0].action, RetainAction::Filtered);
    assert!(out[0].reason.contains("importance 3/10"), "{}", out[0].reason);
    assert_eq!(out[1].action, RetainAction::Created);
    assert_eq!(bank.record(out[1].id.as_ref().unwrap()).unwrap().importance, 0.8);
    assert_eq!(out[2].action, RetainAction::Created, "a rule keeps a constraint without asking");
    let asked = &llm.requests()[0];
    assert_eq!(asked.operation, LlmOperation::Importance);
    assert!(!asked.prompt.contains("gzip"));
}

#[test]
fn unusable_llm_output_keeps_the_items_and_says_so() {
    let store = Arc::new(MemoryStore::new());
    let llm = Scripted::new(vec![Ok("I think they are all quite important!")]);
    let mut bank = open_with(&store, llm, Settings::default());
    let out = retain_one(&mut bank, Memory::new("the export job needs 4 GB of memory"), NOW);
    assert_eq!(out.action, RetainAction::Created);
    assert!(out.reason.contains("importance not scored") && out.reason.contains("no JSON"), "{}", out.reason);
}

#[test]
fn feedback_moves_confidence_by_outcome() {
    let store = Arc::new(MemoryStore::new());
    let mut bank = open(&store);
    let out = bank
        .retain(
            vec![
                Memory { confidence: Some(0.93), ..semantic("retry uploads with backoff") },
                Memory { confidence: Some(0.15), ..semantic("use the v1 endpoint for reports") },
                Memory { confidence: Some(0.8), ..semantic("the cache lives in redis") },
            ],
            NOW,
        )
        .unwrap();
    let ids: Vec<String> = out.into_iter().map(|o| o.id.unwrap()).collect();
    let later = NOW + 5 * DAY_MS;
    let m = bank.feedback(&ids[..1], FeedbackOutcome::Success, later).unwrap().remove(0);
    assert_eq!((m.confidence, m.access_count, m.last_accessed_at), (0.95, 1, Some(later)));
    let m = bank.feedback(&ids[1..2], FeedbackOutcome::Failure, later).unwrap().remove(0);
    assert_eq!(m.confidence, 0.1);
    let m = bank.feedback(&ids[2..3], FeedbackOutcome::Correction, later).unwrap().remove(0);
    assert_eq!(m.confidence, 0.4);
    let err = bank.feedback(&[ids[0].clone(), "nope".into()], FeedbackOutcome::Failure, later).unwrap_err();
    assert!(matches!(err, Error::NotFound { .. }));
    assert_eq!(bank.record(&ids[0]).unwrap().confidence, 0.95, "a failed call changes nothing");
    assert_eq!(open(&store).record(&ids[2]).unwrap().confidence, 0.4, "committed");
}

#[test]
fn maintain_decays_confidence_for_each_idle_period_once() {
    let store = Arc::new(MemoryStore::new());
    let mut bank = open(&store);
    let id =
        retain_one(&mut bank, Memory { confidence: Some(0.8), ..semantic("the cache lives in redis") }, NOW)
            .id
            .unwrap();
    let report = bank.maintain(NOW + 180 * DAY_MS).unwrap();
    assert_eq!(report.decayed, 1);
    let expected = 0.8 * 0.9f32.powi(6);
    assert!((bank.record(&id).unwrap().confidence - expected).abs() < 1e-5);
    // Running again the same day decays nothing more.
    bank.maintain(NOW + 181 * DAY_MS).unwrap();
    assert!((bank.record(&id).unwrap().confidence - expected).abs() < 1e-5);
    assert!((open(&store).record(&id).unwrap().confidence - expected).abs() < 1e-5, "committed");
}

#[test]
fn an_idle_low_confidence_memory_is_archived_and_restorable() {
    let store = Arc::new(MemoryStore::new());
    let mut bank = open(&store);
    let id =
        retain_one(&mut bank, Memory { confidence: Some(0.25), ..semantic("the cache lives in redis") }, NOW)
            .id
            .unwrap();
    let kept = retain_one(&mut bank, Memory { confidence: Some(0.25), ..semantic("never log tokens") }, NOW)
        .id
        .unwrap();
    let report = bank.maintain(NOW + 61 * DAY_MS).unwrap();
    assert_eq!(report.steps.len(), 1, "{report:?}");
    assert_eq!(report.steps[0].id, id);
    assert!(report.steps[0].reason.contains("unused for 61 days"), "{:?}", report.steps[0]);
    assert_eq!(bank.record(&kept).unwrap().status, Status::Active, "constraints do not decay");
    assert!(bank.recall(query("cache redis")).unwrap().items.iter().all(|r| r.memory.id != id));
    assert_eq!(bank.restore(&id, NOW + 62 * DAY_MS).unwrap().status, Status::Active);
}

#[test]
fn never_recalled_episodes_lose_weight_then_are_archived() {
    let store = Arc::new(MemoryStore::new());
    let mut bank = open(&store);
    let id =
        retain_one(&mut bank, Memory { importance: Some(0.6), ..Memory::new("ran the nightly export") }, NOW)
            .id
            .unwrap();
    let report = bank.maintain(NOW + 31 * DAY_MS).unwrap();
    assert_eq!(report.weakened, 1);
    assert!((bank.record(&id).unwrap().importance - 0.3).abs() < 1e-6);
    bank.maintain(NOW + 45 * DAY_MS).unwrap();
    assert!((bank.record(&id).unwrap().importance - 0.3).abs() < 1e-6, "weakened once");
    let report = bank.maintain(NOW + 61 * DAY_MS).unwrap();
    assert_eq!(report.steps[0].action, MaintainAction::Archived);
    assert_eq!(bank.record(&id).unwrap().status, Status::Archived);
}

#[test]
fn expired_memories_are_archived() {
    let store = Arc::new(MemoryStore::new());
    let mut bank = open(&store);
    let id = retain_one(
        &mut bank,
        Memory { valid_until: Some(NOW + DAY_MS), ..semantic("the API is in maintenance") },
        NOW,
    )
    .id
    .unwrap();
    assert!(bank.maintain(NOW).unwrap().steps.is_empty());
    let report = bank.maintain(NOW + 2 * DAY_MS).unwrap();
    assert!(report.steps[0].reason.starts_with("expired"), "{report:?}");
    assert_eq!(bank.record(&id).unwrap().status, Status::Archived);
}

#[test]
fn capacity_archives_the_lowest_composite_scores() {
    let store = Arc::new(MemoryStore::new());
    let mut settings = Settings::default();
    settings.maintain.capacity = 100;
    let mut bank = open_with(&store, Rc::new(NoLlm), settings);
    let items: Vec<Memory> = (0..120)
        .map(|i| Memory {
            importance: Some(if i < 20 { 0.05 } else { 0.9 }),
            ..semantic(&format!("service {i} listens on port {}", 8000 + i))
        })
        .collect();
    let out = bank.retain(items, NOW).unwrap();
    let created = out.iter().filter(|o| o.action == RetainAction::Created).count();
    assert_eq!(created, 120);
    let report = bank.maintain(NOW + DAY_MS).unwrap();
    assert_eq!((report.active_before, report.active_after), (120, 100));
    assert_eq!(bank.stats().unwrap().active, 100);
    let archived: Vec<&str> = report.steps.iter().map(|s| s.id.as_str()).collect();
    for s in &report.steps {
        assert!(bank.record(&s.id).unwrap().importance < 0.1, "{s:?}");
    }
    assert_eq!(archived.len(), 20);
}

#[test]
fn maintain_merges_near_duplicates_that_slipped_in() {
    let store = Arc::new(MemoryStore::new());
    let mut bank = open(&store);
    let text = "the staging database lives on host db-stage-2";
    let out = bank
        .retain(vec![Memory { force: true, ..semantic(text) }, Memory { force: true, ..semantic(text) }], NOW)
        .unwrap();
    assert_eq!(bank.stats().unwrap().active, 2);
    let report = bank.maintain(NOW).unwrap();
    assert_eq!(report.steps.len(), 1);
    assert_eq!(report.steps[0].action, MaintainAction::Merged);
    assert_eq!(bank.stats().unwrap().active, 1);
    let into = report.steps[0].into.clone().unwrap();
    assert!(out.iter().any(|o| o.id.as_ref() == Some(&into)));
}

#[test]
fn recall_marks_old_memories_as_possibly_stale() {
    let store = Arc::new(MemoryStore::new());
    let mut bank = open(&store);
    bank.retain(
        vec![
            Memory {
                occurred_at: Some(NOW - 400 * DAY_MS),
                importance: Some(1.0),
                ..semantic("the VPN needs the legacy client")
            },
            Memory { occurred_at: Some(NOW - DAY_MS), ..semantic("the VPN config lives in the wiki") },
        ],
        NOW,
    )
    .unwrap();
    let hits = bank.recall(query("VPN")).unwrap();
    let stale: Vec<bool> = hits.items.iter().map(|r| r.possibly_stale).collect();
    assert_eq!(stale.iter().filter(|s| **s).count(), 1);
    assert!(hits.prompt.contains("possibly stale] the VPN needs the legacy client"), "{}", hits.prompt);
}

#[test]
fn maintain_seals_the_buffer_into_a_segment_that_reopens_without_a_rebuild() {
    let store = Arc::new(MemoryStore::new());
    let mut settings = Settings::default();
    settings.index.seal_min = 20;
    settings.index.buffer_max = 60;
    let mut bank = open_with(&store, Rc::new(NoLlm), settings.clone());
    let items: Vec<Memory> = (0..40)
        .map(|i| Memory { force: true, ..semantic(&format!("service{i} listens on port {}", 8000 + i)) })
        .collect();
    let ids: Vec<String> = bank.retain(items, NOW).unwrap().into_iter().map(|o| o.id.unwrap()).collect();
    let before = texts(&bank.recall(query("service17 port")).unwrap())
        .iter()
        .map(|t| t.to_string())
        .collect::<Vec<_>>();
    let report = bank.maintain(NOW).unwrap();
    assert_eq!(report.sealed, 40);
    assert_eq!(bank.state.segments.len(), 1);
    assert_eq!(bank.state.buffer_len(), 0);
    let after = bank.recall(query("service17 port")).unwrap();
    assert_eq!(texts(&after), before);

    let mut reopened = open_with(&store, Rc::new(NoLlm), settings.clone());
    assert_eq!(reopened.state.segments.len(), 1, "loaded from the store, not rebuilt");
    assert_eq!(texts(&reopened.recall(query("service17 port")).unwrap()), before);

    // A hard-deleted sealed memory is a tombstone: never recalled again.
    reopened.erase(&ids[17], NOW).unwrap();
    let hits = reopened.recall(Query { k: Some(40), ..query("service17 port") }).unwrap();
    assert!(hits.items.iter().all(|r| r.memory.id != ids[17]));

    // Past buffer_max, a retain seals at once.
    let more: Vec<Memory> =
        (0..61).map(|i| Memory { force: true, ..semantic(&format!("worker{i} runs queue q{i}")) }).collect();
    reopened.retain(more, NOW).unwrap();
    assert_eq!(reopened.state.segments.len(), 2);
    assert_eq!(open_with(&store, Rc::new(NoLlm), settings.clone()).state.segments.len(), 2);
}

#[test]
fn maintain_merges_segments_into_one_graph_within_merge_max() {
    let store = Arc::new(MemoryStore::new());
    let mut settings = Settings::default();
    settings.index.seal_min = 20;
    settings.index.buffer_max = 30;
    let mut bank = open_with(&store, Rc::new(NoLlm), settings.clone());
    let mut ids = Vec::new();
    for batch in 0..3 {
        let items: Vec<Memory> = (0..31)
            .map(|i| {
                let n = batch * 31 + i;
                Memory { force: true, ..semantic(&format!("service{n} listens on port {}", 8000 + n)) }
            })
            .collect();
        ids.extend(bank.retain(items, NOW).unwrap().into_iter().map(|o| o.id.unwrap()));
    }
    assert_eq!(bank.state.segments.len(), 3, "each retain past buffer_max sealed a segment");
    let few: Vec<Memory> = (0..5)
        .map(|i| Memory { force: true, ..semantic(&format!("cache{i} expires after {i}0 s")) })
        .collect();
    bank.retain(few, NOW).unwrap();
    assert_eq!(bank.state.buffer_len(), 5, "below seal_min: a maintain alone would leave it");
    bank.erase(&ids[40], NOW).unwrap();
    let segment_keys = |store: &MemoryStore| store.scan("b/test/s/", None, 100).unwrap().len();

    // Within merge_max: the three graphs and the buffer become one, the tombstoned row left
    // out, in one commit that also deletes the segments it replaced. A dry run says as much.
    assert_eq!(bank.maintain_dry_run(NOW).unwrap().sealed, 5);
    assert_eq!(bank.state.segments.len(), 3);
    let report = bank.maintain(NOW).unwrap();
    assert_eq!(report.sealed, 5, "the buffer went into the merged graph");
    assert_eq!(bank.state.segments.len(), 1);
    assert_eq!(bank.state.buffer_len(), 0);
    assert_eq!(bank.state.segments[0].1.len(), 97);
    assert_eq!(segment_keys(&store), 1);
    let merged = texts(&bank.recall(Query { k: Some(10), ..query("service57 port") }).unwrap())
        .iter()
        .map(|t| t.to_string())
        .collect::<Vec<_>>();
    assert_eq!(merged[0], "service57 listens on port 8057");
    let reopened = &mut open_with(&store, Rc::new(NoLlm), settings.clone());
    assert_eq!(reopened.state.segments.len(), 1);
    let second = Query { k: Some(10), ..query("service57 port") };
    assert_eq!(
        texts(&open_with(&store, Rc::new(NoLlm), settings.clone()).recall(second).unwrap())[0],
        merged[0]
    );
    let all = reopened.recall(Query { k: Some(100), ..query("service port") }).unwrap();
    assert_eq!(all.items.len(), 97);
    assert!(all.items.iter().all(|r| r.memory.id != ids[40]));

    // Past merge_max the segments stay apart, and 0 never merges.
    for merge_max in [40, 0] {
        let store = Arc::new(MemoryStore::new());
        settings.index.merge_max = merge_max;
        let mut bank = open_with(&store, Rc::new(NoLlm), settings.clone());
        for batch in 0..2 {
            let items: Vec<Memory> = (0..31)
                .map(|i| Memory { force: true, ..semantic(&format!("worker{batch}x{i} runs queue q{i}")) })
                .collect();
            bank.retain(items, NOW).unwrap();
        }
        bank.maintain(NOW).unwrap();
        assert_eq!(bank.state.segments.len(), 2, "merge_max {merge_max}");
        assert_eq!(segment_keys(&store), 2);
    }
}
