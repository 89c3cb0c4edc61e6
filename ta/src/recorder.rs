//! Group commit of served requests: every request a chain TA serves leaves two durable
//! writes, its body (and output opening) in the payload store, for the validators, and its
//! work record in the outbox, for settlement — before the answer's end goes out. Written one
//! request at a time, each in its own file, that was two fsyncs per request, on the
//! request's own thread. Instead the payload store and the outbox share one database, and
//! requests hand their writes to one writer thread ([`Recorder::record`]), which takes every
//! write waiting (up to [`MAX_GROUP`]), makes the group durable with one append to the
//! [`journal`](crate::journal) (one `fdatasync`), counts what its requesters owe and answers
//! them all: a request waits for the append in progress at most, and its own. An applier
//! thread then writes the groups to the database, all those waiting in one transaction
//! without a durable commit, and durably every [`journal::CHECKPOINT`], after which the
//! journal segments it covers are deleted; no database transaction is on a request's path.
//!
//! A record is never durable without its body (one journal frame holds both: a record the
//! chain might sample must have its body to serve), and a failed append fails every request
//! of its group: none is charged, none gets its answer's end. A request whose frame is in
//! the journal is answered even if applying it to the database fails later (it is durable,
//! and the next start applies it); the recorder then refuses every later request until the
//! transfer agent is restarted.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use anyhow::{Context, Result};
use gonka_client::settlement::Served;
use gonka_proto::settlement::BatchLeaf;
use prost::Message;
use redb::Durability;
use tokio::sync::{mpsc, oneshot};

use crate::journal::{self, Journal};
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

/// An entry as one journal frame holds it, with the time its body was received.
#[derive(Clone, PartialEq, prost::Message)]
struct JournalEntry {
    #[prost(message, optional, tag = "1")]
    leaf: Option<BatchLeaf>,
    #[prost(bytes = "vec", tag = "2")]
    body: Vec<u8>,
    #[prost(bytes = "vec", tag = "3")]
    salt: Vec<u8>,
    #[prost(bytes = "vec", tag = "4")]
    response_hash: Vec<u8>,
    #[prost(uint64, tag = "5")]
    received_at: u64,
    /// A "logprobs" model's scored output, which the commitment is to.
    #[prost(message, optional, tag = "6")]
    scored: Option<gonka_proto::disputes::ScoredOutput>,
}

impl JournalEntry {
    fn of(entry: &Entry, received_at: u64) -> JournalEntry {
        JournalEntry {
            leaf: Some(entry.served.to_leaf()),
            body: entry.body.clone(),
            salt: entry.opening.salt.to_vec(),
            response_hash: entry.opening.response_hash.to_vec(),
            received_at,
            scored: entry.opening.scored.clone(),
        }
    }

    fn entry(self) -> Result<(Entry, u64)> {
        let served = self
            .leaf
            .as_ref()
            .and_then(Served::of_leaf)
            .context("a journal entry lacks its record or cost")?;
        let opening = OutputOpening {
            salt: self
                .salt
                .try_into()
                .ok()
                .context("a journal entry's salt is not 32 bytes")?,
            response_hash: self
                .response_hash
                .try_into()
                .ok()
                .context("a journal entry's response hash is not 32 bytes")?,
            scored: self.scored,
        };
        let entry = Entry {
            served,
            body: self.body,
            opening,
        };
        Ok((entry, self.received_at))
    }
}

type Job = (Entry, oneshot::Sender<Result<(), String>>);

/// A journaled group on its way to the database: its records' outbox keys, its entries,
/// when its bodies were received, and its last frame's sequence number.
struct Journaled {
    first_key: u64,
    entries: Vec<Entry>,
    received_at: u64,
    last_seq: u64,
}

/// Why the recorder stopped, once it has (shared by its two threads).
type Failure = Arc<std::sync::Mutex<Option<String>>>;

fn failure(failed: &Failure) -> Option<String> {
    failed.lock().unwrap_or_else(|p| p.into_inner()).clone()
}

/// The handle requests record through; the recorder's threads end when it is dropped.
#[derive(Debug, Clone)]
pub struct Recorder {
    jobs: mpsc::Sender<Job>,
    groups: Arc<AtomicU64>,
}

