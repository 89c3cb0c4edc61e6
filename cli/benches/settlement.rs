//! Benchmark: work records settled on chain per second on a 4-validator localnet by committed
//! batches (`MsgSettleBatch` of x/settlement: a Merkle sum-tree root, requester and host totals
//! and one aggregate BLS signature of the hosts), records per batch as the parameter.
//!
//! Run: `cargo bench -p gonka-cli --bench settlement` (release `gonkad`, real `cometbft`
//! v0.38 from `PATH` or `~/go/bin`). `cargo test -p gonka-cli --bench settlement` runs a short
//! smoke version (a few records per size).
//!
//! The per-record path this replaced (`MsgSubmitWorkBatch`, two secp256k1 checks per record
//! in CheckTx and again in FinalizeBlock) was measured by this bench beside committed batches
//! in the same run until it was removed; its last figures are in the README's benchmark
//! section.
//!
//! # Setup
//! One localnet of 4 validators (`gonkad` + `cometbft` each, no sidecars) in a temporary
//! directory on free loopback ports, `timeout_commit` 1 s unless set. Genesis: the validators'
//! operators staked (as `gonkad localnet` does), one priced model, [`REQUESTERS`] funded
//! requester accounts each holding an escrow for the transfer agent, epochs too long to end
//! during the run. Leaf sampling is off (`leaf_sample_ppm` 0: nothing here answers the
//! chain's demands for sampled leaves; the sampling's own cost is a column of the in-process
//! `settle` bench) and `jail_after_misses` is out of reach.
//!
//! Validator 1's operator registers as the transfer agent and signs every batch; validators
//! 0, 2 and 3's operators register BLS keys and host the records round-robin (validator 0's
//! ML node key, a fresh secp256k1 key held by this process, signs every receipt; the chain
//! does not look at records on this path). For each size the bench signs the records, builds
//! each batch's tree and lines (`gonka_client::settlement::Batch`), has every host co-sign it
//! and signs the txs (consecutive sequences of the transfer agent) before the clock starts; a
//! batch passes when its `batch_settled` event commits all `b` records, and the last batches
//! are read back with `/settlement/batch`.
//!
//! # What is measured
//! The txs are broadcast to node 0 back to back with `broadcast_tx_sync` (or
//! `broadcast_tx_async`, see the settings); when CometBFT refuses one because its mempool is
//! full, the bench sleeps briefly and resends the same tx. Once all are accepted it reads the
//! blocks after the starting height until every tx is found and checks every result.
//!
//! Times come from block headers (CometBFT BFT time, the median of the validators' commit
//! votes). A block's header time is when the block before it was committed, so block `h` is
//! committed at the header time of block `h + 1`. With `first` and `last` the first and last
//! blocks holding the bench's txs, `chain s = time(last + 1) - time(first)`: the whole
//! lifetime of the blocks that carried the records, from the commit that opened the first one
//! to the commit of the last one.
//!
//! # Reading the table
//! - `records/s` = records / chain s: the settlement rate.
//! - `blocks` = last - first + 1; `records/block` = records / blocks; `block s` = chain s /
//!   blocks, the mean block interval under load (the idle interval is printed above the
//!   table): near the idle interval, blocks come at the configured pace and bigger batches
//!   settle more; well beyond it, executing and committing the blocks is the bound.
//! - `submit s`: wall time to get every tx accepted by node 0's mempool; `full` counts the
//!   mempool-full refusals that were retried.
//! - `p50 incl. s`: median over batch txs of the time from `CheckTx` acceptance (wall clock of
//!   this machine) to the commit of the block holding the tx (header time of the next block).
//!
//! Every process shares this machine's cores: 4 apps and 4 CometBFT nodes, so on a 2-core
//! machine the rate is a lower bound of what separate machines do.
//!
//! Settings (environment):
//! - `SETTLEMENT_BENCH_COMMITTED_SIZES`: records per `MsgSettleBatch`, comma-separated
//!   (default `100,1000,10000`).
//! - `SETTLEMENT_BENCH_COMMITTED_RECORDS`: records per size, one number or one per size
//!   (default: 20 batches per size, and at least 20,000 records).
//! - `SETTLEMENT_BENCH_TIMEOUT_COMMIT`: CometBFT `timeout_commit` (default `1s`).
//! - `SETTLEMENT_BENCH_BROADCAST`: `sync` (default) or `async`: `broadcast_tx_async` returns
//!   once CometBFT has queued the tx for `CheckTx` (in call order, so sequences stay in order),
//!   without its answer; a refused tx then shows only as one that no block carries.

