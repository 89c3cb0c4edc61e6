//! End-to-end tests of gonka-rs: real `gonkad start` apps behind real CometBFT v0.38
//! validators on loopback ports, driven only from outside (signed txs over RPC, `abci_query`,
//! the `gonkad` CLI, plain HTTP), with processes killed and restarted.
//!
//! They need `cometbft` (see `gonka_localnet::find_cometbft`) and never skip: without it they
//! fail with the install command. Run them with
//! `cargo test -p gonka-cli --test e2e -- --nocapture`.

mod bad_inputs;
mod bls;
mod cosmjs;
mod cosmpy;
mod disputes;
mod explorer;
mod faults;
mod genesis_ceremony;
mod inference;
mod liveness;
mod llm;
mod localnet_cli;
mod netns;
mod prove;
mod proxy;
mod settlement;
mod stake;
mod state_sync;
mod support;
mod training;

use std::time::Duration;

use gonka_client::{msg_send, sign, SignerData};
use gonka_proto::bank::{QueryBalanceRequest, QueryBalanceResponse};
use prost::Message;
use support::{addr, key, Ledger, Net, TxRaw, CHAIN_ID, MIN_FEE, START_BALANCE};
use tendermint::Hash;
use tendermint_rpc::Client as _;

/// Senders of the first test; sender `i` broadcasts through node `i`.
const SENDERS: [&str; 4] = ["alice", "bob", "carol", "dave"];
/// Txs per sender in the first test (4 x 25 = 100).
const TXS_PER_SENDER: u64 = 25;
/// Accounts that only receive, created by their first deposit.
const RECIPIENTS: [&str; 3] = ["e2e-recipient-0", "e2e-recipient-1", "e2e-recipient-2"];
/// Bound on every wait for blocks.
const BLOCKS_TIMEOUT: Duration = Duration::from_secs(60);

/// A `MsgSend` of `amount` from `from` to `to` signed by `from` at `sequence`, paying the
/// minimum fee.
fn signed_send(from: &str, to: &str, amount: u128, signer: &SignerData, sequence: u64) -> Vec<u8> {
    let from_key = key(from);
    let signer = SignerData {
        sequence,
        ..signer.clone()
    };
    sign(
        from_key,
        vec![msg_send(from_key.address(), to, amount)],
        &signer,
        support::tx_fee(),
        &format!("e2e {from} seq {sequence}"),
    )
    .unwrap_or_else(|e| panic!("signing a send of {from}: {e:#}"))
}

/// Test 1 then test 2 on one network.
///
/// 1. 100 signed `MsgSend`s from 4 senders, broadcast with `broadcast_tx_sync` through all 4
///    nodes, are all included with code 0; afterwards every node reports the hand-computed
///    balances and sequences, stores the same block (same block hash and header app hash) at a
///    fixed height, and every app's own `Info` app hash matches the agreed one.
/// 2. With node 3 SIGKILLed the other three keep producing blocks and include new txs; node 3,
///    restarted, catches up to the others' height, agrees with node 0 on the block and app
///    hash at a common height, reports the same balances, and accepts and relays a new tx.
#[test]
fn hundred_sends_land_everywhere_and_a_killed_validator_catches_up() {
    support::run(async {
        let mut net = Net::start("sends", &SENDERS).await;
        let mut ledger = Ledger::genesis(&SENDERS);
        hundred_sends(&net, &mut ledger).await;
        crash_and_catch_up(&mut net, &mut ledger).await;
    });
}

