//! The fuzz targets of gonka-rs, as plain functions of one input each.
//!
//! Every body here must never panic on any input: a panic is a finding. The same bodies run
//! under AFL++ (`src/bin/afl_*.rs`, built with `cargo afl build --features afl`) and under
//! [`replay`] of the committed corpus (`src/bin/replay.rs`, no instrumentation), so a crash
//! AFL finds is reproduced by `run.sh --replay` once its input is saved in the corpus.
//!
//! | target     | what it feeds                                                                  |
//! |------------|--------------------------------------------------------------------------------|
//! | `tx_check` | raw bytes to CheckTx of an in-process app (tx decoding and the ante handler)   |
//! | `msgs`     | each `Msg*` type URL's decode and stateless check in its module, and its JSON  |
//! | `query`    | the app's ABCI query router with any path, data, height and `prove`            |
//! | `http`     | the TA's and ML node's request checks (signed headers, chat body) and SSE      |
//! | `proof`    | ics23 proof verification of the store with arbitrary proof, root, key, value   |

pub mod fixture;
pub mod targets;

/// A fuzz target: its name (the corpus directory `corpus/<name>/`) and its body.
pub type Target = (&'static str, fn(&[u8]));

/// Every target, in the order `run.sh` runs them.
pub const TARGETS: &[Target] = &[
    ("tx_check", targets::tx_check::run),
    ("msgs", targets::msgs::run),
    ("query", targets::query::run),
    ("http", targets::http::run),
    ("proof", targets::proof::run),
];

/// The body of target `name`.
pub fn target(name: &str) -> Option<fn(&[u8])> {
    TARGETS.iter().find(|(n, _)| *n == name).map(|(_, f)| *f)
}

/// Splits `data` at its first `0` byte: the part before and the part after (all of `data`
/// and nothing when there is no `0`). How targets carve a string out of their input.
pub fn split_nul(data: &[u8]) -> (&[u8], &[u8]) {
    match data.iter().position(|&b| b == 0) {
        Some(at) => (&data[..at], &data[at + 1..]),
        None => (data, &[]),
    }
}
