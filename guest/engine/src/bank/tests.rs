use std::rc::Rc;
use std::sync::{Arc, Mutex};

use hindsight_types::time::DAY_MS;
use hindsight_types::*;

use super::test_support::*;
use super::*;
use crate::llm::NoLlm;
use crate::store::MemoryStore;
use crate::test_support::{FailingStore, HashEmbedder};
use hindsight_types::Query;
use hindsight_types::{EndTask, NewTask};

fn seed(bank: &mut Bank) -> Vec<String> {
    let items = [
        "pandas read_csv needs encoding utf-8-sig for Chinese CSV files",
        "the payments API times out, retry with backoff",
        "user prefers PostgreSQL for new services",
    ];
    bank.retain(items.iter().map(|t| Memory::new(*t)).collect(), NOW)
        .unwrap()
        .into_iter()
        .map(|o| o.id.unwrap())
        .collect()
}

#[test]
fn retained_memories_are_recalled_best_first_with_a_breakdown() {
    let store = Arc::new(MemoryStore::new());
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
    let store = Arc::new(MemoryStore::new());
    seed(&mut open(&store));
    let mut reopened = open(&store);
    let result = reopened.recall(query("PostgreSQL services")).unwrap();
    assert_eq!(texts(&result)[0], "user prefers PostgreSQL for new services");
    assert_eq!(reopened.stats().unwrap().active, 3);
}

#[test]
fn recall_counts_access_in_the_store() {
    let store = Arc::new(MemoryStore::new());
    let mut bank = open(&store);
    let ids = seed(&mut bank);
    bank.recall(Query { k: Some(1), ..query("PostgreSQL") }).unwrap();
    let m = open(&store).record(&ids[2]).unwrap();
    assert_eq!(m.access_count, 1);
    assert_eq!(m.last_accessed_at, Some(NOW));
}

#[test]
fn another_instance_sees_commits_made_after_it_opened() {
    let store = Arc::new(MemoryStore::new());
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
    let store = Arc::new(MemoryStore::new());
    let mut bank = open(&store);
    let ids = seed(&mut bank);
    bank.forget(&ids[0], NOW).unwrap();
    let result = bank.recall(query("CSV encoding pandas")).unwrap();
    assert!(!texts(&result).iter().any(|t| t.contains("read_csv")));
    assert_eq!(bank.record(&ids[0]).unwrap().status, Status::Archived);
    bank.restore(&ids[0], NOW).unwrap();
    let result = bank.recall(query("CSV encoding pandas")).unwrap();
    assert!(texts(&result)[0].contains("read_csv"));
}

#[test]
fn a_reopened_bank_restores_its_keyword_index_and_tokenizes_only_what_is_new() {
    let store = Arc::new(MemoryStore::new());
    let mut bank = open(&store);
    seed(&mut bank);
    bank.maintain(NOW).unwrap();
    assert!(store.get(&bank.key(LEXICAL_KEY)).unwrap().is_some(), "maintain saves the keyword index");
    bank.retain(vec![Memory::new("kubernetes pods crash on startup")], NOW).unwrap();

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
    let store = Arc::new(MemoryStore::new());
    let mut bank = open(&store);
    let ids = seed(&mut bank);
    bank.maintain(NOW).unwrap(); // the keyword snapshot holds the memory's words too
    assert!(store.contains_bytes(b"utf-8-sig") && store.contains_bytes(b"read_csv"));
    bank.erase(&ids[0], NOW).unwrap();
    assert!(!store.contains_bytes(b"utf-8-sig") && !store.contains_bytes(b"read_csv"));
    assert!(store.contains_bytes(b"postgresql"), "the snapshot is saved again with the others' words");
    let mut reopened = open(&store);
    reopened.stats().unwrap();
    assert_eq!(reopened.state.lexical.unsaved(), 0, "and restores them all");
    assert!(!store.contains_bytes(ids[0].as_bytes()));
    assert!(matches!(bank.record(&ids[0]), Err(Error::NotFound { .. })));
    assert!(matches!(bank.restore(&ids[0], NOW), Err(Error::NotFound { .. })));
    let result = bank.recall(query("read_csv utf-8-sig")).unwrap();
    assert!(!texts(&result).iter().any(|t| t.contains("read_csv")));
    assert_eq!(open(&store).stats().unwrap().total, 2);
}

#[test]
fn an_invalid_item_fails_the_call_and_stores_nothing() {
    let store = Arc::new(MemoryStore::new());
    let mut bank = open(&store);
    seed(&mut bank);
    let before = store.len();
    let err = bank
        .retain(vec![Memory::new("fine"), Memory { importance: Some(7.0), ..Memory::new("bad") }], NOW)
        .unwrap_err();
    assert_eq!(err, Error::invalid("importance", "must be a number from 0 to 1, got 7").in_item(1));
    assert_eq!(store.len(), before);
    assert_eq!(bank.stats().unwrap().active, 3);
}

#[test]
fn a_failed_commit_leaves_the_bank_as_it_was() {
    let store = Arc::new(FailingStore::new(Arc::new(MemoryStore::new())));
    let mut bank = Bank::open(
        "test",
        Box::new(store.clone()),
        Rc::new(HashEmbedder { dimension: 64 }),
        Rc::new(NoLlm),
        Rc::new(Settings::default()),
    )
    .unwrap();
    let ids = seed(&mut bank);
    store.fail_next_commit();
    assert!(matches!(bank.retain(vec![Memory::new("lost")], NOW), Err(Error::Store(_))));
    store.fail_next_commit();
    assert!(bank.erase(&ids[0], NOW).is_err());
    assert_eq!(bank.stats().unwrap().active, 3);
    assert_eq!(bank.record(&ids[0]).unwrap().status, Status::Active);
}

