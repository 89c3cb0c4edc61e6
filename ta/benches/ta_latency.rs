//! The latency a transfer agent adds: the same chat request at fixed request rates, once
//! straight to an ML node and once through a TA, in the same process on the same machine.
//!
//! `cargo bench -p gonka-ta --bench ta_latency` (release). `cargo test -p gonka-ta
//! --bench ta_latency` runs a short smoke version in the debug profile.
//!
//! # Setup
//! Two stacks, each of [`NODES`] ML nodes (`ml_node::serve`, no response key, so no
//! receipts) and one chain-less TA in front of them (`gonka_ta::server::serve`), all on
//! `127.0.0.1:0` in one 2-worker tokio runtime:
//!
//! - **reference**: the nodes run the built-in reference model, on the runtime's blocking
//!   threads.
//! - **stub**: the nodes forward (`MlNodeConfig::upstream`) to an in-process server that
//!   answers every request with the same canned completion at once. The ML node still
//!   parses, validates and answers as usual; only generation is gone.
//!
//! - **chain**: the stub backend behind a TA in full chain mode (`support`): a fake chain
//!   RPC, ML nodes that sign receipts with keys registered there, and a TA that reserves the
//!   requester's escrow, signs each call for the node, checks the node's receipt and makes
//!   the body and the record durable (redb in a temporary directory, group commit) before
//!   the answer goes out. What the goal is about.
//!
//! In the reference and stub stacks the TA is chain-less and skips what only a chain gives
//! it: the escrow check, the call signed for the node, the verification of the node's
//! execution receipt and the durable write.
//!
//! Why two: the bench first times one generation of its request in-process and prints it.
//! Even the cheapest request (the 2-byte prompt [`PROMPT`] is 26 prompt tokens once
//! chat-formatted, [`MAX_TOKENS`] = 1) took about 1.6 ms of CPU on the 2-core machine this
//! was written on (max_tokens 4: 1.8 ms, 16: 3 ms), almost all of it prefill, which
//! `max_tokens` cannot shorten. At 1,000 req/s that is 1.6 cores of the 2 that also run the
//! TA and the client, so the reference model, not the TA, would set the numbers (queues,
//! 503s, timeouts) whatever the node count: nodes share the same cores. So the reference
//! stack runs at 100 req/s (0.16 cores), where it shows the TA against a real ML node, and
//! the stub stack runs at 100 and 1,000 req/s, where the ML node is cheap enough that what
//! differs between the paths is the TA. Four nodes make round-robin and the TA's routing
//! real without adding anything but idle sockets. Each node admits [`NODE_CONCURRENCY`] requests at once and the TA sends each node
//! as many, far more than these rates keep busy, so neither the TA's wait queue nor a node's
//! 503 is part of the normal picture (both would show up as latency or errors).
//!
//! # Load
//! Open loop: in each phase, request `i` is scheduled at `start + i / rate` whether or not
//! earlier requests have finished, by a generator thread that sleeps until each scheduled
//! time and hands the request to a 1-worker client runtime. Latency is measured from the
//! scheduled start (not from when the client got round to sending it) to the last byte of the
//! response, so queueing anywhere, client included, counts and there is no coordinated
//! omission. `start lag p99` shows how late the client began requests; it is part of the
//! latency of both paths.
//!
//! Each request opens a new TCP connection and sends `Connection: close`, as the TA itself
//! does towards ML nodes: no connection pool to warm up or to hide queueing in. The client is
//! hand-written HTTP/1.1 over a tokio `TcpStream` (a connect, one write, a few reads).
//!
//! - **direct**: POST to an ML node, round-robin over the nodes.
//! - **via TA**: POST to the TA, signed with a fresh nonce per request. The generator signs
//!   each request just before its scheduled time, so the client's signing cost is not in the
//!   latency; it is printed separately (the client pays it, not the TA).
//!
//! The first `warmup` of each phase is sent but not counted. A request counts as an error if
//! it does not answer 200 (connection failures and the [`REQUEST_TIMEOUT`] included); the
//! percentiles are over the successful ones.
//!
//! # Reading the output
//! One row per backend, rate and path: requests counted, errors, latency p50/p90/p99/max in
//! milliseconds. `TA added` is the via-TA percentile minus the direct percentile of the same
//! backend and rate (a difference of percentiles, not a percentile of per-request
//! differences). It covers everything the TA does per request: accepting a connection,
//! reading the body, authenticating it (signature verification, also timed alone in-process
//! and printed), routing, a new connection to the node, reading its answer and relaying it.
//! `CPU us/req` is this process's CPU time (client, signing, servers; from `/proc/self/stat`,
//! 10 ms ticks) over the phase divided by the requests sent; its difference between the paths,
//! printed with the added latency, is what the TA costs in CPU per request plus the client's
//! signing. `CPU wait` is the share of the phase during which some runnable task, of this
//! process or any other, waited for a CPU (`/proc/pressure/cpu`, "some"): near zero the
//! latencies are the software's; well above a few percent they are about CPU contention.
//! Servers and client share this machine's cores (and, on a shared machine, other people's
//! processes), so compare the paths within one run, and distrust a run with high `CPU wait`.
//!
//! For each chain phase the bench then times the journal's durable append alone (one
//! frame, `write` + `fdatasync`, at the phase's rate, on the same disk): a chain TA answers
//! only once the request is durable, so the disk's own tail is a floor under the chain rows'
//! added p99 that no change in the TA removes.
//!
//! Settings (environment): `TA_BENCH_PHASES` (`backend@req/s`, comma-separated, default
//! `reference@100,stub@100,stub@1000,chain@100,chain@1000`), `TA_BENCH_SECS` (counted seconds
//! per phase, default 5), `TA_BENCH_WARMUP_SECS` (default 1). The defaults run 5 × 2 phases
//! of 6 s, about a minute in all.

