//! What a localnet is on disk: its configuration, the per-node directories, the
//! `localnet.json` manifest, and creating or deleting all of it.
//!
//! ```text
//! <dir>/
//!   localnet.json            manifest, written last: its presence means "a complete network"
//!   node0/
//!     cometbft/              CometBFT home (config/config.toml, config/genesis.json, keys, data/)
//!     app/                   gonkad home (`gonkad start --home`)
//!     cometbft.log           stdout+stderr of `cometbft start`, appended across restarts
//!     app.log                stdout+stderr of `gonkad start`, appended across restarts
//!   node1/ ...
//!   node{N}/                 a full node added by `Localnet::add_full_node` (same layout)
//! ```
//!
//! Nodes `0..validators` are the genesis validators made by `cometbft testnet`; nodes added
//! later with `Localnet::add_full_node` are full nodes (not in genesis) with their own fresh
//! node and validator keys. The manifest lists both, so a resumed network has its full nodes.

use std::ffi::OsString;
use std::fs;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use serde_json::{json, Value};

use crate::cometbft;
use crate::config::{self, read_toml_value, rewrite_genesis, rewrite_toml};
use crate::ports::{ports_for_network, NodePorts, DEFAULT_BASE_PORT};

/// File name of the manifest at the root of a localnet directory.
pub const MANIFEST_FILE: &str = "localnet.json";
/// Number of validators when the caller does not choose.
pub const DEFAULT_VALIDATORS: usize = 4;
/// Chain id when the caller does not choose.
pub const DEFAULT_CHAIN_ID: &str = "gonka-localnet";
/// Block interval (`[consensus] timeout_commit`) when the caller does not choose.
pub const DEFAULT_TIMEOUT_COMMIT: &str = "1s";
/// Default [`LocalnetConfig::timeout_propose`]: CometBFT's own default.
pub const DEFAULT_TIMEOUT_PROPOSE: &str = "3s";
/// Default [`LocalnetConfig::timeout_vote`]: CometBFT's own default.
pub const DEFAULT_TIMEOUT_VOTE: &str = "1s";
/// How long `start` waits for apps to listen and nodes to answer RPC, by default.
pub const DEFAULT_START_TIMEOUT: Duration = Duration::from_secs(60);

/// Scratch directory inside `dir` where a new network is generated before it is moved into place.
const STAGING_DIR: &str = ".staging";
/// Version of the manifest layout.
const MANIFEST_FORMAT: u64 = 1;

/// Everything needed to create and run a localnet. Build it with [`LocalnetConfig::new`] and
/// adjust the public fields.
#[derive(Debug, Clone)]
pub struct LocalnetConfig {
    /// Root directory; node `i` lives in `dir/node{i}/` (see the module doc for the layout).
    pub dir: PathBuf,
    /// Number of validators (all with voting power 1).
    pub validators: usize,
    /// First port of node 0's block; see [`crate::ports`] for the scheme.
    pub base_port: u16,
    /// Chain id written into genesis.json.
    pub chain_id: String,
    /// The `gonkad` binary, started as `gonkad start --home <app_home> --abci-addr <addr>`.
    pub gonkad: PathBuf,
    /// The `cometbft` binary (see [`crate::find_cometbft`]).
    pub cometbft: PathBuf,
    /// Written as genesis.json `app_state` on every node (unless
    /// `app_state_for_validators` is set).
    pub app_state: Value,
    /// If set, builds `app_state` from the validators' consensus keys once they exist (so the
    /// app's genesis can make them participants with stake); replaces `app_state`.
    pub app_state_for_validators: Option<AppStateFn>,
    /// CometBFT block interval, a Go duration such as `"500ms"` or `"1s"`.
    pub timeout_commit: String,
    /// How long CometBFT waits for a proposal before voting nil and moving to the next round
    /// (`consensus.timeout_propose`): what a height costs when its proposer is down.
    pub timeout_propose: String,
    /// How long CometBFT waits once a round's votes are split (`consensus.timeout_prevote` and
    /// `timeout_precommit`).
    pub timeout_vote: String,
    /// If set, genesis enables ABCI vote extensions from this height
    /// (`consensus_params.abci.vote_extensions_enable_height`); `None` keeps them off.
    pub vote_extensions_enable_height: Option<u64>,
    /// Extra arguments appended to every `gonkad start ...` command line.
    pub app_args: Vec<OsString>,
    /// Extra arguments appended to one node's `gonkad start ...` command line, by node index
    /// (e.g. a test-only flag on one validator).
    pub node_app_args: std::collections::BTreeMap<usize, Vec<OsString>>,
    /// Upper bound on one `start` or `start_node` call (apps listening, nodes answering RPC,
    /// sidecars answering HTTP).
    pub start_timeout: Duration,
    /// Sidecars (ML nodes, transfer agents, validator role) beside the genesis validators;
    /// `None` runs the chain alone.
    pub sidecar: Option<crate::sidecar::SidecarConfig>,
    /// Nodes that run as hosts of their own (e.g. each in a network namespace) rather than on
    /// this machine's 127.0.0.1, by node index.
    pub node_hosts: std::collections::BTreeMap<usize, NodeHost>,
    /// Where each node dials each peer (e.g. a relay that delays traffic); `None`: at the
    /// peer's own address. Set, it turns peer exchange off so that nodes dial only these.
    pub peer_dial: Option<PeerDialFn>,
}

