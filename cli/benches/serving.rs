//! Benchmark: signed chat requests served end to end on a 4-validator localnet: through a
//! transfer agent (TA) in full chain mode to ML nodes, and settled on chain in committed
//! batches (x/settlement `MsgSettleBatch`, co-signed by the hosts with BLS), with the CPU
//! each process spends per record, the latency the TA adds over direct ML node calls, and
//! in-process timings of the per-record components.
//!
//! Run: `cargo bench -p gonka-cli --bench serving` (release `gonkad`; the release
//! `gonka-sidecar` must be built beside it first: `cargo build --release -p gonka-sidecar`;
//! real `cometbft` v0.38 from `PATH` or `~/go/bin`). `cargo test -p gonka-cli --bench
//! serving` runs a short smoke version of every phase (needs `cargo build -p gonka-sidecar`)
//! and asserts that every request got 200, that the chain settled exactly the records
//! served, and that the escrows were debited exactly what the answers cost.
//!
//! # Setup
//! One localnet of 4 validators (`gonkad` + `cometbft` each) in a temporary directory on
//! free loopback ports, `timeout_commit` 1 s, vote extensions on from height 1 (as `gonkad
//! localnet` and the end-to-end tests run). Its sidecars (`gonka-sidecar`, each validator's
//! operator account):
//! - **stub ML nodes**: validator `i`'s ML node `node{i}-ml` serves [`STUB_MODEL`] with
//!   `--upstream-url` pointing at a stub backend inside this process, which answers every
//!   chat completion at once with the same canned answer ([`STUB_PROMPT_TOKENS`] +
//!   [`MAX_TOKENS`] tokens). The ML node still authenticates the requester and its caller,
//!   forwards, and signs an execution receipt; only generation is gone.
//! - **reference ML nodes**: this bench also starts, per validator, a second ML node
//!   `node{i}-ref` (`gonka-sidecar ml-node` without `--upstream-url`: the built-in reference
//!   model) serving [`REFERENCE_MODEL`] on port offset 6 of the validator's port block,
//!   registered on chain by the same host. A model per backend lets one TA route each
//!   phase's requests to one kind of node.
//! - **one TA** on validator 0 (`--rate-limit-per-sec 0`: the bench's few requesters would
//!   hit the per-requester limit; everything else at its defaults, batches of up to
//!   10,000 records every 1,000 ms).
//!
//! Genesis: the operators staked with their BLS keys registered (the hosts co-sign
//! batches), both models priced, [`REQUESTERS`] requesters each holding an escrow for the
//! TA, epochs too long to end during the run, leaf sampling off (`leaf_sample_ppm` 0: no
//! validator role runs to re-execute sampled leaves; `SERVING_BENCH_LEAF_SAMPLE_PPM` turns
//! it on) and `jail_after_misses` out of reach.
//!
//! # What is measured
//! Phases, one after the other, each `SERVING_BENCH_WARMUP_SECS` + `SERVING_BENCH_SECS`:
//! - for each rate of `SERVING_BENCH_RATES` (default 100 and 1,000 req/s), open loop on the
//!   stub backend: **direct** (round-robin over the 4 stub ML nodes) then **via TA**;
//! - **via TA, closed loop**, `SERVING_BENCH_CLOSED_CLIENTS` (32) clients on the stub
//!   backend: the most this machine serves and settles;
//! - **reference**: via TA, closed loop, `SERVING_BENCH_REFERENCE_CLIENTS` (4) clients on
//!   the reference ML nodes: where the model, not the rest, is the bound.
//!
//! Open loop: request `i` is scheduled at `start + i / rate` by a generator thread that signs
//! it just before (the client's signing is not in the latency) and hands it to a 1-worker
//! client runtime; latency runs from the scheduled start to the last response byte, so
//! queueing anywhere counts. Closed loop: each client signs, sends, waits for the answer and
//! starts again; latency runs from the send. Each request is a new TCP connection with
//! `Connection: close` (as the TA and ML nodes do among themselves), non-streamed, signed by
//! one of the requesters round-robin (request/v3 headers: chain id, the TA, the model, price,
//! `max_tokens`, commission, a fresh nonce). A request that is not answered 200 within
//! [`REQUEST_TIMEOUT`] counts as an error; percentiles are over the 200s after the warm-up.
//!
//! The **direct** path does on the ML node what a TA's call does: the request carries the
//! requester's signed headers and, since an ML node on chain serves registered TAs only, the
//! TA's caller signature (`gonka_client::node_call::sign_node_call` with the TA's key, as
//! the TA signs its calls). So the node checks the requester's signature, the caller's
//! signature and replay window, forwards to the stub and signs a receipt, exactly as for a
//! TA's call. What the direct path leaves out is everything the TA does: authenticating the
//! requester, its rate and escrow checks (the escrow read from chain at most every 5 s),
//! routing and queueing, signing its node call, verifying the receipt, and making the
//! request's body and work record durable (`ta.redb`) before answering — and the
//! settlement that follows.
//!
//! A via-TA phase ends when the chain has settled every record the TA served: the bench
//! reads the TA's batches (`/settlement/batch_number`, `/settlement/batch`) until their
//! records add up to the 200s it got. CPU is read per process as utime + stime from
//! `/proc/<pid>/stat` (clock ticks, `sysconf(_SC_CLK_TCK)`) at the phase's start and end;
//! this process is split by thread into the stub backend (its own runtime) and the rest
//! (client, signing, chain polling). The localnet's processes are found by their command
//! lines (`/proc/*/cmdline` naming the node's directories), the reference ML nodes by the
//! pids this bench started.
//!
//! In-process component timings (this binary, median of many runs) come last, once the
//! localnet is stopped.
//!
//! # Reading the output
//! - **serving table**: per phase, requests (warm-up included), errors, `served/s` (200s
//!   over first request to last answer), latency p50/p90/p99/max (counted requests),
//!   `lag p99` (how late an open-loop client started requests; in both paths' latency) and
//!   `CPU wait` (share of the phase during which some runnable task on this machine waited
//!   for a CPU, `/proc/pressure/cpu`: well above a few percent, the figures are about CPU
//!   contention).
//! - **settlement table** (via-TA phases): records served and settled, batches, records per
//!   batch, `settled/s` = settled records / (first request -> commit of the block holding the
//!   last batch, from the block header time of the next block), and `settle lag` = last
//!   answer -> that commit (the batch interval plus inclusion).
//! - **TA added latency**: via-TA minus direct percentile at each rate (a difference of
//!   percentiles), beside the goals, with the TA's own CPU per request. A rate this machine
//!   cannot serve through the TA (errors, or the processes keeping more than 90% of the cores
//!   busy) is marked `SATURATED`: its difference is queueing, not the TA's work.
//! - **CPU per record by process**: µs of CPU per record in each phase's window (direct: per
//!   request; via TA: per settled record, the window running until the last batch is
//!   committed, so the chain's work for the phase's records is in it, and so is whatever the
//!   process does when idle). Every process's CPU is divided by all the phase's records, so
//!   an ML node that served a quarter of them shows a quarter of its cost per request: the
//!   `=` rows sum a group (the ML nodes of a backend, the apps, the CometBFT nodes) and are
//!   the cost per record of that role. `idle ms/s` is the CPU each process uses per second
//!   with no load (measured before the phases): at low rates the idle cost dominates the
//!   per-record figures. `total` is over all processes; `bound records/s` = cores × 10^6 /
//!   total, what this machine serves if every process keeps its CPU per record; `CPU wait` as
//!   above, the idle column showing what other people's processes cause.
//! - **components**: what one run of each per-record component costs in this process (median
//!   wall time, and median CPU time of the thread, which waits for a CPU do not inflate and
//!   which compares with the per-process figures), how many runs a record takes and where, to
//!   put the per-process figures in proportion. Block execution per record is the gonkad
//!   processes' CPU per settled record in the busiest via-TA phase (the whole app: CheckTx,
//!   FinalizeBlock, Commit, queries, idle cost).
//!
//! Every process shares this machine's cores (and, on a shared machine, other people's
//! processes): 4 apps, 4 CometBFT nodes, 8 ML nodes, the TA and the bench. Compare within a
//! run, and distrust a run with high `CPU wait`.
//!
//! Settings (environment):
//! - `SERVING_BENCH_RATES`: open-loop rates of the direct / via-TA pairs, req/s,
//!   comma-separated (default `100,1000`).
//! - `SERVING_BENCH_SECS` (default 15), `SERVING_BENCH_WARMUP_SECS` (default 2): counted
//!   and warm-up seconds of every phase.
//! - `SERVING_BENCH_CLOSED_CLIENTS`: clients of the closed-loop stub phase (default 32; 0
//!   skips it).
//! - `SERVING_BENCH_REFERENCE_CLIENTS`: clients of the reference-model phase (default 4; 0
//!   skips it and its ML nodes).
//! - `SERVING_BENCH_TIMEOUT_COMMIT`: CometBFT `timeout_commit` (default `1s`).
//! - `SERVING_BENCH_BATCH_INTERVAL_MS`: the TA's `--batch-interval-ms` (default 1000).
//! - `SERVING_BENCH_LEAF_SAMPLE_PPM`: x/settlement `leaf_sample_ppm` (default 0).
//! - `SERVING_BENCH_VOTE_EXTENSIONS`: `on` (default) or `off`.
//!
//! The smoke version's defaults: one 20 req/s pair, 4 and 2 closed-loop clients, 0.2 s
//! warm-up + 1 s per phase, `timeout_commit` 300 ms, 1 s of idle measurement, 5 runs per
//! component. The full run's defaults take about 3 minutes, half a minute of it waiting for
//! the ML nodes to register.

mod common;

use common::{escrows, key, operator, stake_validators, start_localnet, GNK, VALIDATORS};
use std::collections::BTreeMap;
use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{anyhow, bail, ensure, Context, Result};
use gonka_app::genesis::{GenesisAccount, GenesisConfig};
use gonka_client::bls::account_bls_key;
use gonka_client::keys::well_known_mnemonic;
use gonka_client::node_call::{sign_node_call, verify_node_call};
use gonka_client::receipt::Receipt;
use gonka_client::request::{body_hash, sign_request, verify_request, RequestTerms};
use gonka_client::settlement::{check_host_leaves, cosign, Batch, Served};
use gonka_client::tx::{signed_work_record, WorkRecordInput};
use gonka_client::{unix_now, Client, Key};
use gonka_localnet::{AppStateFn, GenesisValidatorKey, Localnet, NodeInfo, SidecarConfig};
use gonka_proto::inference::{Model, QueryNodesRequest, QueryTransferAgentsRequest, WorkRecord};
use gonka_proto::query as q;
use gonka_proto::settlement::{QueryBatchNumberRequest, QueryBatchRequest, QueryEscrowRequest};
use gonka_proto::signing::batch_sign_bytes;
use serde_json::json;
use tendermint::block::Height;
use tendermint_rpc::Client as _;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::runtime::Runtime;

