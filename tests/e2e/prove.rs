//! Verified reads on a real network: `gonkad query ... --prove` through a proxy in front of a
//! node's RPC that can tamper with what the node says. The trusted header comes from another
//! node, never through the proxy.

use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::routing::post;
use axum::Router;
use base64::Engine as _;
use gonka_proto::bank::{Coin, QueryBalanceResponse};
use prost::Message;
use serde_json::Value;
use tendermint_rpc::Client as _;

use crate::support::{self, addr, Net, START_BALANCE};

/// What the proxy changes in the node's answers.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Tamper {
    Nothing,
    /// The value of every `abci_query` answer (a balance of 1 ngnk more).
    Value,
    /// The app hash in every header `commit` returns.
    Header,
}

struct Proxy {
    node: String,
    tamper: Mutex<Tamper>,
    http: reqwest::Client,
}

fn tamper_answer(tamper: Tamper, request: &Value, answer: &mut Value) {
    let method = request["method"].as_str().unwrap_or_default();
    let path = request["params"]["path"].as_str().unwrap_or_default();
    let height: u64 = request["params"]["height"]
        .as_str()
        .and_then(|h| h.parse().ok())
        .unwrap_or(0);
    match (tamper, method) {
        // A stored Coin (`/store/key`) or a module's QueryBalanceResponse.
        (Tamper::Value, "abci_query") => {
            let value = &mut answer["result"]["response"]["value"];
            let b64 = base64::engine::general_purpose::STANDARD;
            let bytes = b64.decode(value.as_str().unwrap_or_default()).unwrap();
            let more = |coin: &mut Coin| {
                coin.amount = (coin.amount.parse::<u128>().unwrap() + 1).to_string();
            };
            let tampered = if path == "/store/key" {
                let mut coin = Coin::decode(bytes.as_slice()).unwrap();
                more(&mut coin);
                coin.encode_to_vec()
            } else {
                let mut response = QueryBalanceResponse::decode(bytes.as_slice()).unwrap();
                more(response.balance.as_mut().unwrap());
                response.encode_to_vec()
            };
            *value = Value::String(b64.encode(tampered));
        }
        // Above the trusted height only: the light client, not the trust check, must catch it.
        (Tamper::Header, "commit") if height > 2 => {
            answer["result"]["signed_header"]["header"]["app_hash"] =
                Value::String("AB".repeat(32));
        }
        _ => {}
    }
}

async fn relay(State(proxy): State<Arc<Proxy>>, body: String) -> String {
    let request: Value = serde_json::from_str(&body).unwrap();

    let answer = proxy
        .http
        .post(&proxy.node)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let mut answer: Value = serde_json::from_str(&answer).unwrap();
    let tamper = *proxy.tamper.lock().unwrap();
    tamper_answer(tamper, &request, &mut answer);
    answer.to_string()
}