/// A node that runs as a host of its own. Only the node's app and CometBFT move there: a
/// localnet with [`LocalnetConfig::sidecar`] set keeps its sidecars on 127.0.0.1, so use it
/// for chain-only networks (as `tests/e2e/netns.rs` does).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeHost {
    /// The address the node's listeners bind (P2P, RPC, ABCI, metrics, API); it must be this
    /// machine's own or reachable from it, and local to the node's processes.
    pub addr: Ipv4Addr,
    /// Put before the node's app and CometBFT command lines, e.g. `ip netns exec <name>`; the
    /// prefix must exec the command (so that signals reach it).
    pub wrapper: Vec<OsString>,
}

/// A function from (dialing node index, dialed node) to the `host:port` the dialing node's
/// `persistent_peers` gives for it.
pub type PeerDialer = dyn Fn(usize, &NodeInfo) -> String + Send + Sync;

/// Where nodes dial their peers (see [`LocalnetConfig::peer_dial`]).
#[derive(Clone)]
pub struct PeerDialFn(pub Arc<PeerDialer>);

impl std::fmt::Debug for PeerDialFn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PeerDialFn(..)")
    }
}

impl LocalnetConfig {
    /// A configuration with the defaults: 4 validators, base port 26700, chain id
    /// `gonka-localnet`, empty app state `{}`, `timeout_commit = "1s"`, `timeout_propose = "3s"`, `timeout_vote = "1s"`, no vote extensions,
    /// no extra app arguments, 60 s start timeout.
    pub fn new(
        dir: impl Into<PathBuf>,
        gonkad: impl Into<PathBuf>,
        cometbft: impl Into<PathBuf>,
    ) -> LocalnetConfig {
        LocalnetConfig {
            dir: dir.into(),
            validators: DEFAULT_VALIDATORS,
            base_port: DEFAULT_BASE_PORT,
            chain_id: DEFAULT_CHAIN_ID.to_string(),
            gonkad: gonkad.into(),
            cometbft: cometbft.into(),
            app_state: json!({}),
            app_state_for_validators: None,
            timeout_commit: DEFAULT_TIMEOUT_COMMIT.to_string(),
            timeout_propose: DEFAULT_TIMEOUT_PROPOSE.to_string(),
            timeout_vote: DEFAULT_TIMEOUT_VOTE.to_string(),
            vote_extensions_enable_height: None,
            app_args: Vec::new(),
            node_app_args: Default::default(),
            start_timeout: DEFAULT_START_TIMEOUT,
            sidecar: None,
            node_hosts: Default::default(),
            peer_dial: None,
        }
    }

    /// The address node `index` listens on: its [`NodeHost`]'s, else 127.0.0.1.
    pub fn host_of(&self, index: usize) -> Ipv4Addr {
        self.node_hosts
            .get(&index)
            .map_or(Ipv4Addr::LOCALHOST, |h| h.addr)
    }

    /// `persistent_peers` of node `from`: every node of `peers` but itself.
    fn persistent_peers(&self, from: usize, peers: &[NodeInfo]) -> Vec<String> {
        peers
            .iter()
            .filter(|to| to.index != from)
            .map(|to| match &self.peer_dial {
                Some(dial) => format!("{}@{}", to.node_id, (dial.0)(from, to)),
                None => to.peer_address(),
            })
            .collect()
    }

    /// The config.toml edits of node `index` (see [`config::node_config_edits`]).
    fn node_config_edits(
        &self,
        index: usize,
        ports: &NodePorts,
        peers: &[NodeInfo],
        timeouts: &config::Timeouts,
    ) -> Vec<config::TomlEdit> {
        config::node_config_edits(
            &format!("node{index}"),
            self.host_of(index),
            ports,
            &self.persistent_peers(index, peers),
            self.peer_dial.is_none(),
            timeouts,
        )
    }

