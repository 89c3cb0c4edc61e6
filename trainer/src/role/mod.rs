//! The trainer role (`gonka-sidecar trainer`): a DiLoCo worker of the training jobs its
//! participant joins, and the re-executor of the checkpoints the chain assigns to it.
//!
//! Every poll it
//! 1. looks at the jobs created since the last poll and, with `--auto-join`, joins each
//!    forming one it can run ([`spec::job_spec`]: its architecture, its sequence length, the
//!    generated corpus of its seed), advertising its `--endpoint`;
//! 2. for each running job it works on: makes sure it holds the round's agreed start weights
//!    (round 1: the reference model's; later: the previous start after one outer Nesterov
//!    step on the average, in worker order, of every pseudo-gradient committed in the last
//!    round, each fetched from its worker and accepted only if it hashes to what that worker
//!    committed on chain; one that does not arrive within [`SKIP_PEER_AFTER`] polls is left
//!    out), then runs its H inner steps, stores what it will serve, and commits its
//!    checkpoint;
//! 3. answers each checkpoint it must re-execute (`/pol/duties`): it fetches the worker's
//!    start weights, end weights and previous optimizer state, checks them against the
//!    worker's commitments, re-runs the round on the data indices the job assigns
//!    ([`crate::verify_round`]) and sends `MsgVerifyCheckpoint` endorsing the worker's
//!    hashes when the re-execution is bit-exact or within the tolerance, its own otherwise,
//!    and `unavailable` when the worker does not serve what re-execution needs.
//!
//! 4. once a job it worked on completed, computes the final weights, exports them to the
//!    reference runtime, serves them at `GET /pol/v1/jobs/{job}/model` and attests their
//!    SHA-256 (`MsgPublishModel`); a majority of the workers' attestations publishes the
//!    model to the chain's model table, where ML nodes find the hash to load it by.
//!
//! Everything a round produced is stored before its checkpoint is sent ([`store`]), so a
//! restarted trainer serves and resubmits the same round rather than training it again.

pub mod cli;
pub mod metrics;
pub mod server;
pub mod spec;
pub mod store;

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{anyhow, bail, Result};
use gonka_client::http::{self as upstream, Limits};
use gonka_client::pol::{
    msg_join_training, msg_publish_model, msg_submit_checkpoint, msg_verify_checkpoint,
    CheckpointHashes, ReExecuted,
};
use gonka_client::{Any, Chain, TxOutcome};
use gonka_proto::pol::{Checkpoint, JobStatus, QueryCheckpointsRequest, TrainingJob};
use gonka_proto::query as q;

use sha2::{Digest, Sha256};

use crate::{
    average, initial_weights, inner_round, outer_step, to_reference, verify_round, JobSpec,
    OptimizerState, ParamKind, ParamSet, RoundCommitment, RoundOutput, RoundTask, Tolerance,
};
use store::{commitment_from_bytes, commitment_to_bytes, Blob, Store};

/// Polls a duty may fail to fetch what re-execution needs before it is answered
/// `unavailable`.
pub const UNAVAILABLE_AFTER: u32 = 5;

/// Polls a peer's committed pseudo-gradient may fail to arrive (unreachable, withheld, or
/// not hashing to its commitment) before the round's start is computed without it: a worker
/// that commits and then withholds cannot stall its peers past their round's deadline.
pub const SKIP_PEER_AFTER: u32 = 10;

/// Settings of a running trainer.
#[derive(Debug, Clone)]
pub struct TrainerConfig {
    /// The URL peers and verifiers reach this trainer's server at.
    pub endpoint: String,
    /// Pause between polls of the chain.
    pub poll: Duration,
    /// Join every forming job this trainer can run.
    pub auto_join: bool,
    /// Longest wait for a transaction's inclusion.
    pub inclusion_timeout: Duration,
    /// Limits of each blob fetch from a peer.
    pub fetch: Limits,
    /// How this trainer fakes its rounds (tests only).
    #[cfg(feature = "testing")]
    pub cheat: Option<crate::cheat::Cheat>,
    /// What it counts, served at `/metrics` ([`metrics`]).
    pub metrics: std::sync::Arc<metrics::TrainerMetrics>,
}

