//! The bad-input catalogue: inputs a stranger can send to the chain (txs broadcast to a real
//! node, `abci_query`) and to the sidecars (a transfer agent and an ML node on real sockets),
//! each answered with its own code — an ABCI `(codespace, code)` with a readable log, or an
//! HTTP status with an OpenAI-style error — and none of them changing any state: the senders'
//! sequences and balances are the same afterwards, and the TA served nothing.
//!
//! Each row names the input and the answer it must get; the test prints the table.

use std::net::SocketAddr;
use std::time::{SystemTime, UNIX_EPOCH};

use gonka_client::request::{sign_request, RequestTerms};
use gonka_client::tx::{msg_register_node, msg_stake, msg_unjail, NodeSpec};
use gonka_client::{msg_send, sign, Any, GasFee, SignerData};
use gonka_node::{self as ml_node, MlNodeConfig, DEFAULT_MODEL_ID};
use gonka_ta::{server, TaConfig, TaNodeConfig, TransferAgent};
use prost::Message;
use tendermint_rpc::Client as _;
use tokio::net::TcpListener;

use crate::support::{addr, key, tx_fee, Net};

/// What one bad input got.
struct Answer {
    input: &'static str,
    expected: String,
    got: String,
}

#[derive(Default)]
struct Catalogue(Vec<Answer>);

impl Catalogue {
    fn record(&mut self, input: &'static str, expected: impl Into<String>, got: impl Into<String>) {
        self.0.push(Answer {
            input,
            expected: expected.into(),
            got: got.into(),
        });
    }

    /// Prints the table and fails on any row whose answer is not the expected one.
    fn check(&self) {
        eprintln!("{:<58} {:<24} got", "bad input", "expected");
        for a in &self.0 {
            eprintln!("{:<58} {:<24} {}", a.input, a.expected, a.got);
        }
        let wrong: Vec<&Answer> = self.0.iter().filter(|a| a.got != a.expected).collect();
        assert!(
            wrong.is_empty(),
            "answers differ from the catalogue: {:?}",
            wrong
                .iter()
                .map(|a| format!("{}: expected {}, got {}", a.input, a.expected, a.got))
                .collect::<Vec<_>>()
        );
        assert!(self.0.len() >= 30, "only {} bad inputs", self.0.len());
    }
}

/// Broadcasts `tx` with `broadcast_tx_sync` and names its answer: `codespace code` (with a
/// log, or `no log!`), `ok`, or the RPC error.
async fn broadcast(net: &Net, tx: Vec<u8>) -> String {
    match net.clients[0].http().broadcast_tx_sync(tx).await {
        Ok(r) if r.code.is_ok() => "ok".into(),
        Ok(r) if r.log.trim().is_empty() => format!("{} {} no log!", r.codespace, r.code.value()),
        Ok(r) => format!("{} {}", r.codespace, r.code.value()),
        Err(e) => match e.to_string() {
            text if text.contains("400 Bad Request") => "rpc: 400".into(),
            text => format!("rpc: {}", text.lines().next().unwrap_or_default()),
        },
    }
}

/// Runs an `abci_query` and names its answer as [`broadcast`] does.
async fn query(net: &Net, path: &str, data: Vec<u8>, height: u32) -> String {
    let height = (height > 0).then(|| tendermint::block::Height::from(height));
    match net.clients[0]
        .http()
        .abci_query(Some(path.into()), data, height, false)
        .await
    {
        Ok(r) if r.code.is_ok() => "ok".into(),
        Ok(r) if r.log.trim().is_empty() => format!("{} {} no log!", r.codespace, r.code.value()),
        Ok(r) => format!("{} {}", r.codespace, r.code.value()),
        Err(e) => format!("rpc: {e}"),
    }
}

/// Alice's tx of `msgs` signed with `signer` and `fee`.
fn tx(msgs: Vec<Any>, signer: &SignerData, fee: GasFee) -> Vec<u8> {
    sign(key("alice"), msgs, signer, fee, "").unwrap()
}

