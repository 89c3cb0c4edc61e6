//! Stable error codes of codespace `inference`.

/// Codes of the inference codespace. Never renumber: clients match on them. Codes 12 to 19
/// and 21 to 26 were the refusals of the per-record `MsgSubmitWorkBatch`, which committed
/// batches (x/settlement) replaced; they are not reused.
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
    /// A record id that is not stored (queries).
    UnknownRecord = 20,
    /// A node's proof of possession of its key does not verify.
    InvalidKeyProof = 27,
    /// A node key already registered for another node.
    DuplicateNodeKey = 28,
}

gonka_sdk::impl_error_code!(InferenceError, "inference");
