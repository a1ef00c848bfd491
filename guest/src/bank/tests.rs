use std::rc::Rc;

use super::*;
use crate::embed_api::HashEmbedder;
use crate::llm::NoLlm;
use crate::record::{Kind, NewMemory, Source, DAY_MS};
use crate::store::MemStore;

pub(super) const NOW: Timestamp = 1_767_225_600_000; // 2026-01-01

pub(super) fn open(store: &Rc<MemStore>) -> Bank {
    Bank::open(
        "test",
        Box::new(store.clone()),
        Rc::new(HashEmbedder { dimension: 64 }),
        Rc::new(NoLlm),
        Rc::new(Settings::default()),
    )
    .unwrap()
}

pub(super) fn query(text: &str) -> RecallQuery {
    RecallQuery { query: text.into(), k: Some(3), now: NOW, ..Default::default() }
}

pub(super) fn texts(result: &RecallResult) -> Vec<&str> {
    result.items.iter().map(|r| r.memory.content.as_str()).collect()
}

fn seed(bank: &mut Bank) -> Vec<String> {
    let items = [
        "pandas read_csv needs encoding utf-8-sig for Chinese CSV files",
        "the payments API times out, retry with backoff",
        "user prefers PostgreSQL for new services",
    ];
    bank.retain(items.iter().map(|t| NewMemory::text(*t)).collect(), NOW)
        .unwrap()
        .into_iter()
        .map(|o| o.id.unwrap())
        .collect()
}

#[test]
fn retained_memories_are_recalled_best_first_with_a_breakdown() {
    let store = Rc::new(MemStore::new());
    let mut bank = open(&store);
    seed(&mut bank);
    let result = bank.recall(query("CSV encoding with pandas")).unwrap();
    assert_eq!(texts(&result)[0], "pandas read_csv needs encoding utf-8-sig for Chinese CSV files");
    let s = result.items[0].score;
    let sum = s.semantic + s.lexical + s.recency + s.confidence + s.importance + s.task_match + s.source;
    assert!((s.total - sum).abs() < 1e-5);
    assert!(s.lexical > 0.0 && s.semantic > 0.0);
    assert!(result.prompt.contains("utf-8-sig"), "{}", result.prompt);
}

#[test]
fn a_reopened_bank_recalls_from_the_store() {
    let store = Rc::new(MemStore::new());
    seed(&mut open(&store));
    let mut reopened = open(&store);
    let result = reopened.recall(query("PostgreSQL services")).unwrap();
    assert_eq!(texts(&result)[0], "user prefers PostgreSQL for new services");
    assert_eq!(reopened.stats().unwrap().active, 3);
}

#[test]
fn recall_counts_access_in_the_store() {
    let store = Rc::new(MemStore::new());
    let mut bank = open(&store);
    let ids = seed(&mut bank);
    bank.recall(RecallQuery { k: Some(1), ..query("PostgreSQL") }).unwrap();
    let m = open(&store).get(&ids[2]).unwrap();
    assert_eq!(m.access_count, 1);
    assert_eq!(m.last_accessed_at, Some(NOW));
}

#[test]
fn another_instance_sees_commits_made_after_it_opened() {
    let store = Rc::new(MemStore::new());
    let mut a = open(&store);
    let mut b = open(&store);
    seed(&mut a);
    assert_eq!(b.stats().unwrap().active, 3);
    assert_eq!(
        texts(&b.recall(query("payments API")).unwrap())[0],
        "the payments API times out, retry with backoff"
    );
}

#[test]
fn soft_forget_hides_and_restore_brings_back() {
    let store = Rc::new(MemStore::new());
    let mut bank = open(&store);
    let ids = seed(&mut bank);
    bank.forget(&ids[0], false, NOW).unwrap();
    let result = bank.recall(query("CSV encoding pandas")).unwrap();
    assert!(!texts(&result).iter().any(|t| t.contains("read_csv")));
    assert_eq!(bank.get(&ids[0]).unwrap().status, Status::Archived);
    bank.restore(&ids[0], NOW).unwrap();
    let result = bank.recall(query("CSV encoding pandas")).unwrap();
    assert!(texts(&result)[0].contains("read_csv"));
}

