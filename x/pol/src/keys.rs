//! The pol key schema: the only place pol storage keys are formed. Addresses are bech32 and
//! never contain the `/` separator; numbers are zero-padded so keys sort numerically.

/// Module parameters.
pub fn params() -> Vec<u8> {
    b"pol/params".to_vec()
}

/// The next job id (u64 BE).
pub fn next_job_id() -> Vec<u8> {
    b"pol/next_job_id".to_vec()
}

/// How many jobs are forming or running (u64 BE).
pub fn live_jobs() -> Vec<u8> {
    b"pol/live_jobs".to_vec()
}

/// Prefix of every job.
pub fn jobs() -> Vec<u8> {
    b"pol/job/".to_vec()
}

/// One job, by id.
pub fn job(id: u64) -> Vec<u8> {
    let mut key = jobs();
    key.extend_from_slice(format!("{id:020}").as_bytes());
    key
}

/// Prefix of every checkpoint.
pub fn checkpoints() -> Vec<u8> {
    b"pol/checkpoint/".to_vec()
}

/// Prefix of a job's checkpoints.
pub fn job_checkpoints(job: u64) -> Vec<u8> {
    format!("pol/checkpoint/{job:020}/").into_bytes()
}

/// Prefix of the checkpoints of one round of a job.
pub fn round_checkpoints(job: u64, round: u64) -> Vec<u8> {
    format!("pol/checkpoint/{job:020}/{round:020}/").into_bytes()
}

/// The checkpoint of `worker` in `round` of `job`.
pub fn checkpoint(job: u64, round: u64, worker: &str) -> Vec<u8> {
    let mut key = round_checkpoints(job, round);
    key.extend_from_slice(worker.as_bytes());
    key
}

/// A checkpoint named by (job, round, worker), as the queues below carry it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckpointId {
    /// The training job.
    pub job: u64,
    /// The outer round.
    pub round: u64,
    /// The worker's host.
    pub worker: String,
}

fn checkpoint_suffix(job: u64, round: u64, worker: &str) -> String {
    format!("{job:020}/{round:020}/{worker}")
}

fn parse_checkpoint_suffix(rest: &str) -> Option<CheckpointId> {
    let mut parts = rest.splitn(3, '/');
    let job = parts.next()?.parse().ok()?;
    let round = parts.next()?.parse().ok()?;
    let worker = parts.next()?.to_string();
    Some(CheckpointId { job, round, worker })
}

fn parse_job_round(rest: &str) -> Option<(u64, u64)> {
    let (job, round) = rest.split_once('/')?;
    Some((job.parse().ok()?, round.parse().ok()?))
}

/// Prefix of the rounds to close in `end_block` of `height` (their deadline, or the block
/// their last checkpoint arrived in).
pub fn closes_at(height: u64) -> Vec<u8> {
    format!("pol/close/{height:020}/").into_bytes()
}

/// Queue entry: round `round` of `job` closes at `height`.
pub fn close(height: u64, job: u64, round: u64) -> Vec<u8> {
    let mut key = closes_at(height);
    key.extend_from_slice(format!("{job:020}/{round:020}").as_bytes());
    key
}

/// Prefix of the rounds whose checkpoints are sampled in `begin_block` of `height`.
pub fn samples_at(height: u64) -> Vec<u8> {
    format!("pol/sample/{height:020}/").into_bytes()
}

/// Queue entry: the checkpoints of round `round` of `job` are sampled at `height`.
pub fn sample(height: u64, job: u64, round: u64) -> Vec<u8> {
    let mut key = samples_at(height);
    key.extend_from_slice(format!("{job:020}/{round:020}").as_bytes());
    key
}

/// The (job, round) of a [`close`] or [`sample`] key under `prefix`.
pub fn parse_round_entry(prefix: &[u8], key: &[u8]) -> Option<(u64, u64)> {
    parse_job_round(std::str::from_utf8(key.strip_prefix(prefix)?).ok()?)
}

/// Prefix of the forming jobs cancelled at `height` if still not full.
pub fn formations_at(height: u64) -> Vec<u8> {
    format!("pol/formation/{height:020}/").into_bytes()
}

/// Queue entry: `job` is cancelled at `height` unless it filled.
pub fn formation(height: u64, job: u64) -> Vec<u8> {
    let mut key = formations_at(height);
    key.extend_from_slice(format!("{job:020}").as_bytes());
    key
}