    /// The consensus timeouts every node's config gets.
    fn timeouts(&self) -> config::Timeouts {
        config::Timeouts {
            commit: self.timeout_commit.clone(),
            propose: self.timeout_propose.clone(),
            vote: self.timeout_vote.clone(),
        }
    }

    /// Checks the values that can be checked without touching the disk.
    pub fn validate(&self) -> Result<()> {
        if self.validators == 0 {
            bail!("a localnet needs at least 1 validator, but 0 were asked for");
        }
        ports_for_network(self.base_port, self.validators)?;
        config::validate_chain_id(&self.chain_id)?;
        config::validate_go_duration("timeout_commit", &self.timeout_commit)?;
        config::validate_go_duration("timeout_propose", &self.timeout_propose)?;
        config::validate_go_duration("timeout_vote", &self.timeout_vote)?;
        if self.dir.as_os_str().is_empty() {
            bail!("the localnet directory is empty");
        }
        Ok(())
    }
}

/// Where one node's processes listen and where its files are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeInfo {
    /// Node index: `0..validators` are the genesis validators, higher indices are full nodes
    /// added by `Localnet::add_full_node`.
    pub index: usize,
    /// Whether the node is one of the genesis validators (`false` for an added full node, which
    /// becomes a validator only if some account stakes with its consensus key).
    pub genesis_validator: bool,
    /// CometBFT moniker, `node{index}`.
    pub moniker: String,
    /// CometBFT P2P node id (hex), as `cometbft show-node-id` prints it.
    pub node_id: String,
    /// The node's ports.
    pub ports: NodePorts,
    /// The address its listeners bind: 127.0.0.1 unless it runs as a host of its own
    /// ([`LocalnetConfig::node_hosts`]).
    pub host: Ipv4Addr,
    /// CometBFT RPC base URL, `http://<host>:<rpc port>`.
    pub rpc_url: String,
    /// CometBFT RPC socket address.
    pub rpc_addr: SocketAddr,
    /// Address the app listens on for ABCI and CometBFT's `proxy_app` dials.
    pub abci_addr: SocketAddr,
    /// `<dir>/node{index}`.
    pub home: PathBuf,
    /// The app's home, `<home>/app`.
    pub app_home: PathBuf,
    /// CometBFT's home, `<home>/cometbft`.
    pub cometbft_home: PathBuf,
    /// The app's log, `<home>/app.log`.
    pub app_log: PathBuf,
    /// CometBFT's log, `<home>/cometbft.log`.
    pub cometbft_log: PathBuf,
}

impl NodeInfo {
    fn new(
        dir: &Path,
        index: usize,
        ports: NodePorts,
        node_id: String,
        genesis_validator: bool,
        host: Ipv4Addr,
    ) -> NodeInfo {
        let home = dir.join(format!("node{index}"));
        let at = |port| SocketAddr::V4(SocketAddrV4::new(host, port));
        NodeInfo {
            index,
            genesis_validator,
            moniker: format!("node{index}"),
            node_id,
            ports,
            host,
            rpc_url: format!("http://{host}:{}", ports.rpc),
            rpc_addr: at(ports.rpc),
            abci_addr: at(ports.abci),
            app_home: home.join("app"),
            cometbft_home: home.join("cometbft"),
            app_log: home.join("app.log"),
            cometbft_log: home.join("cometbft.log"),
            home,
        }
    }

    /// CometBFT P2P port.
    pub fn p2p_port(&self) -> u16 {
        self.ports.p2p
    }

    /// This node as a CometBFT peer: `<node_id>@<host>:<p2p port>`.
    pub fn peer_address(&self) -> String {
        format!("{}@{}:{}", self.node_id, self.host, self.ports.p2p)
    }

    /// The node's genesis file (identical on every node).
    pub fn genesis_path(&self) -> PathBuf {
        self.cometbft_home.join("config").join("genesis.json")
    }

    /// The node's CometBFT configuration file.
    pub fn config_toml_path(&self) -> PathBuf {
        self.cometbft_home.join("config").join("config.toml")
    }
}

/// The on-disk description of a created network, read back when it is resumed.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Manifest {
    chain_id: String,
    base_port: u16,
    /// Node ids of the genesis validators, nodes `0..node_ids.len()`.
    node_ids: Vec<String>,
    /// Node ids of the full nodes added later, in index order after the validators. Absent
    /// (empty) in manifests written before full nodes existed.
    full_node_ids: Vec<String>,
}

