//! Stable error codes of codespace `auth`: every way the ante step rejects a transaction.

/// Codes of the auth codespace. Never renumber: clients match on them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum AuthError {
    /// The bytes are not a `TxRaw` with decodable body and auth info.
    TxDecode = 2,
    /// A message type URL that no module handles.
    UnknownMessage = 3,
    /// The signature does not verify over the rebuilt sign doc.
    InvalidSignature = 4,
    /// The tx was signed for another chain id.
    WrongChainId = 5,
    /// The tx was signed with another account number.
    WrongAccountNumber = 6,
    /// The tx's sequence was already used (a replay).
    SequenceReplayed = 7,
    /// The tx's sequence is ahead of the account's.
    SequenceFuture = 8,
    /// The fee is below ceil(gas limit × min gas price) or in the wrong denom.
    InsufficientFee = 9,
    /// The tx is larger than `max_tx_bytes`.
    TxTooLarge = 10,
    /// The signer has no account (it never received funds).
    UnknownAccount = 11,
    /// A malformed bech32 address, or one with the wrong prefix or length.
    InvalidAddress = 12,
    /// A message's signer is not the tx's signer.
    SignerMismatch = 13,
    /// The public key is missing, malformed, or not the account's.
    InvalidPubKey = 14,
    /// The tx has no messages, too many, or not exactly one signer.
    InvalidTxShape = 15,
    /// A parameter value is out of range.
    InvalidParams = 16,
}

gonka_sdk::impl_error_code!(AuthError, "auth");
