//! Benchmark: the chain's committed throughput of signed sends beside CometBFT's own `kvstore`
//! app, in the same run, on the same 4-validator topology and block settings.
//!
//! Each run pre-signs its txs (the chain: bank sends from `LOAD_SENDERS` funded accounts;
//! kvstore: `key=value` txs of the same byte size), then submits them as fast as they are
//! accepted — one task per sender, `broadcast_tx_sync` to node `sender % 4`, a full mempool
//! retried — and reads the committed rate from the block timestamps of the blocks that hold
//! them. Printed: committed tx/s of both, their ratio, the bound one secp256k1 verification
//! per tx per node puts on a machine whose cores all four validators share, commit latency
//! p50/p99 (sampled), mempool rejections, and the load generator's own CPU.
//!
//! Run: `cargo bench -p gonka-cli --bench load` (`LOAD_SENDERS`, default 64; `LOAD_TXS`, per
//! sender, default 200: the load must span many blocks). Needs `cometbft` on PATH.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use gonka_app::genesis::{GenesisAccount, GenesisConfig, GenesisValidator};
use gonka_client::keys::well_known_mnemonic;
use gonka_client::{msg_send, sign, GasFee, GasPrice, Key, SignerData};
use gonka_localnet::{
    find_cometbft, find_free_base_port, read_consensus_key, AppStateFn, Localnet, LocalnetConfig,
    Role,
};
use tendermint_rpc::{Client as _, HttpClient};

const VALIDATORS: usize = 4;
const CHAIN_ID: &str = "gonka-load";
/// Gas limit of each send (one uses about 40,000).
const SEND_GAS: u64 = 100_000;

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The mnemonic of load sender `i` (funded at genesis with account number `i`).
fn sender_mnemonic(i: usize) -> String {
    well_known_mnemonic(&format!("load-{i}"))
}

/// What one run measured.
struct Figures {
    /// Load txs submitted (and committed).
    txs: usize,
    /// How long the generator took to have every tx accepted.
    submitted: Duration,
    committed_per_s: f64,
    latency_p50: Duration,
    latency_p99: Duration,
    rejected: u64,
    cpu_share: f64,
    /// CPU seconds each watched process used while the load ran (in the order given).
    process_cpu: Vec<f64>,
    /// How much each app metric grew while the load ran, summed over the nodes.
    app_metrics: BTreeMap<String, f64>,
}

/// The processes and metrics endpoints a run watches.
struct Watched {
    pids: Vec<u32>,
    metrics_urls: Vec<String>,
    /// Where to save node 0's CometBFT CPU profile of the load (`LOAD_PPROF`), and its
    /// pprof address.
    pprof: Option<(std::path::PathBuf, String)>,
}

/// Port of node 0's CometBFT pprof server when `LOAD_PPROF` asks for profiles.
const PPROF_PORT: u16 = 6_061;

/// With `LOAD_PPROF=DIR`, turns on node 0's CometBFT pprof server (call before it starts)
/// and says where its profile of run `name` goes.
fn pprof_of(node: &gonka_localnet::NodeInfo, name: &str) -> Option<(std::path::PathBuf, String)> {
    let dir = std::path::PathBuf::from(std::env::var_os("LOAD_PPROF")?);
    std::fs::create_dir_all(&dir).unwrap();
    let config = node.config_toml_path();
    let text = std::fs::read_to_string(&config).unwrap();
    let address = format!("127.0.0.1:{PPROF_PORT}");
    assert!(
        text.contains("pprof_laddr = \"\""),
        "{} has no empty pprof_laddr to set",
        config.display()
    );
    let text = text.replace(
        "pprof_laddr = \"\"",
        &format!("pprof_laddr = \"{address}\""),
    );
    std::fs::write(&config, text).unwrap();
    Some((dir.join(format!("{name}.pprof")), address))
}

/// Who submits a run's txs.
#[derive(Clone, Copy)]
enum Generator {
    /// This repo's client: tendermint-rpc's `HttpClient`, one tokio task per sender.
    Rust,
    /// Stock cosmjs in Node.js (`tests/cosmjs/load.mjs`), as wallets submit.
    Cosmjs,
}

impl Generator {
    fn tag(self) -> &'static str {
        match self {
            Generator::Rust => "rust",
            Generator::Cosmjs => "cosmjs",
        }
    }

    fn name(self) -> &'static str {
        match self {
            Generator::Rust => "gonka-client (Rust)",
            Generator::Cosmjs => "cosmjs 0.39",
        }
    }
}

