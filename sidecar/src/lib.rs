//! gonka sidecar: the off-chain processes beside a gonka node.
//!
//! This crate holds the ML node runtime (the built-in deterministic
//! [`reference`](mod@reference) model and the OpenAI-compatible [`ml_node`] server in front of
//! it) and the [`transfer_agent`] that authenticates users' signed requests and routes them to
//! ML nodes, and the [`validator`] that re-executes the work the chain assigns to its participant.
//! The binary `gonka-sidecar` runs one role per process (`gonka-sidecar ml-node ...`,
//! `gonka-sidecar transfer-agent ...`, `gonka-sidecar validator ...`).

pub mod chain;
pub mod ml_node;
pub mod receipt;
pub mod reference;
/// The transfer agent: signed-request authentication, routing with load and failure backoff,
/// the commission-ordered wait queue, and the OpenAI-compatible HTTP front.
pub mod transfer_agent;
pub mod validator;