/// The job of a [`formation`] key under `prefix`.
pub fn parse_formation(prefix: &[u8], key: &[u8]) -> Option<u64> {
    std::str::from_utf8(key.strip_prefix(prefix)?)
        .ok()?
        .parse()
        .ok()
}

/// Prefix of the checkpoints whose verification or dispute passes its deadline at `height`
/// (processed in `begin_block` of `height`, the block after the deadline).
pub fn reviews_at(height: u64) -> Vec<u8> {
    format!("pol/review/{height:020}/").into_bytes()
}

/// Queue entry: the review of a checkpoint ends at `height`.
pub fn review(height: u64, job: u64, round: u64, worker: &str) -> Vec<u8> {
    let mut key = reviews_at(height);
    key.extend_from_slice(checkpoint_suffix(job, round, worker).as_bytes());
    key
}

/// Prefix of the disputed checkpoints whose committee is drawn in `begin_block` of `height`.
pub fn draws_at(height: u64) -> Vec<u8> {
    format!("pol/draw/{height:020}/").into_bytes()
}

/// Queue entry: the committee of a disputed checkpoint is drawn at `height`.
pub fn draw(height: u64, job: u64, round: u64, worker: &str) -> Vec<u8> {
    let mut key = draws_at(height);
    key.extend_from_slice(checkpoint_suffix(job, round, worker).as_bytes());
    key
}

/// The checkpoint of a [`review`] or [`draw`] key under `prefix`.
pub fn parse_checkpoint_entry(prefix: &[u8], key: &[u8]) -> Option<CheckpointId> {
    parse_checkpoint_suffix(std::str::from_utf8(key.strip_prefix(prefix)?).ok()?)
}

/// Prefix of the re-executions `validator` owes.
pub fn duties_of(validator: &str) -> Vec<u8> {
    format!("pol/duty/{validator}/").into_bytes()
}

/// Index entry: `validator` owes a re-execution of a checkpoint.
pub fn duty(validator: &str, job: u64, round: u64, worker: &str) -> Vec<u8> {
    let mut key = duties_of(validator);
    key.extend_from_slice(checkpoint_suffix(job, round, worker).as_bytes());
    key
}

/// The checkpoint of a [`duty`] key under `prefix`.
pub fn parse_duty(prefix: &[u8], key: &[u8]) -> Option<CheckpointId> {
    parse_checkpoint_entry(prefix, key)
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOST: &str = "gonka1qqqsyqcyq5rqwzqfpg9scrgwpugpzysnzs23v";

    #[test]
    fn checkpoint_keys_sort_by_job_round_worker() {
        assert!(checkpoint(2, 1, HOST) < checkpoint(2, 2, HOST));
        assert!(checkpoint(2, 9, HOST) < checkpoint(10, 1, HOST));
        assert!(checkpoint(3, 4, HOST).starts_with(&round_checkpoints(3, 4)));
        assert!(round_checkpoints(3, 4).starts_with(&job_checkpoints(3)));
        assert!(job_checkpoints(3).starts_with(&checkpoints()));
    }

    #[test]
    fn round_entries_round_trip() {
        let prefix = closes_at(7);
        assert_eq!(parse_round_entry(&prefix, &close(7, 3, 12)), Some((3, 12)));
        let prefix = samples_at(8);
        assert_eq!(parse_round_entry(&prefix, &sample(8, 3, 12)), Some((3, 12)));
        assert_eq!(parse_round_entry(&prefix, &sample(9, 3, 12)), None);
    }

    #[test]
    fn checkpoint_entries_round_trip() {
        let id = CheckpointId {
            job: 5,
            round: 2,
            worker: HOST.into(),
        };
        assert_eq!(
            parse_checkpoint_entry(&reviews_at(40), &review(40, 5, 2, HOST)),
            Some(id.clone())
        );
        assert_eq!(
            parse_checkpoint_entry(&draws_at(41), &draw(41, 5, 2, HOST)),
            Some(id.clone())
        );
        assert_eq!(
            parse_duty(&duties_of(HOST), &duty(HOST, 5, 2, HOST)),
            Some(id)
        );
        assert_eq!(
            parse_formation(&formations_at(9), &formation(9, 4)),
            Some(4)
        );
    }
}