mod common;

use common::{escrows, key, operator, stake_validators, start_localnet, GNK, VALIDATORS};
use gonka_proto::query as q;
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{anyhow, bail, ensure, Context, Result};
use gonka_app::genesis::{GenesisAccount, GenesisConfig};
use gonka_client::bls::{account_bls_key, msg_register_bls_key};
use gonka_client::settlement::{cosign, msg_settle_batch, Batch, Served};
use gonka_client::tx::{signed_work_record, RequestTerms, WorkRecordInput};
use gonka_client::{
    msg_register_node, msg_register_transfer_agent, node_key_proof, sign, Client, GasAdjustment,
    GasFee, Key, NodeSpec, SignerData,
};
use gonka_localnet::{AppStateFn, GenesisValidatorKey, Localnet, DEFAULT_TIMEOUT_COMMIT};
use gonka_proto::inference::{Model, WorkRecord};
use gonka_proto::settlement::{BatchStatus, QueryBatchRequest};
use tendermint::block::Height;
use tendermint_rpc::Client as _;

/// Chain id of the bench network.
const CHAIN_ID: &str = "gonka-bench";
/// The model every record names.
const MODEL: &str = "gonka/reference-1";
/// Its price per token in ngnk.
const PRICE: u128 = 3;
/// Commission every requester signs for the transfer agent, in ngnk.
const COMMISSION: u128 = 7;
/// Tokens every record claims.
const PROMPT_TOKENS: u64 = 10;
const COMPLETION_TOKENS: u64 = 20;
/// Funded requester accounts, used round-robin.
const REQUESTERS: usize = 20;
/// Genesis balance of every requester: far more than any run spends.
const REQUESTER_BALANCE: u128 = 1_000_000 * GNK;
/// The ML node every record is executed by.
const NODE_ID: &str = "bench-ml-0";
/// Blocks per epoch: no epoch ends during a run, so no epoch-end work lands in the measurement.
const EPOCH_LENGTH: u64 = 1_000_000;
/// Pause before resending a tx the mempool refused as full.
const MEMPOOL_BACKOFF: Duration = Duration::from_millis(50);
/// Longest wait for the next block holding bench txs before the run is declared stuck.
const STALL: Duration = Duration::from_secs(120);
/// Escrow every requester holds for the transfer agent from genesis.
const ESCROW: u128 = 100_000 * GNK;
/// Validators whose operators host committed records (validator 1 is the transfer agent).
const HOSTS: [usize; 3] = [0, 2, 3];
/// Gas limit of a `MsgSettleBatch`: its lines, one escrow per requester, one BLS check.
const SETTLE_GAS: u64 = 3_000_000;
/// Committed batches per size by default...
const COMMITTED_BATCHES: usize = 20;
/// ...and at least this many records, so small batches span several blocks.
const COMMITTED_RECORDS: usize = 20_000;

/// What one run does, from the environment.
struct Settings {
    /// CometBFT `timeout_commit`.
    timeout_commit: String,
    /// How batch txs are broadcast.
    broadcast: Broadcast,
    /// Records per committed batch, one row each.
    committed_sizes: Vec<usize>,
    /// Records per committed size (a multiple of it).
    committed_records: Vec<usize>,
}