#[test]
fn filters_apply_before_ranking() {
    let store = Arc::new(MemoryStore::new());
    let mut bank = open(&store);
    bank.retain(
        vec![
            Memory {
                kind: Some(Kind::Semantic),
                tags: vec!["db".into()],
                ..Memory::new("PostgreSQL is preferred")
            },
            Memory { kind: Some(Kind::Episodic), ..Memory::new("PostgreSQL migration ran for an hour") },
            Memory {
                valid_until: Some(NOW - 1),
                occurred_at: Some(NOW - 10 * DAY_MS),
                ..Memory::new("PostgreSQL is down for maintenance")
            },
        ],
        NOW - DAY_MS,
    )
    .unwrap();
    let only_semantic = bank.recall(Query { kinds: vec![Kind::Semantic], ..query("PostgreSQL") }).unwrap();
    assert_eq!(texts(&only_semantic), vec!["PostgreSQL is preferred"]);
    let tagged = bank.recall(Query { tags: vec!["db".into()], ..query("PostgreSQL") }).unwrap();
    assert_eq!(texts(&tagged), vec!["PostgreSQL is preferred"]);
    let all = bank.recall(query("PostgreSQL")).unwrap();
    assert!(
        !texts(&all).contains(&"PostgreSQL is down for maintenance"),
        "expired memories are not recalled"
    );
}

