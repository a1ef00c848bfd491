//! The built component, driven through the host, on real input.

use hindsight::types::{Error, NewMemory, RecallQuery};
use hindsight::CallError;
use hindsight_tests::*;

const CSV_FIX: &str = "处理中文CSV时，pandas.read_csv需指定encoding='utf-8-sig'";

#[test]
fn retained_memory_is_recalled_and_survives_a_new_host_on_the_same_file() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("bank.db");
    let id = {
        let (mut host, _) = sqlite_host(&db);
        let mut items: Vec<_> = UNRELATED.iter().map(|t| item(t)).collect();
        items.push(item("Large JSON logs parse reliably with ijson streaming; json.load ran out of memory"));
        let outcomes = host.retain("agent", &items, Some(NOW)).unwrap();
        assert_eq!(outcomes.len(), items.len());
        let top = host
            .recall("agent", &query("parse a huge JSON log file without running out of memory", 3))
            .unwrap();
        assert!(top.items[0].memory.content.contains("ijson"), "{:?}", top.items[0].memory.content);
        assert!(top.prompt.contains("ijson"));
        top.items[0].memory.id.clone()
    };
    let (mut again, _) = sqlite_host(&db);
    let texts = recall_texts(&mut again, "agent", "streaming JSON parser for big logs", 3);
    assert!(texts[0].contains("ijson"), "{texts:?}");
    let m = again.get("agent", &id).unwrap();
    assert_eq!(m.access_count, 2, "each recall that returned it counted once");
}

#[test]
fn chinese_query_finds_the_chinese_csv_fix_first() {
    let mut host = memory_host();
    let mut items: Vec<_> = UNRELATED.iter().map(|t| item(t)).collect();
    items.insert(2, item(CSV_FIX));
    host.retain("zh", &items, Some(NOW)).unwrap();
    let texts = recall_texts(&mut host, "zh", "读取中文CSV乱码", 3);
    assert_eq!(texts[0], CSV_FIX, "{texts:?}");
}

#[test]
fn hard_forget_leaves_no_byte_of_the_content_in_the_database_file() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("bank.db");
    let (mut host, kv) = sqlite_host(&db);
    let secret = "The customer's API key rotation phrase is purple-elephant-42";
    let mut items: Vec<_> = UNRELATED.iter().map(|t| item(t)).collect();
    items.push(item(secret));
    let outcomes = host.retain("agent", &items, Some(NOW)).unwrap();
    let id = outcomes.last().unwrap().id.clone().unwrap();
    kv.checkpoint().unwrap();
    let contains = |needle: &str| {
        let bytes = std::fs::read(&db).unwrap();
        bytes.windows(needle.len()).any(|w| w == needle.as_bytes())
    };
    assert!(contains("purple-elephant-42"), "the test must see the content before forgetting");

    host.forget("agent", &id, true, Some(NOW)).unwrap();
    kv.checkpoint().unwrap();
    assert!(!contains("purple-elephant-42"), "content bytes remain in the database file");
    assert!(!contains(&id), "the id remains in the database file");
    let wal = db.with_extension("db-wal");
    if wal.exists() {
        let bytes = std::fs::read(&wal).unwrap();
        assert!(!bytes.windows(18).any(|w| w == b"purple-elephant-42"), "content bytes remain in the WAL");
    }
    assert!(!recall_texts(&mut host, "agent", "API key rotation phrase", 5)
        .iter()
        .any(|t| t.contains("purple")));
    match host.get("agent", &id) {
        Err(CallError::Engine(Error::NotFound(_))) => {}
        other => panic!("expected not found, got {other:?}"),
    }
    assert_eq!(host.stats("agent").unwrap().total as usize, UNRELATED.len());
}

#[test]
fn soft_forget_hides_until_restored() {
    let mut host = memory_host();
    let mut items: Vec<_> = UNRELATED.iter().map(|t| item(t)).collect();
    items.push(item(CSV_FIX));
    let id = host.retain("agent", &items, Some(NOW)).unwrap().pop().unwrap().id.unwrap();
    host.forget("agent", &id, false, Some(NOW)).unwrap();
    assert!(!recall_texts(&mut host, "agent", "读取中文CSV乱码", 5).contains(&CSV_FIX.to_string()));
    let stats = host.stats("agent").unwrap();
    assert_eq!((stats.active, stats.archived), (UNRELATED.len() as u32, 1));
    host.restore("agent", &id, Some(NOW)).unwrap();
    assert_eq!(recall_texts(&mut host, "agent", "读取中文CSV乱码", 5)[0], CSV_FIX);
}

fn invalid<T: std::fmt::Debug>(r: Result<T, CallError>) -> String {
    match r {
        Err(CallError::Engine(Error::InvalidInput(msg))) => msg,
        other => panic!("expected invalid input, got {other:?}"),
    }
}

