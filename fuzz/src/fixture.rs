//! The fixed world the targets run in: well-known keys, a small genesis funding them, and an
//! in-process chain built from it with a few committed blocks (so queries and proofs have
//! state to read). The seed generator (`src/bin/seeds.rs`) signs its txs with the same keys,
//! so its seeds pass the signature check of the chain the `tx_check` target builds.

use std::sync::OnceLock;

use gonka_app::harness::TestChain;
use gonka_client::keys::well_known_mnemonic;
use gonka_client::{sign, GasFee, GasPrice, Key, SignerData};
use serde_json::json;

/// The fuzz chain's id.
pub const CHAIN_ID: &str = "gonka-fuzz";
/// Its minimum gas price (ngnk per gas unit).
pub const MIN_GAS_PRICE: &str = "0.0001";
/// The gas limit of the seed txs.
pub const TX_GAS: u64 = 1_000_000;
/// Balance of each funded genesis account.
pub const FUNDS: u128 = 1_000_000_000_000;
/// The clock of the HTTP target: the timestamp its signed seed requests carry.
pub const NOW_SECS: u64 = 1_767_225_600;

/// The labels of the genesis accounts, in funding order (account numbers 0, 1, 2).
pub const ACCOUNTS: [&str; 3] = ["alice", "bob", "carol"];

/// The well-known key of one of [`ACCOUNTS`] (derived once per process: PBKDF2 is slow).
pub fn key(label: &str) -> &'static Key {
    static KEYS: OnceLock<Vec<Key>> = OnceLock::new();
    let keys = KEYS.get_or_init(|| {
        ACCOUNTS
            .iter()
            .map(|l| Key::from_mnemonic(&well_known_mnemonic(l)).expect("a well-known key"))
            .collect()
    });
    let at = ACCOUNTS
        .iter()
        .position(|l| *l == label)
        .expect("one of the fuzz accounts");
    &keys[at]
}

/// The genesis: auth parameters with 8 KiB txs and the minimum gas price, every account of
/// [`ACCOUNTS`] funded with [`FUNDS`].
pub fn genesis() -> serde_json::Value {
    let params = gonka_proto::auth::Params {
        max_tx_bytes: 8192,
        max_msgs_per_tx: 8,
        min_gas_price: MIN_GAS_PRICE.into(),
        ..gonka_auth::default_params()
    };
    let balances: Vec<_> = ACCOUNTS
        .iter()
        .map(|l| json!({"address": key(l).address(), "coins": [{"denom": "ngnk", "amount": FUNDS.to_string()}]}))
        .collect();
    json!({
        "auth": {"params": serde_json::to_value(params).expect("params to JSON")},
        "bank": {"balances": balances},
    })
}

/// The fee of a seed tx: [`TX_GAS`] at the minimum gas price.
pub fn fee() -> GasFee {
    GasFee::at_price(
        TX_GAS,
        &GasPrice::parse(MIN_GAS_PRICE).expect("a gas price"),
    )
    .expect("a fee")
}

/// `label`'s signer data at `sequence`.
pub fn signer(label: &str, sequence: u64) -> SignerData {
    SignerData {
        chain_id: CHAIN_ID.into(),
        account_number: ACCOUNTS
            .iter()
            .position(|l| *l == label)
            .expect("an account") as u64,
        sequence,
    }
}

/// A tx of `msgs` signed by `label` at `sequence`.
pub fn signed(label: &str, sequence: u64, msgs: Vec<gonka_client::Any>, memo: &str) -> Vec<u8> {
    sign(key(label), msgs, &signer(label, sequence), fee(), memo).expect("signing a seed tx")
}

/// A fresh chain at height 2: genesis, then a block with one send from alice to bob, then an
/// empty block. Its database lives in a temporary directory that is removed at once (the
/// open file stays usable), so a fuzzer's many short-lived processes leave nothing behind.
pub fn chain() -> TestChain {
    let dir = tempfile::Builder::new()
        .prefix("gonka-fuzz-")
        .tempdir_in(scratch())
        .expect("a temporary directory");
    let mut chain = TestChain::new(&dir.path().join("state.redb"), CHAIN_ID, &genesis())
        .expect("the fuzz genesis starts a chain");
    let send = gonka_client::tx::msg_send(key("alice").address(), key("bob").address(), 1_000);
    let block = chain.next_block(vec![signed("alice", 0, vec![send], "")]);
    assert!(
        block.tx_results.iter().all(|r| r.code == 0),
        "the fixture's send failed: {:?}",
        block.tx_results
    );
    chain.next_block(Vec::new());
    drop(dir);
    chain
}

/// Where temporary databases go: `/dev/shm` when there is one (no disk writes), else the
/// system temporary directory.
fn scratch() -> std::path::PathBuf {
    let shm = std::path::Path::new("/dev/shm");
    if shm.is_dir() {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    }
}
