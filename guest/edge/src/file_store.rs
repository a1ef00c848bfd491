//! The store on a plain directory (wasi:filesystem at the edge, any file system natively): every
//! commit is one checksummed record appended to a log and synced before `commit` returns; now
//! and then the whole state is written as a snapshot and the log starts again, so opening a
//! large bank reads its state once rather than replaying its history. Several instances (one per
//! request under `wasmtime serve`) share the directory: a commit takes the writer lock, catches
//! up on what the others appended, checks its `expect`s against that, then appends.
//!
//! ```text
//! DIR/CURRENT         the generation g, as text
//! DIR/snapshot-g      the state when generation g began (records of puts); absent for g = 0
//! DIR/log-g           the commits since, one record each
//! DIR/lock            the writer's lease: a token and the time it lapses
//! record = len: u32 LE | crc32(payload): u32 LE | payload
//! payload = op*;  op = 1 | key | value  (put)  or  2 | key  (delete);  key, value = len: u32 LE | bytes
//! ```
//!
//! A record cut short by a crash (or failing its checksum) ends the log for readers; the next
//! commit cuts it off before appending. A writer that dies holding the lock holds it until its
//! lease lapses ([`LEASE`]); then the next writer breaks it.

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hindsight_types::{Op, Store, StoreError};

/// How long a writer's lock holds without being released: a commit (even one that compacts a
/// 100k bank) takes far less, so a lock older than this belongs to a writer that died.
pub const LEASE: Duration = Duration::from_secs(30);
/// A log grown past this and past the snapshot's size is folded into a new snapshot, so reading
/// the log never costs more than reading the snapshot.
const COMPACT_AFTER: u64 = 4 << 20;
/// Snapshot records are cut at about this size.
const SNAPSHOT_RECORD: usize = 1 << 20;
const HEADER: usize = 8;

/// The directory store. Reads answer from memory as of the last [`FileStore::refresh`] or
/// commit; call `refresh` before a request to see the other instances' commits.
pub struct FileStore {
    dir: PathBuf,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    map: BTreeMap<String, Vec<u8>>,
    generation: u64,
    /// Bytes of `log-g` read and applied: the end of its last whole record.
    log_end: u64,
    snapshot_bytes: u64,
    /// Whether `load` ran: the first refresh loads whatever generation is current.
    loaded: bool,
}

fn failed(what: &str, path: &Path, e: impl std::fmt::Display) -> StoreError {
    match e.to_string() {
        m if m.contains("Read-only") || m.contains("read-only") => {
            StoreError::ReadOnly(format!("{what} {}: {m}", path.display()))
        }
        m => StoreError::Failed(format!("{what} {}: {m}", path.display())),
    }
}

impl FileStore {
    /// Opens (creating it if needed) the store in `dir` and reads its current state.
    pub fn open(dir: impl Into<PathBuf>) -> Result<FileStore, StoreError> {
        let dir = dir.into();
        fs::create_dir_all(&dir).map_err(|e| failed("creating", &dir, e))?;
        let store = FileStore { dir, state: Mutex::new(State::default()) };
        store.refresh()?;
        Ok(store)
    }

    /// Catches up on the commits other instances made since the last call; returns whether
    /// there were any.
    pub fn refresh(&self) -> Result<bool, StoreError> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        self.catch_up(&mut state)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    fn current_generation(&self) -> Result<u64, StoreError> {
        let path = self.path("CURRENT");
        match fs::read_to_string(&path) {
            Ok(text) => text.trim().parse().map_err(|_| {
                StoreError::Failed(format!("{}: not a generation number: {text:?}", path.display()))
            }),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(0),
            Err(e) => Err(failed("reading", &path, e)),
        }
    }