impl Manifest {
    fn to_json(&self) -> String {
        let mut s = serde_json::to_string_pretty(&json!({
            "format": MANIFEST_FORMAT,
            "chain_id": self.chain_id,
            "validators": self.node_ids.len(),
            "base_port": self.base_port,
            "node_ids": self.node_ids,
            "full_node_ids": self.full_node_ids,
        }))
        .expect("a JSON value always serializes");
        s.push('\n');
        s
    }

    fn parse(text: &str) -> Result<Manifest> {
        let doc: Value = serde_json::from_str(text)?;
        let format = doc["format"].as_u64();
        if format != Some(MANIFEST_FORMAT) {
            bail!(
                "expected manifest format {MANIFEST_FORMAT} but found {}",
                doc["format"]
            );
        }
        let chain_id = doc["chain_id"]
            .as_str()
            .ok_or_else(|| anyhow!("manifest has no chain_id"))?
            .to_string();
        let base_port = doc["base_port"]
            .as_u64()
            .and_then(|p| u16::try_from(p).ok())
            .ok_or_else(|| anyhow!("manifest has no valid base_port"))?;
        let ids = |field: &str| -> Result<Vec<String>> {
            doc[field]
                .as_array()
                .ok_or_else(|| anyhow!("manifest has no {field}"))?
                .iter()
                .map(|v| {
                    v.as_str()
                        .map(str::to_string)
                        .ok_or_else(|| anyhow!("manifest {field} entry {v} is not a string"))
                })
                .collect()
        };
        let node_ids = ids("node_ids")?;
        if node_ids.is_empty() {
            bail!("manifest lists no nodes");
        }
        let full_node_ids = if doc.get("full_node_ids").is_some() {
            ids("full_node_ids")?
        } else {
            Vec::new()
        };
        Ok(Manifest {
            chain_id,
            base_port,
            node_ids,
            full_node_ids,
        })
    }

    fn write(&self, dir: &Path) -> Result<()> {
        let tmp = dir.join(format!("{MANIFEST_FILE}.tmp"));
        fs::write(&tmp, self.to_json()).with_context(|| format!("writing {}", tmp.display()))?;
        let path = dir.join(MANIFEST_FILE);
        fs::rename(&tmp, &path).with_context(|| format!("writing {}", path.display()))
    }
}

/// The nodes of the network at `dir`, creating the network first if `dir` holds none.
/// `config.dir` must already be absolute.
pub(crate) fn prepare_dir(config: &LocalnetConfig) -> Result<Vec<NodeInfo>> {
    config.validate()?;
    let dir = &config.dir;
    let manifest_path = dir.join(MANIFEST_FILE);
    if manifest_path.exists() {
        return resume(config, &manifest_path);
    }
    if dir.exists() {
        let mut entries = fs::read_dir(dir)
            .with_context(|| format!("reading localnet directory {}", dir.display()))?;
        if entries.next().is_some() {
            bail!(
                "{} is not empty but holds no {MANIFEST_FILE}, so it is not a complete localnet \
                 (perhaps an interrupted creation); delete it (reset) or choose another directory",
                dir.display()
            );
        }
    }
    let created_dir = !dir.exists();
    let result = create(config);
    if result.is_err() {
        cleanup_failed_create(config, created_dir);
    }
    result
}

/// Reads an existing network's nodes, refusing a manifest that disagrees with `config`.
fn resume(config: &LocalnetConfig, manifest_path: &Path) -> Result<Vec<NodeInfo>> {
    let text = fs::read_to_string(manifest_path)
        .with_context(|| format!("reading {}", manifest_path.display()))?;
    let m =
        Manifest::parse(&text).with_context(|| format!("parsing {}", manifest_path.display()))?;
    let reset_hint =
        "reset the localnet to create a new one, or pass the settings it was created with";
    if m.node_ids.len() != config.validators {
        bail!(
            "{} holds a localnet with {} validators but {} were asked for; {reset_hint}",
            config.dir.display(),
            m.node_ids.len(),
            config.validators
        );
    }
    if m.base_port != config.base_port {
        bail!(
            "{} holds a localnet with base port {} but base port {} was asked for; {reset_hint}",
            config.dir.display(),
            m.base_port,
            config.base_port
        );
    }
    if m.chain_id != config.chain_id {
        bail!(
            "{} holds a localnet with chain id {:?} but {:?} was asked for; {reset_hint}",
            config.dir.display(),
            m.chain_id,
            config.chain_id
        );
    }
    let full_nodes = m.full_node_ids.len();
    let nodes = node_infos(config, m.base_port, m.node_ids, m.full_node_ids)?;
    for node in &nodes {
        if !node.cometbft_home.is_dir() {
            bail!(
                "{} lists node {} but {} is missing; reset the localnet",
                manifest_path.display(),
                node.index,
                node.cometbft_home.display()
            );
        }
    }
    warn_on_drift(config, &nodes[0]);
    tracing::info!(
        dir = %config.dir.display(),
        chain_id = %config.chain_id,
        validators = nodes.len() - full_nodes,
        full_nodes,
        "resuming existing localnet"
    );
    Ok(nodes)
}