#[test]
fn a_reopened_bank_restores_its_keyword_index_and_tokenizes_only_what_is_new() {
    let store = Rc::new(MemStore::new());
    let mut bank = open(&store);
    seed(&mut bank);
    bank.maintain(NOW).unwrap();
    assert!(store.get(&bank.key(LEXICAL_KEY)).unwrap().is_some(), "maintain saves the keyword index");
    bank.retain(vec![NewMemory::text("kubernetes pods crash on startup")], NOW).unwrap();

    let mut reopened = open(&store);
    reopened.stats().unwrap();
    assert_eq!(reopened.state.lexical.unsaved(), 1, "three restored, the new memory tokenized");
    assert_eq!(
        texts(&reopened.recall(query("kubernetes pods")).unwrap())[0],
        "kubernetes pods crash on startup"
    );
    assert_eq!(
        texts(&reopened.recall(query("PostgreSQL services")).unwrap())[0],
        "user prefers PostgreSQL for new services"
    );
}

#[test]
fn hard_forget_erases_every_byte() {
    let store = Rc::new(MemStore::new());
    let mut bank = open(&store);
    let ids = seed(&mut bank);
    bank.maintain(NOW).unwrap(); // the keyword snapshot holds the memory's words too
    assert!(store.contains_bytes(b"utf-8-sig") && store.contains_bytes(b"read_csv"));
    bank.forget(&ids[0], true, NOW).unwrap();
    assert!(!store.contains_bytes(b"utf-8-sig") && !store.contains_bytes(b"read_csv"));
    assert!(store.contains_bytes(b"postgresql"), "the snapshot is saved again with the others' words");
    let mut reopened = open(&store);
    reopened.stats().unwrap();
    assert_eq!(reopened.state.lexical.unsaved(), 0, "and restores them all");
    assert!(!store.contains_bytes(ids[0].as_bytes()));
    assert!(matches!(bank.get(&ids[0]), Err(Error::NotFound(_))));
    assert!(matches!(bank.restore(&ids[0], NOW), Err(Error::NotFound(_))));
    let result = bank.recall(query("read_csv utf-8-sig")).unwrap();
    assert!(!texts(&result).iter().any(|t| t.contains("read_csv")));
    assert_eq!(open(&store).stats().unwrap().total, 2);
}

#[test]
fn an_invalid_item_fails_the_call_and_stores_nothing() {
    let store = Rc::new(MemStore::new());
    let mut bank = open(&store);
    seed(&mut bank);
    let before = store.len();
    let err = bank
        .retain(
            vec![NewMemory::text("fine"), NewMemory { importance: Some(7.0), ..NewMemory::text("bad") }],
            NOW,
        )
        .unwrap_err();
    assert_eq!(err, Error::InvalidInput("items[1].importance: must be a number from 0 to 1, got 7".into()));
    assert_eq!(store.len(), before);
    assert_eq!(bank.stats().unwrap().active, 3);
}

#[test]
fn a_failed_commit_leaves_the_bank_as_it_was() {
    let store = Rc::new(MemStore::new());
    let mut bank = open(&store);
    let ids = seed(&mut bank);
    store.fail_next_commit.set(true);
    assert!(matches!(bank.retain(vec![NewMemory::text("lost")], NOW), Err(Error::Store(_))));
    store.fail_next_commit.set(true);
    assert!(bank.forget(&ids[0], true, NOW).is_err());
    assert_eq!(bank.stats().unwrap().active, 3);
    assert_eq!(bank.get(&ids[0]).unwrap().status, Status::Active);
}

#[test]
fn filters_apply_before_ranking() {
    let store = Rc::new(MemStore::new());
    let mut bank = open(&store);
    bank.retain(
        vec![
            NewMemory {
                kind: Some(Kind::Semantic),
                tags: vec!["db".into()],
                ..NewMemory::text("PostgreSQL is preferred")
            },
            NewMemory {
                kind: Some(Kind::Episodic),
                ..NewMemory::text("PostgreSQL migration ran for an hour")
            },
            NewMemory {
                valid_until: Some(NOW - 1),
                occurred_at: Some(NOW - 10 * DAY_MS),
                ..NewMemory::text("PostgreSQL is down for maintenance")
            },
        ],
        NOW - DAY_MS,
    )
    .unwrap();
    let only_semantic =
        bank.recall(RecallQuery { kinds: vec![Kind::Semantic], ..query("PostgreSQL") }).unwrap();
    assert_eq!(texts(&only_semantic), vec!["PostgreSQL is preferred"]);
    let tagged = bank.recall(RecallQuery { tags: vec!["db".into()], ..query("PostgreSQL") }).unwrap();
    assert_eq!(texts(&tagged), vec!["PostgreSQL is preferred"]);
    let all = bank.recall(query("PostgreSQL")).unwrap();
    assert!(
        !texts(&all).contains(&"PostgreSQL is down for maintenance"),
        "expired memories are not recalled"
    );
}

