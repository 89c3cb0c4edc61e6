//! Group commit of served requests: every request a chain TA serves leaves two durable
//! writes, its body (and output opening) in the payload store, for the validators, and its
//! work record in the outbox, for settlement — before the answer's end goes out. Written one
//! request at a time, each in its own file, that was two fsyncs per request, on the
//! request's own thread. Instead the payload store and the outbox share one database, and
//! requests hand their writes to one writer thread ([`Recorder::record`]), which takes every
//! write waiting (up to [`MAX_GROUP`]), makes the bodies and the records durable in one
//! transaction, and answers them all: one fsync per group, and a request waits at most for
//! the group in progress and its own.
//!
//! A record is never durable without its body (a record the chain might sample must have its
//! body to serve), and a failed write fails every request of its group: none is charged, none
//! gets its answer's end.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use gonka_client::settlement::Served;
use tokio::sync::{mpsc, oneshot};

use crate::payloads::{OutputOpening, PayloadStore};
use crate::settle::Outbox;
use crate::Clock;

/// Most requests one group commits.
pub const MAX_GROUP: usize = 1_024;

/// Writes waiting for the writer at most (beyond, requests wait to hand theirs over).
pub const QUEUE: usize = 4_096;

/// One served request to make durable.
#[derive(Debug)]
pub struct Entry {
    /// Its record, host and payout.
    pub served: Served,
    /// The request body as signed.
    pub body: Vec<u8>,
    /// The executing node's salt and the answer's hash.
    pub opening: OutputOpening,
}

type Job = (Entry, oneshot::Sender<Result<(), String>>);

/// The handle requests record through; the writer thread ends when it is dropped.
#[derive(Debug, Clone)]
pub struct Recorder {
    jobs: mpsc::Sender<Job>,
    groups: Arc<AtomicU64>,
}

impl Recorder {
    /// Starts the writer thread over `payloads` and `outbox`, which must share their
    /// database, timing bodies with `clock`.
    pub fn start(outbox: Arc<Outbox>, payloads: Arc<PayloadStore>, clock: Clock) -> Recorder {
        assert!(
            Arc::ptr_eq(outbox.database(), payloads.database()),
            "the outbox and the payload store must share one database"
        );
        let (jobs, mut queue) = mpsc::channel::<Job>(QUEUE);
        let groups = Arc::new(AtomicU64::new(0));
        let counted = groups.clone();
        std::thread::Builder::new()
            .name("ta-recorder".into())
            .spawn(move || {
                while let Some(first) = queue.blocking_recv() {
                    let mut group = vec![first];
                    while group.len() < MAX_GROUP {
                        match queue.try_recv() {
                            Ok(job) => group.push(job),
                            Err(_) => break,
                        }
                    }
                    let result = write(&outbox, clock(), &group);
                    counted.fetch_add(1, Ordering::Relaxed);
                    for (_, done) in group {
                        let _ = done.send(result.clone());
                    }
                }
            })
            .expect("spawning the recorder thread");
        Recorder { jobs, groups }
    }

    /// Groups written so far (each one durable transaction).
    pub fn groups(&self) -> u64 {
        self.groups.load(Ordering::Relaxed)
    }

    /// Makes `entry` durable (with whatever else is waiting); `Err` says why it is not.
    pub async fn record(&self, entry: Entry) -> Result<(), String> {
        let (done, written) = oneshot::channel();
        self.jobs
            .send((entry, done))
            .await
            .map_err(|_| "the recorder has stopped".to_string())?;
        written
            .await
            .map_err(|_| "the recorder has stopped".to_string())?
    }
}

/// The bodies and records of `group` in one transaction.
fn write(outbox: &Outbox, now: u64, group: &[Job]) -> Result<(), String> {
    let bodies: Vec<(&str, &[u8], &OutputOpening)> = group
        .iter()
        .map(|(e, _)| {
            (
                e.served.record.inference_id.as_str(),
                e.body.as_slice(),
                &e.opening,
            )
        })
        .collect();
    let records: Vec<&Served> = group.iter().map(|(e, _)| &e.served).collect();
    outbox
        .put_many_with(&records, |tx| PayloadStore::write(tx, &bodies, now))
        .map_err(|e| format!("the transfer agent could not record the request: {e:#}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use gonka_proto::inference::WorkRecord;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_requests_are_all_durable_with_their_bodies() {
        let dir = std::env::temp_dir().join(format!("gonka-recorder-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let db = Arc::new(redb::Database::create(dir.join("ta.redb")).unwrap());
        let outbox = Arc::new(Outbox::in_database(db.clone()).unwrap());
        let payloads = Arc::new(PayloadStore::in_database(db).unwrap());
        let recorder = Recorder::start(outbox.clone(), payloads.clone(), Arc::new(|| 7));
        let tasks: Vec<_> = (0..200)
            .map(|i| {
                let recorder = recorder.clone();
                tokio::spawn(async move {
                    let served = Served {
                        record: WorkRecord {
                            inference_id: format!("id{i}"),
                            requester: format!("r{}", i % 3),
                            commission: "1".into(),
                            ..WorkRecord::default()
                        },
                        host: "h".into(),
                        cost: 2,
                    };
                    let opening = OutputOpening {
                        salt: [i as u8; 32],
                        response_hash: [1; 32],
                    };
                    recorder
                        .record(Entry {
                            served,
                            body: format!("body {i}").into_bytes(),
                            opening,
                        })
                        .await
                })
            })
            .collect();
        for task in tasks {
            task.await.unwrap().unwrap();
        }
        assert_eq!(outbox.len(), 200);
        assert_eq!(outbox.owed_by("r0"), 67 * 3);
        for i in [0, 99, 199] {
            assert_eq!(
                payloads.get(&format!("id{i}")).unwrap(),
                Some(format!("body {i}").into_bytes())
            );
        }
        drop((recorder, outbox, payloads));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
