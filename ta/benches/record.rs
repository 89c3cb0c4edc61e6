//! What making a served request durable costs the transfer agent (its request body in the
//! payload store, then its work record in the outbox, before the answer's end goes out), at
//! fixed request rates, in the same process on the same disk, three ways:
//! - `one-by-one`: two writes per request, each its own fsync'd transaction of its own
//!   database file, in `spawn_blocking` (as the TA did first);
//! - `transaction`: one fsync'd transaction per request holding both writes in one shared
//!   database (what the recorder's group commit cost per group before its journal: at low
//!   rates a group is one request);
//! - `grouped`: [`gonka_ta::recorder::Recorder`] (every waiting request in one journal
//!   append with one `fdatasync`, then one database transaction without an fsync).
//!
//! `cargo bench -p gonka-ta --bench record` (release; `cargo test -p gonka-ta --bench record`
//! runs a one-second smoke version). Open loop: request `i` starts at
//! `start + i / rate` whether or not earlier ones finished; its latency runs from the moment
//! it starts (tokio's timer wakes it up to a millisecond after that time, which is left out)
//! to the moment its writes are durable, so waiting for a write in progress counts. Each phase
//! runs `RECORD_BENCH_SECS` seconds (default 3) at each rate of `RECORD_BENCH_RATES`
//! (default `100,1000,4000`); a body is 200 bytes, a record a realistic signed one (~600
//! bytes). Printed per mode and rate: requests, p50/p99/max latency in ms, and the durable
//! writes (fsync'd transactions or journal appends) per second the disk had to take.

use std::sync::Arc;
use std::time::{Duration, Instant};

use gonka_client::settlement::Served;
use gonka_proto::inference::WorkRecord;
use gonka_ta::payloads::{OutputOpening, PayloadStore};
use gonka_ta::recorder::{Entry, Recorder};
use gonka_ta::settle::Outbox;
use redb::Durability;

