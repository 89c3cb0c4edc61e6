//! The `gonka-sidecar validator` command line.

use std::path::PathBuf;
use std::time::Duration;

use std::sync::Arc;

use anyhow::Context;

use super::metrics::ValidatorMetrics;
use super::{follow, ValidatorConfig};
use gonka_client::http as upstream;
use gonka_client::{key_from_mnemonic_file, Chain};

/// Arguments of `gonka-sidecar validator`.
///
/// Re-executes the work records the chain assigns to this participant (validations and
/// dispute-committee seats) on its own ML node and commits its results.
#[derive(Debug, clap::Args)]
pub struct ValidatorArgs {
    /// CometBFT RPC of a node of the chain, e.g. http://127.0.0.1:26657.
    #[arg(long, value_name = "URL")]
    chain_rpc: String,
    /// File holding the BIP-39 mnemonic of the validator's participant account, which signs
    /// payload fetches and the answers.
    #[arg(long, value_name = "PATH")]
    mnemonic_file: PathBuf,
    /// The validator's own ML node that re-executes requests, http://HOST:PORT; repeat it
    /// for nodes serving other models (each record goes to the first one serving its
    /// model, e.g. a model trained on chain).
    #[arg(long, value_name = "URL", value_parser = parse_http_url, required = true)]
    ml_node: Vec<String>,
    /// Pause between polls of the chain for pending work, in milliseconds.
    #[arg(long, default_value_t = 1000)]
    poll_ms: u64,
    /// Directory of the validator's BLS key and key generation secrets (created; keep it:
    /// the shares of every group key are tied to it) [default: `bls` beside the mnemonic
    /// file].
    #[arg(long, value_name = "PATH")]
    bls_dir: Option<PathBuf>,
    /// Serve Prometheus metrics at `GET http://ADDR/metrics` (answers by outcome, pending
    /// work, and the chain's count of this validator's answers and missed deadlines).
    #[arg(long, value_name = "ADDR")]
    metrics_listen: Option<std::net::SocketAddr>,
}

/// `host:port` of an `http://HOST:PORT` URL.
fn parse_http_url(url: &str) -> Result<String, String> {
    upstream::authority(url)
}

/// Runs the validator until Ctrl-C.
pub async fn run(args: ValidatorArgs) -> anyhow::Result<()> {
    // One copy signs the payload fetches, the other the transactions.
    let key = key_from_mnemonic_file(&args.mnemonic_file)?;
    let chain = loop {
        let signer = key_from_mnemonic_file(&args.mnemonic_file)?;
        match Chain::connect(&args.chain_rpc, signer).await {
            Ok(chain) => break chain,
            Err(e) => {
                tracing::warn!(rpc = %args.chain_rpc, error = %format!("{e:#}"), "chain not reachable yet; retrying in 2 s");
                tokio::time::sleep(Duration::from_secs(2)).await;
            }
        }
    };
    tracing::info!(role = "validator", address = %chain.address(), chain_id = %chain.chain_id(), ml_nodes = %args.ml_node.join(", "), "validator polling for assigned work");
    let metrics = match args.metrics_listen {
        Some(listen) => {
            let metrics = Arc::new(ValidatorMetrics::default());
            let listener = tokio::net::TcpListener::bind(listen)
                .await
                .with_context(|| format!("binding the metrics address {listen}"))?;
            tracing::info!(role = "validator", %listen, "serving metrics");
            tokio::spawn(gonka_client::metrics::serve(
                listener,
                metrics.registry(),
                || {},
            ));
            Some(metrics)
        }
        None => None,
    };
    let config = ValidatorConfig {
        ml_nodes: args.ml_node,
        poll: Duration::from_millis(args.poll_ms),
        connect_timeout: Duration::from_secs(5),
        // Re-execution on a real model may take a while; the deadline is blocks away.
        request_timeout: Duration::from_secs(120),
        inclusion_timeout: Duration::from_secs(30),
        bls_dir: Some(args.bls_dir.unwrap_or_else(|| {
            args.mnemonic_file
                .parent()
                .unwrap_or(std::path::Path::new("."))
                .join("bls")
        })),
        metrics,
    };
    tokio::select! {
        () = follow(chain, key, config) => Ok(()),
        _ = tokio::signal::ctrl_c() => {
            tracing::info!(role = "validator", "shutting down");
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        args: ValidatorArgs,
    }

    #[test]
    fn flags_parse_with_defaults() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
        let base = [
            "validator",
            "--chain-rpc=http://127.0.0.1:26657",
            "--mnemonic-file=/m",
            "--ml-node=http://127.0.0.1:8080",
        ];
        let a = Cli::try_parse_from(base).unwrap().args;
        assert_eq!(a.ml_node, ["127.0.0.1:8080"]);
        let two = Cli::try_parse_from(
            base.iter()
                .copied()
                .chain(["--ml-node=http://127.0.0.1:8090"]),
        )
        .unwrap()
        .args;
        assert_eq!(two.ml_node, ["127.0.0.1:8080", "127.0.0.1:8090"]);
        assert_eq!(a.poll_ms, 1000);
        assert!(
            Cli::try_parse_from(&base[..3]).is_err(),
            "--ml-node is required"
        );
        assert!(
            Cli::try_parse_from(base[..3].iter().copied().chain(["--ml-node=https://x:1"]))
                .is_err()
        );
    }
}