use std::collections::BTreeMap;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[path = "support/mod.rs"]
mod support;

use axum::http::{HeaderMap, HeaderName, HeaderValue};
use gonka_client::keys::well_known_mnemonic;
use gonka_client::{unix_now, Key};
use gonka_model::{encode_chat, ChatTurn, ReferenceModel, DEFAULT_SEED};
use gonka_node::forward::Upstream;
use gonka_node::DEFAULT_MODEL_ID;
use gonka_ta::auth::{verify, ReplayCache};
use gonka_ta::{server, RateLimit, TaConfig, TaNodeConfig, TransferAgent};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::runtime::Runtime;
use tokio::task::JoinHandle;

/// ML nodes per stack (behind its TA, and round-robin targets of the direct path).
const NODES: usize = 4;
/// Requests each ML node admits at once, and that the TA sends each node at once.
const NODE_CONCURRENCY: usize = 32;
/// The user message of every request: as short as a real one gets, to keep prefill cheap.
const PROMPT: &str = "hi";
/// `max_tokens` of every request (the stub's answer has as many completion tokens).
const MAX_TOKENS: u32 = support::STUB_COMPLETION_TOKENS;
/// A request still unanswered after this long counts as an error.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// The phases run unless `TA_BENCH_PHASES` says otherwise.
const DEFAULT_PHASES: &str = "reference@100,stub@100,stub@1000,chain@100,chain@1000";

/// What computes the ML nodes' answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Backend {
    /// The built-in reference model.
    Reference,
    /// Forwarding to an in-process server with a canned answer.
    Stub,
    /// The stub, with receipts, behind a TA in full chain mode.
    Chain,
}

impl Backend {
    fn name(self) -> &'static str {
        match self {
            Backend::Reference => "reference",
            Backend::Stub => "stub",
            Backend::Chain => "chain",
        }
    }
}

/// What one run measures.
struct Settings {
    /// `(backend, req/s)` in order.
    phases: Vec<(Backend, f64)>,
    warmup: Duration,
    duration: Duration,
    /// Runs of each in-process calibration timing.
    calibration_runs: usize,
}

