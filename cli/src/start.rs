//! `gonkad start`: serve the ABCI application to a CometBFT node.

use anyhow::Result;

use crate::Global;

/// Arguments of `gonkad start`.
#[derive(clap::Args)]
pub struct Args {
    /// Address to listen on for CometBFT's ABCI connections (its `proxy_app`).
    #[arg(long, default_value = "127.0.0.1:26658")]
    abci_addr: String,
}

/// Runs the ABCI server until the process is stopped.
pub fn run(global: &Global, args: Args) -> Result<()> {
    let addr = args
        .abci_addr
        .strip_prefix("tcp://")
        .unwrap_or(&args.abci_addr);
    gonka_app::serve(&global.home(), addr)
}
