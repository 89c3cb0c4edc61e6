//! Faults under load: while signed sends and chat requests flow, a seeded fault injector picks
//! a random validator every few seconds and SIGKILLs its app or its CometBFT node, pauses it
//! (SIGSTOP, then SIGCONT), restarts it (SIGTERM), or SIGKILLs one of its sidecars (an ML node
//! or a transfer agent), brings it back and waits until it has caught up, so at most one
//! validator is down at a time. At the end:
//!
//! - no gap between commits is longer than 3× the median interval (the localnet's
//!   `timeout_propose` is short, so a height whose proposer is down costs one short round),
//!   unless consensus decided it in its first round and it stays within 10× the median: then
//!   no fault cost a round, every node was slow at once (a loaded machine), and the gap is
//!   printed but not counted;
//! - every send CheckTx accepted is committed exactly once: each sender's sequence on chain
//!   equals the sends it saw committed, and the sink holds exactly their amounts; a send lost
//!   with a killed node's mempool keeps its sequence unused and is resubmitted (both counts are
//!   printed);
//! - every node stores the same block, with the same app hash, at every height;
//! - the supply equals the sum of all balances on every node, and the staking pools equal the
//!   bonds (opened from each node's database once the network is stopped);
//! - no served inference is lost or settled twice: each transfer agent's committed batches
//!   hold every answer it served and at most the requests whose outcome the client could not
//!   know (a TA killed mid-answer), and the escrow it draws from is charged accordingly.
//!
//! `GONKA_FAULT_SECONDS` (default 45) sets how long faults are injected, `GONKA_FAULT_SEED` the
//! seed (printed either way, so a failing run can be replayed).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use gonka_app::genesis::GenesisAccount;
use gonka_bank::BankRead;
use gonka_client::chat::{ChatClient, ChatError, ChatRequest, Message};
use gonka_client::keys::well_known_mnemonic;
use gonka_client::{msg_send, sign, Client, Key, SignerData};
use gonka_localnet::{AppStateFn, Role};
use gonka_proto::query as q;
use gonka_proto::settlement::{BatchStatus, QueryBatchNumberRequest, QueryBatchRequest};
use tendermint_rpc::Client as _;

use crate::inference::{
    alice_escrow, alice_escrow_balance, genesis_config, register_bls_keys, sidecars,
    wait_for_registry, COMMISSION, MODEL, PRICE,
};
use crate::support::{
    addr, http_get_bytes, key, scrape, tx_fee, Net, CHAIN_ID, START_BALANCE, VALIDATORS,
};

/// Accounts sending signed transfers, one send in flight each.
pub(crate) const SENDERS: usize = 12;
/// ngnk per send.
const SEND_AMOUNT: u128 = 1_000;
/// How long a sender waits for its accepted send before asking the chain for its sequence.
const COMMIT_WAIT: Duration = Duration::from_secs(12);
/// Blocks a settlement batch stays open to challenges.
const WINDOW: u64 = 8;
/// Bound on the wait for a restarted node to catch up.
const CATCH_UP: Duration = Duration::from_secs(90);

pub(crate) fn sender_label(i: usize) -> String {
    format!("fault-sender-{i}")
}

/// A small deterministic generator (SplitMix64), so a seed replays the same faults.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// One fault the injector applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Fault {
    KillApp,
    KillCometbft,
    Pause,
    Restart,
    KillMlNode,
    KillTransferAgent,
}

/// What the senders saw.
#[derive(Default)]
pub(crate) struct SendCounts {
    pub(crate) accepted: AtomicU64,
    pub(crate) committed: AtomicU64,
    pub(crate) resubmitted: AtomicU64,
    pub(crate) refused: AtomicU64,
}

/// What the chat client saw through one transfer agent.
#[derive(Default, Debug, Clone)]
struct ChatCounts {
    served: u64,
    charged: u128,
    largest_charge: u128,
    /// Requests whose outcome the client cannot know: the answer broke off or every attempt
    /// failed after the request may have reached the TA.
    unknown: u64,
    refused: u64,
}