fn entry(i: u64) -> Entry {
    Entry {
        served: Served {
            record: WorkRecord {
                inference_id: format!("{i:064x}"),
                requester: "gonka1requester0000000000000000000000000000".into(),
                requester_pubkey: vec![2; 33],
                requester_signature: vec![1; 64],
                request_hash: vec![3; 32],
                model: "gonka/reference-1".into(),
                prompt_hash: vec![4; 32],
                output_commitment: vec![5; 32],
                prompt_tokens: 26,
                completion_tokens: 16,
                executor_node: "node2-ml".into(),
                commission: "7".into(),
                executor_signature: vec![6; 64],
                timestamp: 1_700_000_000,
                nonce: format!("{i:032x}"),
                transfer_agent: "gonka1ta00000000000000000000000000000000000".into(),
                max_price_per_token: "1000".into(),
                max_completion_tokens: 16,
                max_prompt_tokens: 64,
            },
            host: "gonka1host0000000000000000000000000000000000".into(),
            cost: 126,
            work_per_token: 0,
        },
        body: vec![b'x'; 200],
        opening: OutputOpening {
            salt: [7; 32],
            response_hash: [8; 32],
            scored: None,
        },
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    /// Each request writes its body and its record, each in its own durable transaction of
    /// its own database file (two fsyncs per request).
    OneByOne,
    /// Each request writes its body and its record in one durable transaction of one shared
    /// database: what the recorder cost per group before its journal, at rates where a group
    /// is one request.
    Transaction,
    /// Requests hand their writes to the recorder (journal append, then the database without
    /// an fsync of its own).
    Grouped,
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1e3
}

fn main() {
    // `cargo test` (no `--bench` argument) gets a short smoke run.
    let smoke = !std::env::args().any(|a| a == "--bench");
    let secs: u64 = std::env::var("RECORD_BENCH_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if smoke { 1 } else { 3 });
    let rates: Vec<u64> = std::env::var("RECORD_BENCH_RATES")
        .unwrap_or_else(|_| if smoke { "100" } else { "100,1000,4000" }.into())
        .split(',')
        .filter_map(|r| r.trim().parse().ok())
        .collect();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    println!(
        "{:<12} {:>7} {:>9} {:>9} {:>9} {:>9} {:>10}",
        "mode", "req/s", "requests", "p50 ms", "p99 ms", "max ms", "commits/s"
    );
    let mut next_id = 0u64;
    for &rate in &rates {
        for mode in [Mode::OneByOne, Mode::Transaction, Mode::Grouped] {
            let dir = tempfile::tempdir().unwrap();
            // One-by-one: the outbox and the payload store in their own files, as before;
            // otherwise one database, as the recorder needs.
            let (outbox, payloads) = match mode {
                Mode::OneByOne => (
                    Outbox::open(&dir.path().join("outbox.redb")).unwrap(),
                    PayloadStore::open(&dir.path().join("payloads.redb")).unwrap(),
                ),
                Mode::Transaction | Mode::Grouped => {
                    let db = Arc::new(redb::Database::create(dir.path().join("ta.redb")).unwrap());
                    (
                        Outbox::in_database(db.clone()).unwrap(),
                        PayloadStore::in_database(db).unwrap(),
                    )
                }
            };
            let (outbox, payloads) = (Arc::new(outbox), Arc::new(payloads));
            let recorder = (mode == Mode::Grouped).then(|| {
                Recorder::open(
                    &dir.path().join("journal"),
                    outbox.clone(),
                    payloads.clone(),
                    Arc::new(|| 1),
                )
                .unwrap()
            });
            let count = rate * secs;
            let first = next_id;
            next_id += count;
            let (latencies, elapsed) = runtime.block_on(async {
                let start = Instant::now() + Duration::from_millis(50);
                let tasks: Vec<_> = (0..count)
                    .map(|n| {
                        let at = start + Duration::from_secs_f64(n as f64 / rate as f64);
                        let (outbox, payloads, recorder) =
                            (outbox.clone(), payloads.clone(), recorder.clone());
                        tokio::spawn(async move {
                            tokio::time::sleep_until(at.into()).await;
                            // From when the request starts, not from its scheduled time:
                            // tokio's timer wakes up to a millisecond late, which is not
                            // the disk's cost.
                            let began = Instant::now();
                            let e = entry(first + n);
                            match mode {
                                Mode::OneByOne => tokio::task::spawn_blocking(move || {
                                    let id = e.served.record.inference_id.clone();
                                    payloads.put(&id, &e.body, &e.opening, 1).unwrap();
                                    outbox.put(&e.served).unwrap();
                                })
                                .await
                                .unwrap(),
                                Mode::Transaction => tokio::task::spawn_blocking(move || {
                                    let id = e.served.record.inference_id.clone();
                                    let body = [(id.as_str(), e.body.as_slice(), &e.opening)];
                                    outbox
                                        .put_many_with(&[&e.served], Durability::Immediate, |tx| {
                                            PayloadStore::write(tx, &body, 1)
                                        })
                                        .unwrap();
                                })
                                .await
                                .unwrap(),
                                Mode::Grouped => {
                                    recorder.as_ref().unwrap().record(e).await.unwrap()
                                }
                            }
                            began.elapsed()
                        })
                    })
                    .collect();
                let mut latencies = Vec::with_capacity(tasks.len());
                for task in tasks {
                    latencies.push(task.await.unwrap());
                }
                (latencies, start.elapsed())
            });
            // The recorder answers once a request is in its journal and applies it to the
            // outbox just after.
            let deadline = Instant::now() + Duration::from_secs(10);
            while (outbox.len() as u64) < count && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(1));
            }
            assert_eq!(outbox.len() as u64, count, "every record durable");
            let mut sorted = latencies;
            sorted.sort();
            let commits = match mode {
                Mode::OneByOne => 2 * count,
                Mode::Transaction => count,
                Mode::Grouped => recorder.as_ref().unwrap().groups(),
            };
            println!(
                "{:<12} {:>7} {:>9} {:>9.3} {:>9.3} {:>9.3} {:>10.0}",
                match mode {
                    Mode::OneByOne => "one-by-one",
                    Mode::Transaction => "transaction",
                    Mode::Grouped => "grouped",
                },
                rate,
                count,
                percentile(&sorted, 0.5),
                percentile(&sorted, 0.99),
                sorted.last().unwrap().as_secs_f64() * 1e3,
                commits as f64 / elapsed.as_secs_f64()
            );
        }
    }
}