#[test]
fn bad_input_is_named_and_loses_nothing() {
    let mut host = memory_host();
    host.retain("agent", &[item("kept before the bad calls")], Some(NOW)).unwrap();
    let msg = invalid(host.retain("agent", &[item("   ")], Some(NOW)));
    assert!(msg.starts_with("items[0].content"), "{msg}");
    let mut bad = item("importance out of range");
    bad.importance = Some(7.0);
    let msg = invalid(host.retain("agent", &[item("fine"), bad], Some(NOW)));
    assert_eq!(msg, "items[1].importance: must be a number from 0 to 1, got 7");
    let mut nan = item("nan confidence");
    nan.confidence = Some(f32::NAN);
    assert!(invalid(host.retain("agent", &[nan], Some(NOW))).starts_with("items[0].confidence"));
    let msg = invalid(host.recall("agent", &RecallQuery { k: 0, ..query("x", 1) }));
    assert!(msg.starts_with("k:"), "{msg}");
    let msg = invalid(host.retain("no/slash", &[item("x")], Some(NOW)));
    assert!(msg.starts_with("bank:"), "{msg}");
    let stats = host.stats("agent").unwrap();
    assert_eq!(stats.total, 1, "nothing from a failed call was stored, nothing before was lost");
    assert_eq!(recall_texts(&mut host, "agent", "kept before", 1), vec!["kept before the bad calls"]);
}

#[test]
fn an_instance_thrown_away_is_rebuilt_from_the_store() {
    let mut host = memory_host();
    host.retain("agent", &[item(CSV_FIX)], Some(NOW)).unwrap();
    host.discard_instance();
    assert_eq!(recall_texts(&mut host, "agent", "中文CSV", 1), vec![CSV_FIX]);
}

#[test]
fn a_call_past_its_deadline_traps_and_the_next_call_reopens_the_bank() {
    let mut host = memory_host();
    host.retain("agent", &[item(CSV_FIX)], Some(NOW)).unwrap();
    host.set_call_deadline(std::time::Duration::from_millis(1));
    match host.recall("agent", &query("中文CSV", 1)) {
        Err(CallError::Trap(e)) => assert!(e.to_string().contains("deadline"), "{e:#}"),
        other => panic!("expected a deadline trap, got {other:?}"),
    }
    host.set_call_deadline(std::time::Duration::from_secs(120));
    assert_eq!(
        recall_texts(&mut host, "agent", "中文CSV", 1),
        vec![CSV_FIX],
        "acknowledged data survived the trap"
    );
}

#[test]
fn a_memory_cap_below_what_the_model_needs_is_a_clear_error() {
    let config = hindsight::HostConfig { memory_limit_bytes: 64 << 20, ..hindsight::HostConfig::default() };
    let mut host = host_with(std::sync::Arc::new(hindsight::MemoryKv::new()), config);
    match host.stats("agent") {
        Err(CallError::Trap(e)) => {
            assert!(e.to_string().starts_with("the call needed more memory than the cap of 64 MiB"), "{e:#}")
        }
        other => panic!("expected the memory cap to stop the call, got {other:?}"),
    }
}

#[test]
fn a_call_past_the_memory_cap_is_a_clear_error_and_the_next_call_works_from_the_store() {
    let kv: std::sync::Arc<dyn hindsight::Kv> = std::sync::Arc::new(hindsight::MemoryKv::new());
    let mut first = host_with(kv.clone(), hindsight::HostConfig::default());
    first.retain("agent", &[item(CSV_FIX)], Some(NOW)).unwrap();
    let baseline = first.guest_memory_bytes();
    drop(first);

    // Room for ordinary calls (the heap left free after loading the model, and 8 MiB more), not
    // for one that carries 32 MB of text into the guest.
    let cap = baseline + (8 << 20);
    let config = hindsight::HostConfig { memory_limit_bytes: cap, ..hindsight::HostConfig::default() };
    let mut host = host_with(kv, config);
    assert_eq!(recall_texts(&mut host, "agent", "中文CSV", 1), vec![CSV_FIX]);
    let big: Vec<_> = (0..1000)
        .map(|i| NewMemory {
            force: true,
            vector: Some((0..384).map(|j| ((i * 31 + j) % 17) as f32 - 8.0).collect()),
            ..item(&format!("bulk item {i} ").repeat(32_000 / 14))
        })
        .collect();
    match host.retain("agent", &big, Some(NOW)) {
        Err(CallError::Trap(e)) => {
            assert!(e.to_string().starts_with("the call needed more memory than the cap"), "{e:#}")
        }
        other => panic!(
            "expected the memory cap to stop the call, got {:?} at {} MiB",
            other.map(|o| o.len()),
            host.guest_memory_bytes() >> 20
        ),
    }
    assert_eq!(host.stats("agent").unwrap().total, 1, "nothing of the failed call stored, nothing lost");
    assert_eq!(recall_texts(&mut host, "agent", "中文CSV", 1), vec![CSV_FIX]);
    host.retain("agent", &[item("Run the integration tests with TZ=UTC")], Some(NOW)).unwrap();
    assert_eq!(host.stats("agent").unwrap().total, 2);
}