#[test]
fn recency_and_confidence_break_ties_between_equal_matches() {
    let store = Rc::new(MemStore::new());
    let mut bank = open(&store);
    bank.retain(
        vec![
            NewMemory {
                occurred_at: Some(NOW - 300 * DAY_MS),
                force: true,
                ..NewMemory::text("deploy with blue green switch")
            },
            NewMemory {
                occurred_at: Some(NOW - DAY_MS),
                source: Some(Source::UserExplicit),
                force: true,
                ..NewMemory::text("deploy with blue green switch!")
            },
        ],
        NOW,
    )
    .unwrap();
    let result = bank.recall(query("deploy blue green")).unwrap();
    assert_eq!(texts(&result)[0], "deploy with blue green switch!");
    assert!(result.items[0].score.recency > result.items[1].score.recency);
}

#[test]
fn bad_queries_are_named() {
    let store = Rc::new(MemStore::new());
    let mut bank = open(&store);
    assert!(bank.recall(query("   ")).unwrap_err().message().starts_with("query:"));
    assert!(bank.recall(RecallQuery { k: Some(0), ..query("x") }).unwrap_err().message().starts_with("k:"));
    assert!(bank
        .recall(RecallQuery { min_score: Some(f32::NAN), ..query("x") })
        .unwrap_err()
        .message()
        .starts_with("min-score:"));
    assert!(Bank::open(
        "a/b",
        Box::new(store.clone()),
        Rc::new(HashEmbedder { dimension: 8 }),
        Rc::new(NoLlm),
        Rc::new(Settings::default())
    )
    .is_err());
}

#[test]
fn banks_sharing_a_store_do_not_see_each_other() {
    let store = Rc::new(MemStore::new());
    let mut a = open(&store);
    let ids = seed(&mut a);
    let mut b = Bank::open(
        "other",
        Box::new(store.clone()),
        Rc::new(HashEmbedder { dimension: 64 }),
        Rc::new(NoLlm),
        Rc::new(Settings::default()),
    )
    .unwrap();
    assert!(b.recall(query("PostgreSQL")).unwrap().items.is_empty());
    assert!(matches!(b.get(&ids[0]), Err(Error::NotFound(_))));
    assert!(matches!(b.forget(&ids[0], true, NOW), Err(Error::NotFound(_))));
    assert_eq!(a.stats().unwrap().active, 3);
}

#[test]
fn a_caller_vector_is_used_as_given_after_checks() {
    let store = Rc::new(MemStore::new());
    let mut bank = open(&store);
    let mut v = vec![0f32; 64];
    v[5] = 2.0;
    let id =
        bank.retain(vec![NewMemory { vector: Some(v.clone()), ..NewMemory::text("alpha") }], NOW).unwrap()[0]
            .id
            .clone()
            .unwrap();
    assert_eq!(bank.state.vector(bank.state.by_id[&id]).unwrap()[5], 1.0, "normalised");
    let err =
        bank.retain(vec![NewMemory { vector: Some(vec![1.0; 3]), ..NewMemory::text("b") }], NOW).unwrap_err();
    assert!(err.message().starts_with("items[0].vector: has 3 dimensions"), "{err}");
    v[0] = f32::NAN;
    let err = bank.retain(vec![NewMemory { vector: Some(v), ..NewMemory::text("c") }], NOW).unwrap_err();
    assert!(err.message().starts_with("items[0].vector"), "{err}");
}