#[test]
fn recency_and_confidence_break_ties_between_equal_matches() {
    let store = Arc::new(MemoryStore::new());
    let mut bank = open(&store);
    bank.retain(
        vec![
            Memory {
                occurred_at: Some(NOW - 300 * DAY_MS),
                force: true,
                ..Memory::new("deploy with blue green switch")
            },
            Memory {
                occurred_at: Some(NOW - DAY_MS),
                source: Some(Source::UserExplicit),
                force: true,
                ..Memory::new("deploy with blue green switch!")
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
    let store = Arc::new(MemoryStore::new());
    let mut bank = open(&store);
    assert!(bank.recall(query("   ")).unwrap_err().message().starts_with("query:"));
    assert!(bank.recall(Query { k: Some(0), ..query("x") }).unwrap_err().message().starts_with("k:"));
    assert!(bank
        .recall(Query { min_score: Some(f32::NAN), ..query("x") })
        .unwrap_err()
        .message()
        .starts_with("min_score:"));
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
    let store = Arc::new(MemoryStore::new());
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
    assert!(matches!(b.record(&ids[0]), Err(Error::NotFound { .. })));
    assert!(matches!(b.erase(&ids[0], NOW), Err(Error::NotFound { .. })));
    assert_eq!(a.stats().unwrap().active, 3);
}

#[test]
fn a_caller_vector_is_used_as_given_after_checks() {
    let store = Arc::new(MemoryStore::new());
    let mut bank = open(&store);
    let mut v = vec![0f32; 64];
    v[5] = 2.0;
    let id = bank.retain(vec![Memory { vector: Some(v.clone()), ..Memory::new("alpha") }], NOW).unwrap()[0]
        .id
        .clone()
        .unwrap();
    assert_eq!(bank.state.vector(bank.state.by_id[&id]).unwrap()[5], 1.0, "normalised");
    let err = bank.retain(vec![Memory { vector: Some(vec![1.0; 3]), ..Memory::new("b") }], NOW).unwrap_err();
    assert!(err.message().starts_with("items[0].vector: has 3 dimensions"), "{err}");
    v[0] = f32::NAN;
    let err = bank.retain(vec![Memory { vector: Some(v), ..Memory::new("c") }], NOW).unwrap_err();
    assert!(err.message().starts_with("items[0].vector"), "{err}");
}

#[test]
fn a_reply_is_found_by_the_words_of_the_turn_before_it() {
    let store = Arc::new(MemoryStore::new());
    let mut bank = open(&store);
    let ids: Vec<String> = bank
        .retain(
            vec![
                Memory::new("Mel: did you finish the pottery class?").sequence(),
                Memory::new("Caroline: yes, last week, it was great").sequence(),
                Memory::new("Mel: what about the garden?").sequence(),
            ],
            NOW,
        )
        .unwrap()
        .into_iter()
        .map(|o| o.id.unwrap())
        .collect();
    let hits = bank.recall(Query { k: Some(3), ..query("pottery") }).unwrap();
    assert!(texts(&hits).contains(&"Caroline: yes, last week, it was great"), "{:?}", texts(&hits));
    assert_eq!(open(&store).record(&ids[1]).unwrap().follows.as_deref(), Some(ids[0].as_str()));

    // Erasing the question takes its words out of the reply's document too.
    bank.erase(&ids[0], NOW).unwrap();
    let hits = bank.recall(Query { k: Some(3), ..query("pottery") }).unwrap();
    assert!(hits.items.iter().all(|r| r.score.lexical == 0.0), "{:?}", texts(&hits));
}

#[test]
fn a_long_memory_neither_borrows_nor_lends_sequence_context() {
    let long = |topic: &str| {
        let filler = "and then we went through the rest of the plan step by step together ".repeat(10);
        format!("assistant: here is the {topic} plan in detail {filler}")
    };
    let store = Arc::new(MemoryStore::new());
    let mut bank = open(&store);
    bank.retain(
        vec![
            Memory::new("user: what about the kubernetes migration?").sequence(),
            Memory::new(long("database")).sequence(),
            Memory::new("user: sounds good, go ahead").sequence(),
        ],
        NOW,
    )
    .unwrap();
    let mut lexical = |q: &str, text: &str| {
        let hits = bank.recall(Query { k: Some(3), ..query(q) }).unwrap();
        hits.items.iter().find(|r| r.memory.content.starts_with(text)).map_or(0.0, |r| r.score.lexical)
    };
    assert_eq!(lexical("kubernetes", "assistant: here is"), 0.0, "the long answer borrows no question");
    assert_eq!(lexical("database", "user: sounds good"), 0.0, "the short reply borrows no long answer");
    assert!(lexical("database", "assistant: here is") > 0.0);

    // Short memories still lend: the setting turned up, the long answer counts as short.
    let mut bank = open_changed(|s| s.lexical.context_max_words = 1000);
    bank.retain(
        vec![Memory::new(long("database")).sequence(), Memory::new("user: sounds good, go ahead").sequence()],
        NOW,
    )
    .unwrap();
    let hits = bank.recall(Query { k: Some(2), ..query("database") }).unwrap();
    assert!(hits.items.iter().all(|r| r.score.lexical > 0.0), "{:?}", texts(&hits));
}

#[test]
fn items_of_one_call_are_a_sequence_only_when_marked() {
    // Finding 18: unrelated lines of one import took on each other's keywords.
    let store = Arc::new(MemoryStore::new());
    let mut bank = open(&store);
    let ids: Vec<String> = bank
        .retain(
            vec![
                Memory::new("redis keeps sessions for 30 minutes"),
                Memory::new("nginx client_max_body_size is 20m"),
            ],
            NOW,
        )
        .unwrap()
        .into_iter()
        .map(|o| o.id.unwrap())
        .collect();
    assert_eq!(open(&store).record(&ids[1]).unwrap().follows, None);
    let hits = bank.recall(Query { k: Some(2), ..query("redis") }).unwrap();
    let nginx = hits.items.iter().find(|r| r.memory.id == ids[1]);
    assert!(nginx.is_none_or(|r| r.score.lexical == 0.0), "{:?}", texts(&hits));
}

#[test]
fn the_event_month_and_year_are_keywords() {
    let store = Arc::new(MemoryStore::new());
    let mut bank = open(&store);
    bank.retain(vec![Memory { occurred_at: Some(1_683_554_160_000), ..Memory::new("went hiking") }], NOW)
        .unwrap();
    bank.retain(vec![Memory { occurred_at: Some(NOW), ..Memory::new("went hiking again") }], NOW).unwrap();
    let hits = bank.recall(query("what happened in May 2023")).unwrap();
    assert_eq!(texts(&hits)[0], "went hiking");
}

#[test]
fn a_list_question_about_one_person_prefers_what_that_person_said() {
    let turns = || {
        vec![
            Memory::new("I love painting, painting landscapes on weekends").meta("speaker", "Caroline"),
            Memory::new("we also tried painting a lake at the cabin").meta("speaker", "Melanie"),
            Memory::new("we cooked soup for dinner").meta("speaker", "Caroline"),
        ]
    };
    let ranked = |person_prior: f32, question: &str| {
        let mut bank = open_changed(|s| s.recall.person_prior = person_prior);
        bank.retain(turns(), NOW).unwrap();
        let hits = bank.recall(query(question)).unwrap();
        hits.items.iter().map(|r| (r.memory.content.clone(), r.score.total)).collect::<Vec<_>>()
    };
    let list = "What kinds of painting has Melanie done?";
    assert!(
        ranked(0.0, list)[0].0.starts_with("I love painting"),
        "without the prior the stronger match leads"
    );
    assert!(
        ranked(0.5, list)[0].0.starts_with("we also tried"),
        "the prior puts the named speaker's turn first"
    );
    // A lookup question is left to the evidence: a speaker rule must never act as a filter.
    let lookup = "When was Melanie painting?";
    let by_text = |mut hits: Vec<(String, f32)>| {
        hits.sort_by(|a, b| a.0.cmp(&b.0));
        hits
    };
    assert_eq!(
        by_text(ranked(0.5, lookup)),
        by_text(ranked(0.0, lookup)),
        "every score as without the prior"
    );
}

#[test]
fn a_question_is_embedded_without_the_speakers_it_names() {
    let similarity_to_greeting = |embed_without_names: bool| {
        let mut bank = open_changed(|s| s.recall.embed_without_names = embed_without_names);
        bank.retain(
            vec![
                Memory::new("Caroline: Hey Melanie, good to see you!"),
                Memory::new("Melanie: I painted a sunset by the lake"),
            ],
            NOW,
        )
        .unwrap();
        let hits = bank.recall(query("What did Melanie paint?")).unwrap();
        hits.items.iter().find(|r| r.memory.content.starts_with("Caroline")).unwrap().score.similarity
    };
    // The greeting shares only the name with the question: without it, nothing.
    assert!(similarity_to_greeting(false) > 0.0);
    assert_eq!(similarity_to_greeting(true), 0.0);
}

#[test]
fn a_memory_that_only_asks_counts_less_than_one_that_tells() {
    let relevance = |question_penalty: f32| {
        let mut bank = open_changed(|s| s.recall.question_penalty = question_penalty);
        bank.retain(
            vec![
                Memory::new("Wow! What got you into running marathons?"),
                Memory::new("I started running marathons after my knee healed"),
                Memory::new("the weather was rainy all week"),
            ],
            NOW,
        )
        .unwrap();
        let hits = bank.recall(query("what got you into running marathons")).unwrap();
        let of = |start: &str| {
            let r = hits.items.iter().find(|r| r.memory.content.starts_with(start)).unwrap();
            (r.score.semantic, r.score.lexical)
        };
        (of("Wow!"), of("I started"))
    };
    let ((asks_off, tells_off), (asks_on, tells_on)) = (relevance(0.0), relevance(0.35));
    assert!((asks_on.0 - 0.65 * asks_off.0).abs() < 1e-5 && (asks_on.1 - 0.65 * asks_off.1).abs() < 1e-5);
    assert!(asks_off.0 > 0.0 && asks_off.1 > 0.0, "{asks_off:?}");
    assert_eq!(tells_on, tells_off, "a statement keeps its relevance");
}

#[test]
fn a_turn_about_the_one_it_addresses_counts_less_and_a_note_does_not() {
    let relevance = |addressee_penalty: f32| {
        let mut bank = open_changed(|s| s.recall.addressee_penalty = addressee_penalty);
        let turns = [
            "Melanie: I went camping at the lake with my kids",
            "Caroline: Wow, your camping trip at the lake sounds awesome!",
        ];
        bank.retain(turns.iter().map(|t| Memory::new(*t).sequence()).collect(), NOW).unwrap();
        let notes =
            ["Tip: camping at the lake needs a permit before you go", "the weather was rainy all week"];
        bank.retain(notes.iter().map(|t| Memory::new(*t)).collect(), NOW).unwrap();
        let hits = bank.recall(query("Where did Melanie go camping at the lake?")).unwrap();
        let of = |start: &str| {
            let r = hits.items.iter().find(|r| r.memory.content.starts_with(start)).unwrap();
            (r.score.semantic, r.score.lexical)
        };
        [of("Melanie"), of("Caroline"), of("Tip")]
    };
    let ([own_off, about_off, note_off], [own_on, about_on, note_on]) = (relevance(0.0), relevance(0.3));
    assert!(about_off.0 > 0.0 && about_off.1 > 0.0, "{about_off:?}");
    assert!((about_on.0 - 0.7 * about_off.0).abs() < 1e-5 && (about_on.1 - 0.7 * about_off.1).abs() < 1e-5);
    assert_eq!(own_on, own_off, "the speaker's own news keeps its relevance");
    assert_eq!(note_on, note_off, "a note that says \"you\" is not a conversation turn");
}

#[test]
fn a_name_the_best_hit_holds_leads_to_a_memory_that_shares_no_word_with_the_question() {
    let lexical_of = |entity_expansion: f32, hubs: usize| {
        let mut bank = open_changed(|s| s.recall.entity_expansion = entity_expansion);
        let mut items = vec![
            "We moved the build server to Frankfurt and Oslo last spring".to_string(),
            "The Frankfurt datacenter bills in euros every quarter".to_string(),
            "Lunch was soup again".to_string(),
        ];
        // Oslo said in more memories than `entity_fanout`: a hub, which lends nothing.
        items.extend((0..hubs).map(|i| format!("Ticket {i} came from the team in Oslo")));
        bank.retain(items.iter().map(|t| Memory::new(t.as_str())).collect(), NOW).unwrap();
        let hits = bank.recall(query("Where did we move the build server?").k(12)).unwrap();
        let of =
            |start: &str| hits.items.iter().find(|r| r.memory.content.starts_with(start)).map(|r| r.score);
        let rank = |start: &str| hits.items.iter().position(|r| r.memory.content.starts_with(start));
        (
            of("The Frankfurt").unwrap().lexical,
            of("Ticket 0").map(|s| s.lexical),
            rank("The Frankfurt"),
            rank("Lunch"),
        )
    };
    let (off, _, _, _) = lexical_of(0.0, 9);
    assert_eq!(off, 0.0, "it shares no keyword with the question");
    let (on, hub, frankfurt, lunch) = lexical_of(0.2, 9);
    assert!((on - 0.2).abs() < 1e-5, "the only memory lent to gets the whole share: {on}");
    assert!(frankfurt < lunch, "{frankfurt:?} {lunch:?}");
    assert_eq!(hub, Some(0.0), "a name in more than entity_fanout memories lends nothing");
    let (_, few, _, _) = lexical_of(0.2, 2);
    assert!(few.is_some_and(|l| l > 0.0), "a rare name lends: {few:?}");
}

#[test]
fn co_mention_reaches_past_the_candidate_pool_and_only_to_what_recall_may_return() {
    let mut bank = open_changed(|s| s.recall.entity_expansion = 0.2);
    let mut items = vec![
        Memory::new("We moved the build server to Frankfurt last spring"),
        Memory::new("Euros are what that Frankfurt datacenter bills in"),
        Memory::new("Our Frankfurt office closed").occurred_at(NOW - 10 * DAY_MS).valid_until(NOW - DAY_MS),
    ];
    // More notes on the question's words than the candidate pool holds (50), so the memories
    // that say only "Frankfurt" are found by co-mention alone.
    items.extend((0..70).map(|i| Memory::new(format!("build note {i}: the build cache was warm"))));
    bank.retain(items, NOW).unwrap();
    let hits = bank.recall(query("Where did we move the build server?").k(5)).unwrap();
    assert!(hits.items[0].memory.content.starts_with("We moved"), "{:?}", texts(&hits));
    let lent = hits.items.iter().find(|r| r.memory.content.starts_with("Euros")).expect("lent to");
    assert!((lent.score.lexical - 0.2).abs() < 1e-5 && lent.score.semantic >= 0.0, "{:?}", lent.score);
    assert!(
        !texts(&hits).iter().any(|t| t.starts_with("Our Frankfurt")),
        "expired: recall may not return it"
    );
}

#[test]
fn a_list_question_weighs_keywords_less_and_a_lookup_does_not() {
    let lexical = |scale: f32, question: &str| {
        let mut bank = open_changed(|s| s.recall.gathering_lexical_scale = scale);
        bank.retain(
            vec![Memory::new("we went hiking and camping in the hills"), Memory::new("soup for dinner")],
            NOW,
        )
        .unwrap();
        let hits = bank.recall(query(question)).unwrap();
        let r = hits.items.iter().find(|r| r.memory.content.starts_with("we went")).unwrap();
        (r.score.lexical, r.score.semantic)
    };
    let list = "What activities have they done, hiking or camping?";
    let (full, _) = lexical(1.0, list);
    let (scaled, semantic) = lexical(0.75, list);
    assert!(full > 0.0);
    assert!((scaled - 0.75 * full).abs() < 1e-5, "{scaled} {full}");
    assert_eq!(semantic, lexical(1.0, list).1, "meaning keeps its weight");
    let lookup = "When did they go hiking?";
    assert_eq!(lexical(0.75, lookup), lexical(1.0, lookup));
}

/// A store that lets another writer commit just before this instance's next commit: the race
/// two processes on one file run into.
type Armed = Arc<Mutex<Option<Box<dyn FnOnce() + Send>>>>;

struct CommitsFirst {
    inner: Arc<MemoryStore>,
    other: Armed,
}

impl Store for CommitsFirst {
    fn get(&self, key: &str) -> std::result::Result<Option<Vec<u8>>, StoreError> {
        self.inner.get(key)
    }
    fn scan(
        &self,
        prefix: &str,
        after: Option<&str>,
        limit: u32,
    ) -> std::result::Result<Vec<(String, Vec<u8>)>, StoreError> {
        self.inner.scan(prefix, after, limit)
    }
    fn commit(&self, ops: Vec<Op>) -> std::result::Result<(), StoreError> {
        let other = self.other.lock().unwrap().take();
        if let Some(other) = other {
            other();
        }
        self.inner.commit(ops)
    }
}

/// A bank over `store` that lets whatever is `armed` commit just before its next commit.
fn behind(store: &Arc<MemoryStore>, armed: &Armed) -> Bank {
    Bank::open(
        "test",
        Box::new(CommitsFirst { inner: store.clone(), other: armed.clone() }),
        Rc::new(HashEmbedder { dimension: 64 }),
        Rc::new(NoLlm),
        Rc::new(Settings::default()),
    )
    .unwrap()
}

#[test]
fn a_stale_instance_never_overwrites_another_instances_commit() {
    let store = Arc::new(MemoryStore::new());
    let mut a = open(&store);
    let fact = "the orders service uses PostgreSQL 16";
    let id = a.retain(vec![Memory::new(fact)], NOW).unwrap()[0].id.clone().unwrap();

    // B reads the bank, then A archives the memory before B's commit lands; B is retaining the
    // same fact again, which on its stale view would reinforce the memory and write it back
    // as active.
    let armed: Armed = Arc::default();
    let mut b = behind(&store, &armed);
    let (a_id, a_store) = (id.clone(), store.clone());
    let arm = move || {
        let mut a = open(&a_store);
        a.forget(&a_id, NOW + 1).unwrap();
    };
    *armed.lock().unwrap() = Some(Box::new(arm));
    let outcome = b.retain(vec![Memory::new(fact)], NOW + 2).unwrap().remove(0);

    assert_eq!(open(&store).record(&id).unwrap().status, Status::Archived, "A's archive survived B's write");
    assert_eq!(b.record(&id).unwrap().status, Status::Archived, "B reloaded and saw it");
    assert_ne!(outcome.id.as_deref(), Some(id.as_str()), "B did not reinforce a memory A had archived");
    assert_eq!(b.stats().unwrap().sequence, 3, "one commit each, none lost: {outcome:?}");
    a.sync().unwrap();
    assert_eq!(a.stats().unwrap().total, 2);
}

#[test]
fn a_writer_that_lost_a_commit_takes_the_turn_and_releases_it() {
    let store = Arc::new(MemoryStore::new());
    let mut a = open(&store);
    a.retain(vec![Memory::new("the nightly export runs at 2am")], NOW).unwrap();
    let armed: Armed = Arc::default();
    let mut b = behind(&store, &armed);
    let a_store = store.clone();
    *armed.lock().unwrap() = Some(Box::new(move || {
        open(&a_store).retain(vec![Memory::new("reports go out on Mondays")], NOW + 1).unwrap();
    }));
    b.retain(vec![Memory::new("the staging cluster runs Kubernetes 1.30")], NOW + 2).unwrap();
    let turn = Turn::from_bytes(&store.get("b/test/turn").unwrap().expect("B took the turn")).unwrap();
    assert_eq!(turn.until, 0, "and released it once its commit landed");
    assert_eq!(open(&store).stats().unwrap().total, 3);
}

#[test]
fn a_loser_does_not_take_a_turn_another_writer_holds() {
    let store = Arc::new(MemoryStore::new());
    let theirs = Turn { holder: 7, until: hindsight_types::time::now() + 60_000 };
    store.commit(vec![Op::Put("b/test/turn".into(), theirs.to_bytes())]).unwrap();
    let mut bank = open(&store);
    assert_eq!(bank.take_turn().unwrap(), None);
    assert_eq!(Turn::from_bytes(&store.get("b/test/turn").unwrap().unwrap()), Some(theirs), "theirs stands");
    store.commit(vec![Op::Put("b/test/turn".into(), Turn { until: 0, ..theirs }.to_bytes())]).unwrap();
    let ours = bank.take_turn().unwrap().expect("a lapsed turn is free");
    assert_eq!(Turn::from_bytes(&store.get("b/test/turn").unwrap().unwrap()), Some(ours));
}

#[test]
fn a_writer_waits_for_another_writers_live_turn() {
    let store = Arc::new(MemoryStore::new());
    let until = hindsight_types::time::now() + 150;
    store.commit(vec![Op::Put("b/test/turn".into(), Turn { holder: 7, until }.to_bytes())]).unwrap();
    let mut bank = open(&store);
    bank.retain(vec![Memory::new("the billing API allows 100 requests a minute")], NOW).unwrap();
    assert!(hindsight_types::time::now() >= until, "the retain committed inside another writer's turn");
}

/// A store that answers reads from its own copy, taken at its last refresh or commit: another
/// instance's commits are seen only after `refresh` (the edge's file store works so).
struct CopyingStore {
    inner: Arc<MemoryStore>,
    copy: Mutex<Vec<(String, Vec<u8>)>>,
}

impl CopyingStore {
    fn new(inner: Arc<MemoryStore>) -> CopyingStore {
        let store = CopyingStore { inner, copy: Mutex::default() };
        store.refresh().unwrap();
        store
    }
}

impl Store for CopyingStore {
    fn get(&self, key: &str) -> std::result::Result<Option<Vec<u8>>, StoreError> {
        Ok(self.copy.lock().unwrap().iter().find(|(k, _)| k == key).map(|(_, v)| v.clone()))
    }
    fn scan(
        &self,
        prefix: &str,
        after: Option<&str>,
        limit: u32,
    ) -> std::result::Result<Vec<(String, Vec<u8>)>, StoreError> {
        let copy = self.copy.lock().unwrap();
        Ok(copy
            .iter()
            .filter(|(k, _)| k.starts_with(prefix) && after.is_none_or(|a| k.as_str() > a))
            .take(limit as usize)
            .cloned()
            .collect())
    }
    fn commit(&self, ops: Vec<Op>) -> std::result::Result<(), StoreError> {
        let result = self.inner.commit(ops);
        self.refresh()?;
        result
    }
    fn refresh(&self) -> std::result::Result<(), StoreError> {
        *self.copy.lock().unwrap() = self.inner.scan("", None, u32::MAX)?;
        Ok(())
    }
}

#[test]
fn a_writer_waiting_on_its_own_copy_of_the_store_sees_the_turn_released() {
    let store = Arc::new(MemoryStore::new());
    let turn = Turn { holder: 7, until: hindsight_types::time::now() + Turn::LASTS_MS };
    store.commit(vec![Op::Put("b/test/turn".into(), turn.to_bytes())]).unwrap();
    let mut bank = Bank::open(
        "test",
        Box::new(CopyingStore::new(store.clone())),
        Rc::new(HashEmbedder { dimension: 64 }),
        Rc::new(NoLlm),
        Rc::new(Settings::default()),
    )
    .unwrap();
    let other = store.clone();
    let releases = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(100));
        other.commit(vec![Op::Put("b/test/turn".into(), turn.released())]).unwrap();
    });
    let started = std::time::Instant::now();
    bank.retain(vec![Memory::new("the billing API allows 100 requests a minute")], NOW).unwrap();
    releases.join().unwrap();
    // Without a refresh while it waits, the writer sees the turn it saw first until it lapses.
    assert!(
        started.elapsed() < std::time::Duration::from_millis(2_000),
        "waited {:?} for a turn released after 100 ms",
        started.elapsed()
    );
}

