//! Shared fixture for the app's in-process tests: a funded genesis and signing helpers.

#![allow(dead_code)] // each test binary uses a different subset

use gonka_proto::query as q;
use std::collections::BTreeMap;
use std::sync::{Mutex, OnceLock};

use gonka_app::harness::TestChain;
use gonka_client::keys::well_known_mnemonic;
use gonka_client::{sign, GasFee, GasPrice, Key, SignerData};
use gonka_proto::bank::{QueryBalanceRequest, QueryBalanceResponse};
use prost::Message;
use serde_json::json;

pub const CHAIN_ID: &str = "gonka-test";
/// The `min_gas_price` of every test chain, in ngnk per gas unit.
pub const MIN_GAS_PRICE: &str = "0.0001";
/// The gas limit test txs are signed with: room for the largest tx the tests send (a
/// challenge with its proofs, a block's worth of provided leaves).
pub const TX_GAS: u64 = 10_000_000;
/// ceil(TX_GAS × MIN_GAS_PRICE): the fee every test tx pays ([`tx_fee`] checks it).
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

/// The test chains' minimum gas price.
pub fn min_gas_price() -> GasPrice {
    GasPrice::parse(MIN_GAS_PRICE).unwrap()
}

/// The gas limit and fee of a test tx: [`TX_GAS`] paid at the minimum gas price, the least
/// fee the chain accepts for that limit.
pub fn tx_fee() -> GasFee {
    let fee = GasFee::at_price(TX_GAS, &min_gas_price()).unwrap();
    assert_eq!(
        fee.amount, MIN_FEE,
        "MIN_FEE must be ceil(TX_GAS × MIN_GAS_PRICE)"
    );
    fee
}

/// The auth parameters of the pipeline tests: the defaults with 8 KiB txs, 8 messages and
/// [`MIN_GAS_PRICE`].
pub fn auth_params() -> serde_json::Value {
    let params = gonka_proto::auth::Params {
        max_tx_bytes: 8192,
        max_msgs_per_tx: 8,
        min_gas_price: MIN_GAS_PRICE.into(),
        ..gonka_auth::default_params()
    };
    serde_json::to_value(params).unwrap()
}

/// Genesis funding alice and bob with START_BALANCE and carol with less than one fee.
pub fn genesis() -> serde_json::Value {
    let funded = |label: &str, amount: u128| json!({"address": key(label).address(), "coins": [{"denom": "ngnk", "amount": amount.to_string()}]});
    json!({
        "auth": {"params": auth_params()},
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
        tx_fee(),
        "",
    )
    .unwrap()
}
