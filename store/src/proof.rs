//! ics23 helpers: the proof spec of the tree and verification of the proofs the store serves.
//!
//! These are what a light client or an explorer runs against an app hash taken from a
//! CometBFT header; they use only the `ics23` crate, never the store.

/// The proof op type of the store's ics23 proofs in `/store/key` answers (the app writes it,
/// light clients such as `gonkad query --prove` look for it).
pub const PROOF_OP_TYPE: &str = "ics23:jmt";

/// The ics23 spec of the tree (`jmt::ics23_spec()`): SHA-256 leaves and inner nodes of a
/// binary sparse Merkle tree over SHA-256 key hashes.
pub fn proof_spec() -> ics23::ProofSpec {
    jmt::ics23_spec()
}

/// Verifies that `proof` proves `key = value` under `root`.
///
/// Returns `false` for a proof of anything else: another key or value, another root, or a
/// non-existence proof.
pub fn verify_membership(
    root: &[u8; 32],
    key: &[u8],
    value: &[u8],
    proof: &ics23::CommitmentProof,
) -> bool {
    ics23::verify_membership::<ics23::HostFunctionsManager>(
        proof,
        &proof_spec(),
        &root.to_vec(),
        key,
        value,
    )
}

/// Verifies that `proof` proves `key` has no value under `root`.
///
/// Returns `false` for an existence proof or a proof against another root.
pub fn verify_non_membership(root: &[u8; 32], key: &[u8], proof: &ics23::CommitmentProof) -> bool {
    ics23::verify_non_membership::<ics23::HostFunctionsManager>(
        proof,
        &proof_spec(),
        &root.to_vec(),
        key,
    )
}
