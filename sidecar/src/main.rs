//! `gonka-sidecar`: one binary, one role per process.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context;
use clap::{Parser, Subcommand};
use gonka_sidecar::ml_node::{self, MlNodeConfig};
use gonka_sidecar::reference;

/// Off-chain processes beside a gonka node.
#[derive(Debug, Parser)]
#[command(name = "gonka-sidecar", version, about)]
struct Cli {
    #[command(subcommand)]
    role: Role,
}

/// The sidecar's roles. The transfer agent, validator and trainer roles are not built yet.
#[derive(Debug, Subcommand)]
enum Role {
    /// Serve the built-in deterministic reference model over an OpenAI-compatible HTTP API.
    MlNode(MlNodeArgs),
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
    }
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
