//! What the benches share: a transfer agent in full chain mode, in-process. A fake CometBFT
//! RPC answers what the TA asks the chain (`status` for the chain id, `/auth/params` for the
//! gas price, `/settlement/escrow` with an escrow that covers everything), the ML nodes sign
//! receipts with registered keys, and the TA keeps its outbox and payload store in a redb
//! database in a temporary directory: so a request costs the TA what it costs on a chain
//! (escrow reservation, the call signed for the node, the receipt checked, the body and the
//! record made durable by the recorder's group commit) without a localnet. The committer
//! does not run: records stay in the outbox (off the request path either way).

#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use gonka_client::keys::well_known_mnemonic;
use gonka_client::request::{body_hash, RequestTerms};
use gonka_client::{unix_now, Chain, Key};
use gonka_proto::inference as pb;
use gonka_ta::escrow::EscrowBook;
use gonka_ta::payloads::{self, PayloadStore, Payloads};
use gonka_ta::recorder::Recorder;
use gonka_ta::settle::Outbox;
use gonka_ta::{Clock, Registry, TaConfig, TransferAgent};
use k256::ecdsa::SigningKey;
use prost::Message;
use serde_json::{json, Value};
use tokio::net::TcpListener;

/// The chain id the fake RPC reports.
pub const CHAIN_ID: &str = "bench-chain";
/// The model's price per token on the fake chain (ngnk).
pub const PRICE: u128 = 1;
/// The height every fake query answers at.
const HEIGHT: u64 = 100;

fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[(n >> (18 - 6 * i)) as usize & 63]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn abci(value: Option<Vec<u8>>) -> Value {
    let (code, value) = match value {
        Some(v) => (0, base64(&v)),
        None => (1, String::new()),
    };
    json!({"response": {
        "code": code, "codespace": if code == 0 { "" } else { "bench" }, "height": HEIGHT.to_string(),
        "index": "0", "info": "", "key": "", "log": "", "proofOps": null, "value": value,
    }})
}

fn status() -> Value {
    json!({
        "node_info": {
            "channels": "40202122233038606100",
            "id": "cf4a66aa29e5123abfdfbdf485da6788bb8e46d1",
            "listen_addr": "tcp://0.0.0.0:26656",
            "moniker": "bench",
            "network": CHAIN_ID,
            "other": {"rpc_address": "tcp://0.0.0.0:26657", "tx_index": "on"},
            "protocol_version": {"app": "1", "block": "11", "p2p": "8"},
            "version": "0.38.0"
        },
        "sync_info": {
            "catching_up": false,
            "earliest_app_hash": "0000000000000000",
            "earliest_block_hash": "6CD5CF4E23A49D9BC073D6F305D29D1B8B5193B534C237696D42FEA5AFBCD520",
            "earliest_block_height": "1",
            "earliest_block_time": "2023-05-17T14:12:48.347696215Z",
            "latest_app_hash": "0600000000000000",
            "latest_block_hash": "B647CF507155BADAC86FADD00E38B065C63A84953A847AA9FA99DB1CEE6C4DA9",
            "latest_block_height": HEIGHT.to_string(),
            "latest_block_time": "2023-05-17T14:14:48.530153458Z"
        },
        "validator_info": {
            "address": "2DD9F44FD9067555C322243C3C913BA7B51D2BE0",
            "pub_key": {"type": "tendermint/PubKeyEd25519", "value": "bNNlGls5R25wC3Sd8720F/3+7IZBhXcD22MNFtPk/v0="},
            "voting_power": "10"
        }
    })
}