/// What a run submits, per sender in order.
enum Txs<'a> {
    /// Bank sends of 1 ngnk signed by `keys` (account numbers in order) from sequence 0.
    Sends {
        keys: &'a [Key],
        fee: GasFee,
        recipient: String,
    },
    /// CometBFT kvstore `key=value` txs of `size` bytes.
    KeyValues { senders: usize, size: usize },
}

fn main() {
    let senders = env("LOAD_SENDERS", 64);
    let per_sender = env("LOAD_TXS", 200) as u64;
    let generators: Vec<Generator> = std::env::var("LOAD_GENERATORS")
        .unwrap_or_else(|_| "rust,cosmjs".into())
        .split(',')
        .map(|name| match name.trim() {
            "rust" => Generator::Rust,
            "cosmjs" => Generator::Cosmjs,
            other => panic!("LOAD_GENERATORS: unknown generator {other:?} (rust, cosmjs)"),
        })
        .collect();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let keys: Vec<Key> = (0..senders)
        .map(|i| Key::from_mnemonic(&sender_mnemonic(i)).unwrap())
        .collect();
    let price = GasPrice::parse(&gonka_auth::default_params().min_gas_price).unwrap();
    let sends = Txs::Sends {
        keys: &keys,
        fee: GasFee::at_price(SEND_GAS, &price).unwrap(),
        recipient: keys[0].address().to_string(),
    };
    let size = signed(&sends, 1)[0][0].len();
    let key_values = Txs::KeyValues { senders, size };
    println!(
        "{} txs of {size} bytes from {senders} senders per run: signed sends on the chain, key=value txs on kvstore",
        senders * per_sender as usize
    );

    let cometbft = find_cometbft().expect("cometbft on PATH");
    // `LOAD_BASELINE_COMETBFT=PATH`: the chain also runs on that CometBFT build (e.g. the
    // stock v0.38.25), before the one on PATH, in the same run.
    let mut cometbfts: Vec<(&str, std::path::PathBuf)> = Vec::new();
    if let Some(baseline) = std::env::var_os("LOAD_BASELINE_COMETBFT") {
        cometbfts.push((" on the baseline CometBFT", baseline.into()));
    }
    cometbfts.push(("", cometbft));
    for (label, path) in &cometbfts {
        let version = gonka_localnet::cometbft_version(path).unwrap();
        println!("gonka{label}: cometbft {version} at {}", path.display());
    }
    let mut rows = Vec::new();
    for &generator in &generators {
        let kvstore = {
            let dir = tempfile::tempdir().unwrap();
            let (urls, processes, pprof) =
                start_kvstore(dir.path(), &format!("kvstore-{}", generator.tag()));
            let watched = Watched {
                pids: processes.0.iter().map(std::process::Child::id).collect(),
                metrics_urls: Vec::new(),
                pprof,
            };
            println!("kvstore, {}:", generator.name());
            let submitter = Submitter::new(generator, &key_values, &urls, per_sender);
            runtime.block_on(load(&urls, submitter, 0, &watched))
        };
        let mut runs = Vec::new();
        for (label, cometbft) in &cometbfts {
            let dir = tempfile::tempdir().unwrap();
            let name = format!("gonka-{}{label}", generator.tag());
            let (net, pprof) = start_chain(dir.path(), &keys, &name, cometbft);
            let urls: Vec<String> = net.nodes().iter().map(|n| n.rpc_url.clone()).collect();
            let pid = |i: usize, role: Role| net.pid(i, role).expect("the node is running");
            let watched = Watched {
                // The apps first, then the CometBFT nodes.
                pids: (0..VALIDATORS)
                    .map(|i| pid(i, Role::App))
                    .chain((0..VALIDATORS).map(|i| pid(i, Role::Cometbft)))
                    .collect(),
                metrics_urls: net
                    .nodes()
                    .iter()
                    .map(|n| format!("http://{}:{}/metrics", n.host, n.ports.app_metrics()))
                    .collect(),
                pprof,
            };
            println!("gonka{label}, {}:", generator.name());
            let submitter = Submitter::new(generator, &sends, &urls, per_sender);
            // The chain's blocks each start with a beacon tx.
            runs.push((
                *label,
                runtime.block_on(load(&urls, submitter, 1, &watched)),
            ));
        }
        rows.push((generator, kvstore, runs));
    }

    let (verify, k256_verify) = verify_rates();
    // Every node verifies each tx once (CheckTx; FinalizeBlock reuses it); the four nodes
    // share this machine's cores, so at best a tx costs kvstore's time plus four
    // verifications of one core's time divided by the cores.
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    println!();
    println!(
        "| load generator | app | txs | committed tx/s | gonka / kvstore | commit latency p50 / p99 | submitted in | rejected | generator CPU |"
    );
    println!("|---|---|---:|---:|---:|---|---:|---:|---:|");
    for (generator, kvstore, runs) in &rows {
        let kvstore_row =
            std::iter::once(("kvstore (CometBFT's)".to_string(), kvstore, String::new()));
        let chain_rows = runs.iter().map(|(label, f)| {
            let ratio = format!(
                "{:.1}%",
                100.0 * f.committed_per_s / kvstore.committed_per_s
            );
            (format!("gonka (signed sends){label}"), f, ratio)
        });
        for (name, f, ratio) in kvstore_row.chain(chain_rows) {
            println!(
                "| {} | {name} | {} | {:.0} | {ratio} | {:.0} / {:.0} ms | {:.1} s | {} | {:.0}% of a core |",
                generator.name(),
                f.txs,
                f.committed_per_s,
                f.latency_p50.as_secs_f64() * 1e3,
                f.latency_p99.as_secs_f64() * 1e3,
                f.submitted.as_secs_f64(),
                f.rejected,
                f.cpu_share * 100.0
            );
        }
    }
    println!();
    println!(
        "secp256k1 verifications/s on one core: {verify:.0} on libsecp256k1 (the chain's), {k256_verify:.0} on k256; cores: {cores}"
    );
    for (generator, kvstore, runs) in &rows {
        let (_, chain) = runs.last().unwrap();
        let bound = 1.0 / (1.0 / kvstore.committed_per_s + VALIDATORS as f64 / (verify * cores));
        println!(
            "{}: the bound kvstore + {VALIDATORS} verifications per tx: {bound:.0} tx/s ({:.1}% of kvstore); gonka reaches {:.1}% of the bound",
            generator.name(),
            100.0 * bound / kvstore.committed_per_s,
            100.0 * chain.committed_per_s / bound
        );
    }
    for (generator, kvstore, runs) in &rows {
        for (label, chain) in runs {
            println!();
            println!("## With {}{label}", generator.name());
            print_cpu_split(kvstore, chain, verify);
        }
    }
}