/// A bank as hindsight 0.1 left it: `meta` without a format version, index segments in JSON.
fn downgrade_to_format_1(store: &Arc<MemoryStore>) {
    let bank = open(store);
    let mut ops = Vec::new();
    for (name, segment) in &bank.state.segments {
        let slots = &bank.state.slots;
        let json = segment.to_legacy_json(|slot| slots[slot as usize].as_ref().map(|m| m.id.clone()));
        ops.push(Op::Put(format!("b/test/s/{name}"), json));
    }
    let mut meta: serde_json::Value =
        serde_json::from_slice(&store.get("b/test/meta").unwrap().unwrap()).unwrap();
    meta.as_object_mut().unwrap().remove("format_version");
    ops.push(Op::Put("b/test/meta".into(), serde_json::to_vec(&meta).unwrap()));
    store.commit(ops).unwrap();
}

#[test]
fn a_format_1_bank_is_migrated_once_in_one_commit_and_recalls_the_same() {
    let store = Arc::new(MemoryStore::new());
    let settings = Settings {
        index: settings::IndexSettings { seal_min: 2, ..Default::default() },
        ..Default::default()
    };
    let mut bank = open_dim(&store, 64, Rc::new(NoLlm), settings.clone());
    seed(&mut bank);
    assert!(bank.maintain(NOW).unwrap().sealed > 0, "a segment to migrate");
    let before = texts(&bank.recall(query("CSV encoding with pandas")).unwrap())
        .iter()
        .map(|s| s.to_string())
        .collect::<Vec<_>>();
    downgrade_to_format_1(&store);
    let segment_key = store.scan("b/test/s/", None, 10).unwrap()[0].0.clone();
    assert!(Segment::is_legacy(&store.get(&segment_key).unwrap().unwrap()), "the test wrote a JSON segment");
    let sequence = u64::from_le_bytes(store.get("b/test/seq").unwrap().unwrap().try_into().unwrap());

    let mut reopened = open_dim(&store, 64, Rc::new(NoLlm), settings.clone());
    let after_open = u64::from_le_bytes(store.get("b/test/seq").unwrap().unwrap().try_into().unwrap());
    assert_eq!(after_open, sequence + 1, "one commit");
    assert_eq!(reopened.stats().unwrap().format_version, FORMAT_VERSION);
    assert!(!Segment::is_legacy(&store.get(&segment_key).unwrap().unwrap()), "rewritten in binary");
    let meta: serde_json::Value =
        serde_json::from_slice(&store.get("b/test/meta").unwrap().unwrap()).unwrap();
    assert_eq!(meta["format_version"], FORMAT_VERSION);
    assert_eq!(texts(&reopened.recall(query("CSV encoding with pandas")).unwrap()), before);

    open_dim(&store, 64, Rc::new(NoLlm), settings);
    let again = u64::from_le_bytes(store.get("b/test/seq").unwrap().unwrap().try_into().unwrap());
    assert_eq!(again, after_open + 1, "the recall committed; opening again migrated nothing");
}

