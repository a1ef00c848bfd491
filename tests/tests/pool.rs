//! The MCP server's pool: each bank is served by one instance (its requests on one worker, in
//! order), banks spread over the workers, and a trap takes down only its worker's instance.

use std::sync::Arc;
use std::time::Duration;

use hindsight::pool::Pool;
use hindsight::{CallError, HostConfig, MemoryKv};
use hindsight_tests::{host_with, item, query, NOW};

fn worker_name() -> String {
    std::thread::current().name().unwrap_or("?").to_string()
}

#[tokio::test(flavor = "current_thread")]
async fn each_bank_stays_on_one_instance_and_a_trap_stops_only_its_worker() {
    let pool = Pool::new(host_with(Arc::new(MemoryKv::new()), HostConfig::default()), 2).unwrap();
    let banks = ["a", "b", "c", "d"];
    // Spread: the least-loaded worker takes each new bank.
    assert_eq!(banks.map(|b| pool.worker_of(b)), [0, 1, 0, 1]);

    // Many requests at once, interleaved across banks: each bank's run on its own worker, in
    // the order they were sent.
    let mut calls = Vec::new();
    let facts =
        ["listens on port 8080", "is deployed only with the VPN up", "rotates its logs nightly at 02:00"];
    for (round, fact) in facts.into_iter().enumerate() {
        let round = round as i64;
        for bank in banks {
            let text = format!("bank {bank}: the {bank} service {fact}");
            calls.push(pool.run(bank, move |host| {
                let id = host.retain(bank, &[item(&text)], Some(NOW + round)).unwrap()[0].id.clone();
                (bank.to_string(), worker_name(), id)
            }));
        }
    }
    let done = futures_join(calls).await;
    for (bank, worker, id) in &done {
        assert!(id.is_some(), "{bank}");
        assert_eq!(*worker, format!("hindsight-worker-{}", pool.worker_of(bank)));
    }

    // A call past its deadline on bank a's worker: a trap, reported as such.
    let trapped = pool
        .run("a", |host| {
            host.set_call_deadline(Duration::from_millis(1));
            let many: Vec<_> =
                (0..64).map(|i| item(&format!("a long batch item {i} about deadlines"))).collect();
            let result = host.retain("a", &many, Some(NOW));
            host.set_call_deadline(HostConfig::default().call_deadline);
            result
        })
        .await
        .unwrap();
    assert!(matches!(trapped, Err(CallError::Trap(_))), "{trapped:?}");

    // Only that worker lost its instance; the other kept its instance (and banks b, d) alive.
    let alive = |bank: &'static str| pool.run(bank, |host| host.guest_memory_bytes() > 0);
    assert!(!alive("a").await.unwrap());
    assert!(alive("b").await.unwrap());
    // Banks a and c (same worker) reopen from the store with everything acknowledged.
    for bank in ["a", "c", "b"] {
        let recalled =
            pool.run(bank, move |host| host.recall(bank, &query("the service", 10)).unwrap()).await.unwrap();
        let texts: Vec<_> = recalled.items.iter().map(|r| r.memory.content.clone()).collect();
        assert_eq!(texts.len(), 3, "{bank}: {texts:?}");
        assert!(texts.iter().all(|t| t.starts_with(&format!("bank {bank}: "))), "{bank}: {texts:?}");
    }
}

/// Awaits every call (`Pool::run` queued each when it was made).
async fn futures_join<T, E: std::fmt::Debug>(
    calls: Vec<impl std::future::Future<Output = Result<T, E>>>,
) -> Vec<T> {
    let mut out = Vec::new();
    for call in calls {
        out.push(call.await.unwrap());
    }
    out
}