    /// Brings `state` up to the current generation and the end of its log; returns whether
    /// anything changed. Another instance's compaction may switch generations (and remove the
    /// files of the old one) while this one reads: the generation is read again afterwards, and
    /// the read repeated until it held still.
    fn catch_up(&self, state: &mut State) -> Result<bool, StoreError> {
        let mut attempts = 0;
        loop {
            attempts += 1;
            let generation = self.current_generation()?;
            let read = if !state.loaded || generation != state.generation {
                self.load(generation).map(|loaded| {
                    *state = loaded;
                    true
                })
            } else {
                self.read_log(state)
            };
            let moved = self.current_generation()? != generation;
            if !moved || attempts == 10 {
                return read;
            }
        }
    }

    /// Generation `generation`: its snapshot, then its log.
    fn load(&self, generation: u64) -> Result<State, StoreError> {
        let snapshot = self.path(&format!("snapshot-{generation}"));
        let mut map = BTreeMap::new();
        let snapshot_bytes = match fs::read(&snapshot) {
            Ok(bytes) => {
                let (_, end) = apply_records(&bytes, &mut map);
                if end != bytes.len() {
                    return Err(StoreError::Failed(format!(
                        "{}: damaged at byte {end} of {}",
                        snapshot.display(),
                        bytes.len()
                    )));
                }
                bytes.len() as u64
            }
            Err(e) if e.kind() == ErrorKind::NotFound && generation == 0 => 0,
            Err(e) => return Err(failed("reading", &snapshot, e)),
        };
        let mut state = State { map, generation, log_end: 0, snapshot_bytes, loaded: true };
        self.read_log(&mut state)?;
        Ok(state)
    }