/// Chain id of the bench network.
const CHAIN_ID: &str = "gonka-serving";
/// The model the stub ML nodes serve.
const STUB_MODEL: &str = "bench/stub-1";
/// The model the reference ML nodes serve (the built-in reference model).
const REFERENCE_MODEL: &str = "gonka/reference-1";
/// Price per token of both models, in ngnk.
const PRICE: u128 = 3;
/// Commission every requester signs for the TA, in ngnk.
const COMMISSION: u128 = 7;
/// The user message of every request: short, to keep the reference model's prefill cheap.
const PROMPT: &str = "hi";
/// `max_tokens` of every request; the stub answers with exactly this many.
const MAX_TOKENS: u64 = 8;
/// Prompt tokens the stub's answer claims.
const STUB_PROMPT_TOKENS: u64 = 10;
/// Requester accounts, used round-robin.
const REQUESTERS: usize = 16;
/// Escrow every requester holds for the TA from genesis: far more than any run spends.
const ESCROW: u128 = 1_000_000 * GNK;
/// Blocks per epoch: no epoch ends during a run.
const EPOCH_LENGTH: u64 = 1_000_000;
/// Generations (stub: forwarded requests) a stub ML node runs at once.
const STUB_NODE_CONCURRENCY: u32 = 64;
/// Generations a reference ML node runs at once.
const REFERENCE_NODE_CONCURRENCY: u32 = 4;
/// Port offset, in each validator's block, of this bench's reference ML node (4 and 5 are
/// the localnet's ML node and TA).
const REFERENCE_PORT_OFFSET: u16 = 6;
/// A request still unanswered after this long counts as an error.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest wait for the chain to settle what the TA served, or for the network to be ready.
const STALL: Duration = Duration::from_secs(120);
/// Thread-name prefix of the stub backend's runtime (this process's CPU is split by it).
const STUB_THREADS: &str = "bench-stub";

/// What one run does, from the environment.
struct Settings {
    smoke: bool,
    /// Open-loop rates of the direct / via-TA pairs.
    rates: Vec<f64>,
    warmup: Duration,
    duration: Duration,
    /// Clients of the closed-loop stub phase (0: none).
    closed_clients: usize,
    /// Clients of the reference-model phase (0: none, and no reference ML nodes).
    reference_clients: usize,
    timeout_commit: String,
    batch_interval_ms: u64,
    leaf_sample_ppm: u64,
    vote_extensions: bool,
    /// Seconds of the idle CPU measurement.
    idle: Duration,
    /// Runs of each in-process component timing.
    micro_runs: usize,
}

impl Settings {
    fn from_env() -> Result<Settings> {
        // `cargo bench` passes `--bench`; `cargo test --bench serving` does not.
        let smoke = !std::env::args().any(|a| a == "--bench");
        let number = |name: &str, default: f64| -> Result<f64> {
            match std::env::var(name) {
                Err(_) => Ok(default),
                Ok(v) => v
                    .trim()
                    .parse::<f64>()
                    .ok()
                    .filter(|n| *n >= 0.0 && n.is_finite())
                    .ok_or_else(|| anyhow!("{name} must be a number >= 0, found {v:?}")),
            }
        };
        let rates_text = std::env::var("SERVING_BENCH_RATES")
            .unwrap_or_else(|_| if smoke { "20" } else { "100,1000" }.to_string());
        let rates = rates_text
            .split(',')
            .filter(|v| !v.trim().is_empty())
            .map(|v| {
                v.trim()
                    .parse::<f64>()
                    .ok()
                    .filter(|r| *r > 0.0 && r.is_finite())
                    .ok_or_else(|| {
                        anyhow!("SERVING_BENCH_RATES must hold rates > 0 (req/s), comma-separated, but holds {v:?}")
                    })
            })
            .collect::<Result<Vec<_>>>()?;
        let vote_extensions = match std::env::var("SERVING_BENCH_VOTE_EXTENSIONS").as_deref() {
            Err(_) | Ok("on") => true,
            Ok("off") => false,
            Ok(other) => bail!("SERVING_BENCH_VOTE_EXTENSIONS must be on or off, found {other:?}"),
        };
        let (secs, warmup, closed, reference, idle, runs) = if smoke {
            (1.0, 0.2, 4.0, 2.0, 1.0, 5)
        } else {
            (15.0, 2.0, 32.0, 4.0, 5.0, 500)
        };
        Ok(Settings {
            smoke,
            rates,
            warmup: Duration::from_secs_f64(number("SERVING_BENCH_WARMUP_SECS", warmup)?),
            duration: Duration::from_secs_f64(number("SERVING_BENCH_SECS", secs)?),
            closed_clients: number("SERVING_BENCH_CLOSED_CLIENTS", closed)? as usize,
            reference_clients: number("SERVING_BENCH_REFERENCE_CLIENTS", reference)? as usize,
            timeout_commit: std::env::var("SERVING_BENCH_TIMEOUT_COMMIT")
                .unwrap_or_else(|_| if smoke { "300ms" } else { "1s" }.to_string()),
            batch_interval_ms: number("SERVING_BENCH_BATCH_INTERVAL_MS", 1000.0)? as u64,
            leaf_sample_ppm: number("SERVING_BENCH_LEAF_SAMPLE_PPM", 0.0)? as u64,
            vote_extensions,
            idle: Duration::from_secs_f64(idle),
            micro_runs: runs,
        })
    }

    /// The phases, in the order they run.
    fn phases(&self) -> Vec<Spec> {
        let mut phases = Vec::new();
        for &rate in &self.rates {
            for route in [Route::Direct, Route::ViaTa] {
                phases.push(Spec {
                    backend: Backend::Stub,
                    route,
                    load: Load::Open(rate),
                });
            }
        }
        if self.closed_clients > 0 {
            phases.push(Spec {
                backend: Backend::Stub,
                route: Route::ViaTa,
                load: Load::Closed(self.closed_clients),
            });
        }
        if self.reference_clients > 0 {
            phases.push(Spec {
                backend: Backend::Reference,
                route: Route::ViaTa,
                load: Load::Closed(self.reference_clients),
            });
        }
        phases
    }
}

/// What computes the ML nodes' answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Backend {
    /// The localnet's ML nodes, forwarding to the in-process stub.
    Stub,
    /// This bench's ML nodes on the built-in reference model.
    Reference,
}

impl Backend {
    fn model(self) -> &'static str {
        match self {
            Backend::Stub => STUB_MODEL,
            Backend::Reference => REFERENCE_MODEL,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Backend::Stub => "stub",
            Backend::Reference => "reference",
        }
    }
}

/// Where requests go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Route {
    /// Straight to the stub ML nodes, round-robin, signed as the TA signs its calls.
    Direct,
    /// To the TA.
    ViaTa,
}

/// How requests are sent.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Load {
    /// Open loop at this many requests per second.
    Open(f64),
    /// Closed loop with this many clients.
    Closed(usize),
}

/// One phase.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Spec {
    backend: Backend,
    route: Route,
    load: Load,
}

impl Spec {
    /// A short column label.
    fn label(&self) -> String {
        let prefix = match (self.backend, self.route) {
            (Backend::Stub, Route::Direct) => "direct",
            (Backend::Stub, Route::ViaTa) => "TA",
            (Backend::Reference, Route::Direct) => "ref direct",
            (Backend::Reference, Route::ViaTa) => "ref TA",
        };
        match self.load {
            Load::Open(rate) => format!("{prefix}@{rate:.0}"),
            Load::Closed(clients) => format!("{prefix} c{clients}"),
        }
    }
}

/// Genesis `app_state`: the validators staked with their BLS keys registered, both models
/// priced, the requesters' escrows for the TA (validator 0), long epochs, no jailing for
/// missed validations, leaf sampling at `leaf_sample_ppm`.
fn genesis(
    keys: &[GenesisValidatorKey],
    requesters: &[String],
    leaf_sample_ppm: u64,
) -> Result<serde_json::Value> {
    let transfer_agent = operator(0)?.address().to_string();
    let mut config = GenesisConfig {
        accounts: requesters
            .iter()
            .map(|address| GenesisAccount {
                address: address.clone(),
                ngnk: GNK,
            })
            .collect(),
        min_gas_price: None,
        epoch_length: Some(EPOCH_LENGTH),
        models: [STUB_MODEL, REFERENCE_MODEL]
            .map(|id| Model {
                id: id.into(),
                price_per_token: PRICE.to_string(),
                ..Model::default()
            })
            .to_vec(),
        ..Default::default()
    };
    stake_validators(&mut config, keys)?;
    for key in keys {
        let operator = operator(key.index)?;
        // The key the ML nodes co-sign their host's batches with.
        config.bls_keys.push(gonka_proto::bls::BlsKey {
            address: operator.address().to_string(),
            pubkey: account_bls_key(&operator).public_key().to_bytes().to_vec(),
            registered_height: 0,
        });
    }
    config.escrows = escrows(requesters, &transfer_agent, ESCROW, 10 * EPOCH_LENGTH);
    let mut state = config.app_state();
    // No validator role runs here to re-execute sampled leaves (see the module doc).
    state[gonka_settlement::NAME]["params"]["leaf_sample_ppm"] = leaf_sample_ppm.into();
    let disputes = gonka_proto::disputes::Params {
        jail_after_misses: u64::MAX,
        ..gonka_disputes::default_params()
    };
    state[gonka_disputes::NAME] = json!({ "params": disputes });
    Ok(state)
}

/// The `gonka-sidecar` binary beside this bench's `gonkad`.
fn sidecar_binary() -> Result<PathBuf> {
    let binary = Path::new(env!("CARGO_BIN_EXE_gonkad")).with_file_name("gonka-sidecar");
    ensure!(
        binary.exists(),
        "{} is missing: build it first with `cargo build{} -p gonka-sidecar` (with the same \
         CARGO_TARGET_DIR)",
        binary.display(),
        if cfg!(debug_assertions) {
            ""
        } else {
            " --release"
        }
    );
    Ok(binary)
}

