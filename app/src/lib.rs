//! gonka-app: the ABCI 2.0 application CometBFT drives.
//!
//! - [`App`] implements `tendermint_abci::Application`: `Info`, `InitChain`, `CheckTx`,
//!   `PrepareProposal`/`ProcessProposal`, `ExtendVote`/`VerifyVoteExtension` (the
//!   randomness beacon, [`beacon`]), `FinalizeBlock`, `Commit` and `Query`.
//! - [`modules`] lists the chain modules in the one order every hook runs in.
//! - The transaction pipeline (`tx`, `ante`) decodes Cosmos SDK `TxRaw`, authenticates it
//!   and executes its messages in forks of the block state.
//! - [`snapshots`]: state sync — snapshots every N blocks, and restoring a new node from a
//!   peer's snapshot checked against the app hash CometBFT's light client trusts.
//! - [`harness::TestChain`] drives an [`App`] block by block in-process, for tests and
//!   benchmarks.

mod abci;
mod ante;
mod app;
pub mod beacon;
pub mod duty;
pub mod genesis;
pub mod harness;
mod lock;
pub mod modules;
mod query;
mod server;
pub mod sig_cache;
pub mod snapshots;
mod tx;

pub use app::{App, Retention, CHAIN_ID_KEY};
pub use beacon::BeaconNode;
pub use server::{read_delimited, serve_abci};
pub use snapshots::SnapshotConfig;

use std::path::Path;

/// File name of the state database inside `<home>/data/`.
pub const STATE_FILE: &str = "state.redb";

/// Opens the state under `home`, signing beacons as `beacon` says.
pub fn open(home: &Path, beacon: BeaconNode) -> anyhow::Result<App> {
    App::open_with_beacon(&home.join("data").join(STATE_FILE), beacon)
}

/// Serves `app` (an [`App`], or an application wrapping one) over ABCI on `addr` (e.g.
/// `127.0.0.1:26658`) until the process is stopped. Every commit is durable, so stopping
/// (even by SIGKILL) loses nothing.
pub fn serve(addr: &str, app: impl tendermint_abci::Application) -> anyhow::Result<()> {
    let listener = std::net::TcpListener::bind(addr)
        .map_err(|e| anyhow::anyhow!("cannot listen for ABCI on {addr}: {e}"))?;
    tracing::info!(addr = %listener.local_addr()?, "ABCI server listening");
    server::serve_abci(listener, app)
        .map_err(|e| anyhow::anyhow!("ABCI server on {addr} stopped: {e}"))
}
