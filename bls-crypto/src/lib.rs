//! gonka-bls-crypto: BLS12-381 signatures for gonka-rs, on blst (through `blstrs_plus`, whose field
//! and group types wrap blst's constant-time arithmetic).
//!
//! ## Variant and ciphersuites
//! **min-pk**: public keys are G1 points (48 bytes compressed), signatures G2 points (96
//! bytes), as in Ethereum's consensus layer. Keys are the cheap side: a light client holds
//! the group key and aggregating many public keys is cheap. Signatures are
//! the IETF BLS signature suite with proofs of possession:
//! - messages are hashed with `BLS_SIG_BLS12381G2_XMD:SHA-256_SSWU_RO_POP_` ([`SIG_DST`]);
//! - proofs of possession with `BLS_POP_BLS12381G2_XMD:SHA-256_SSWU_RO_POP_` ([`POP_DST`]).
//!
//! A proof of possession signs a message the caller chooses. The chain makes it bind the
//! registrant (chain id, address, key), so a key copied from one participant's registration
//! cannot be registered by another first.
//!
//! Verification is one pairing check, `e(pk, H(m)) · e(−g1, σ) = 1` (two Miller loops and
//! one final exponentiation). Keys and signatures are checked to be in the prime-order
//! subgroup and not the identity when decoded.
//!
//! ## Threshold signatures ([`threshold`])
//! A dealer picks a random polynomial `f` of degree `t − 1` over the scalar field and
//! publishes Feldman commitments `C_k = a_k·g1`. Share `i` (`i ≥ 1`) is `f(i)`; anyone checks it
//! against the commitments (`f(i)·g1 = Σ_k i^k·C_k`).
//!
//! With several dealers (a distributed key generation):
//! - a participant's share is the sum of its shares from the qualified dealers;
//! - the group key is the sum of their `C_0`;
//! - the public share of index `i` is the sum of their commitments evaluated at `i`.
//!
//! Any `t` partial signatures `σ_i = f(i)·H(m)` combine by Lagrange interpolation at 0 in the
//! exponent into the same group signature `f(0)·H(m)`: the combination is unique, so whoever
//! combines cannot choose among outcomes.

pub mod dkg;
mod keys;
pub mod member;
pub mod threshold;

pub use keys::{
    aggregate, fast_aggregate_verify, PublicKey, SecretKey, Signature, POP_DST, PUBLIC_KEY_LEN,
    SECRET_KEY_LEN, SIGNATURE_LEN, SIG_DST,
};
