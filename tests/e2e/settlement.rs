//! Settlement at scale end to end (x/settlement): 4 validators with ML nodes, transfer agent
//! 0 settling committed batches. Alice, refused with 402 while she
//! has no escrow, opens one for TA 0; her requests are served and committed in batches the
//! executors' hosts co-sign; TA 0 is killed with SIGKILL while a served record waits for its
//! batch, and once restarted it stores that batch and crashes before submitting it (a testing
//! flag); started again, it submits the stored batch (nothing lost, nothing twice); a leaf the TA serves checks
//! against the root on chain and, demanded on chain, is answered by the TA itself (which earns
//! the deposit); once the challenge window closes the hosts are paid exactly the
//! tokens at the model's price and credited the work, the TA its commissions; closing the
//! escrow stops new requests (402) and returns the rest to Alice a window later.
//!
//! Epochs are long and the validator role is off, as in the inference test: the only balance
//! moves of Alice and of the executors' hosts (nodes 2 and 3: ML nodes 0 and 1 are killed)
//! are the ones under test. The hosts register their BLS keys first, as the validator role
//! would.

use std::collections::BTreeMap;
use std::sync::Arc;

use gonka_client::chat::{ChatClient, ChatError, ChatRequest, Message};
use gonka_client::keys::well_known_mnemonic;
use gonka_client::settlement::{msg_close_escrow, msg_demand_leaf, msg_open_escrow};
use gonka_client::Key;
use gonka_localnet::AppStateFn;
use gonka_proto::batch::{leaf_node, siblings_from_proto, verify_path, Committed};
use gonka_proto::query as q;
use gonka_proto::settlement::{
    Batch, BatchStatus, LeafProof, QueryBatchNumberRequest, QueryBatchRequest, QueryDemandsRequest,
    ServedLeaf,
};
use prost::Message as _;

use crate::inference::{
    alice_escrow_balance, eventually, genesis_config, kill_ml_nodes_0_and_1, register_bls_keys,
    sidecars, wait_for_registry, work_units, COMMISSION, GNK, MODEL, PRICE,
};
use crate::support::{addr, http_get, http_get_bytes, Net, VALIDATORS};

/// Blocks a batch stays open to challenges here.
const WINDOW: u64 = 20;

/// Deposit of a leaf demand (the chain's least).
const LEAF_DEPOSIT: u128 = 1_000_000;

/// TA 0's last batch number on chain.
async fn batch_number(net: &Net) -> u64 {
    net.clients[1]
        .query::<q::settlement::BatchNumber>(&QueryBatchNumberRequest {
            transfer_agent: addr("validator0"),
        })
        .await
        .unwrap_or_else(|e| panic!("{e:#}"))
        .number
}

/// Batch `id` on chain, once it exists.
async fn batch(net: &Net, id: u64) -> Batch {
    eventually(&format!("batch {id} on chain"), || async {
        net.clients[1]
            .query::<q::settlement::Batch>(&QueryBatchRequest {
                id,
                ..Default::default()
            })
            .await
            .ok()?
            .batch
    })
    .await
}

