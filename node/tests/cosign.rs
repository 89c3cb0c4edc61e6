//! `POST /gonka/v1/cosign` over a real socket: the node co-signs a batch that shows its host's
//! whole chain of its own receipts at the chain's price, and refuses anything else with a
//! 400 naming why (or 404 when it is not set up to co-sign).

use std::net::SocketAddr;

use gonka_client::bls::crypto::{SecretKey, Signature};
use gonka_client::keys::well_known_mnemonic;
use gonka_client::settlement::{Batch, ModelTerms, Served};
use gonka_client::Key;
use gonka_node::cosign::Cosigner;
use gonka_node::testing::{served_record, start_receipting_node};
use gonka_proto::settlement::{CosignRequest, CosignResponse, LeafProof};
use gonka_proto::signing::batch_sign_bytes;
use k256::ecdsa::SigningKey;
use prost::Message;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const CHAIN: &str = "cosign-test";
const NODE: &str = "node-a";
const PRICE: u128 = 3;

fn key(label: &str) -> Key {
    Key::from_mnemonic(&well_known_mnemonic(label)).unwrap()
}

fn node_key() -> SigningKey {
    SigningKey::from_slice(&[21; 32]).unwrap()
}

fn host_bls() -> SecretKey {
    SecretKey::from_seed(&[5; 32])
}

/// A node of host `host-a` that co-signs when `cosigning`.
async fn start(cosigning: bool) -> SocketAddr {
    let cosigner = cosigning.then(|| Cosigner {
        bls: host_bls(),
        chain_id: CHAIN.into(),
        models: [(
            gonka_node::DEFAULT_MODEL_ID.to_string(),
            ModelTerms {
                price_per_token: PRICE,
                work_per_token: 0,
            },
        )]
        .into(),
        max_record_age_secs: 1_000_000_000,
    });
    let host = key("host-a").address().to_string();
    start_receipting_node(NODE, &host, node_key(), cosigner).await
}

/// A record of request `nonce`, executed by node `node` of `host` signing with `executor`.
fn served(nonce: &str, host: &str, node: &str, executor: &SigningKey, tokens: u64) -> Served {
    let ta = key("ta").address().to_string();
    served_record(
        CHAIN,
        &ta,
        &key("requester"),
        executor,
        node,
        host,
        nonce,
        tokens,
        PRICE,
    )
}

/// Three records of host-a (this node) and two of host-b.
fn batch() -> Batch {
    let (a, b) = (
        key("host-a").address().to_string(),
        key("host-b").address().to_string(),
    );
    let other = SigningKey::from_slice(&[22; 32]).unwrap();
    let served = vec![
        served("r1", &a, NODE, &node_key(), 3),
        served("r2", &b, "node-b", &other, 4),
        served("r3", &a, NODE, &node_key(), 5),
        served("r4", &b, "node-b", &other, 6),
        served("r5", &a, NODE, &node_key(), 7),
    ];
    Batch::build(key("ta").address(), 1, served).unwrap()
}

fn leaves_of(batch: &Batch, host: &str) -> Vec<LeafProof> {
    (0..batch.leaves.len() as u64)
        .filter(|&i| batch.leaves[i as usize].executor_host == host)
        .map(|i| batch.leaf_proof(i).unwrap())
        .collect()
}

/// POSTs `body` to /gonka/v1/cosign; the status and the raw body.
async fn post(addr: SocketAddr, body: &[u8]) -> (u16, Vec<u8>) {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "POST /gonka/v1/cosign HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/x-protobuf\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(body).await.unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await.unwrap();
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let status = std::str::from_utf8(&raw[9..12]).unwrap().parse().unwrap();
    (status, raw[split + 4..].to_vec())
}

fn request(batch: &Batch, leaves: Vec<LeafProof>) -> Vec<u8> {
    CosignRequest {
        batch: Some(batch.msg.clone()),
        leaves,
    }
    .encode_to_vec()
}

