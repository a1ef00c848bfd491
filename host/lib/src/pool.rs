//! Bank affinity: a few worker threads, each owning at most one instance of the component.
//!
//! The component is single-threaded and a bank's in-memory index lives in the instance that
//! opened it, so a bank is served by exactly one worker: given to the one serving the fewest banks
//! on first use, it stays there, and its calls queue in arrival order while other workers serve
//! other banks in parallel. Workers start on first use (each instance holds the model, ~160 MiB).
//! A trap discards only that worker's instance; its banks reopen from the store on their next call.

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::{mpsc, Arc, Mutex, MutexGuard};

use crate::runtime::{Runtime, Worker};
use crate::{Error, Result};

type Job = Box<dyn FnOnce(&mut Worker) + Send>;

pub(crate) struct Pool {
    runtime: Arc<Runtime>,
    workers: Vec<Mutex<Option<mpsc::Sender<Job>>>>,
    threads: Mutex<Vec<std::thread::JoinHandle<()>>>,
    assignment: Mutex<Assignment>,
}

impl Drop for Pool {
    /// Stops the workers and waits for them, so the last handle's drop releases the instances
    /// and then the store (a SQLite store checkpoints its log as it closes).
    fn drop(&mut self) {
        for slot in &self.workers {
            lock(slot).take();
        }
        let me = std::thread::current().id();
        for thread in lock(&self.threads).drain(..) {
            if thread.thread().id() != me {
                let _ = thread.join();
            }
        }
    }
}

#[derive(Default)]
struct Assignment {
    worker_of: HashMap<String, usize>,
    banks_per_worker: Vec<usize>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Pool {
    pub(crate) fn new(runtime: Arc<Runtime>, workers: usize) -> Pool {
        let workers = workers.max(1);
        Pool {
            runtime,
            workers: (0..workers).map(|_| Mutex::new(None)).collect(),
            threads: Mutex::new(Vec::new()),
            assignment: Mutex::new(Assignment { banks_per_worker: vec![0; workers], ..Default::default() }),
        }
    }

    pub(crate) fn runtime(&self) -> &Runtime {
        &self.runtime
    }

    pub(crate) fn len(&self) -> usize {
        self.workers.len()
    }

    /// The worker serving `bank`, assigning one on first use.
    pub(crate) fn worker_of(&self, bank: &str) -> usize {
        let mut a = lock(&self.assignment);
        if let Some(&w) = a.worker_of.get(bank) {
            return w;
        }
        let (w, _) = a
            .banks_per_worker
            .iter()
            .enumerate()
            .min_by_key(|(i, n)| (**n, *i))
            .expect("at least one worker");
        a.banks_per_worker[w] += 1;
        a.worker_of.insert(bank.to_string(), w);
        w
    }

    /// Runs `f` on worker `w` (started if it is not running) and waits for its answer. Calls to
    /// one worker run in the order they were made.
    pub(crate) fn call_on<T: Send + 'static>(
        &self,
        w: usize,
        f: impl FnOnce(&mut Worker) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        self.submit_on(w, f)?.wait()
    }

    /// Queues `f` on worker `w` and returns at once; [`Pending::wait`] gives its answer.
    pub(crate) fn submit_on<T: Send + 'static>(
        &self,
        w: usize,
        f: impl FnOnce(&mut Worker) -> Result<T> + Send + 'static,
    ) -> Result<Pending<T>> {
        let (reply, answer) = mpsc::sync_channel(1);
        let job: Job = Box::new(move |worker| {
            let _ = reply.send(f(worker));
        });
        self.sender(w)?.send(job).map_err(|_| Error::Trap(format!("worker {w} has stopped")))?;
        Ok(Pending { worker: w, answer })
    }

    /// Runs `f` on the worker serving `bank`.
    pub(crate) fn call<T: Send + 'static>(
        &self,
        bank: &str,
        f: impl FnOnce(&mut Worker) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        self.call_on(self.worker_of(bank), f)
    }

    fn sender(&self, w: usize) -> Result<mpsc::Sender<Job>> {
        let mut slot = lock(&self.workers[w]);
        if let Some(tx) = slot.as_ref() {
            return Ok(tx.clone());
        }
        let (tx, rx) = mpsc::channel::<Job>();
        let mut worker = Worker::new(self.runtime.clone());
        let thread = std::thread::Builder::new()
            .name(format!("hindsight-worker-{w}"))
            .spawn(move || {
                for job in rx {
                    // A host bug must not take the worker (and every bank on it) down: drop the
                    // instance; the caller's reply channel is dropped with the job, so it gets an
                    // error.
                    if std::panic::catch_unwind(AssertUnwindSafe(|| job(&mut worker))).is_err() {
                        worker.discard();
                    }
                }
            })
            .map_err(|e| Error::Config(format!("starting worker thread {w}: {e}")))?;
        lock(&self.threads).push(thread);
        *slot = Some(tx.clone());
        Ok(tx)
    }

    /// Whether worker `w` has been started.
    pub(crate) fn is_running(&self, w: usize) -> bool {
        lock(&self.workers[w]).is_some()
    }
}

/// A job queued on a worker.
pub(crate) struct Pending<T> {
    worker: usize,
    answer: mpsc::Receiver<Result<T>>,
}

