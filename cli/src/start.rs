//! `gonkad start`: serve the ABCI application to a CometBFT node.

use anyhow::Result;

use crate::app_metrics::Metered;
use crate::Global;

/// Arguments of `gonkad start`.
#[derive(clap::Args)]
pub struct Args {
    /// Address to listen on for CometBFT's ABCI connections (its `proxy_app`).
    #[arg(long, default_value = "127.0.0.1:26658")]
    abci_addr: String,
    /// Directory where this validator's sidecar keeps its BLS key (its `--bls-dir`): the node
    /// derives its shares of each group key from the chain with it and signs the randomness
    /// beacon in its vote extensions. Without it the node votes with empty extensions.
    #[arg(long, value_name = "PATH")]
    bls_dir: Option<std::path::PathBuf>,
    /// Tests only: sign wrong partial signatures and, as proposer, a wrong beacon (the other
    /// validators must reject them and the chain must go on).
    #[arg(long, hide = true, requires = "bls_dir")]
    testing_corrupt_beacon: bool,
    /// Serve the app's Prometheus metrics at `GET http://ADDR/metrics` (block execution,
    /// commit and CheckTx times, txs by result, height); none without it.
    #[arg(long, value_name = "ADDR")]
    metrics_listen: Option<String>,
    /// Serve the API stock Cosmos clients speak at ADDR: gRPC (HTTP/2 without TLS) and the
    /// REST routes (HTTP/1.1) on one port; every query the app answers, and broadcasting,
    /// txs and blocks through the CometBFT RPC of --node (the node this app serves). None
    /// without it.
    #[arg(long, value_name = "ADDR")]
    api_listen: Option<std::net::SocketAddr>,
    /// Store versions (heights) to keep for queries at a past height and proofs; older ones
    /// are pruned after each commit. 0 keeps every version (an archive node). The default,
    /// as the Cosmos SDK's, is about three weeks of 5 s blocks.
    #[arg(long, default_value_t = 362_880)]
    pruning_keep_recent: u64,
    /// Blocks CometBFT keeps (the app asks it to delete older ones through Commit's
    /// retain_height). 0, the default, keeps every block, which nodes syncing from genesis
    /// through this one need.
    #[arg(long, default_value_t = 0)]
    min_retain_blocks: u64,
    /// Write a state-sync snapshot of the committed state every N heights (into
    /// <home>/data/snapshots/<height>/, in the background), so new nodes can join from it
    /// instead of replaying from genesis. 0 writes none (the node can still state-sync from
    /// others). The snapshot is read from the height just committed, which pruning never
    /// removes first, while blocks go on.
    #[arg(long, value_name = "N", default_value_t = 1000)]
    snapshot_interval: u64,
    /// Snapshots kept; older ones are deleted once a new one is written (at least 1).
    #[arg(long, value_name = "K", default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..))]
    snapshot_keep_recent: u32,
}

/// Runs the ABCI server until the process is stopped.
pub fn run(global: &Global, args: Args) -> Result<()> {
    let addr = args
        .abci_addr
        .strip_prefix("tcp://")
        .unwrap_or(&args.abci_addr);
    let beacon = match args.bls_dir {
        Some(dir) => gonka_app::BeaconNode::signing(dir, args.testing_corrupt_beacon),
        None => gonka_app::BeaconNode::default(),
    };
    if let Some(listen) = args.api_listen {
        crate::grpc::spawn(global, listen)?;
    }
    let home = global.home();
    let app = gonka_app::open(&home, beacon)?;
    app.set_retention(gonka_app::Retention {
        keep_versions: args.pruning_keep_recent,
        keep_blocks: args.min_retain_blocks,
    });
    app.set_snapshots(gonka_app::SnapshotConfig::in_home(
        &home,
        args.snapshot_interval,
        args.snapshot_keep_recent,
    ))?;
    tracing::info!(
        home = %home.display(),
        keep_versions = args.pruning_keep_recent,
        keep_blocks = args.min_retain_blocks,
        snapshot_interval = args.snapshot_interval,
        snapshot_keep_recent = args.snapshot_keep_recent,
        "state opened"
    );
    match args.metrics_listen {
        Some(listen) => gonka_app::serve(addr, Metered::serve_metrics(app, &listen)?.0),
        None => gonka_app::serve(addr, app),
    }
}