impl Settings {
    /// From the environment; `cargo test` (no `--bench` argument) gets a short smoke run.
    fn from_env() -> Self {
        let bench = std::env::args().any(|a| a == "--bench");
        let secs = |name: &str, default: f64| -> Duration {
            let value = std::env::var(name).map_or(default, |v| {
                v.trim()
                    .parse()
                    .unwrap_or_else(|e| panic!("{name} must be seconds but is {v:?}: {e}"))
            });
            Duration::from_secs_f64(value)
        };
        let phases = std::env::var("TA_BENCH_PHASES")
            .unwrap_or_else(|_| DEFAULT_PHASES.to_string())
            .split(',')
            .map(|phase| {
                let parsed = phase.trim().split_once('@').and_then(|(backend, rate)| {
                    let backend = match backend {
                        "reference" => Backend::Reference,
                        "stub" => Backend::Stub,
                        "chain" => Backend::Chain,
                        _ => return None,
                    };
                    let rate = rate.parse::<f64>().ok().filter(|r| *r > 0.0)?;
                    Some((backend, rate))
                });
                parsed.unwrap_or_else(|| {
                    panic!("TA_BENCH_PHASES must list `reference@RATE`, `stub@RATE` or `chain@RATE` (req/s > 0), comma-separated, but holds {phase:?}")
                })
            })
            .collect();
        let (warmup, duration, calibration_runs) = if bench {
            (1.0, 5.0, 200)
        } else {
            (0.1, 0.3, 10)
        };
        Self {
            calibration_runs,
            phases,
            warmup: secs("TA_BENCH_WARMUP_SECS", warmup),
            duration: secs("TA_BENCH_SECS", duration),
        }
    }
}

fn request_body() -> Vec<u8> {
    json!({
        "model": DEFAULT_MODEL_ID,
        "messages": [{"role": "user", "content": PROMPT}],
        "max_tokens": MAX_TOKENS,
        "stream": false,
    })
    .to_string()
    .into_bytes()
}

/// One whole HTTP/1.1 request: header block and body, ready for a single write.
fn http_message(addr: SocketAddr, headers: &[(&str, String)], body: &[u8]) -> Arc<[u8]> {
    let mut head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    let mut message = head.into_bytes();
    message.extend_from_slice(body);
    message.into()
}

/// Nonces unique within the run (the TA refuses a replayed one).
static NONCE: AtomicU64 = AtomicU64::new(0);

fn fresh_nonce() -> String {
    format!("bench-{}", NONCE.fetch_add(1, Ordering::Relaxed))
}

/// Sends `message` on a new connection and reads the response; returns the status and the
/// instant the response's last byte arrived (the end of the `Content-Length` body, or the
/// close of a body without one).
async fn exchange(addr: SocketAddr, message: &[u8]) -> io::Result<(u16, Instant)> {
    let mut stream = TcpStream::connect(addr).await?;
    stream.set_nodelay(true)?;
    stream.write_all(message).await?;
    let mut buf = Vec::with_capacity(2048);
    let mut chunk = [0u8; 8192];
    // (status, Content-Length, offset of the body in `buf`) once the header block is in.
    let mut head: Option<(u16, Option<usize>, usize)> = None;
    let (status, done) = loop {
        let n = stream.read(&mut chunk).await?;
        let now = Instant::now();
        if n == 0 {
            match head {
                Some((status, None, _)) => break (status, now),
                _ => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "connection closed before the whole response arrived",
                    ))
                }
            }
        }
        buf.extend_from_slice(&chunk[..n]);
        if head.is_none() {
            if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                let (status, length) = parse_head(&buf[..end])?;
                head = Some((status, length, end + 4));
            }
        }
        if let Some((status, Some(len), start)) = head {
            if buf.len() - start >= len {
                break (status, now);
            }
        }
    };
    // Let the server close first, as with any `Connection: close` exchange, so the closed
    // connections linger on the server side instead of holding the client's ephemeral ports.
    // Not part of the latency.
    let _ = stream.read(&mut chunk).await;
    Ok((status, done))
}

/// Status and `Content-Length` of a response header block.
fn parse_head(head: &[u8]) -> io::Result<(u16, Option<usize>)> {
    let bad = |what: &str| io::Error::new(io::ErrorKind::InvalidData, what.to_string());
    let text = std::str::from_utf8(head).map_err(|_| bad("response head is not UTF-8"))?;
    let mut lines = text.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| bad("response has no status line"))?;
    let length = lines
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim().eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.trim().parse().ok());
    Ok((status, length))
}