/// The txs of `txs` for `per_sender` txs per sender, built and signed here.
fn signed(txs: &Txs, per_sender: u64) -> Vec<Vec<Vec<u8>>> {
    match txs {
        Txs::Sends {
            keys,
            fee,
            recipient,
        } => keys
            .iter()
            .enumerate()
            .map(|(number, key)| {
                (0..per_sender)
                    .map(|sequence| {
                        let signer = SignerData {
                            chain_id: CHAIN_ID.into(),
                            account_number: number as u64,
                            sequence,
                        };
                        sign(
                            key,
                            vec![msg_send(key.address(), recipient, 1)],
                            &signer,
                            *fee,
                            "",
                        )
                        .unwrap()
                    })
                    .collect()
            })
            .collect(),
        Txs::KeyValues { senders, size } => (0..*senders)
            .map(|s| {
                (0..per_sender)
                    .map(|n| {
                        let mut tx = format!("s{s}n{n}=").into_bytes();
                        tx.resize(*size, b'v');
                        tx
                    })
                    .collect()
            })
            .collect(),
    }
}

/// Prints where the CPU went while the load ran: per committed tx, CometBFT's processes
/// beside kvstore's, and the apps' by ABCI call (from their `gonka_app_cpu_seconds_total`
/// and signature-check counters).
fn print_cpu_split(kvstore: &Figures, chain: &Figures, verify: f64) {
    let nodes = VALIDATORS as f64;
    let per_tx = |seconds: f64, f: &Figures| seconds * 1e6 / f.txs as f64;
    let apps: f64 = chain.process_cpu[..VALIDATORS].iter().sum();
    let chain_cometbft: f64 = chain.process_cpu[VALIDATORS..].iter().sum();
    let kvstore_cometbft: f64 = kvstore.process_cpu.iter().sum();
    println!();
    println!("CPU per committed tx, the {VALIDATORS} nodes together (user + system, /proc):");
    println!("| processes | kvstore | gonka |");
    println!("|---|---:|---:|");
    println!(
        "| CometBFT | {:.0} µs | {:.0} µs |",
        per_tx(kvstore_cometbft, kvstore),
        per_tx(chain_cometbft, chain)
    );
    println!("| app | — | {:.0} µs |", per_tx(apps, chain));
    println!(
        "| load generator | {:.0} µs | {:.0} µs |",
        kvstore.cpu_share * 1e6 / kvstore.committed_per_s,
        chain.cpu_share * 1e6 / chain.committed_per_s
    );

    let metric = |name: &str| chain.app_metrics.get(name).copied().unwrap_or(0.0);
    let cpu = |call: &str| metric(&format!("gonka_app_cpu_seconds_total{{call=\"{call}\"}}"));
    let checks = |kind: &str| {
        ["accepted", "rejected"]
            .iter()
            .map(|result| {
                metric(&format!(
                    "gonka_app_check_tx_total{{result=\"{result}\",kind=\"{kind}\"}}"
                ))
            })
            .sum::<f64>()
    };
    let per_node_tx = |seconds: f64| per_tx(seconds, chain) / nodes;
    let calls_per_tx = |calls: f64| calls / (chain.txs as f64 * nodes);
    let misses = metric("gonka_app_signature_checks_total{cache=\"miss\"}");
    let hits = metric("gonka_app_signature_checks_total{cache=\"hit\"}");
    let blocks = metric("gonka_app_finalize_block_seconds_count") / nodes;
    println!();
    println!(
        "The app's CPU per committed tx on one node ({blocks:.0} blocks; thread CPU time inside each ABCI call):"
    );
    println!("| part | calls per tx | CPU per tx | of the app |");
    println!("|---|---:|---:|---:|");
    let row = |part: &str, calls: String, seconds: f64| {
        println!(
            "| {part} | {calls} | {:.1} µs | {:.0}% |",
            per_node_tx(seconds),
            100.0 * seconds / apps
        );
    };
    let mut in_calls = 0.0;
    for (part, call, calls) in [
        ("CheckTx of new txs", "check_tx", Some(checks("new"))),
        (
            "recheck after each block",
            "recheck_tx",
            Some(checks("recheck")),
        ),
        ("FinalizeBlock", "finalize_block", None),
        ("Commit", "commit", None),
        ("PrepareProposal", "prepare_proposal", None),
        ("ProcessProposal", "process_proposal", None),
        ("ExtendVote", "extend_vote", None),
        ("VerifyVoteExtension", "verify_vote_extension", None),
        ("Query", "query", None),
    ] {
        let seconds = cpu(call);
        in_calls += seconds;
        let calls = calls.map_or_else(|| "—".into(), |c| format!("{:.2}", calls_per_tx(c)));
        row(part, calls, seconds);
    }
    row(
        "outside the calls (ABCI socket reads and writes, message decoding and encoding, other threads)",
        "—".into(),
        apps - in_calls,
    );
    row("all of the app", "—".into(), apps);
    let verifying = misses / verify;
    println!(
        "| of which secp256k1 verifications ({:.2} per tx verified, {:.2} from the signature cache; at the measured one-core rate) | {:.2} | {:.1} µs | {:.0}% |",
        calls_per_tx(misses),
        calls_per_tx(hits),
        calls_per_tx(misses),
        per_node_tx(verifying),
        100.0 * verifying / apps
    );
    println!(
        "The app's CPU beyond one verification per tx: {:.1} µs per tx per node (the bound counts none).",
        per_node_tx(apps) - 1e6 / verify
    );
}