/// What the trainer keeps between polls.
#[derive(Default)]
struct Progress {
    /// The next job id not looked at yet.
    next_job: u64,
    /// Jobs this trainer works on (it joined them, or found itself among their workers).
    jobs: BTreeMap<u64, ()>,
    /// Failed fetches per owed re-execution (job, round, worker).
    fetch_failures: BTreeMap<(u64, u64, String), u32>,
    /// Failed fetches of a peer's pseudo-gradient (job, round, worker), until the start
    /// they are averaged into is computed.
    peer_failures: BTreeMap<(u64, u64, String), u32>,
    /// The specs of jobs seen (a job's configuration never changes), at most
    /// [`MAX_CACHED_SPECS`].
    specs: BTreeMap<u64, JobSpec>,
}

/// Most job specs [`Progress`] keeps; the lowest job ids go first.
const MAX_CACHED_SPECS: usize = 64;

impl Progress {
    /// The spec of `job`, computed once (it generates the job's corpus to check its root).
    async fn spec(&mut self, job: &TrainingJob) -> Result<std::result::Result<JobSpec, String>> {
        if let Some(spec) = self.specs.get(&job.id) {
            return Ok(Ok(spec.clone()));
        }
        let owned = job.clone();
        let spec = tokio::task::spawn_blocking(move || spec::job_spec(&owned)).await?;
        if let Ok(spec) = &spec {
            if self.specs.len() >= MAX_CACHED_SPECS {
                self.specs.pop_first();
            }
            self.specs.insert(job.id, spec.clone());
        }
        Ok(spec)
    }
}

/// Polls the chain and trains and verifies until the process ends.
pub async fn follow(chain: Chain, store: Store, config: TrainerConfig) {
    let mut progress = Progress {
        next_job: 1,
        ..Progress::default()
    };
    loop {
        if let Err(e) = discover(&chain, &config, &mut progress).await {
            tracing::warn!(error = %format!("{e:#}"), "cannot read new training jobs; retrying");
        }
        let jobs: Vec<u64> = progress.jobs.keys().copied().collect();
        config.metrics.jobs(jobs.len());
        for id in jobs {
            match work_on(&chain, &store, &config, &mut progress, id).await {
                Ok(true) => {}
                Ok(false) => {
                    progress.jobs.remove(&id);
                }
                Err(e) => {
                    tracing::warn!(job = id, error = %format!("{e:#}"), "training step failed; retrying at the next poll")
                }
            }
        }
        if let Err(e) = answer_duties(&chain, &config, &mut progress).await {
            tracing::warn!(error = %format!("{e:#}"), "cannot answer re-executions; retrying");
        }
        tokio::time::sleep(config.poll).await;
    }
}

async fn job(chain: &Chain, id: u64) -> Result<TrainingJob> {
    chain
        .client()
        .query::<q::pol::Job>(&gonka_proto::pol::QueryJobRequest { id })
        .await?
        .job
        .ok_or_else(|| anyhow!("the chain answered /pol/job without a job"))
}

/// Looks at the jobs created since the last poll: notes those this trainer works on and,
/// with auto-join, joins the forming ones it can run.
async fn discover(chain: &Chain, config: &TrainerConfig, progress: &mut Progress) -> Result<()> {
    // A job id the chain does not know yet ends the scan (ids are consecutive).
    while let Ok(found) = job(chain, progress.next_job).await {
        progress.next_job += 1;
        let me = chain.address();
        if found.workers.iter().any(|w| w.host == me) {
            progress.jobs.insert(found.id, ());
            continue;
        }
        if !config.auto_join || found.status() != JobStatus::Forming {
            continue;
        }
        if let Err(why) = progress.spec(&found).await? {
            tracing::info!(job = found.id, %why, "not joining training job");
            continue;
        }
        let msg = msg_join_training(me, found.id, &config.endpoint);
        match submit(chain, config, msg).await {
            Ok(Ok(height)) => {
                tracing::info!(job = found.id, height, "joined training job");
                progress.jobs.insert(found.id, ());
            }
            Ok(Err(reason)) => {
                tracing::info!(job = found.id, %reason, "could not join training job")
            }
            // Not known to be included (e.g. a timeout): look at this job again next poll,
            // which finds this trainer among its workers if the join landed after all.
            Err(e) => {
                progress.next_job = found.id;
                return Err(e);
            }
        }
    }
    Ok(())
}

