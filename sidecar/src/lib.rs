//! gonka sidecar: the off-chain processes beside a gonka node.
//!
//! This crate holds the ML node runtime: the built-in deterministic [`reference`](mod@reference) model and the
//! OpenAI-compatible [`ml_node`] server in front of it. The binary `gonka-sidecar` runs one role
//! per process (`gonka-sidecar ml-node ...`).

pub mod ml_node;
pub mod reference;
/// The transfer agent's scheduling core: node routing with load and failure backoff, and the
/// commission-ordered wait queue (pure logic, no I/O).
pub mod transfer_agent;
