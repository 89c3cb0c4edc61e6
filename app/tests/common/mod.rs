//! Shared fixture for the app's in-process tests: a funded genesis and signing helpers.

#![allow(dead_code)] // each test binary uses a different subset

use gonka_proto::query as q;
use std::collections::BTreeMap;
use std::sync::{Mutex, OnceLock};

use gonka_app::harness::TestChain;
use gonka_client::keys::well_known_mnemonic;
use gonka_client::{sign, Key, SignerData};
use gonka_proto::bank::{QueryBalanceRequest, QueryBalanceResponse};
use prost::Message;
use serde_json::json;

pub const CHAIN_ID: &str = "gonka-test";
pub const MIN_FEE: u128 = 1_000;
pub const START_BALANCE: u128 = 1_000_000_000;

/// The well-known key of `label`, derived once per test binary (PBKDF2 is slow).
pub fn key(label: &str) -> &'static Key {
    static KEYS: OnceLock<Mutex<BTreeMap<String, &'static Key>>> = OnceLock::new();
    let mut keys = KEYS.get_or_init(Default::default).lock().unwrap();
    keys.entry(label.to_string()).or_insert_with(|| {
        Box::leak(Box::new(
            Key::from_mnemonic(&well_known_mnemonic(label)).unwrap(),
        ))
    })
}

/// Genesis funding alice and bob with START_BALANCE and carol with less than one fee.
pub fn genesis() -> serde_json::Value {
    let funded = |label: &str, amount: u128| json!({"address": key(label).address(), "coins": [{"denom": "ngnk", "amount": amount.to_string()}]});
    json!({
        "auth": {"params": {"max_tx_bytes": 8192, "min_fee": MIN_FEE.to_string(), "max_msgs_per_tx": 8}},
        "bank": {"balances": [funded("alice", START_BALANCE), funded("bob", START_BALANCE), funded("carol", 500)]}
    })
}

pub struct Fixture {
    pub chain: TestChain,
    pub dir: tempfile::TempDir,
}

impl Fixture {
    pub fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let chain = TestChain::new(&dir.path().join("state.redb"), CHAIN_ID, &genesis()).unwrap();
        Fixture { chain, dir }
    }

    pub fn balance(&self, address: &str) -> u128 {
        let response = self.chain.query(
            <q::bank::Balance as gonka_proto::query::Query>::PATH,
            QueryBalanceRequest {
                address: address.into(),
                denom: "ngnk".into(),
            }
            .encode_to_vec(),
        );
        assert_eq!(response.code, 0, "{}", response.log);
        QueryBalanceResponse::decode(response.value.as_ref())
            .unwrap()
            .balance
            .unwrap()
            .amount
            .parse()
            .unwrap()
    }
}

/// Signer data of a genesis account with the given sequence (genesis accounts are numbered
/// in funding order: alice 0, bob 1, carol 2; the fee collector is created later).
pub fn signer(label: &str, sequence: u64) -> SignerData {
    let account_number = match label {
        "alice" => 0,
        "bob" => 1,
        "carol" => 2,
        other => panic!("no genesis account {other}"),
    };
    SignerData {
        chain_id: CHAIN_ID.into(),
        account_number,
        sequence,
    }
}

/// A signed send of `amount` from `from` to `to` at `sequence`, paying the minimum fee.
pub fn send(from: &str, to: &str, amount: u128, sequence: u64) -> Vec<u8> {
    let from_key = key(from);
    sign(
        from_key,
        vec![gonka_client::msg_send(
            from_key.address(),
            key(to).address(),
            amount,
        )],
        &signer(from, sequence),
        MIN_FEE,
        "",
    )
    .unwrap()
}
