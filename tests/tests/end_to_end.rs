//! The built component, driven through the library, on real input.

use std::time::Duration;

use hindsight::{
    store::{MemoryStore, Store},
    Error, Memory, Query,
};
use hindsight_tests::*;

const CSV_FIX: &str = "处理中文CSV时，pandas.read_csv需指定encoding='utf-8-sig'";

#[test]
fn retained_memory_is_recalled_and_survives_a_new_host_on_the_same_file() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("bank.db");
    let id = {
        let (hs, _) = sqlite(&db);
        let agent = bank(&hs, "agent");
        let mut items: Vec<_> = UNRELATED.iter().map(|t| item(t)).collect();
        items.push(item("Large JSON logs parse reliably with ijson streaming; json.load ran out of memory"));
        let outcomes = agent.retain(items.clone()).unwrap();
        assert_eq!(outcomes.len(), items.len());
        let top = agent.recall(query("parse a huge JSON log file without running out of memory", 3)).unwrap();
        assert!(top.items[0].memory.content.contains("ijson"), "{:?}", top.items[0].memory.content);
        assert!(top.prompt.contains("ijson"));
        top.items[0].memory.id.clone()
    };
    let (again, _) = sqlite(&db);
    let agent = bank(&again, "agent");
    let texts = recall_texts(&agent, "streaming JSON parser for big logs", 3);
    assert!(texts[0].contains("ijson"), "{texts:?}");
    let m = agent.get(&id).unwrap();
    assert_eq!(m.access_count, 2, "each recall that returned it counted once");
}

#[test]
fn chinese_query_finds_the_chinese_csv_fix_first() {
    let hs = memory();
    let zh = bank(&hs, "zh");
    let mut items: Vec<_> = UNRELATED.iter().map(|t| item(t)).collect();
    items.insert(2, item(CSV_FIX));
    zh.retain(items).unwrap();
    let texts = recall_texts(&zh, "读取中文CSV乱码", 3);
    assert_eq!(texts[0], CSV_FIX, "{texts:?}");
}

#[test]
fn hard_forget_leaves_no_byte_of_the_content_in_the_database_file() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("bank.db");
    let (hs, store) = sqlite(&db);
    let agent = bank(&hs, "agent");
    let secret = "The customer's API key rotation phrase is purple-elephant-42";
    let mut items: Vec<_> = UNRELATED.iter().map(|t| item(t)).collect();
    items.push(item(secret));
    let outcomes = agent.retain(items).unwrap();
    let id = outcomes.last().unwrap().id.clone().unwrap();
    store.checkpoint().unwrap();
    let contains = |needle: &str| {
        let bytes = std::fs::read(&db).unwrap();
        bytes.windows(needle.len()).any(|w| w == needle.as_bytes())
    };
    assert!(contains("purple-elephant-42"), "the test must see the content before forgetting");

    agent.forget_hard(&id).unwrap();
    store.checkpoint().unwrap();
    assert!(!contains("purple-elephant-42"), "content bytes remain in the database file");
    assert!(!contains(&id), "the id remains in the database file");
    let wal = db.with_extension("db-wal");
    if wal.exists() {
        let bytes = std::fs::read(&wal).unwrap();
        assert!(!bytes.windows(18).any(|w| w == b"purple-elephant-42"), "content bytes remain in the WAL");
    }
    assert!(!recall_texts(&agent, "API key rotation phrase", 5).iter().any(|t| t.contains("purple")));
    match agent.get(&id) {
        Err(Error::NotFound { what, id: missing, .. }) => {
            assert_eq!((what.as_str(), missing.as_str()), ("memory", id.as_str()))
        }
        other => panic!("expected not-found, got {other:?}"),
    }
    assert_eq!(agent.stats().unwrap().total as usize, UNRELATED.len());
}

#[test]
fn soft_forget_hides_until_restored() {
    let hs = memory();
    let agent = bank(&hs, "agent");
    let mut items: Vec<_> = UNRELATED.iter().map(|t| item(t)).collect();
    items.push(item(CSV_FIX));
    let id = agent.retain(items).unwrap().pop().unwrap().id.unwrap();
    agent.forget(&id).unwrap();
    assert!(!recall_texts(&agent, "读取中文CSV乱码", 5).contains(&CSV_FIX.to_string()));
    let stats = agent.stats().unwrap();
    assert_eq!((stats.active, stats.archived), (UNRELATED.len() as u32, 1));
    agent.restore(&id).unwrap();
    assert_eq!(recall_texts(&agent, "读取中文CSV乱码", 5)[0], CSV_FIX);
}

/// The invalid field an error names: (item, field, message).
fn invalid<T: std::fmt::Debug>(r: Result<T, Error>) -> (Option<usize>, String, String) {
    match r {
        Err(Error::InvalidInput(f)) => (f.item, f.field, f.message),
        other => panic!("expected invalid input, got {other:?}"),
    }
}