/// Sends one message: `Ok(height)` when executed, `Err(reason)` when the chain refused it.
async fn submit(
    chain: &Chain,
    config: &TrainerConfig,
    msg: Any,
) -> Result<std::result::Result<u64, String>> {
    Ok(
        match chain
            .submit_for_outcome(vec![msg], config.inclusion_timeout)
            .await?
        {
            TxOutcome::Executed(included) => Ok(included.height),
            TxOutcome::Refused(reason) => Err(reason),
        },
    )
}

async fn checkpoints(chain: &Chain, job: u64, round: u64) -> Result<Vec<Checkpoint>> {
    chain
        .client()
        .query_all::<q::pol::Checkpoints>(QueryCheckpointsRequest {
            job_id: job,
            round,
            pagination: None,
        })
        .await
}

/// Fetches `blob` of `round` of `job` from the worker at `endpoint`.
async fn fetch(
    config: &TrainerConfig,
    endpoint: &str,
    job: u64,
    round: u64,
    blob: Blob,
) -> Result<Vec<u8>> {
    let url = format!(
        "{}{}",
        endpoint.trim_end_matches('/'),
        server::blob_path(job, round, blob)
    );
    upstream::get_bytes(&url, config.fetch).await
}

/// A blob this trainer stored, decoded.
fn stored_params(
    store: &Store,
    job: u64,
    round: u64,
    blob: Blob,
    kind: ParamKind,
) -> Result<Option<ParamSet>> {
    store
        .get(job, round, blob)?
        .map(|bytes| {
            ParamSet::from_bytes(kind, &bytes).map_err(|e| anyhow!("stored {}: {e}", blob.name()))
        })
        .transpose()
}

/// One poll's work on job `id`; `false` once this trainer has nothing more to do in it.
async fn work_on(
    chain: &Chain,
    store: &Store,
    config: &TrainerConfig,
    progress: &mut Progress,
    id: u64,
) -> Result<bool> {
    let job = job(chain, id).await?;
    let me = chain.address();
    let Some(index) = job.workers.iter().position(|w| w.host == me && w.active) else {
        return Ok(job.status() == JobStatus::Forming && job.workers.iter().any(|w| w.host == me));
    };
    match job.status() {
        JobStatus::Running => {}
        JobStatus::Completed => return publish_model(chain, store, config, progress, &job).await,
        status => return Ok(status == JobStatus::Forming),
    }
    let round = job.round;
    let spec = progress
        .spec(&job)
        .await?
        .map_err(|why| anyhow!("this trainer cannot run training job {id}: {why}"))?;
    let start = agreed_start(chain, store, config, progress, &job, &spec, round).await?;
    if checkpoints(chain, id, round)
        .await?
        .iter()
        .any(|c| c.worker == me)
    {
        return Ok(true);
    }
    let commitment = match store
        .get(id, round, Blob::Commitment)?
        .as_deref()
        .and_then(commitment_from_bytes)
    {
        Some(stored) => stored,
        None => {
            let optimizer = match round {
                1 => OptimizerState::new(),
                _ => match store.get(id, round - 1, Blob::OptimizerState)? {
                    Some(bytes) => OptimizerState::from_bytes(&bytes)
                        .map_err(|e| anyhow!("stored optimizer state: {e}"))?,
                    None => bail!("this trainer holds no optimizer state of round {} of job {id}; it cannot go on in this job", round - 1),
                },
            };
            let output =
                train_round(config, spec, id, index, round, start.clone(), optimizer).await?;
            let commitment = output.commitment();
            store.put(
                id,
                round,
                Blob::EndWeights,
                &output.end_weights.to_bytes(ParamKind::Weights),
            )?;
            store.put(
                id,
                round,
                Blob::PseudoGradient,
                &output.pseudo_gradient.to_bytes(ParamKind::PseudoGradient),
            )?;
            store.put(
                id,
                round,
                Blob::OptimizerState,
                &output.end_optimizer.to_bytes(),
            )?;
            store.put(
                id,
                round,
                Blob::Commitment,
                &commitment_to_bytes(&commitment),
            )?;
            tracing::info!(
                job = id,
                round,
                loss = commitment.loss_micro_nats as f64 / 1e6,
                "trained round"
            );
            commitment
        }
    };
    let hashes = CheckpointHashes {
        start_weights: start.hash(ParamKind::Weights),
        weights: commitment.weights_hash,
        optimizer_state: commitment.optimizer_state_hash,
        data_indices: commitment.data_indices_hash,
        pseudo_gradient: commitment.pseudo_gradient_hash,
    };
    let msg = msg_submit_checkpoint(me, id, round, &hashes, commitment.loss_micro_nats);
    let submitted = submit(chain, config, msg).await?;
    config
        .metrics
        .checkpoint(submitted.is_ok(), commitment.loss_micro_nats);
    match submitted {
        Ok(height) => tracing::info!(job = id, round, height, "checkpoint committed"),
        Err(reason) => tracing::warn!(job = id, round, %reason, "checkpoint refused"),
    }
    store.prune(id, round)?;
    Ok(true)
}