/// A 4-validator chain-only localnet whose genesis funds `keys` (account numbers in order).
fn start_chain(
    dir: &std::path::Path,
    keys: &[Key],
    name: &str,
    cometbft: &std::path::Path,
) -> (Localnet, Option<(std::path::PathBuf, String)>) {
    let accounts: Vec<GenesisAccount> = keys
        .iter()
        .map(|k| GenesisAccount {
            address: k.address().into(),
            ngnk: 1_000_000_000_000_000,
        })
        .collect();
    let mut config = LocalnetConfig::new(dir.join("net"), env!("CARGO_BIN_EXE_gonkad"), cometbft);
    config.validators = VALIDATORS;
    config.chain_id = CHAIN_ID.into();
    config.base_port = find_free_base_port(VALIDATORS, 33_000).unwrap();
    config.vote_extensions_enable_height = Some(1);
    config.app_state_for_validators = Some(AppStateFn(Arc::new(move |validator_keys| {
        let mut genesis = GenesisConfig {
            accounts: accounts.clone(),
            ..Default::default()
        };
        for key in validator_keys {
            let operator = Key::from_mnemonic(&well_known_mnemonic(&format!(
                "load-validator{}",
                key.index
            )))
            .unwrap();
            genesis.validators.push(GenesisValidator {
                operator: operator.address().into(),
                moniker: format!("node{}", key.index),
                consensus_pubkey: key.ed25519_pub_key,
                stake_ngnk: 10_000_000_000_000,
            });
        }
        genesis.app_state()
    })));
    let mut net = Localnet::prepare(config).unwrap();
    let pprof = pprof_of(&net.nodes()[0], name);
    net.start().unwrap();
    net.wait_for_height(0, 2, Duration::from_secs(60)).unwrap();
    (net, pprof)
}