async fn hundred_sends(net: &Net, ledger: &mut Ledger) {
    let started = std::time::Instant::now();
    // Sign everything up front. Each sender uses one node: that node's CheckTx state tracks the
    // sender's queued sequences, so consecutive sequences can wait in its mempool together.
    let mut batches: Vec<(usize, Vec<Vec<u8>>)> = Vec::new();
    let mut first_sequences = Vec::new();
    for (i, sender) in SENDERS.iter().enumerate() {
        let signer = net.signer(i, sender).await;
        assert_eq!(signer.chain_id, CHAIN_ID);
        first_sequences.push(signer.sequence);
        let txs = (0..TXS_PER_SENDER)
            .map(|n| {
                let to = if n % 2 == 0 {
                    addr(SENDERS[(i + 1) % SENDERS.len()])
                } else {
                    addr(RECIPIENTS[n as usize % RECIPIENTS.len()])
                };
                let amount = 1_000_000 + 1_000 * i as u128 + u128::from(n);
                ledger.send(&addr(sender), &to, amount);
                signed_send(sender, &to, amount, &signer, signer.sequence + n)
            })
            .collect();
        batches.push((i, txs));
    }

    // Broadcast the four batches concurrently, each in sequence order.
    let mut tasks = Vec::new();
    for (i, txs) in batches {
        let client = net.clients[i].clone();
        tasks.push(tokio::spawn(async move {
            let mut hashes = Vec::new();
            for tx in txs {
                hashes.push(support::broadcast_ok(&client, tx).await?);
            }
            Ok::<_, String>(hashes)
        }));
    }
    let mut hashes: Vec<(usize, Vec<Hash>)> = Vec::new();
    for (i, task) in tasks.into_iter().enumerate() {
        let sent = task
            .await
            .expect("broadcast task panicked")
            .unwrap_or_else(|e| panic!("sender {}: {e} ({})", SENDERS[i], net.logs_of(i)));
        hashes.push((i, sent));
    }
    let accepted = started.elapsed();

    // Wait for every tx; the last of a sender lands no earlier than the others.
    let mut heights = Vec::new();
    for (i, sent) in &hashes {
        net.wait_included(*i, *sent.last().unwrap()).await;
        for hash in sent {
            let included = net.wait_included(*i, *hash).await;
            assert_eq!(
                included.code, 0,
                "tx {hash} of {} failed in block {} ({} {}): {}",
                SENDERS[*i], included.height, included.codespace, included.code, included.log
            );
            heights.push(included.height);
        }
    }
    assert_eq!(heights.len(), 100);
    let (first, last) = (
        *heights.iter().min().unwrap(),
        *heights.iter().max().unwrap(),
    );
    eprintln!(
        "100 txs accepted in {accepted:?}, included in blocks {first}..={last} after {:?}",
        started.elapsed()
    );

    // Block last + 1 exists everywhere, so every app has committed `last`: no tx is pending,
    // and the latest state is the state after the 100 txs.
    let fixed = last + 1;
    net.wait_all_heights(fixed, BLOCKS_TIMEOUT).await;
    let app_hash = net.assert_same_block(&[0, 1, 2, 3], fixed).await;
    eprintln!("all nodes store block {fixed} with app hash {app_hash}");
    for i in 0..4 {
        net.assert_balances(i, ledger).await;
        net.assert_app_agrees(i, 0).await;
        for (s, sender) in SENDERS.iter().enumerate() {
            let sequence = net.signer(i, sender).await.sequence;
            assert_eq!(
                sequence,
                first_sequences[s] + TXS_PER_SENDER,
                "sequence of {sender} on {}",
                net.logs_of(i)
            );
        }
    }
    for recipient in RECIPIENTS {
        assert!(ledger.balance(&addr(recipient)) > 0);
    }
}

