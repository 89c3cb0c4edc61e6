//! Stable error codes of codespace `inference`.

/// Codes of the inference codespace. Never renumber: clients match on them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum InferenceError {
    /// A parameter is out of range.
    InvalidParams = 2,
    /// A genesis model is malformed or listed twice.
    InvalidModel = 3,
    /// A host or transfer agent is not a participant with bonded ≥ `min_stake`, not jailed.
    NotStaked = 4,
    /// A node id that is already registered.
    DuplicateNode = 5,
    /// A model id the chain does not price.
    UnknownModel = 6,
    /// A node declares less VRAM than a model it serves requires.
    InsufficientVram = 7,
    /// A node id that is not registered.
    UnknownNode = 8,
    /// Updating or removing a node hosted by someone else.
    NotNodeHost = 9,
    /// A malformed node field (id, models, endpoint, concurrency, public key).
    InvalidNode = 10,
    /// A malformed transfer agent field (URL, public key).
    InvalidTransferAgent = 11,
    /// A work batch signed by an account that is not a registered transfer agent.
    NotTransferAgent = 12,
    /// A work batch with no records or more than `max_records_per_batch`.
    BatchTooLarge = 13,
    /// A malformed work record field (hash length, token counts, commission, amounts).
    InvalidRecord = 14,
    /// `inference_id` is not the lowercase hex of `request_hash`.
    InvalidInferenceId = 15,
    /// The requester's signature is malformed or does not verify over `request_hash`.
    InvalidRequesterSignature = 16,
    /// The executor node's signature is malformed or does not verify with its registered key.
    InvalidExecutorSignature = 17,
    /// An inference id already stored, or twice in one batch.
    DuplicateRecord = 18,
    /// The executor node does not serve the record's model.
    ModelNotServed = 19,
    /// A record id that is not stored (queries).
    UnknownRecord = 20,
    /// `requester_pubkey` is malformed or does not derive to `requester`.
    RequesterKeyMismatch = 21,
    /// `request_hash` is not the request/v2 hash of the record's signed terms on this chain
    /// (e.g. a transfer agent charging more than was signed).
    RequestHashMismatch = 22,
    /// A record signed for another transfer agent than the one submitting it.
    WrongTransferAgent = 23,
    /// The model's price per token is above the `max_price_per_token` the requester signed.
    PriceAboveSigned = 24,
    /// More completion tokens than the `max_completion_tokens` the requester signed.
    TokensAboveSigned = 25,
    /// The requester cannot pay a record's cost and commission.
    InsufficientFunds = 26,
    /// A node's proof of possession of its key does not verify.
    InvalidKeyProof = 27,
    /// A node key already registered for another node.
    DuplicateNodeKey = 28,
}

gonka_sdk::impl_error_code!(InferenceError, "inference");
