//! Sequences of bank operations with arbitrary inputs and times, checked against invariants:
//! nothing panics or corrupts; superseded, merged, archived and hard-forgotten memories are
//! never recalled; the counts agree with what the operations said; a bank reopened from the
//! store is the same bank. `PROPTEST_CASES=5000 cargo test -p hindsight-guest --test
//! bank_properties` for a longer run.

use std::collections::BTreeSet;
use std::rc::Rc;

use hindsight_guest::embed_api::HashEmbedder;
use hindsight_guest::llm::NoLlm;
use hindsight_guest::store::MemStore;
use hindsight_guest::{
    Bank, Error, FeedbackOutcome, Kind, NewMemory, RecallQuery, RetainAction, Settings, Status, Timestamp,
};
use proptest::prelude::*;

const NOW: Timestamp = 1_767_225_600_000;
const DAY: Timestamp = 86_400_000;

/// Statements that duplicate, merge with, contradict or ignore each other.
const PHRASES: &[&str] = &[
    "use PostgreSQL for the orders service",
    "use MySQL for the orders service after all",
    "the user prefers Java for backend work",
    "the user now prefers Python for backend work",
    "never deploy on Fridays",
    "retry the payments API 3 times with backoff",
    "retry the payments API 5 times with backoff",
    "pandas read_csv needs encoding utf-8-sig for the vendor CSV",
    "好的",
    "ok thanks",
    "必须在周一前提交报告",
    "不要在周五部署",
];

#[derive(Debug, Clone)]
enum Text {
    Phrase(usize),
    Any(String),
}

#[derive(Debug, Clone)]
enum Step {
    Retain(Vec<(Text, u8, bool, bool)>),
    Recall(Text, u32, bool),
    Forget(usize, bool),
    Restore(usize),
    Feedback(Vec<usize>, u8),
    Maintain,
    Reopen,
}

fn text() -> impl Strategy<Value = Text> {
    prop_oneof![
        4 => (0..PHRASES.len()).prop_map(Text::Phrase),
        1 => ".{0,40}".prop_map(Text::Any),
    ]
}

fn step() -> impl Strategy<Value = (Step, i64)> {
    let step = prop_oneof![
        4 => prop::collection::vec((text(), 0u8..4, any::<bool>(), prop::bool::weighted(0.1)), 1..4).prop_map(Step::Retain),
        3 => (text(), 0u32..12, prop::bool::weighted(0.2)).prop_map(|(t, k, s)| Step::Recall(t, k, s)),
        1 => (any::<usize>(), any::<bool>()).prop_map(|(i, hard)| Step::Forget(i, hard)),
        1 => any::<usize>().prop_map(Step::Restore),
        1 => (prop::collection::vec(any::<usize>(), 0..3), 0u8..3).prop_map(|(ids, o)| Step::Feedback(ids, o)),
        1 => Just(Step::Maintain),
        1 => Just(Step::Reopen),
    ];
    // Time moves mostly forward, by up to a year, and sometimes back.
    (step, -3 * DAY..400 * DAY)
}

fn open(store: &Rc<MemStore>) -> Bank {
    Bank::open(
        "prop",
        Box::new(store.clone()),
        Rc::new(HashEmbedder { dimension: 32 }),
        Rc::new(NoLlm),
        Rc::new(Settings::default()),
    )
    .expect("the bank opens from whatever the store holds")
}

fn content(t: &Text) -> String {
    match t {
        Text::Phrase(i) => PHRASES[*i].to_string(),
        Text::Any(s) => s.clone(),
    }
}

/// Errors a caller can cause; anything else (corrupt, store, model) is a bug.
fn expected_error(e: &Error) -> bool {
    matches!(e, Error::InvalidInput(_) | Error::NotFound(_) | Error::Limit(_))
}