#[test]
fn a_reply_is_found_by_the_words_of_the_turn_before_it() {
    let store = Rc::new(MemStore::new());
    let mut bank = open(&store);
    let ids: Vec<String> = bank
        .retain(
            vec![
                NewMemory::text("Mel: did you finish the pottery class?"),
                NewMemory::text("Caroline: yes, last week, it was great"),
                NewMemory::text("Mel: what about the garden?"),
            ],
            NOW,
        )
        .unwrap()
        .into_iter()
        .map(|o| o.id.unwrap())
        .collect();
    let hits = bank.recall(RecallQuery { k: Some(3), ..query("pottery") }).unwrap();
    assert!(texts(&hits).contains(&"Caroline: yes, last week, it was great"), "{:?}", texts(&hits));
    assert_eq!(open(&store).get(&ids[1]).unwrap().follows.as_deref(), Some(ids[0].as_str()));

    // Erasing the question takes its words out of the reply's document too.
    bank.forget(&ids[0], true, NOW).unwrap();
    let hits = bank.recall(RecallQuery { k: Some(3), ..query("pottery") }).unwrap();
    assert!(hits.items.iter().all(|r| r.score.lexical == 0.0), "{:?}", texts(&hits));
}

#[test]
fn the_event_month_and_year_are_keywords() {
    let store = Rc::new(MemStore::new());
    let mut bank = open(&store);
    bank.retain(
        vec![NewMemory { occurred_at: Some(1_683_554_160_000), ..NewMemory::text("went hiking") }],
        NOW,
    )
    .unwrap();
    bank.retain(vec![NewMemory { occurred_at: Some(NOW), ..NewMemory::text("went hiking again") }], NOW)
        .unwrap();
    let hits = bank.recall(query("what happened in May 2023")).unwrap();
    assert_eq!(texts(&hits)[0], "went hiking");
}

/// A store that lets another writer commit just before this instance's next commit: the race
/// two processes on one file run into.
type Armed = Rc<std::cell::RefCell<Option<Box<dyn FnOnce()>>>>;

struct CommitsFirst {
    inner: Rc<MemStore>,
    other: Armed,
}

impl crate::store::Store for CommitsFirst {
    fn get(&self, key: &str) -> Result<Option<Vec<u8>>> {
        self.inner.get(key)
    }
    fn scan(&self, prefix: &str, after: Option<&str>, limit: u32) -> Result<Vec<(String, Vec<u8>)>> {
        self.inner.scan(prefix, after, limit)
    }
    fn commit(&self, ops: Vec<crate::store::Op>) -> Result<()> {
        if let Some(other) = self.other.borrow_mut().take() {
            other();
        }
        self.inner.commit(ops)
    }
}

#[test]
fn a_stale_instance_never_overwrites_another_instances_commit() {
    let store = Rc::new(MemStore::new());
    let mut a = open(&store);
    let fact = "the orders service uses PostgreSQL 16";
    let id = a.retain(vec![NewMemory::text(fact)], NOW).unwrap()[0].id.clone().unwrap();

    // B reads the bank, then A archives the memory before B's commit lands; B is retaining the
    // same fact again, which on its stale view would reinforce the memory and write it back
    // as active.
    let armed: Armed = Rc::default();
    let mut b = Bank::open(
        "test",
        Box::new(CommitsFirst { inner: store.clone(), other: armed.clone() }),
        Rc::new(HashEmbedder { dimension: 64 }),
        Rc::new(NoLlm),
        Rc::new(Settings::default()),
    )
    .unwrap();
    let (a_id, a_store) = (id.clone(), store.clone());
    let arm = move || {
        let mut a = open(&a_store);
        a.forget(&a_id, false, NOW + 1).unwrap();
    };
    *armed.borrow_mut() = Some(Box::new(arm));
    let outcome = b.retain(vec![NewMemory::text(fact)], NOW + 2).unwrap().remove(0);

    assert_eq!(open(&store).get(&id).unwrap().status, Status::Archived, "A's archive survived B's write");
    assert_eq!(b.get(&id).unwrap().status, Status::Archived, "B reloaded and saw it");
    assert_ne!(outcome.id.as_deref(), Some(id.as_str()), "B did not reinforce a memory A had archived");
    assert_eq!(b.stats().unwrap().sequence, 3, "one commit each, none lost: {outcome:?}");
    a.sync().unwrap();
    assert_eq!(a.stats().unwrap().total, 2);
}