/// The outcome of one scheduled request.
struct Sample {
    index: usize,
    /// How late the client began the request.
    lag: Duration,
    /// Scheduled start to last byte for a 200; what went wrong otherwise.
    result: Result<Duration, String>,
}

async fn scheduled_request(
    index: usize,
    addr: SocketAddr,
    message: Arc<[u8]>,
    scheduled: Instant,
) -> Sample {
    let lag = Instant::now().saturating_duration_since(scheduled);
    let result = match tokio::time::timeout(REQUEST_TIMEOUT, exchange(addr, &message)).await {
        Ok(Ok((200, done))) => Ok(done - scheduled),
        Ok(Ok((status, _))) => Err(format!("HTTP {status}")),
        Ok(Err(e)) => Err(format!("{:?}", e.kind())),
        Err(_) => Err(format!("no answer within {} s", REQUEST_TIMEOUT.as_secs())),
    };
    Sample { index, lag, result }
}

/// Where a phase sends its requests.
#[derive(Clone)]
enum Path {
    /// Straight to the ML nodes, round-robin; one prepared message per node.
    Direct(Vec<(SocketAddr, Arc<[u8]>)>),
    /// To the TA, each request signed by `key` with a fresh nonce, for the TA `terms`.
    ViaTa {
        addr: SocketAddr,
        key: Arc<Key>,
        terms: Arc<TaTerms>,
    },
}

/// What requests to a TA are signed for.
struct TaTerms {
    chain_id: String,
    transfer_agent: String,
    max_price: u128,
}

impl Path {
    fn name(&self) -> &'static str {
        match self {
            Path::Direct(_) => "direct",
            Path::ViaTa { .. } => "via TA",
        }
    }
}

/// The counted samples of one phase.
struct Phase {
    backend: Backend,
    rate: f64,
    path: &'static str,
    latencies: Vec<Duration>,
    lags: Vec<Duration>,
    errors: BTreeMap<String, usize>,
    /// CPU use over the whole phase (warm-up included), where `/proc` tells it.
    cpu: Option<CpuUse>,
}

impl Phase {
    fn requests(&self) -> usize {
        self.latencies.len() + self.errors.values().sum::<usize>()
    }
}

/// Clock ticks of `/proc/*/stat` per second (`USER_HZ`, 100 on Linux).
const USER_HZ: f64 = 100.0;

/// CPU counters at one instant: this process's CPU time, and the machine's CPU pressure.
#[derive(Debug, Clone, Copy)]
struct CpuTicks {
    at: Instant,
    /// User + system time of this process, in clock ticks.
    process: u64,
    /// `some total` of `/proc/pressure/cpu`: microseconds during which at least one runnable
    /// task (of any process) waited for a CPU. `None` without PSI.
    pressure_us: Option<u64>,
}

impl CpuTicks {
    /// From `/proc` (Linux); `None` elsewhere.
    fn now() -> Option<Self> {
        let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
        // Fields after the parenthesised command name start at field 3 (state); utime and
        // stime are fields 14 and 15.
        let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
        let process = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
        let pressure_us = std::fs::read_to_string("/proc/pressure/cpu")
            .ok()
            .and_then(|text| {
                text.lines()
                    .find(|l| l.starts_with("some "))?
                    .split_whitespace()
                    .find_map(|f| f.strip_prefix("total="))?
                    .parse()
                    .ok()
            });
        Some(Self {
            at: Instant::now(),
            process,
            pressure_us,
        })
    }
}

/// CPU use during one phase.
#[derive(Debug, Clone, Copy)]
struct CpuUse {
    /// CPU time of this process (client, signing and servers) per request sent.
    per_request: Duration,
    /// Share of the phase during which some runnable task waited for a CPU.
    pressure: Option<f64>,
}

impl CpuUse {
    fn between(before: CpuTicks, after: CpuTicks, requests: usize) -> Self {
        let secs = (after.process - before.process) as f64 / USER_HZ;
        let wall = (after.at - before.at).as_secs_f64().max(1e-9);
        Self {
            per_request: Duration::from_secs_f64(secs / requests.max(1) as f64),
            pressure: before
                .pressure_us
                .zip(after.pressure_us)
                .map(|(b, a)| (a - b) as f64 / 1e6 / wall),
        }
    }
}