/// Processes killed on drop.
struct Processes(Vec<std::process::Child>);

impl Drop for Processes {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The same topology and block settings running CometBFT's built-in kvstore app: the
/// localnet's layout (homes, ports, peers, genesis), with the validators written into
/// genesis.json (kvstore sets none) and each node started with `--proxy_app=kvstore`; with
/// node 0's pprof server when `LOAD_PPROF` asks for it ([`pprof_of`]).
fn start_kvstore(
    dir: &std::path::Path,
    name: &str,
) -> (Vec<String>, Processes, Option<(std::path::PathBuf, String)>) {
    let cometbft = find_cometbft().expect("cometbft on PATH");
    let mut config = LocalnetConfig::new(dir.join("net"), env!("CARGO_BIN_EXE_gonkad"), &cometbft);
    config.validators = VALIDATORS;
    config.chain_id = "kvstore-load".into();
    config.base_port = find_free_base_port(VALIDATORS, 34_000).unwrap();
    config.vote_extensions_enable_height = Some(1);
    let net = Localnet::prepare(config).unwrap();
    let validators: Vec<serde_json::Value> = net
        .nodes()
        .iter()
        .map(|node| {
            let key = read_consensus_key(&node.cometbft_home).unwrap();
            let address = {
                use sha2::Digest;
                hex::encode_upper(&sha2::Sha256::digest(key)[..20])
            };
            serde_json::json!({
                "address": address,
                "pub_key": {"type": "tendermint/PubKeyEd25519", "value": base64::Engine::encode(&base64::engine::general_purpose::STANDARD, key)},
                "power": "1",
                "name": node.moniker,
            })
        })
        .collect();
    let pprof = pprof_of(&net.nodes()[0], name);
    let mut processes = Processes(Vec::new());
    for node in net.nodes() {
        let path = node.genesis_path();
        let mut genesis: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        genesis["validators"] = serde_json::json!(validators);
        std::fs::write(&path, genesis.to_string()).unwrap();
        let log = std::fs::File::create(&node.cometbft_log).unwrap();
        processes.0.push(
            std::process::Command::new(&cometbft)
                .args(["start", "--proxy_app=kvstore", "--home"])
                .arg(&node.cometbft_home)
                .stdout(log.try_clone().unwrap())
                .stderr(log)
                .spawn()
                .unwrap(),
        );
    }
    let urls: Vec<String> = net.nodes().iter().map(|n| n.rpc_url.clone()).collect();
    let client = HttpClient::new(urls[0].as_str()).unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok(status) = client.status().await {
                if status.sync_info.latest_block_height.value() >= 2 {
                    break;
                }
            }
            assert!(
                Instant::now() < deadline,
                "the kvstore network made no blocks: see {}",
                net.nodes()[0].cometbft_log.display()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    });
    (urls, processes, pprof)
}

/// A run's load generator, its txs built and signed before the clock starts.
enum Submitter {
    Rust(Vec<Vec<Vec<u8>>>),
    Cosmjs(Cosmjs),
}

impl Submitter {
    fn new(generator: Generator, txs: &Txs, urls: &[String], per_sender: u64) -> Self {
        match generator {
            Generator::Rust => Submitter::Rust(signed(txs, per_sender)),
            Generator::Cosmjs => Submitter::Cosmjs(Cosmjs::start(txs, urls, per_sender)),
        }
    }
}

