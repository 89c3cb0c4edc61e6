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

/// What one run measured.
struct Figures {
    txs: usize,
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
}

fn main() {
    let senders = env("LOAD_SENDERS", 64);
    let per_sender = env("LOAD_TXS", 200) as u64;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let keys: Vec<Key> = (0..senders)
        .map(|i| Key::from_mnemonic(&well_known_mnemonic(&format!("load-{i}"))).unwrap())
        .collect();

    let chain = {
        let dir = tempfile::tempdir().unwrap();
        let net = start_chain(dir.path(), &keys);
        let urls: Vec<String> = net.nodes().iter().map(|n| n.rpc_url.clone()).collect();
        let price = GasPrice::parse(&gonka_auth::default_params().min_gas_price).unwrap();
        let fee = GasFee::at_price(SEND_GAS, &price).unwrap();
        let recipient = keys[0].address().to_string();
        let txs: Vec<Vec<Vec<u8>>> = keys
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
                            vec![msg_send(key.address(), &recipient, 1)],
                            &signer,
                            fee,
                            "",
                        )
                        .unwrap()
                    })
                    .collect()
            })
            .collect();
        let size = txs[0][0].len();
        println!(
            "chain: {} signed sends of {size} bytes from {senders} senders",
            senders * per_sender as usize
        );
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
        };
        // The chain's blocks each start with a beacon tx.
        let figures = runtime.block_on(load(&urls, txs, 1, &watched));
        drop(net);
        (figures, size)
    };

    let kvstore = {
        let dir = tempfile::tempdir().unwrap();
        let (urls, processes) = start_kvstore(dir.path());
        let watched = Watched {
            pids: processes.0.iter().map(std::process::Child::id).collect(),
            metrics_urls: Vec::new(),
        };
        let size = chain.1;
        let txs: Vec<Vec<Vec<u8>>> = (0..senders)
            .map(|s| {
                (0..per_sender)
                    .map(|n| {
                        let mut tx = format!("s{s}n{n}=").into_bytes();
                        tx.resize(size, b'v');
                        tx
                    })
                    .collect()
            })
            .collect();
        println!(
            "kvstore: {} txs of {size} bytes from {senders} senders",
            senders * per_sender as usize
        );
        runtime.block_on(load(&urls, txs, 0, &watched))
    };

    let (chain, _) = chain;
    let verify = k256_verify_rate();
    // Every node verifies each tx once (CheckTx; FinalizeBlock reuses it); the four nodes
    // share this machine's cores, so at best a tx costs kvstore's time plus four
    // verifications of one core's time divided by the cores.
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    let bound = 1.0 / (1.0 / kvstore.committed_per_s + VALIDATORS as f64 / (verify * cores));
    println!();
    println!(
        "| app | txs | committed tx/s | commit latency p50 / p99 | rejected | load generator CPU |"
    );
    println!("|---|---:|---:|---|---:|---:|");
    for (name, f) in [
        ("kvstore (CometBFT's)", &kvstore),
        ("gonka (signed sends)", &chain),
    ] {
        println!(
            "| {name} | {} | {:.0} | {:.0} / {:.0} ms | {} | {:.0}% of a core |",
            f.txs,
            f.committed_per_s,
            f.latency_p50.as_secs_f64() * 1e3,
            f.latency_p99.as_secs_f64() * 1e3,
            f.rejected,
            f.cpu_share * 100.0
        );
    }
    println!();
    println!("k256 verifications/s (one core): {verify:.0}; cores: {cores}");
    println!(
        "gonka / kvstore: {:.1}%; the bound kvstore + {VALIDATORS} verifications per tx: {bound:.0} tx/s ({:.1}% of kvstore); gonka reaches {:.1}% of the bound",
        100.0 * chain.committed_per_s / kvstore.committed_per_s,
        100.0 * bound / kvstore.committed_per_s,
        100.0 * chain.committed_per_s / bound
    );
    print_cpu_split(&kvstore, &chain, verify);
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
fn start_chain(dir: &std::path::Path, keys: &[Key]) -> Localnet {
    let accounts: Vec<GenesisAccount> = keys
        .iter()
        .map(|k| GenesisAccount {
            address: k.address().into(),
            ngnk: 1_000_000_000_000_000,
        })
        .collect();
    let mut config = LocalnetConfig::new(
        dir.join("net"),
        env!("CARGO_BIN_EXE_gonkad"),
        find_cometbft().expect("cometbft on PATH"),
    );
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
    net.start().unwrap();
    net.wait_for_height(0, 2, Duration::from_secs(60)).unwrap();
    net
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
/// genesis.json (kvstore sets none) and each node started with `--proxy_app=kvstore`.
fn start_kvstore(dir: &std::path::Path) -> (Vec<String>, Processes) {
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
    (urls, processes)
}

/// Submits every sender's txs (in order, one task per sender, to node `sender % nodes`) as
/// fast as they are accepted, waits for them to commit, and measures. `per_block_extra`: txs
/// every block carries besides the load (the chain's beacon tx).
async fn load(
    urls: &[String],
    txs: Vec<Vec<Vec<u8>>>,
    per_block_extra: u64,
    watched: &Watched,
) -> Figures {
    let clients: Vec<HttpClient> = urls
        .iter()
        .map(|u| HttpClient::new(u.as_str()).unwrap())
        .collect();
    let total: usize = txs.iter().map(Vec::len).sum();
    let start_height = latest_height(&clients[0]).await;
    let accepted = Arc::new(AtomicU64::new(0));
    let rejected = Arc::new(AtomicU64::new(0));
    let http = reqwest::Client::new();
    let metrics_before = scrape_all(&http, &watched.metrics_urls).await;
    let processes_before: Vec<f64> = watched.pids.iter().map(|&p| process_cpu(p)).collect();
    let cpu_before = cpu_time();
    let started = Instant::now();
    let mut tasks = Vec::new();
    for (sender, list) in txs.into_iter().enumerate() {
        let client = clients[sender % clients.len()].clone();
        let (accepted, rejected) = (accepted.clone(), rejected.clone());
        tasks.push(tokio::spawn(async move {
            let mut samples = Vec::new();
            for (n, tx) in list.into_iter().enumerate() {
                loop {
                    let sent = SystemTime::now();
                    match client.broadcast_tx_sync(tx.clone()).await {
                        Ok(r) if r.code.is_ok() => {
                            accepted.fetch_add(1, Ordering::Relaxed);
                            if n % 10 == 0 {
                                samples.push((r.hash, sent));
                            }
                            break;
                        }
                        // A full mempool (or a busy node) refuses for now: try again.
                        _ => {
                            rejected.fetch_add(1, Ordering::Relaxed);
                            tokio::time::sleep(Duration::from_millis(20)).await;
                        }
                    }
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
    progress.abort();
    let cpu_share = (cpu_time() - cpu_before) / started.elapsed().as_secs_f64();
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
        "  submitted {total} in {:.1} s; committed over {span:.1} s",
        submitted.as_secs_f64()
    );
    Figures {
        txs: total,
        committed_per_s: committed as f64 / span.max(1e-9),
        latency_p50: pick(0.5),
        latency_p99: pick(0.99),
        rejected: rejected.load(Ordering::Relaxed),
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

fn k256_verify_rate() -> f64 {
    use k256::ecdsa::signature::{Signer, Verifier};
    use k256::ecdsa::{Signature, SigningKey};
    let key = SigningKey::from_slice(&[7u8; 32]).unwrap();
    let message = [42u8; 200];
    let signature: Signature = key.sign(&message);
    let verifying = *key.verifying_key();
    let rounds = 5_000;
    let started = Instant::now();
    for _ in 0..rounds {
        verifying
            .verify(std::hint::black_box(&message), &signature)
            .unwrap();
    }
    rounds as f64 / started.elapsed().as_secs_f64()
}
