//! Stable error codes of codespace `bls`.

/// Codes of the bls codespace. Never renumber: clients match on them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum BlsError {
    /// A malformed field: address, a public key that is not a 48-byte G1 subgroup point, a
    /// proof that is not a 96-byte G2 subgroup point, a malformed genesis key.
    InvalidMsg = 2,
    /// The registrant is not a stake participant.
    NotParticipant = 3,
    /// The proof of possession does not verify for this key, chain and address.
    InvalidProofOfPossession = 4,
    /// The key is registered by another participant.
    DuplicateKey = 5,
    /// No key is registered for the address asked about.
    UnknownKey = 6,
}

gonka_sdk::impl_error_code!(BlsError, "bls");
