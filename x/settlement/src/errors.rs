//! Stable error codes of codespace `settlement`.

/// Codes of the settlement codespace. Never renumber: clients match on them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum SettlementError {
    /// A parameter is out of range.
    InvalidParams = 2,
    /// An escrow message is malformed (amount, expiry) or names no transfer agent.
    InvalidEscrow = 3,
    /// The requester already holds an escrow for this transfer agent.
    EscrowExists = 4,
    /// No open escrow for this (requester, transfer agent).
    UnknownEscrow = 5,
    /// A batch is malformed: root, signature, lines out of order, totals that do not add up.
    InvalidBatch = 6,
    /// The batch number is not the transfer agent's next one.
    WrongBatchNumber = 7,
    /// A host of the batch has no registered BLS key.
    MissingBlsKey = 8,
    /// The hosts' aggregate signature does not verify.
    InvalidHostSignature = 9,
    /// An escrow cannot cover a requester's total.
    InsufficientEscrow = 10,
    /// No batch with this id.
    UnknownBatch = 11,
    /// The batch is no longer in its challenge window (paid out or voided).
    BatchNotPending = 12,
    /// A challenge's leaf or node does not lead to the batch's root.
    InvalidProof = 13,
    /// A challenge whose proofs are valid but show no fault: the batch stands.
    ChallengeFailed = 14,
    /// The submitter is not a registered, staked transfer agent.
    NotTransferAgent = 15,
    /// The batches settled in this block already commit to `max_block_records`: the batch
    /// is valid but must wait for a later block.
    BlockRecordsFull = 16,
    /// A voided batch's leaves are not disputed: its requesters were refunded.
    BatchVoided = 17,
    /// The leaf's record is already on chain: dispute it with MsgOpenDispute.
    RecordOnChain = 18,
}

gonka_sdk::impl_error_code!(SettlementError, "settlement");