async fn crash_and_catch_up(net: &mut Net, ledger: &mut Ledger) {
    let killed_at = net.height(0).await;
    net.kill(3);
    assert!(!net.net.is_running(3), "node 3 still runs after kill_node");
    assert!(
        net.clients[3].status().await.is_err(),
        "node 3 RPC still answers after kill_node"
    );

    // Three of four equal validators hold more than 2/3 of the power: blocks go on, and txs
    // sent meanwhile through nodes 0..=2 land.
    let mut sent = Vec::new();
    for (i, sender) in SENDERS[..3].iter().enumerate() {
        let signer = net.signer(i, sender).await;
        for n in 0..2 {
            let to = addr(RECIPIENTS[(i + n as usize) % RECIPIENTS.len()]);
            let amount = 7_000 + u128::from(n);
            ledger.send(&addr(sender), &to, amount);
            let tx = signed_send(sender, &to, amount, &signer, signer.sequence + n);
            sent.push((i, net.broadcast_ok(i, tx).await));
        }
    }
    let mut last = 0;
    for (i, hash) in sent {
        let included = net.wait_included(i, hash).await;
        assert_eq!(
            included.code, 0,
            "tx {hash} sent while node 3 was down failed: {}",
            included.log
        );
        last = last.max(included.height);
    }
    // Six blocks: node 3 misses a real stretch of the chain (and, with round-robin proposers,
    // its own proposal turns, which cost a `timeout_propose` each).
    let advanced = net.wait_for_height(0, killed_at + 6, BLOCKS_TIMEOUT).await;
    eprintln!(
        "with node 3 down: height {killed_at} -> {advanced}, 6 txs included by height {last}"
    );
    assert!(!net.net.is_running(3));

    // Restart node 3: it replays what its app missed and catches up.
    let restarted = std::time::Instant::now();
    net.restart(3);
    assert!(
        net.net.is_running(3),
        "node 3 is not running after start_node"
    );
    let target = net.height(0).await.max(last + 1);
    let caught_up = net.wait_for_height(3, target, BLOCKS_TIMEOUT).await;
    eprintln!(
        "node 3 restarted and reached height {caught_up} (target {target}) in {:?}",
        restarted.elapsed()
    );
    let common = target.min(caught_up);
    let app_hash = net.assert_same_block(&[0, 3], common).await;
    eprintln!("nodes 0 and 3 agree on block {common}, app hash {app_hash}");
    net.assert_app_agrees(3, 0).await;
    net.assert_balances(3, ledger).await;

    // Node 3 is a full participant again: a tx sent through it lands everywhere.
    let signer = net.signer(3, "dave").await;
    let amount = 9_999;
    ledger.send(&addr("dave"), &addr("alice"), amount);
    let tx = signed_send("dave", &addr("alice"), amount, &signer, signer.sequence);
    let hash = net.broadcast_ok(3, tx).await;
    let included = net.wait_included(3, hash).await;
    assert_eq!(
        included.code, 0,
        "tx through restarted node 3 failed: {}",
        included.log
    );
    net.wait_all_heights(included.height + 1, BLOCKS_TIMEOUT)
        .await;
    net.assert_same_block(&[0, 1, 2, 3], included.height + 1)
        .await;
    for i in 0..4 {
        net.assert_balances(i, ledger).await;
    }
}

