//! The `gonka-sidecar ml-node` command line.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context;

use super::MlNodeConfig;
use crate::reference;

/// Arguments of `gonka-sidecar ml-node`.
#[derive(Debug, clap::Args)]
pub struct MlNodeArgs {
    /// Address to listen on.
    #[arg(long, env = "GONKA_ML_NODE_LISTEN", default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
    /// Model id clients must name in requests.
    #[arg(long, default_value = super::DEFAULT_MODEL_ID)]
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

/// Runs an ML node until Ctrl-C.
pub async fn run(args: MlNodeArgs) -> anyhow::Result<()> {
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
    super::serve(listener, config, async {
        let _ = tokio::signal::ctrl_c().await;
        tracing::info!(role = "ml-node", "shutting down");
    })
    .await
    .context("serving the ML node")
}