/// Settings that only take effect when a network is created: say so if they changed.
fn warn_on_drift(config: &LocalnetConfig, node: &NodeInfo) {
    if let Ok(text) = fs::read_to_string(node.config_toml_path()) {
        if let Some(tc) = read_toml_value(&text, "consensus", "timeout_commit") {
            if tc != config.timeout_commit {
                tracing::warn!(
                    existing = %tc,
                    requested = %config.timeout_commit,
                    "resumed localnet keeps its timeout_commit; reset it to change"
                );
            }
        }
    }
    if let Ok(text) = fs::read_to_string(node.genesis_path()) {
        if let Ok(doc) = serde_json::from_str::<Value>(&text) {
            if config.app_state_for_validators.is_none()
                && doc.get("app_state") != Some(&config.app_state)
            {
                tracing::warn!("resumed localnet keeps its genesis app_state, which differs from the requested one; reset it to change");
            }
        }
    }
}

/// The nodes of a network: the genesis validators `node_ids`, then the full nodes.
fn node_infos(
    config: &LocalnetConfig,
    base_port: u16,
    node_ids: Vec<String>,
    full_node_ids: Vec<String>,
) -> Result<Vec<NodeInfo>> {
    let validators = node_ids.len();
    let ports = ports_for_network(base_port, validators + full_node_ids.len())?;
    Ok(node_ids
        .into_iter()
        .chain(full_node_ids)
        .zip(ports)
        .enumerate()
        .map(|(i, (id, p))| NodeInfo::new(&config.dir, i, p, id, i < validators, config.host_of(i)))
        .collect())
}

/// A genesis validator's consensus key, handed to [`AppStateFn`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GenesisValidatorKey {
    /// Node index.
    pub index: usize,
    /// Ed25519 public key from the node's `priv_validator_key.json`.
    pub ed25519_pub_key: [u8; 32],
}

/// A function from the genesis validators' keys to genesis `app_state`.
pub type AppStateBuilder = dyn Fn(&[GenesisValidatorKey]) -> Value + Send + Sync;

/// Builds genesis `app_state` from the genesis validators' keys.
#[derive(Clone)]
pub struct AppStateFn(pub Arc<AppStateBuilder>);

impl std::fmt::Debug for AppStateFn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AppStateFn(..)")
    }
}

/// Reads the ed25519 consensus public key from `<cometbft_home>/config/priv_validator_key.json`.
pub fn read_consensus_key(cometbft_home: &Path) -> Result<[u8; 32]> {
    use base64::Engine as _;
    let path = cometbft_home.join("config").join("priv_validator_key.json");
    let text = fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let doc: Value =
        serde_json::from_str(&text).with_context(|| format!("{} is not JSON", path.display()))?;
    let encoded = doc["pub_key"]["value"]
        .as_str()
        .ok_or_else(|| anyhow!("{} has no pub_key.value", path.display()))?;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .with_context(|| format!("{}: pub_key.value is not base64", path.display()))?;
    bytes
        .try_into()
        .map_err(|_| anyhow!("{}: pub_key is not 32 bytes", path.display()))
}

