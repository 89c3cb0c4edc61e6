//! Cross-validation end to end, on committed batches: node 3's ML node runs the testing cheat
//! mode (a wrong answer for every request, still signed) and advertises more bandwidth, so the
//! transfer agent routes every request to it. The transfer agent
//! commits what it served in batches the hosts co-sign; the chain samples every leaf (this
//! genesis sets `leaf_sample_ppm` and the disputes rates to 100% so the test is deterministic;
//! the rules themselves are covered by the harness tests) and demands it, the transfer agent
//! provides it, and the record is sampled for re-execution: the assigned
//! validator's `gonka-sidecar validator` worker re-executes it on its own honest ML node, the
//! mismatch opens a dispute, the committee re-executes and votes, and the cheater loses: its
//! host's bonded stake falls by 20% per lost dispute, the honest hosts' stakes are untouched,
//! and the slashed stake lands in the honest participants' balances.
//!
//! Requests go through the transfer agent of validator 1 only, paid from Alice's escrow for it,
//! so validators 0 and 2 send no transactions but their validator role's (key registration,
//! key generation, validations and votes): once every batch is final their balances move by
//! exactly the payouts the disputes list, validation rewards and payments for honest records
//! they executed, minus the fees they paid.

use gonka_proto::query as q;
use std::collections::BTreeMap;
use std::sync::Arc;

use gonka_client::chat::{ChatClient, ChatRequest, Message};
use gonka_client::keys::well_known_mnemonic;
use gonka_client::Key;
use gonka_localnet::AppStateFn;
use gonka_proto::disputes::{Dispute, QueryDisputesRequest, QueryStatsRequest};
use gonka_proto::stake::QueryParticipantRequest;
use serde_json::json;

use gonka_client::settlement::msg_open_escrow;
use gonka_proto::bls::QueryKeyRequest;
use gonka_proto::settlement::{BatchStatus, QueryBatchNumberRequest, QueryBatchRequest};

use crate::explorer::History;
use crate::inference::{
    decided_validation, eventually, genesis_config, keyring_with_alice, settled, sidecars,
    wait_for_registry, GNK,
};
use crate::support::{addr, Net, VALIDATORS};

/// Work records served by the cheater.
const REQUESTS: usize = 3;
/// Share of stake a lost dispute slashes, ppm (the default).
const SLASH_PPM: u128 = 200_000;
/// The least deposit of a user dispute (1 GNK).
const DEPOSIT: u128 = GNK;

async fn bonded(net: &Net, operator: &str) -> u128 {
    net.clients[0]
        .query::<q::stake::Participant>(&QueryParticipantRequest {
            operator: operator.to_string(),
        })
        .await
        .unwrap_or_else(|e| panic!("{e:#}"))
        .participant
        .expect("a participant")
        .bonded
        .parse()
        .unwrap()
}

async fn disputes(net: &Net, status: &str) -> Vec<Dispute> {
    net.clients[0]
        .query::<q::disputes::List>(&QueryDisputesRequest {
            status: status.to_string(),
            ..Default::default()
        })
        .await
        .map(|r| r.disputes)
        .unwrap_or_default()
}

/// The network both tests run: validator roles on, node 3's ML node cheating on every answer
/// and winning routing by bandwidth, the transfer agent of validator 1 batching every 500 ms,
/// and every leaf of every batch sampled when `sample_leaves`, none otherwise. Returned with
/// the hosts once every ML node is registered, every host's BLS key is on chain and Alice's
/// escrow of 1 GNK for that transfer agent is open.
async fn start_network(name: &str, sample_leaves: bool) -> (Net, Vec<String>) {
    let leaf_sample_ppm = if sample_leaves { 1_000_000 } else { 0 };
    let net = Net::start_with(name, VALIDATORS, |config| {
        config.app_state_for_validators = Some(AppStateFn(Arc::new(move |keys| {
            let mut config = genesis_config(keys, 100_000);
            config.settlement_params = Some(gonka_proto::settlement::Params {
                challenge_window_blocks: 40,
                leaf_answer_blocks: 10,
                leaf_sample_ppm,
                ..gonka_settlement::default_params()
            });
            let mut state = config.app_state();
            state["disputes"] = json!({ "params": {
                "min_sample_ppm": 1_000_000, "max_sample_ppm": 1_000_000,
                "decay_validations": 20, "validation_deadline_blocks": 40,
                "dispute_deadline_blocks": 40, "committee_size": 3,
                "slash_fraction_ppm": SLASH_PPM as u64, "min_deposit": DEPOSIT.to_string(),
                "validation_reward_ppm": 1_000_000, "jail_after_misses": 3,
                "miss_penalty_ppm": 100_000, "dispute_window_blocks": 100,
                "reveal_deadline_blocks": 10,
            }});
            state
        })));
        let mut sidecars = sidecars();
        sidecars.validator_role = true;
        sidecars.transfer_agent_args = vec![
            vec![],
            ["--batch-interval-ms", "500"].map(Into::into).to_vec(),
        ];
        sidecars.ml_node_args = vec![
            vec![],
            vec![],
            vec![],
            [
                "--testing-cheat-fraction",
                "1",
                "--bandwidth-mbps",
                "100000",
            ]
            .map(Into::into)
            .to_vec(),
        ];
        config.sidecar = Some(sidecars);
    })
    .await;
    wait_for_registry(&net).await;
    let hosts = hosts_with_bls_keys(&net).await;
    net.tx_ok(
        0,
        "alice",
        vec![msg_open_escrow(
            &addr("alice"),
            &hosts[1],
            GNK,
            net.height(0).await + 100_000,
        )],
        "open escrow",
    )
    .await;
    (net, hosts)
}