async fn chain_inputs(net: &Net, table: &mut Catalogue) {
    let (alice, bob) = (addr("alice"), addr("bob"));
    let signer = net.signer(0, "alice").await;
    let send = || vec![msg_send(&alice, &bob, 1)];
    let good = tx(send(), &signer, tx_fee());

    table.record("empty tx", "auth 15", broadcast(net, Vec::new()).await);
    table.record(
        "random bytes",
        "auth 2",
        broadcast(net, vec![0xde, 0xad, 0xbe, 0xef, 0x01]).await,
    );
    table.record(
        "truncated tx",
        "auth 2",
        broadcast(net, good[..good.len() / 2].to_vec()).await,
    );
    let mut flipped = good.clone();
    let last = flipped.len() - 3;
    flipped[last] ^= 0x40;
    table.record(
        "signature bit flipped",
        "auth 4",
        broadcast(net, flipped).await,
    );
    let other_chain = SignerData {
        chain_id: "another-chain".into(),
        ..signer.clone()
    };
    table.record(
        "signed for another chain",
        "auth 5",
        broadcast(net, tx(send(), &other_chain, tx_fee())).await,
    );
    let ahead = SignerData {
        sequence: signer.sequence + 5,
        ..signer.clone()
    };
    table.record(
        "sequence ahead",
        "auth 8",
        broadcast(net, tx(send(), &ahead, tx_fee())).await,
    );
    let wrong_number = SignerData {
        account_number: signer.account_number + 1,
        ..signer.clone()
    };
    table.record(
        "wrong account number",
        "auth 6",
        broadcast(net, tx(send(), &wrong_number, tx_fee())).await,
    );
    let cheap = GasFee {
        amount: tx_fee().amount - 1,
        ..tx_fee()
    };
    table.record(
        "fee below the minimum gas price",
        "auth 9",
        broadcast(net, tx(send(), &signer, cheap)).await,
    );
    let no_gas = GasFee {
        gas_limit: 10,
        amount: tx_fee().amount,
    };
    table.record(
        "gas limit too low",
        "sdk 11",
        broadcast(net, tx(send(), &signer, no_gas)).await,
    );
    let unknown = Any {
        type_url: "/gonka.nothing.v1.MsgNothing".into(),
        value: vec![1, 2, 3],
    };
    table.record(
        "unknown message type",
        "auth 3",
        broadcast(net, tx(vec![unknown], &signer, tx_fee())).await,
    );
    table.record(
        "no messages",
        "auth 15",
        broadcast(net, tx(vec![], &signer, tx_fee())).await,
    );
    table.record(
        // Bob's message under Alice's key is checked against Bob's account, whose number
        // Alice's signature does not carry.
        "bob's message signed by alice",
        "auth 6",
        broadcast(net, tx(vec![msg_send(&bob, &alice, 1)], &signer, tx_fee())).await,
    );
    table.record(
        "send to an invalid address",
        "auth 12",
        broadcast(
            net,
            tx(
                vec![msg_send(&alice, "gonka1notanaddress", 1)],
                &signer,
                tx_fee(),
            ),
        )
        .await,
    );
    table.record(
        "send of zero",
        "bank 3",
        broadcast(net, tx(vec![msg_send(&alice, &bob, 0)], &signer, tx_fee())).await,
    );
    table.record(
        "send of more than the balance",
        "bank 4",
        broadcast(
            net,
            tx(
                vec![msg_send(&alice, &bob, u128::MAX / 2)],
                &signer,
                tx_fee(),
            ),
        )
        .await,
    );
    let mut beacon = gonka_bls::beacon::TX_PREFIX.to_vec();
    beacon.extend([8, 1, 16, 1]);
    table.record(
        "a beacon tx sent by a user",
        "auth 2",
        broadcast(net, beacon).await,
    );
    table.record(
        "a 2 MB tx (over the RPC body limit)",
        "rpc: 400",
        broadcast(net, vec![7; 2 << 20]).await,
    );
    table.record(
        "stake below the minimum",
        "stake 3",
        broadcast(
            net,
            tx(vec![msg_stake(&alice, 1, "", None)], &signer, tx_fee()),
        )
        .await,
    );
    table.record(
        "unjail by an account that is no participant",
        "stake 7",
        broadcast(net, tx(vec![msg_unjail(&alice)], &signer, tx_fee())).await,
    );
    let node = msg_register_node(
        &alice,
        &NodeSpec {
            node_id: "n1".into(),
            models: vec![DEFAULT_MODEL_ID.into()],
            vram_mib: 0,
            bandwidth_mbps: 0,
            max_concurrency: 1,
            endpoint: "ftp://not-http".into(),
            pubkey: vec![2; 33],
            key_proof: vec![0; 64],
        },
    );
    table.record(
        "register an ML node with a non-HTTP URL",
        "inference 10",
        broadcast(net, tx(vec![node], &signer, tx_fee())).await,
    );
    // CometBFT refuses a tx its cache holds with a bare JSON-RPC "Internal error"; the
    // client (as the node's gRPC and REST) gives it Cosmos's code for a duplicate.
    table.record("the same good tx twice", "sdk 19", {
        assert_eq!(broadcast(net, good.clone()).await, "ok");
        match net.clients[0].broadcast(good).await {
            Ok(_) => "ok".to_string(),
            Err(e) => match e.downcast_ref::<gonka_client::TxRejected>() {
                Some(rejected) => format!("{} {}", rejected.codespace, rejected.code),
                None => format!("error: {e}"),
            },
        }
    });

    table.record(
        "query of an unknown path",
        "sdk 5",
        query(net, "/nothing/here", vec![], 0).await,
    );
    table.record(
        "query with undecodable data",
        "sdk 2",
        query(net, "/bank/balance", vec![0xff; 7], 0).await,
    );
    let balances = gonka_proto::bank::QueryAllBalancesRequest {
        address: alice.clone(),
        ..Default::default()
    }
    .encode_to_vec();
    table.record(
        "query at a height not committed",
        "sdk 5",
        query(net, "/bank/balances", balances.clone(), u32::MAX / 2).await,
    );
    table.record(
        "list query at a past height",
        "sdk 5",
        query(net, "/bank/balances", balances, 1).await,
    );
}