/// Generates a network in `<dir>/.staging` with `cometbft testnet`, rewrites configs and
/// genesis, moves each home into `<dir>/node{i}/cometbft`, then writes the manifest.
fn create(config: &LocalnetConfig) -> Result<Vec<NodeInfo>> {
    let dir = &config.dir;
    let n = config.validators;
    tracing::info!(
        dir = %dir.display(),
        validators = n,
        chain_id = %config.chain_id,
        base_port = config.base_port,
        "creating localnet"
    );
    fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let staging = dir.join(STAGING_DIR);
    cometbft::testnet(
        &config.cometbft,
        n,
        &staging,
        &staging.join(".scratch-home"),
    )?;
    let staged_home = |i: usize| staging.join(format!("node{i}"));

    let node_ids = (0..n)
        .map(|i| cometbft::show_node_id(&config.cometbft, &staged_home(i)))
        .collect::<Result<Vec<_>>>()?;
    let nodes = node_infos(config, config.base_port, node_ids.clone(), Vec::new())?;

    let genesis_path = staged_home(0).join("config").join("genesis.json");
    let genesis = fs::read_to_string(&genesis_path)
        .with_context(|| format!("reading {}", genesis_path.display()))?;
    let app_state = match &config.app_state_for_validators {
        Some(build) => {
            let keys = (0..n)
                .map(|index| {
                    Ok(GenesisValidatorKey {
                        index,
                        ed25519_pub_key: read_consensus_key(&staged_home(index))?,
                    })
                })
                .collect::<Result<Vec<_>>>()?;
            (build.0)(&keys)
        }
        None => config.app_state.clone(),
    };
    let genesis = rewrite_genesis(
        &genesis,
        &config.chain_id,
        &app_state,
        config.vote_extensions_enable_height,
    )?;
    check_genesis_validators(&genesis, n)?;

    for node in &nodes {
        let home = staged_home(node.index);
        let config_path = home.join("config").join("config.toml");
        let text = fs::read_to_string(&config_path)
            .with_context(|| format!("reading {}", config_path.display()))?;
        let edits = config.node_config_edits(node.index, &node.ports, &nodes, &config.timeouts());
        let text = rewrite_toml(&text, &edits)
            .with_context(|| format!("rewriting {}", config_path.display()))?;
        fs::write(&config_path, text)?;
        fs::write(home.join("config").join("genesis.json"), &genesis)?;
    }

    for node in &nodes {
        fs::create_dir_all(&node.home)?;
        fs::rename(staged_home(node.index), &node.cometbft_home).with_context(|| {
            format!(
                "moving node {} home into {}",
                node.index,
                node.cometbft_home.display()
            )
        })?;
        fs::create_dir_all(&node.app_home)?;
    }
    fs::remove_dir_all(&staging)?;

    let manifest = Manifest {
        chain_id: config.chain_id.clone(),
        base_port: config.base_port,
        node_ids,
        full_node_ids: Vec::new(),
    };
    manifest.write(dir)?;
    for node in &nodes {
        tracing::info!(
            node = node.index,
            node_id = %node.node_id,
            rpc = %node.rpc_url,
            abci = %node.abci_addr,
            p2p = node.ports.p2p,
            "node laid out"
        );
    }
    Ok(nodes)
}

/// Lays out a full node at index `nodes.len()` of the network at `config.dir` (whose nodes are
/// `nodes`) and records it in the manifest: `cometbft init` into `<dir>/.staging/node{N}` (a
/// fresh node key and validator key), node 0's genesis.json copied byte for byte, config.toml
/// rewritten like the validators' (its own ports, `persistent_peers` = every existing node,
/// node 0's `timeout_commit`), then moved to `<dir>/node{N}/cometbft` and listed in the manifest.
/// The existing nodes' configs are not touched: the new node dials them.
pub(crate) fn add_full_node(config: &LocalnetConfig, nodes: &[NodeInfo]) -> Result<NodeInfo> {
    let dir = &config.dir;
    let index = nodes.len();
    let first = nodes
        .first()
        .ok_or_else(|| anyhow!("the localnet has no nodes to copy the genesis from"))?;
    let ports = NodePorts::for_node(config.base_port, index)?;

    let manifest_path = dir.join(MANIFEST_FILE);
    let text = fs::read_to_string(&manifest_path)
        .with_context(|| format!("reading {}", manifest_path.display()))?;
    let mut manifest =
        Manifest::parse(&text).with_context(|| format!("parsing {}", manifest_path.display()))?;
    let listed = manifest.node_ids.len() + manifest.full_node_ids.len();
    if listed != index {
        bail!(
            "{} lists {listed} nodes but this localnet has {index}; was a node added by another \
             process? Prepare the localnet again",
            manifest_path.display()
        );
    }

    let home = dir.join(format!("node{index}"));
    if home.exists() {
        // Only an add_full_node interrupted between moving the node into place and writing the
        // manifest leaves this behind: the manifest does not list it, so it never ran.
        tracing::warn!(dir = %home.display(), "removing a node directory the manifest does not list");
        fs::remove_dir_all(&home).with_context(|| format!("removing {}", home.display()))?;
    }
    let staging = dir.join(STAGING_DIR);
    let _ = fs::remove_dir_all(&staging);
    let staged = staging.join(format!("node{index}"));
    let result = stage_full_node(config, nodes, first, index, &ports, &staged);
    let node_id = match result {
        Ok(id) => id,
        Err(e) => {
            let _ = fs::remove_dir_all(&staging);
            return Err(e);
        }
    };
    let node = NodeInfo::new(
        dir,
        index,
        ports,
        node_id.clone(),
        false,
        config.host_of(index),
    );
    let moved = fs::create_dir_all(&node.home)
        .and_then(|()| fs::rename(&staged, &node.cometbft_home))
        .and_then(|()| fs::create_dir_all(&node.app_home));
    let _ = fs::remove_dir_all(&staging);
    if let Err(e) = moved {
        let _ = fs::remove_dir_all(&node.home);
        return Err(e).with_context(|| format!("moving node {index} into {}", node.home.display()));
    }
    manifest.full_node_ids.push(node_id);
    if let Err(e) = manifest.write(dir) {
        let _ = fs::remove_dir_all(&node.home);
        return Err(e);
    }
    tracing::info!(
        node = index,
        node_id = %node.node_id,
        rpc = %node.rpc_url,
        abci = %node.abci_addr,
        p2p = node.ports.p2p,
        "full node laid out"
    );
    Ok(node)
}

