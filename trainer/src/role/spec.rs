//! What a training job on chain asks of this trainer: the job's [`JobSpec`], and whether this
//! trainer can run it at all.

use gonka_proto::pol::TrainingJob;
use sha2::{Digest, Sha256};

use crate::{Corpus, Hash, JobSpec, OuterParams, DEFAULT_INIT_SEED, SEQ_LEN};

/// The architecture id this trainer implements (`TrainingConfig.model`).
pub const MODEL: &str = "gonka-ref-v1";

/// Bytes of the corpus a job trains on: generated from the job's seed ([`Corpus::generate`]).
pub const CORPUS_BYTES: u32 = 256 << 10;

/// Bytes of one dataset shard, the leaves of [`dataset_root`].
pub const SHARD_BYTES: usize = 64 << 10;

/// The Merkle root of `corpus`: leaves are SHA-256 of its [`SHARD_BYTES`] chunks in order
/// (the last one shorter); a level with an odd count carries its last node up unchanged;
/// inner nodes are SHA-256(left ‖ right). What a job's `dataset_root` must be.
pub fn dataset_root(corpus: &Corpus) -> Hash {
    let mut level: Vec<Hash> = corpus
        .as_bytes()
        .chunks(SHARD_BYTES)
        .map(|chunk| Sha256::digest(chunk).into())
        .collect();
    if level.is_empty() {
        return Sha256::digest([]).into();
    }
    while level.len() > 1 {
        level = level
            .chunks(2)
            .map(|pair| match pair {
                [left, right] => {
                    let mut hasher = Sha256::new();
                    hasher.update(left);
                    hasher.update(right);
                    hasher.finalize().into()
                }
                [single] => *single,
                _ => unreachable!("chunks(2) yields one or two"),
            })
            .collect();
    }
    level[0]
}

/// The dataset root of the corpus a job with `seed` trains on (for `gonkad tx pol create-job
/// --dataset-root`).
pub fn dataset_root_of_seed(seed: u64) -> Hash {
    dataset_root(&Corpus::generate(seed, CORPUS_BYTES as usize))
}

/// The [`JobSpec`] of a job on chain, or why this trainer cannot run it: another
/// architecture or sequence length, a dataset that is not the generated corpus of its seed,
/// or parameters out of the trainer's range.
pub fn job_spec(job: &TrainingJob) -> Result<JobSpec, String> {
    let config = job.config.clone().unwrap_or_default();
    if config.model != MODEL {
        return Err(format!(
            "model {:?}: this trainer runs {MODEL:?}",
            config.model
        ));
    }
    if config.seq_len != SEQ_LEN as u64 {
        return Err(format!(
            "sequences of {} bytes: this trainer trains on {SEQ_LEN}",
            config.seq_len
        ));
    }
    let narrow =
        |what: &str, v: u64| u32::try_from(v).map_err(|_| format!("{what} {v} is too large"));
    let ppm = |v: u64| v as f64 / 1e6;
    let spec = JobSpec {
        seed: job.seed,
        init_seed: DEFAULT_INIT_SEED,
        corpus_bytes: CORPUS_BYTES,
        workers: narrow("worker_count", job.worker_count)?,
        inner_steps: narrow("inner_steps", config.inner_steps)?,
        batch_size: narrow("batch_size", config.batch_size)?,
        inner: candle_nn::ParamsAdamW {
            lr: ppm(config.inner_lr_ppm),
            weight_decay: ppm(config.inner_weight_decay_ppm),
            ..crate::default_inner_params()
        },
        outer: OuterParams {
            lr: ppm(config.outer_lr_ppm) as f32,
            momentum: ppm(config.outer_momentum_ppm) as f32,
        },
    };
    spec.validate().map_err(|e| e.to_string())?;
    let root = dataset_root(&spec.corpus());
    if job.dataset_root != root {
        return Err(format!(
            "dataset_root {} is not the generated corpus of seed {} ({})",
            hex::encode(&job.dataset_root),
            job.seed,
            hex::encode(root)
        ));
    }
    Ok(spec)
}