/// What a generator reports of its submission.
struct Submitted {
    accepted: u64,
    /// Every 10th accepted tx: its hash and when it was sent.
    samples: Vec<(tendermint::Hash, SystemTime)>,
    rejected: u64,
    /// CPU seconds the generator used while submitting.
    cpu_seconds: f64,
}

/// `tests/cosmjs/load.mjs` running in Node.js, its txs signed, waiting for the word to go.
struct Cosmjs {
    child: std::process::Child,
    stdout: std::io::Lines<std::io::BufReader<std::process::ChildStdout>>,
    _job: tempfile::NamedTempFile,
}

impl Cosmjs {
    fn start(txs: &Txs, urls: &[String], per_sender: u64) -> Self {
        use std::io::BufRead;
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/cosmjs");
        if !dir.join("node_modules").exists() {
            let installed = std::process::Command::new("npm")
                .args(["ci", "--silent"])
                .current_dir(&dir)
                .status()
                .expect("npm on PATH (the cosmjs generator runs in Node.js)");
            assert!(installed.success(), "npm ci in {} failed", dir.display());
        }
        let mut job = serde_json::json!({"urls": urls, "per_sender": per_sender});
        match txs {
            Txs::Sends {
                keys,
                fee,
                recipient,
            } => {
                let mnemonics: Vec<String> = (0..keys.len()).map(sender_mnemonic).collect();
                job["sends"] = serde_json::json!({
                    "chain_id": CHAIN_ID,
                    "mnemonics": mnemonics,
                    "gas": fee.gas_limit,
                    "fee_ngnk": fee.amount.to_string(),
                    "recipient": recipient,
                });
            }
            Txs::KeyValues { senders, size } => {
                job["key_values"] = serde_json::json!({"senders": senders, "size": size});
            }
        }
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), job.to_string()).unwrap();
        let mut child = std::process::Command::new("node")
            .arg(dir.join("load.mjs"))
            .arg(file.path())
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("node on PATH (the cosmjs generator runs in Node.js)");
        let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
        let ready = stdout.next().and_then(Result::ok).unwrap_or_default();
        assert!(
            ready.contains("signed"),
            "load.mjs did not get ready: {ready:?}"
        );
        Cosmjs {
            child,
            stdout,
            _job: file,
        }
    }

    /// Tells the generator to go and waits for its report.
    fn submit(mut self) -> Submitted {
        use std::io::Write;
        writeln!(self.child.stdin.as_mut().unwrap(), "go").unwrap();
        let report = self.stdout.next().and_then(Result::ok).unwrap_or_default();
        let _ = self.child.wait();
        let report: serde_json::Value =
            serde_json::from_str(&report).expect("load.mjs reports one JSON line");
        let samples = report["samples"]
            .as_array()
            .unwrap()
            .iter()
            .map(|sample| {
                let hash = sample[0].as_str().unwrap().parse().unwrap();
                let sent = Duration::from_millis(sample[1].as_u64().unwrap());
                (hash, SystemTime::UNIX_EPOCH + sent)
            })
            .collect();
        Submitted {
            accepted: report["accepted"].as_u64().unwrap(),
            samples,
            rejected: report["rejected"].as_u64().unwrap(),
            cpu_seconds: report["cpu_seconds"].as_f64().unwrap(),
        }
    }
}

/// What CometBFT answers for a tx its mempool already holds.
const ALREADY_IN_MEMPOOL: &str = "already exists in cache";

/// Tries of one tx (20 ms apart) before its sender gives up, so a stuck node ends the run.
const MAX_TRIES: u32 = 1_500;