    /// Applies the whole records past `log_end`; returns whether there were any.
    fn read_log(&self, state: &mut State) -> Result<bool, StoreError> {
        let path = self.path(&format!("log-{}", state.generation));
        let mut file = match File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(failed("opening", &path, e)),
        };
        let len = file.metadata().map_err(|e| failed("reading", &path, e))?.len();
        if len <= state.log_end {
            return Ok(false);
        }
        file.seek(SeekFrom::Start(state.log_end)).map_err(|e| failed("reading", &path, e))?;
        let mut tail = Vec::with_capacity((len - state.log_end) as usize);
        file.read_to_end(&mut tail).map_err(|e| failed("reading", &path, e))?;
        let (applied, end) = apply_records(&tail, &mut state.map);
        state.log_end += end as u64;
        Ok(applied > 0)
    }

    fn lock(&self) -> Result<Lock, StoreError> {
        let path = self.path("lock");
        let token = lease_token();
        let started = SystemTime::now();
        loop {
            let lapses = unix_ms(SystemTime::now() + LEASE);
            match OpenOptions::new().write(true).create_new(true).open(&path) {
                Ok(mut f) => {
                    f.write_all(format!("{token} {lapses}\n").as_bytes())
                        .map_err(|e| failed("writing", &path, e))?;
                    return Ok(Lock { path, token });
                }
                Err(e) if e.kind() == ErrorKind::AlreadyExists => {}
                Err(e) => return Err(failed("creating", &path, e)),
            }
            // Held: by a live writer (wait), or by one that died (break its lapsed lease).
            if let Ok(held) = fs::read_to_string(&path) {
                let now = SystemTime::now();
                let lapsed = match held.split_whitespace().nth(1).and_then(|t| t.parse::<u64>().ok()) {
                    Some(at) => at < unix_ms(now),
                    // No lease written yet: its writer is between creating the file and writing
                    // to it (a window that is wide in a wasm instance), or died there. Only the
                    // file's age tells which; breaking it at once let two writers append at the
                    // same offset, and one acknowledged commit was lost.
                    None => fs::metadata(&path)
                        .and_then(|m| m.modified())
                        .is_ok_and(|created| created + LEASE < now),
                };
                // Read again just before removing: only the lapsed lease is broken, not a new
                // writer's that replaced it meanwhile.
                if lapsed && fs::read_to_string(&path).is_ok_and(|again| again == held) {
                    let _ = fs::remove_file(&path);
                    continue;
                }
            }
            if started.elapsed().unwrap_or_default() > LEASE + Duration::from_secs(5) {
                return Err(StoreError::Failed(format!("{}: another writer holds the lock", path.display())));
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    fn append(&self, state: &mut State, record: &[u8]) -> Result<(), StoreError> {
        let path = self.path(&format!("log-{}", state.generation));
        let mut file = OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| failed("opening", &path, e))?;
        // A torn record past the last whole one (a writer that died mid-append) is cut off.
        let len = file.metadata().map_err(|e| failed("reading", &path, e))?.len();
        if len != state.log_end {
            file.set_len(state.log_end).map_err(|e| failed("truncating", &path, e))?;
        }
        file.seek(SeekFrom::Start(state.log_end)).map_err(|e| failed("writing", &path, e))?;
        file.write_all(record).map_err(|e| failed("writing", &path, e))?;
        file.sync_data().map_err(|e| failed("syncing", &path, e))?;
        state.log_end += record.len() as u64;
        Ok(())
    }

    /// Writes the state as generation g+1's snapshot, then points CURRENT at it; the old
    /// generation's files go last, so a crash at any point leaves one whole generation current.
    /// If `lock`'s lease lapsed meanwhile (and another writer may have appended to the old log),
    /// the new snapshot is dropped instead.
    fn compact(&self, state: &mut State, lock: &Lock) -> Result<(), StoreError> {
        let next = state.generation + 1;
        let snapshot = self.path(&format!("snapshot-{next}"));
        let partial = self.path(&format!("snapshot-{next}.partial"));
        let mut file = File::create(&partial).map_err(|e| failed("creating", &partial, e))?;
        let mut payload = Vec::new();
        let mut written = 0u64;
        for (key, value) in &state.map {
            encode_op(&mut payload, &Op::Put(key.clone(), value.clone()));
            if payload.len() >= SNAPSHOT_RECORD {
                let record = frame(&payload);
                file.write_all(&record).map_err(|e| failed("writing", &partial, e))?;
                written += record.len() as u64;
                payload.clear();
            }
        }
        if !payload.is_empty() {
            let record = frame(&payload);
            file.write_all(&record).map_err(|e| failed("writing", &partial, e))?;
            written += record.len() as u64;
        }
        file.sync_all().map_err(|e| failed("syncing", &partial, e))?;
        drop(file);
        let log = self.path(&format!("log-{}", state.generation));
        let log_len = fs::metadata(&log).map_or(0, |m| m.len());
        if !lock.held() || log_len != state.log_end {
            let _ = fs::remove_file(&partial);
            return Err(StoreError::Failed(format!(
                "{}: the writer's lease lapsed while it compacted; the log stays as it is",
                lock.path.display()
            )));
        }
        fs::rename(&partial, &snapshot).map_err(|e| failed("renaming", &partial, e))?;
        let current = self.path("CURRENT");
        let current_partial = self.path("CURRENT.partial");
        fs::write(&current_partial, format!("{next}\n"))
            .map_err(|e| failed("writing", &current_partial, e))?;
        File::open(&current_partial)
            .and_then(|f| f.sync_all())
            .map_err(|e| failed("syncing", &current_partial, e))?;
        fs::rename(&current_partial, &current).map_err(|e| failed("renaming", &current_partial, e))?;
        let old = state.generation;
        let _ = fs::remove_file(self.path(&format!("log-{old}")));
        let _ = fs::remove_file(self.path(&format!("snapshot-{old}")));
        state.generation = next;
        state.log_end = 0;
        state.snapshot_bytes = written;
        Ok(())
    }

    /// How many bytes the current generation's log holds (for tests and the closing figures).
    pub fn log_bytes(&self) -> u64 {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).log_end
    }

    /// The current generation (it grows by one at each compaction).
    pub fn generation(&self) -> u64 {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).generation
    }
}

struct Lock {
    path: PathBuf,
    token: String,
}

