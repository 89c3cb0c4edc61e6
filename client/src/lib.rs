//! gonka-client: what an outside program needs to use a gonka chain — keys from BIP-39
//! mnemonics, signed transactions, a submitter that tracks its account's sequence
//! ([`Chain`]), typed calls over CometBFT RPC, and the off-chain wire formats the sidecar
//! roles and the chat client share (signed requests, execution [`receipt`]s, the [`openai`]
//! types, server-sent events ([`sse`]) and a byte-relaying HTTP client ([`http`])), and with
//! the `server` feature the sidecar servers' accept loop with its limits (`server`).
//!
//! Used by the `gonkad` CLI, the end-to-end tests and the sidecar roles. It never touches the
//! app's internals: everything goes through signed txs and `abci_query`.

use std::time::{SystemTime, UNIX_EPOCH};

pub mod bls;
pub mod chain;
pub mod chat;
pub mod disputes;
pub mod http;
pub mod keys;
#[cfg(feature = "server")]
pub mod metrics;
pub mod node_call;
pub mod openai;
pub mod payload_auth;
pub mod pol;
pub mod receipt;
pub mod replay;
pub mod request;
pub mod rpc;
pub mod score;
#[cfg(feature = "server")]
pub mod server;
pub mod settlement;
pub mod sig;
pub mod sse;
pub mod tx;

pub use chain::{key_from_mnemonic_file, Chain, TxOutcome};
pub use keys::Key;
pub use rpc::{Client, Included, TxRejected};
pub use tx::{
    msg_register_node, msg_register_transfer_agent, msg_remove_node, msg_send, msg_stake,
    msg_unjail, msg_unstake, msg_update_node, node_key_proof, sign, GasAdjustment, GasFee,
    GasPrice, NodeSpec, SignerData,
};

/// A message packed with its type URL, as [`sign`] takes it.
pub use cosmrs::Any;

/// Native denom: 1 GNK = 10^9 ngnk.
pub const DENOM: &str = "ngnk";

/// Wall-clock seconds since the Unix epoch (0 if the clock is before it): request timestamps,
/// `created` fields and the transfer agent's clock. Off-chain code only; the state machine
/// takes its time from the block.
pub fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}
