//! gonka-store: the chain's versioned, authenticated key-value store.
//!
//! State lives in a Jellyfish Merkle tree (the `jmt` crate) persisted in one `redb` file.
//! Versions are block heights: genesis is version 0, block `h` is version `h`, and the root of
//! the tree at a version is the app hash of that height. Keys are arbitrary non-empty bytes
//! (module keys such as `bank/balance/gonka1.../ngnk`); the tree is keyed by their SHA-256.
//!
//! Writes are two-phase, matching ABCI: [`Store::prepare`] computes the root hashes of one or
//! more versions without writing (`FinalizeBlock`), and [`Store::commit`] writes everything in
//! one durable redb transaction (`Commit`). Reads at the latest version ([`Store::get`],
//! [`Store::prefix`]) are served from an ordered index kept beside the tree; reads at past
//! versions ([`Store::get_at`]) and ics23 proofs ([`Store::get_with_proof`]) go through the
//! tree. [`verify_membership`] and [`verify_non_membership`] check those proofs with nothing but
//! the `ics23` crate, as a light client would.
//!
//! State sync: [`Store::export`] streams the tree at a version as verifiable chunks, and
//! [`Store::begin_restore`] rebuilds it in an empty store, which then continues from that
//! version as if it had committed every one before it (older versions read as pruned).

mod db;
mod proof;
mod snapshot;
mod store;

#[cfg(test)]
mod tests;

pub use proof::{proof_spec, verify_membership, verify_non_membership, PROOF_OP_TYPE};
pub use snapshot::{Export, Restore, DEFAULT_CHUNK_BYTES, MAX_PROOF_BYTES, SNAPSHOT_FORMAT};
pub use store::{PreparedCommit, Pruned, Store, StoreError};

/// The `ics23` crate, re-exported so users name the same `CommitmentProof` type the store uses.
pub use ics23;

/// One version's writes: key -> Some(value) to set, None to delete. Ordered (determinism).
pub type ChangeSet = std::collections::BTreeMap<Vec<u8>, Option<Vec<u8>>>;