impl Lock {
    /// Whether the lock file still holds this writer's lease (not one that broke it).
    fn held(&self) -> bool {
        fs::read_to_string(&self.path).is_ok_and(|held| held.starts_with(&self.token))
    }
}

impl Drop for Lock {
    fn drop(&mut self) {
        // Only our own lease is removed: one that lapsed and was broken is someone else's now.
        if self.held() {
            let _ = fs::remove_file(&self.path);
        }
    }
}

/// A writer's own mark on the lock, distinct in every instance of a pre-initialised component.
fn lease_token() -> String {
    format!("{:016x}", hindsight_types::random_u64(0))
}

fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

impl Store for FileStore {
    fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self.state.lock().unwrap_or_else(|p| p.into_inner()).map.get(key).cloned())
    }

    fn scan(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        limit: u32,
    ) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        use std::ops::Bound;
        let state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let lower = match start_after {
            Some(after) if after >= prefix => Bound::Excluded(after.to_string()),
            _ => Bound::Included(prefix.to_string()),
        };
        Ok(state
            .map
            .range((lower, Bound::Unbounded))
            .take_while(|(k, _)| k.starts_with(prefix))
            .take(limit as usize)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect())
    }

    fn commit(&self, ops: Vec<Op>) -> Result<(), StoreError> {
        let lock = self.lock()?;
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        self.catch_up(&mut state)?;
        for op in &ops {
            if let Op::Expect(key, expected) = op {
                if state.map.get(key) != expected.as_ref() {
                    return Err(StoreError::Conflict(key.clone()));
                }
            }
        }
        let mut payload = Vec::new();
        for op in &ops {
            encode_op(&mut payload, op);
        }
        if payload.is_empty() {
            return Ok(());
        }
        self.append(&mut state, &frame(&payload))?;
        for op in ops {
            match op {
                Op::Put(k, v) => {
                    state.map.insert(k, v);
                }
                Op::Delete(k) => {
                    state.map.remove(&k);
                }
                Op::Expect(..) => {}
            }
        }
        if state.log_end > COMPACT_AFTER && state.log_end > state.snapshot_bytes {
            // The commit is durable already; a failed compaction leaves the log as it was.
            let _ = self.compact(&mut state, &lock);
        }
        Ok(())
    }

    /// Folds the log into a new snapshot now: the old generation's files, which still hold
    /// every value ever written (a hard-forgotten memory's text too), are removed.
    fn checkpoint(&self) -> Result<(), StoreError> {
        let lock = self.lock()?;
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        self.catch_up(&mut state)?;
        self.compact(&mut state, &lock)
    }

    fn refresh(&self) -> Result<(), StoreError> {
        FileStore::refresh(self).map(|_| ())
    }
}

fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
    out.extend_from_slice(bytes);
}

fn encode_op(out: &mut Vec<u8>, op: &Op) {
    match op {
        Op::Put(k, v) => {
            out.push(1);
            put_bytes(out, k.as_bytes());
            put_bytes(out, v);
        }
        Op::Delete(k) => {
            out.push(2);
            put_bytes(out, k.as_bytes());
        }
        Op::Expect(..) => {}
    }
}

fn frame(payload: &[u8]) -> Vec<u8> {
    let mut record = Vec::with_capacity(HEADER + payload.len());
    record.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    record.extend_from_slice(&crc32fast::hash(payload).to_le_bytes());
    record.extend_from_slice(payload);
    record
}

/// Applies every whole, intact record in `bytes`; returns how many, and where the last ended.
fn apply_records(bytes: &[u8], map: &mut BTreeMap<String, Vec<u8>>) -> (usize, usize) {
    let mut at = 0;
    let mut applied = 0;
    while let Some(header) = bytes.get(at..at + HEADER) {
        let len = u32::from_le_bytes(header[..4].try_into().expect("4 bytes")) as usize;
        let crc = u32::from_le_bytes(header[4..].try_into().expect("4 bytes"));
        let Some(payload) = bytes.get(at + HEADER..at + HEADER + len) else { break };
        if crc32fast::hash(payload) != crc {
            break;
        }
        let Some(ops) = decode_ops(payload) else { break };
        for op in ops {
            match op {
                Op::Put(k, v) => {
                    map.insert(k, v);
                }
                Op::Delete(k) => {
                    map.remove(&k);
                }
                Op::Expect(..) => {}
            }
        }
        at += HEADER + len;
        applied += 1;
    }
    (applied, at)
}

