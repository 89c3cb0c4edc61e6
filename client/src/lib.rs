//! gonka-client: what an outside program needs to use a gonka chain — keys from BIP-39
//! mnemonics, signed transactions, and typed calls over CometBFT RPC.
//!
//! Used by the `gonkad` CLI, the end-to-end tests and the sidecar. It never touches the
//! app's internals: everything goes through signed txs and `abci_query`.

pub mod chat;
pub mod disputes;
pub mod keys;
pub mod payload_auth;
pub mod request;
pub mod rpc;
pub mod tx;

pub use keys::Key;
pub use rpc::{Client, Included, TxRejected};
pub use tx::{
    msg_register_node, msg_register_transfer_agent, msg_remove_node, msg_send, msg_stake,
    msg_unjail, msg_unstake, msg_update_node, sign, NodeSpec, SignerData,
};

/// A message packed with its type URL, as [`sign`] takes it.
pub use cosmrs::Any;

/// Native denom: 1 GNK = 10^9 ngnk.
pub const DENOM: &str = "ngnk";
