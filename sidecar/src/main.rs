//! `gonka-sidecar`: one binary, one role per process.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context;
use clap::{Parser, Subcommand};
use gonka_sidecar::ml_node::{self, MlNodeConfig};
use gonka_sidecar::reference;
use gonka_sidecar::transfer_agent::{server, TaConfig, TaNodeConfig, TransferAgent};

/// Off-chain processes beside a gonka node.
#[derive(Debug, Parser)]
#[command(name = "gonka-sidecar", version, about)]
struct Cli {
    #[command(subcommand)]
    role: Role,
}

/// The sidecar's roles. The validator and trainer roles are not built yet.
#[derive(Debug, Subcommand)]
enum Role {
    /// Serve the built-in deterministic reference model over an OpenAI-compatible HTTP API.
    MlNode(MlNodeArgs),
    /// Authenticate OpenAI requests and forward them to ML nodes (no chain interaction yet).
    TransferAgent(TransferAgentArgs),
}

#[derive(Debug, clap::Args)]
struct TransferAgentArgs {
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
    gonka_sidecar::transfer_agent::upstream::authority(url)?;
    Ok(TaNodeConfig {
        id: id.to_string(),
        url: url.to_string(),
        models: vec![model.to_string()],
        vram_mib: 0,
        bandwidth_mbps: 0,
        max_concurrency,
    })
}

#[derive(Debug, clap::Args)]
struct MlNodeArgs {
    /// Address to listen on.
    #[arg(long, env = "GONKA_ML_NODE_LISTEN", default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
    /// Model id clients must name in requests.
    #[arg(long, default_value = ml_node::DEFAULT_MODEL_ID)]
    model_id: String,
    /// Seed of the reference model's weights (every ML node of a network must agree).
    #[arg(long, default_value_t = reference::DEFAULT_SEED)]
    seed: u64,
    /// Generations allowed at once; more get 503.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=4096))]
    max_concurrency: u32,
    /// Largest `max_tokens` a request may ask for.
    #[arg(long, default_value_t = 4096)]
    max_tokens_cap: u32,
    /// `max_tokens` used when a request names none.
    #[arg(long, default_value_t = 256)]
    default_max_tokens: u32,
    /// Largest chat-formatted prompt accepted, in bytes.
    #[arg(long, default_value_t = 64 * 1024)]
    max_prompt_bytes: usize,
    /// Largest request body accepted, in bytes.
    #[arg(long, default_value_t = 1024 * 1024)]
    max_body_bytes: usize,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    match Cli::parse().role {
        Role::MlNode(args) => run_ml_node(args).await,
        Role::TransferAgent(args) => run_transfer_agent(args).await,
    }
}

async fn run_transfer_agent(args: TransferAgentArgs) -> anyhow::Result<()> {
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

async fn run_ml_node(args: MlNodeArgs) -> anyhow::Result<()> {
    let config = MlNodeConfig {
        listen: args.listen,
        model_id: args.model_id,
        seed: args.seed,
        max_concurrency: args.max_concurrency as usize,
        max_tokens_cap: args.max_tokens_cap,
        default_max_tokens: args.default_max_tokens,
        max_prompt_bytes: args.max_prompt_bytes,
        max_body_bytes: args.max_body_bytes,
        testing_delay_per_token: Duration::ZERO,
    };
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .with_context(|| format!("binding the ML node to {}", config.listen))?;
    let addr = listener.local_addr()?;
    tracing::info!(role = "ml-node", %addr, model = %config.model_id, max_concurrency = config.max_concurrency, "ML node listening");
    ml_node::serve(listener, config, async {
        let _ = tokio::signal::ctrl_c().await;
        tracing::info!(role = "ml-node", "shutting down");
    })
    .await
    .context("serving the ML node")
}