fn decode_ops(mut payload: &[u8]) -> Option<Vec<Op>> {
    fn take<'a>(p: &mut &'a [u8]) -> Option<&'a [u8]> {
        let len = u32::from_le_bytes(p.get(..4)?.try_into().ok()?) as usize;
        let bytes = p.get(4..4 + len)?;
        *p = &p[4 + len..];
        Some(bytes)
    }
    let mut ops = Vec::new();
    while let Some((&tag, rest)) = payload.split_first() {
        payload = rest;
        let key = String::from_utf8(take(&mut payload)?.to_vec()).ok()?;
        ops.push(match tag {
            1 => Op::Put(key, take(&mut payload)?.to_vec()),
            2 => Op::Delete(key),
            _ => return None,
        });
    }
    Some(ops)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(k: &str, v: &str) -> Op {
        Op::Put(k.into(), v.as_bytes().to_vec())
    }

    #[test]
    fn commits_survive_a_reopen_and_other_instances_see_them() {
        let dir = tempdir();
        let a = FileStore::open(&dir).unwrap();
        a.commit(vec![put("b/1", "one"), put("b/2", "two"), put("c/1", "x")]).unwrap();
        a.commit(vec![Op::Delete("b/2".into())]).unwrap();
        let b = FileStore::open(&dir).unwrap();
        assert_eq!(b.get("b/1").unwrap().unwrap(), b"one");
        assert_eq!(b.get("b/2").unwrap(), None);
        assert_eq!(b.scan("b/", None, 10).unwrap().len(), 1);
        b.commit(vec![put("b/3", "three")]).unwrap();
        assert_eq!(a.get("b/3").unwrap(), None, "a reads as of its last refresh");
        assert!(a.refresh().unwrap());
        assert_eq!(a.get("b/3").unwrap().unwrap(), b"three");
    }

    #[test]
    fn an_expect_is_checked_against_the_other_instances_commits() {
        let dir = tempdir();
        let a = FileStore::open(&dir).unwrap();
        let b = FileStore::open(&dir).unwrap();
        a.commit(vec![Op::Expect("seq".into(), None), put("seq", "1")]).unwrap();
        let lost = b.commit(vec![Op::Expect("seq".into(), None), put("seq", "1"), put("x", "lost")]);
        assert!(matches!(lost, Err(StoreError::Conflict(k)) if k == "seq"));
        assert_eq!(b.get("x").unwrap(), None, "nothing of a refused commit is applied");
        b.commit(vec![Op::Expect("seq".into(), Some(b"1".to_vec())), put("seq", "2")]).unwrap();
        assert_eq!(FileStore::open(&dir).unwrap().get("seq").unwrap().unwrap(), b"2");
    }

    #[test]
    fn a_torn_tail_is_skipped_then_cut_off_by_the_next_commit() {
        let dir = tempdir();
        let a = FileStore::open(&dir).unwrap();
        a.commit(vec![put("k", "whole")]).unwrap();
        let log = dir.join("log-0");
        let whole = fs::metadata(&log).unwrap().len();
        let mut torn = frame(b"\x01\x01\x00\x00\x00k\x05\x00\x00\x00tor");
        torn.truncate(torn.len() - 2);
        OpenOptions::new().append(true).open(&log).unwrap().write_all(&torn).unwrap();
        let b = FileStore::open(&dir).unwrap();
        assert_eq!(b.get("k").unwrap().unwrap(), b"whole");
        b.commit(vec![put("j", "after")]).unwrap();
        let c = FileStore::open(&dir).unwrap();
        assert_eq!(c.get("k").unwrap().unwrap(), b"whole");
        assert_eq!(c.get("j").unwrap().unwrap(), b"after");
        assert!(fs::metadata(&log).unwrap().len() > whole);
        // A flipped byte fails the checksum: the record and everything after it are not read.
        let mut bytes = fs::read(&log).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 0xff;
        fs::write(&log, bytes).unwrap();
        assert_eq!(FileStore::open(&dir).unwrap().get("j").unwrap(), None);
    }

    #[test]
    fn a_grown_log_becomes_a_snapshot_and_a_reopen_reads_only_that() {
        let dir = tempdir();
        let a = FileStore::open(&dir).unwrap();
        let value = "v".repeat(64 << 10);
        for i in 0..80 {
            a.commit(vec![put(&format!("k/{i:03}"), &value), put("k/000", &format!("{i}"))]).unwrap();
        }
        assert!(a.generation() >= 1, "the log was compacted");
        assert!(!dir.join("log-0").exists() && !dir.join("snapshot-0").exists());
        let b = FileStore::open(&dir).unwrap();
        assert_eq!(b.get("k/000").unwrap().unwrap(), b"79");
        assert_eq!(b.scan("k/", None, 1000).unwrap().len(), 80);
        assert!(b.log_bytes() < COMPACT_AFTER);
        // An instance on the old generation catches up by reloading.
        a.commit(vec![put("late", "1")]).unwrap();
        assert!(b.refresh().unwrap());
        assert_eq!(b.get("late").unwrap().unwrap(), b"1");
    }

    #[test]
    fn a_checkpoint_leaves_no_deleted_value_on_disk() {
        let dir = tempdir();
        let a = FileStore::open(&dir).unwrap();
        a.commit(vec![put("m/1", "the launch code is 0451"), put("m/2", "kept")]).unwrap();
        a.commit(vec![Op::Delete("m/1".into())]).unwrap();
        let on_disk = || {
            fs::read_dir(&dir)
                .unwrap()
                .map(|e| fs::read(e.unwrap().path()).unwrap())
                .any(|bytes| bytes.windows(11).any(|w| w == b"launch code"))
        };
        assert!(on_disk(), "the log still holds the deleted value");
        let b = FileStore::open(&dir).unwrap();
        a.checkpoint().unwrap();
        assert!(!on_disk(), "no file holds it after the checkpoint");
        assert!(b.refresh().unwrap(), "another instance follows to the new generation");
        assert_eq!(b.get("m/2").unwrap().unwrap(), b"kept");
        assert_eq!(FileStore::open(&dir).unwrap().get("m/1").unwrap(), None);
    }

    #[test]
    fn a_compaction_after_its_lease_was_broken_keeps_the_old_generation() {
        let dir = tempdir();
        let a = FileStore::open(&dir).unwrap();
        a.commit(vec![put("k", "v")]).unwrap();
        let lock = a.lock().unwrap();
        // Another writer broke the lapsed lease (and may have appended to the log).
        fs::write(dir.join("lock"), format!("other {}\n", unix_ms(SystemTime::now() + LEASE))).unwrap();
        let mut state = a.state.lock().unwrap();
        let compacted = a.compact(&mut state, &lock);
        assert!(matches!(&compacted, Err(StoreError::Failed(m)) if m.contains("lease lapsed")));
        drop(state);
        assert!(dir.join("lock").exists(), "the other writer's lease is left alone");
        let _ = fs::remove_file(dir.join("lock"));
        assert!(!dir.join("snapshot-1").exists() && !dir.join("snapshot-1.partial").exists());
        assert!(dir.join("log-0").exists());
        assert_eq!(FileStore::open(&dir).unwrap().get("k").unwrap().unwrap(), b"v");
        // The lease held, but the log grew past what this instance read: compacting would drop
        // the other writer's record.
        let lock = a.lock().unwrap();
        let mut theirs = Vec::new();
        encode_op(&mut theirs, &put("j", "theirs"));
        OpenOptions::new().append(true).open(dir.join("log-0")).unwrap().write_all(&frame(&theirs)).unwrap();
        let mut state = a.state.lock().unwrap();
        assert!(a.compact(&mut state, &lock).is_err());
        drop((state, lock));
        assert_eq!(FileStore::open(&dir).unwrap().get("j").unwrap().unwrap(), b"theirs");
    }

    #[test]
    fn a_dead_writers_lapsed_lock_is_broken_and_a_live_one_is_waited_for() {
        let dir = tempdir();
        let a = FileStore::open(&dir).unwrap();
        fs::write(dir.join("lock"), format!("dead {}\n", unix_ms(SystemTime::now()) - 1)).unwrap();
        a.commit(vec![put("k", "v")]).unwrap();
        assert!(!dir.join("lock").exists(), "released after the commit");
        let held = format!("live {}\n", unix_ms(SystemTime::now() + Duration::from_millis(300)));
        fs::write(dir.join("lock"), &held).unwrap();
        let started = std::time::Instant::now();
        a.commit(vec![put("k", "w")]).unwrap();
        assert!(started.elapsed() >= Duration::from_millis(250), "waited for the lease to lapse");
    }

    #[test]
    fn a_lock_without_a_lease_yet_is_waited_for_unless_it_is_old() {
        let dir = tempdir();
        let a = FileStore::open(&dir).unwrap();
        // Another writer created the lock and has not written its lease yet.
        fs::write(dir.join("lock"), "").unwrap();
        let b = std::thread::spawn({
            let dir = dir.clone();
            move || FileStore::open(&dir).unwrap().commit(vec![put("k", "b")])
        });
        std::thread::sleep(Duration::from_millis(300));
        assert!(!b.is_finished(), "the committer waited for the lock's writer");
        assert!(dir.join("lock").exists(), "the fresh lock was not broken");
        fs::remove_file(dir.join("lock")).unwrap();
        b.join().unwrap().unwrap();
        a.refresh().unwrap();
        assert_eq!(a.get("k").unwrap().unwrap(), b"b");
        // One left by a writer that died before writing its lease lapses with its age.
        let stale = File::create(dir.join("lock")).unwrap();
        stale.set_modified(SystemTime::now() - LEASE - Duration::from_secs(1)).unwrap();
        drop(stale);
        a.commit(vec![put("k", "a")]).unwrap();
        assert!(!dir.join("lock").exists());
    }

    #[test]
    fn writers_in_threads_lose_nothing() {
        let dir = tempdir();
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let dir = dir.clone();
                std::thread::spawn(move || {
                    let s = FileStore::open(&dir).unwrap();
                    for i in 0..25 {
                        // A counter every writer increments: an expect-and-retry loop.
                        loop {
                            s.refresh().unwrap();
                            let n: u32 = s
                                .get("n")
                                .unwrap()
                                .map_or(0, |v| String::from_utf8(v).unwrap().parse().unwrap());
                            let ops = vec![
                                Op::Expect("n".into(), s.get("n").unwrap()),
                                put("n", &(n + 1).to_string()),
                                put(&format!("w/{t}/{i}"), "x"),
                            ];
                            match s.commit(ops) {
                                Ok(()) => break,
                                Err(StoreError::Conflict(_)) => continue,
                                Err(e) => panic!("{e}"),
                            }
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let s = FileStore::open(&dir).unwrap();
        assert_eq!(s.get("n").unwrap().unwrap(), b"100");
        assert_eq!(s.scan("w/", None, 1000).unwrap().len(), 100);
    }

    fn tempdir() -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "hindsight-file-store-{}-{}",
            std::process::id(),
            lease_token()
        ));
        fs::create_dir_all(&dir).unwrap();
        dir
    }
}