/// Creates and starts the localnet in `dir` with its stub ML nodes forwarding to `stub` and
/// the TA on validator 0, retrying on a fresh port block if another process took a port.
fn start_bench_localnet(
    settings: &Settings,
    dir: &Path,
    requesters: &[String],
    stub: SocketAddr,
) -> Result<Localnet> {
    let requesters = requesters.to_vec();
    let leaf_sample_ppm = settings.leaf_sample_ppm;
    let app_state = AppStateFn(Arc::new(move |keys: &[GenesisValidatorKey]| {
        // The localnet cannot take an error from here; a bench genesis that fails to build is a
        // bug of this file.
        genesis(keys, &requesters, leaf_sample_ppm).expect("building the bench genesis")
    }));
    let mnemonics = (0..VALIDATORS)
        .map(|i| well_known_mnemonic(&format!("validator{i}")))
        .collect();
    let mut sidecars = SidecarConfig::new(sidecar_binary()?, mnemonics);
    sidecars.transfer_agents = 1;
    sidecars.ml_node_concurrency = STUB_NODE_CONCURRENCY;
    let stub_args: Vec<std::ffi::OsString> = vec![
        "--upstream-url".into(),
        format!("http://{stub}").into(),
        "--model-id".into(),
        STUB_MODEL.into(),
    ];
    sidecars.ml_node_args = vec![stub_args; VALIDATORS];
    sidecars.transfer_agent_args = vec![[
        "--rate-limit-per-sec".to_string(),
        "0".to_string(),
        "--batch-interval-ms".to_string(),
        settings.batch_interval_ms.to_string(),
    ]
    .map(Into::into)
    .to_vec()];
    // Below the end-to-end tests' 27000..31000 and below Linux's ephemeral range (32768+):
    // the load's tens of thousands of short connections take ephemeral ports, and the
    // reference ML nodes' port (offset 6) is not among those `find_free_base_port` checks.
    let first = 22_000 + (std::process::id() % 100) as u16 * 40;
    start_localnet(dir, first, |config| {
        config.chain_id = CHAIN_ID.to_string();
        config.timeout_commit = settings.timeout_commit.clone();
        config.vote_extensions_enable_height = settings.vote_extensions.then_some(1);
        config.app_state_for_validators = Some(app_state.clone());
        config.sidecar = Some(sidecars.clone());
        config.start_timeout = Duration::from_secs(120);
    })
}

/// The reference ML nodes this bench starts beside the localnet, one per validator; killed
/// when dropped.
struct ReferenceNodes {
    children: Vec<(usize, Child)>,
}

