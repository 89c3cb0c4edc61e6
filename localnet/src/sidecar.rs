//! The sidecar processes beside each genesis validator (`gonka-sidecar`): one ML node serving
//! the built-in reference model, a transfer agent on the first [`SidecarConfig::transfer_agents`]
//! validators, and optionally the validator role that re-executes sampled work. Each runs as
//! the validator's operator account (its mnemonic is written to `node{i}/sidecar/operator.mnemonic`,
//! mode 0600) against its own node's RPC, registers itself on chain at start, and logs to
//! `node{i}/<role>.log`.
//!
//! Ports (see [`crate::ports`]): the ML node listens on offset [`ML_NODE_OFFSET`] of the node's
//! block, the transfer agent on [`TRANSFER_AGENT_OFFSET`], the trainer on [`TRAINER_OFFSET`],
//! the validation worker's metrics on [`VALIDATOR_METRICS_OFFSET`].

use std::ffi::OsString;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::layout::NodeInfo;

/// Port offset of a node's ML node.
pub const ML_NODE_OFFSET: u16 = 4;
/// Port offset of a node's transfer agent.
pub const TRANSFER_AGENT_OFFSET: u16 = 5;
/// Port offset of a node's trainer (its round-output server).
pub const TRAINER_OFFSET: u16 = 6;
/// Port offset of a node's validation worker's metrics.
pub const VALIDATOR_METRICS_OFFSET: u16 = 8;

/// What sidecars a localnet runs.
#[derive(Debug, Clone)]
pub struct SidecarConfig {
    /// The `gonka-sidecar` binary.
    pub binary: PathBuf,
    /// BIP-39 mnemonic of genesis validator `i`'s operator account (a staked participant).
    pub operator_mnemonics: Vec<String>,
    /// Validators `0..transfer_agents` also run a transfer agent.
    pub transfer_agents: usize,
    /// Whether every validator runs `gonka-sidecar validator` (re-execution of sampled work).
    pub validator_role: bool,
    /// Whether every validator runs `gonka-sidecar trainer` (DiLoCo worker of the jobs it
    /// joins, re-executor of the checkpoints assigned to it).
    pub trainer_role: bool,
    /// Extra arguments of node `i`'s trainer (e.g. `--auto-join`, a cheat mode); missing =
    /// none.
    pub trainer_args: Vec<Vec<OsString>>,
    /// Extra arguments of node `i`'s ML node (e.g. a testing cheat mode); missing = none.
    pub ml_node_args: Vec<Vec<OsString>>,
    /// Extra arguments of node `i`'s transfer agent; missing = none.
    pub transfer_agent_args: Vec<Vec<OsString>>,
    /// Generations an ML node runs at once.
    pub ml_node_concurrency: u32,
    /// A GGUF language model every ML node also serves (`--llm-model-file`); `None` serves
    /// the reference model alone.
    pub llm_model_file: Option<PathBuf>,
}

impl SidecarConfig {
    /// Sidecars for every validator whose operator mnemonic is given: ML nodes, two transfer
    /// agents, no validator or trainer role, no extra arguments.
    pub fn new(binary: impl Into<PathBuf>, operator_mnemonics: Vec<String>) -> SidecarConfig {
        SidecarConfig {
            binary: binary.into(),
            operator_mnemonics,
            transfer_agents: 2,
            validator_role: false,
            trainer_role: false,
            trainer_args: Vec::new(),
            ml_node_args: Vec::new(),
            transfer_agent_args: Vec::new(),
            ml_node_concurrency: 4,
            llm_model_file: None,
        }
    }
}

/// One sidecar process to start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SidecarSpec {
    /// Role name, also the log file's stem.
    pub role: &'static str,
    /// Arguments after the binary.
    pub args: Vec<OsString>,
    /// Log file.
    pub log: PathBuf,
    /// URL that answers `GET /v1/models` once it is ready (none for the validator role).
    pub ready_url: Option<(std::net::SocketAddr, &'static str)>,
}

fn loopback(port: u16) -> std::net::SocketAddr {
    std::net::SocketAddr::from(([127, 0, 0, 1], port))
}

/// `http://127.0.0.1:<port>` of node's ML node.
pub(crate) fn ml_node_addr(node: &NodeInfo) -> std::net::SocketAddr {
    loopback(
        node.ports
            .extra(ML_NODE_OFFSET)
            .expect("offset within the block"),
    )
}

/// Address of node's transfer agent.
pub(crate) fn transfer_agent_addr(node: &NodeInfo) -> std::net::SocketAddr {
    loopback(
        node.ports
            .extra(TRANSFER_AGENT_OFFSET)
            .expect("offset within the block"),
    )
}