/// Bytes of each frame the disk probe appends: about one journaled chat request (its record
/// with two signatures, its body and output opening).
const JOURNAL_PROBE_BYTES: usize = 1_024;

/// Appends one frame to a fresh journal `rate` times a second for `duration`, each made
/// durable as the recorder does (`Journal::append`: write + `fdatasync`); returns each
/// append's time.
fn journal_appends(rate: f64, duration: Duration) -> Vec<Duration> {
    let dir = tempfile::tempdir().expect("temporary directory");
    let db = redb::Database::create(dir.path().join("probe.redb")).expect("probe database");
    let (mut journal, _) =
        gonka_ta::journal::Journal::open(&dir.path().join("journal"), &db).expect("journal");
    let frame = vec![0x5a; JOURNAL_PROBE_BYTES];
    let count = (rate * duration.as_secs_f64()) as usize;
    let start = Instant::now();
    (0..count)
        .map(|i| {
            let at = start + Duration::from_secs_f64(i as f64 / rate);
            std::thread::sleep(at.saturating_duration_since(Instant::now()));
            let began = Instant::now();
            journal
                .append(std::slice::from_ref(&frame))
                .expect("journal append");
            began.elapsed()
        })
        .collect()
}

/// Nearest-rank percentile of sorted `values`.
fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Runs one open-loop phase on `path` of the `backend` stack: `warmup` then `duration` at
/// `rate` req/s. Returns the counted samples and the time each signature took (via TA only).
fn run_phase(
    client: &Runtime,
    (backend, path): (Backend, &Path),
    rate: f64,
    warmup: Duration,
    duration: Duration,
) -> (Phase, Vec<Duration>) {
    let warm = (warmup.as_secs_f64() * rate).round() as usize;
    let total = warm + (duration.as_secs_f64() * rate).round() as usize;
    let handle = client.handle().clone();
    let cpu_before = CpuTicks::now();
    let generator_path = path.clone();
    // A plain thread with std sleeps: finer than tokio's 1 ms timer, and never delayed by the
    // tasks it starts.
    let generator = std::thread::spawn(move || {
        let body = request_body();
        let mut tasks: Vec<JoinHandle<Sample>> = Vec::with_capacity(total);
        let mut sign_times = Vec::new();
        let start = Instant::now() + Duration::from_millis(10);
        for index in 0..total {
            // Prepared (for the TA: signed) before its scheduled time, so it costs no latency.
            let (addr, message) = match &generator_path {
                Path::Direct(nodes) => nodes[index % nodes.len()].clone(),
                Path::ViaTa { addr, key, terms } => {
                    let t0 = Instant::now();
                    let headers = sign_request(key, &body, terms).expect("signing a request");
                    sign_times.push(t0.elapsed());
                    (*addr, http_message(*addr, &headers, &body))
                }
            };
            let scheduled = start + Duration::from_secs_f64(index as f64 / rate);
            let now = Instant::now();
            if scheduled > now {
                std::thread::sleep(scheduled - now);
            }
            tasks.push(handle.spawn(scheduled_request(index, addr, message, scheduled)));
        }
        (tasks, sign_times)
    });
    let (tasks, sign_times) = generator.join().expect("the load generator panicked");
    let samples: Vec<Sample> = client.block_on(async {
        let mut samples = Vec::with_capacity(tasks.len());
        for task in tasks {
            samples.push(task.await.expect("a request task panicked"));
        }
        samples
    });
    let cpu = cpu_before
        .zip(CpuTicks::now())
        .map(|(before, after)| CpuUse::between(before, after, total));
    let mut phase = Phase {
        backend,
        rate,
        path: path.name(),
        latencies: Vec::new(),
        lags: Vec::new(),
        errors: BTreeMap::new(),
        cpu,
    };
    for sample in samples.into_iter().filter(|s| s.index >= warm) {
        phase.lags.push(sample.lag);
        match sample.result {
            Ok(latency) => phase.latencies.push(latency),
            Err(e) => *phase.errors.entry(e).or_default() += 1,
        }
    }
    phase.latencies.sort();
    phase.lags.sort();
    (phase, sign_times)
}

