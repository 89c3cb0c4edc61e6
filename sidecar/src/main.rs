//! `gonka-sidecar`: one binary, one role per process.

use clap::{Parser, Subcommand};
use gonka_sidecar::ml_node::cli::MlNodeArgs;
use gonka_sidecar::transfer_agent::cli::TransferAgentArgs;
use gonka_sidecar::validator::cli::ValidatorArgs;
use gonka_sidecar::{ml_node, transfer_agent, validator};

/// Off-chain processes beside a gonka node.
#[derive(Debug, Parser)]
#[command(name = "gonka-sidecar", version, about)]
struct Cli {
    #[command(subcommand)]
    role: Role,
}

/// The sidecar's roles.
#[derive(Debug, Subcommand)]
enum Role {
    /// Serve a model (the built-in deterministic reference model) over an OpenAI-compatible API.
    MlNode(MlNodeArgs),
    /// Authenticate signed OpenAI requests, route them to ML nodes and settle them on chain.
    TransferAgent(TransferAgentArgs),
    /// Re-execute the work records the chain assigns to this participant and submit
    /// validations and dispute votes.
    Validator(ValidatorArgs),
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
        Role::MlNode(args) => ml_node::cli::run(args).await,
        Role::TransferAgent(args) => transfer_agent::cli::run(args).await,
        Role::Validator(args) => validator::cli::run(args).await,
    }
}