#[tokio::test]
async fn the_node_co_signs_its_hosts_honest_chain() {
    let addr = start(true).await;
    let batch = batch();
    let host = key("host-a").address().to_string();
    let (status, body) = post(addr, &request(&batch, leaves_of(&batch, &host))).await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let answer = CosignResponse::decode(body.as_slice()).unwrap();
    let signature = Signature::from_bytes(&answer.signature).unwrap();
    let message = batch_sign_bytes(CHAIN, &batch.msg);
    assert!(host_bls().public_key().verify(&message, &signature));
}

#[tokio::test]
async fn the_node_refuses_what_its_host_would_be_blamed_for() {
    let addr = start(true).await;
    let batch = batch();
    let host = key("host-a").address().to_string();
    let mine = leaves_of(&batch, &host);
    let refused = |body: Vec<u8>| String::from_utf8_lossy(&body).into_owned();
    // A leaf of its chain withheld.
    let (status, body) = post(addr, &request(&batch, mine[1..].to_vec())).await;
    assert_eq!(status, 400, "{}", refused(body.clone()));
    assert!(refused(body).contains("batch_refused"));
    // Its line inflated.
    let mut inflated = batch.clone();
    let line = inflated
        .msg
        .hosts
        .iter_mut()
        .find(|l| l.host == host)
        .unwrap();
    line.work_units += 1;
    let (status, _) = post(addr, &request(&inflated, mine.clone())).await;
    assert_eq!(status, 400);
    // Another host's leaves shown as its own.
    let other = key("host-b").address().to_string();
    let (status, _) = post(addr, &request(&batch, leaves_of(&batch, &other))).await;
    assert_eq!(status, 400);
    // Its own honest work, settled by a transfer agent the requests did not name (the leaf
    // breaks a rule of its own: anyone could void the batch and slash the host).
    let served: Vec<Served> = batch
        .leaves
        .iter()
        .map(|l| Served::of_leaf(l).unwrap())
        .collect();
    let poacher = Batch::build(key("poacher").address(), 1, served).unwrap();
    let (status, body) = post(addr, &request(&poacher, leaves_of(&poacher, &host))).await;
    assert_eq!(status, 400);
    assert!(
        refused(body.clone()).contains("signed for transfer agent"),
        "{}",
        refused(body)
    );
    // Not protobuf at all.
    let (status, body) = post(addr, b"{\"batch\": 1}").await;
    assert_eq!(status, 400, "{}", refused(body));
}

#[tokio::test]
async fn a_node_off_chain_does_not_co_sign() {
    let addr = start(false).await;
    let batch = batch();
    let host = key("host-a").address().to_string();
    let (status, body) = post(addr, &request(&batch, leaves_of(&batch, &host))).await;
    assert_eq!(status, 404);
    assert!(String::from_utf8_lossy(&body).contains("cosign_disabled"));
}

/// A host's share of a busy batch is larger than an inference request may be (1 MiB): the
/// co-sign limit is its own, so the node still co-signs it (with the inference limit the
/// transfer agent's batches were refused with 413 for good once a host served some
/// hundreds of records between two of them, each refused batch coming back larger).
#[tokio::test]
async fn a_hosts_share_larger_than_an_inference_request_is_co_signed() {
    let addr = start(true).await;
    let host = key("host-a").address().to_string();
    let served: Vec<Served> = (0..1_200)
        .map(|i| served(&format!("busy-{i}"), &host, NODE, &node_key(), 3))
        .collect();
    let batch = Batch::build(key("ta").address(), 1, served).unwrap();
    let body = request(&batch, leaves_of(&batch, &host));
    assert!(body.len() > 1024 * 1024, "{} bytes", body.len());
    let (status, answer) = post(addr, &body).await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&answer));
    let signature = CosignResponse::decode(answer.as_slice()).unwrap().signature;
    let signature = Signature::from_bytes(&signature).unwrap();
    let message = batch_sign_bytes(CHAIN, &batch.msg);
    assert!(host_bls().public_key().verify(&message, &signature));
}
