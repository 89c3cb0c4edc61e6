//! Stable error codes of codespace `stake`.

/// Codes of the stake codespace. Never renumber: clients match on them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum StakeError {
    /// A parameter is out of range.
    InvalidParams = 2,
    /// A first stake (or a genesis bond) is below `min_stake`.
    BelowMinStake = 3,
    /// Unstaking more than is bonded.
    UnstakeExceedsBonded = 4,
    /// The consensus key belongs to another participant.
    ConsensusKeyInUse = 5,
    /// The participant is jailed.
    Jailed = 6,
    /// No participant with this operator address.
    UnknownParticipant = 7,
    /// A consensus key that is not 32 bytes, or an attempt to change one.
    InvalidConsensusKey = 8,
    /// MsgUnjail before the jail time is over, or for a participant that is not jailed.
    NotUnjailable = 9,
    /// A moniker that is too long or has control characters.
    InvalidMoniker = 10,
    /// Voiding more work than was credited.
    InvalidWork = 11,
    /// A slash fraction above one.
    InvalidFraction = 12,
    /// MsgUnjail of a participant caught double signing: it is jailed for good.
    Tombstoned = 13,
    /// An unstake below `min_unstake` that leaves stake bonded.
    UnstakeBelowMinimum = 14,
    /// The participant already has `max_unbonding_entries` unbonding entries.
    TooManyUnbondings = 15,
}

gonka_sdk::impl_error_code!(StakeError, "stake");