/// Test 3: the `gonkad` CLI as a user runs it against the network: `keys import` (and `keys
/// add --recover`), `tx bank
/// send` (signs, broadcasts, waits), `query bank balance`, `status`, `query tx`, all with
/// `--output json`; a fee below the minimum fails with the node's reason; and a plain HTTP
/// GET of `/abci_query?path="/bank/balance"&data=0x...` answers the balance.
#[test]
fn cli_and_http_against_a_real_network() {
    support::run(async {
        let net = Net::start("cli", &["alice"]).await;
        let home = tempfile::tempdir().expect("creating a keyring home");
        let home = home.path().to_str().expect("UTF-8 temp path");
        let rpc = |i: usize| net.node(i).rpc_url.clone();

        let mnemonic = gonka_client::keys::well_known_mnemonic("alice");
        let imported = support::gonkad_json(&[
            "--home",
            home,
            "--output",
            "json",
            "keys",
            "import",
            "alice",
            "--mnemonic",
            &mnemonic,
        ]);
        assert_eq!(imported["name"], "alice", "{imported}");
        assert_eq!(imported["address"], addr("alice"), "{imported}");
        // The Cosmos SDK's spelling: `keys add NAME --recover`, the mnemonic on stdin.
        let recovered = support::gonkad_json_with_input(
            &[
                "--home",
                home,
                "--output",
                "json",
                "keys",
                "add",
                "alice-again",
                "--recover",
            ],
            &format!("{mnemonic}\n"),
        );
        assert_eq!(recovered["name"], "alice-again", "{recovered}");
        assert_eq!(recovered["address"], addr("alice"), "{recovered}");

        // tx bank send through node 1.
        let recipient = addr("e2e-cli-recipient");
        let sent = support::gonkad_json(&[
            "--node",
            &rpc(1),
            "--home",
            home,
            "--output",
            "json",
            "tx",
            "bank",
            "send",
            "alice",
            &recipient,
            "1.5gnk",
            "--memo",
            "e2e cli",
        ]);
        assert_eq!(sent["code"], 0, "{sent}");
        let hash = sent["hash"]
            .as_str()
            .unwrap_or_else(|| panic!("no hash in {sent}"));
        assert_eq!(hash.len(), 64, "{sent}");
        let height = sent["height"]
            .as_u64()
            .unwrap_or_else(|| panic!("no height in {sent}"));
        assert!(height > 0, "{sent}");

        // query bank balance through node 2, once it has committed that block.
        net.wait_for_height(2, height + 1, BLOCKS_TIMEOUT).await;
        let received = support::gonkad_json(&[
            "--node",
            &rpc(2),
            "--output",
            "json",
            "query",
            "bank",
            "balance",
            &recipient,
        ]);
        assert_eq!(received["address"], recipient.as_str(), "{received}");
        assert_eq!(received["denom"], "ngnk", "{received}");
        assert_eq!(received["amount"], "1500000000", "{received}");
        let remaining = support::gonkad_json(&[
            "--node",
            &rpc(2),
            "--output",
            "json",
            "query",
            "bank",
            "balance",
            &addr("alice"),
        ]);
        // `gonkad tx` estimated the gas and paid for it: the fee it reports.
        let fee: u128 = sent["fee"]["amount"]
            .as_str()
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("no fee in {sent}"));
        assert!(
            sent["gas_used"].as_u64() <= sent["gas_wanted"].as_u64(),
            "{sent}"
        );
        assert_eq!(
            Some(fee),
            support::min_gas_price().fee_for(sent["gas_wanted"].as_u64().unwrap()),
            "the fee is the gas limit at the minimum gas price: {sent}"
        );
        let expected = START_BALANCE - 1_500_000_000 - fee;
        assert_eq!(remaining["amount"], expected.to_string(), "{remaining}");

        // status through node 0.
        net.wait_for_height(0, height + 1, BLOCKS_TIMEOUT).await;
        let status = support::gonkad_json(&["--node", &rpc(0), "--output", "json", "status"]);
        assert_eq!(status["chain_id"], CHAIN_ID, "{status}");
        assert_eq!(status["moniker"], "node0", "{status}");
        assert_eq!(status["node_id"], net.node(0).node_id.as_str(), "{status}");
        assert!(
            status["latest_block_height"].as_u64().unwrap_or(0) > height,
            "{status}"
        );
        assert_eq!(
            status["latest_app_hash"].as_str().map(str::len),
            Some(64),
            "{status}"
        );
        assert_eq!(status["catching_up"], false, "{status}");

        // chain-info: the wallet and registry documents say what the chain says.
        let info = support::gonkad_json(&["--node", &rpc(0), "chain-info"]);
        let (keplr, registry) = (&info["keplr"], &info["chain_registry"]);
        let min = support::min_gas_price();
        let number = |p: gonka_proto::gas::GasPrice| -> serde_json::Value {
            serde_json::from_str(&p.to_string()).unwrap()
        };
        assert_eq!(keplr["chainId"], CHAIN_ID, "{info}");
        assert_eq!(keplr["rpc"], rpc(0).as_str(), "{info}");
        assert_eq!(
            keplr["bech32Config"]["bech32PrefixAccAddr"], "gonka",
            "{info}"
        );
        assert_eq!(keplr["bip44"]["coinType"], 118, "{info}");
        let fee_currency = &keplr["feeCurrencies"][0];
        assert_eq!(fee_currency["coinMinimalDenom"], "ngnk", "{info}");
        assert_eq!(fee_currency["coinDecimals"], 9, "{info}");
        assert_eq!(fee_currency["gasPriceStep"]["low"], number(min), "{info}");
        assert_eq!(
            fee_currency["gasPriceStep"]["high"],
            number(min.times(4).unwrap()),
            "{info}"
        );
        assert_eq!(registry["chain_id"], CHAIN_ID, "{info}");
        assert_eq!(
            registry["fees"]["fee_tokens"][0]["fixed_min_gas_price"],
            number(min),
            "{info}"
        );
        assert_eq!(
            registry["staking"]["staking_tokens"][0]["denom"], "ngnk",
            "{info}"
        );

        // query tx through node 3.
        net.wait_for_height(3, height + 1, BLOCKS_TIMEOUT).await;
        let found =
            support::gonkad_json(&["--node", &rpc(3), "--output", "json", "query", "tx", hash]);
        assert_eq!(found["hash"], hash, "{found}");
        assert_eq!(found["height"], height, "{found}");
        assert_eq!(found["code"], 0, "{found}");
        // Hashes are accepted in lower case too.
        let lower = support::gonkad_ok(&["--node", &rpc(3), "query", "tx", &hash.to_lowercase()]);
        assert!(lower.contains(&format!("height: {height}")), "{lower}");

        // A fee below the chain's minimum is refused by CheckTx; the CLI says why and fails.
        let refused = support::gonkad(&[
            "--node",
            &rpc(0),
            "--home",
            home,
            "tx",
            "bank",
            "send",
            "alice",
            &recipient,
            "1gnk",
            "--fees",
            "1ngnk",
        ]);
        let stderr = String::from_utf8_lossy(&refused.stderr);
        assert!(
            !refused.status.success(),
            "a 1ngnk fee was accepted: {stderr}"
        );
        assert!(
            stderr.contains("auth 9") && stderr.contains("minimum gas price"),
            "the CLI should relay the node's reason: {stderr}"
        );

        // The same balance with a plain HTTP GET, as `curl` would ask it.
        let request = QueryBalanceRequest {
            address: recipient.clone(),
            denom: "ngnk".into(),
        };
        let path = format!(
            "/abci_query?path=%22/bank/balance%22&data=0x{}",
            hex::encode(request.encode_to_vec())
        );
        let (status_code, body) = support::http_get(net.node(3).rpc_addr, &path);
        assert_eq!(status_code, 200, "GET {path}: {body}");
        let json: serde_json::Value = serde_json::from_str(&body)
            .unwrap_or_else(|e| panic!("GET {path}: not JSON ({e}): {body}"));
        let response = &json["result"]["response"];
        assert!(
            response["code"].as_u64().unwrap_or(0) == 0,
            "GET {path}: query failed: {body}"
        );
        let value = support::base64_decode(response["value"].as_str().unwrap_or_default());
        let balance = QueryBalanceResponse::decode(value.as_slice())
            .unwrap_or_else(|e| {
                panic!("GET {path}: value is not a QueryBalanceResponse ({e}): {body}")
            })
            .balance
            .unwrap_or_default();
        assert_eq!(
            (balance.denom.as_str(), balance.amount.as_str()),
            ("ngnk", "1500000000"),
            "{body}"
        );

        // A synchronous ABCI call is not held back by Nagle's algorithm: the app's ABCI
        // sockets set TCP_NODELAY. Without it each call stalls ≥ 40 ms on delayed ACKs, so a
        // median under 15 ms checks the defect, not the machine's speed.
        let mut millis: Vec<f64> = (0..20)
            .map(|_| {
                let started = std::time::Instant::now();
                let (code, body) = support::http_get(net.node(3).rpc_addr, &path);
                assert_eq!(code, 200, "GET {path}: {body}");
                started.elapsed().as_secs_f64() * 1e3
            })
            .collect();
        millis.sort_by(f64::total_cmp);
        let median = (millis[9] + millis[10]) / 2.0;
        assert!(
            median < 15.0,
            "abci_query median {median:.1} ms over 20 calls (each: {millis:?}); the ABCI \
             socket is waiting on Nagle/delayed ACKs"
        );
    });
}

