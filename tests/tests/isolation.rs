//! What the sandbox and the bank boundary promise, checked: the component imports nothing
//! beyond the store, the LLM and the WASI interfaces Rust's std needs; one bank never sees
//! another's memories, even by guessing ids.

use hindsight::runtime::component_imports;
use hindsight::types::{Error, TaskUpdate};
use hindsight::{CallError, HostConfig};
use hindsight_tests::{item, memory_host, query, NOW};

#[test]
fn the_component_imports_only_the_store_the_llm_and_std_wasi() {
    let imports = component_imports(&HostConfig::default()).unwrap();
    let allowed = |name: &str| {
        name.starts_with("hindsight:memory/store@")
            || name.starts_with("hindsight:memory/llm@")
            || name.starts_with("hindsight:memory/types@")
            || ["wasi:cli/", "wasi:io/", "wasi:clocks/", "wasi:random/", "wasi:filesystem/"]
                .iter()
                .any(|p| name.starts_with(p))
    };
    let unexpected: Vec<&String> = imports.iter().filter(|n| !allowed(n)).collect();
    assert!(unexpected.is_empty(), "unexpected imports: {unexpected:?} (all: {imports:?})");
    assert!(
        !imports.iter().any(|n| n.starts_with("wasi:sockets/") || n.starts_with("wasi:http/")),
        "{imports:?}"
    );
    // std links the filesystem interfaces, but the host grants no preopened directory, so
    // there is no file the guest can name.
    println!("component imports: {imports:#?}");
}

#[test]
fn banks_in_one_host_and_store_never_see_each_other() {
    let mut host = memory_host();
    let banks: Vec<String> = (0..12).map(|i| format!("tenant-{i}")).collect();
    let mut ids = Vec::new();
    for (i, bank) in banks.iter().enumerate() {
        let text = format!("tenant {i} stores invoices in bucket acme-{i}-invoices");
        ids.push(host.retain(bank, &[item(&text)], Some(NOW)).unwrap()[0].id.clone().unwrap());
    }
    let task = host.task_begin(&banks[0], "reconcile tenant 0 invoices", None, Some(NOW)).unwrap().id;
    host.task_update(&banks[0], &task, &TaskUpdate::Note("secret note".into()), None, Some(NOW)).unwrap();

    for (i, bank) in banks.iter().enumerate() {
        let hits = host.recall(bank, &query("which bucket holds the invoices", 50)).unwrap();
        assert_eq!(hits.items.len(), 1, "{bank} sees only its own memory");
        assert_eq!(hits.items[0].memory.id, ids[i]);
        assert_eq!(host.stats(bank).unwrap().total, 1);
        for (j, other) in ids.iter().enumerate().filter(|(j, _)| *j != i) {
            let not_found = |r: Result<_, CallError>| matches!(r, Err(CallError::Engine(Error::NotFound(_))));
            assert!(not_found(host.get(bank, other).map(|_| ())), "{bank} got {j}'s memory by id");
            assert!(not_found(host.history(bank, other).map(|_| ())));
            assert!(not_found(host.forget(bank, other, true, Some(NOW))));
            assert!(not_found(host.restore(bank, other, Some(NOW)).map(|_| ())));
            assert!(not_found(
                host.feedback(
                    bank,
                    std::slice::from_ref(other),
                    hindsight::types::FeedbackOutcome::Failure,
                    Some(NOW)
                )
                .map(|_| ())
            ));
        }
        if i > 0 {
            assert!(host.tasks(bank, true).unwrap().is_empty());
            assert!(matches!(host.task_state(bank, &task), Err(CallError::Engine(Error::NotFound(_)))));
        }
    }
    // Nothing a neighbour tried changed anything.
    for (i, bank) in banks.iter().enumerate() {
        assert_eq!(host.get(bank, &ids[i]).unwrap().confidence, 0.7);
    }
}
