//! The `gonka-sidecar trainer` command line.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use gonka_client::http::Limits;
use gonka_client::server::ServerArgs;
use gonka_client::{key_from_mnemonic_file, Chain};

use super::store::Store;
use super::{follow, server, spec, TrainerConfig};

/// Arguments of `gonka-sidecar trainer`.
///
/// Trains the jobs its participant works on with DiLoCo, serves its round outputs to the
/// other workers and to verifiers, and re-executes the checkpoints the chain assigns to it.
#[derive(Debug, clap::Args)]
pub struct TrainerArgs {
    /// Print the dataset root of the corpus a job with this seed trains on (what `gonkad tx
    /// pol create-job --dataset-root` takes) and exit.
    #[arg(long, value_name = "SEED", exclusive = true)]
    pub dataset_root_of: Option<u64>,
    /// CometBFT RPC of a node of the chain, e.g. http://127.0.0.1:26657.
    #[arg(long, value_name = "URL", required_unless_present = "dataset_root_of")]
    chain_rpc: Option<String>,
    /// File holding the BIP-39 mnemonic of the participant account that joins jobs and signs
    /// checkpoints and re-executions.
    #[arg(long, value_name = "PATH", required_unless_present = "dataset_root_of")]
    mnemonic_file: Option<PathBuf>,
    /// Address the round-output server listens on.
    #[arg(long, default_value = "127.0.0.1:26690")]
    listen: SocketAddr,
    /// URL other workers and verifiers reach the server at [default: http://<listen>].
    #[arg(long, value_name = "URL")]
    endpoint: Option<String>,
    /// Directory of the round outputs (created; keep it: a restarted trainer serves and
    /// resumes from it) [default: `trainer` beside the mnemonic file].
    #[arg(long, value_name = "PATH")]
    dir: Option<PathBuf>,
    /// Join every forming job this trainer can run.
    #[arg(long)]
    auto_join: bool,
    /// Pause between polls of the chain, in milliseconds.
    #[arg(long, default_value_t = 500)]
    poll_ms: u64,
    /// Fake every round (tests only): `skip-inner-steps` trains one inner step and claims
    /// all, `stale-weights` trains none.
    #[cfg(feature = "testing")]
    #[arg(long, value_name = "MODE", value_parser = parse_cheat)]
    cheat: Option<crate::cheat::Cheat>,
    /// Serve no pseudo-gradients to peers, having committed them (tests only).
    #[cfg(feature = "testing")]
    #[arg(long)]
    withhold_pseudo_gradients: bool,
    #[command(flatten)]
    server: ServerArgs,
}

#[cfg(feature = "testing")]
fn parse_cheat(mode: &str) -> Result<crate::cheat::Cheat, String> {
    match mode {
        "skip-inner-steps" => Ok(crate::cheat::Cheat::SkipInnerSteps { performed: 1 }),
        "stale-weights" => Ok(crate::cheat::Cheat::StaleWeights),
        other => Err(format!(
            "{other:?}: expected skip-inner-steps or stale-weights"
        )),
    }
}

/// Runs the trainer until Ctrl-C.
pub async fn run(args: TrainerArgs) -> anyhow::Result<()> {
    if let Some(seed) = args.dataset_root_of {
        let root = tokio::task::spawn_blocking(move || spec::dataset_root_of_seed(seed)).await?;
        println!("{}", hex::encode(root));
        return Ok(());
    }
    let (Some(rpc), Some(mnemonic_file)) = (args.chain_rpc, args.mnemonic_file) else {
        anyhow::bail!("--chain-rpc and --mnemonic-file are required to run the trainer");
    };
    let dir = args.dir.unwrap_or_else(|| {
        mnemonic_file
            .parent()
            .unwrap_or(std::path::Path::new("."))
            .join("trainer")
    });
    let store = Store::open(&dir).with_context(|| format!("opening {}", dir.display()))?;
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("binding the trainer to {}", args.listen))?;
    let endpoint = args
        .endpoint
        .unwrap_or_else(|| format!("http://{}", listener.local_addr().unwrap_or(args.listen)));
    let chain = loop {
        let signer = key_from_mnemonic_file(&mnemonic_file)?;
        match Chain::connect(&rpc, signer).await {
            Ok(chain) => break chain,
            Err(e) => {
                tracing::warn!(%rpc, error = %format!("{e:#}"), "chain not reachable yet; retrying in 2 s");
                tokio::time::sleep(Duration::from_secs(2)).await;
            }
        }
    };
    tracing::info!(role = "trainer", address = %chain.address(), %endpoint, dir = %dir.display(), auto_join = args.auto_join, "trainer following the chain");
    let config = TrainerConfig {
        endpoint,
        poll: Duration::from_millis(args.poll_ms),
        auto_join: args.auto_join,
        inclusion_timeout: Duration::from_secs(30),
        fetch: Limits {
            max_body: crate::format::MAX_BLOB_BYTES,
            ..Limits::connect(Duration::from_secs(2))
        },
        #[cfg(feature = "testing")]
        cheat: args.cheat,
        metrics: Default::default(),
    };
    let router = server::router(store.clone(), config.metrics.registry());
    #[cfg(feature = "testing")]
    let router = if args.withhold_pseudo_gradients {
        tracing::warn!(role = "trainer", "TESTING: this trainer WITHHOLDS the pseudo-gradients it commits; never run this outside tests");
        server::withholding_pseudo_gradients(router)
    } else {
        router
    };
    let serving = gonka_client::server::serve(listener, router, args.server.limits(), async {
        let _ = tokio::signal::ctrl_c().await;
    });
    tokio::select! {
        () = follow(chain, store, config) => Ok(()),
        served = serving => {
            tracing::info!(role = "trainer", "shutting down");
            Ok(served?)
        }
    }
}