/// Median time of `f` over `runs` runs.
fn median_time(runs: usize, mut f: impl FnMut()) -> Duration {
    let mut times: Vec<Duration> = (0..runs)
        .map(|_| {
            let t0 = Instant::now();
            f();
            t0.elapsed()
        })
        .collect();
    times.sort();
    percentile(&times, 50.0)
}

/// Times one generation of the bench's request in-process for a few `max_tokens`; returns
/// the time at [`MAX_TOKENS`].
fn time_generation(runs: usize) -> Duration {
    let model = ReferenceModel::new(DEFAULT_SEED);
    let prompt = encode_chat(&[ChatTurn {
        role: "user",
        content: PROMPT,
    }]);
    let mut used = Duration::ZERO;
    for max_tokens in [MAX_TOKENS as usize, 4, 16] {
        let t = median_time(runs, || {
            let out: Vec<u32> = model.stream(&prompt, max_tokens).collect();
            std::hint::black_box(out);
        });
        if max_tokens == MAX_TOKENS as usize {
            used = t;
        }
        println!(
            "  reference model, one generation, {} prompt tokens, max_tokens {max_tokens:>2}: {:>7.1} us (median of {runs})",
            prompt.len(),
            t.as_secs_f64() * 1e6,
        );
    }
    used
}

/// The address of the benchmarked TA, which requests are signed for.
const TA_ADDRESS: &str = "gonka1benchta";

/// The terms of the chain-less TAs.
fn chainless_terms() -> TaTerms {
    TaTerms {
        chain_id: String::new(),
        transfer_agent: TA_ADDRESS.to_string(),
        max_price: 0,
    }
}

/// Signed headers of `body` (its model and max_tokens are the terms) for the TA of `terms`,
/// now, with a fresh nonce.
fn sign_request(
    key: &Key,
    body: &[u8],
    terms: &TaTerms,
) -> anyhow::Result<Vec<(&'static str, String)>> {
    support::sign_request(
        key,
        body,
        &terms.chain_id,
        &terms.transfer_agent,
        terms.max_price,
        fresh_nonce(),
    )
}

/// Times the TA's authentication of one request (signature verification, address derivation,
/// replay check) in-process, excluding signing.
fn time_authentication(key: &Key, runs: usize) -> Duration {
    let body = request_body();
    let mut cache = ReplayCache::default();
    let requests: Vec<HeaderMap> = (0..runs)
        .map(|_| {
            sign_request(key, &body, &chainless_terms())
                .expect("signing a request")
                .into_iter()
                .map(|(k, v)| {
                    (
                        HeaderName::from_bytes(k.as_bytes()).expect("header name"),
                        HeaderValue::from_str(&v).expect("header value"),
                    )
                })
                .collect()
        })
        .collect();
    let mut requests = requests.into_iter();
    median_time(runs, || {
        let headers = requests.next().expect("one request per run");
        {
            let now = unix_now();
            let auth = verify(&headers, &body, now, 60).expect("verifies");
            cache.admit(&auth, now, 60).expect("fresh nonce");
        }
    })
}

/// One stack: ML nodes on `backend` and a TA in front of them.
struct Stack {
    direct: Path,
    via_ta: Path,
    /// The chain TA's database, removed when the stack goes.
    _db: Option<tempfile::TempDir>,
}