impl Settings {
    fn from_env() -> Result<Settings> {
        // `cargo bench` passes `--bench`; `cargo test --bench settlement` does not.
        let smoke = !std::env::args().any(|a| a == "--bench");
        let list = |name: &str, default: &str| -> Result<Vec<usize>> {
            let text = std::env::var(name).unwrap_or_else(|_| default.to_string());
            if text.trim().is_empty() {
                return Ok(Vec::new());
            }
            text.split(',')
                .map(|v| {
                    v.trim()
                        .parse::<usize>()
                        .ok()
                        .filter(|n| *n > 0)
                        .ok_or_else(|| {
                            anyhow!("{name} must hold positive integers, comma-separated, but holds {v:?}")
                        })
                })
                .collect()
        };
        let broadcast = match std::env::var("SETTLEMENT_BENCH_BROADCAST").as_deref() {
            Err(_) | Ok("sync") => Broadcast::Sync,
            Ok("async") => Broadcast::Async,
            Ok(other) => bail!("SETTLEMENT_BENCH_BROADCAST must be sync or async, found {other:?}"),
        };
        let committed_sizes = list(
            "SETTLEMENT_BENCH_COMMITTED_SIZES",
            if smoke { "10" } else { "100,1000,10000" },
        )?;
        let per_size = list("SETTLEMENT_BENCH_COMMITTED_RECORDS", "")?;
        let committed_records = committed_sizes
            .iter()
            .enumerate()
            .map(|(i, &b)| {
                let wanted = match per_size.len() {
                    0 if smoke => 2 * b,
                    0 => (b * COMMITTED_BATCHES).max(COMMITTED_RECORDS),
                    1 => per_size[0],
                    _ => *per_size.get(i).ok_or_else(|| {
                        anyhow!("SETTLEMENT_BENCH_COMMITTED_RECORDS needs one count, or one per committed size")
                    })?,
                };
                Ok(wanted.div_ceil(b) * b)
            })
            .collect::<Result<Vec<_>>>()?;
        let timeout_commit = std::env::var("SETTLEMENT_BENCH_TIMEOUT_COMMIT")
            .unwrap_or_else(|_| DEFAULT_TIMEOUT_COMMIT.to_string());
        Ok(Settings {
            timeout_commit,
            broadcast,
            committed_sizes,
            committed_records,
        })
    }
}

/// Genesis `app_state`: the validators staked, the requesters funded with escrows for the
/// transfer agent, one model priced, long epochs, no jailing for missed validations.
fn genesis(keys: &[GenesisValidatorKey], requesters: &[String]) -> Result<serde_json::Value> {
    let transfer_agent = operator(1)?.address().to_string();
    let mut config = GenesisConfig {
        accounts: requesters
            .iter()
            .map(|address| GenesisAccount {
                address: address.clone(),
                ngnk: REQUESTER_BALANCE,
            })
            .collect(),
        min_gas_price: None,
        epoch_length: Some(EPOCH_LENGTH),
        models: vec![Model {
            id: MODEL.into(),
            price_per_token: PRICE.to_string(),
            ..Model::default()
        }],
        ..Default::default()
    };
    stake_validators(&mut config, keys)?;
    // Every requester's escrow for the transfer agent, its money in the settlement pool.
    config.escrows = escrows(requesters, &transfer_agent, ESCROW, 10 * EPOCH_LENGTH);
    let mut state = config.app_state();
    // No leaf sampling: this bench's transfer agent does not answer the chain's demands for
    // sampled leaves, and voided batches would slash it in the middle of the run. The cost of
    // sampling is measured in process (`cargo bench -p gonka-app --bench settle`, `sample`).
    state[gonka_settlement::NAME]["params"]["leaf_sample_ppm"] = 0.into();
    // GenesisConfig leaves the disputes parameters at their defaults.
    let disputes = gonka_proto::disputes::Params {
        jail_after_misses: u64::MAX,
        ..gonka_disputes::default_params()
    };
    state[gonka_disputes::NAME] = serde_json::json!({ "params": disputes });
    Ok(state)
}

/// Creates and starts the localnet in `dir` (no sidecars).
fn start_bench_localnet(
    settings: &Settings,
    dir: &Path,
    requesters: &[String],
) -> Result<Localnet> {
    let requesters = requesters.to_vec();
    let app_state = AppStateFn(Arc::new(move |keys: &[GenesisValidatorKey]| {
        // The localnet cannot take an error from here; a bench genesis that fails to build is a
        // bug of this file.
        genesis(keys, &requesters).expect("building the bench genesis")
    }));
    // Away from the end-to-end tests' 27000..31000 and CometBFT's defaults.
    let first = 32_000 + (std::process::id() % 100) as u16 * 40;
    start_localnet(dir, first, |config| {
        config.chain_id = CHAIN_ID.to_string();
        config.timeout_commit = settings.timeout_commit.clone();
        config.app_state_for_validators = Some(app_state.clone());
        config.sidecar = None;
    })
}