#[test]
fn faults_under_load_lose_nothing_and_settle_nothing_twice() {
    let seconds: u64 = std::env::var("GONKA_FAULT_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(45);
    let seed: u64 = std::env::var("GONKA_FAULT_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        });
    eprintln!(
        "fault injector: seed {seed} (GONKA_FAULT_SEED={seed} replays it), {seconds} s of faults"
    );
    crate::support::run(async move {
        let mut net = Net::start_with("faults", VALIDATORS, |config| {
            config.app_state_for_validators = Some(AppStateFn(Arc::new(|keys| {
                let mut genesis = genesis_config(keys, 100_000);
                genesis
                    .accounts
                    .extend((0..SENDERS).map(|i| GenesisAccount {
                        address: addr(&sender_label(i)),
                        ngnk: START_BALANCE,
                    }));
                genesis.escrows = (0..2).map(alice_escrow).collect();
                genesis.settlement_params = Some(gonka_proto::settlement::Params {
                    challenge_window_blocks: WINDOW,
                    leaf_answer_blocks: 4,
                    leaf_sample_ppm: 0,
                    ..gonka_settlement::default_params()
                });
                genesis.app_state()
            })));
            // A height whose proposer is down costs one short round, not CometBFT's 3 s wait
            // for the proposal and 1 s for split votes: about 1.9 s here against a median
            // interval of about 0.8 s.
            config.timeout_commit = "500ms".into();
            config.timeout_propose = "400ms".into();
            config.timeout_vote = "200ms".into();
            let mut sidecars = sidecars();
            let batching = ["--batch-max-records", "4", "--batch-interval-ms", "2000"];
            sidecars.transfer_agent_args = vec![batching.map(Into::into).to_vec(); 2];
            config.sidecar = Some(sidecars);
        })
        .await;
        wait_for_registry(&net).await;
        register_bls_keys(&net).await;
        let sink = addr("fault-sink");
        let tas: Vec<String> = (0..2).map(|i| addr(&format!("validator{i}"))).collect();
        let escrow_before = [
            alice_escrow_balance(&net, &tas[0]).await,
            alice_escrow_balance(&net, &tas[1]).await,
        ];
        let mut signers = Vec::new();
        for i in 0..SENDERS {
            signers.push(net.signer(0, &sender_label(i)).await);
        }
        let start_height = net.height(0).await;

        let stop = Arc::new(AtomicBool::new(false));
        let sends = Arc::new(SendCounts::default());
        let clients: Arc<Vec<Client>> = Arc::new(net.clients.clone());
        let mut senders = Vec::new();
        for (i, signer) in signers.into_iter().enumerate() {
            senders.push(tokio::spawn(send_loop(
                i,
                signer,
                sink.clone(),
                clients.clone(),
                sends.clone(),
                stop.clone(),
            )));
        }
        let chat = tokio::spawn(chat_loop(net.net.transfer_agent_urls(), stop.clone()));

        // The injector: one validator touched at a time, caught up before the next fault.
        let mut rng = Rng(seed);
        let mut injected: BTreeMap<Fault, u64> = BTreeMap::new();
        let until = Instant::now() + Duration::from_secs(seconds);
        while Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(1_500 + rng.below(2_000))).await;
            let node = rng.below(VALIDATORS as u64) as usize;
            let fault = match rng.below(6) {
                0 => Fault::KillApp,
                1 => Fault::KillCometbft,
                2 => Fault::Pause,
                3 => Fault::Restart,
                4 => Fault::KillMlNode,
                _ if node < 2 => Fault::KillTransferAgent,
                _ => Fault::KillMlNode,
            };
            eprintln!(
                "fault injector: {fault:?} on node {node} at height {}",
                net.height((node + 1) % VALIDATORS).await
            );
            inject(&mut net, node, fault, &mut rng).await;
            *injected.entry(fault).or_default() += 1;
            catch_up(&net, node).await;
            // During the run too: every node holds the same block at the lowest height.
            let mut lowest = u64::MAX;
            for i in 0..VALIDATORS {
                lowest = lowest.min(net.height(i).await);
            }
            net.assert_same_block(&(0..VALIDATORS).collect::<Vec<_>>(), lowest)
                .await;
        }
        stop.store(true, Ordering::SeqCst);
        for s in senders {
            s.await.unwrap();
        }
        let chats = chat.await.unwrap();

        // Every node at the same height, with the same blocks all the way.
        let end_height = net.height(0).await + 2;
        net.wait_all_heights(end_height, CATCH_UP).await;
        let nodes: Vec<usize> = (0..VALIDATORS).collect();
        for height in 2..=end_height {
            net.assert_same_block(&nodes, height).await;
        }
        let (longest, median_gap) = gaps(&net.clients[0], start_height, end_height).await;
        let max_gap = longest[0].0;
        // The round each gap past 3× the median ended in (from its block's commit), and the
        // three longest for the report.
        let mut worst = Vec::new();
        let mut long_gaps = Vec::new();
        for (rank, &(gap, height)) in longest.iter().enumerate() {
            if rank >= 3 && gap <= median_gap * 3 {
                break;
            }
            let commit = net.clients[0]
                .http()
                .commit(tendermint::block::Height::try_from(height).unwrap())
                .await
                .unwrap();
            let round = commit.signed_header.commit.round.value();
            if rank < 3 {
                worst.push(format!("{gap:?} before height {height} (round {round})"));
            }
            if gap > median_gap * 3 {
                long_gaps.push((gap, height, round));
            }
        }

        // Sends: committed exactly once.
        let mut on_chain_sequences = 0;
        for i in 0..SENDERS {
            let signer = net.signer(0, &sender_label(i)).await;
            on_chain_sequences += signer.sequence;
        }
        let committed = sends.committed.load(Ordering::SeqCst);
        let accepted = sends.accepted.load(Ordering::SeqCst);
        let resubmitted = sends.resubmitted.load(Ordering::SeqCst);
        assert_eq!(
            on_chain_sequences, committed,
            "the senders' sequences on chain count exactly the sends they saw committed"
        );
        assert_eq!(
            net.balance(0, &sink).await,
            u128::from(committed) * SEND_AMOUNT,
            "the sink holds exactly the committed sends"
        );
        assert!(committed > 0, "no send was committed under faults");

        // Inference: every served answer settled once, and nothing beyond the unknown ones.
        let settled = settled_records(&net, &tas).await;
        let batched: Vec<u64> = tas
            .iter()
            .map(|ta| settled.get(ta).copied().unwrap_or(0))
            .collect();
        let escrow_after = [
            alice_escrow_balance(&net, &tas[0]).await,
            alice_escrow_balance(&net, &tas[1]).await,
        ];
        for t in 0..2 {
            let c = &chats[t];
            let drawn = escrow_before[t] - escrow_after[t];
            assert!(
                batched[t] >= c.served && batched[t] <= c.served + c.unknown,
                "TA {t}: {} records in final batches, {} answers served and {} unknown",
                batched[t],
                c.served,
                c.unknown
            );
            assert!(
                drawn >= c.charged && drawn <= c.charged + u128::from(c.unknown) * c.largest_charge,
                "TA {t}: the escrow was drawn {drawn} ngnk for answers charging {} ({} unknown)",
                c.charged,
                c.unknown
            );
        }
        assert!(
            chats.iter().map(|c| c.served).sum::<u64>() > 0,
            "no chat request was served under faults"
        );

        // The supply and the staking pools, from each node's own database.
        tokio::task::block_in_place(|| net.net.stop()).unwrap();
        let mut supplies = Vec::new();
        for i in 0..VALIDATORS {
            let path = net
                .node(i)
                .app_home
                .join("data")
                .join(gonka_app::STATE_FILE);
            let app = gonka_app::App::open(&path)
                .unwrap_or_else(|e| panic!("opening {}: {e:#}", path.display()));
            let store = app.store();
            let supply = store.supply(gonka_client::DENOM).unwrap();
            let held: u128 = store
                .all_balances()
                .unwrap()
                .iter()
                .filter(|(_, coin)| coin.denom == gonka_client::DENOM)
                .map(|(_, coin)| coin.amount)
                .sum();
            assert_eq!(held, supply, "node {i}: balances sum to the supply");
            gonka_stake::check_invariants(store)
                .unwrap_or_else(|breach| panic!("node {i}: {breach}"));
            supplies.push(supply);
        }
        assert!(supplies.windows(2).all(|w| w[0] == w[1]), "{supplies:?}");

        let faults: u64 = injected.values().sum();
        eprintln!("faults under load (seed {seed}):");
        eprintln!("  faults injected   {faults} {injected:?}");
        eprintln!(
            "  blocks            {} (heights {start_height}..{end_height})",
            end_height - start_height
        );
        eprintln!("  sends             {accepted} accepted by CheckTx, {committed} committed, {resubmitted} resubmitted, {} refused", sends.refused.load(Ordering::SeqCst));
        for (t, c) in chats.iter().enumerate() {
            eprintln!(
                "  chat via TA {t}     {} served, {} unknown, {} refused; {} records settled",
                c.served, c.unknown, c.refused, batched[t]
            );
        }
        eprintln!(
            "  max gap           {max_gap:?} (median {median_gap:?}); longest: {}",
            worst.join(", ")
        );
        // A gap past 3× the median is a fault's doing when consensus needed more than one
        // round for it (a proposer or a quorum missing for longer than a short round), and a
        // hang when it passes 10× the median whatever the round. A longer round-0 gap alone
        // is every node slow at once — the machine, not a fault (beside two busy loops on
        // this 2-core machine: 4.2 s at round 0, median 0.82 s).
        let stalls: Vec<_> = long_gaps
            .iter()
            .filter(|(gap, _, round)| *round > 0 || *gap > median_gap * 10)
            .collect();
        let violations = stalls.len();
        eprintln!(
            "  gaps > 3x median {} ({} of them in round 0, the machine's slowness)",
            long_gaps.len(),
            long_gaps.len() - violations
        );
        eprintln!("  violations        {violations}");
        assert_eq!(
            violations, 0,
            "gaps between commits past 3x the median {median_gap:?} with extra rounds, or past 10x: {stalls:?}"
        );
    });
}