/// Starts a stack on `rt`.
fn start_stack(rt: &Runtime, backend: Backend, key: &Arc<Key>) -> Stack {
    let (nodes, ta_addr, terms, db) = rt.block_on(async {
        let upstream = match backend {
            Backend::Reference => None,
            Backend::Stub | Backend::Chain => {
                let stub = support::start_stub(DEFAULT_MODEL_ID).await;
                Some(Upstream::new(&format!("http://{stub}"), None, None).expect("stub URL"))
            }
        };
        let chain = backend == Backend::Chain;
        let nodes = support::start_nodes(upstream, NODES, NODE_CONCURRENCY, chain).await;
        let config = TaConfig {
            address: TA_ADDRESS.to_string(),
            nodes: nodes
                .iter()
                .map(|n| TaNodeConfig {
                    id: n.id.clone(),
                    url: format!("http://{}", n.addr),
                    models: vec![n.model.clone()],
                    vram_mib: 0,
                    bandwidth_mbps: 0,
                    max_concurrency: n.max_concurrency,
                })
                .collect(),
            // One requester sends every request: no per-requester limit.
            rate_limit: RateLimit {
                per_second: 0,
                ..RateLimit::default()
            },
            ..TaConfig::default()
        };
        let (ta, terms, db) = if chain {
            let rpc = support::start_fake_chain().await;
            let db = tempfile::tempdir().expect("temporary directory");
            let (ta, address) = support::chain_ta(rpc, &nodes, config, db.path()).await;
            let terms = TaTerms {
                chain_id: support::CHAIN_ID.to_string(),
                transfer_agent: address,
                max_price: support::PRICE,
            };
            (ta, terms, Some(db))
        } else {
            let ta = TransferAgent::new(config).expect("TA config");
            (ta, chainless_terms(), None)
        };
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let ta_addr = listener.local_addr().expect("local addr");
        tokio::spawn(server::serve(listener, ta, std::future::pending()));
        let nodes: Vec<SocketAddr> = nodes.iter().map(|n| n.addr).collect();
        (nodes, ta_addr, terms, db)
    });
    let body = request_body();
    Stack {
        direct: Path::Direct(
            nodes
                .iter()
                .map(|addr| (*addr, http_message(*addr, &[], &body)))
                .collect(),
        ),
        via_ta: Path::ViaTa {
            addr: ta_addr,
            key: key.clone(),
            terms: Arc::new(terms),
        },
        _db: db,
    }
}