#[test]
fn a_bank_from_a_newer_engine_is_refused_naming_both_versions_and_left_unchanged() {
    let store = Arc::new(MemoryStore::new());
    seed(&mut open(&store));
    let mut meta: serde_json::Value =
        serde_json::from_slice(&store.get("b/test/meta").unwrap().unwrap()).unwrap();
    meta["format_version"] = serde_json::json!(FORMAT_VERSION + 1);
    store.commit(vec![Op::Put("b/test/meta".into(), serde_json::to_vec(&meta).unwrap())]).unwrap();
    let before: Vec<(String, Vec<u8>)> = store.scan("", None, 10_000).unwrap();
    let err = Bank::open(
        "test",
        Box::new(store.clone()),
        Rc::new(HashEmbedder { dimension: 64 }),
        Rc::new(NoLlm),
        Rc::new(Settings::default()),
    )
    .err()
    .expect("refused");
    let message = err.to_string();
    assert!(matches!(err, Error::Unsupported(_)), "{message}");
    assert!(
        message.contains(&format!("format {}", FORMAT_VERSION + 1))
            && message.contains(&format!("up to {FORMAT_VERSION}")),
        "{message}"
    );
    assert_eq!(store.scan("", None, 10_000).unwrap(), before);
}

/// A bank whose next commit is preceded by `other` (another instance's write, made after this
/// one read what it is about to change).
fn racing(store: &Arc<MemoryStore>, other: impl FnOnce() + Send + 'static) -> Bank {
    let armed: Armed = Arc::new(Mutex::new(Some(Box::new(other))));
    Bank::open(
        "test",
        Box::new(CommitsFirst { inner: store.clone(), other: armed }),
        Rc::new(HashEmbedder { dimension: 64 }),
        Rc::new(NoLlm),
        Rc::new(Settings::default()),
    )
    .unwrap()
}