impl Recorder {
    /// Opens the journal in the directory `journal_dir` over `payloads` and `outbox` (which
    /// must share their database), applies durably what it holds beyond what the database
    /// has (the requests answered before a crash), and starts the writer and applier
    /// threads, timing bodies with `clock`.
    pub fn open(
        journal_dir: &Path,
        outbox: Arc<Outbox>,
        payloads: Arc<PayloadStore>,
        clock: Clock,
    ) -> Result<Recorder> {
        assert!(
            Arc::ptr_eq(outbox.database(), payloads.database()),
            "the outbox and the payload store must share one database"
        );
        let (journal, frames) = Journal::open(journal_dir, outbox.database())?;
        let mut applied = journal::applied(outbox.database())?;
        if !frames.is_empty() {
            let count = frames.len();
            for chunk in frames.chunks(MAX_GROUP) {
                let mut entries = Vec::with_capacity(chunk.len());
                for frame in chunk {
                    let decoded = JournalEntry::decode(frame.payload.as_slice())
                        .context("a journal frame is not a journal entry")?;
                    entries.push(decoded.entry()?);
                }
                let first_key = outbox.take_keys(entries.len());
                let keyed: Vec<(u64, &Entry, u64)> = (first_key..)
                    .zip(&entries)
                    .map(|(key, (entry, at))| (key, entry, *at))
                    .collect();
                applied = chunk.last().expect("chunks are not empty").seq;
                apply(&outbox, &keyed, applied, Durability::Immediate)?;
                let served: Vec<&Served> = entries.iter().map(|(e, _)| &e.served).collect();
                outbox.owe_for(&served);
            }
            tracing::info!(
                requests = count,
                journal = %journal_dir.display(),
                "applied the requests the journal held beyond the database (answered before a restart)"
            );
        }
        journal::release(journal_dir, applied)?;
        let failed: Failure = Arc::default();
        let (to_apply, applier_queue) = std::sync::mpsc::sync_channel::<Journaled>(QUEUE);
        let applier = Applier {
            outbox: outbox.clone(),
            journal_dir: journal_dir.to_path_buf(),
            failed: failed.clone(),
        };
        std::thread::Builder::new()
            .name("ta-applier".into())
            .spawn(move || applier.run(applier_queue))
            .context("spawning the recorder's applier thread")?;
        let (jobs, mut queue) = mpsc::channel::<Job>(QUEUE);
        let groups = Arc::new(AtomicU64::new(0));
        let counted = groups.clone();
        let mut writer = Writer {
            journal,
            outbox,
            clock,
            failed,
            to_apply,
        };
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
                    writer.write(group);
                    counted.fetch_add(1, Ordering::Relaxed);
                }
            })
            .context("spawning the recorder thread")?;
        Ok(Recorder { jobs, groups })
    }

    /// Groups written so far (each one journal append).
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

/// The writer thread: journals groups and answers them.
struct Writer {
    journal: Journal,
    outbox: Arc<Outbox>,
    clock: Clock,
    failed: Failure,
    to_apply: std::sync::mpsc::SyncSender<Journaled>,
}

impl Writer {
    /// Journals `group` (durable), counts what its requesters owe, answers its requests,
    /// and hands the group to the applier: no database transaction is on the requests'
    /// path.
    fn write(&mut self, group: Vec<Job>) {
        let (entries, answers): (Vec<Entry>, Vec<_>) = group.into_iter().unzip();
        let journaled = self.journal(entries);
        let answer = journaled.as_ref().map(|_| ()).map_err(Clone::clone);
        for done in answers {
            let _ = done.send(answer.clone());
        }
        if let Ok(journaled) = journaled {
            // Blocks while the applier is QUEUE groups behind: requests then wait here.
            let _ = self.to_apply.send(journaled);
        }
    }

    /// Appends `entries` to the journal and counts what their requesters owe.
    fn journal(&mut self, entries: Vec<Entry>) -> Result<Journaled, String> {
        if let Some(failed) = failure(&self.failed) {
            return Err(failed);
        }
        let received_at = (self.clock)();
        let frames: Vec<Vec<u8>> = entries
            .iter()
            .map(|entry| JournalEntry::of(entry, received_at).encode_to_vec())
            .collect();
        let last_seq = self
            .journal
            .append(&frames)
            .map_err(|e| format!("the transfer agent could not record the request: {e:#}"))?;
        let served: Vec<&Served> = entries.iter().map(|e| &e.served).collect();
        let first_key = self.outbox.take_keys(served.len());
        self.outbox.owe_for(&served);
        Ok(Journaled {
            first_key,
            entries,
            received_at,
            last_seq,
        })
    }
}

/// The applier thread: writes journaled groups to the database, every group waiting in one
/// transaction without a durable commit, and a durable one every [`journal::CHECKPOINT`],
/// after which the segments it covers are deleted.
struct Applier {
    outbox: Arc<Outbox>,
    journal_dir: std::path::PathBuf,
    failed: Failure,
}