/// The hosts (validator operators), once each one's BLS key for co-signing is on chain.
async fn hosts_with_bls_keys(net: &Net) -> Vec<String> {
    let hosts: Vec<String> = (0..VALIDATORS)
        .map(|i| addr(&format!("validator{i}")))
        .collect();
    for host in &hosts {
        eventually(&format!("{host}'s BLS key on chain"), || async {
            net.clients[0]
                .query::<q::bls::Key>(&QueryKeyRequest {
                    address: host.clone(),
                })
                .await
                .ok()?
                .key
        })
        .await;
    }
    hosts
}

#[test]
fn a_cheating_ml_node_is_caught_and_its_host_slashed_for_the_honest_side() {
    crate::support::run(async {
        let (net, hosts) = start_network("disputes", true).await;
        // No host sends a tx until the first request: the balances read now are those of
        // this height, and every fee paid later is in a block after it.
        let start_height = net.height(0).await;
        let mut bonded_before = Vec::new();
        let mut balance_before = Vec::new();
        for host in &hosts {
            bonded_before.push(bonded(&net, host).await);
            balance_before.push(net.balance(0, host).await);
        }

        let ta = net.net.transfer_agent_urls()[1].clone();
        let alice = Key::from_mnemonic(&well_known_mnemonic("alice")).unwrap();
        let client = ChatClient::new(alice, &[ta]).unwrap();
        // Node 3 wins routing ties by bandwidth, but the TA also counts the load the nodes
        // report every second, so a request right after another may go elsewhere: keep asking
        // (spaced past a load report) until node 3 has served REQUESTS of them. Every record,
        // honest or not, is sampled and accounted for below.
        let mut cheated = Vec::new();
        let mut all = Vec::new();
        for i in 0..4 * REQUESTS {
            if cheated.len() == REQUESTS {
                break;
            }
            let mut request =
                ChatRequest::new("gonka/reference-1", vec![Message::user(format!("q{i}"))]);
            request.max_tokens = Some(8);
            request.stream = false;
            let answer = client.chat(&request, |_| {}).await.unwrap();
            let id = answer.inference_id.unwrap();
            if answer.executor.as_deref() == Some("node3-ml") {
                cheated.push(id.clone());
            }
            all.push(id);
            tokio::time::sleep(std::time::Duration::from_millis(2500)).await;
        }
        assert_eq!(
            cheated.len(),
            REQUESTS,
            "node 3 served {cheated:?} of {all:?}"
        );
        let ids = cheated;

        // Every record is caught: sampled, re-executed, disputed, decided against the cheater.
        let faulted = eventually(
            "every cheated record decided against its executor",
            || async {
                let d = disputes(&net, "executor_faulted").await;
                (d.len() == REQUESTS).then_some(d)
            },
        )
        .await;
        let mut expected = bonded_before[3];
        let mut slashed_total = 0;
        for d in faulted.iter() {
            assert_eq!(d.executor_host, hosts[3]);
            assert!(ids.contains(&d.inference_id));
            assert_eq!(d.slashed, hosts[3]);
            // 20% of what was bonded when the dispute was decided (nothing was unbonding).
            let taken = expected * SLASH_PPM / 1_000_000;
            assert_eq!(d.slashed_amount, taken.to_string(), "dispute {}", d.id);
            expected -= taken;
            slashed_total += taken;
            for p in &d.payouts {
                assert_ne!(p.to, hosts[3], "the cheater is never paid: {p:?}");
            }
        }
        assert_eq!(
            bonded(&net, &hosts[3]).await,
            expected,
            "the cheater's stake"
        );
        for i in 0..3 {
            assert_eq!(
                bonded(&net, &hosts[i]).await,
                bonded_before[i],
                "honest host {i}'s stake is untouched"
            );
        }

        // The slash lands on the honest side: validators 0 and 2 (no TA traffic) move by
        // exactly their payouts minus the fees of the validations and votes they sent (each
        // tx's gas is estimated, so its fee is read from the chain).
        let mut paid: BTreeMap<&str, u128> = BTreeMap::new();
        let mut txs: BTreeMap<&str, u128> = BTreeMap::new();
        let mut to_honest = 0;
        for d in &faulted {
            for p in &d.payouts {
                let amount = p.amount.parse::<u128>().unwrap();
                *paid.entry(p.to.as_str()).or_default() += amount;
                if hosts[..3].contains(&p.to) {
                    to_honest += amount;
                }
            }
            for v in &d.votes {
                *txs.entry(v.voter.as_str()).or_default() += 1;
            }
        }
        // Every record was sampled: one validation tx each (honest records' validations match
        // and may earn a reward from the validation pool).
        for id in &all {
            let validation = decided_validation(&net, id).await;
            let expected = if ids.contains(id) {
                "mismatched"
            } else {
                "matched"
            };
            assert_eq!(validation.status, expected, "{id}");
            let validator = hosts
                .iter()
                .find(|h| **h == validation.validator)
                .expect("a genesis validator validated")
                .as_str();
            *txs.entry(validator).or_default() += 1;
            *paid.entry(validator).or_default() += validation.reward.parse::<u128>().unwrap_or(0);
            if !ids.contains(id) {
                // An honest record: its executor's host was paid its cost.
                let stored = settled(&net, id).await;
                let host = hosts
                    .iter()
                    .find(|h| **h == stored.executor_host)
                    .expect("a validator's ML node executed it")
                    .as_str();
                *paid.entry(host).or_default() += stored.cost.parse::<u128>().unwrap();
            }
        }
        assert!(
            to_honest > 0 && to_honest <= slashed_total,
            "{to_honest} of {slashed_total}"
        );
        // Each validation worker's metrics show the chain's count of its answers in time,
        // and the answers it saw included.
        let mut included = 0.0;
        for (i, host) in hosts.iter().enumerate() {
            let metrics = gonka_localnet::sidecar::validator_metrics_addr(net.node(i));
            let answered = eventually(
                &format!("validator {i}'s metrics agree with the chain"),
                || async {
                    let reputation = net.clients[0]
                        .query::<q::disputes::Stats>(&QueryStatsRequest {
                            address: host.clone(),
                        })
                        .await
                        .ok()?
                        .reputation?;
                    let scraped = crate::support::scrape(metrics);
                    (scraped.get("gonka_validator_answered_in_time")
                        == Some(&(reputation.answered as f64)))
                    .then_some(reputation.answered)
                },
            )
            .await;
            let scraped = crate::support::scrape(metrics);
            included += scraped
                .get("gonka_validator_answers_total{kind=\"validation\",outcome=\"included\"}")
                .copied()
                .unwrap_or(0.0);
            assert!(
                scraped.contains_key("gonka_validator_missed_deadlines"),
                "{scraped:?}"
            );
            if txs.contains_key(host.as_str()) {
                assert!(
                    answered > 0,
                    "validator {i} answered on chain but its metrics say 0"
                );
            }
        }
        assert!(
            included > 0.0,
            "no validation worker counted an included answer"
        );
        // Hosts are paid for their records when the batches become final.
        let batches = net.clients[0]
            .query::<q::settlement::BatchNumber>(&QueryBatchNumberRequest {
                transfer_agent: hosts[1].clone(),
            })
            .await
            .unwrap()
            .number;
        assert!(batches > 0);
        for id in 1..=batches {
            eventually(&format!("batch {id} final"), || async {
                let batch = net.clients[0]
                    .query::<q::settlement::Batch>(&QueryBatchRequest {
                        id,
                        ..Default::default()
                    })
                    .await
                    .ok()?
                    .batch?;
                (batch.status == BatchStatus::Final as i32).then_some(())
            })
            .await;
        }
        for i in [0, 2] {
            let h = hosts[i].as_str();
            let fees = net.fees_paid(0, h, start_height).await;
            assert_eq!(
                net.balance(0, h).await,
                balance_before[i] + paid.get(h).copied().unwrap_or(0) - fees,
                "honest host {i}: payouts {paid:?}, txs {txs:?}, fees {fees}"
            );
        }
        // The explorer shows this network's work, rewards and dispute as RPC reads them.
        crate::explorer::browse_and_check(&net, "alice", History::Dispute, "disputes").await;
    });
}