/// Applies `fault` to `node` and brings it back.
async fn inject(net: &mut Net, node: usize, fault: Fault, rng: &mut Rng) {
    let signal = |net: &mut Net, role: Role, signal: libc::c_int| {
        tokio::task::block_in_place(|| net.net.signal(node, role, signal))
            .unwrap_or_else(|e| panic!("{fault:?} on node {node}: {e:#}"));
    };
    match fault {
        Fault::KillApp | Fault::KillCometbft => {
            let role = match fault {
                Fault::KillApp => Role::App,
                _ => Role::Cometbft,
            };
            signal(net, role, libc::SIGKILL);
            // Down for a while, as a crashed machine is, before its operator restarts it.
            tokio::time::sleep(Duration::from_millis(500 + rng.below(2_000))).await;
            net.kill(node);
            net.restart(node);
        }
        Fault::Pause => {
            signal(net, Role::Cometbft, libc::SIGSTOP);
            signal(net, Role::App, libc::SIGSTOP);
            tokio::time::sleep(Duration::from_millis(1_000 + rng.below(2_000))).await;
            signal(net, Role::App, libc::SIGCONT);
            signal(net, Role::Cometbft, libc::SIGCONT);
        }
        Fault::Restart => {
            signal(net, Role::Cometbft, libc::SIGTERM);
            signal(net, Role::App, libc::SIGTERM);
            tokio::time::sleep(Duration::from_secs(1)).await;
            net.kill(node);
            net.restart(node);
        }
        Fault::KillMlNode | Fault::KillTransferAgent => {
            let role = match fault {
                Fault::KillMlNode => "ml-node",
                _ => "transfer-agent",
            };
            tokio::task::block_in_place(|| net.net.kill_sidecar(node, role))
                .unwrap_or_else(|e| panic!("{fault:?} on node {node}: {e:#}"));
            tokio::time::sleep(Duration::from_millis(500 + rng.below(2_000))).await;
            tokio::task::block_in_place(|| net.net.start_sidecar(node, role))
                .unwrap_or_else(|e| panic!("{fault:?} on node {node}: {e:#}"));
        }
    }
}

