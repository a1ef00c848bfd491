//! The lifecycle rules through the component with the real embedding model: what a user of the
//! API sees. Time is passed in.

use hindsight::{
    types::{FeedbackOutcome, HistoryEvent, MaintainAction, RetainAction, RetainOutcome, Status},
    Bank, Kind, Memory,
};
use hindsight_tests::*;

fn retain(agent: &Bank, m: Memory, now: i64) -> RetainOutcome {
    agent.at(now).retain([m]).expect("retain").remove(0)
}

#[test]
fn a_changed_preference_replaces_the_old_one_in_recall() {
    let hs = memory();
    let agent = bank(&hs, "agent");
    let java = retain(&agent, item("The user prefers Java"), NOW);
    let java_id = java.id.clone().unwrap();
    let before = agent.get(&java_id).unwrap().confidence;
    let python = retain(&agent, item("The user now prefers Python"), NOW + DAY_MS);
    assert_eq!(python.action, RetainAction::Superseded, "{python:?}");
    let python_id = python.id.unwrap();

    let hits = agent.recall(query("Which programming language does the user prefer?", 5)).unwrap();
    let texts: Vec<&str> = hits.items.iter().map(|r| r.memory.content.as_str()).collect();
    assert_eq!(texts, vec!["The user now prefers Python"]);

    let old = agent.get(&java_id).unwrap();
    assert_eq!(old.status, Status::Superseded);
    assert!((old.confidence - before / 2.0).abs() < 1e-6);
    let history = agent.history(&python_id).unwrap();
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
    let all = agent.recall(query("Which language does the user prefer?", 5).include_superseded()).unwrap();
    assert_eq!(all.items.len(), 2);
}

#[test]
fn the_same_fact_three_times_is_one_reinforced_memory() {
    let hs = memory();
    let agent = bank(&hs, "agent");
    let text = "The staging database runs on host db-stage-2, port 5433";
    let first = retain(&agent, item(text), NOW);
    for day in 1..=2 {
        let again = retain(&agent, item(text), NOW + day * DAY_MS);
        assert_eq!((again.action, &again.id), (RetainAction::Reinforced, &first.id), "{again:?}");
    }
    assert_eq!(agent.stats().unwrap().total, 1);
    let m = agent.get(first.id.as_ref().unwrap()).unwrap();
    assert_eq!((m.access_count, m.reinforcements), (2, 2));
}

#[test]
fn filler_is_dropped_with_a_reason_unless_forced() {
    let hs = memory();
    let agent = bank(&hs, "agent");
    let out = agent.retain([item("好的"), item("ok thanks"), item("导出CSV必须用utf-8-sig编码")]).unwrap();
    assert_eq!(out[0].action, RetainAction::Filtered);
    assert!(out[0].reason.contains("filler"), "{}", out[0].reason);
    assert_eq!(out[1].action, RetainAction::Filtered);
    assert_eq!(out[2].action, RetainAction::Created);
    let forced = retain(&agent, item("好的").force(), NOW);
    assert_eq!(forced.action, RetainAction::Created);
    assert_eq!(agent.stats().unwrap().active, 2);
}

#[test]
fn feedback_decay_and_archive_follow_the_documented_rules() {
    let hs = memory();
    let agent = bank(&hs, "agent");
    let semantic = |text: &str, confidence: f32| item(text).kind(Kind::Semantic).confidence(confidence);
    let steady = retain(&agent, semantic("The billing service is written in Go", 0.8), NOW).id.unwrap();
    let weak =
        retain(&agent, semantic("The nightly job sometimes uses the old mirror", 0.25), NOW).id.unwrap();
    let helped =
        retain(&agent, semantic("Retry uploads to the artifact store with backoff", 0.7), NOW).id.unwrap();

    let m = agent.feedback([helped], FeedbackOutcome::Success).unwrap().remove(0);
    assert!((m.confidence - 0.75).abs() < 1e-6);

    let report = agent.at(NOW + 180 * DAY_MS).maintain().unwrap();
    let expected = 0.8 * 0.9f32.powi(6);
    assert!((agent.get(&steady).unwrap().confidence - expected).abs() < 1e-5);
    let archived: Vec<&str> =
        report.steps.iter().filter(|s| s.action == MaintainAction::Archived).map(|s| s.id.as_str()).collect();
    assert_eq!(archived, vec![weak.as_str()], "{report:?}");
    assert_eq!(agent.at(NOW + 181 * DAY_MS).restore(&weak).unwrap().status, Status::Active);
}
