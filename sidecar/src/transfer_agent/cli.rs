//! The `gonka-sidecar transfer-agent` command line.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context;

use super::{server, TaConfig, TaNodeConfig, TransferAgent};

/// Arguments of `gonka-sidecar transfer-agent`.
#[derive(Debug, clap::Args)]
pub struct TransferAgentArgs {
    /// Address to listen on.
    #[arg(long, env = "GONKA_TA_LISTEN", default_value = "127.0.0.1:9000")]
    listen: SocketAddr,
    /// An ML node, `ID=URL,MODEL,MAX_CONCURRENCY` (repeatable), e.g.
    /// `n1=http://127.0.0.1:8080,gonka/reference-1,4`.
    #[arg(long = "node", value_parser = parse_node, required = true)]
    nodes: Vec<TaNodeConfig>,
    /// Allowed clock difference of request timestamps, in seconds.
    #[arg(long, default_value_t = 60)]
    max_skew: u64,
    /// Requests allowed to wait for a free ML node; more get 429.
    #[arg(long, default_value_t = 64)]
    queue_capacity: usize,
    /// Longest a request waits for a free ML node before 429, in milliseconds.
    #[arg(long, default_value_t = 30_000)]
    queue_timeout_ms: u64,
    /// This TA's account address, served at /v1/identity.
    #[arg(long, default_value = "")]
    address: String,
    /// This TA's hex public key, served at /v1/identity.
    #[arg(long, default_value = "")]
    pubkey: String,
    /// The URL clients reach this TA at, served at /v1/identity (default: http://LISTEN).
    #[arg(long)]
    public_url: Option<String>,
}

/// Parses `ID=URL,MODEL,MAX_CONCURRENCY`.
fn parse_node(s: &str) -> Result<TaNodeConfig, String> {
    let (id, rest) = s
        .split_once('=')
        .ok_or_else(|| format!("`{s}`: expected ID=URL,MODEL,MAX_CONCURRENCY"))?;
    let parts: Vec<&str> = rest.split(',').collect();
    let [url, model, max] = parts[..] else {
        return Err(format!("`{s}`: expected ID=URL,MODEL,MAX_CONCURRENCY"));
    };
    let max_concurrency: u32 = max
        .parse()
        .map_err(|_| format!("`{s}`: MAX_CONCURRENCY must be a number but is `{max}`"))?;
    if id.is_empty() || model.is_empty() {
        return Err(format!("`{s}`: ID and MODEL must not be empty"));
    }
    super::upstream::authority(url)?;
    Ok(TaNodeConfig {
        id: id.to_string(),
        url: url.to_string(),
        models: vec![model.to_string()],
        vram_mib: 0,
        bandwidth_mbps: 0,
        max_concurrency,
    })
}

/// Runs a transfer agent until Ctrl-C.
pub async fn run(args: TransferAgentArgs) -> anyhow::Result<()> {
    let config = TaConfig {
        address: args.address,
        pubkey: args.pubkey,
        public_url: args
            .public_url
            .unwrap_or_else(|| format!("http://{}", args.listen)),
        nodes: args.nodes,
        max_skew_secs: args.max_skew,
        queue_capacity: args.queue_capacity,
        queue_timeout: Duration::from_millis(args.queue_timeout_ms),
        ..TaConfig::default()
    };
    let ta = TransferAgent::new(config).map_err(anyhow::Error::msg)?;
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("binding the transfer agent to {}", args.listen))?;
    let addr = listener.local_addr()?;
    tracing::info!(role = "transfer-agent", %addr, "transfer agent listening");
    server::serve(listener, ta, async {
        let _ = tokio::signal::ctrl_c().await;
        tracing::info!(role = "transfer-agent", "shutting down");
    })
    .await
    .context("serving the transfer agent")
}
