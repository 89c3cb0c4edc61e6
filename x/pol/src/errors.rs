//! Stable error codes of codespace `pol`.

/// Codes of the pol codespace. Never renumber: clients match on them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum PolError {
    /// A parameter is out of range.
    InvalidParams = 2,
    /// A job's configuration, rounds, workers, deadline or budget is out of range, or a
    /// worker's endpoint is not a URL.
    InvalidJob = 3,
    /// No training job with this id.
    UnknownJob = 4,
    /// The job already has all its workers.
    JobFull = 5,
    /// The job has ended (completed or cancelled).
    JobEnded = 6,
    /// The host already works on this job.
    AlreadyJoined = 7,
    /// The host is not a staked participant that is not jailed.
    NotStaked = 8,
    /// A checkpoint's or verdict's hashes are malformed.
    InvalidCheckpoint = 9,
    /// The round named is not the job's open round.
    RoundNotOpen = 10,
    /// The sender is not an active worker of the job.
    NotWorker = 11,
    /// The worker already submitted its checkpoint of this round.
    DuplicateCheckpoint = 12,
    /// No checkpoint of this worker in this round.
    UnknownCheckpoint = 13,
    /// The checkpoint is not awaiting this validator's re-execution.
    NotAssigned = 14,
    /// Too many jobs are forming or running.
    TooManyJobs = 15,
    /// The job has not completed, so it has no final weights to publish.
    NotCompleted = 16,
    /// The worker already attested the job's weights, or the job's model is published.
    AlreadyAttested = 17,
}

gonka_sdk::impl_error_code!(PolError, "pol");
