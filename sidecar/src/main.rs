//! `gonka-sidecar`: one binary, one role per process. The roles are library crates
//! (`gonka-node`, `gonka-ta`, `gonka-validator`, `gonka-trainer`); this binary only parses the command line,
//! sets up logging and runs the chosen role.

use clap::{Parser, Subcommand};
use gonka_node::cli::MlNodeArgs;
use gonka_ta::cli::TransferAgentArgs;
use gonka_trainer::role::cli::TrainerArgs;
use gonka_validator::cli::ValidatorArgs;

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
    /// Train the jobs this participant joins with DiLoCo, serve its round outputs to peers
    /// and verifiers, and re-execute the checkpoints the chain assigns to it.
    Trainer(TrainerArgs),
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
        Role::MlNode(args) => gonka_node::cli::run(args).await,
        Role::TransferAgent(args) => gonka_ta::cli::run(args).await,
        Role::Validator(args) => gonka_validator::cli::run(args).await,
        Role::Trainer(args) => gonka_trainer::role::cli::run(args).await,
    }
}
