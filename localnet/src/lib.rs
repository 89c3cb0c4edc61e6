//! gonka-localnet: lays out and runs an N-validator CometBFT network on 127.0.0.1 (or with
//! nodes as hosts of their own: [`NodeHost`]), each
//! validator a pair of processes, the gonka app (`gonkad start --home <app_home> --abci-addr
//! 127.0.0.1:<port>`) and `cometbft start --home <cometbft_home>` dialing it as `proxy_app`.
//! `gonkad localnet` and the end-to-end tests drive it:
//!
//! ```no_run
//! # fn main() -> anyhow::Result<()> {
//! use gonka_localnet::{find_cometbft, Localnet, LocalnetConfig};
//! let mut config = LocalnetConfig::new(".localnet", "target/debug/gonkad", find_cometbft()?);
//! config.app_state = serde_json::json!({ "bank": { "balances": [] } });
//! let mut net = Localnet::prepare(config)?; // creates, or resumes what is in .localnet
//! let stopper = net.stopper(); // for a Ctrl-C handler thread
//! net.start()?;
//! net.wait_for_height(0, 3, std::time::Duration::from_secs(30))?;
//! net.kill_node(3)?;
//! net.start_node(3)?;
//! let full = net.add_full_node()?; // node 4: a full node with its own keys
//! net.start_node(full)?;
//! stopper.stop()?; // or net.stop(), or drop(net)
//! # Ok(()) }
//! ```
//!
//! Modules: [`layout`] (configuration, directory layout, creation and reset), [`ports`] (the
//! port scheme), `config` (config.toml and genesis.json rewriting), `process` (spawning and
//! signalling), [`rpc`] (a minimal `/status` client), `cometbft` (finding the binary).

mod cometbft;
mod config;
pub mod layout;
mod localnet;
pub mod ports;
mod process;
pub mod rpc;
pub mod sidecar;
mod state_sync;

pub use cometbft::{
    cometbft_version, find_cometbft, COMETBFT_BUILD, COMETBFT_INSTALL, COMETBFT_SERIES,
    COMETBFT_VERSION,
};
pub use layout::{
    read_consensus_key, reset, AppStateFn, GenesisValidatorKey, LocalnetConfig, NodeHost, NodeInfo,
    PeerDialFn, PeerDialer, DEFAULT_CHAIN_ID, DEFAULT_START_TIMEOUT, DEFAULT_TIMEOUT_COMMIT,
    DEFAULT_TIMEOUT_PROPOSE, DEFAULT_TIMEOUT_VOTE, DEFAULT_VALIDATORS, MANIFEST_FILE,
};
pub use localnet::{CrashPolicy, Localnet, Stopper, MAX_RESTART_BACKOFF, STOP_GRACE};
pub use ports::{find_free_base_port, NodePorts, DEFAULT_BASE_PORT};
pub use process::Role;
pub use sidecar::SidecarConfig;
pub use state_sync::{enable_state_sync, StateSync};