fn run(steps: Vec<(Step, i64)>) -> Result<(), TestCaseError> {
    let store = Rc::new(MemStore::new());
    let mut bank = open(&store);
    let mut now = NOW;
    let mut known: Vec<String> = Vec::new(); // every id the bank said it stored
    let mut erased: BTreeSet<String> = BTreeSet::new();
    let pick = |known: &Vec<String>, i: usize| known.get(i % known.len().max(1)).cloned();

    for (step, dt) in steps {
        now += dt;
        match step {
            Step::Retain(items) => {
                let items: Vec<NewMemory> = items
                    .iter()
                    .map(|(t, kind, force, parallel)| NewMemory {
                        kind: [None, Some(Kind::Episodic), Some(Kind::Semantic), Some(Kind::Procedural)]
                            [*kind as usize],
                        force: *force,
                        parallel: *parallel,
                        ..NewMemory::text(content(t))
                    })
                    .collect();
                match bank.retain(items, now) {
                    Ok(outcomes) => {
                        for o in outcomes {
                            if o.action == RetainAction::Filtered {
                                prop_assert!(o.id.is_none());
                                continue;
                            }
                            for id in o.id.iter().chain(o.related.iter()) {
                                if !known.contains(id) {
                                    known.push(id.clone());
                                }
                            }
                        }
                    }
                    Err(e) => prop_assert!(expected_error(&e), "retain: {e}"),
                }
            }
            Step::Recall(t, k, superseded) => {
                let q = RecallQuery {
                    query: content(&t),
                    k: Some(k),
                    now,
                    include_superseded: superseded,
                    ..Default::default()
                };
                match bank.recall(q) {
                    Ok(result) => {
                        prop_assert!(result.items.len() <= k as usize);
                        for r in &result.items {
                            let m = &r.memory;
                            prop_assert!(!erased.contains(&m.id), "hard-forgotten {} recalled", m.id);
                            prop_assert!(known.contains(&m.id), "unknown id {} recalled", m.id);
                            prop_assert!(m.status != Status::Archived, "archived {} recalled", m.id);
                            if !superseded {
                                prop_assert_eq!(m.status, Status::Active, "{} recalled", m.id);
                            }
                            prop_assert!(r.score.total.is_finite());
                        }
                    }
                    Err(e) => prop_assert!(expected_error(&e), "recall: {e}"),
                }
            }
            Step::Forget(i, hard) => {
                if let Some(id) = pick(&known, i) {
                    match bank.forget(&id, hard, now) {
                        Ok(()) if hard => {
                            erased.insert(id.clone());
                            known.retain(|k| *k != id);
                            prop_assert!(matches!(bank.get(&id), Err(Error::NotFound(_))));
                        }
                        Ok(()) => prop_assert_eq!(bank.get(&id).unwrap().status, Status::Archived),
                        Err(e) => prop_assert!(expected_error(&e), "forget: {e}"),
                    }
                }
            }
            Step::Restore(i) => {
                if let Some(id) = pick(&known, i) {
                    match bank.restore(&id, now) {
                        Ok(m) => prop_assert_eq!(m.status, Status::Active),
                        Err(e) => prop_assert!(expected_error(&e), "restore: {e}"),
                    }
                }
            }
            Step::Feedback(picks, outcome) => {
                let ids: Vec<String> = picks.iter().filter_map(|&i| pick(&known, i)).collect();
                let outcome =
                    [FeedbackOutcome::Success, FeedbackOutcome::Failure, FeedbackOutcome::Correction]
                        [outcome as usize];
                if let Err(e) = bank.feedback(&ids, outcome, now) {
                    prop_assert!(expected_error(&e), "feedback: {e}");
                }
            }
            Step::Maintain => {
                if let Err(e) = bank.maintain(now) {
                    prop_assert!(expected_error(&e), "maintain: {e}");
                }
            }
            Step::Reopen => {
                let before = bank.stats().unwrap();
                bank = open(&store);
                let after = bank.stats().unwrap();
                prop_assert_eq!(before, after, "a reopened bank is the same bank");
            }
        }
        let stats = bank.stats().unwrap();
        prop_assert_eq!(stats.total as usize, known.len(), "the bank holds exactly what it acknowledged");
        prop_assert_eq!(stats.active + stats.archived + stats.superseded + stats.merged, stats.total);
        for id in &known {
            let m = bank.get(id);
            prop_assert!(m.is_ok(), "acknowledged {} lost: {:?}", id, m.err());
            let m = m.unwrap();
            prop_assert!((0.0..=1.0).contains(&m.confidence) && (0.0..=1.0).contains(&m.importance), "{m:?}");
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn bank_operations_keep_their_promises(steps in prop::collection::vec(step(), 1..40)) {
        run(steps)?;
    }
}