impl<T> Pending<T> {
    pub(crate) fn wait(self) -> Result<T> {
        let w = self.worker;
        self.answer.recv().map_err(|_| {
            Error::Trap(format!(
                "worker {w} failed while serving the call (a host bug); its instance was discarded and the \
                 next call starts a fresh one from the store"
            ))
        })?
    }
}

#[cfg(test)]
mod tests {
    use crate::wit::WitInto;
    use crate::{Error, Hindsight, Memory, Query};

    fn worker_name() -> String {
        std::thread::current().name().unwrap_or("?").to_string()
    }

    #[test]
    fn many_texts_embed_on_every_worker_with_the_vectors_one_worker_makes() {
        let texts: Vec<String> = (0..40)
            .map(|i| format!("run {i}: the nightly export needs {i} retries when the payments API is down"))
            .collect();
        let one = Hindsight::builder().memory().no_llm().workers(1).open().unwrap();
        let two = Hindsight::builder().memory().no_llm().workers(2).open().unwrap();
        assert_eq!(two.embed(&texts).unwrap(), one.embed(&texts).unwrap());
        assert!(two.pool.is_running(1), "the second worker embedded its share");

        // A retain of many items spreads its embedding too, and stores what it would alone.
        let fresh = Hindsight::builder().memory().no_llm().workers(2).open().unwrap();
        let bank = fresh.bank("b").unwrap().at(1_767_225_600_000);
        let outcomes = bank.retain(texts.iter().map(|t| Memory::new(t.clone()).force())).unwrap();
        assert_eq!(outcomes.len(), 40);
        assert!(fresh.pool.is_running(0) && fresh.pool.is_running(1));
        let vector = one.embed(&[texts[17].as_str()]).unwrap().remove(0);
        let hit = bank.recall(Query::new("unrelated words").vector(vector).k(1)).unwrap();
        assert_eq!(hit.items[0].memory.content, texts[17]);

        // An item the engine refuses is still named by its index, and nothing is stored.
        let mut bad: Vec<Memory> =
            texts.iter().take(20).map(|t| Memory::new(format!("again: {t}"))).collect();
        bad[13] = Memory::new("   ");
        let refused = bank.retain(bad).unwrap_err();
        assert!(
            matches!(&refused, Error::InvalidInput(f) if f.item == Some(13) && f.field == "content"),
            "{refused:?}"
        );
        assert_eq!(bank.stats().unwrap().active, 40);

        // Below the threshold, one worker does it all.
        let few = Hindsight::builder().memory().no_llm().workers(2).open().unwrap();
        few.bank("b").unwrap().retain(texts.iter().take(3).map(|t| Memory::new(t.clone()))).unwrap();
        assert!(!few.pool.is_running(1));
    }

    #[test]
    fn each_bank_stays_on_one_instance_and_a_trap_stops_only_its_worker() {
        let hs = Hindsight::builder().memory().no_llm().workers(2).open().unwrap();
        let pool = &hs.pool;
        let banks = ["a", "b", "c", "d"];
        // Spread: the least-loaded worker takes each new bank.
        assert_eq!(banks.map(|b| pool.worker_of(b)), [0, 1, 0, 1]);

        // Calls from many threads at once, interleaved across banks: each bank's on its own
        // worker.
        let facts =
            ["listens on port 8080", "is deployed only with the VPN up", "rotates its logs nightly at 02:00"];
        std::thread::scope(|s| {
            for bank in banks {
                let pool = pool.clone();
                s.spawn(move || {
                    for (round, fact) in facts.into_iter().enumerate() {
                        let text = format!("bank {bank}: the {bank} service {fact}");
                        let (worker, id) = pool
                            .call(bank, move |w| {
                                let item: crate::wit::types::NewMemory = Memory::new(text).wit_into();
                                let now = Some(1_767_225_600_000 + round as i64);
                                let out = w.with_bank(bank, |b, s, h| b.call_retain(s, h, &[item], now))?;
                                Ok((worker_name(), out[0].id.clone()))
                            })
                            .unwrap();
                        assert!(id.is_some(), "{bank}");
                        assert_eq!(worker, format!("hindsight-worker-{}", pool.worker_of(bank)));
                    }
                });
            }
        });

        // A call past its deadline on bank a's worker: a trap, reported as such.
        let trapped = pool.call("a", |w| {
            w.hurry(true);
            let many: Vec<crate::wit::types::NewMemory> = (0..64)
                .map(|i| Memory::new(format!("a long batch item {i} about deadlines")).wit_into())
                .collect();
            let result = w.with_bank("a", |b, s, h| b.call_retain(s, h, &many, None));
            w.hurry(false);
            Ok(result)
        });
        assert!(matches!(trapped, Ok(Err(Error::Trap(_)))), "{trapped:?}");

        // Only that worker lost its instance; the other kept its instance (and banks b, d).
        let alive = |bank: &str| pool.call(bank, |w| Ok(w.memory_bytes() > 0)).unwrap();
        assert!(!alive("a"));
        assert!(alive("b"));
        // Banks a and c (same worker) reopen from the store with everything acknowledged.
        for bank in ["a", "c", "b"] {
            let recalled = hs.bank(bank).unwrap().recall(Query::new("the service").k(10)).unwrap();
            let texts: Vec<_> = recalled.items.iter().map(|r| r.memory.content.clone()).collect();
            assert_eq!(texts.len(), 3, "{bank}: {texts:?}");
            assert!(texts.iter().all(|t| t.starts_with(&format!("bank {bank}: "))), "{bank}: {texts:?}");
        }
    }
}