/// After the last round: computes the job's final weights (the start of the round after the
/// last, by the same rule as every round's), exports them to the reference runtime's fixed
/// point, stores them (served at [`server::model_path`]) and attests their SHA-256 with
/// `MsgPublishModel`. `false` once attested, published, or refused.
async fn publish_model(
    chain: &Chain,
    store: &Store,
    config: &TrainerConfig,
    progress: &mut Progress,
    job: &TrainingJob,
) -> Result<bool> {
    let me = chain.address();
    let attested = job
        .workers
        .iter()
        .any(|w| w.host == me && !w.model_sha256.is_empty());
    if !job.model_id.is_empty() || attested {
        return Ok(false);
    }
    let bytes = match store.model(job.id)? {
        Some(bytes) => bytes,
        None => {
            let spec = progress
                .spec(job)
                .await?
                .map_err(|why| anyhow!("this trainer cannot run training job {}: {why}", job.id))?;
            let last = agreed_start(
                chain,
                store,
                config,
                progress,
                job,
                &spec,
                job.outer_rounds + 1,
            )
            .await?;
            let bytes =
                tokio::task::spawn_blocking(move || to_reference(&last).weights.to_bytes()).await?;
            store.put_model(job.id, &bytes)?;
            bytes
        }
    };
    let sha256: [u8; 32] = Sha256::digest(&bytes).into();
    match submit(chain, config, msg_publish_model(me, job.id, &sha256)).await? {
        Ok(height) => tracing::info!(
            job = job.id,
            height,
            weights_sha256 = %hex::encode(sha256),
            "attested the trained model"
        ),
        Err(reason) => {
            tracing::warn!(job = job.id, %reason, "trained model attestation refused")
        }
    }
    Ok(false)
}

/// Runs this worker's inner steps of `round` off the async runtime.
async fn train_round(
    config: &TrainerConfig,
    spec: JobSpec,
    job: u64,
    index: usize,
    round: u64,
    start: ParamSet,
    optimizer: OptimizerState,
) -> Result<RoundOutput> {
    #[cfg(feature = "testing")]
    let cheat = config.cheat;
    #[cfg(not(feature = "testing"))]
    let _ = config;
    on_round(spec, index, round, start, optimizer, move |task| {
        let _span = tracing::info_span!("training", job, round).entered();
        #[cfg(feature = "testing")]
        if let Some(cheat) = cheat {
            return Ok(crate::cheat::cheating_round(task, cheat)?);
        }
        Ok(inner_round(task)?)
    })
    .await
}

/// Runs `work` on worker `index`'s round `round` of `spec`, from `start` and `optimizer`, off
/// the async runtime: the task training and re-execution share.
async fn on_round<T: Send + 'static>(
    spec: JobSpec,
    index: usize,
    round: u64,
    start: ParamSet,
    optimizer: OptimizerState,
    work: impl FnOnce(&RoundTask<'_>) -> Result<T> + Send + 'static,
) -> Result<T> {
    tokio::task::spawn_blocking(move || {
        let corpus = spec.corpus();
        let indices = spec.data_indices(index as u32, round)?;
        work(&RoundTask {
            corpus: &corpus,
            weights: &start,
            optimizer: &optimizer,
            indices: &indices,
            params: &spec.inner,
        })
    })
    .await?
}

