//! What a module may know about the block and transaction it runs in.

use crate::GasMeter;

/// The block being executed (or, for `CheckTx`, the block that would come next).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BlockContext {
    /// Chain id from genesis.
    pub chain_id: String,
    /// Height of this block.
    pub height: u64,
    /// Block time from the header, seconds since the Unix epoch. Never the wall clock.
    pub time_seconds: i64,
    /// Nanoseconds part of the block time.
    pub time_nanos: u32,
    /// Hash of this block's header (FinalizeBlock's `hash`): unknown to anyone before the
    /// block is proposed, identical on every node, so it seeds choices that must be both
    /// unpredictable and reproducible (e.g. which work records are validated). All zeros
    /// in `CheckTx`, whose block is not decided yet.
    pub block_hash: [u8; 32],
    /// The protobuf body of the beacon transaction this block starts with, if any: the
    /// previous height's beacon and a signing request's signature (x/bls checks and records
    /// them); `None` without one, and in `CheckTx`.
    pub beacon_tx: Option<Vec<u8>>,
    /// Who signed the previous block's commit (FinalizeBlock's `decided_last_commit`): what
    /// downtime jailing counts. Empty in `CheckTx` and for the first block.
    pub last_commit: Vec<CommitVote>,
    /// Evidence of validators' misbehavior CometBFT committed in this block (FinalizeBlock's
    /// `misbehavior`); empty in `CheckTx`.
    pub misbehavior: Vec<Misbehavior>,
}

/// One validator's part in a commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommitVote {
    /// The validator's consensus address: the first 20 bytes of SHA-256 of its ed25519 key.
    pub validator_address: [u8; 20],
    /// Whether its vote is in the commit (for the block or for nil); false when absent.
    pub signed: bool,
}

/// Evidence that a validator misbehaved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Misbehavior {
    /// The offender's consensus address.
    pub validator_address: [u8; 20],
    /// Height of the offence.
    pub height: u64,
    /// A duplicate vote (double signing) rather than a light-client attack.
    pub duplicate_vote: bool,
}

/// The transaction a message runs in.
#[derive(Debug, Clone, Copy)]
pub struct TxContext<'a> {
    /// The block the transaction is in.
    pub block: &'a BlockContext,
    /// Bech32 address of the transaction's (single) signer, already authenticated.
    pub signer: &'a str,
    /// The transaction's gas meter. State access is charged by the app; a message charges
    /// the other work it makes the chain do, such as each signature it verifies.
    pub gas: &'a GasMeter,
}