/// One row of the table.
struct Row {
    batch: usize,
    records: usize,
    txs: usize,
    blocks: u64,
    chain_secs: f64,
    submit_secs: f64,
    mempool_full: usize,
    p50_inclusion_secs: f64,
}

/// Unix time in nanoseconds, comparable with block header times.
fn unix_nanos_now() -> i128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i128)
}

/// Header time of block `height`, in Unix nanoseconds, with the block's txs.
async fn block(client: &Client, height: u64) -> Result<(i128, Vec<Vec<u8>>)> {
    let response = client
        .http()
        .block(Height::try_from(height)?)
        .await
        .with_context(|| format!("block {height} from {}", client.url()))?;
    Ok((
        response.block.header.time.unix_timestamp_nanos(),
        response.block.data,
    ))
}

/// Height of the newest block in node `client`'s block store. CometBFT stores a block before
/// the app executes it, so only the blocks below it surely have results.
///
/// Retried once: after a long pause (signing many records) the first call may meet a
/// keep-alive connection the node has just closed.
async fn latest_height(client: &Client) -> Result<u64> {
    let status = match client.status().await {
        Ok(status) => status,
        Err(_) => client.status().await?,
    };
    Ok(status.sync_info.latest_block_height.value())
}

/// Waits until block `height` exists and returns its header time.
async fn wait_block_time(client: &Client, height: u64) -> Result<i128> {
    let deadline = Instant::now() + STALL;
    while latest_height(client).await? < height {
        ensure!(
            Instant::now() < deadline,
            "block {height} did not appear within {STALL:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(block(client, height).await?.0)
}

/// Signs and broadcasts one tx of `key` and waits for it to succeed.
async fn submit_one(client: &Client, key: &Key, msg: gonka_client::Any, what: &str) -> Result<()> {
    let signer = client
        .signer_data(key.address(), Some(CHAIN_ID))
        .await
        .with_context(|| format!("signer data of {}", key.address()))?;
    let price = client.min_gas_price().await?;
    let (tx, _) = client
        .sign_with_estimated_gas(key, vec![msg], &signer, "", GasAdjustment::DEFAULT, &price)
        .await
        .with_context(|| format!("estimating the gas of {what}"))?;
    let included = client
        .broadcast_and_wait(tx, Duration::from_secs(60))
        .await
        .with_context(|| what.to_string())?;
    ensure!(
        included.code == 0,
        "{what} failed at height {} ({} {}): {}",
        included.height,
        included.codespace,
        included.code,
        included.log
    );
    Ok(())
}

/// The bench's actors: requesters, the executor key, the host and the transfer agent.
struct Actors {
    requesters: Vec<Key>,
    executor: k256::ecdsa::SigningKey,
    host: Key,
    transfer_agent: Key,
    /// Hosts of committed records, with their BLS keys.
    hosts: Vec<(Key, gonka_bls_crypto::SecretKey)>,
}

/// `count` work records for batch size `b`, requesters round-robin, nonces unique in the run
/// (`tag` tells the paths apart), hosted by `host(i)`.
fn sign_records(
    actors: &Actors,
    tag: &str,
    b: usize,
    count: usize,
    host: impl Fn(usize) -> String,
) -> Result<Vec<WorkRecord>> {
    let timestamp = SystemTime::now().duration_since(UNIX_EPOCH)?.as_secs();
    (0..count)
        .map(|i| {
            // Distinct per record; the chain only checks the lengths.
            let mut body_hash = [0x50; 32];
            body_hash[..8].copy_from_slice(&(i as u64).to_be_bytes());
            let mut response_hash = [0x52; 32];
            response_hash[..8].copy_from_slice(&(i as u64).to_be_bytes());
            let mut salt = [0x53; 32];
            salt[..8].copy_from_slice(&(i as u64).to_be_bytes());
            let input = WorkRecordInput {
                terms: RequestTerms {
                    chain_id: CHAIN_ID.into(),
                    body_hash,
                    timestamp,
                    nonce: format!("bench-{tag}{b}-{i}"),
                    commission: COMMISSION,
                    transfer_agent: actors.transfer_agent.address().to_string(),
                    model: MODEL.into(),
                    max_price_per_token: PRICE,
                    max_completion_tokens: COMPLETION_TOKENS,
                    max_prompt_tokens: 1 << 20,
                },
                response_hash,
                salt,
                scored: None,
                prompt_tokens: PROMPT_TOKENS,
                completion_tokens: COMPLETION_TOKENS,
                executor_node: NODE_ID.into(),
                host: host(i),
            };
            signed_work_record(
                &actors.requesters[i % actors.requesters.len()],
                &actors.executor,
                &input,
            )
        })
        .collect()
}

/// How batch txs reach node 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Broadcast {
    /// `broadcast_tx_sync`: each call returns `CheckTx`'s answer, so a refusal is reported at
    /// once, but the next tx leaves only after it.
    Sync,
    /// `broadcast_tx_async`: each call returns once CometBFT has queued the tx for `CheckTx`
    /// (in call order), so several txs are checked per round trip to the app; a `CheckTx`
    /// refusal shows only as a tx that is never included.
    Async,
}

/// Broadcasts `tx` until node 0's mempool takes it. Returns the acceptance time (Unix
/// nanoseconds) and the number of mempool-full refusals.
async fn broadcast(
    client: &Client,
    mode: Broadcast,
    tx: &[u8],
    index: usize,
) -> Result<(i128, usize)> {
    let mut full = 0;
    let mut errors = 0;
    loop {
        // (code, codespace, log) of CheckTx; always success for async, which does not wait.
        let sent = match mode {
            Broadcast::Sync => client
                .http()
                .broadcast_tx_sync(tx.to_vec())
                .await
                .map(|r| (r.code, r.codespace, r.log)),
            Broadcast::Async => client
                .http()
                .broadcast_tx_async(tx.to_vec())
                .await
                .map(|r| (r.code, r.codespace, r.log)),
        };
        match sent {
            Ok((code, _, _)) if code.is_ok() => return Ok((unix_nanos_now(), full)),
            Ok((code, codespace, log)) => bail!(
                "batch tx {index} refused by CheckTx ({codespace} {}): {log}",
                code.value()
            ),
            Err(e) => {
                let message = e.to_string();
                if message.contains("mempool is full") {
                    full += 1;
                } else if message.contains("already exists in cache") {
                    // An earlier attempt got in although its answer was lost.
                    return Ok((unix_nanos_now(), full));
                } else {
                    errors += 1;
                    ensure!(
                        errors < 5,
                        "broadcasting batch tx {index} to {}: {message}",
                        client.url()
                    );
                }
                tokio::time::sleep(MEMPOOL_BACKOFF).await;
            }
        }
    }
}

/// Settles `count` records in `MsgSettleBatch`es of `b` (numbered from `*number + 1`) and
/// measures it.
async fn run_committed(
    net: &[Client],
    actors: &Actors,
    mode: Broadcast,
    b: usize,
    count: usize,
    number: &mut u64,
) -> Result<Row> {
    // Chain state first: signing many records takes long enough for an idle RPC connection
    // to be closed under the client.
    let ta = actors.transfer_agent.address();
    let signer = net[0].signer_data(ta, Some(CHAIN_ID)).await?;
    let price = net[0].min_gas_price().await?;
    let clock = Instant::now();
    let hosts: Vec<String> = actors
        .hosts
        .iter()
        .map(|(k, _)| k.address().to_string())
        .collect();
    let records = sign_records(actors, "c", b, count, |i| hosts[i % hosts.len()].clone())?;
    let signed_secs = clock.elapsed().as_secs_f64();
    let clock = Instant::now();
    let mut txs = Vec::with_capacity(count / b);
    for (k, chunk) in records.chunks(b).enumerate() {
        let served = chunk
            .iter()
            .enumerate()
            .map(|(j, record)| Served {
                // As sign_records assigned it.
                host: hosts[(k * b + j) % hosts.len()].clone(),
                cost: u128::from(record.prompt_tokens + record.completion_tokens) * PRICE,
                work_per_token: 0,
                record: record.clone(),
            })
            .collect();
        *number += 1;
        let batch = Batch::build(ta, *number, served)?;
        let signatures: Vec<_> = actors
            .hosts
            .iter()
            .map(|(_, bls)| cosign(bls, CHAIN_ID, &batch.msg))
            .collect();
        let sequence = SignerData {
            sequence: signer.sequence + k as u64,
            ..signer.clone()
        };
        txs.push(sign(
            &actors.transfer_agent,
            vec![msg_settle_batch(&batch.signed(&signatures))],
            &sequence,
            GasFee::at_price(SETTLE_GAS, &price)?,
            "",
        )?);
    }
    let largest = txs.iter().map(Vec::len).max().unwrap_or(0);
    println!(
        "committed {b}: signed {count} records in {signed_secs:.1} s; built, co-signed and signed {} txs (largest {largest} bytes) in {:.1} s",
        txs.len(),
        clock.elapsed().as_secs_f64()
    );
    measure(net, mode, b, count, txs, ta).await
}

/// Broadcasts `txs` back to back, finds them in the blocks, checks their results and
/// measures the chain time they took.
async fn measure(
    net: &[Client],
    mode: Broadcast,
    b: usize,
    count: usize,
    txs: Vec<Vec<u8>>,
    ta: &str,
) -> Result<Row> {
    // Submit back to back.
    let start_height = latest_height(&net[0]).await?;
    let clock = Instant::now();
    let mut accepted = Vec::with_capacity(txs.len());
    let mut mempool_full = 0;
    for (index, tx) in txs.iter().enumerate() {
        let (at, full) = broadcast(&net[0], mode, tx, index).await?;
        accepted.push(at);
        mempool_full += full;
    }
    let submit_secs = clock.elapsed().as_secs_f64();

    // Find every tx in the blocks after `start_height`.
    let mut pending: HashMap<&[u8], usize> = txs
        .iter()
        .enumerate()
        .map(|(i, tx)| (tx.as_slice(), i))
        .collect();
    let mut included_at = vec![0u64; txs.len()];
    let mut block_times = HashMap::new();
    let (mut first, mut last) = (u64::MAX, 0);
    let mut height = start_height + 1;
    let mut deadline = Instant::now() + STALL;
    // Blocks in a row without any of the pending txs, since the first that had some.
    let mut without_ours = 0;
    while !pending.is_empty() {
        // Block `height + 1` stored: block `height` is executed and its results exist.
        if latest_height(&net[0]).await? <= height {
            ensure!(
                Instant::now() < deadline,
                "{} of {} batch txs still not included {STALL:?} after block {}",
                pending.len(),
                txs.len(),
                height - 1
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        }
        let (time, block_txs) = block(&net[0], height).await?;
        block_times.insert(height, time);
        let mut ours = false;
        for tx in &block_txs {
            if let Some(i) = pending.remove(tx.as_slice()) {
                included_at[i] = height;
                ours = true;
            }
        }
        if ours {
            first = first.min(height);
            last = height;
            check_results(&net[0], height, &block_txs, b).await?;
            deadline = Instant::now() + STALL;
            without_ours = 0;
        } else if first != u64::MAX {
            without_ours += 1;
        }
        // Every node's mempool gets every tx within milliseconds, so blocks keep carrying
        // them until none is left: three in a row without any means they were dropped.
        if without_ours >= 3 && mode == Broadcast::Async {
            bail!(
                "{} of {} batch txs were dropped: blocks {}..={height} carry none of them, so \
                 CheckTx refused them (broadcast_tx_async does not report refusals; node 0's \
                 app log names them)",
                pending.len(),
                txs.len(),
                height + 1 - without_ours
            );
        }
        height += 1;
    }
    // Block `h` is committed at the header time of block `h + 1`.
    let end = wait_block_time(&net[0], last + 1).await?;
    block_times.insert(last + 1, end);
    let chain_secs = (end - block_times[&first]) as f64 / 1e9;

    let mut latencies: Vec<f64> = included_at
        .iter()
        .zip(&accepted)
        .map(|(h, at)| (block_times[&(h + 1)] - at) as f64 / 1e9)
        .collect();
    latencies.sort_by(f64::total_cmp);
    let p50_inclusion_secs = latencies[(latencies.len() - 1) / 2];

    spot_check_batches(&net[1], txs.len(), b, ta).await?;
    Ok(Row {
        batch: b,
        records: count,
        txs: txs.len(),
        blocks: last - first + 1,
        chain_secs,
        submit_secs,
        mempool_full,
        p50_inclusion_secs,
    })
}

/// Checks that every tx of block `height` that is one of ours (all of them: nothing else sends
/// txs) succeeded and that its `batch_settled` event commits all `b` records.
async fn check_results(
    client: &Client,
    height: u64,
    block_txs: &[Vec<u8>],
    b: usize,
) -> Result<()> {
    let results = client
        .http()
        .block_results(Height::try_from(height)?)
        .await
        .with_context(|| format!("block_results {height} from {}", client.url()))?
        .txs_results
        .unwrap_or_default();
    ensure!(
        results.len() == block_txs.len(),
        "block {height} holds {} txs but {} results",
        block_txs.len(),
        results.len()
    );
    for (i, result) in results.iter().enumerate() {
        ensure!(
            result.code.is_ok(),
            "tx {i} of block {height} failed ({} {}): {}",
            result.codespace,
            result.code.value(),
            result.log
        );
        let records = result
            .events
            .iter()
            .filter(|e| e.kind == "batch_settled")
            .flat_map(|e| &e.attributes)
            .find(|a| a.key_str().is_ok_and(|k| k == "records"))
            .and_then(|a| a.value_str().ok().map(str::to_string));
        ensure!(
            records.as_deref() == Some(b.to_string().as_str()),
            "tx {i} of block {height}: expected a batch_settled event with records={b}, found {records:?}"
        );
    }
    Ok(())
}

/// Reads the last `batches` batches back with `/settlement/batch` (ids are sequential: the
/// bench is the only one settling) and checks each commits `b` records of `ta`, pending.
async fn spot_check_batches(client: &Client, batches: usize, b: usize, ta: &str) -> Result<()> {
    let mut id = 1;
    // The newest id: walk up from 1 until a query fails (a few dozen at most).
    while client
        .query::<q::settlement::Batch>(&QueryBatchRequest {
            id: id + 1,
            ..Default::default()
        })
        .await
        .is_ok()
    {
        id += 1;
    }
    for id in (id + 1).saturating_sub(batches as u64).max(1)..=id {
        let batch = client
            .query::<q::settlement::Batch>(&QueryBatchRequest {
                id,
                ..Default::default()
            })
            .await?
            .batch
            .ok_or_else(|| anyhow!("batch {id} is not on chain"))?;
        let settled = batch.settled.unwrap_or_default();
        ensure!(
            settled.record_count == b as u64
                && settled.transfer_agent == ta
                && batch.status == BatchStatus::Pending as i32,
            "batch {id}: {} records of {} with status {}, expected {b} of {ta}, pending",
            settled.record_count,
            settled.transfer_agent,
            batch.status
        );
    }
    Ok(())
}

/// Registers the ML node, the transfer agent and the hosts' BLS keys, measures the idle
/// block interval, then runs every batch size.
async fn run(net: &Localnet, settings: &Settings, actors: &Actors) -> Result<(f64, Vec<Row>)> {
    let clients = net
        .nodes()
        .iter()
        .map(|n| Client::new(&n.rpc_url))
        .collect::<Result<Vec<_>>>()?;
    // Queries need a committed block.
    wait_block_time(&clients[0], 2).await?;

    let node = NodeSpec {
        node_id: NODE_ID.into(),
        models: vec![MODEL.into()],
        vram_mib: 80_000,
        bandwidth_mbps: 10_000,
        max_concurrency: 64,
        endpoint: "http://127.0.0.1:9/v1".into(),
        pubkey: actors
            .executor
            .verifying_key()
            .to_encoded_point(true)
            .as_bytes()
            .to_vec(),
        key_proof: node_key_proof(&actors.executor, CHAIN_ID, actors.host.address(), NODE_ID),
    };
    let ta = &actors.transfer_agent;
    tokio::try_join!(
        submit_one(
            &clients[0],
            &actors.host,
            msg_register_node(actors.host.address(), &node),
            "registering the ML node",
        ),
        submit_one(
            &clients[0],
            ta,
            msg_register_transfer_agent(
                ta.address(),
                "http://127.0.0.1:9",
                &ta.public_key().to_bytes(),
            ),
            "registering the transfer agent",
        ),
    )?;
    for (host, bls) in &actors.hosts {
        submit_one(
            &clients[0],
            host,
            msg_register_bls_key(host.address(), CHAIN_ID, bls),
            "registering a host's BLS key",
        )
        .await?;
    }

    // The idle block interval, over blocks holding no txs.
    const IDLE_BLOCKS: u64 = 5;
    let from = latest_height(&clients[0]).await? + 1;
    let start = wait_block_time(&clients[0], from).await?;
    let end = wait_block_time(&clients[0], from + IDLE_BLOCKS).await?;
    let idle_interval = (end - start) as f64 / 1e9 / IDLE_BLOCKS as f64;

    let mut rows = Vec::new();
    let mut number = 0;
    for (&b, &count) in settings
        .committed_sizes
        .iter()
        .zip(&settings.committed_records)
    {
        let row = run_committed(&clients, actors, settings.broadcast, b, count, &mut number)
            .await
            .with_context(|| format!("committed batch size {b}"))?;
        println!(
            "committed {b}: {} records settled in {} blocks, {:.1} s of chain time ({:.1} records/s)",
            row.records,
            row.blocks,
            row.chain_secs,
            row.records as f64 / row.chain_secs
        );
        rows.push(row);
    }
    Ok((idle_interval, rows))
}

fn print_table(settings: &Settings, idle_interval: f64, rows: &[Row]) {
    println!();
    println!(
        "{VALIDATORS} validators, timeout_commit {}, idle block interval {idle_interval:.2} s, \
         broadcast_tx_{}",
        settings.timeout_commit,
        match settings.broadcast {
            Broadcast::Sync => "sync",
            Broadcast::Async => "async",
        }
    );
    println!(
        "{:>6} {:>8} {:>7} {:>7} {:>8} {:>10} {:>14} {:>8} {:>12} {:>9} {:>6}",
        "batch",
        "records",
        "txs",
        "blocks",
        "chain s",
        "records/s",
        "records/block",
        "block s",
        "p50 incl. s",
        "submit s",
        "full"
    );
    for r in rows {
        println!(
            "{:>6} {:>8} {:>7} {:>7} {:>8.1} {:>10.1} {:>14.1} {:>8.2} {:>12.2} {:>9.1} {:>6}",
            r.batch,
            r.records,
            r.txs,
            r.blocks,
            r.chain_secs,
            r.records as f64 / r.chain_secs,
            r.records as f64 / r.blocks as f64,
            r.chain_secs / r.blocks as f64,
            r.p50_inclusion_secs,
            r.submit_secs,
            r.mempool_full
        );
    }
}

fn main() -> Result<()> {
    common::init_logs();
    let settings = Settings::from_env()?;
    let actors = Actors {
        requesters: (0..REQUESTERS)
            .map(|i| key(&format!("bench-requester-{i}")))
            .collect::<Result<_>>()?,
        executor: k256::ecdsa::SigningKey::random(&mut k256::elliptic_curve::rand_core::OsRng),
        host: operator(0)?,
        transfer_agent: operator(1)?,
        hosts: HOSTS
            .iter()
            .map(|&i| {
                let key = operator(i)?;
                let bls = account_bls_key(&key);
                Ok((key, bls))
            })
            .collect::<Result<_>>()?,
    };
    let requesters: Vec<String> = actors
        .requesters
        .iter()
        .map(|k| k.address().to_string())
        .collect();

    let dir = tempfile::Builder::new()
        .prefix("gonka-settlement-bench-")
        .tempdir()?;
    let mut net = start_bench_localnet(&settings, dir.path(), &requesters)?;
    let stopper = net.stopper();
    // Ctrl-C stops the network; the RPC calls in flight then fail and main returns.
    ctrlc::set_handler(move || {
        let _ = stopper.stop();
    })?;
    println!(
        "localnet of {VALIDATORS} validators up in {} (node 0 RPC {})",
        net.dir().display(),
        net.nodes()[0].rpc_url
    );

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let result = runtime.block_on(run(&net, &settings, &actors));
    let stopped = net.stop();
    match result {
        Ok((idle_interval, rows)) => {
            print_table(&settings, idle_interval, &rows);
            stopped
        }
        Err(e) => {
            let kept = dir.keep();
            eprintln!("the localnet's logs are kept in {}", kept.display());
            Err(e)
        }
    }
}