/// The agreed weights `round` of `job` starts from, stored with the outer momentum once
/// computed:
/// the reference model's weights and zero momentum for round 1; after that the previous
/// round's start after [`outer_step`] on the [`average`] of every pseudo-gradient committed in
/// it, in worker order. A peer whose pseudo-gradient has not arrived after
/// [`SKIP_PEER_AFTER`] polls is left out (every honest worker meets the same withholding
/// peer, so they leave out the same one).
async fn agreed_start(
    chain: &Chain,
    store: &Store,
    config: &TrainerConfig,
    progress: &mut Progress,
    job: &TrainingJob,
    spec: &JobSpec,
    round: u64,
) -> Result<ParamSet> {
    let id = job.id;
    let stored_momentum = store.get(id, round, Blob::StartMomentum)?.is_some();
    if let Some(weights) = stored_params(store, id, round, Blob::StartWeights, ParamKind::Weights)?
    {
        if stored_momentum {
            return Ok(weights);
        }
    }
    let (weights, momentum) = if round == 1 {
        (initial_weights(spec.init_seed), ParamSet::zeros())
    } else {
        let (Some(previous), Some(momentum)) = (
            stored_params(store, id, round - 1, Blob::StartWeights, ParamKind::Weights)?,
            stored_params(
                store,
                id,
                round - 1,
                Blob::StartMomentum,
                ParamKind::OuterMomentum,
            )?,
        ) else {
            bail!(
                "this trainer holds no start of round {} of job {id}; it cannot go on in this job",
                round - 1
            );
        };
        let committed = checkpoints(chain, id, round - 1).await?;
        let mut pseudo_gradients = Vec::new();
        let mut waiting = Vec::new();
        // Worker order: the order they joined in.
        for worker in &job.workers {
            let Some(c) = committed.iter().find(|c| c.worker == worker.host) else {
                continue;
            };
            if worker.host == chain.address() {
                let bytes = store
                    .get(id, round - 1, Blob::PseudoGradient)?
                    .ok_or_else(|| anyhow!("own pseudo-gradient of round {} is gone", round - 1))?;
                pseudo_gradients.push(
                    ParamSet::from_bytes(ParamKind::PseudoGradient, &bytes)
                        .map_err(|e| anyhow!("own pseudo-gradient: {e}"))?,
                );
                continue;
            }
            let key = (id, round - 1, worker.host.clone());
            match peer_pseudo_gradient(config, &worker.endpoint, id, round - 1, c).await {
                Ok(pg) => {
                    progress.peer_failures.remove(&key);
                    pseudo_gradients.push(pg);
                }
                Err(e) => {
                    let failures = progress.peer_failures.entry(key).or_default();
                    *failures += 1;
                    if *failures < SKIP_PEER_AFTER {
                        waiting.push(format!("{}: {e:#}", worker.host));
                    } else if *failures == SKIP_PEER_AFTER {
                        tracing::warn!(job = id, round = round - 1, worker = %worker.host, error = %format!("{e:#}"), "leaving out a committed pseudo-gradient its worker does not serve");
                    }
                }
            }
        }
        if !waiting.is_empty() {
            bail!(
                "waiting for the pseudo-gradients of round {} of {}",
                round - 1,
                waiting.join("; ")
            );
        }
        progress
            .peer_failures
            .retain(|(j, r, _), _| (*j, *r) != (id, round - 1));
        let outer = spec.outer;
        tokio::task::spawn_blocking(move || -> Result<(ParamSet, ParamSet)> {
            let averaged = average(&pseudo_gradients)?;
            Ok(outer_step(&previous, &momentum, &averaged, &outer))
        })
        .await??
    };
    store.put(
        id,
        round,
        Blob::StartWeights,
        &weights.to_bytes(ParamKind::Weights),
    )?;
    store.put(
        id,
        round,
        Blob::StartMomentum,
        &momentum.to_bytes(ParamKind::OuterMomentum),
    )?;
    Ok(weights)
}

/// `worker`'s pseudo-gradient of `round`, fetched from `endpoint` and accepted only if it
/// hashes to what the worker committed in checkpoint `c` (so no worker can send its peers
/// different updates).
async fn peer_pseudo_gradient(
    config: &TrainerConfig,
    endpoint: &str,
    job: u64,
    round: u64,
    c: &Checkpoint,
) -> Result<ParamSet> {
    let bytes = fetch(config, endpoint, job, round, Blob::PseudoGradient).await?;
    let pg = ParamSet::from_bytes(ParamKind::PseudoGradient, &bytes)
        .map_err(|e| anyhow!("pseudo-gradient: {e}"))?;
    if pg.hash(ParamKind::PseudoGradient).as_slice() != c.pseudo_gradient_hash {
        bail!("served a pseudo-gradient of round {round} that is not the one it committed");
    }
    Ok(pg)
}

