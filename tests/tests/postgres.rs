//! Several hosts, one memory: the PostgreSQL store shared by two `Hindsight`s (each with its own
//! pool of instances, as two machines would have), and a `hindsight retain --file` killed with
//! SIGKILL while it writes through it. Skipped, saying why, when no PostgreSQL server is there.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

use hindsight::{Hindsight, Memory};
use hindsight_tests::{bank, hindsight_bin, open, postgres_database, query, Rng};
use serde_json::{json, Value};

fn host(url: &str) -> Hindsight {
    open(hindsight_tests::builder().postgres_pool(url, 3).workers(2))
}

#[test]
fn a_write_through_one_host_is_recalled_through_the_other_and_concurrent_writers_lose_nothing() {
    let Some(url) = postgres_database("two_hosts") else { return };
    let (a, b) = (host(&url), host(&url));
    // b reads the bank before a writes, so the recall below must notice a's commit.
    assert_eq!(bank(&b, "team").stats().unwrap().total, 0);
    bank(&a, "team")
        .retain([Memory::new("pandas.read_csv needs encoding='utf-8-sig' for the vendor's CSV")])
        .unwrap();
    let hits = bank(&b, "team").recall(query("garbled headers when reading a CSV", 1)).unwrap();
    assert!(hits.items[0].memory.content.contains("utf-8-sig"), "{:?}", hits.items);

    // Two writers on each host, all on one bank: every acknowledged id is there afterwards.
    let acked: Vec<String> = std::thread::scope(|s| {
        let writers: Vec<_> = (0..4)
            .map(|w| {
                let hs = if w % 2 == 0 { a.clone() } else { b.clone() };
                s.spawn(move || {
                    let mut rng = Rng::new(w + 1);
                    let mut ids = Vec::new();
                    for i in 0..12 {
                        let vector: Vec<f32> = (0..384).map(|_| rng.unit() as f32).collect();
                        let m = Memory::new(format!("writer {w} note {i}: build {} passed", rng.below(1000)))
                            .vector(vector)
                            .force();
                        ids.push(bank(&hs, "team").retain([m]).unwrap().remove(0).id.expect("stored"));
                    }
                    ids
                })
            })
            .collect();
        writers.into_iter().flat_map(|w| w.join().unwrap()).collect()
    });
    let fresh = host(&url);
    let team = bank(&fresh, "team");
    for id in &acked {
        team.get(id).unwrap_or_else(|e| panic!("acknowledged {id} is lost: {e}"));
    }
    assert_eq!(team.stats().unwrap().total as usize, acked.len() + 1);
    assert_eq!(acked.iter().collect::<BTreeSet<_>>().len(), 48);
}

#[test]
fn a_retain_file_killed_mid_write_loses_no_acknowledged_id() {
    let Some(url) = postgres_database("killed") else { return };
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("items.jsonl");
    let mut f = std::fs::File::create(&input).unwrap();
    for i in 0..600u64 {
        let mut rng = Rng::new(i + 7);
        let vector: Vec<f64> = (0..384).map(|_| (rng.unit() * 1e4).round() / 1e4).collect();
        writeln!(f, "{}", json!({"text": format!("kill-test item {i}"), "vector": vector, "force": true}))
            .unwrap();
    }
    drop(f);
    let mut child = Command::new(hindsight_bin())
        .args(["--db", &url, "--bank", "killed", "--json", "retain", "--batch", "20", "--file"])
        .arg(&input)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut acked = Vec::new();
    for text in BufReader::new(child.stdout.take().unwrap()).lines() {
        let ack: Value = serde_json::from_str(&text.unwrap()).unwrap();
        acked.push(ack["id"].as_str().unwrap().to_string());
        if acked.len() == 150 {
            std::thread::sleep(Duration::from_millis(7));
            child.kill().unwrap(); // SIGKILL
            break;
        }
    }
    child.wait().unwrap();
    assert_eq!(acked.len(), 150, "the run acknowledged 150 items before it was killed");
    let hs = host(&url);
    let killed = bank(&hs, "killed");
    for id in &acked {
        killed.get(id).unwrap_or_else(|e| panic!("acknowledged {id} is lost: {e}"));
    }
    assert!(killed.stats().unwrap().total as usize >= acked.len());
}

#[test]
fn a_bad_postgres_url_is_a_clear_error_that_never_shows_the_password() {
    let out = Command::new(hindsight_bin())
        .args(["--db", "postgres://bob:s3cret@127.0.0.1:1/mem", "--json", "stats"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("postgres://bob@127.0.0.1:1/mem"), "{err}");
    assert!(err.contains("connect"), "{err}");
    assert!(!err.contains("s3cret"), "{err}");
}