/// Submits every sender's txs in order, one task per sender, to node `sender % nodes`, as
/// fast as they are accepted.
async fn submit_rust(clients: &[HttpClient], txs: Vec<Vec<Vec<u8>>>) -> Submitted {
    let total: usize = txs.iter().map(Vec::len).sum();
    let accepted = Arc::new(AtomicU64::new(0));
    let rejected = Arc::new(AtomicU64::new(0));
    let cpu_before = cpu_time();
    let mut tasks = Vec::new();
    for (sender, list) in txs.into_iter().enumerate() {
        let client = clients[sender % clients.len()].clone();
        let (accepted, rejected) = (accepted.clone(), rejected.clone());
        tasks.push(tokio::spawn(async move {
            let mut samples = Vec::new();
            for (n, tx) in list.into_iter().enumerate() {
                for tries in 1.. {
                    let sent = SystemTime::now();
                    let refusal = match client.broadcast_tx_sync(tx.clone()).await {
                        Ok(r) if r.code.is_ok() => {
                            accepted.fetch_add(1, Ordering::Relaxed);
                            if n % 10 == 0 {
                                samples.push((r.hash, sent));
                            }
                            break;
                        }
                        Ok(r) => format!("code {}: {}", r.code.value(), r.log),
                        // An earlier try got in after all (its answer was lost).
                        Err(e) if e.to_string().contains(ALREADY_IN_MEMPOOL) => {
                            accepted.fetch_add(1, Ordering::Relaxed);
                            break;
                        }
                        Err(e) => e.to_string(),
                    };
                    // A full mempool (or a busy node) refuses for now: try again, a while.
                    rejected.fetch_add(1, Ordering::Relaxed);
                    if tries == MAX_TRIES {
                        eprintln!("  sender {sender} gives up at its tx {n}: {refusal}");
                        return samples;
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
            samples
        }));
    }
    let progress = {
        let accepted = accepted.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_secs(2)).await;
                eprintln!("  accepted {} of {total}", accepted.load(Ordering::Relaxed));
            }
        })
    };
    let mut samples = Vec::new();
    for task in tasks {
        samples.extend(task.await.unwrap());
    }
    progress.abort();
    Submitted {
        accepted: accepted.load(Ordering::Relaxed),
        samples,
        rejected: rejected.load(Ordering::Relaxed),
        cpu_seconds: cpu_time() - cpu_before,
    }
}