/// Answers every re-execution the chain assigns to this trainer's participant.
async fn answer_duties(
    chain: &Chain,
    config: &TrainerConfig,
    progress: &mut Progress,
) -> Result<()> {
    let duties = chain
        .client()
        .query::<q::pol::Duties>(&gonka_proto::pol::QueryDutiesRequest {
            validator: chain.address().to_string(),
        })
        .await?
        .checkpoints;
    let owed: Vec<(u64, u64, String)> = duties
        .iter()
        .map(|c| (c.job_id, c.round, c.worker.clone()))
        .collect();
    progress.fetch_failures.retain(|k, _| owed.contains(k));
    for c in duties {
        let key = (c.job_id, c.round, c.worker.clone());
        let found = match re_execute(chain, config, progress, &c).await {
            Ok(found) => found,
            Err(e) => {
                let failures = progress.fetch_failures.entry(key).or_default();
                *failures += 1;
                if *failures < UNAVAILABLE_AFTER {
                    tracing::warn!(job = c.job_id, round = c.round, worker = %c.worker, error = %format!("{e:#}"), "cannot re-execute yet; retrying");
                    continue;
                }
                tracing::warn!(job = c.job_id, round = c.round, worker = %c.worker, error = %format!("{e:#}"), "the worker does not serve what re-execution needs; answering unavailable");
                ReExecuted::Unavailable
            }
        };
        let endorsed = matches!(found, ReExecuted::Hashes { weights, .. } if weights.as_slice() == c.weights_hash);
        let verdict = match found {
            ReExecuted::Unavailable => "unavailable",
            _ if endorsed => "endorsed",
            _ => "disputed",
        };
        let msg = msg_verify_checkpoint(chain.address(), c.job_id, c.round, &c.worker, found);
        match submit(chain, config, msg).await? {
            Ok(height) => {
                config.metrics.reexecution(verdict);
                tracing::info!(job = c.job_id, round = c.round, worker = %c.worker, endorsed, height, "re-executed checkpoint")
            }
            Err(reason) => {
                config.metrics.reexecution("refused");
                tracing::warn!(job = c.job_id, round = c.round, worker = %c.worker, %reason, "re-execution answer refused")
            }
        }
    }
    Ok(())
}

fn hash32(bytes: &[u8], what: &str) -> Result<crate::Hash> {
    bytes
        .try_into()
        .map_err(|_| anyhow!("{what} on chain is not 32 bytes"))
}

