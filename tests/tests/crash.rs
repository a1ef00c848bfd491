//! Crash safety: `hindsight` processes killed with SIGKILL at random moments while retaining,
//! maintaining and hard-forgetting. Whatever was acknowledged survives, the database is intact,
//! and the reopened bank's index holds exactly the store's active memories.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hindsight::{types::Status, Hindsight, Query};
use hindsight_tests::{hindsight_bin, Rng};
use serde_json::{json, Value};

const ITEMS: usize = 10_000;
const DIM: usize = 384;
const BANK: &str = "crash";

/// Line i of the input: its own text and vector (given, so the test measures commits, not embedding).
fn line(i: usize) -> String {
    let mut rng = Rng::new(0x9e37_79b9_7f4a_7c15 ^ (i as u64 + 1));
    let vector: Vec<f64> = (0..DIM).map(|_| (rng.unit() * 1e4).round() / 1e4).collect();
    json!({"text": format!("crash-test item {i}: step {} of the export", i * 7 % 1000), "vector": vector, "force": true})
        .to_string()
}

fn hindsight(db: &Path) -> Command {
    let mut cmd = Command::new(hindsight_bin());
    cmd.arg("--db").arg(db).arg("--bank").arg(BANK);
    cmd
}

/// Runs `retain --file --json` over `lines` and kills it once `kill_after` acknowledgements have
/// arrived (never, if None), plus a random few milliseconds so the kill lands anywhere in a batch.
/// Returns the acknowledged (line, id) pairs.
fn retain_run(
    db: &Path,
    dir: &Path,
    lines: &[usize],
    kill_after: Option<usize>,
    rng: &mut Rng,
) -> Vec<(usize, String)> {
    let input = dir.join("items.jsonl");
    let mut f = std::io::BufWriter::new(std::fs::File::create(&input).unwrap());
    for &i in lines {
        writeln!(f, "{}", line(i)).unwrap();
    }
    f.flush().unwrap();
    drop(f);
    let mut child = hindsight(db)
        .args(["--json", "retain", "--file"])
        .arg(&input)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("hindsight runs");
    let acks = Arc::new(Mutex::new(Vec::new()));
    let reader = {
        let acks = acks.clone();
        let stdout = child.stdout.take().unwrap();
        let lines = lines.to_vec();
        std::thread::spawn(move || {
            for text in BufReader::new(stdout).lines() {
                let Ok(text) = text else { break };
                let ack: Value = serde_json::from_str(&text).expect("each ack is one JSON line");
                let number = ack["line"].as_u64().unwrap() as usize;
                acks.lock().unwrap().push((lines[number - 1], ack["id"].as_str().unwrap().to_string()));
            }
        })
    };
    if let Some(n) = kill_after {
        while acks.lock().unwrap().len() < n {
            if child.try_wait().unwrap().is_some() {
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        std::thread::sleep(Duration::from_millis(rng.below(40)));
        child.kill().unwrap(); // SIGKILL
    }
    let status = child.wait().unwrap();
    reader.join().unwrap();
    if kill_after.is_none() {
        assert!(status.success(), "the last run completes");
    }
    let acks = acks.lock().unwrap().clone();
    acks
}

fn integrity_ok(db: &Path) {
    let conn = rusqlite::Connection::open(db).unwrap();
    let result: String = conn.query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
    assert_eq!(result, "ok");
}

fn open(db: &Path) -> Hindsight {
    hindsight_tests::open(hindsight_tests::builder().sqlite(db))
}

/// Every acknowledged id is stored; the stats agree with the store's records; and a sample of
/// memories is found by its own vector, i.e. the reopened index holds them.
fn check(db: &Path, acked: &BTreeMap<String, usize>, rng: &mut Rng) {
    integrity_ok(db);
    let hs = open(db);
    let bank = hs.bank(BANK).unwrap().at(0);
    for (id, &i) in acked {
        let m = bank.get(id).unwrap_or_else(|e| panic!("acknowledged {id} (line {i}) is lost: {e}"));
        assert!(m.content.starts_with(&format!("crash-test item {i}:")), "{id} holds {:?}", m.content);
    }
    let conn = rusqlite::Connection::open(db).unwrap();
    let records: u32 = conn
        .query_row("SELECT count(*) FROM kv WHERE key >= CAST('b/crash/m/' AS BLOB) AND key < CAST('b/crash/m0' AS BLOB)", [], |r| r.get(0))
        .unwrap();
    let stats = bank.stats().unwrap();
    assert_eq!(stats.total, records, "the bank counts every stored record");
    assert_eq!(stats.active + stats.archived + stats.superseded + stats.merged, stats.total);
    let ids: Vec<_> = acked.keys().collect();
    for _ in 0..40.min(ids.len()) {
        let id = ids[rng.below(ids.len() as u64) as usize];
        let m = bank.get(id).unwrap();
        if m.status != Status::Active {
            continue;
        }
        let i = acked[id];
        let vector: Vec<f32> = serde_json::from_str::<Value>(&line(i)).unwrap()["vector"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap() as f32)
            .collect();
        let top = bank.recall(Query::new(m.content.clone()).k(3).vector(vector)).unwrap();
        assert!(
            top.items.iter().any(|r| r.memory.content == m.content),
            "{id} is stored but its own vector does not find it"
        );
    }
}

#[test]
fn acknowledged_writes_survive_sigkill_during_retain_maintain_and_hard_forget() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("crash.db");
    let mut rng = Rng::new(20261129);
    let mut acked: BTreeMap<String, usize> = BTreeMap::new();
    let mut done: BTreeSet<usize> = BTreeSet::new();

    for kill in 0..5 {
        let remaining: Vec<usize> = (0..ITEMS).filter(|i| !done.contains(i)).collect();
        let after = 1 + rng.below((remaining.len() / 5) as u64) as usize;
        let acks = retain_run(&db, dir.path(), &remaining, Some(after), &mut rng);
        assert!(!acks.is_empty(), "kill {kill}: the run acknowledged something before it was killed");
        eprintln!(
            "retain kill {kill}: {} of {} lines acknowledged before the kill",
            acks.len(),
            remaining.len()
        );
        for (i, id) in acks {
            done.insert(i);
            acked.insert(id, i);
        }
        check(&db, &acked, &mut rng);
    }
    let remaining: Vec<usize> = (0..ITEMS).filter(|i| !done.contains(i)).collect();
    for (i, id) in retain_run(&db, dir.path(), &remaining, None, &mut rng) {
        done.insert(i);
        acked.insert(id, i);
    }
    assert_eq!(done.len(), ITEMS, "every line was acknowledged once the runs completed");
    check(&db, &acked, &mut rng);

    // Kill moments spread over an uninterrupted run's length (start-up, the bank's load, the
    // work, its commit). A run that finishes before its kill shows how long the command takes
    // now, and the next moment is drawn from that; each command gets three real kills.
    let maintain = ["maintain", "--now", "2027-06-01", "--allow-future"];
    let mut full_ms = run_to_end(&db, &maintain);
    let mut kills = 0;
    for _ in 0..20 {
        match kill_at_random(&db, &maintain, full_ms, &mut rng) {
            Some(ms) => full_ms = ms,
            None => kills += 1,
        }
        check(&db, &acked, &mut rng);
        if kills == 3 {
            break;
        }
    }
    assert_eq!(kills, 3, "three kills landed during maintain");

    let ids: Vec<String> = acked.keys().cloned().collect();
    let mut full_ms = run_to_end(&db, &["forget", &ids[0], "--hard"]);
    acked.remove(&ids[0]);
    let mut kills = 0;
    for victim in &ids[1..20] {
        match kill_at_random(&db, &["forget", victim, "--hard"], full_ms, &mut rng) {
            Some(ms) => full_ms = ms,
            None => kills += 1,
        }
        let gone = open(&db).bank(BANK).unwrap().get(victim).is_err();
        eprintln!("  {victim} {}", if gone { "gone" } else { "intact" });
        if gone {
            acked.remove(victim); // committed before the kill: gone entirely, not half-gone
        }
        check(&db, &acked, &mut rng);
        if kills == 3 {
            break;
        }
    }
    assert_eq!(kills, 3, "three kills landed during forget --hard");
}

/// Runs the command to its end; its wall time in ms.
fn run_to_end(db: &Path, args: &[&str]) -> u64 {
    let t = std::time::Instant::now();
    assert!(hindsight(db).args(args).stdout(Stdio::null()).status().unwrap().success(), "{args:?}");
    t.elapsed().as_millis() as u64
}

/// Starts the command and SIGKILLs it at a random moment within `full_ms`: None when killed,
/// or the wall time when it finished first.
fn kill_at_random(db: &Path, args: &[&str], full_ms: u64, rng: &mut Rng) -> Option<u64> {
    let t = std::time::Instant::now();
    let mut child = hindsight(db).args(args).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    let at = Duration::from_millis(full_ms / 5 + rng.below(full_ms * 4 / 5 + 1));
    while child.try_wait().unwrap().is_none() && t.elapsed() < at {
        std::thread::sleep(Duration::from_millis(2));
    }
    let finished = child.try_wait().unwrap().is_some();
    child.kill().ok();
    child.wait().unwrap();
    let what = if finished { "finished first" } else { "killed" };
    eprintln!("{} at {} ms of ~{full_ms}: {what}", args[0], at.as_millis());
    finished.then(|| t.elapsed().as_millis() as u64)
}

#[test]
fn two_processes_writing_one_bank_lose_no_acknowledged_write() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("shared.db");
    let mut rng = Rng::new(7);
    let (left, right): (Vec<usize>, Vec<usize>) = (0..2000).partition(|i| i % 2 == 0);
    let (dl, dr) = (dir.path().join("left"), dir.path().join("right"));
    std::fs::create_dir_all(&dl).unwrap();
    std::fs::create_dir_all(&dr).unwrap();
    let acks = std::thread::scope(|s| {
        let a = s.spawn(|| retain_run(&db, &dl, &left, None, &mut Rng::new(1)));
        let b = s.spawn(|| retain_run(&db, &dr, &right, None, &mut Rng::new(2)));
        let mut acks = a.join().unwrap();
        acks.extend(b.join().unwrap());
        acks
    });
    assert_eq!(acks.len(), 2000, "every line of both files was acknowledged");
    let acked: BTreeMap<String, usize> = acks.into_iter().map(|(i, id)| (id, i)).collect();
    assert_eq!(acked.len(), 2000, "2000 distinct memories");
    check(&db, &acked, &mut rng);
    assert_eq!(open(&db).bank(BANK).unwrap().stats().unwrap().total, 2000, "nothing more, nothing less");
}