/// Address of node's trainer.
pub fn trainer_addr(node: &NodeInfo) -> std::net::SocketAddr {
    loopback(
        node.ports
            .extra(TRAINER_OFFSET)
            .expect("offset within the block"),
    )
}

/// Address of node's validation worker's metrics.
pub fn validator_metrics_addr(node: &NodeInfo) -> std::net::SocketAddr {
    loopback(
        node.ports
            .extra(VALIDATOR_METRICS_OFFSET)
            .expect("offset within the block"),
    )
}

/// Writes `mnemonic` to `path` readable by the owner only.
fn write_secret(path: &Path, mnemonic: &str) -> Result<()> {
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("writing {}", path.display()))?;
    file.write_all(mnemonic.as_bytes())?;
    Ok(())
}

/// Where genesis validator `node`'s validator sidecar keeps its BLS key and group shares
/// (`None` if it runs no sidecars); its app reads the shares from there.
pub(crate) fn bls_dir(config: &SidecarConfig, node: &NodeInfo) -> Option<PathBuf> {
    (node.genesis_validator && config.operator_mnemonics.get(node.index).is_some())
        .then(|| node.home.join("sidecar").join("bls"))
}

/// The sidecars of genesis validator `node` (empty for full nodes and validators without a
/// mnemonic). Writes the operator's mnemonic file.
pub(crate) fn specs(config: &SidecarConfig, node: &NodeInfo) -> Result<Vec<SidecarSpec>> {
    let Some(mnemonic) = config.operator_mnemonics.get(node.index) else {
        return Ok(Vec::new());
    };
    if !node.genesis_validator {
        return Ok(Vec::new());
    }
    let dir = node.home.join("sidecar");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let mnemonic_file = dir.join("operator.mnemonic");
    write_secret(&mnemonic_file, mnemonic)?;
    let common = |role: &str| -> Vec<OsString> {
        vec![
            role.into(),
            "--chain-rpc".into(),
            node.rpc_url.clone().into(),
            "--mnemonic-file".into(),
            mnemonic_file.clone().into(),
        ]
    };
    let ml = ml_node_addr(node);
    let mut ml_args = common("ml-node");
    ml_args.extend([
        "--listen".into(),
        ml.to_string().into(),
        "--node-id".into(),
        format!("node{}-ml", node.index).into(),
        "--response-key-file".into(),
        dir.join("ml-node.key").into(),
        "--max-concurrency".into(),
        config.ml_node_concurrency.to_string().into(),
    ]);
    if let Some(model) = &config.llm_model_file {
        ml_args.extend(["--llm-model-file".into(), model.clone().into()]);
    }
    if let Some(extra) = config.ml_node_args.get(node.index) {
        ml_args.extend(extra.iter().cloned());
    }
    let mut specs = vec![SidecarSpec {
        role: "ml-node",
        args: ml_args,
        log: node.home.join("ml-node.log"),
        ready_url: Some((ml, "/v1/models")),
    }];
    if node.index < config.transfer_agents {
        let ta = transfer_agent_addr(node);
        let mut args = common("transfer-agent");
        args.extend([
            "--listen".into(),
            ta.to_string().into(),
            "--home".into(),
            dir.join("transfer-agent").into(),
        ]);
        if let Some(extra) = config.transfer_agent_args.get(node.index) {
            args.extend(extra.iter().cloned());
        }
        specs.push(SidecarSpec {
            role: "transfer-agent",
            args,
            log: node.home.join("transfer-agent.log"),
            ready_url: Some((ta, "/v1/models")),
        });
    }
    if config.validator_role {
        let mut args = common("validator");
        args.extend(["--ml-node".into(), format!("http://{ml}").into()]);
        args.extend([
            "--metrics-listen".into(),
            validator_metrics_addr(node).to_string().into(),
        ]);
        if let Some(bls) = bls_dir(config, node) {
            args.extend(["--bls-dir".into(), bls.into()]);
        }
        specs.push(SidecarSpec {
            role: "validator",
            args,
            log: node.home.join("validator.log"),
            ready_url: None,
        });
    }
    if config.trainer_role {
        let trainer = trainer_addr(node);
        let mut args = common("trainer");
        args.extend([
            "--listen".into(),
            trainer.to_string().into(),
            "--dir".into(),
            dir.join("trainer").into(),
        ]);
        if let Some(extra) = config.trainer_args.get(node.index) {
            args.extend(extra.iter().cloned());
        }
        specs.push(SidecarSpec {
            role: "trainer",
            args,
            log: node.home.join("trainer.log"),
            ready_url: None,
        });
    }
    Ok(specs)
}