/// A requester disputes answers nobody sampled (no leaf of any batch is sampled here) with
/// `gonkad tx disputes open`, which finds no record on chain, fetches each answer's leaf and
/// proof from the transfer agents registered on chain and sends MsgDisputeLeaf: the committee
/// upholds the honest answer (the deposit goes to its executor's host) and faults the
/// cheating one (its host loses 20% of its stake, the deposit comes back).
#[test]
fn a_requester_disputes_answers_nobody_sampled_and_the_committee_decides_them() {
    crate::support::run(async {
        let (net, hosts) = start_network("user-disputes", false).await;
        let cheater_bonded = bonded(&net, &hosts[3]).await;

        // Two requests at once: node 3 wins the first by bandwidth, so the second goes to a
        // node with nothing in flight (lower relative load wins), which answers honestly.
        let ta = net.net.transfer_agent_urls()[1].clone();
        let alice = Key::from_mnemonic(&well_known_mnemonic("alice")).unwrap();
        let client = ChatClient::new(alice, &[ta]).unwrap();
        let ask = |i: usize| {
            let mut request =
                ChatRequest::new("gonka/reference-1", vec![Message::user(format!("u{i}"))]);
            request.max_tokens = Some(64);
            request.stream = false;
            let client = &client;
            async move { client.chat(&request, |_| {}).await.unwrap() }
        };
        let (mut cheated, mut honest) = (None, None);
        for round in 0..10 {
            let (a, b) = tokio::join!(ask(2 * round), ask(2 * round + 1));
            for answer in [a, b] {
                let id = answer.inference_id.clone().unwrap();
                let executor = answer.executor.clone().unwrap();
                if executor == "node3-ml" {
                    cheated.get_or_insert(id);
                } else {
                    honest.get_or_insert((id, executor));
                }
            }
            if cheated.is_some() && honest.is_some() {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
        }
        let cheated = cheated.expect("node 3 served one of 20 answers");
        let (honest, honest_node) = honest.expect("an honest node served one of 20 answers");

        let keyring = keyring_with_alice();
        let home = keyring.path().to_str().unwrap();
        let rpc = net.node(0).rpc_url.clone();
        let open = |id: &str| {
            crate::support::gonkad(&[
                "--node", &rpc, "--home", home, "--output", "json", "tx", "disputes", "open",
                "alice", id, "1gnk",
            ])
        };
        for id in [&honest, &cheated] {
            // A leaf is served once its batch is on chain, a few blocks after the answer.
            let out = eventually(&format!("the dispute of {id} lands"), || async {
                let out = open(id);
                out.status.success().then_some(out)
            })
            .await;
            let sent: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            assert_eq!(sent["code"], 0, "{sent}");
            assert!(
                String::from_utf8_lossy(&out.stderr).contains("disputing leaf"),
                "no record was on chain, so the leaf was disputed: {out:?}"
            );
        }
        // Now the record is on chain: a second dispute of it is MsgOpenDispute, refused.
        let again = open(&cheated);
        assert!(!again.status.success(), "{again:?}");

        let decided = |status: &'static str, id: String| {
            let net = &net;
            async move {
                eventually(&format!("the dispute of {id} {status}"), || async {
                    disputes(net, status)
                        .await
                        .into_iter()
                        .find(|d| d.inference_id == id)
                })
                .await
            }
        };
        let upheld = decided("executor_upheld", honest.clone()).await;
        assert_eq!(
            (upheld.kind.as_str(), upheld.accuser.as_str()),
            ("user", addr("alice").as_str())
        );
        assert_eq!(upheld.executor_node, honest_node);
        assert!(
            upheld.payouts.iter().any(|p| p.to == upheld.executor_host
                && p.amount == DEPOSIT.to_string()
                && p.reason == "deposit_forfeit"),
            "the deposit pays the honest host: {:?}",
            upheld.payouts
        );

        let faulted = decided("executor_faulted", cheated.clone()).await;
        assert_eq!(faulted.slashed, hosts[3]);
        let taken = cheater_bonded * SLASH_PPM / 1_000_000;
        assert_eq!(faulted.slashed_amount, taken.to_string());
        assert_eq!(bonded(&net, &hosts[3]).await, cheater_bonded - taken);
        assert!(
            faulted.payouts.iter().any(|p| p.to == addr("alice")
                && p.amount == DEPOSIT.to_string()
                && p.reason == "deposit_return"),
            "the deposit comes back: {:?}",
            faulted.payouts
        );
    });
}
