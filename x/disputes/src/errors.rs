//! Stable error codes of codespace `disputes`.

/// Codes of the disputes codespace. Never renumber: clients match on them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum DisputesError {
    /// A parameter is out of range.
    InvalidParams = 2,
    /// A malformed message field (address, inference id, hash length, amount).
    InvalidMsg = 3,
    /// A validation for a record that was not sampled.
    NotSampled = 4,
    /// A validation from a validator other than the assigned one.
    NotAssigned = 5,
    /// A validation after its deadline.
    DeadlinePassed = 6,
    /// A second validation of the same record.
    AlreadyValidated = 7,
    /// An inference id that is not stored.
    UnknownRecord = 8,
    /// A dispute on a record that already has one (open or resolved).
    AlreadyDisputed = 9,
    /// A user dispute deposit below `min_deposit`.
    DepositTooLow = 10,
    /// A user dispute opened by someone other than the record's requester.
    NotRequester = 11,
    /// A dispute id that does not exist.
    UnknownDispute = 12,
    /// A vote from an account that is not on the dispute's committee.
    NotCommitteeMember = 13,
    /// A second vote of the same member.
    AlreadyVoted = 14,
    /// A vote on a dispute that is already resolved.
    DisputeClosed = 15,
    /// A user dispute opened after the record's `dispute_window_blocks`.
    DisputeWindowClosed = 16,
    /// A reveal from someone other than the record's transfer agent or executor host.
    NotRevealer = 17,
    /// A reveal nobody asked for yet: no re-execution's result is committed and waiting
    /// (revealing earlier would let the assigned validator copy the answer).
    RevealNotDue = 18,
    /// A second reveal of the same record.
    AlreadyRevealed = 19,
    /// A salt and answer that do not open the record's output commitment.
    RevealMismatch = 20,
    /// A result or reveal of the wrong kind for the record's model (a text commitment for a
    /// "logprobs" model, scores for an "exact" one), or scores that do not fit the record
    /// (positions, alternatives per position).
    WrongResultKind = 21,
}

gonka_sdk::impl_error_code!(DisputesError, "disputes");