#[test]
fn two_instances_updating_one_task_lose_neither_update() {
    let store = Arc::new(MemoryStore::new());
    let id = open(&store).begin_task(&NewTask::new("migrate the orders table"), NOW).unwrap().id;
    let (a_store, a_id) = (store.clone(), id.clone());
    let mut b = racing(&store, move || {
        open(&a_store)
            .update_task(&a_id, TaskUpdate::Note("A: the table has 2M rows".into()), None, NOW)
            .unwrap();
    });
    b.update_task(&id, TaskUpdate::Note("B: run it at night".into()), None, NOW).unwrap();
    let task = open(&store).stored_task(&id).unwrap();
    assert_eq!(task.notes, ["A: the table has 2M rows", "B: run it at night"]);
    assert_eq!(task.version, 3);
    // An update made against a version that is no longer current is refused as a conflict.
    let err = b.update_task(&id, TaskUpdate::Note("late".into()), Some(2), NOW).unwrap_err();
    assert!(matches!(err, Error::Conflict(_)), "{err}");
    assert_eq!(open(&store).stored_task(&id).unwrap().notes.len(), 2);
}

#[test]
fn a_task_ended_by_two_instances_at_once_is_distilled_once() {
    let store = Arc::new(MemoryStore::new());
    let mut a = open(&store);
    let id = a.begin_task(&NewTask::new("set up CI"), NOW).unwrap().id;
    a.update_task(&id, TaskUpdate::Fact("the runner needs 4 GB of memory".into()), None, NOW).unwrap();
    let (a_store, a_id) = (store.clone(), id.clone());
    let mut b = racing(&store, move || {
        let first = open(&a_store)
            .end_task(&a_id, EndTask { outcome: Outcome::Success, detail: None, force: true }, true, NOW)
            .unwrap();
        assert_eq!(first.items.len(), 1);
    });
    let err = b
        .end_task(&id, EndTask { outcome: Outcome::Failure, detail: None, force: true }, true, NOW)
        .unwrap_err();
    assert!(err.message().contains("already ended"), "{err}");
    assert_eq!(open(&store).stored_task(&id).unwrap().outcome, Some(Outcome::Success));
    assert_eq!(open(&store).stats().unwrap().active, 1, "one distillation, one memory");
}

