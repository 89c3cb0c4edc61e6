//! The app's ABCI query router with any path, data, height and `prove`: `/store/key` (with
//! and without proofs, at every committed height), `Simulate` (a tx run without signature
//! check) and every module's query handlers, on the fixture's chain at height 2.
//!
//! Input: byte 0 holds `prove` (bit 0) and the height (bits 1..: latest, 1, 2, 3 — not
//! committed —, or -1); byte 1 picks one of [`paths`] when below its length, else the path
//! is the input up to the next `0` byte; the rest is the query's data.
//!
//! Checked: no panic; every error carries a codespace and a log; every `/store/key` proof
//! the app serves verifies against the store root of its height.

use std::cell::RefCell;
use std::sync::OnceLock;

use gonka_app::harness::TestChain;
use gonka_proto::query::{self as q, Query};
use prost::Message;
use tendermint_abci::Application;
use tendermint_proto::v0_38::abci::RequestQuery;

thread_local! {
    static CHAIN: RefCell<Option<TestChain>> = const { RefCell::new(None) };
}

/// Every query path the app answers: the module routes, the Cosmos services and the raw
/// store.
pub fn paths() -> &'static [&'static str] {
    static PATHS: OnceLock<Vec<&'static str>> = OnceLock::new();
    PATHS.get_or_init(|| {
        let modules = [
            q::auth::ROUTES,
            q::bank::ROUTES,
            q::epochs::ROUTES,
            q::stake::ROUTES,
            q::rewards::ROUTES,
            q::inference::ROUTES,
            q::bls::ROUTES,
            q::settlement::ROUTES,
            q::disputes::ROUTES,
            q::pol::ROUTES,
        ];
        let mut paths: Vec<&'static str> = vec![
            "/store/key",
            q::cosmos::Simulate::PATH,
            q::cosmos::AuthAccount::PATH,
            q::cosmos::AuthParams::PATH,
            q::cosmos::BankBalance::PATH,
            q::cosmos::BankAllBalances::PATH,
            q::cosmos::BankSupplyOf::PATH,
            q::cosmos::BankTotalSupply::PATH,
            q::cosmos::BankDenomMetadata::PATH,
            q::cosmos::BankDenomsMetadata::PATH,
        ];
        paths.extend(
            modules
                .iter()
                .flat_map(|r| r.iter().map(|route| route.path)),
        );
        paths
    })
}

/// Answers the query `data` describes.
pub fn run(data: &[u8]) {
    let [flags, pick, rest @ ..] = data else {
        return;
    };
    let prove = flags & 1 == 1;
    let height: i64 = match (flags >> 1) % 5 {
        0 => 0,
        1 => 1,
        2 => 2,
        3 => 3,
        _ => -1,
    };
    let paths = paths();
    let (path, query) = match paths.get(usize::from(*pick)) {
        Some(path) => (path.to_string(), rest),
        None => {
            let (path, query) = crate::split_nul(rest);
            (String::from_utf8_lossy(path).into_owned(), query)
        }
    };
    CHAIN.with(|cell| {
        let mut slot = cell.borrow_mut();
        let chain = slot.get_or_insert_with(crate::fixture::chain);
        let response = Application::query(
            chain.app(),
            RequestQuery {
                data: query.to_vec().into(),
                path: path.clone(),
                height,
                prove,
            },
        );
        if response.code != 0 {
            assert!(
                !response.codespace.is_empty() && !response.log.is_empty(),
                "query {path:?} refused with code {} but no codespace or log",
                response.code
            );
            return;
        }
        if path == "/store/key" && prove {
            check_proof(chain, &response);
        }
    });
}

/// A proved `/store/key` answer verifies against the root of its height.
fn check_proof(chain: &TestChain, response: &tendermint_proto::v0_38::abci::ResponseQuery) {
    let op = response
        .proof_ops
        .as_ref()
        .and_then(|ops| {
            ops.ops
                .iter()
                .find(|op| op.r#type == gonka_store::PROOF_OP_TYPE)
        })
        .expect("a proved answer carries an ics23 proof op");
    let proof = ics23::CommitmentProof::decode(op.data.as_slice()).expect("the proof decodes");
    let version = u64::try_from(response.height).expect("a committed height");
    let root = chain
        .app()
        .store()
        .root_at(version)
        .expect("the root of a committed height");
    let key = response.key.as_ref();
    let value = response.value.as_ref();
    let verified = if value.is_empty() {
        gonka_store::verify_non_membership(&root, key, &proof)
            || gonka_store::verify_membership(&root, key, value, &proof)
    } else {
        gonka_store::verify_membership(&root, key, value, &proof)
    };
    assert!(
        verified,
        "the proof of key {key:x?} at height {version} does not verify"
    );
}
