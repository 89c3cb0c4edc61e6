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
    /// A parameter is out of range.
    InvalidParams = 7,
    /// The sender is not a member of the key generation round.
    NotDkgMember = 8,
    /// The round is not in the phase this message belongs to (or is over).
    WrongPhase = 9,
    /// A second dealing from the same dealer.
    AlreadyDealt = 10,
    /// A dealing whose commitments, ephemeral point or shares are malformed.
    InvalidDealing = 11,
    /// A complaint or reveal about a dealer that did not deal.
    NoDealing = 12,
    /// A second complaint about the same dealer.
    AlreadyComplained = 13,
    /// A reveal for a complaint nobody made, or one already answered.
    NoComplaint = 14,
    /// A revealed share that does not verify against the dealer's commitments.
    InvalidShare = 15,
    /// A round id with no round.
    UnknownRound = 16,
    /// No beacon is kept for the height asked about.
    UnknownBeacon = 17,
    /// The epoch asked about has no certificate (yet).
    UnknownCertificate = 18,
}

gonka_sdk::impl_error_code!(BlsError, "bls");