fn open_named(store: &Arc<MemoryStore>, id: &str) -> Bank {
    Bank::open(
        id,
        Box::new(store.clone()),
        Rc::new(crate::test_support::HashEmbedder { dimension: 64 }),
        Rc::new(crate::llm::NoLlm),
        Rc::new(Settings::default()),
    )
    .unwrap()
}

#[test]
fn recall_across_banks_ranks_one_pool_and_names_each_items_bank() {
    let store = Arc::new(MemoryStore::new());
    let mut private = open_named(&store, "agent:coder");
    let mut shared = open_named(&store, "shared");
    retain_one(&mut private, Memory::new("lunch orders go through the office chat"), NOW);
    retain_one(&mut shared, Memory::new("the X-200 firmware update fails over wifi"), NOW);
    let mut q = query("X-200 firmware update fails");
    q.k = Some(2);
    let result = crate::recall_across(&mut [&mut private, &mut shared], q.clone()).unwrap();
    assert_eq!(texts(&result)[0], "the X-200 firmware update fails over wifi", "the better match wins");
    assert_eq!(result.items[0].bank, "shared");
    assert_eq!(result.items[1].bank, "agent:coder");
    assert!(result.prompt.contains("shared, from shared] the X-200"), "{}", result.prompt);
    // Use is recorded in the bank each memory lives in.
    let again = open_named(&store, "shared");
    assert_eq!(again.state.memory(&result.items[0].memory.id).unwrap().access_count, 1);

    // The same memory in two banks scores the same: the bank listed first wins.
    let (mut a, mut b) = (open_named(&store, "user:1"), open_named(&store, "team"));
    for bank in [&mut a, &mut b] {
        retain_one(bank, Memory::new("the X-200 firmware update fails over wifi"), NOW);
    }
    let both = crate::recall_across(&mut [&mut a, &mut b], q.clone()).unwrap();
    assert_eq!(both.items[0].score.total, both.items[1].score.total);
    assert_eq!((both.items[0].bank.as_str(), both.items[1].bank.as_str()), ("user:1", "team"));
    let (mut a, mut b) = (open_named(&store, "user:2"), open_named(&store, "team2"));
    for bank in [&mut a, &mut b] {
        retain_one(bank, Memory::new("the X-200 firmware update fails over wifi"), NOW);
    }
    let flipped = crate::recall_across(&mut [&mut b, &mut a], q).unwrap();
    assert_eq!(flipped.items[0].bank, "team2");
}

