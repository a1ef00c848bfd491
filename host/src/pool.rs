//! Bank affinity: a small pool of instances for concurrent callers (the MCP server).
//!
//! The component is single-threaded and a bank's in-memory index lives in the instance that
//! opened it, so within one host a bank is served by exactly one instance. Each worker is a
//! thread owning a `Host` (siblings: the compiled component is loaded once). A bank is given to
//! a worker on first use — the one serving the fewest banks — and stays there, so its requests
//! queue in arrival order while other workers serve other banks in parallel. A trap discards only
//! that worker's instance; its banks reopen from the store on their next call.

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::{mpsc, Mutex};

use anyhow::anyhow;

use crate::Host;

type Job = Box<dyn FnOnce(&mut Host) + Send>;

pub struct Pool {
    workers: Vec<mpsc::Sender<Job>>,
    assignment: Mutex<Assignment>,
}

#[derive(Default)]
struct Assignment {
    worker_of: HashMap<String, usize>,
    banks_per_worker: Vec<usize>,
}

impl Pool {
    /// `workers` instances (at least one): `host` and its siblings. Each worker instantiates
    /// the component at once, so the first requests do not pay the engine start.
    pub fn new(host: Host, workers: usize) -> anyhow::Result<Pool> {
        let workers = workers.max(1);
        let mut hosts: Vec<Host> = (1..workers).map(|_| host.sibling()).collect();
        hosts.insert(0, host);
        let mut senders = Vec::with_capacity(workers);
        for (i, mut host) in hosts.into_iter().enumerate() {
            let (tx, rx) = mpsc::channel::<Job>();
            std::thread::Builder::new().name(format!("hindsight-worker-{i}")).spawn(move || {
                if let Err(e) = host.model_id() {
                    eprintln!("hindsight: worker {i} could not start the engine yet: {e}");
                }
                for job in rx {
                    // A host bug must not take the worker (and every bank on it) down: drop the
                    // instance, answer the caller with an error (its reply channel is dropped).
                    if std::panic::catch_unwind(AssertUnwindSafe(|| job(&mut host))).is_err() {
                        host.discard_instance();
                    }
                }
            })?;
            senders.push(tx);
        }
        Ok(Pool {
            workers: senders,
            assignment: Mutex::new(Assignment { banks_per_worker: vec![0; workers], ..Default::default() }),
        })
    }

    /// The worker serving `bank`, assigning one on first use.
    pub fn worker_of(&self, bank: &str) -> usize {
        let mut a = self.assignment.lock().unwrap_or_else(|e| e.into_inner());
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

    /// Queues `f` for the instance serving `bank` now (requests to one worker run in the order
    /// `run` was called); the future resolves with its result.
    pub fn run<T: Send + 'static>(
        &self,
        bank: &str,
        f: impl FnOnce(&mut Host) -> T + Send + 'static,
    ) -> impl std::future::Future<Output = anyhow::Result<T>> + Send + 'static {
        let worker = self.worker_of(bank);
        let (tx, rx) = tokio::sync::oneshot::channel();
        let sent = self.workers[worker].send(Box::new(move |host| {
            let _ = tx.send(f(host));
        }));
        async move {
            sent.map_err(|_| anyhow!("worker {worker} has stopped"))?;
            rx.await.map_err(|_| anyhow!("worker {worker} failed while serving the request (host error)"))
        }
    }
}