fn answer(request: &Value) -> Value {
    let id = request["id"].clone();
    let result = match request["method"].as_str() {
        Some("status") => status(),
        Some("abci_query") => abci(match request["params"]["path"].as_str() {
            Some("/auth/params") => Some(
                gonka_proto::auth::QueryParamsResponse {
                    params: Some(gonka_proto::auth::Params {
                        min_gas_price: "0.01".into(),
                        ..Default::default()
                    }),
                }
                .encode_to_vec(),
            ),
            Some("/settlement/escrow") => Some(
                gonka_proto::settlement::QueryEscrowResponse {
                    escrow: Some(gonka_proto::settlement::Escrow {
                        balance: u64::MAX.to_string(),
                        expires_at: 1_000_000_000,
                        release_at: 2_000_000_000,
                        ..Default::default()
                    }),
                }
                .encode_to_vec(),
            ),
            _ => None,
        }),
        _ => {
            return json!({"jsonrpc": "2.0", "id": id,
                "error": {"code": -32601, "message": "Method not found", "data": ""}})
        }
    };
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// Starts the fake CometBFT RPC; returns its address.
pub async fn start_fake_chain() -> SocketAddr {
    let app = axum::Router::new().route(
        "/",
        axum::routing::post(|body: Bytes| async move {
            let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            axum::Json(answer(&request))
        }),
    );
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("local addr");
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

/// The receipt key of ML node `i` (registered on the fake chain).
pub fn node_key(i: usize) -> SigningKey {
    SigningKey::from_slice(&[u8::try_from(i + 1).expect("few nodes"); 32]).expect("a valid key")
}

/// The host of every bench ML node.
pub fn host() -> String {
    Key::from_mnemonic(&well_known_mnemonic("bench-host"))
        .expect("well-known key")
        .address()
        .to_string()
}

/// An ML node as the fake chain registers it.
pub struct ChainNode {
    pub id: String,
    pub addr: SocketAddr,
    pub max_concurrency: u32,
    pub model: String,
}

/// A transfer agent in chain mode over `nodes`, talking to the fake RPC at `rpc`, its
/// database in `dir`. Returns the TA and its account address (what requests are signed for).
pub async fn chain_ta(
    rpc: SocketAddr,
    nodes: &[ChainNode],
    config: TaConfig,
    dir: &std::path::Path,
) -> (Arc<TransferAgent>, String) {
    let key = Key::from_mnemonic(&well_known_mnemonic("bench-ta")).expect("well-known key");
    let chain = Arc::new(
        Chain::connect(&format!("http://{rpc}"), key)
            .await
            .expect("the fake chain answers"),
    );
    let db = Arc::new(redb::Database::create(dir.join("ta.redb")).expect("database"));
    let outbox = Arc::new(Outbox::in_database(db.clone()).expect("outbox"));
    let store = Arc::new(PayloadStore::in_database(db).expect("payload store"));
    let clock: Clock = Arc::new(unix_now);
    let recorder = Recorder::open(
        &dir.join("journal"),
        outbox.clone(),
        store.clone(),
        clock.clone(),
    )
    .expect("journal");
    let payloads = Payloads::new(store, payloads::chain_access(chain.clone()), clock);
    let escrows = EscrowBook::new(Duration::from_millis(5_000), 100_000);
    let mut models: Vec<pb::Model> = nodes
        .iter()
        .map(|n| pb::Model {
            id: n.model.clone(),
            price_per_token: PRICE.to_string(),
            ..pb::Model::default()
        })
        .collect();
    models.dedup_by(|a, b| a.id == b.id);
    let host = host();
    let registered = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| pb::Node {
            id: n.id.clone(),
            host: host.clone(),
            models: vec![n.model.clone()],
            max_concurrency: u64::from(n.max_concurrency),
            endpoint: format!("http://{}", n.addr),
            pubkey: node_key(i)
                .verifying_key()
                .to_encoded_point(true)
                .as_bytes()
                .to_vec(),
            ..Default::default()
        })
        .collect();
    let address = chain.address().to_string();
    let tas = vec![pb::TransferAgent {
        address: address.clone(),
        url: String::new(),
        pubkey: chain.pubkey(),
    }];
    let params = pb::Params {
        max_tokens_per_record: 4096,
        ..Default::default()
    };
    let registry = Registry::from_chain(models, registered, tas, &params);
    let ta =
        TransferAgent::with_chain(config, registry, chain, outbox, payloads, escrows, recorder);
    (ta, address)
}

/// The signed headers of `body` (its model and max_tokens are the terms) for the TA
/// `transfer_agent` on `chain_id`, now, with `nonce`.
pub fn sign_request(
    key: &Key,
    body: &[u8],
    chain_id: &str,
    transfer_agent: &str,
    max_price: u128,
    nonce: String,
) -> anyhow::Result<Vec<(&'static str, String)>> {
    let fields: Value = serde_json::from_slice(body)?;
    let terms = RequestTerms {
        chain_id: chain_id.to_string(),
        body_hash: body_hash(body),
        timestamp: unix_now(),
        nonce,
        commission: 0,
        transfer_agent: transfer_agent.to_string(),
        model: fields["model"].as_str().unwrap_or_default().to_string(),
        max_price_per_token: max_price,
        max_completion_tokens: fields["max_tokens"].as_u64().unwrap_or(64),
        max_prompt_tokens: gonka_proto::signing::prompt_token_bound(body),
    };
    gonka_client::request::sign_request(key, body, terms)
}

/// `max_tokens` of the stub's canned answer (completion tokens it reports).
pub const STUB_COMPLETION_TOKENS: u32 = 1;

/// A stand-in for an OpenAI-compatible server: answers every chat request with the same
/// completion, at once.
pub async fn start_stub(model: &str) -> SocketAddr {
    let answer = json!({
        "id": "chatcmpl-stub",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": "ok"},
            "finish_reason": "length",
        }],
        "usage": {"prompt_tokens": 26, "completion_tokens": STUB_COMPLETION_TOKENS,
                  "total_tokens": 26 + STUB_COMPLETION_TOKENS},
    });
    let app = axum::Router::new().route(
        "/v1/chat/completions",
        axum::routing::post(move |_body: Bytes| {
            let answer = answer.clone();
            async move { axum::Json(answer) }
        }),
    );
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("local addr");
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

/// Starts `count` ML nodes `ml-node-{i}` forwarding to `upstream` (the reference model when
/// `None`), each admitting `max_concurrency` requests; with `receipts`, each signs receipts
/// with [`node_key`] for [`host`], as a node registered on the fake chain does.
pub async fn start_nodes(
    upstream: Option<gonka_node::forward::Upstream>,
    count: usize,
    max_concurrency: usize,
    receipts: bool,
) -> Vec<ChainNode> {
    let mut nodes = Vec::new();
    for i in 0..count {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("local addr");
        let config = gonka_node::MlNodeConfig {
            listen: addr,
            node_id: format!("ml-node-{i}"),
            host: if receipts { host() } else { String::new() },
            response_key: receipts.then(|| node_key(i)),
            upstream: upstream.clone(),
            max_concurrency,
            ..gonka_node::MlNodeConfig::default()
        };
        let model = config.model_id.clone();
        tokio::spawn(gonka_node::serve(listener, config, std::future::pending()));
        nodes.push(ChainNode {
            id: format!("ml-node-{i}"),
            addr,
            max_concurrency: u32::try_from(max_concurrency).unwrap_or(u32::MAX),
            model,
        });
    }
    nodes
}