#[test]
fn a_chatty_memory_is_found_by_the_sentence_a_question_is_about() {
    // Its whole vector is mostly greeting; its last sentence is what the question asks.
    let chatty = "Hey there, lovely to hear from you again. Work has been busy and the weather is grey. \
                  I went swimming with the kids yesterday.";
    let similarity = |bank: &mut Bank| {
        let hits = bank.recall(query("swimming with the kids")).unwrap();
        hits.items.iter().find(|r| r.memory.content == chatty).unwrap().score.similarity
    };
    let store = Arc::new(MemoryStore::new());
    let mut keyed = open_with(&store, Rc::new(NoLlm), Settings::default());
    keyed.retain(vec![Memory::new(chatty)], NOW).unwrap();
    let mut plain = open_changed(|s| s.recall.sentence_keys = false);
    plain.retain(vec![Memory::new(chatty)], NOW).unwrap();
    let (with_keys, without) = (similarity(&mut keyed), similarity(&mut plain));
    assert!(with_keys > without + 0.2, "with keys {with_keys}, without {without}");
    // The keys are stored with the vector: a bank opened again scores the same.
    let mut reopened = open_with(&store, Rc::new(NoLlm), Settings::default());
    assert_eq!(similarity(&mut reopened), with_keys);
    // Turned off at recall, the stored keys are ignored.
    let mut ignoring = open_with(&store, Rc::new(NoLlm), {
        let mut s = Settings::default();
        s.recall.sentence_keys = false;
        s
    });
    assert_eq!(similarity(&mut ignoring), without);
}

#[test]
fn a_host_given_vector_may_carry_sentence_keys_and_a_wrong_length_is_refused() {
    let store = Arc::new(MemoryStore::new());
    let mut bank = open_with(&store, Rc::new(NoLlm), Settings::default());
    let text = "Hey there, lovely to hear from you. I went swimming with the kids yesterday.";
    let keyed = {
        use crate::embed::TextEmbedder;
        let k = HashEmbedder { dimension: 1024 }.embed_keyed(&[text]).unwrap().remove(0);
        assert_eq!(k.sentences.len(), 2);
        let mut v = k.vector;
        k.sentences.iter().for_each(|s| v.extend_from_slice(s));
        v
    };
    let given = bank.retain(vec![Memory::new(text).vector(keyed.clone())], NOW).unwrap().remove(0);
    let embedded = {
        let mut other = open_changed(|_| {});
        other.retain(vec![Memory::new(text)], NOW).unwrap();
        other.recall(query("swimming with the kids")).unwrap().items[0].score.similarity
    };
    let hit = bank.recall(query("swimming with the kids")).unwrap().items.remove(0);
    assert_eq!(hit.memory.id, given.id.unwrap());
    assert_eq!(hit.score.similarity, embedded, "the keys the host passed count as the bank's own");

    let before = store.len();
    let err =
        bank.retain(vec![Memory::new("another text").vector(keyed[..1024 + 512].to_vec())], NOW).unwrap_err();
    assert!(err.to_string().contains("vector") && err.to_string().contains("1536"), "{err}");
    // Another model's unit vector of twice the width is not read as a vector and a key.
    let mut wide: Vec<f32> = (0..2048).map(|i| if i % 7 == 0 { 1.0 } else { 0.0 }).collect();
    crate::embed::normalize(&mut wide);
    let err = bank.retain(vec![Memory::new("another text").vector(wide)], NOW).unwrap_err();
    assert!(err.to_string().contains("2048 dimensions"), "{err}");
    assert_eq!(store.len(), before, "nothing written");
}
