//! The lifecycle rules through the component with the real embedding model: what a user of the
//! WIT API sees. Time is passed in.

use hindsight::types::{
    FeedbackOutcome, HistoryEvent, MaintainAction, NewMemory, RecallQuery, RetainAction, Status,
};
use hindsight_tests::{item, memory_host, query, NOW};

const DAY_MS: i64 = 86_400_000;

fn retain(host: &mut hindsight::Host, m: NewMemory, now: i64) -> hindsight::types::RetainOutcome {
    host.retain("agent", &[m], Some(now)).expect("retain").remove(0)
}

#[test]
fn a_changed_preference_replaces_the_old_one_in_recall() {
    let mut host = memory_host();
    let java = retain(&mut host, item("The user prefers Java"), NOW);
    let java_id = java.id.clone().unwrap();
    let before = host.get("agent", &java_id).unwrap().confidence;
    let python = retain(&mut host, item("The user now prefers Python"), NOW + DAY_MS);
    assert_eq!(python.action, RetainAction::Superseded, "{python:?}");
    let python_id = python.id.unwrap();

    let hits = host.recall("agent", &query("Which programming language does the user prefer?", 5)).unwrap();
    let texts: Vec<&str> = hits.items.iter().map(|r| r.memory.content.as_str()).collect();
    assert_eq!(texts, vec!["The user now prefers Python"]);

    let old = host.get("agent", &java_id).unwrap();
    assert_eq!(old.status, Status::Superseded);
    assert!((old.confidence - before / 2.0).abs() < 1e-6);
    let history = host.history("agent", &python_id).unwrap();
    let events: Vec<(HistoryEvent, String)> =
        history.iter().map(|e| (e.event, e.memory.id.clone())).collect();
    assert_eq!(
        events,
        vec![
            (HistoryEvent::Created, java_id.clone()),
            (HistoryEvent::Created, python_id.clone()),
            (HistoryEvent::Superseded, java_id.clone()),
        ]
    );
    let all = host
        .recall(
            "agent",
            &RecallQuery { include_superseded: true, ..query("Which language does the user prefer?", 5) },
        )
        .unwrap();
    assert_eq!(all.items.len(), 2);
}

#[test]
fn the_same_fact_three_times_is_one_reinforced_memory() {
    let mut host = memory_host();
    let text = "The staging database runs on host db-stage-2, port 5433";
    let first = retain(&mut host, item(text), NOW);
    for day in 1..=2 {
        let again = retain(&mut host, item(text), NOW + day * DAY_MS);
        assert_eq!((again.action, &again.id), (RetainAction::Reinforced, &first.id), "{again:?}");
    }
    assert_eq!(host.stats("agent").unwrap().total, 1);
    let m = host.get("agent", first.id.as_ref().unwrap()).unwrap();
    assert_eq!((m.access_count, m.reinforcements), (2, 2));
}

#[test]
fn filler_is_dropped_with_a_reason_unless_forced() {
    let mut host = memory_host();
    let out = host
        .retain("agent", &[item("好的"), item("ok thanks"), item("导出CSV必须用utf-8-sig编码")], Some(NOW))
        .unwrap();
    assert_eq!(out[0].action, RetainAction::Filtered);
    assert!(out[0].reason.contains("filler"), "{}", out[0].reason);
    assert_eq!(out[1].action, RetainAction::Filtered);
    assert_eq!(out[2].action, RetainAction::Created);
    let forced = retain(&mut host, NewMemory { force: true, ..item("好的") }, NOW);
    assert_eq!(forced.action, RetainAction::Created);
    assert_eq!(host.stats("agent").unwrap().active, 2);
}

#[test]
fn feedback_decay_and_archive_follow_the_documented_rules() {
    let mut host = memory_host();
    let semantic = |text: &str, confidence: f32| NewMemory {
        kind: Some(hindsight::types::MemoryKind::Semantic),
        confidence: Some(confidence),
        ..item(text)
    };
    let steady = retain(&mut host, semantic("The billing service is written in Go", 0.8), NOW).id.unwrap();
    let weak =
        retain(&mut host, semantic("The nightly job sometimes uses the old mirror", 0.25), NOW).id.unwrap();
    let helped =
        retain(&mut host, semantic("Retry uploads to the artifact store with backoff", 0.7), NOW).id.unwrap();

    let m = host
        .feedback("agent", std::slice::from_ref(&helped), FeedbackOutcome::Success, Some(NOW))
        .unwrap()
        .remove(0);
    assert!((m.confidence - 0.75).abs() < 1e-6);

    let report = host.maintain("agent", Some(NOW + 180 * DAY_MS)).unwrap();
    let expected = 0.8 * 0.9f32.powi(6);
    assert!((host.get("agent", &steady).unwrap().confidence - expected).abs() < 1e-5);
    let archived: Vec<&str> =
        report.steps.iter().filter(|s| s.action == MaintainAction::Archived).map(|s| s.id.as_str()).collect();
    assert_eq!(archived, vec![weak.as_str()], "{report:?}");
    assert_eq!(host.restore("agent", &weak, Some(NOW + 181 * DAY_MS)).unwrap().status, Status::Active);
}