impl Applier {
    fn run(self, queue: std::sync::mpsc::Receiver<Journaled>) {
        let mut last_checkpoint = std::time::Instant::now();
        while let Ok(first) = queue.recv() {
            let mut groups = vec![first];
            while groups.len() < MAX_GROUP {
                match queue.try_recv() {
                    Ok(group) => groups.push(group),
                    Err(_) => break,
                }
            }
            let checkpoint = last_checkpoint.elapsed() >= journal::CHECKPOINT;
            if let Err(e) = self.apply(&groups, checkpoint) {
                let error = format!("{e:#}");
                tracing::error!(%error, "the recorder stopped: restart the transfer agent (its journal keeps every request it answered)");
                *self.failed.lock().unwrap_or_else(|p| p.into_inner()) = Some(format!(
                    "the transfer agent's recorder stopped ({error}); it must be restarted"
                ));
                return;
            }
            if checkpoint {
                last_checkpoint = std::time::Instant::now();
            }
            // Let groups gather: each transaction copies the B-tree paths it touches, and
            // until the next durable commit none of those pages is reused, so fewer, larger
            // transactions leave the checkpoint less to flush (and the journal's appends
            // less to wait behind on the disk).
            std::thread::sleep(journal::APPLY_INTERVAL);
        }
    }

    fn apply(&self, groups: &[Journaled], checkpoint: bool) -> Result<()> {
        let keyed: Vec<(u64, &Entry, u64)> = groups
            .iter()
            .flat_map(|g| {
                (g.first_key..)
                    .zip(&g.entries)
                    .map(|(key, entry)| (key, entry, g.received_at))
            })
            .collect();
        let last = groups.last().map_or(0, |g| g.last_seq);
        let durability = match checkpoint {
            true => Durability::Immediate,
            false => Durability::None,
        };
        apply(&self.outbox, &keyed, last, durability)?;
        if checkpoint {
            journal::release(&self.journal_dir, last)?;
        }
        Ok(())
    }
}