/// Runs `submitter`, waits for its txs to commit, and measures. `per_block_extra`: txs every
/// block carries besides the load (the chain's beacon tx).
async fn load(
    urls: &[String],
    submitter: Submitter,
    per_block_extra: u64,
    watched: &Watched,
) -> Figures {
    let clients: Vec<HttpClient> = urls
        .iter()
        .map(|u| HttpClient::new(u.as_str()).unwrap())
        .collect();
    let start_height = latest_height(&clients[0]).await;
    let http = reqwest::Client::new();
    let metrics_before = scrape_all(&http, &watched.metrics_urls).await;
    let processes_before: Vec<f64> = watched.pids.iter().map(|&p| process_cpu(p)).collect();
    let started = Instant::now();
    // A CPU profile of node 0's CometBFT from 1 s into the load, for 8 s.
    let profile = watched.pprof.clone().map(|(path, address)| {
        let http = http.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(1)).await;
            let url = format!("http://{address}/debug/pprof/profile?seconds=8");
            let body = http.get(url).send().await.unwrap().bytes().await.unwrap();
            std::fs::write(&path, body).unwrap();
            eprintln!(
                "  CometBFT CPU profile: go tool pprof -top {}",
                path.display()
            );
        })
    });
    let Submitted {
        accepted,
        samples,
        rejected,
        cpu_seconds,
    } = match submitter {
        Submitter::Rust(txs) => submit_rust(&clients, txs).await,
        Submitter::Cosmjs(cosmjs) => tokio::task::spawn_blocking(move || cosmjs.submit())
            .await
            .unwrap(),
    };
    let submitted = started.elapsed();
    // Wait until the mempools are empty: everything accepted is committed.
    loop {
        let pending = async {
            let body = http
                .get(format!("{}/num_unconfirmed_txs", urls[0]))
                .send()
                .await
                .ok()?
                .bytes()
                .await
                .ok()?;
            let reply: serde_json::Value = serde_json::from_slice(&body).ok()?;
            reply["result"]["total"].as_str()?.parse::<u64>().ok()
        };
        if pending.await == Some(0) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let cpu_share = cpu_seconds / submitted.as_secs_f64();
    if let Some(profile) = profile {
        profile.await.unwrap();
    }
    let process_cpu = watched
        .pids
        .iter()
        .zip(processes_before)
        .map(|(&p, before)| process_cpu(p) - before)
        .collect();
    let mut app_metrics = scrape_all(&http, &watched.metrics_urls).await;
    for (name, value) in &mut app_metrics {
        *value -= metrics_before.get(name).copied().unwrap_or(0.0);
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let end_height = latest_height(&clients[0]).await;

    // The blocks that hold load, and their timestamps.
    let mut first: Option<f64> = None;
    let mut last = 0.0;
    let mut committed = 0u64;
    let mut height = start_height + 1;
    while height <= end_height {
        let top = (height + 19).min(end_height);
        let chain = clients[0]
            .blockchain(height as u32, top as u32)
            .await
            .unwrap();
        for meta in chain.block_metas.iter().rev() {
            let load_txs = (meta.num_txs as u64).saturating_sub(per_block_extra);
            if load_txs > 0 {
                let time = seconds(meta.header.time);
                if first.is_none() {
                    // The first block's txs were submitted before its timestamp: count the
                    // span from it, not its txs.
                    first = Some(time);
                } else {
                    committed += load_txs;
                }
                last = time;
            }
        }
        height = top + 1;
    }
    let span = last - first.unwrap_or(last);
    // A tx's commit is seen when its block is committed: when the next block's header time
    // (the median of the commit's vote times) says.
    let mut latencies = Vec::new();
    for (hash, sent) in samples {
        if let Ok(found) = clients[0].tx(hash, false).await {
            let next = found.height.increment();
            if let Ok(block) = clients[0].block(next).await {
                let at = seconds(block.block.header.time);
                let sent = sent
                    .duration_since(SystemTime::UNIX_EPOCH)
                    .unwrap()
                    .as_secs_f64();
                latencies.push(Duration::from_secs_f64((at - sent).max(0.0)));
            }
        }
    }
    latencies.sort();
    let pick = |q: f64| {
        latencies
            .get(((latencies.len() as f64 - 1.0) * q) as usize)
            .copied()
            .unwrap_or_default()
    };
    eprintln!(
        "  submitted in {:.1} s; committed over {span:.1} s",
        submitted.as_secs_f64()
    );
    Figures {
        txs: accepted as usize,
        submitted,
        committed_per_s: committed as f64 / span.max(1e-9),
        latency_p50: pick(0.5),
        latency_p99: pick(0.99),
        rejected,
        cpu_share,
        process_cpu,
        app_metrics,
    }
}

/// The app metrics of every node, summed by name.
async fn scrape_all(http: &reqwest::Client, urls: &[String]) -> BTreeMap<String, f64> {
    let mut sums = BTreeMap::new();
    for url in urls {
        let text = http
            .get(url)
            .send()
            .await
            .and_then(reqwest::Response::error_for_status)
            .expect("the app serves its metrics");
        let text = text.text().await.expect("a metrics body");
        for (name, value) in gonka_client::metrics::parse(&text) {
            *sums.entry(name).or_insert(0.0) += value;
        }
    }
    sums
}

async fn latest_height(client: &HttpClient) -> u64 {
    client
        .status()
        .await
        .unwrap()
        .sync_info
        .latest_block_height
        .value()
}

fn seconds(time: tendermint::Time) -> f64 {
    time.unix_timestamp_nanos() as f64 / 1e9
}

/// User + system CPU seconds this process has used.
fn cpu_time() -> f64 {
    cpu_seconds_of("/proc/self/stat")
}

/// User + system CPU seconds process `pid` has used (all its threads).
fn process_cpu(pid: u32) -> f64 {
    cpu_seconds_of(&format!("/proc/{pid}/stat"))
}

/// User + system CPU seconds of the process whose `stat` file is at `path`.
fn cpu_seconds_of(path: &str) -> f64 {
    let stat = std::fs::read_to_string(path).unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    // After the command name: state is field 3; utime and stime are fields 14 and 15.
    let ticks = |i: usize| {
        fields
            .get(i - 3)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (ticks(14) + ticks(15)) / 100.0
}

/// secp256k1 verifications per second on one core: with the verifier the chain uses
/// (libsecp256k1 through `gonka_proto::ecdsa`), and with `k256` beside it.
fn verify_rates() -> (f64, f64) {
    use k256::ecdsa::signature::{Signer, Verifier};
    use k256::ecdsa::{Signature, SigningKey};
    let key = SigningKey::from_slice(&[7u8; 32]).unwrap();
    let message = [42u8; 200];
    let signature: Signature = key.sign(&message);
    let public = gonka_proto::ecdsa::PubKey::of(key.verifying_key()).unwrap();
    let rounds = 10_000;
    let rate = |verify: &dyn Fn() -> bool| {
        let started = Instant::now();
        for _ in 0..rounds {
            assert!(verify());
        }
        rounds as f64 / started.elapsed().as_secs_f64()
    };
    let libsecp256k1 = rate(&|| public.verifies(std::hint::black_box(&message), &signature));
    let k256 = rate(&|| {
        key.verifying_key()
            .verify(std::hint::black_box(&message), &signature)
            .is_ok()
    });
    (libsecp256k1, k256)
}
