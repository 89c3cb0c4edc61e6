//! State sync for an added node: the `[statesync]` keys of its CometBFT config.

use anyhow::{Context, Result};

use crate::config::{rewrite_toml, TomlEdit};
use crate::NodeInfo;

/// How a new node state-syncs instead of replaying from genesis: CometBFT's light client
/// verifies the snapshot's app hash from a block the operator trusts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateSync {
    /// At least two RPC servers (`http://host:port`) the light client reads headers from: a
    /// primary and a witness it cross-checks.
    pub rpc_servers: Vec<String>,
    /// Height of the trusted block (e.g. a recent height read from a node you trust).
    pub trust_height: u64,
    /// Hash of that block (hex), read from the same source.
    pub trust_hash: String,
    /// How long headers stay trusted, a Go duration (`168h0m0s`); below the unbonding time.
    pub trust_period: String,
    /// How long CometBFT gathers snapshot offers before picking one, a Go duration (0s or at
    /// least 5s).
    pub discovery_time: String,
}

/// Turns on state sync in node `node`'s `config.toml` (`[statesync] enable = true` and the
/// keys of `state_sync`). Call it before the node first starts (its state must be empty).
pub fn enable_state_sync(node: &NodeInfo, state_sync: &StateSync) -> Result<()> {
    let path = node.cometbft_home.join("config").join("config.toml");
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let edits = [
        TomlEdit::boolean("statesync", "enable", true),
        TomlEdit::string(
            "statesync",
            "rpc_servers",
            &state_sync.rpc_servers.join(","),
        ),
        TomlEdit {
            section: "statesync",
            key: "trust_height",
            value: state_sync.trust_height.to_string(),
        },
        TomlEdit::string("statesync", "trust_hash", &state_sync.trust_hash),
        TomlEdit::string("statesync", "trust_period", &state_sync.trust_period),
        TomlEdit::string("statesync", "discovery_time", &state_sync.discovery_time),
    ];
    let text = rewrite_toml(&text, &edits)
        .with_context(|| format!("enabling state sync in {}", path.display()))?;
    std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))
}