/// Test 4: `CheckTx` refusals over the wire (`broadcast_tx_sync`) carry the module's code,
/// codespace and an actionable log: a corrupted signature (`auth` 4), a sequence already used
/// by an included tx (`auth` 7), a sequence from the future (`auth` 8); the exact bytes of an
/// included tx are refused again; nothing refused is ever included or charged.
#[test]
fn rejections_over_the_wire() {
    support::run(async {
        let net = Net::start("reject", &["alice"]).await;
        let to = addr("bob");
        let signer = net.signer(1, "alice").await;
        let seq = signer.sequence;

        // A valid send at `seq`, included.
        let good = signed_send("alice", &to, 5_000, &signer, seq);
        let good_hash = net.broadcast_ok(1, good.clone()).await;
        let included = net.wait_included(1, good_hash).await;
        assert_eq!(included.code, 0, "{}", included.log);

        let refuse = |i: usize, tx: Vec<u8>| {
            let client = net.clients[i].clone();
            async move {
                client
                    .http()
                    .broadcast_tx_sync(tx)
                    .await
                    .unwrap_or_else(|e| panic!("broadcast_tx_sync to {}: {e:#}", client.url()))
            }
        };
        net.wait_all_heights(included.height + 1, BLOCKS_TIMEOUT)
            .await;

        // Another tx at the used sequence: a replay.
        let replay = signed_send("alice", &to, 6_000, &signer, seq);
        let r = refuse(2, replay).await;
        assert_eq!(
            (r.codespace.as_str(), r.code.value()),
            ("auth", 7),
            "replay: {}",
            r.log
        );
        assert!(
            r.log.contains(&format!("sequence {seq} was already used"))
                && r.log.contains(&format!("next sequence is {}", seq + 1)),
            "replay log should name the used and the next sequence: {}",
            r.log
        );
        let replay_hash = r.hash;

        // The next sequence with a corrupted signature.
        let mut tampered =
            TxRaw::decode(signed_send("alice", &to, 7_000, &signer, seq + 1).as_slice())
                .expect("a signed tx decodes as TxRaw");
        assert_eq!(tampered.signatures.len(), 1);
        tampered.signatures[0][10] ^= 0x01;
        let r = refuse(3, tampered.encode_to_vec()).await;
        assert_eq!(
            (r.codespace.as_str(), r.code.value()),
            ("auth", 4),
            "bad signature: {}",
            r.log
        );
        assert!(
            r.log.contains("signature does not verify") && r.log.contains(CHAIN_ID),
            "bad-signature log should say what the signature must cover: {}",
            r.log
        );
        let tampered_hash = r.hash;

        // A sequence ahead of the account's.
        let future = signed_send("alice", &to, 8_000, &signer, seq + 5);
        let r = refuse(0, future).await;
        assert_eq!(
            (r.codespace.as_str(), r.code.value()),
            ("auth", 8),
            "future sequence: {}",
            r.log
        );
        assert!(r.log.contains("ahead"), "{}", r.log);
        let future_hash = r.hash;

        // The included tx's exact bytes again: refused (by CometBFT's cache or by the app).
        match net.clients[1].http().broadcast_tx_sync(good).await {
            Ok(r) => {
                assert!(r.code.is_err(), "re-sent included tx accepted");
                assert_eq!(
                    (r.codespace.as_str(), r.code.value()),
                    ("auth", 7),
                    "{}",
                    r.log
                );
            }
            Err(e) => assert!(
                format!("{e:#}").contains("already exists in cache"),
                "unexpected error re-sending an included tx: {e:#}"
            ),
        }
        // Through the client, CometBFT's bare "Internal error" for it becomes a refusal with
        // the code Cosmos gives it (sdk 19) and a log that says what happened.
        let again = net.clients[1]
            .broadcast(signed_send("alice", &to, 5_000, &signer, seq))
            .await
            .expect_err("the same bytes a third time");
        let refused = again
            .downcast_ref::<gonka_client::TxRejected>()
            .unwrap_or_else(|| panic!("not a refusal: {again:#}"));
        assert_eq!(
            (refused.codespace.as_str(), refused.code),
            ("sdk", 19),
            "{refused}"
        );
        assert!(refused.log.contains("already submitted"), "{refused}");

        // A few blocks later: nothing refused was included, and alice paid for one tx only.
        let now = net.height(0).await;
        net.wait_all_heights(now + 3, BLOCKS_TIMEOUT).await;
        for hash in [replay_hash, tampered_hash, future_hash] {
            for i in 0..4 {
                let found = net.clients[i]
                    .find_tx(hash)
                    .await
                    .unwrap_or_else(|e| panic!("{e:#}"));
                assert!(
                    found.is_none(),
                    "refused tx {hash} was included: {found:?} ({})",
                    net.logs_of(i)
                );
            }
        }
        for i in 0..4 {
            assert_eq!(
                net.signer(i, "alice").await.sequence,
                seq + 1,
                "{}",
                net.logs_of(i)
            );
            assert_eq!(net.balance(i, &to).await, 5_000, "{}", net.logs_of(i));
            assert_eq!(
                net.balance(i, &addr("alice")).await,
                START_BALANCE - 5_000 - MIN_FEE,
                "{}",
                net.logs_of(i)
            );
        }
    });
}