#[test]
fn bad_input_is_named_by_item_and_field_and_loses_nothing() {
    let hs = memory();
    let agent = bank(&hs, "agent");
    agent.retain([item("kept before the bad calls")]).unwrap();
    let (ix, field, _) = invalid(agent.retain([item("   ")]));
    assert_eq!((ix, field.as_str()), (Some(0), "content"));
    let bad = item("importance out of range").importance(7.0);
    let (ix, field, message) = invalid(agent.retain([item("fine"), bad]));
    assert_eq!(
        (ix, field.as_str(), message.as_str()),
        (Some(1), "importance", "must be a number from 0 to 1, got 7")
    );
    let (ix, field, _) = invalid(agent.retain([item("nan confidence").confidence(f32::NAN)]));
    assert_eq!((ix, field.as_str()), (Some(0), "confidence"));
    let (ix, field, _) = invalid(agent.recall(query("x", 0)));
    assert_eq!((ix, field.as_str()), (None, "k"));
    let (_, field, _) = invalid(hs.bank("no/slash"));
    assert_eq!(field, "bank");
    let stats = agent.stats().unwrap();
    assert_eq!(stats.total, 1, "nothing from a failed call was stored, nothing before was lost");
    assert_eq!(recall_texts(&agent, "kept before", 1), vec!["kept before the bad calls"]);
}

#[test]
fn recall_without_k_takes_the_settings_default() {
    let hs = open(builder().memory().settings(|s| s.recall.default_k = 2));
    let agent = bank(&hs, "agent");
    agent.retain(UNRELATED.iter().map(|t| item(t))).unwrap();
    assert_eq!(agent.recall(Query::new("deploy tests service")).unwrap().items.len(), 2);
}

#[test]
fn an_instance_thrown_away_is_rebuilt_from_the_store() {
    let hs = memory();
    let agent = bank(&hs, "agent");
    agent.retain([item(CSV_FIX)]).unwrap();
    hs.reset().unwrap();
    assert_eq!(recall_texts(&agent, "中文CSV", 1), vec![CSV_FIX]);
}

#[test]
fn a_call_past_its_deadline_traps_and_the_next_call_reopens_the_bank() {
    let store = std::sync::Arc::new(MemoryStore::new());
    bank(&over(store.clone()), "agent").retain([item(CSV_FIX)]).unwrap();
    let hurried = open(builder().store(store.clone()).deadline(Duration::from_millis(1)));
    match bank(&hurried, "agent").recall(query("中文CSV", 1)) {
        Err(Error::Trap(e)) => assert!(e.contains("deadline of 1 ms"), "{e}"),
        other => panic!("expected a deadline trap, got {other:?}"),
    }
    assert_eq!(
        recall_texts(&bank(&over(store), "agent"), "中文CSV", 1),
        vec![CSV_FIX],
        "acknowledged data survived the trap"
    );
}

#[test]
fn a_memory_cap_below_what_the_model_needs_is_a_clear_error() {
    let hs = open(builder().memory().memory_limit(64 << 20));
    match bank(&hs, "agent").stats() {
        Err(Error::Trap(e)) => {
            assert!(e.starts_with("the call needed more memory than the cap of 64 MiB"), "{e}")
        }
        other => panic!("expected the memory cap to stop the call, got {other:?}"),
    }
}

#[test]
fn a_call_past_the_memory_cap_is_a_clear_error_and_the_next_call_works_from_the_store() {
    let store = std::sync::Arc::new(MemoryStore::new());
    let first = over(store.clone());
    bank(&first, "agent").retain([item(CSV_FIX)]).unwrap();
    let baseline = first.instance_memory_bytes().unwrap();
    drop(first);

    // Room for ordinary calls (the heap left free after loading the model, and 8 MiB more), not
    // for one that carries 32 MB of text into the guest.
    let hs = open(builder().store(store).memory_limit(baseline + (8 << 20)));
    let agent = bank(&hs, "agent");
    assert_eq!(recall_texts(&agent, "中文CSV", 1), vec![CSV_FIX]);
    let big: Vec<Memory> = (0..1000)
        .map(|i| {
            item(&format!("bulk item {i} ").repeat(32_000 / 14))
                .vector((0..384).map(|j| ((i * 31 + j) % 17) as f32 - 8.0).collect())
                .force()
        })
        .collect();
    match agent.retain(big) {
        Err(Error::Trap(e)) => assert!(e.starts_with("the call needed more memory than the cap"), "{e}"),
        other => panic!(
            "expected the memory cap to stop the call, got {:?} at {} MiB",
            other.map(|o| o.len()),
            hs.instance_memory_bytes().unwrap() >> 20
        ),
    }
    assert_eq!(agent.stats().unwrap().total, 1, "nothing of the failed call stored, nothing lost");
    assert_eq!(recall_texts(&agent, "中文CSV", 1), vec![CSV_FIX]);
    agent.retain([item("Run the integration tests with TZ=UTC")]).unwrap();
    assert_eq!(agent.stats().unwrap().total, 2);
}
