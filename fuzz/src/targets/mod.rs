//! One module per fuzz target; each has `run(data)`, which must never panic.

pub mod http;
pub mod msgs;
pub mod proof;
pub mod query;
pub mod tx_check;