/// Waits until `node` is within one block of the highest other validator.
async fn catch_up(net: &Net, node: usize) {
    let deadline = Instant::now() + CATCH_UP;
    loop {
        let mut others = 0;
        for i in (0..VALIDATORS).filter(|&i| i != node) {
            if let Ok(status) = net.clients[i].status().await {
                others = others.max(status.sync_info.latest_block_height.value());
            }
        }
        if let Ok(status) = net.clients[node].status().await {
            if status.sync_info.latest_block_height.value() + 1 >= others
                && !status.sync_info.catching_up
            {
                return;
            }
        }
        assert!(
            Instant::now() < deadline,
            "{} did not catch up within {CATCH_UP:?}",
            net.logs_of(node)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// One sender: signs its next send, submits it to a node that answers, waits for it, and
/// resubmits the same bytes if the chain never used its sequence.
pub(crate) async fn send_loop(
    index: usize,
    mut signer: SignerData,
    sink: String,
    clients: Arc<Vec<Client>>,
    counts: Arc<SendCounts>,
    stop: Arc<AtomicBool>,
) {
    let label = sender_label(index);
    let from = addr(&label);
    let mut attempt = index;
    while !stop.load(Ordering::SeqCst) {
        let tx = sign(
            key(&label),
            vec![msg_send(&from, &sink, SEND_AMOUNT)],
            &signer,
            tx_fee(),
            "",
        )
        .unwrap();
        loop {
            attempt += 1;
            let client = &clients[attempt % clients.len()];
            let hash = match client.http().broadcast_tx_sync(tx.clone()).await {
                Ok(r) if r.code.is_ok() => r.hash,
                Ok(r) if r.log.contains("sequence") => {
                    // Already in a block or a mempool: the chain tells which below.
                    r.hash
                }
                Ok(_) => {
                    counts.refused.fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(300)).await;
                    continue;
                }
                Err(_) => {
                    // That node is down: try the next one.
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    continue;
                }
            };
            counts.accepted.fetch_add(1, Ordering::SeqCst);
            if let Ok(included) = client.wait_for_tx(hash, COMMIT_WAIT).await {
                assert_eq!(included.code, 0, "send {hash} failed: {}", included.log);
                break;
            }
            // Not seen where it was sent (that node may have died): ask another node whether
            // the sequence was used.
            let other = &clients[(attempt + 1) % clients.len()];
            match other.signer_data(&from, Some(CHAIN_ID)).await {
                Ok(on_chain) if on_chain.sequence > signer.sequence => break,
                _ => {
                    counts.resubmitted.fetch_add(1, Ordering::SeqCst);
                }
            }
        }
        counts.committed.fetch_add(1, Ordering::SeqCst);
        signer.sequence += 1;
    }
}

/// Alice's chat requests, through TA 0 and TA 1 in turn (each draws from its own escrow); no
/// client-side failover, so every request is counted against the TA it went to.
async fn chat_loop(ta_urls: Vec<String>, stop: Arc<AtomicBool>) -> Vec<ChatCounts> {
    let clients: Vec<ChatClient> = ta_urls
        .iter()
        .map(|url| {
            let alice = Key::from_mnemonic(&well_known_mnemonic("alice")).unwrap();
            ChatClient::new(alice, std::slice::from_ref(url)).unwrap()
        })
        .collect();
    let mut counts = vec![ChatCounts::default(); clients.len()];
    let mut request = ChatRequest::new(MODEL, vec![Message::user("Faults under load")]);
    request.max_tokens = Some(8);
    request.stream = false;
    request.commission = COMMISSION;
    let mut turn = 0;
    while !stop.load(Ordering::SeqCst) {
        turn += 1;
        let t = turn % clients.len();
        let c = &mut counts[t];
        match clients[t].chat(&request, |_| {}).await {
            Ok(answer) => {
                let usage = answer.usage.expect("usage in a served answer");
                let charge =
                    u128::from(usage.prompt_tokens + usage.completion_tokens) * PRICE + COMMISSION;
                c.served += 1;
                c.charged += charge;
                c.largest_charge = c.largest_charge.max(charge);
            }
            Err(ChatError::Refused { .. }) => c.refused += 1,
            Err(_) => c.unknown += 1,
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    counts
}

/// Waits until no record is left to settle — each transfer agent has no record outside a
/// committed batch (`gonka_ta_unsettled_records`), serves no batch the chain lacks, and every
/// batch on chain is final — and returns how many records each one's batches hold.
async fn settled_records(net: &Net, tas: &[String]) -> BTreeMap<String, u64> {
    let deadline = Instant::now() + CATCH_UP;
    loop {
        let mut records: BTreeMap<String, u64> = BTreeMap::new();
        let mut settled = true;
        for (t, url) in net.net.transfer_agent_urls().iter().enumerate() {
            let ta_addr: SocketAddr = url
                .trim_start_matches("http://")
                .trim_end_matches("/v1")
                .parse()
                .unwrap();
            let on_chain = net.clients[0]
                .query::<q::settlement::BatchNumber>(&QueryBatchNumberRequest {
                    transfer_agent: tas[t].clone(),
                })
                .await
                .unwrap()
                .number;
            let unsettled = scrape(ta_addr)
                .get("gonka_ta_unsettled_records")
                .copied()
                .unwrap_or(f64::NAN);
            let (next, _) =
                http_get_bytes(ta_addr, &format!("/v1/batches/{}/leaves/0", on_chain + 1));
            settled &= unsettled == 0.0 && next == 404;
            records.insert(tas[t].clone(), 0);
        }
        // Batch ids count up across transfer agents.
        for id in 1.. {
            let found = net.clients[0]
                .query::<q::settlement::Batch>(&QueryBatchRequest {
                    id,
                    ..Default::default()
                })
                .await
                .ok()
                .and_then(|r| r.batch);
            let Some(batch) = found else { break };
            assert_ne!(
                batch.status,
                BatchStatus::Voided as i32,
                "batch {id} voided: {}",
                batch.voided_reason
            );
            settled &= batch.status == BatchStatus::Final as i32;
            let msg = batch.settled.expect("a batch carries its message");
            *records.entry(msg.transfer_agent).or_default() += msg.record_count;
        }
        if settled {
            return records;
        }
        assert!(
            Instant::now() < deadline,
            "the transfer agents' records did not all settle within {CATCH_UP:?}"
        );
        tokio::time::sleep(Duration::from_millis(1_000)).await;
    }
}

/// The intervals between consecutive block times in `from..=to`, as node 0's headers record
/// them, each with the height of the later block, longest first; and their median.
pub(crate) async fn gaps(client: &Client, from: u64, to: u64) -> (Vec<(Duration, u64)>, Duration) {
    let mut times = Vec::new();
    let mut height = from;
    while height <= to {
        let last = (height + 19).min(to);
        let metas = client
            .http()
            .blockchain(
                tendermint::block::Height::try_from(height).unwrap(),
                tendermint::block::Height::try_from(last).unwrap(),
            )
            .await
            .unwrap()
            .block_metas;
        times.extend(
            metas
                .iter()
                .map(|m| (m.header.height.value(), m.header.time)),
        );
        height = last + 1;
    }
    times.sort_by_key(|(h, _)| *h);
    let mut intervals: Vec<(Duration, u64)> = times
        .windows(2)
        .map(|w| (w[1].1.duration_since(w[0].1).unwrap_or_default(), w[1].0))
        .collect();
    intervals.sort();
    let median = intervals[intervals.len() / 2].0;
    intervals.reverse();
    (intervals, median)
}