/// A transfer agent (chain-less) in front of a reference ML node, both on loopback.
async fn sidecars() -> (String, SocketAddr) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let node = listener.local_addr().unwrap();
    // A node that serves only its host and the transfer agents it knows, as on chain.
    let callers = ml_node::access::Callers::new(&addr("e2e-bad-inputs-host"));
    callers.set_transfer_agents([addr("e2e-bad-inputs-ta")]);
    let config = MlNodeConfig {
        listen: node,
        max_tokens_cap: 64,
        callers: Some(callers),
        ..MlNodeConfig::default()
    };
    tokio::spawn(ml_node::serve(listener, config, std::future::pending()));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let ta = TransferAgent::new(TaConfig {
        address: addr("e2e-bad-inputs-ta"),
        public_url: url.clone(),
        nodes: vec![TaNodeConfig {
            id: "node-0".into(),
            url: format!("http://{node}"),
            models: vec![DEFAULT_MODEL_ID.into()],
            vram_mib: 0,
            bandwidth_mbps: 0,
            max_concurrency: 2,
        }],
        ..TaConfig::default()
    })
    .unwrap();
    tokio::spawn(server::serve(listener, ta, std::future::pending()));
    (url, node)
}

/// `status code` of an HTTP answer whose body is an OpenAI-style error with a message and a
/// code (`status no error body!` otherwise).
async fn http_answer(response: reqwest::Response) -> String {
    let status = response.status().as_u16();
    let bytes = response.bytes().await.unwrap_or_default();
    let body: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or_default();
    let error = &body["error"];
    match (error["message"].as_str(), error["code"].as_str()) {
        (Some(message), Some(code)) if !message.is_empty() => format!("{status} {code}"),
        _ => format!("{status} no error body!"),
    }
}

/// The answer to a POST of a `length`-byte body, read while the body is still being
/// written: a server that refuses past its bound answers and closes before reading it all,
/// which a client that only reads after writing (reqwest) may see as a broken pipe instead.
async fn oversized_post(base: &str, path: &str, length: usize) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let addr = base.trim_start_matches("http://").to_string();
    let stream = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let (mut reader, mut writer) = stream.into_split();
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {length}\r\nConnection: close\r\n\r\n"
    );
    let writing = tokio::spawn(async move {
        let _ = writer.write_all(head.as_bytes()).await;
        let chunk = vec![b'x'; 64 << 10];
        for _ in 0..length / chunk.len() {
            if writer.write_all(&chunk).await.is_err() {
                break; // the server stopped reading: its answer is on its way
            }
        }
    });
    let mut response = Vec::new();
    let mut chunk = [0u8; 4096];
    let read = async {
        loop {
            match reader.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(n) => response.extend_from_slice(&chunk[..n]),
            }
            if String::from_utf8_lossy(&response).contains("\"error\"") && response.ends_with(b"}")
            {
                break;
            }
        }
    };
    let _ = tokio::time::timeout(std::time::Duration::from_secs(30), read).await;
    writing.abort();
    let text = String::from_utf8_lossy(&response);
    let status = text
        .split_whitespace()
        .nth(1)
        .unwrap_or_default()
        .to_string();
    let body: serde_json::Value = text
        .split_once("\r\n\r\n")
        .and_then(|(_, body)| serde_json::from_str(body).ok())
        .unwrap_or_default();
    match body["error"]["code"].as_str() {
        Some(code) => format!("{status} {code}"),
        None => format!("{status} no error body!"),
    }
}

