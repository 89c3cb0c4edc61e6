//! Raw bytes to CheckTx: tx decoding (`TxRaw`, body, auth info) and the ante handler
//! (size, messages, fee, signature, sequence) of an app built in-process from the fixture's
//! genesis.
//!
//! Checked: no panic; every refusal carries a non-zero code, its codespace and a log that
//! says why; an accepted tx decodes as a Cosmos `TxRaw` with a body of at least one message
//! and a non-zero gas limit. After an accepted tx an empty block is committed, which resets
//! the mempool state, so the next input sees the same sequences (a stable target for AFL).

use std::cell::RefCell;

use cosmrs::proto::cosmos::tx::v1beta1::{TxBody, TxRaw};
use gonka_app::harness::TestChain;
use prost::Message;

thread_local! {
    static CHAIN: RefCell<Option<TestChain>> = const { RefCell::new(None) };
}

/// Feeds `data` to CheckTx.
pub fn run(data: &[u8]) {
    CHAIN.with(|cell| {
        let mut slot = cell.borrow_mut();
        let chain = slot.get_or_insert_with(crate::fixture::chain);
        let response = chain.check_tx(data.to_vec());
        if response.code != 0 {
            assert!(
                !response.codespace.is_empty() && !response.log.is_empty(),
                "refusal {} without a codespace or log: {response:?}",
                response.code
            );
            return;
        }
        let raw = TxRaw::decode(data).expect("an accepted tx decodes as TxRaw");
        let body = TxBody::decode(raw.body_bytes.as_slice()).expect("an accepted tx has a body");
        assert!(!body.messages.is_empty(), "an accepted tx without messages");
        assert!(
            response.gas_wanted > 0,
            "an accepted tx without a gas limit"
        );
        chain.next_block(Vec::new());
    });
}