fn refusal<T: std::fmt::Debug>(result: Result<T, ChatError>) -> (u16, String) {
    match result {
        Err(ChatError::Refused { status, code, .. }) => (status, code.unwrap_or_default()),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn requests_paid_from_an_escrow_settle_in_committed_batches_across_a_killed_transfer_agent() {
    crate::support::run(async {
        let mut net = Net::start_with("settlement", VALIDATORS, |config| {
            config.app_state_for_validators = Some(AppStateFn(Arc::new(|keys| {
                let mut config = genesis_config(keys, 100_000);
                config.settlement_params = Some(gonka_proto::settlement::Params {
                    challenge_window_blocks: WINDOW,
                    leaf_answer_blocks: 4,
                    // Sampling and validation of committed work run in the disputes test.
                    leaf_sample_ppm: 0,
                    ..gonka_settlement::default_params()
                });
                config.app_state()
            })));
            let mut sidecars = sidecars();
            // Batches of two records, never sent for lack of a second one: the first record
            // waits in the outbox until the TA is killed.
            sidecars.transfer_agent_args = vec![[
                "--batch-max-records",
                "2",
                "--batch-interval-ms",
                "600000",
                // Once restarted it stores batch 1 and crashes before submitting it.
                "--testing-crash-after-batch",
                "1",
            ]
            .map(Into::into)
            .to_vec()];
            config.sidecar = Some(sidecars);
        })
        .await;
        wait_for_registry(&net).await;
        kill_ml_nodes_0_and_1(&mut net);
        register_bls_keys(&net).await;
        let ta_url = net.net.transfer_agent_urls()[0].clone();
        let ta = addr("validator0");
        let hosts: Vec<String> = (0..VALIDATORS)
            .map(|i| addr(&format!("validator{i}")))
            .collect();
        let start = net.height(0).await;
        let mut balances_before = BTreeMap::new();
        for who in hosts.iter().chain([&addr("alice")]) {
            balances_before.insert(who.clone(), net.balance(0, who).await);
        }

        let alice = Key::from_mnemonic(&well_known_mnemonic("alice")).unwrap();
        let client = ChatClient::new(alice, std::slice::from_ref(&ta_url)).unwrap();
        let mut request = ChatRequest::new(MODEL, vec![Message::user("Hello, batches")]);
        request.max_tokens = Some(16);
        request.stream = false;
        request.commission = COMMISSION;
        assert_eq!(
            refusal(client.chat(&request, |_| {}).await),
            (402, "insufficient_funds".to_string()),
            "no escrow, no service"
        );
        let deposit = GNK;
        let expires_at = net.height(0).await + 100_000;
        net.tx_ok(
            0,
            "alice",
            vec![msg_open_escrow(&addr("alice"), &ta, deposit, expires_at)],
            "open escrow",
        )
        .await;

        // Served and durable, but waiting for a second record.
        let mut served = Vec::new();
        served.push(
            client
                .chat(&request, |_| {})
                .await
                .expect("served from the escrow"),
        );
        tokio::time::sleep(std::time::Duration::from_secs(2)).await;
        assert_eq!(
            batch_number(&net).await,
            0,
            "the record waits for its batch"
        );
        tokio::task::block_in_place(|| net.net.kill_sidecar(0, "transfer-agent"))
            .unwrap_or_else(|e| panic!("{e:#}"));
        // Restarted, it commits the waiting record as batch 1, stores the batch and dies
        // before submitting it (often before the localnet has seen it start: that start
        // fails); started again once it is gone, it submits that same batch.
        let _ = tokio::task::block_in_place(|| net.net.start_sidecar(0, "transfer-agent"));
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        let on_chain = loop {
            // Read before each try: once a start succeeds, the crashed process had gone
            // without submitting anything.
            let on_chain = batch_number(&net).await;
            if tokio::task::block_in_place(|| net.net.start_sidecar(0, "transfer-agent")).is_ok() {
                break on_chain;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the TA never crashed after storing batch 1"
            );
            tokio::time::sleep(std::time::Duration::from_millis(250)).await;
        };
        assert_eq!(on_chain, 0, "the crash came before the submission");
        eventually("the TA submits the stored batch", || async {
            (batch_number(&net).await == 1).then_some(())
        })
        .await;
        // Two more fill batch 2.
        for _ in 0..2 {
            let answer = eventually("the restarted TA serves", || async {
                client.chat(&request, |_| {}).await.ok()
            })
            .await;
            served.push(answer);
        }
        eventually("batch 2 on chain", || async {
            (batch_number(&net).await == 2).then_some(())
        })
        .await;
        let batches = [batch(&net, 1).await, batch(&net, 2).await];
        for (i, b) in batches.iter().enumerate() {
            let msg = b.settled.as_ref().unwrap();
            assert_eq!(
                (msg.transfer_agent.as_str(), msg.number),
                (ta.as_str(), i as u64 + 1)
            );
        }
        assert_eq!(
            batches
                .iter()
                .map(|b| b.settled.as_ref().unwrap().record_count)
                .collect::<Vec<_>>(),
            [1, 2],
            "each record in exactly one batch"
        );

        // Leaf 0 of batch 2, as the TA serves it, is on the root committed on chain.
        let ta_addr = ta_url
            .trim_start_matches("http://")
            .trim_end_matches("/v1")
            .parse()
            .unwrap();
        let (status, body) = http_get_bytes(ta_addr, "/v1/batches/2/leaves/0");
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
        let proof = LeafProof::decode(body.as_slice()).expect("a LeafProof");
        let committed = batches[1].settled.as_ref().unwrap();
        let leaf = proof.leaf.clone().unwrap();
        assert!(
            verify_path(
                &Committed::of(committed).unwrap(),
                0,
                proof.index,
                leaf_node(&leaf).unwrap(),
                &siblings_from_proto(&proof.siblings).unwrap(),
            )
            .is_some(),
            "the served leaf proves against the chain's root"
        );
        let ids: Vec<String> = served
            .iter()
            .map(|a| a.inference_id.clone().unwrap())
            .collect();
        assert!(ids[1..].contains(&leaf.record.unwrap().inference_id));
        let (status, _) = http_get(ta_addr, "/v1/batches/9/leaves/0");
        assert_eq!(status, 404);
        // Each answer's leaf, found by its inference id, names its batch and position.
        for (id, number) in ids.iter().zip([1, 2, 2]) {
            let (status, body) = http_get_bytes(ta_addr, &format!("/v1/leaves/{id}"));
            assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
            let served = ServedLeaf::decode(body.as_slice()).expect("a ServedLeaf");
            assert_eq!(served.batch_number, number, "{id}");
            let (_, by_position) = http_get_bytes(
                ta_addr,
                &format!(
                    "/v1/batches/{number}/leaves/{}",
                    served.proof.as_ref().unwrap().index
                ),
            );
            assert_eq!(served.proof.unwrap().encode_to_vec(), by_position, "{id}");
        }
        let (status, _) = http_get(ta_addr, &format!("/v1/leaves/{}", "0".repeat(64)));
        assert_eq!(status, 404, "no such request");
        let (status, _) = http_get(ta_addr, "/v1/leaves/not-an-id");
        assert_eq!(status, 400);

        // Alice demands that leaf on chain: the TA answers by itself and earns the deposit.
        net.tx_ok(
            0,
            "alice",
            vec![msg_demand_leaf(
                &addr("alice"),
                batches[1].id,
                proof.index,
                LEAF_DEPOSIT,
            )],
            "demand a leaf",
        )
        .await;
        eventually("the TA answers the demand", || async {
            let open = net.clients[0]
                .query::<q::settlement::Demands>(&QueryDemandsRequest {
                    transfer_agent: ta.clone(),
                    limit: 0,
                    ..Default::default()
                })
                .await
                .ok()?
                .demands;
            open.is_empty().then_some(())
        })
        .await;

        // Final after the window: exact payments.
        for b in &batches {
            eventually(&format!("batch {} final", b.id), || async {
                let now = batch(&net, b.id).await;
                (now.status == BatchStatus::Final as i32).then_some(())
            })
            .await;
        }
        let mut paid: BTreeMap<String, u128> = BTreeMap::new();
        let mut work: BTreeMap<String, u64> = BTreeMap::new();
        let mut charged = 0;
        for answer in &served {
            let host = match answer.executor.as_deref() {
                Some("node2-ml") => &hosts[2],
                Some("node3-ml") => &hosts[3],
                other => panic!("ML nodes 0 and 1 are down, yet {other:?} served"),
            };
            let usage = answer.usage.unwrap();
            let tokens = usage.prompt_tokens + usage.completion_tokens;
            *paid.entry(host.clone()).or_default() += u128::from(tokens) * PRICE;
            *work.entry(host.clone()).or_default() += tokens;
            charged += u128::from(tokens) * PRICE + COMMISSION;
        }
        let epoch = net.current_epoch(0).await;
        for host in &hosts[2..] {
            assert_eq!(
                net.balance(0, host).await,
                balances_before[host] + paid.get(host).copied().unwrap_or(0),
                "host {host} is paid its tokens at the price"
            );
            assert_eq!(
                work_units(&net, epoch, host).await,
                work.get(host).copied().unwrap_or(0),
                "host {host} is credited its tokens"
            );
        }
        assert_eq!(alice_escrow_balance(&net, &ta).await, deposit - charged);
        let ta_fees = net.fees_paid(0, &ta, start).await;
        assert_eq!(
            net.balance(0, &ta).await,
            balances_before[&ta] + COMMISSION * served.len() as u128 + LEAF_DEPOSIT - ta_fees,
            "the TA earns its commissions and the answered demand's deposit (and paid its fees)"
        );

        // Closing: no new requests, the rest back a window later.
        net.tx_ok(
            0,
            "alice",
            vec![msg_close_escrow(&addr("alice"), &ta)],
            "close escrow",
        )
        .await;
        // Once the TA's view of the escrow is older than its refresh time (5 s), it reads
        // the closing escrow.
        tokio::time::sleep(std::time::Duration::from_secs(6)).await;
        assert_eq!(
            refusal(client.chat(&request, |_| {}).await),
            (402, "insufficient_funds".to_string()),
            "a closing escrow takes no new requests"
        );
        let alice_fees = net.fees_paid(0, &addr("alice"), start).await;
        eventually("the escrow released to alice", || async {
            let balance = net.balance(0, &addr("alice")).await;
            (balance == balances_before[&addr("alice")] - charged - LEAF_DEPOSIT - alice_fees)
                .then_some(())
        })
        .await;
    });
}