fn main() {
    let settings = Settings::from_env();
    let profile = if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    };
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!("TA added latency ({profile}, {cores} cores)");
    println!("calibration, in-process:");
    let runs = settings.calibration_runs;
    let generation = time_generation(runs);
    for (backend, rate) in &settings.phases {
        if *backend == Backend::Reference {
            println!(
                "  -> reference at {rate:.0} req/s keeps {:.2} cores busy generating ({cores} cores here)",
                rate * generation.as_secs_f64()
            );
        }
    }
    let key =
        Arc::new(Key::from_mnemonic(&well_known_mnemonic("requester")).expect("well-known key"));
    let body = request_body();
    let sign_alone = median_time(runs, || {
        let headers = sign_request(&key, &body, &chainless_terms());
        std::hint::black_box(headers.expect("signing a request"));
    });
    println!(
        "  client signs one request:   {:>7.1} us (median of {runs})",
        sign_alone.as_secs_f64() * 1e6
    );
    println!(
        "  TA authenticates one:       {:>7.1} us (median of {runs}; signature, address, replay check)",
        time_authentication(&key, runs).as_secs_f64() * 1e6
    );

    let servers = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("servers")
        .enable_all()
        .build()
        .expect("server runtime");
    let client = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("client")
        .enable_all()
        .build()
        .expect("client runtime");
    let mut stacks: BTreeMap<&'static str, Stack> = BTreeMap::new();
    for (backend, _) in &settings.phases {
        if !stacks.contains_key(backend.name()) {
            let stack = start_stack(&servers, *backend, &key);
            // Every path answers before anything is measured (nodes build their weights).
            for path in [&stack.direct, &stack.via_ta] {
                let short = Duration::from_millis(200);
                let (phase, _) = run_phase(&client, (*backend, path), 20.0, Duration::ZERO, short);
                assert!(
                    phase.errors.is_empty() && !phase.latencies.is_empty(),
                    "{} {} does not answer 200: {:?}",
                    backend.name(),
                    path.name(),
                    phase.errors
                );
            }
            stacks.insert(backend.name(), stack);
        }
    }
    println!(
        "setup: per backend {NODES} ML nodes x max_concurrency {NODE_CONCURRENCY} + 1 TA (chain mode for `chain`, else chain-less); \
         request {PROMPT:?}, max_tokens {MAX_TOKENS}, not streamed; new TCP connection per request"
    );
    println!(
        "load: open loop, {:.1} s warm-up + {:.1} s counted per phase; latency = scheduled start -> last response byte",
        settings.warmup.as_secs_f64(),
        settings.duration.as_secs_f64()
    );

    let mut phases = Vec::new();
    let mut sign_times = Vec::new();
    for &(backend, rate) in &settings.phases {
        let stack = &stacks[backend.name()];
        for path in [&stack.direct, &stack.via_ta] {
            let (phase, signs) = run_phase(
                &client,
                (backend, path),
                rate,
                settings.warmup,
                settings.duration,
            );
            sign_times.extend(signs);
            phases.push(phase);
        }
    }

    println!();
    println!(
        "{:<9} {:>6}  {:<7} {:>8} {:>6} {:>8} {:>8} {:>8} {:>8}   {:>13}  {:>11}  {:>9}",
        "backend",
        "req/s",
        "path",
        "requests",
        "errors",
        "p50 ms",
        "p90 ms",
        "p99 ms",
        "max ms",
        "start lag p99",
        "CPU us/req",
        "CPU wait"
    );
    for p in &phases {
        let l = &p.latencies;
        println!(
            "{:<9} {:>6.0}  {:<7} {:>8} {:>6} {:>8.3} {:>8.3} {:>8.3} {:>8.3}   {:>10.3} ms  {:>11}  {:>9}",
            p.backend.name(),
            p.rate,
            p.path,
            p.requests(),
            p.errors.values().sum::<usize>(),
            ms(percentile(l, 50.0)),
            ms(percentile(l, 90.0)),
            ms(percentile(l, 99.0)),
            ms(l.last().copied().unwrap_or_default()),
            ms(percentile(&p.lags, 99.0)),
            p.cpu.map_or("-".to_string(), |c| format!(
                "{:.0}",
                c.per_request.as_secs_f64() * 1e6
            )),
            p.cpu
                .and_then(|c| c.pressure)
                .map_or("-".to_string(), |w| format!("{:.0}%", w * 100.0)),
        );
    }
    println!();
    println!("TA added latency (via TA minus direct, same backend and rate):");
    for pair in phases.chunks(2) {
        let [direct, ta] = pair else { continue };
        let diff = |p: f64| ms(percentile(&ta.latencies, p)) - ms(percentile(&direct.latencies, p));
        let cpu = direct.cpu.zip(ta.cpu).map_or(String::new(), |(d, t)| {
            format!(
                "; CPU {:+.0} us/req (client signing included)",
                (t.per_request.as_secs_f64() - d.per_request.as_secs_f64()) * 1e6
            )
        });
        println!(
            "  {:<9} {:>6.0} req/s: p50 {:+.3} ms, p99 {:+.3} ms{cpu}",
            direct.backend.name(),
            direct.rate,
            diff(50.0),
            diff(99.0)
        );
    }
    // The floor under the chain rows: what the journal's durable append alone takes on this
    // disk, at the same rates, in this run. The answer waits for it, so the TA cannot add
    // less than it (its tail included) unless the disk gets faster.
    for &(backend, rate) in settings.phases.iter().filter(|(b, _)| *b == Backend::Chain) {
        let mut syncs = journal_appends(rate, settings.duration);
        syncs.sort();
        println!(
            "  {:<9} {:>6.0} /s: the journal's append + fdatasync alone (one {JOURNAL_PROBE_BYTES}-byte frame each, {} appends): p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms",
            backend.name(),
            rate,
            syncs.len(),
            ms(percentile(&syncs, 50.0)),
            ms(percentile(&syncs, 99.0)),
            ms(syncs.last().copied().unwrap_or_default()),
        );
    }
    sign_times.sort();
    println!(
        "client-side signing during the run (not in the latencies above): p50 {:.1} us, p99 {:.1} us over {} requests",
        percentile(&sign_times, 50.0).as_secs_f64() * 1e6,
        percentile(&sign_times, 99.0).as_secs_f64() * 1e6,
        sign_times.len()
    );
    for p in phases.iter().filter(|p| !p.errors.is_empty()) {
        println!(
            "errors, {} at {:.0} req/s {}: {:?}",
            p.backend.name(),
            p.rate,
            p.path,
            p.errors
        );
    }
    client.shutdown_timeout(Duration::from_secs(1));
    servers.shutdown_timeout(Duration::from_secs(1));
}