/// Creates the CometBFT home of full node `index` in `staged`; returns its node id.
fn stage_full_node(
    config: &LocalnetConfig,
    nodes: &[NodeInfo],
    first: &NodeInfo,
    index: usize,
    ports: &NodePorts,
    staged: &Path,
) -> Result<String> {
    fs::create_dir_all(staged).with_context(|| format!("creating {}", staged.display()))?;
    cometbft::init(&config.cometbft, staged)?;
    let node_id = cometbft::show_node_id(&config.cometbft, staged)?;

    let genesis = fs::read(first.genesis_path())
        .with_context(|| format!("reading {}", first.genesis_path().display()))?;
    fs::write(staged.join("config").join("genesis.json"), genesis)?;

    // The network's consensus timeouts are what node 0 runs with (a resumed network keeps the
    // ones it was created with).
    let first_config = fs::read_to_string(first.config_toml_path()).ok();
    let first_value = |key: &str, default: String| {
        first_config
            .as_deref()
            .and_then(|text| read_toml_value(text, "consensus", key))
            .unwrap_or(default)
    };
    let defaults = config.timeouts();
    let timeouts = config::Timeouts {
        commit: first_value("timeout_commit", defaults.commit),
        propose: first_value("timeout_propose", defaults.propose),
        vote: first_value("timeout_prevote", defaults.vote),
    };
    let config_path = staged.join("config").join("config.toml");
    let text = fs::read_to_string(&config_path)
        .with_context(|| format!("reading {}", config_path.display()))?;
    let edits = config.node_config_edits(index, ports, nodes, &timeouts);
    let text = rewrite_toml(&text, &edits)
        .with_context(|| format!("rewriting {}", config_path.display()))?;
    fs::write(&config_path, text)?;
    Ok(node_id)
}

fn check_genesis_validators(genesis: &str, expected: usize) -> Result<()> {
    let doc: Value = serde_json::from_str(genesis)?;
    let found = doc["validators"].as_array().map_or(0, Vec::len);
    if found != expected {
        bail!("cometbft testnet wrote a genesis with {found} validators, expected {expected}");
    }
    Ok(())
}

/// Removes what a failed [`create`] left behind (the directory was empty or absent before).
fn cleanup_failed_create(config: &LocalnetConfig, created_dir: bool) {
    let dir = &config.dir;
    let _ = fs::remove_dir_all(dir.join(STAGING_DIR));
    let _ = fs::remove_file(dir.join(format!("{MANIFEST_FILE}.tmp")));
    for i in 0..config.validators {
        let _ = fs::remove_dir_all(dir.join(format!("node{i}")));
    }
    if created_dir {
        let _ = fs::remove_dir(dir);
    }
}

/// Whether `name` is an entry a localnet directory can hold.
fn is_localnet_entry(name: &str) -> bool {
    name == MANIFEST_FILE
        || name == STAGING_DIR
        || name == format!("{MANIFEST_FILE}.tmp")
        || name
            .strip_prefix("node")
            .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
}