impl ReferenceNodes {
    /// Starts validator `i`'s reference ML node for every node of `net` and waits until each
    /// answers HTTP.
    fn start(net: &Localnet) -> Result<ReferenceNodes> {
        let binary = sidecar_binary()?;
        let mut nodes = ReferenceNodes {
            children: Vec::new(),
        };
        for node in net.nodes() {
            let addr = reference_addr(node)?;
            let log = node.home.join("ml-node-reference.log");
            let out = std::fs::File::create(&log)
                .with_context(|| format!("creating {}", log.display()))?;
            let sidecar_dir = node.home.join("sidecar");
            let mut command = Command::new(&binary);
            command
                .arg("ml-node")
                .arg("--chain-rpc")
                .arg(&node.rpc_url)
                .arg("--mnemonic-file")
                .arg(sidecar_dir.join("operator.mnemonic"))
                .arg("--listen")
                .arg(addr.to_string())
                .arg("--node-id")
                .arg(format!("node{}-ref", node.index))
                .arg("--response-key-file")
                .arg(sidecar_dir.join("ml-node-reference.key"))
                .arg("--max-concurrency")
                .arg(REFERENCE_NODE_CONCURRENCY.to_string())
                .arg("--model-id")
                .arg(REFERENCE_MODEL)
                .stdin(Stdio::null())
                .stdout(Stdio::from(out.try_clone()?))
                .stderr(Stdio::from(out));
            die_with_parent(&mut command);
            let child = command
                .spawn()
                .with_context(|| format!("starting {}", binary.display()))?;
            nodes.children.push((node.index, child));
        }
        let deadline = Instant::now() + STALL;
        for node in net.nodes() {
            let addr = reference_addr(node)?;
            while !gonka_localnet::rpc::answers_ok(addr, "/v1/models", Duration::from_secs(2)) {
                for (i, child) in &mut nodes.children {
                    if let Some(status) = child.try_wait()? {
                        bail!(
                            "reference ML node {i} exited ({status}); see {}",
                            net.nodes()[*i].home.join("ml-node-reference.log").display()
                        );
                    }
                }
                ensure!(
                    Instant::now() < deadline,
                    "reference ML node {} at {addr} did not answer within {STALL:?}",
                    node.index
                );
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        Ok(nodes)
    }

    /// `(validator index, pid)` of each.
    fn pids(&self) -> Vec<(usize, u32)> {
        self.children.iter().map(|(i, c)| (*i, c.id())).collect()
    }
}

impl Drop for ReferenceNodes {
    fn drop(&mut self) {
        for (_, child) in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Where validator `node`'s reference ML node listens.
fn reference_addr(node: &NodeInfo) -> Result<SocketAddr> {
    let port = node
        .ports
        .extra(REFERENCE_PORT_OFFSET)
        .ok_or_else(|| anyhow!("port offset {REFERENCE_PORT_OFFSET} is outside a node's block"))?;
    Ok(SocketAddr::from(([127, 0, 0, 1], port)))
}

/// SIGTERM for the child if this process dies, as the localnet does for its own (the
/// spawning thread, main, lives until the end).
fn die_with_parent(command: &mut Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: prctl is async-signal-safe and the closure allocates nothing.
    unsafe {
        command.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// `http://127.0.0.1:PORT/v1` as a socket address.
fn url_addr(url: &str) -> Result<SocketAddr> {
    url.trim_start_matches("http://")
        .trim_end_matches("/v1")
        .parse()
        .with_context(|| format!("{url} is not http://IP:PORT/v1"))
}

/// The stub backend: answers every request with the same chat completion, at once, on a
/// new connection each (`Connection: close`, as the ML node's forwarder asks).
async fn serve_stub(listener: TcpListener) {
    let body = json!({
        "id": "chatcmpl-stub",
        "object": "chat.completion",
        "created": 0,
        "model": STUB_MODEL,
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": "a canned answer of the stub backend"},
            "finish_reason": "length",
        }],
        "usage": {
            "prompt_tokens": STUB_PROMPT_TOKENS,
            "completion_tokens": MAX_TOKENS,
            "total_tokens": STUB_PROMPT_TOKENS + MAX_TOKENS,
        },
    })
    .to_string();
    let answer: Arc<[u8]> = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
    .into();
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let answer = answer.clone();
        tokio::spawn(async move {
            let _ = stub_exchange(stream, &answer).await;
        });
    }
}

/// Reads one request (head and `Content-Length` body) and writes `answer`.
async fn stub_exchange(mut stream: TcpStream, answer: &[u8]) -> io::Result<()> {
    let mut buf = Vec::with_capacity(2048);
    let mut chunk = [0u8; 8192];
    loop {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let (_, length) = parse_head(&buf[..end])?;
            if buf.len() - (end + 4) >= length.unwrap_or(0) {
                break;
            }
        }
    }
    stream.write_all(answer).await?;
    stream.shutdown().await
}

/// Status and `Content-Length` of an HTTP header block (request or response).
fn parse_head(head: &[u8]) -> io::Result<(u16, Option<usize>)> {
    let bad = |what: &str| io::Error::new(io::ErrorKind::InvalidData, what.to_string());
    let text = std::str::from_utf8(head).map_err(|_| bad("head is not UTF-8"))?;
    let mut lines = text.split("\r\n");
    // A response's status; 0 for a request line.
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let length = lines
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim().eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.trim().parse().ok());
    Ok((status, length))
}

/// Sends `message` on a new connection and reads the response; returns the status, the
/// instant its last byte arrived and the body.
async fn exchange(addr: SocketAddr, message: &[u8]) -> io::Result<(u16, Instant, Vec<u8>)> {
    let mut stream = TcpStream::connect(addr).await?;
    stream.set_nodelay(true)?;
    stream.write_all(message).await?;
    let mut buf = Vec::with_capacity(2048);
    let mut chunk = [0u8; 8192];
    // (status, Content-Length, offset of the body) once the header block is in.
    let mut head: Option<(u16, Option<usize>, usize)> = None;
    let (status, done, start) = loop {
        let n = stream.read(&mut chunk).await?;
        let now = Instant::now();
        if n == 0 {
            match head {
                Some((status, None, start)) => break (status, now, start),
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
                break (status, now, start);
            }
        }
    };
    // Let the server close first, so closed connections linger on its side rather than
    // holding this client's ephemeral ports. Not part of the latency.
    let _ = stream.read(&mut chunk).await;
    Ok((status, done, buf.split_off(start)))
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

/// The chat body of every request to `model`.
fn request_body(model: &str) -> Vec<u8> {
    json!({
        "model": model,
        "messages": [{"role": "user", "content": PROMPT}],
        "max_tokens": MAX_TOKENS,
        "stream": false,
    })
    .to_string()
    .into_bytes()
}

/// Requests numbered across the run: nonces and the requester round-robin.
static NEXT_REQUEST: AtomicU64 = AtomicU64::new(0);

/// What requests are made of.
struct Ctx {
    /// The TA's key: it signs the direct calls as the TA signs its own.
    ta: Key,
    ta_addr: SocketAddr,
    requesters: Arc<Vec<Key>>,
    /// `(node id, address)` of each stub ML node.
    stub_nodes: Vec<(String, SocketAddr)>,
}

/// A request ready to send.
struct Prepared {
    addr: SocketAddr,
    message: Arc<[u8]>,
    requester: usize,
}

impl Ctx {
    /// Request number `index` of `spec`, signed now.
    fn prepare(&self, spec: Spec, index: u64) -> Result<Prepared> {
        let requester = (index % self.requesters.len() as u64) as usize;
        let body = request_body(spec.backend.model());
        let terms = RequestTerms {
            chain_id: CHAIN_ID.into(),
            body_hash: body_hash(&body),
            timestamp: unix_now(),
            nonce: format!("serving-{index}"),
            commission: COMMISSION,
            transfer_agent: self.ta.address().to_string(),
            model: spec.backend.model().into(),
            max_price_per_token: PRICE,
            max_completion_tokens: MAX_TOKENS,
            max_prompt_tokens: gonka_proto::signing::prompt_token_bound(&body),
        };
        let request_hash = terms.hash();
        let mut headers = sign_request(&self.requesters[requester], &body, terms)?;
        let addr = match spec.route {
            Route::ViaTa => self.ta_addr,
            Route::Direct => {
                ensure!(
                    spec.backend == Backend::Stub,
                    "direct calls go to the stub ML nodes"
                );
                let (node_id, addr) =
                    &self.stub_nodes[(index % self.stub_nodes.len() as u64) as usize];
                headers.extend(sign_node_call(
                    &self.ta,
                    node_id,
                    Some(request_hash),
                    &body,
                    unix_now(),
                )?);
                *addr
            }
        };
        Ok(Prepared {
            addr,
            message: http_message(addr, &headers, &body),
            requester,
        })
    }
}

/// The outcome of one request.
struct Sample {
    /// After the warm-up.
    counted: bool,
    requester: usize,
    /// How late an open-loop client began it.
    lag: Duration,
    /// Start to last byte, when the answer arrived and its body, for a 200; what went wrong
    /// otherwise.
    result: Result<(Duration, Instant, Vec<u8>), String>,
}

/// Sends `prepared`, timing from `start`.
async fn send(prepared: Prepared, start: Instant, counted: bool) -> Sample {
    let lag = Instant::now().saturating_duration_since(start);
    let outcome = tokio::time::timeout(REQUEST_TIMEOUT, exchange(prepared.addr, &prepared.message));
    let result = match outcome.await {
        Ok(Ok((200, done, body))) => Ok((done - start, done, body)),
        Ok(Ok((status, _, body))) => {
            let code = serde_json::from_slice::<serde_json::Value>(&body)
                .ok()
                .and_then(|v| v["error"]["code"].as_str().map(str::to_string))
                .unwrap_or_default();
            Err(format!("HTTP {status} {code}"))
        }
        Ok(Err(e)) => Err(format!("{:?}", e.kind())),
        Err(_) => Err(format!("no answer within {} s", REQUEST_TIMEOUT.as_secs())),
    };
    Sample {
        counted,
        requester: prepared.requester,
        lag,
        result,
    }
}

/// Runs the load of `spec` for `warmup + duration` on `client`; returns every sample.
fn run_load(
    client: &Runtime,
    ctx: &Arc<Ctx>,
    spec: Spec,
    warmup: Duration,
    duration: Duration,
) -> Vec<Sample> {
    match spec.load {
        Load::Open(rate) => {
            let warm = (warmup.as_secs_f64() * rate).round() as usize;
            let total = warm + (duration.as_secs_f64() * rate).round() as usize;
            let handle = client.handle().clone();
            let ctx = ctx.clone();
            // A plain thread with std sleeps: finer than tokio's 1 ms timer, and never delayed
            // by the tasks it starts.
            let generator = std::thread::Builder::new()
                .name("bench-load".into())
                .spawn(move || {
                    let mut tasks = Vec::with_capacity(total);
                    let start = Instant::now() + Duration::from_millis(10);
                    for i in 0..total {
                        let index = NEXT_REQUEST.fetch_add(1, Ordering::Relaxed);
                        // Signed before its scheduled time, so it costs no latency.
                        let prepared = ctx.prepare(spec, index).expect("signing a request");
                        let scheduled = start + Duration::from_secs_f64(i as f64 / rate);
                        let now = Instant::now();
                        if scheduled > now {
                            std::thread::sleep(scheduled - now);
                        }
                        tasks.push(handle.spawn(send(prepared, scheduled, i >= warm)));
                    }
                    tasks
                })
                .expect("starting the load generator");
            let tasks = generator.join().expect("the load generator panicked");
            client.block_on(async {
                let mut samples = Vec::with_capacity(tasks.len());
                for task in tasks {
                    samples.push(task.await.expect("a request task panicked"));
                }
                samples
            })
        }
        Load::Closed(clients) => client.block_on(async {
            let counted_from = Instant::now() + warmup;
            let end = counted_from + duration;
            let workers: Vec<_> = (0..clients)
                .map(|_| {
                    let ctx = ctx.clone();
                    tokio::spawn(async move {
                        let mut samples = Vec::new();
                        while Instant::now() < end {
                            let index = NEXT_REQUEST.fetch_add(1, Ordering::Relaxed);
                            let prepared = ctx.prepare(spec, index).expect("signing a request");
                            let start = Instant::now();
                            samples.push(send(prepared, start, start >= counted_from).await);
                        }
                        samples
                    })
                })
                .collect();
            let mut samples = Vec::new();
            for worker in workers {
                samples.extend(worker.await.expect("a client task panicked"));
            }
            samples
        }),
    }
}

/// What the chain settled of the TA's batches so far.
struct Ledger {
    client: Client,
    ta: String,
    /// Next batch id to read (ids are global and sequential; only this TA settles).
    next_id: u64,
    records: u64,
    batches: u64,
    /// Height of the last batch read.
    last_height: u64,
    /// ngnk charged per requester by the batches' lines.
    charged: BTreeMap<String, u128>,
}

impl Ledger {
    /// Reads the batches settled since the last call.
    async fn poll(&mut self) -> Result<()> {
        let client = self.client.clone();
        let request = QueryBatchNumberRequest {
            transfer_agent: self.ta.clone(),
        };
        let number = retried(|| client.query::<q::settlement::BatchNumber>(&request))
            .await?
            .number;
        while self.next_id <= number {
            let id = self.next_id;
            let request = QueryBatchRequest {
                id,
                ..Default::default()
            };
            let batch = retried(|| client.query::<q::settlement::Batch>(&request))
                .await?
                .batch
                .ok_or_else(|| anyhow!("batch {id} is not on chain"))?;
            let settled = batch.settled.unwrap_or_default();
            ensure!(
                settled.transfer_agent == self.ta && settled.number == id,
                "batch {id} is number {} of {}: expected number {id} of the only TA, {}",
                settled.number,
                settled.transfer_agent,
                self.ta
            );
            self.records += settled.record_count;
            self.batches += 1;
            self.last_height = batch.height;
            for line in &settled.requesters {
                let amount = gonka_proto::batch::parse_decimal(&line.amount)
                    .ok_or_else(|| anyhow!("batch {id}: malformed amount {:?}", line.amount))?;
                *self.charged.entry(line.requester.clone()).or_default() += amount;
            }
            self.next_id += 1;
        }
        Ok(())
    }

    /// Waits until at least `records` records are settled.
    async fn wait_for(&mut self, records: u64) -> Result<()> {
        let deadline = Instant::now() + STALL;
        loop {
            self.poll().await?;
            if self.records >= records {
                return Ok(());
            }
            ensure!(
                Instant::now() < deadline,
                "the chain settled {} records of the {records} the TA served, and no more within {STALL:?}",
                self.records
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

/// `call`'s answer, asking up to three times, 200 ms apart: after a pause without queries
/// (a direct phase does not touch the chain) the first request may meet a keep-alive
/// connection the node has just closed.
async fn retried<T, F: std::future::Future<Output = Result<T>>>(
    mut call: impl FnMut() -> F,
) -> Result<T> {
    let mut tries = 1;
    loop {
        match call().await {
            Ok(answer) => return Ok(answer),
            Err(e) if tries >= 3 => return Err(e),
            Err(_) => {
                tries += 1;
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
}

/// Header time of block `height` in Unix nanoseconds, once it exists.
async fn block_time(client: &Client, height: u64) -> Result<i128> {
    let deadline = Instant::now() + STALL;
    loop {
        let latest = retried(|| client.status())
            .await?
            .sync_info
            .latest_block_height
            .value();
        if latest >= height {
            let block = retried(|| async {
                let block = client.http().block(Height::try_from(height)?).await;
                block.with_context(|| format!("block {height} from {}", client.url()))
            })
            .await?;
            return Ok(block.block.header.time.unix_timestamp_nanos());
        }
        ensure!(
            Instant::now() < deadline,
            "block {height} did not appear within {STALL:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Unix time in nanoseconds, comparable with block header times.
fn unix_nanos(at: SystemTime) -> i128 {
    at.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i128)
}

/// Where a watched CPU figure comes from.
#[derive(Debug, Clone)]
enum Source {
    /// A process.
    Pid(u32),
    /// This process's threads: the stub backend's (`true`) or all the others.
    Bench { stub: bool },
}

/// One row of the CPU table.
#[derive(Debug, Clone)]
struct Watched {
    label: String,
    /// Rows of one group are also summed.
    group: &'static str,
    source: Source,
}

/// The processes to watch: found by their command lines naming the localnet's directories
/// (the TA, the stub ML nodes, apps, CometBFT nodes), plus the reference ML nodes and this
/// process.
fn watched(net: &Localnet, reference: &[(usize, u32)]) -> Result<Vec<Watched>> {
    // pid -> arguments, for every process whose command line names the localnet.
    let dir = net.dir().to_string_lossy().into_owned();
    let mut found: BTreeMap<u32, Vec<String>> = BTreeMap::new();
    for entry in std::fs::read_dir("/proc")? {
        let entry = entry?;
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(raw) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let args: Vec<String> = raw
            .split(|b| *b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        if args.iter().any(|a| a.starts_with(&dir)) {
            found.insert(pid, args);
        }
    }
    let find = |what: &str, matches: &dyn Fn(&[String]) -> bool| -> Result<u32> {
        let pids: Vec<u32> = found
            .iter()
            .filter(|(_, args)| matches(args))
            .map(|(pid, _)| *pid)
            .collect();
        match pids[..] {
            [pid] => Ok(pid),
            _ => bail!("expected one process of the {what} in /proc, found {pids:?}"),
        }
    };
    let has = |args: &[String], path: &Path| args.iter().any(|a| Path::new(a) == path);
    let role = |args: &[String], role: &str| args.get(1).is_some_and(|a| a == role);
    let mut rows = Vec::new();
    let mnemonic = |n: &NodeInfo| n.home.join("sidecar").join("operator.mnemonic");
    let node0 = &net.nodes()[0];
    rows.push(Watched {
        label: "transfer agent".into(),
        group: "",
        source: Source::Pid(find("TA", &|a| {
            role(a, "transfer-agent") && has(a, &mnemonic(node0))
        })?),
    });
    for n in net.nodes() {
        rows.push(Watched {
            label: format!("ML node {} stub", n.index),
            group: "ML nodes stub",
            source: Source::Pid(find(&format!("node {} ML node", n.index), &|a| {
                role(a, "ml-node")
                    && has(a, &mnemonic(n))
                    && !a.iter().any(|x| x == REFERENCE_MODEL)
            })?),
        });
    }
    for &(i, pid) in reference {
        rows.push(Watched {
            label: format!("ML node {i} ref."),
            group: "ML nodes ref.",
            source: Source::Pid(pid),
        });
    }
    for n in net.nodes() {
        rows.push(Watched {
            label: format!("gonkad {}", n.index),
            group: "gonkad",
            source: Source::Pid(find(&format!("node {} app", n.index), &|a| {
                role(a, "start") && has(a, &n.app_home)
            })?),
        });
    }
    for n in net.nodes() {
        rows.push(Watched {
            label: format!("cometbft {}", n.index),
            group: "cometbft",
            source: Source::Pid(find(&format!("node {} CometBFT", n.index), &|a| {
                has(a, &n.cometbft_home)
            })?),
        });
    }
    rows.push(Watched {
        label: "bench client".into(),
        group: "",
        source: Source::Bench { stub: false },
    });
    rows.push(Watched {
        label: "bench stub".into(),
        group: "",
        source: Source::Bench { stub: true },
    });
    Ok(rows)
}

/// Clock ticks per second of `/proc/*/stat`.
fn clock_ticks() -> f64 {
    // SAFETY: sysconf only reads a configuration value.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 {
        ticks as f64
    } else {
        100.0
    }
}

/// `(command name, utime + stime in ticks)` of a `/proc/.../stat` file.
fn stat_ticks(path: &Path) -> Option<(String, u64)> {
    let stat = std::fs::read_to_string(path).ok()?;
    let (head, rest) = stat.rsplit_once(')')?;
    let name = head.split_once('(')?.1.to_string();
    // After the parenthesised name, field 3 (state) comes first; utime and stime are fields
    // 14 and 15.
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some((name, ticks))
}

/// CPU counters at one instant.
#[derive(Debug, Clone)]
struct Snapshot {
    at: Instant,
    /// Ticks of each watched row (`None`: the process is gone).
    ticks: Vec<Option<u64>>,
    /// `some total` of `/proc/pressure/cpu` in microseconds, where PSI exists.
    pressure_us: Option<u64>,
}

impl Snapshot {
    fn take(rows: &[Watched]) -> Snapshot {
        // This process by thread: the stub backend's runtime, and everything else. Threads
        // that exited take their ticks with them, but this process's live as long as it.
        let (mut stub, mut rest) = (0, 0);
        if let Ok(tasks) = std::fs::read_dir("/proc/self/task") {
            for task in tasks.flatten() {
                if let Some((name, ticks)) = stat_ticks(&task.path().join("stat")) {
                    if name.starts_with(STUB_THREADS) {
                        stub += ticks;
                    } else {
                        rest += ticks;
                    }
                }
            }
        }
        let ticks = rows
            .iter()
            .map(|row| match row.source {
                Source::Pid(pid) => {
                    stat_ticks(&Path::new("/proc").join(pid.to_string()).join("stat"))
                        .map(|(_, t)| t)
                }
                Source::Bench { stub: true } => Some(stub),
                Source::Bench { stub: false } => Some(rest),
            })
            .collect();
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
        Snapshot {
            at: Instant::now(),
            ticks,
            pressure_us,
        }
    }
}

/// CPU use between two snapshots.
#[derive(Debug, Clone)]
struct CpuUse {
    /// CPU seconds of each watched row.
    secs: Vec<Option<f64>>,
    /// Wall seconds between the snapshots.
    wall: f64,
    /// Share of the time during which some runnable task waited for a CPU.
    pressure: Option<f64>,
}

impl CpuUse {
    fn between(before: &Snapshot, after: &Snapshot) -> CpuUse {
        let hz = clock_ticks();
        let wall = (after.at - before.at).as_secs_f64().max(1e-9);
        CpuUse {
            secs: before
                .ticks
                .iter()
                .zip(&after.ticks)
                .map(|(b, a)| Some(a.as_ref()?.saturating_sub(*b.as_ref()?) as f64 / hz))
                .collect(),
            wall,
            pressure: before
                .pressure_us
                .zip(after.pressure_us)
                .map(|(b, a)| a.saturating_sub(b) as f64 / 1e6 / wall),
        }
    }
}

/// Settlement of a via-TA phase.
#[derive(Debug, Clone)]
struct Settled {
    records: u64,
    batches: u64,
    /// First request -> commit of the block holding the last batch, seconds.
    secs: f64,
    /// Last answer -> that commit, seconds.
    lag_secs: f64,
}

/// One measured phase.
struct Phase {
    spec: Spec,
    requests: usize,
    ok: usize,
    errors: BTreeMap<String, usize>,
    /// Counted 200s, sorted.
    latencies: Vec<Duration>,
    /// Counted start lags, sorted.
    lags: Vec<Duration>,
    /// 200s per second from the first request to the last answer.
    served_per_sec: f64,
    settled: Option<Settled>,
    cpu: CpuUse,
}

impl Phase {
    /// Records the CPU figures are divided by: settled records via the TA, requests
    /// direct.
    fn records(&self) -> u64 {
        self.settled
            .as_ref()
            .map_or(self.requests as u64, |s| s.records)
    }
}

/// Everything the network part of the run measured.
struct Report {
    rows: Vec<Watched>,
    idle: CpuUse,
    phases: Vec<Phase>,
    /// 200s via the TA, warm-ups included, and what they cost their requesters.
    served_via_ta: u64,
    charged_by_answers: u128,
    /// Records and batches the chain settled in all.
    settled: (u64, u64),
    /// Escrow balances that differ from genesis less the batches' lines:
    /// `(requester, expected, found)`.
    escrow_mismatches: Vec<(String, u128, u128)>,
    /// Σ of the batches' requester lines.
    charged_on_chain: u128,
}

/// What a 200 via the TA costs its requester: its tokens at the price, plus the commission.
fn charge_of(body: &[u8]) -> Result<u128> {
    let answer: serde_json::Value = serde_json::from_slice(body).with_context(|| {
        format!(
            "the TA answered 200 with a body that is not JSON: {}",
            String::from_utf8_lossy(body)
        )
    })?;
    let tokens = |name: &str| answer["usage"][name].as_u64();
    let (Some(prompt), Some(completion)) = (tokens("prompt_tokens"), tokens("completion_tokens"))
    else {
        bail!("the TA answered 200 without usage: {answer}");
    };
    Ok(u128::from(prompt + completion) * PRICE + COMMISSION)
}

/// Sends requests of `spec` one by one until one is answered 200 (the nodes and the TA know
/// each other); returns the samples of the 200s.
fn warm_up(client: &Runtime, ctx: &Arc<Ctx>, spec: Spec, count: usize) -> Result<Vec<Sample>> {
    let deadline = Instant::now() + STALL;
    let mut good = Vec::new();
    let mut last = String::new();
    while good.len() < count {
        ensure!(
            Instant::now() < deadline,
            "{} {} never answered 200 within {STALL:?}; last: {last}",
            spec.backend.name(),
            spec.label()
        );
        let index = NEXT_REQUEST.fetch_add(1, Ordering::Relaxed);
        let prepared = ctx.prepare(spec, index)?;
        let sample = client.block_on(send(prepared, Instant::now(), false));
        match &sample.result {
            Ok(_) => good.push(sample),
            Err(e) => {
                last = e.clone();
                std::thread::sleep(Duration::from_millis(500));
            }
        }
    }
    Ok(good)
}

/// Waits until `nodes` ML nodes and the TA are registered on chain.
async fn wait_registered(chain: &Client, nodes: usize) -> Result<()> {
    let deadline = Instant::now() + STALL;
    loop {
        let found = chain
            .query_all::<q::inference::Nodes>(QueryNodesRequest::default())
            .await
            .map(|n| n.len())
            .unwrap_or(0);
        let tas = chain
            .query_all::<q::inference::TransferAgents>(QueryTransferAgentsRequest::default())
            .await
            .map(|t| t.len())
            .unwrap_or(0);
        if found == nodes && tas == 1 {
            return Ok(());
        }
        ensure!(
            Instant::now() < deadline,
            "{found} ML nodes and {tas} TAs on chain after {STALL:?}, expected {nodes} and 1"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Registers nothing itself (the sidecars register themselves): waits for the network, warms
/// every path up, measures the idle CPU, runs every phase and checks the escrows.
fn run(
    net: &Localnet,
    settings: &Settings,
    ctx: &Arc<Ctx>,
    rows: Vec<Watched>,
    main: &Runtime,
    client: &Runtime,
    clock: Instant,
) -> Result<Report> {
    let chain = Client::new(&net.nodes()[0].rpc_url)?;
    let expected_nodes = VALIDATORS * if settings.reference_clients > 0 { 2 } else { 1 };
    main.block_on(wait_registered(&chain, expected_nodes))?;
    println!(
        "  {expected_nodes} ML nodes and the TA registered on chain at {:.1} s",
        clock.elapsed().as_secs_f64()
    );
    let phases = settings.phases();
    let mut ledger = Ledger {
        client: chain.clone(),
        ta: ctx.ta.address().to_string(),
        next_id: 1,
        records: 0,
        batches: 0,
        last_height: 0,
        charged: BTreeMap::new(),
    };
    let mut served_via_ta = 0u64;
    let mut charged_by_answers = 0u128;
    // Every path answers before anything is measured (the TA reads the registry every 2 s).
    let mut kinds: Vec<Spec> = Vec::new();
    for spec in &phases {
        let kind = Spec {
            load: Load::Closed(1),
            ..*spec
        };
        if !kinds.contains(&kind) {
            kinds.push(kind);
        }
    }
    for kind in kinds {
        let count = match kind.route {
            Route::Direct => ctx.stub_nodes.len(),
            Route::ViaTa => 4,
        };
        for sample in warm_up(client, ctx, kind, count)? {
            if kind.route == Route::ViaTa {
                served_via_ta += 1;
                if let Ok((_, _, body)) = &sample.result {
                    charged_by_answers += charge_of(body)?;
                }
            }
        }
    }
    main.block_on(ledger.wait_for(served_via_ta))?;
    println!(
        "  every path answered 200 and the chain settled the warm-up at {:.1} s",
        clock.elapsed().as_secs_f64()
    );

    let before = Snapshot::take(&rows);
    std::thread::sleep(settings.idle);
    let idle = CpuUse::between(&before, &Snapshot::take(&rows));

    let mut measured = Vec::new();
    for spec in phases {
        let (records_before, batches_before) = (ledger.records, ledger.batches);
        let before = Snapshot::take(&rows);
        let started = SystemTime::now();
        let first = Instant::now();
        let samples = run_load(client, ctx, spec, settings.warmup, settings.duration);
        let mut phase = Phase {
            spec,
            requests: samples.len(),
            ok: 0,
            errors: BTreeMap::new(),
            latencies: Vec::new(),
            lags: Vec::new(),
            served_per_sec: 0.0,
            settled: None,
            cpu: CpuUse::between(&before, &before),
        };
        let mut last_answer = first;
        let mut bodies = Vec::new();
        for sample in samples {
            match sample.result {
                Ok((latency, done, body)) => {
                    phase.ok += 1;
                    last_answer = last_answer.max(done);
                    if sample.counted {
                        phase.latencies.push(latency);
                        phase.lags.push(sample.lag);
                    }
                    if spec.route == Route::ViaTa {
                        bodies.push((sample.requester, body));
                    }
                }
                Err(e) => *phase.errors.entry(e).or_default() += 1,
            }
        }
        phase.latencies.sort();
        phase.lags.sort();
        let served_secs = (last_answer - first).as_secs_f64().max(1e-9);
        phase.served_per_sec = phase.ok as f64 / served_secs;
        if spec.route == Route::ViaTa {
            served_via_ta += phase.ok as u64;
            main.block_on(ledger.wait_for(served_via_ta))?;
        }
        phase.cpu = CpuUse::between(&before, &Snapshot::take(&rows));
        if spec.route == Route::ViaTa {
            let end = main.block_on(block_time(&chain, ledger.last_height + 1))?;
            let last_answer_unix = unix_nanos(started) + (last_answer - first).as_nanos() as i128;
            phase.settled = Some(Settled {
                records: ledger.records - records_before,
                batches: ledger.batches - batches_before,
                secs: (end - unix_nanos(started)) as f64 / 1e9,
                lag_secs: (end - last_answer_unix) as f64 / 1e9,
            });
            for (_, body) in &bodies {
                charged_by_answers += charge_of(body)?;
            }
        }
        println!(
            "  {:<12} {:>7} requests, {:>5} errors, {:>8.1} served/s{} (done at {:.1} s)",
            spec.label(),
            phase.requests,
            phase.requests - phase.ok,
            phase.served_per_sec,
            phase.settled.as_ref().map_or(String::new(), |s| format!(
                ", {} records settled in {} batches, {:.1} s after the last answer",
                s.records, s.batches, s.lag_secs
            )),
            clock.elapsed().as_secs_f64()
        );
        measured.push(phase);
    }

    // The escrows moved by exactly the batches' requester lines.
    let mut escrow_mismatches = Vec::new();
    main.block_on(async {
        ledger.poll().await?;
        for requester in ctx.requesters.iter() {
            let address = requester.address().to_string();
            let request = QueryEscrowRequest {
                requester: address.clone(),
                transfer_agent: ledger.ta.clone(),
            };
            let balance = retried(|| chain.query::<q::settlement::Escrow>(&request))
                .await?
                .escrow
                .ok_or_else(|| anyhow!("{address} has no escrow for the TA"))?
                .balance;
            let found = gonka_proto::batch::parse_decimal(&balance)
                .ok_or_else(|| anyhow!("malformed escrow balance {balance:?}"))?;
            let expected = ESCROW - ledger.charged.get(&address).copied().unwrap_or(0);
            if found != expected {
                escrow_mismatches.push((address, expected, found));
            }
        }
        anyhow::Ok(())
    })?;
    Ok(Report {
        rows,
        idle,
        phases: measured,
        served_via_ta,
        charged_by_answers,
        settled: (ledger.records, ledger.batches),
        escrow_mismatches,
        charged_on_chain: ledger.charged.values().sum(),
    })
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

fn print_serving(report: &Report) {
    println!();
    println!(
        "{:<12} {:<9} {:>8} {:>6} {:>9} {:>8} {:>8} {:>8} {:>8} {:>11} {:>9}",
        "phase",
        "backend",
        "requests",
        "errors",
        "served/s",
        "p50 ms",
        "p90 ms",
        "p99 ms",
        "max ms",
        "lag p99 ms",
        "CPU wait"
    );
    for p in &report.phases {
        let l = &p.latencies;
        println!(
            "{:<12} {:<9} {:>8} {:>6} {:>9.1} {:>8.3} {:>8.3} {:>8.3} {:>8.3} {:>11.3} {:>9}",
            p.spec.label(),
            p.spec.backend.name(),
            p.requests,
            p.requests - p.ok,
            p.served_per_sec,
            ms(percentile(l, 50.0)),
            ms(percentile(l, 90.0)),
            ms(percentile(l, 99.0)),
            ms(l.last().copied().unwrap_or_default()),
            ms(percentile(&p.lags, 99.0)),
            p.cpu
                .pressure
                .map_or("-".to_string(), |w| format!("{:.0}%", w * 100.0)),
        );
    }
    for p in report.phases.iter().filter(|p| !p.errors.is_empty()) {
        println!("errors of {}: {:?}", p.spec.label(), p.errors);
    }
}

fn print_settlement(report: &Report) {
    println!();
    println!("settlement of the via-TA phases (window: first request -> commit of the block holding the last batch):");
    println!(
        "{:<12} {:>8} {:>8} {:>8} {:>14} {:>10} {:>13} {:>9}",
        "phase",
        "served",
        "settled",
        "batches",
        "records/batch",
        "settled/s",
        "settle lag s",
        "window s"
    );
    for p in &report.phases {
        let Some(s) = &p.settled else { continue };
        println!(
            "{:<12} {:>8} {:>8} {:>8} {:>14.1} {:>10.1} {:>13.2} {:>9.1}",
            p.spec.label(),
            p.ok,
            s.records,
            s.batches,
            s.records as f64 / s.batches.max(1) as f64,
            s.records as f64 / s.secs,
            s.lag_secs,
            s.secs
        );
    }
    println!(
        "in all (warm-ups included): {} answered 200 via the TA, {} records settled in {} batches; \
         charged by the answers' usage {} ngnk, by the batches' requester lines {} ngnk; escrows {}",
        report.served_via_ta,
        report.settled.0,
        report.settled.1,
        report.charged_by_answers,
        report.charged_on_chain,
        if report.escrow_mismatches.is_empty() {
            "debited exactly those lines".to_string()
        } else {
            format!("NOT matching the lines: {:?}", report.escrow_mismatches)
        }
    );
}

fn print_added(report: &Report, rates: &[f64], cores: usize) {
    println!();
    println!(
        "TA added latency, full chain mode (via TA minus direct, stub backend, same rate; a difference of percentiles):"
    );
    let find = |route: Route, rate: f64| {
        report.phases.iter().find(|p| {
            p.spec.backend == Backend::Stub
                && p.spec.route == route
                && p.spec.load == Load::Open(rate)
        })
    };
    for &rate in rates {
        let (Some(direct), Some(ta)) = (find(Route::Direct, rate), find(Route::ViaTa, rate)) else {
            continue;
        };
        let at = |p: &Phase, q: f64| ms(percentile(&p.latencies, q));
        let goal = |added: f64, applies: bool| match applies {
            false => String::new(),
            true if added <= 1.0 => "  (goal <= 1 ms: met)".to_string(),
            true => "  (goal <= 1 ms: MISSED)".to_string(),
        };
        println!("  {rate:>6.0} req/s:");
        // The TA's own CPU per request, and whether the machine kept up at all.
        let ta_cpu = report
            .rows
            .iter()
            .position(|r| r.label == "transfer agent")
            .and_then(|i| ta.cpu.secs[i])
            .map_or("-".to_string(), |s| {
                format!("{:.0}", s * 1e6 / ta.records().max(1) as f64)
            });
        let busy: f64 = ta.cpu.secs.iter().flatten().sum::<f64>() / ta.cpu.wall;
        let errors = ta.requests - ta.ok;
        if errors > 0 || busy > 0.9 * cores as f64 {
            println!(
                "    SATURATED: via TA, {errors} of {} requests failed and the processes kept {busy:.2} of {cores} cores busy \
                 (CPU wait {}); the difference below is queueing on this machine, not the TA's own work (its CPU: {ta_cpu} us per record)",
                ta.requests,
                ta.cpu
                    .pressure
                    .map_or("-".to_string(), |w| format!("{:.0}%", w * 100.0))
            );
        } else {
            println!("    the TA's own CPU: {ta_cpu} us per record; processes kept {busy:.2} of {cores} cores busy");
        }
        for (name, q) in [("p50", 50.0), ("p90", 90.0), ("p99", 99.0)] {
            let added = at(ta, q) - at(direct, q);
            // Goals: added p50 <= 1 ms at 100 and 1,000 req/s; added p99 <= 1 ms at 100.
            let applies = match name {
                "p50" => rate == 100.0 || rate == 1000.0,
                "p99" => rate == 100.0,
                _ => false,
            };
            println!(
                "    {name}: direct {:>8.3} ms, via TA {:>8.3} ms, TA added {added:>+8.3} ms{}",
                at(direct, q),
                at(ta, q),
                goal(added, applies)
            );
        }
    }
    println!(
        "  direct = the ML node checks the requester's signature, the TA caller's signature and its replay window, forwards to the stub and signs a receipt; \
         via TA adds the TA's authentication, rate and escrow checks, routing, its signed node call, the receipt check and the durable body + record write"
    );
}

fn print_cpu(report: &Report, cores: usize) {
    println!();
    println!(
        "CPU per record by process, us: utime+stime over each phase's window / all the phase's records (requests direct, settled records via TA), \
         so each of several ML nodes shows its share and a group's `=` row is the cost per record; idle = ms of CPU per second before the phases:"
    );
    let mut header = format!("{:<18} {:>10}", "process", "idle ms/s");
    for p in &report.phases {
        header.push_str(&format!(" {:>10}", p.spec.label()));
    }
    println!("{header}");
    let line = |label: &str, idle: Option<f64>, values: Vec<Option<f64>>| {
        let cell =
            |v: Option<f64>, digits: usize| v.map_or("-".to_string(), |v| format!("{v:.digits$}"));
        let mut text = format!("{label:<18} {:>10}", cell(idle, 1));
        for v in values {
            text.push_str(&format!(" {:>10}", cell(v, 0)));
        }
        println!("{text}");
    };
    let per_record =
        |phase: &Phase, secs: Option<f64>| secs.map(|s| s * 1e6 / phase.records().max(1) as f64);
    let idle_ms = |secs: Option<f64>| secs.map(|s| s * 1e3 / report.idle.wall);
    for (i, row) in report.rows.iter().enumerate() {
        line(
            &row.label,
            idle_ms(report.idle.secs[i]),
            report
                .phases
                .iter()
                .map(|p| per_record(p, p.cpu.secs[i]))
                .collect(),
        );
    }
    // Group sums and the total, in the rows' order.
    let mut groups: Vec<&'static str> = Vec::new();
    for row in &report.rows {
        if !row.group.is_empty() && !groups.contains(&row.group) {
            groups.push(row.group);
        }
    }
    let sum = |cpu: &CpuUse, group: Option<&str>| -> Option<f64> {
        let mut total = 0.0;
        for (row, secs) in report.rows.iter().zip(&cpu.secs) {
            if group.is_none_or(|g| g == row.group) {
                total += (*secs)?;
            }
        }
        Some(total)
    };
    for group in groups {
        line(
            &format!("= {group}"),
            idle_ms(sum(&report.idle, Some(group))),
            report
                .phases
                .iter()
                .map(|p| per_record(p, sum(&p.cpu, Some(group))))
                .collect(),
        );
    }
    line(
        "= total",
        idle_ms(sum(&report.idle, None)),
        report
            .phases
            .iter()
            .map(|p| per_record(p, sum(&p.cpu, None)))
            .collect(),
    );
    let mut busy = format!(
        "{:<18} {:>10}",
        "cores busy",
        format!(
            "{:.2}",
            sum(&report.idle, None).unwrap_or(0.0) / report.idle.wall
        )
    );
    for p in &report.phases {
        busy.push_str(&format!(
            " {:>10}",
            sum(&p.cpu, None).map_or("-".to_string(), |s| format!("{:.2}", s / p.cpu.wall))
        ));
    }
    println!("{busy}");
    let mut wait = format!(
        "{:<18} {:>10}",
        "CPU wait",
        report
            .idle
            .pressure
            .map_or("-".to_string(), |w| format!("{:.0}%", w * 100.0))
    );
    for p in &report.phases {
        wait.push_str(&format!(
            " {:>10}",
            p.cpu
                .pressure
                .map_or("-".to_string(), |w| format!("{:.0}%", w * 100.0))
        ));
    }
    println!("{wait}");
    // What this machine could do if every process kept its CPU per record: cores / total.
    let mut bound = format!("{:<18} {:>10}", "bound records/s", "");
    for p in &report.phases {
        bound.push_str(&format!(
            " {:>10}",
            sum(&p.cpu, None).map_or("-".to_string(), |s| format!(
                "{:.0}",
                cores as f64 * p.records() as f64 / s.max(1e-9)
            ))
        ));
    }
    println!("{bound}");
    let mut window = format!(
        "{:<18} {:>10}",
        "window s",
        format!("{:.1}", report.idle.wall)
    );
    for p in &report.phases {
        window.push_str(&format!(" {:>10.1}", p.cpu.wall));
    }
    println!("{window}");
}

/// CPU time of the calling thread so far.
fn thread_cpu() -> Duration {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime only writes the timespec it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) };
    Duration::new(now.tv_sec as u64, now.tv_nsec as u32)
}

/// Medians of one component's runs, in microseconds.
#[derive(Debug, Clone, Copy)]
struct Timing {
    /// Wall time: what the run took, waits for a CPU included.
    wall_us: f64,
    /// This thread's CPU time: what the run cost, as the processes' figures count it.
    cpu_us: f64,
}

impl Timing {
    /// The share of one of `n` records.
    fn per(self, n: usize) -> Timing {
        Timing {
            wall_us: self.wall_us / n.max(1) as f64,
            cpu_us: self.cpu_us / n.max(1) as f64,
        }
    }
}

/// Median wall and CPU time of `f` over `runs` runs.
fn median_time(runs: usize, mut f: impl FnMut()) -> Timing {
    let (mut walls, mut cpus): (Vec<Duration>, Vec<Duration>) = (0..runs.max(1))
        .map(|_| {
            let (t0, c0) = (Instant::now(), thread_cpu());
            f();
            (t0.elapsed(), thread_cpu().saturating_sub(c0))
        })
        .unzip();
    walls.sort();
    cpus.sort();
    Timing {
        wall_us: percentile(&walls, 50.0).as_secs_f64() * 1e6,
        cpu_us: percentile(&cpus, 50.0).as_secs_f64() * 1e6,
    }
}

/// A batch of `count` records as the TA builds it, all executed by `executor` of `host`.
fn sample_batch(
    requesters: &[Key],
    executor: &k256::ecdsa::SigningKey,
    ta: &str,
    host: &str,
    count: usize,
) -> Result<Batch> {
    let served = (0..count)
        .map(|i| {
            let mut salt = [0x53; 32];
            salt[..8].copy_from_slice(&(i as u64).to_be_bytes());
            let body = request_body(STUB_MODEL);
            let input = WorkRecordInput {
                terms: RequestTerms {
                    chain_id: CHAIN_ID.into(),
                    body_hash: body_hash(&body),
                    timestamp: unix_now(),
                    nonce: format!("micro-{i}"),
                    commission: COMMISSION,
                    transfer_agent: ta.into(),
                    model: STUB_MODEL.into(),
                    max_price_per_token: PRICE,
                    max_completion_tokens: MAX_TOKENS,
                    max_prompt_tokens: gonka_proto::signing::prompt_token_bound(&body),
                },
                response_hash: gonka_proto::signing::response_hash("a canned answer"),
                salt,
                scored: None,
                prompt_tokens: STUB_PROMPT_TOKENS,
                completion_tokens: MAX_TOKENS,
                executor_node: "node0-ml".into(),
                host: host.into(),
            };
            let record = signed_work_record(&requesters[i % requesters.len()], executor, &input)?;
            Ok(Served {
                host: host.into(),
                cost: u128::from(STUB_PROMPT_TOKENS + MAX_TOKENS) * PRICE,
                work_per_token: 0,
                record,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Batch::build(ta, 1, served)
}

/// One component timing: `(what, µs per run, runs per record and where)`.
type Component = (String, Timing, String);

/// Times the per-record components in this process.
fn components(
    settings: &Settings,
    requesters: &[Key],
    batch_size: usize,
) -> Result<Vec<Component>> {
    let runs = settings.micro_runs;
    let mut out: Vec<Component> = Vec::new();
    let ta = operator(0)?;
    let hosts: Vec<Key> = (0..VALIDATORS).map(operator).collect::<Result<_>>()?;
    let host = hosts[0].address().to_string();
    let executor = k256::ecdsa::SigningKey::from_slice(&[7; 32])?;
    let requester = &requesters[0];
    let body = request_body(STUB_MODEL);
    let terms = |nonce: String| RequestTerms {
        chain_id: CHAIN_ID.into(),
        body_hash: body_hash(&body),
        timestamp: unix_now(),
        nonce,
        commission: COMMISSION,
        transfer_agent: ta.address().to_string(),
        model: STUB_MODEL.into(),
        max_price_per_token: PRICE,
        max_completion_tokens: MAX_TOKENS,
        max_prompt_tokens: gonka_proto::signing::prompt_token_bound(&body),
    };

    let mut n = 0u64;
    let t = median_time(runs, || {
        n += 1;
        let headers = sign_request(requester, &body, terms(format!("m{n}"))).expect("signing");
        std::hint::black_box(headers);
    });
    out.push((
        "requester signs a request (sign_request)".into(),
        t,
        "1x: client".into(),
    ));

    let request = terms("m0".into());
    let t = median_time(runs * 10, || {
        std::hint::black_box(body_hash(std::hint::black_box(&body)));
    });
    out.push((
        "body hash (SHA-256 of the body)".into(),
        t,
        "2x: TA, ML node".into(),
    ));
    let t = median_time(runs * 10, || {
        std::hint::black_box(std::hint::black_box(&request).hash());
    });
    out.push((
        "request/v3 hash (RequestTerms::hash)".into(),
        t,
        "3x: TA, ML node, co-sign check".into(),
    ));

    let headers = sign_request(requester, &body, request.clone())?;
    let lookup = |name: &str| {
        headers
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.as_str())
    };
    let pubkey = requester.public_key().to_bytes();
    let signature = hex::decode(lookup("x-gonka-signature").unwrap_or_default())?;
    let hash = request.hash();
    let t = median_time(runs, || {
        assert!(gonka_inference::signature_ok(&pubkey, &hash, &signature));
    });
    out.push((
        "requester signature check (signature_ok)".into(),
        t,
        "3x: TA, ML node, co-sign check".into(),
    ));
    let now = unix_now();
    let t = median_time(runs, || {
        let signed = verify_request(&lookup, &body, now, 60).expect("verifies");
        std::hint::black_box(signed);
    });
    out.push((
        "signed headers check (verify_request)".into(),
        t,
        "2x: TA, ML node".into(),
    ));

    let t = median_time(runs, || {
        let caller = sign_node_call(&ta, "node0-ml", Some(hash), &body, now).expect("signing");
        std::hint::black_box(caller);
    });
    out.push((
        "TA signs its node call (sign_node_call)".into(),
        t,
        "1x: TA".into(),
    ));
    let caller = sign_node_call(&ta, "node0-ml", Some(hash), &body, now)?;
    let caller_lookup = |name: &str| {
        caller
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.as_str())
    };
    let t = median_time(runs, || {
        let checked = verify_node_call(&caller_lookup, "node0-ml", Some(hash), &body, now, 60)
            .expect("verifies");
        std::hint::black_box(checked);
    });
    out.push((
        "node call check (verify_node_call)".into(),
        t,
        "1x: ML node".into(),
    ));

    let text = "a canned answer of the stub backend";
    let t = median_time(runs, || {
        let receipt = Receipt::sign(
            &executor,
            "node0-ml",
            &host,
            &hash,
            text,
            STUB_PROMPT_TOKENS,
            MAX_TOKENS,
        );
        std::hint::black_box(receipt);
    });
    out.push((
        "receipt signing (Receipt::sign)".into(),
        t,
        "1x: ML node".into(),
    ));
    let receipt = Receipt::sign(
        &executor,
        "node0-ml",
        &host,
        &hash,
        text,
        STUB_PROMPT_TOKENS,
        MAX_TOKENS,
    );
    let executor_pub = executor
        .verifying_key()
        .to_encoded_point(true)
        .as_bytes()
        .to_vec();
    let t = median_time(runs, || {
        let verified = receipt
            .verify(&executor_pub, &host, &hash)
            .expect("verifies");
        std::hint::black_box(verified);
    });
    out.push((
        "receipt check (Receipt::verify)".into(),
        t,
        "2x: TA, co-sign check".into(),
    ));

    let batch = sample_batch(requesters, &executor, ta.address(), &host, batch_size)?;
    let leaf = batch.leaves[0].clone();
    let t = median_time(runs * 10, || {
        std::hint::black_box(gonka_proto::batch::leaf_hash(std::hint::black_box(&leaf)));
    });
    out.push((
        "leaf hash (batch::leaf_hash)".into(),
        t,
        "2x: TA, co-sign check".into(),
    ));
    let served: Vec<Served> = batch.leaves.iter().filter_map(Served::of_leaf).collect();
    let build_runs = (runs / 50).max(3);
    let t = median_time(build_runs, || {
        let built = Batch::build(ta.address(), 1, served.clone()).expect("builds");
        std::hint::black_box(built);
    });
    out.push((
        format!("batch build, per record (Batch::build of {batch_size})"),
        t.per(batch_size),
        "1x: TA".into(),
    ));
    let proofs: Vec<_> = (0..batch_size as u64)
        .filter_map(|i| batch.leaf_proof(i))
        .collect();
    let verifying = *executor.verifying_key();
    let own_receipt = |record: &WorkRecord| {
        gonka_node::cosign::own_receipt(&verifying, &record.executor_node, &host, record)
    };
    let now_secs = unix_now() as i64;
    let t = median_time(build_runs, || {
        let terms = |_: &str| {
            Some(gonka_client::settlement::ModelTerms {
                price_per_token: PRICE,
                work_per_token: 0,
            })
        };
        check_host_leaves(&batch.msg, &host, &proofs, own_receipt, terms).expect("accepts");
        for proof in &proofs {
            let leaf = proof.leaf.as_ref().expect("a leaf");
            let fault = gonka_settlement::challenge::leaf_fault(
                CHAIN_ID,
                ta.address(),
                now_secs,
                3_600,
                leaf,
            );
            assert!(fault.is_none(), "{fault:?}");
        }
    });
    out.push((
        "co-sign check, per leaf (check_host_leaves + leaf_fault)".into(),
        t.per(batch_size),
        "1x: the executor's ML node".into(),
    ));

    let bls: Vec<_> = hosts.iter().map(account_bls_key).collect();
    let msg = batch.msg.clone();
    let t = median_time(runs, || {
        std::hint::black_box(cosign(&bls[0], CHAIN_ID, &msg));
    });
    out.push((
        "BLS co-signature of a batch (cosign)".into(),
        t,
        "per batch, each host's ML node".into(),
    ));
    let signatures: Vec<_> = bls.iter().map(|k| cosign(k, CHAIN_ID, &msg)).collect();
    let t = median_time(runs, || {
        std::hint::black_box(gonka_bls_crypto::aggregate(&signatures));
    });
    out.push((
        format!("BLS aggregation of {VALIDATORS} (aggregate)"),
        t,
        "per batch, TA".into(),
    ));
    let aggregate = gonka_bls_crypto::aggregate(&signatures);
    let keys: Vec<_> = bls.iter().map(|k| k.public_key()).collect();
    let signed_bytes = batch_sign_bytes(CHAIN_ID, &msg);
    let t = median_time((runs / 10).max(3), || {
        assert!(gonka_bls_crypto::fast_aggregate_verify(
            &keys,
            &signed_bytes,
            &aggregate
        ));
    });
    out.push((
        format!("BLS aggregate check, {VALIDATORS} keys (fast_aggregate_verify)"),
        t,
        "per batch, each validator".into(),
    ));
    Ok(out)
}

fn print_components(components: &[Component], report: &Report, batch_size: usize, runs: usize) {
    println!();
    println!(
        "components, in this process once the localnet stopped (median of {runs} runs or more; wall = elapsed, \
         CPU = this thread's CPU time, comparable with the table above; per-batch ones also per record at \
         {batch_size} records per batch, the busiest via-TA phase's mean):"
    );
    println!(
        "  {:<56} {:>9} {:>9}  runs per record: where",
        "component", "wall us", "CPU us"
    );
    for (what, t, note) in components {
        let note = if note.starts_with("per batch") {
            format!("{note}: {:.3} us CPU per record", t.per(batch_size).cpu_us)
        } else {
            note.clone()
        };
        println!("  {what:<56} {:>9.2} {:>9.2}  {note}", t.wall_us, t.cpu_us);
    }
    // Block execution per record: the apps' CPU per settled record in the busiest via-TA
    // phase on the stub backend (FinalizeBlock, CheckTx, Commit, queries: the whole app).
    let busiest = report
        .phases
        .iter()
        .filter(|p| p.spec.backend == Backend::Stub && p.settled.is_some())
        .max_by(|a, b| a.served_per_sec.total_cmp(&b.served_per_sec));
    if let Some(p) = busiest {
        let apps: Vec<f64> = report
            .rows
            .iter()
            .zip(&p.cpu.secs)
            .filter(|(row, _)| row.group == "gonkad")
            .filter_map(|(_, s)| *s)
            .collect();
        let mean = apps.iter().sum::<f64>() / apps.len().max(1) as f64;
        println!(
            "  {:<56} {:>9} {:>9.2}  1x: each validator (mean gonkad CPU per settled record in phase {}, \
             idle cost included; in-process FinalizeBlock: `cargo bench -p gonka-app --bench settle`)",
            "block execution per settled record (gonkad)",
            "-",
            mean * 1e6 / p.records().max(1) as f64,
            p.spec.label()
        );
    }
}

fn main() -> Result<()> {
    common::init_logs();
    let settings = Settings::from_env()?;
    let profile = if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    };
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let clock = Instant::now();
    let requesters: Arc<Vec<Key>> = Arc::new(
        (0..REQUESTERS)
            .map(|i| key(&format!("serving-requester-{i}")))
            .collect::<Result<_>>()?,
    );
    let addresses: Vec<String> = requesters.iter().map(|k| k.address().to_string()).collect();

    // The stub backend, on its own runtime so its CPU is told apart by thread name.
    let stub_runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name(STUB_THREADS)
        .enable_all()
        .build()?;
    let stub_listener = stub_runtime.block_on(TcpListener::bind("127.0.0.1:0"))?;
    let stub = stub_listener.local_addr()?;
    stub_runtime.spawn(serve_stub(stub_listener));

    let dir = tempfile::Builder::new()
        .prefix("gonka-serving-bench-")
        .tempdir()?;
    let mut net = start_bench_localnet(&settings, dir.path(), &addresses, stub)?;
    let stopper = net.stopper();
    // Ctrl-C stops the network; the calls in flight then fail and main returns.
    ctrlc::set_handler(move || {
        let _ = stopper.stop();
    })?;
    println!(
        "serving bench ({profile}, {cores} cores): localnet of {VALIDATORS} validators up in {:.1} s in {}",
        clock.elapsed().as_secs_f64(),
        net.dir().display()
    );
    let mut reference = None;
    let result = (|| -> Result<Report> {
        let main = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        if settings.reference_clients > 0 {
            // Once the localnet's sidecars registered: the reference ML nodes register with
            // the same hosts' accounts, and two txs of one account at once collide.
            let chain = Client::new(&net.nodes()[0].rpc_url)?;
            main.block_on(wait_registered(&chain, VALIDATORS))?;
            reference = Some(ReferenceNodes::start(&net)?);
        }
        let rows = watched(
            &net,
            &reference
                .as_ref()
                .map(ReferenceNodes::pids)
                .unwrap_or_default(),
        )?;
        let ctx = Arc::new(Ctx {
            ta: operator(0)?,
            ta_addr: url_addr(&net.transfer_agent_urls()[0])?,
            requesters: requesters.clone(),
            stub_nodes: (0..VALIDATORS)
                .map(|i| Ok((format!("node{i}-ml"), url_addr(&net.ml_node_url(i)?)?)))
                .collect::<Result<_>>()?,
        });
        let client = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("bench-client")
            .enable_all()
            .build()?;
        println!(
            "setup: TA on validator 0 in full chain mode (--rate-limit-per-sec 0, batches every {} ms); \
             {VALIDATORS} stub ML nodes ({STUB_MODEL}, --upstream-url to this process) and {} reference ML nodes ({REFERENCE_MODEL}); \
             timeout_commit {}, vote extensions {}, leaf_sample_ppm {}; {REQUESTERS} requesters with escrows",
            settings.batch_interval_ms,
            if reference.is_some() { VALIDATORS } else { 0 },
            settings.timeout_commit,
            if settings.vote_extensions { "on" } else { "off" },
            settings.leaf_sample_ppm
        );
        println!(
            "load: {PROMPT:?}, max_tokens {MAX_TOKENS}, not streamed, a new TCP connection per request; \
             each phase {:.1} s warm-up + {:.1} s counted",
            settings.warmup.as_secs_f64(),
            settings.duration.as_secs_f64()
        );
        let report = run(&net, &settings, &ctx, rows, &main, &client, clock);
        client.shutdown_timeout(Duration::from_secs(1));
        report
    })();
    drop(reference);
    let stopped = net.stop();
    let report = match result {
        Ok(report) => report,
        Err(e) => {
            let kept = dir.keep();
            eprintln!("the localnet's logs are kept in {}", kept.display());
            return Err(e);
        }
    };
    stopped?;
    stub_runtime.shutdown_timeout(Duration::from_secs(1));

    // Per-record components at the mean batch size of the busiest via-TA phase.
    let batch_size = report
        .phases
        .iter()
        .filter_map(|p| p.settled.as_ref().map(|s| (p.served_per_sec, s)))
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map_or(100, |(_, s)| (s.records / s.batches.max(1)).max(1) as usize);
    let components = components(&settings, &requesters, batch_size)?;

    print_serving(&report);
    print_settlement(&report);
    print_added(&report, &settings.rates, cores);
    print_cpu(&report, cores);
    print_components(&components, &report, batch_size, settings.micro_runs);
    println!();
    println!("total run time {:.1} s", clock.elapsed().as_secs_f64());

    if settings.smoke {
        for p in &report.phases {
            ensure!(
                p.errors.is_empty() && p.ok == p.requests && p.requests > 0,
                "{}: {} requests, {} answered 200, errors {:?}",
                p.spec.label(),
                p.requests,
                p.ok,
                p.errors
            );
            if let Some(s) = &p.settled {
                ensure!(
                    s.records == p.ok as u64,
                    "{}: {} records settled but {} served",
                    p.spec.label(),
                    s.records,
                    p.ok
                );
            }
        }
        ensure!(
            report.settled.0 == report.served_via_ta,
            "{} records settled in all but {} answered 200 via the TA",
            report.settled.0,
            report.served_via_ta
        );
        ensure!(
            report.escrow_mismatches.is_empty(),
            "escrows not debited by the batches' lines: {:?}",
            report.escrow_mismatches
        );
        ensure!(
            report.charged_by_answers == report.charged_on_chain,
            "the answers cost {} ngnk but the batches charged {}",
            report.charged_by_answers,
            report.charged_on_chain
        );
    }
    Ok(())
}