/// Re-executes checkpoint `c`: what to answer, or an error when the worker does not serve
/// (or serves something other than) what it committed.
async fn re_execute(
    chain: &Chain,
    config: &TrainerConfig,
    progress: &mut Progress,
    c: &Checkpoint,
) -> Result<ReExecuted> {
    let job = job(chain, c.job_id).await?;
    let index = job
        .workers
        .iter()
        .position(|w| w.host == c.worker)
        .ok_or_else(|| anyhow!("{} is not a worker of job {}", c.worker, c.job_id))?;
    let endpoint = job.workers[index].endpoint.clone();
    let spec = progress
        .spec(&job)
        .await?
        .map_err(|why| anyhow!("cannot re-execute job {}: {why}", c.job_id))?;
    let round_checkpoints = checkpoints(chain, c.job_id, c.round).await?;
    // The start every worker of the round claims, by majority: a worker that started from
    // other weights than its peers did not do the round's work.
    let mut starts: BTreeMap<&[u8], usize> = BTreeMap::new();
    for other in &round_checkpoints {
        *starts
            .entry(other.start_weights_hash.as_slice())
            .or_default() += 1;
    }
    let agreed = starts
        .iter()
        .max_by_key(|(_, n)| **n)
        .map(|(h, _)| h.to_vec())
        .unwrap_or_default();
    let start = ParamSet::from_bytes(
        ParamKind::Weights,
        &fetch(config, &endpoint, c.job_id, c.round, Blob::StartWeights).await?,
    )
    .map_err(|e| anyhow!("start weights: {e}"))?;
    if start.hash(ParamKind::Weights).as_slice() != c.start_weights_hash {
        bail!("the served start weights are not the ones the checkpoint names");
    }
    let claimed_end = ParamSet::from_bytes(
        ParamKind::Weights,
        &fetch(config, &endpoint, c.job_id, c.round, Blob::EndWeights).await?,
    )
    .map_err(|e| anyhow!("end weights: {e}"))?;
    let optimizer = if c.round == 1 {
        OptimizerState::new()
    } else {
        let previous = checkpoints(chain, c.job_id, c.round - 1)
            .await?
            .into_iter()
            .find(|p| p.worker == c.worker)
            .ok_or_else(|| {
                anyhow!(
                    "{} committed no checkpoint in round {}",
                    c.worker,
                    c.round - 1
                )
            })?;
        let state = OptimizerState::from_bytes(
            &fetch(
                config,
                &endpoint,
                c.job_id,
                c.round - 1,
                Blob::OptimizerState,
            )
            .await?,
        )
        .map_err(|e| anyhow!("optimizer state: {e}"))?;
        if state.hash().as_slice() != previous.optimizer_state_hash {
            bail!(
                "the served optimizer state is not the one committed in round {}",
                c.round - 1
            );
        }
        state
    };
    let commitment = RoundCommitment {
        weights_hash: hash32(&c.weights_hash, "weights_hash")?,
        optimizer_state_hash: hash32(&c.optimizer_state_hash, "optimizer_state_hash")?,
        data_indices_hash: hash32(&c.data_indices_hash, "data_indices_hash")?,
        pseudo_gradient_hash: hash32(&c.pseudo_gradient_hash, "pseudo_gradient_hash")?,
        loss_micro_nats: c.loss_micro_nats,
    };
    let round = c.round;
    let verdict = on_round(spec, index, c.round, start, optimizer, move |task| {
        Ok(verify_round(
            task,
            &commitment,
            &claimed_end,
            &Tolerance::default(),
        )?)
    })
    .await?;
    let endorsed = verdict.accepted && agreed == c.start_weights_hash;
    tracing::info!(job = c.job_id, round, worker = %c.worker, accepted = verdict.accepted, bit_exact = verdict.bit_exact, distance = verdict.relative_distance, "re-executed");
    Ok(if endorsed {
        ReExecuted::Hashes {
            weights: commitment.weights_hash,
            optimizer_state: commitment.optimizer_state_hash,
        }
    } else {
        ReExecuted::Hashes {
            weights: verdict.reexecuted.weights_hash,
            optimizer_state: verdict.reexecuted.optimizer_state_hash,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> TrainerConfig {
        TrainerConfig {
            endpoint: String::new(),
            poll: Duration::from_millis(10),
            auto_join: false,
            inclusion_timeout: Duration::from_secs(1),
            fetch: Limits {
                max_body: crate::format::MAX_BLOB_BYTES,
                ..Limits::connect(Duration::from_secs(2))
            },
            #[cfg(feature = "testing")]
            cheat: None,
            metrics: Default::default(),
        }
    }

    /// A peer that serves a pseudo-gradient other than the one it committed (to send
    /// different updates to different peers) is refused, as one that serves nothing is.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_peer_pseudo_gradient_is_taken_only_if_it_is_the_committed_one() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let served = initial_weights(crate::DEFAULT_INIT_SEED);
        store
            .put(
                1,
                1,
                Blob::PseudoGradient,
                &served.to_bytes(ParamKind::PseudoGradient),
            )
            .unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let endpoint = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(gonka_client::server::serve(
            listener,
            server::router(store, Default::default()),
            gonka_client::server::ServerLimits::default(),
            std::future::pending(),
        ));
        let committed = |pg: &ParamSet| Checkpoint {
            pseudo_gradient_hash: pg.hash(ParamKind::PseudoGradient).to_vec(),
            ..Checkpoint::default()
        };
        let config = config();
        let taken = peer_pseudo_gradient(&config, &endpoint, 1, 1, &committed(&served))
            .await
            .unwrap();
        assert_eq!(
            taken.hash(ParamKind::PseudoGradient),
            served.hash(ParamKind::PseudoGradient)
        );
        let other = peer_pseudo_gradient(&config, &endpoint, 1, 1, &committed(&ParamSet::zeros()))
            .await
            .unwrap_err();
        assert!(
            other.to_string().contains("not the one it committed"),
            "{other:#}"
        );
        let missing = peer_pseudo_gradient(&config, &endpoint, 1, 2, &committed(&served))
            .await
            .unwrap_err();
        assert!(format!("{missing:#}").contains("404"), "{missing:#}");
    }
}
