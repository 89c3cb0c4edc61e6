//! The transfer agent collects its hosts' co-signatures of a committed batch from real ML
//! nodes on 127.0.0.1: hosts whose nodes co-sign are in the batch, a host whose node refuses,
//! cannot be reached or signs with a key other than its registered one is left out with its
//! records, and the aggregate verifies.

use std::collections::BTreeMap;
use std::time::Duration;

use gonka_client::bls::crypto::{fast_aggregate_verify, SecretKey};
use gonka_client::http::Limits;
use gonka_client::keys::well_known_mnemonic;
use gonka_client::settlement::Served;
use gonka_client::Key;
use gonka_node::cosign::Cosigner;
use gonka_node::testing::{served_record, start_receipting_node};
use gonka_proto::signing::batch_sign_bytes;
use gonka_ta::commit::{commit, HostEndpoint};
use k256::ecdsa::SigningKey;
use tokio::net::TcpListener;

const CHAIN: &str = "commit-test";
const PRICE: u128 = 2;

fn key(label: &str) -> Key {
    Key::from_mnemonic(&well_known_mnemonic(label)).unwrap()
}

/// Host `label`'s node `node-<label>`, receipts signed by `node_key(seed)`.
struct Host {
    address: String,
    node: String,
    seed: u8,
    bls: SecretKey,
}

impl Host {
    fn new(label: &str, seed: u8) -> Host {
        Host {
            address: key(label).address().to_string(),
            node: format!("node-{label}"),
            seed,
            bls: SecretKey::from_seed(&[seed; 32]),
        }
    }

    fn node_key(&self) -> SigningKey {
        SigningKey::from_slice(&[self.seed; 32]).unwrap()
    }

    /// Starts its ML node (co-signing when `cosigning`); its URL.
    async fn start(&self, cosigning: bool) -> String {
        let cosigner = cosigning.then(|| Cosigner {
            bls: self.bls.clone(),
            chain_id: CHAIN.into(),
            models: [(
                gonka_node::DEFAULT_MODEL_ID.to_string(),
                gonka_client::settlement::ModelTerms {
                    price_per_token: PRICE,
                    work_per_token: 0,
                },
            )]
            .into(),
            max_record_age_secs: 1_000_000_000,
        });
        let addr =
            start_receipting_node(&self.node, &self.address, self.node_key(), cosigner).await;
        format!("http://{addr}")
    }

    /// What the transfer agent knows of this host once its node listens at `node_url`.
    fn endpoint(&self, node_url: String) -> HostEndpoint {
        HostEndpoint {
            node_url,
            bls_key: self.bls.public_key(),
        }
    }

    fn served(&self, nonce: &str, tokens: u64) -> Served {
        let requester = key(&format!("requester-{nonce}"));
        let ta = key("ta").address().to_string();
        let node_key = self.node_key();
        served_record(
            CHAIN,
            &ta,
            &requester,
            &node_key,
            &self.node,
            &self.address,
            nonce,
            tokens,
            PRICE,
        )
    }
}

#[tokio::test]
async fn hosts_that_co_sign_are_in_the_batch_and_the_others_wait() {
    let (a, b, c, d) = (
        Host::new("host-a", 31),
        Host::new("host-b", 32),
        Host::new("host-c", 33),
        Host::new("host-d", 34),
    );
    let mut urls = BTreeMap::new();
    urls.insert(a.address.clone(), a.endpoint(a.start(true).await));
    urls.insert(b.address.clone(), b.endpoint(b.start(true).await));
    // c's node does not co-sign; d's node is not listening.
    urls.insert(c.address.clone(), c.endpoint(c.start(false).await));
    let closed = TcpListener::bind("127.0.0.1:0").await.unwrap();
    urls.insert(
        d.address.clone(),
        d.endpoint(format!("http://{}", closed.local_addr().unwrap())),
    );
    drop(closed);
    let served = vec![
        a.served("1", 3),
        b.served("2", 4),
        c.served("3", 5),
        a.served("4", 6),
        d.served("5", 7),
    ];
    let limits = Limits {
        connect: Duration::from_secs(1),
        first_byte: Duration::from_secs(5),
        total: Duration::from_secs(10),
        ..Limits::default()
    };
    let ta = key("ta").address().to_string();
    let committed = commit(&ta, CHAIN, 7, served, &urls, limits)
        .await
        .unwrap()
        .unwrap();
    let msg = &committed.msg;
    assert_eq!(msg.number, 7);
    assert_eq!(msg.record_count, 3, "a's two records and b's one");
    let mut hosts: Vec<&str> = msg.hosts.iter().map(|l| l.host.as_str()).collect();
    hosts.sort();
    let mut expected = vec![a.address.as_str(), b.address.as_str()];
    expected.sort();
    assert_eq!(hosts, expected);
    assert_eq!(
        committed.left_out.keys().collect::<Vec<_>>().len(),
        2,
        "{:?}",
        committed.left_out
    );
    assert!(committed.left_out[&c.address].contains("cosign_disabled"));
    // The aggregate is a's and b's signatures of this very message.
    let keys = [a.bls.public_key(), b.bls.public_key()];
    let signature = gonka_client::bls::crypto::Signature::from_bytes(&msg.host_signature).unwrap();
    assert!(fast_aggregate_verify(
        &keys,
        &batch_sign_bytes(CHAIN, msg),
        &signature
    ));
}

#[tokio::test]
async fn nothing_is_committed_when_no_host_co_signs() {
    let c = Host::new("host-c", 33);
    let mut urls = BTreeMap::new();
    urls.insert(c.address.clone(), c.endpoint(c.start(false).await));
    let ta = key("ta").address().to_string();
    let committed = commit(
        &ta,
        CHAIN,
        1,
        vec![c.served("1", 3)],
        &urls,
        Limits::default(),
    )
    .await
    .unwrap();
    assert!(committed.is_none());
}

/// A host whose node signs with a key other than the one the chain knows for it (garbage,
/// or a key it rotated) is left out before the batch goes on chain, where the aggregate
/// would fail the whole batch.
#[tokio::test]
async fn a_host_signing_with_another_key_is_left_out_before_the_chain_sees_it() {
    let (a, b) = (Host::new("host-a", 31), Host::new("host-b", 32));
    let mut urls = BTreeMap::new();
    urls.insert(a.address.clone(), a.endpoint(a.start(true).await));
    let mut wrong = b.endpoint(b.start(true).await);
    wrong.bls_key = SecretKey::from_seed(&[99; 32]).public_key();
    urls.insert(b.address.clone(), wrong);
    let ta = key("ta").address().to_string();
    let served = vec![a.served("1", 3), b.served("2", 4)];
    let committed = commit(&ta, CHAIN, 1, served, &urls, Limits::default())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(committed.msg.record_count, 1);
    assert_eq!(committed.msg.hosts[0].host, a.address);
    assert!(
        committed.left_out[&b.address].contains("registered BLS key"),
        "{:?}",
        committed.left_out
    );
    let signature =
        gonka_client::bls::crypto::Signature::from_bytes(&committed.msg.host_signature).unwrap();
    assert!(a
        .bls
        .public_key()
        .verify(&batch_sign_bytes(CHAIN, &committed.msg), &signature));
}