/// Deletes the localnet at `dir` (all chain data, keys and logs). A missing `dir` is fine.
/// Refuses a directory that neither has a manifest nor consists only of localnet entries,
/// so a mistyped path never deletes unrelated files. Stop the network first.
pub fn reset(dir: &Path) -> Result<()> {
    if !dir.exists() {
        return Ok(());
    }
    if !dir.join(MANIFEST_FILE).is_file() {
        for entry in fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
            let name = entry?.file_name();
            let name = name.to_string_lossy();
            if !is_localnet_entry(&name) {
                bail!(
                    "refusing to delete {}: it has no {MANIFEST_FILE} and holds {name:?}, which a \
                     localnet does not create",
                    dir.display()
                );
            }
        }
    }
    fs::remove_dir_all(dir).with_context(|| format!("deleting localnet {}", dir.display()))?;
    tracing::info!(dir = %dir.display(), "localnet deleted");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifest_round_trips() {
        let m = Manifest {
            chain_id: "gonka-x".into(),
            base_port: 26700,
            node_ids: vec!["a".repeat(40), "b".repeat(40)],
            full_node_ids: vec!["c".repeat(40)],
        };
        assert_eq!(Manifest::parse(&m.to_json()).unwrap(), m);
        assert!(Manifest::parse(r#"{"format": 99}"#).is_err());
        // Manifests written before full nodes existed have no full_node_ids.
        let old = r#"{"format": 1, "chain_id": "c", "validators": 1, "base_port": 26700,
                      "node_ids": ["aa"]}"#;
        assert_eq!(
            Manifest::parse(old).unwrap().full_node_ids,
            Vec::<String>::new()
        );
        let bad = r#"{"format": 1, "chain_id": "c", "base_port": 26700, "node_ids": ["aa"],
                      "full_node_ids": [7]}"#;
        assert!(Manifest::parse(bad).is_err());
    }

    #[test]
    fn node_info_paths_and_addresses() {
        let ports = NodePorts::for_node(26700, 2).unwrap();
        let n = NodeInfo::new(
            Path::new("/x/net"),
            2,
            ports,
            "ab".repeat(20),
            true,
            Ipv4Addr::LOCALHOST,
        );
        assert_eq!(n.rpc_url, "http://127.0.0.1:26721");
        assert_eq!(n.abci_addr.to_string(), "127.0.0.1:26722");
        assert_eq!(n.p2p_port(), 26720);
        assert_eq!(
            n.peer_address(),
            format!("{}@127.0.0.1:26720", "ab".repeat(20))
        );
        assert_eq!(n.cometbft_home, Path::new("/x/net/node2/cometbft"));
        assert_eq!(n.app_home, Path::new("/x/net/node2/app"));
        assert_eq!(n.app_log, Path::new("/x/net/node2/app.log"));
        assert_eq!(n.cometbft_log, Path::new("/x/net/node2/cometbft.log"));
        assert_eq!(
            n.genesis_path(),
            Path::new("/x/net/node2/cometbft/config/genesis.json")
        );
    }

    #[test]
    fn config_validation() {
        let ok = LocalnetConfig::new("/tmp/x", "gonkad", "cometbft");
        ok.validate().unwrap();
        let mut c = ok.clone();
        c.validators = 0;
        assert!(c.validate().is_err());
        let mut c = ok.clone();
        c.timeout_commit = "soon".into();
        assert!(c.validate().is_err());
        let mut c = ok.clone();
        c.base_port = 65530;
        assert!(c.validate().is_err());
        let mut c = ok;
        c.chain_id = String::new();
        assert!(c.validate().is_err());
    }

    #[test]
    fn reset_refuses_foreign_directories() {
        let t = tempfile::tempdir().unwrap();
        let foreign = t.path().join("foreign");
        fs::create_dir_all(foreign.join("node0")).unwrap();
        fs::write(foreign.join("notes.txt"), "mine").unwrap();
        let err = reset(&foreign).unwrap_err().to_string();
        assert!(err.contains("notes.txt"), "{err}");
        assert!(foreign.join("notes.txt").exists());

        let leftover = t.path().join("leftover");
        fs::create_dir_all(leftover.join("node0/cometbft")).unwrap();
        fs::create_dir_all(leftover.join(".staging")).unwrap();
        reset(&leftover).unwrap();
        assert!(!leftover.exists());

        let complete = t.path().join("complete");
        fs::create_dir_all(complete.join("sidecar")).unwrap();
        fs::write(complete.join(MANIFEST_FILE), "{}").unwrap();
        reset(&complete).unwrap();
        assert!(!complete.exists());

        reset(&t.path().join("absent")).unwrap();
    }

    #[test]
    fn a_non_empty_directory_without_manifest_is_not_taken_over() {
        let t = tempfile::tempdir().unwrap();
        fs::write(t.path().join("file"), "x").unwrap();
        let c = LocalnetConfig::new(t.path(), "gonkad", "/nonexistent/cometbft");
        let err = prepare_dir(&c).unwrap_err().to_string();
        assert!(err.contains("not empty"), "{err}");
        assert!(t.path().join("file").exists());
    }

    #[test]
    fn failed_creation_leaves_nothing_behind() {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("net");
        let c = LocalnetConfig::new(&dir, "gonkad", t.path().join("no-cometbft"));
        assert!(prepare_dir(&c).is_err());
        assert!(!dir.exists());
    }
}