async fn sidecar_inputs(table: &mut Catalogue) {
    let (ta, node) = sidecars().await;
    let http = reqwest::Client::new();
    let chat = format!("{ta}/v1/chat/completions");
    let body = serde_json::json!({
        "model": DEFAULT_MODEL_ID,
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 8,
    })
    .to_string();
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    // A transfer agent off chain serves the empty chain id.
    let terms = |nonce: &str, timestamp: u64, model: &str| RequestTerms {
        chain_id: String::new(),
        body_hash: [0; 32],
        timestamp,
        nonce: nonce.into(),
        commission: 0,
        transfer_agent: addr("e2e-bad-inputs-ta"),
        model: model.into(),
        max_price_per_token: 1_000,
        max_completion_tokens: 8,
        max_prompt_tokens: 4_096,
    };
    let signed = |body: &str, terms: RequestTerms| {
        sign_request(key("alice"), body.as_bytes(), terms).unwrap()
    };
    let post = |headers: Vec<(&'static str, String)>, body: String| {
        let mut request = http
            .post(&chat)
            .header("content-type", "application/json")
            .body(body);
        for (name, value) in headers {
            request = request.header(name, value);
        }
        request.send()
    };

    table.record(
        "TA: unsigned chat request",
        "401 missing_auth_header",
        http_answer(post(vec![], body.clone()).await.unwrap()).await,
    );
    // Alice's headers with Bob's signature of the same terms.
    let by_bob = sign_request(
        key("bob"),
        body.as_bytes(),
        terms("n-forged", now, DEFAULT_MODEL_ID),
    )
    .unwrap();
    let mut forged = signed(&body, terms("n-forged", now, DEFAULT_MODEL_ID));
    for ((name, value), (_, bobs)) in forged.iter_mut().zip(by_bob) {
        if *name == gonka_client::request::HEADER_SIGNATURE {
            *value = bobs;
        }
    }
    table.record(
        "TA: forged signature",
        "401 invalid_signature",
        http_answer(post(forged, body.clone()).await.unwrap()).await,
    );
    let headers = signed(&body, terms("n-altered", now, DEFAULT_MODEL_ID));
    let altered = body.replace("hi", "ho");
    table.record(
        "TA: body altered after signing",
        "401 invalid_signature",
        http_answer(post(headers, altered).await.unwrap()).await,
    );
    let stale = signed(&body, terms("n-stale", now - 3_600, DEFAULT_MODEL_ID));
    table.record(
        "TA: timestamp an hour old",
        "401 stale_timestamp",
        http_answer(post(stale, body.clone()).await.unwrap()).await,
    );
    let other_model = "gonka/nothing-1";
    let body_other = body.replace(DEFAULT_MODEL_ID, other_model);
    let headers = signed(&body_other, terms("n-model", now, other_model));
    table.record(
        "TA: a model no node serves",
        "404 model_not_found",
        http_answer(post(headers, body_other).await.unwrap()).await,
    );
    let garbage = "{not json";
    let headers = signed(garbage, terms("n-json", now, DEFAULT_MODEL_ID));
    table.record(
        "TA: signed body that is not JSON",
        "400 invalid_json",
        http_answer(post(headers, garbage.into()).await.unwrap()).await,
    );
    table.record(
        "TA: a 9 MiB body",
        "413 request_too_large",
        oversized_post(&ta, "/v1/chat/completions", 9 << 20).await,
    );
    table.record(
        "TA: unknown route",
        "404 not_found",
        http_answer(http.get(format!("{ta}/v1/nothing")).send().await.unwrap()).await,
    );
    table.record(
        "ML node: chat request from a stranger (no call signature)",
        "401 missing_auth_header",
        http_answer(
            http.post(format!("http://{node}/v1/chat/completions"))
                .header("content-type", "application/json")
                .body(body.clone())
                .send()
                .await
                .unwrap(),
        )
        .await,
    );
}

#[test]
fn every_bad_input_gets_its_code_and_changes_nothing() {
    crate::support::run(async {
        let net = Net::start("bad-inputs", &["alice", "bob"]).await;
        let before = (
            net.signer(0, "alice").await.sequence,
            net.balance(0, &addr("bob")).await,
        );
        let mut table = Catalogue::default();
        chain_inputs(&net, &mut table).await;
        sidecar_inputs(&mut table).await;
        table.check();
        // Nothing changed but the one good tx (sent twice, included once): wait for it to be
        // in a block (on a busy machine it may take a few), then nothing else moved.
        let sequence = crate::inference::eventually("the good tx in a block", || async {
            let sequence = net.signer(0, "alice").await.sequence;
            (sequence > before.0).then_some(sequence)
        })
        .await;
        let after = (sequence, net.balance(0, &addr("bob")).await);
        assert_eq!(after, (before.0 + 1, before.1 + 1));
    });
}
