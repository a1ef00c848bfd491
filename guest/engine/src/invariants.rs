//! Invariants of a bank under any sequence of operations, for the property test
//! (`guest/tests/bank_properties.rs`) and the fuzz target (`fuzz/fuzz_targets/bank_ops.rs`):
//! nothing panics or corrupts; superseded, merged, archived and hard-forgotten memories are never
//! recalled; the counts agree with what the operations acknowledged; a bank reopened from the
//! store is the same bank.

use std::collections::BTreeSet;
use std::rc::Rc;
use std::sync::Arc;

use crate::llm::NoLlm;
use crate::store::MemoryStore;
use crate::test_support::HashEmbedder;
use crate::{Bank, Error, FeedbackOutcome, Kind, Memory, Query, RetainAction, Settings, Status, Timestamp};

const NOW: Timestamp = 1_767_225_600_000;

macro_rules! check {
    ($cond:expr, $($msg:tt)+) => {
        if !$cond {
            return Err(format!($($msg)+));
        }
    };
    ($cond:expr) => {
        if !$cond {
            return Err(format!("failed: {}", stringify!($cond)));
        }
    };
}

macro_rules! check_eq {
    ($a:expr, $b:expr, $($msg:tt)+) => {{
        let (a, b) = (&$a, &$b);
        if a != b {
            return Err(format!("{:?} != {:?}: {}", a, b, format!($($msg)+)));
        }
    }};
    ($a:expr, $b:expr) => {{
        let (a, b) = (&$a, &$b);
        if a != b {
            return Err(format!("{:?} != {:?}", a, b));
        }
    }};
}

/// Statements that duplicate, merge with, contradict or ignore each other.
pub const PHRASES: &[&str] = &[
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
pub enum Text {
    Phrase(usize),
    Any(String),
}

#[derive(Debug, Clone)]
pub enum Step {
    Retain(Vec<(Text, u8, bool, bool)>),
    Recall(Text, u32, bool),
    Forget(usize, bool),
    Restore(usize),
    Feedback(Vec<usize>, u8),
    Maintain,
    Reopen,
}

fn open(store: &Arc<MemoryStore>) -> Bank {
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
    matches!(e, Error::InvalidInput(_) | Error::NotFound { .. } | Error::Limit(_))
}

/// Runs the steps (each with the time that passes before it) on a fresh bank over an in-memory
/// store, checking every invariant after every step; the first one broken, as a message.
pub fn run(steps: Vec<(Step, i64)>) -> Result<(), String> {
    let store = Arc::new(MemoryStore::new());
    let mut bank = open(&store);
    let mut now = NOW;
    let mut known: Vec<String> = Vec::new(); // every id the bank said it stored
    let mut erased: BTreeSet<String> = BTreeSet::new();
    let pick = |known: &Vec<String>, i: usize| known.get(i % known.len().max(1)).cloned();

    for (step, dt) in steps {
        now += dt;
        match step {
            Step::Retain(items) => {
                let items: Vec<Memory> = items
                    .iter()
                    .map(|(t, kind, force, parallel)| Memory {
                        kind: [None, Some(Kind::Episodic), Some(Kind::Semantic), Some(Kind::Procedural)]
                            [*kind as usize],
                        force: *force,
                        parallel: *parallel,
                        ..Memory::new(content(t))
                    })
                    .collect();
                match bank.retain(items, now) {
                    Ok(outcomes) => {
                        for o in outcomes {
                            if o.action == RetainAction::Filtered {
                                check!(o.id.is_none());
                                continue;
                            }
                            for id in o.id.iter().chain(o.related.iter()) {
                                if !known.contains(id) {
                                    known.push(id.clone());
                                }
                            }
                        }
                    }
                    Err(e) => check!(expected_error(&e), "retain: {e}"),
                }
            }
            Step::Recall(t, k, superseded) => {
                let q = Query {
                    query: content(&t),
                    k: Some(k),
                    now: Some(now),
                    include_superseded: superseded,
                    ..Default::default()
                };
                match bank.recall(q) {
                    Ok(result) => {
                        check!(result.items.len() <= k as usize);
                        for r in &result.items {
                            let m = &r.memory;
                            check!(!erased.contains(&m.id), "hard-forgotten {} recalled", m.id);
                            check!(known.contains(&m.id), "unknown id {} recalled", m.id);
                            check!(m.status != Status::Archived, "archived {} recalled", m.id);
                            if !superseded {
                                check_eq!(m.status, Status::Active, "{} recalled", m.id);
                            }
                            check!(r.score.total.is_finite());
                        }
                    }
                    Err(e) => check!(expected_error(&e), "recall: {e}"),
                }
            }
            Step::Forget(i, hard) => {
                if let Some(id) = pick(&known, i) {
                    let done = if hard { bank.erase(&id, now).map(drop) } else { bank.forget(&id, now) };
                    match done {
                        Ok(()) if hard => {
                            erased.insert(id.clone());
                            known.retain(|k| *k != id);
                            check!(matches!(bank.get(&id), Err(Error::NotFound { .. })));
                        }
                        Ok(()) => check_eq!(bank.get(&id).unwrap().status, Status::Archived),
                        Err(e) => check!(expected_error(&e), "forget: {e}"),
                    }
                }
            }
            Step::Restore(i) => {
                if let Some(id) = pick(&known, i) {
                    // A restored memory is what it was before it was archived (a superseded one
                    // stays superseded); one never archived cannot be restored.
                    let was = bank.record(&id).ok().and_then(|m| m.archived_from.map(|b| b.status));
                    match bank.restore(&id, now) {
                        Ok(m) => check_eq!(m.status, was.unwrap_or(Status::Active), "{id} restored"),
                        Err(e) => check!(expected_error(&e), "restore: {e}"),
                    }
                }
            }
            Step::Feedback(picks, outcome) => {
                let ids: Vec<String> = picks.iter().filter_map(|&i| pick(&known, i)).collect();
                let outcome =
                    [FeedbackOutcome::Success, FeedbackOutcome::Failure, FeedbackOutcome::Correction]
                        [outcome as usize];
                if let Err(e) = bank.feedback(&ids, outcome, now) {
                    check!(expected_error(&e), "feedback: {e}");
                }
            }
            Step::Maintain => {
                if let Err(e) = bank.maintain(now) {
                    check!(expected_error(&e), "maintain: {e}");
                }
            }
            Step::Reopen => {
                let before = bank.stats().unwrap();
                bank = open(&store);
                let after = bank.stats().unwrap();
                check_eq!(before, after, "a reopened bank is the same bank");
            }
        }
        let stats = bank.stats().unwrap();
        check_eq!(stats.total as usize, known.len(), "the bank holds exactly what it acknowledged");
        check_eq!(stats.active + stats.archived + stats.superseded + stats.merged, stats.total);
        for id in &known {
            let m = bank.get(id);
            check!(m.is_ok(), "acknowledged {} lost: {:?}", id, m.err());
            let m = m.unwrap();
            check!((0.0..=1.0).contains(&m.confidence) && (0.0..=1.0).contains(&m.importance), "{m:?}");
        }
    }
    Ok(())
}