/// Writes each entry of `keyed` (outbox key, entry, when its body was received) — record
/// and body — in one transaction committed with `durability`, marking journal frames up to
/// `last` applied.
fn apply(
    outbox: &Outbox,
    keyed: &[(u64, &Entry, u64)],
    last: u64,
    durability: Durability,
) -> Result<()> {
    let records: Vec<(u64, &Served)> = keyed.iter().map(|(k, e, _)| (*k, &e.served)).collect();
    outbox.write_at(&records, durability, |tx| {
        // One write per run of bodies received at the same second.
        for run in keyed.chunk_by(|a, b| a.2 == b.2) {
            let items: Vec<(&str, &[u8], &OutputOpening)> = run
                .iter()
                .map(|(_, entry, _)| {
                    (
                        entry.served.record.inference_id.as_str(),
                        entry.body.as_slice(),
                        &entry.opening,
                    )
                })
                .collect();
            PayloadStore::write(tx, &items, run[0].2)?;
        }
        journal::mark_applied(tx, last)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use gonka_proto::inference::WorkRecord;
    use std::path::PathBuf;

    fn entry(i: usize) -> Entry {
        Entry {
            served: Served {
                record: WorkRecord {
                    inference_id: format!("id{i}"),
                    requester: format!("r{}", i % 3),
                    commission: "1".into(),
                    ..WorkRecord::default()
                },
                host: "h".into(),
                cost: 2,
                work_per_token: 0,
            },
            body: format!("body {i}").into_bytes(),
            opening: OutputOpening {
                salt: [i as u8; 32],
                response_hash: [1; 32],
                // Every other entry of a "logprobs" model: its scores travel too.
                scored: (i % 2 == 1).then(|| gonka_proto::disputes::ScoredOutput {
                    prompt_tokens: i as u64,
                    positions: vec![gonka_proto::disputes::ScoredToken {
                        token: i as u32,
                        logprob: -1,
                        top_tokens: vec![i as u32],
                        top_logprobs: vec![-1],
                    }],
                }),
            },
        }
    }

    /// The outbox, payload store and recorder of the TA home `dir`. The writer thread of a
    /// recorder just dropped may still hold the database for a moment: waits for it.
    fn open(dir: &Path) -> (Arc<Outbox>, Arc<PayloadStore>, Recorder) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let db = loop {
            match redb::Database::create(dir.join("ta.redb")) {
                Ok(db) => break Arc::new(db),
                Err(redb::DatabaseError::DatabaseAlreadyOpen)
                    if std::time::Instant::now() < deadline =>
                {
                    std::thread::sleep(std::time::Duration::from_millis(10))
                }
                Err(e) => panic!("opening the database: {e}"),
            }
        };
        let outbox = Arc::new(Outbox::in_database(db.clone()).unwrap());
        let payloads = Arc::new(PayloadStore::in_database(db).unwrap());
        let recorder = Recorder::open(
            &dir.join("journal"),
            outbox.clone(),
            payloads.clone(),
            Arc::new(|| 7),
        )
        .unwrap();
        (outbox, payloads, recorder)
    }

    async fn record_all(recorder: &Recorder, range: std::ops::Range<usize>) {
        let tasks: Vec<_> = range
            .map(|i| {
                let recorder = recorder.clone();
                tokio::spawn(async move { recorder.record(entry(i)).await })
            })
            .collect();
        for task in tasks {
            task.await.unwrap().unwrap();
        }
    }

    /// Checks that requests `0..count` are owed (at once: a request is owed before it is
    /// answered) and reach the outbox and payload store (soon: the database transaction
    /// follows the answers).
    fn assert_recorded(outbox: &Outbox, payloads: &PayloadStore, count: usize) {
        assert_recorded_with(outbox, payloads, count, |i| entry(i).body);
    }

    fn assert_recorded_with(
        outbox: &Outbox,
        payloads: &PayloadStore,
        count: usize,
        body: fn(usize) -> Vec<u8>,
    ) {
        assert_eq!(outbox.owed_by("r0"), count.div_ceil(3) as u128 * 3);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while outbox.len() < count && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert_eq!(outbox.len(), count);
        for i in [0, count / 2, count - 1] {
            let stored = payloads.get(&format!("id{i}")).unwrap();
            assert!(stored == Some(body(i)), "the body of request {i}");
            assert_eq!(
                payloads.opening(&format!("id{i}")).unwrap(),
                Some(entry(i).opening)
            );
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_requests_are_all_durable_with_their_bodies() {
        let dir = tempfile::tempdir().unwrap();
        let (outbox, payloads, recorder) = open(dir.path());
        record_all(&recorder, 0..200).await;
        assert_recorded(&outbox, &payloads, 200);
        assert!(recorder.groups() <= 200);
    }

    const CRASH_DIR: &str = "GONKA_RECORDER_CRASH_DIR";
    const CRASH_COUNT: usize = 300;

    /// In a child process (this test binary run again): records [`CRASH_COUNT`] requests,
    /// then aborts, so nothing is flushed or dropped, as a `kill -9` would leave it. The
    /// parent then opens the database as the next start of the transfer agent would.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_answered_request_survives_a_crash_exactly_once() {
        if let Ok(dir) = std::env::var(CRASH_DIR) {
            let (_outbox, _payloads, recorder) = open(Path::new(&dir));
            record_all(&recorder, 0..CRASH_COUNT).await;
            std::process::abort();
        }
        let dir = tempfile::tempdir().unwrap();
        let status = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "recorder::tests::every_answered_request_survives_a_crash_exactly_once",
                "--nocapture",
            ])
            .env(CRASH_DIR, dir.path())
            .status()
            .unwrap();
        assert!(!status.success(), "the child aborts");
        // Without the journal, the database alone lacks answered requests: they were applied
        // without a durable commit.
        let copy = tempfile::tempdir().unwrap();
        std::fs::copy(dir.path().join("ta.redb"), copy.path().join("ta.redb")).unwrap();
        let without: PathBuf = copy.path().join("ta.redb");
        let db = Arc::new(redb::Database::create(&without).unwrap());
        let alone = Outbox::in_database(db).unwrap().len();
        assert!(alone < CRASH_COUNT, "the database alone has {alone}");
        // With it, every one is there once, with its body; opening again adds nothing.
        for _ in 0..2 {
            let (outbox, payloads, recorder) = open(dir.path());
            assert_recorded(&outbox, &payloads, CRASH_COUNT);
            drop((recorder, outbox, payloads));
        }
        // And recording goes on after the replay.
        let (outbox, payloads, recorder) = open(dir.path());
        record_all(&recorder, CRASH_COUNT..CRASH_COUNT + 10).await;
        assert_recorded(&outbox, &payloads, CRASH_COUNT + 10);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_checkpoint_deletes_the_segments_it_covers_and_loses_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let (outbox, payloads, recorder) = open(dir.path());
        let segments = || {
            std::fs::read_dir(dir.path().join("journal"))
                .unwrap()
                .count()
        };
        // Bodies of 64 KiB: 100 of them fill more than one segment.
        let body = |i: usize| vec![i as u8; 64 << 10];
        let big = |i: usize| Entry {
            body: body(i),
            ..entry(i)
        };
        for i in 0..100 {
            recorder.record(big(i)).await.unwrap();
        }
        assert!(segments() >= 2, "{} segments", segments());
        // The first group after a checkpoint interval is committed durably.
        tokio::time::sleep(journal::CHECKPOINT).await;
        recorder.record(big(100)).await.unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while segments() > 1 && std::time::Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        assert_eq!(segments(), 1, "only the segment appended to is left");
        assert_recorded_with(&outbox, &payloads, 101, body);
        drop((recorder, outbox, payloads));
        let (outbox, payloads, _recorder) = open(dir.path());
        assert_recorded_with(&outbox, &payloads, 101, body);
    }
}