#[test]
fn prove_verifies_reads_and_catches_a_tampering_node() {
    support::run(async {
        let net = Net::start("prove", &["alice", "bob"]).await;
        // bob becomes a stake participant, whose record is proven below.
        let bob = addr("bob");
        net.tx_ok(
            0,
            "bob",
            vec![gonka_client::tx::msg_stake(
                &bob,
                1_000 * 1_000_000_000,
                "bob",
                None,
            )],
            "bob stakes",
        )
        .await;
        let proxy = Arc::new(Proxy {
            node: net.node(0).rpc_url.clone(),
            tamper: Mutex::new(Tamper::Nothing),
            http: reqwest::Client::new(),
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let proxied = format!("http://{}", listener.local_addr().unwrap());
        let app = Router::new()
            .route("/", post(relay))
            .with_state(proxy.clone());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

        // The trusted header: height 2 as node 1 reports it, not through the proxy.
        let trusted = net.clients[1]
            .http()
            .commit(tendermint::block::Height::from(2u32))
            .await
            .unwrap()
            .signed_header
            .header
            .hash()
            .to_string();
        net.wait_for_height(0, 5, std::time::Duration::from_secs(60))
            .await;
        let alice = addr("alice");
        let query = |what: &[&str]| {
            let mut args = vec!["--node", &proxied, "--output", "json", "query"];
            args.extend_from_slice(what);
            args.extend_from_slice(&["--prove", "--trust-height", "2", "--trust-hash", &trusted]);
            support::gonkad(&args)
        };

        let honest = query(&["bank", "balance", &alice]);
        assert!(honest.status.success(), "{honest:?}");
        let honest: Value = serde_json::from_slice(&honest.stdout).unwrap();
        assert_eq!(honest["amount"], START_BALANCE.to_string(), "{honest}");
        assert!(
            honest["verified_at_height"].as_u64().unwrap() >= 4,
            "{honest}"
        );
        let account = query(&["auth", "account", &alice]);
        assert!(account.status.success(), "{account:?}");
        let account: Value = serde_json::from_slice(&account.stdout).unwrap();
        assert_eq!(account["address"], alice.as_str(), "{account}");
        // A genesis validator's participant record, proven and printed as the module does.
        let operator = bob.clone();
        let participant = query(&["stake", "participant", &operator]);
        assert!(participant.status.success(), "{participant:?}");
        let participant: Value = serde_json::from_slice(&participant.stdout).unwrap();
        assert_eq!(
            participant["participant"]["operator"],
            operator.as_str(),
            "{participant}"
        );
        assert!(
            participant["verified_at_height"].as_u64().is_some(),
            "{participant}"
        );
        // A proven absence is said as such.
        let none = query(&["settlement", "escrow", &alice, &operator]);
        let stderr = String::from_utf8_lossy(&none.stderr);
        assert!(
            !none.status.success()
                && stderr.contains("holds no escrow")
                && stderr.contains("verified at height"),
            "{stderr}"
        );
        // An address with no balance is proven absent: 0, verified.
        let nobody = addr("prove-nobody");
        let empty = query(&["bank", "balance", &nobody]);
        let empty: Value = serde_json::from_slice(&empty.stdout).unwrap();
        assert_eq!(empty["amount"], "0", "{empty}");

        // A node that changes the value is caught by the proof.
        *proxy.tamper.lock().unwrap() = Tamper::Value;
        let lied = query(&["bank", "balance", &alice]);
        let stderr = String::from_utf8_lossy(&lied.stderr);
        assert!(
            !lied.status.success(),
            "a tampered value was accepted: {stderr}"
        );
        assert!(stderr.contains("tampered"), "{stderr}");
        // Without --prove the same node's lie goes through: the proxy does tamper.
        let unproven = support::gonkad_json(&[
            "--node", &proxied, "--output", "json", "query", "bank", "balance", &alice,
        ]);
        assert_eq!(
            unproven["amount"],
            (START_BALANCE + 1).to_string(),
            "{unproven}"
        );

        // A node that changes a header's app hash is caught by the light client.
        *proxy.tamper.lock().unwrap() = Tamper::Header;
        let lied = query(&["bank", "balance", &alice]);
        let stderr = String::from_utf8_lossy(&lied.stderr);
        assert!(
            !lied.status.success(),
            "a tampered header was accepted: {stderr}"
        );
        assert!(stderr.contains("does not verify"), "{stderr}");

        // A wrong trusted hash is refused before anything is read.
        *proxy.tamper.lock().unwrap() = Tamper::Nothing;
        let wrong = support::gonkad(&[
            "--node",
            &proxied,
            "query",
            "bank",
            "balance",
            &alice,
            "--prove",
            "--trust-height",
            "2",
            "--trust-hash",
            &"00".repeat(32),
        ]);
        let stderr = String::from_utf8_lossy(&wrong.stderr);
        assert!(
            !wrong.status.success() && stderr.contains("not the trusted"),
            "{stderr}"
        );
    });
}
