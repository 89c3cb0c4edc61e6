//! `gonkad query pol`: `/pol/job`, `/pol/jobs`, `/pol/checkpoints`, `/pol/duties`,
//! `/pol/params`.

use anyhow::Result;
use gonka_proto::pol::{
    Checkpoint, QueryCheckpointsRequest, QueryCheckpointsResponse, QueryDutiesRequest,
    QueryDutiesResponse, QueryJobRequest, QueryJobResponse, QueryJobsRequest, QueryJobsResponse,
    QueryParamsRequest, QueryParamsResponse, TrainingJob,
};
use gonka_proto::query as q;

use super::{show, show_page, PageArgs};
use crate::output::{fields, list};
use crate::Global;

/// `gonkad query pol` subcommands.
#[derive(clap::Subcommand)]
pub enum Query {
    /// One training job: its configuration, workers, open round and budget.
    Job {
        /// Job id.
        id: u64,
    },
    /// Every training job, by id.
    Jobs {
        #[command(flatten)]
        page: PageArgs,
    },
    /// The checkpoints of a job, by round then worker.
    Checkpoints {
        /// Job id.
        job_id: u64,
        #[command(flatten)]
        page: PageArgs,
    },
    /// The checkpoints of one round of a job: hashes, loss, review status and pay.
    Round {
        /// Job id.
        job_id: u64,
        /// Round (1-based).
        round: u64,
        #[command(flatten)]
        page: PageArgs,
    },
    /// The checkpoints a validator must re-execute now (as verifier or committee member).
    Duties {
        /// Validator address (gonka1...).
        validator: String,
    },
    /// Pol parameters.
    Params,
}

/// Runs a `gonkad query pol` subcommand.
pub async fn run(global: &Global, query: Query) -> Result<()> {
    match query {
        Query::Job { id } => {
            show::<q::pol::Job>(global, QueryJobRequest { id }, |r: &QueryJobResponse| {
                r.job.as_ref().map(job_text).unwrap_or_default()
            })
            .await
        }
        Query::Jobs { page } => {
            show_page::<q::pol::Jobs>(
                global,
                QueryJobsRequest::default(),
                &page,
                |r: &QueryJobsResponse| list(&r.jobs, "no training jobs", job_text),
            )
            .await
        }
        Query::Checkpoints { job_id, page } => checkpoints(global, job_id, 0, &page).await,
        Query::Round {
            job_id,
            round,
            page,
        } => {
            if round == 0 {
                anyhow::bail!("rounds are numbered from 1; `gonkad query pol checkpoints {job_id}` lists every round");
            }
            checkpoints(global, job_id, round, &page).await
        }
        Query::Duties { validator } => {
            show::<q::pol::Duties>(
                global,
                QueryDutiesRequest { validator },
                |r: &QueryDutiesResponse| {
                    list(&r.checkpoints, "no re-executions owed", checkpoint_text)
                },
            )
            .await
        }
        Query::Params => {
            show::<q::pol::Params>(global, QueryParamsRequest {}, |r: &QueryParamsResponse| {
                let p = r.params.clone().unwrap_or_default();
                fields(&[
                    ("max_workers", p.max_workers.to_string()),
                    ("max_outer_rounds", p.max_outer_rounds.to_string()),
                    ("max_inner_steps", p.max_inner_steps.to_string()),
                    (
                        "round_blocks",
                        format!("{} to {}", p.min_round_blocks, p.max_round_blocks),
                    ),
                    ("formation_blocks", p.formation_blocks.to_string()),
                    ("checkpoint_sample_ppm", p.checkpoint_sample_ppm.to_string()),
                    (
                        "verification_deadline_blocks",
                        p.verification_deadline_blocks.to_string(),
                    ),
                    ("committee_size", p.committee_size.to_string()),
                    (
                        "dispute_deadline_blocks",
                        p.dispute_deadline_blocks.to_string(),
                    ),
                    ("slash_fraction_ppm", p.slash_fraction_ppm.to_string()),
                    ("verification_fee_ppm", p.verification_fee_ppm.to_string()),
                    ("min_reward_budget", format!("{}ngnk", p.min_reward_budget)),
                    ("max_live_jobs", p.max_live_jobs.to_string()),
                ])
            })
            .await
        }
    }
}

async fn checkpoints(global: &Global, job_id: u64, round: u64, page: &PageArgs) -> Result<()> {
    let request = QueryCheckpointsRequest {
        job_id,
        round,
        pagination: None,
    };
    show_page::<q::pol::Checkpoints>(global, request, page, |r: &QueryCheckpointsResponse| {
        list(&r.checkpoints, "no checkpoints", checkpoint_text)
    })
    .await
}

fn job_text(job: &TrainingJob) -> String {
    let config = job.config.clone().unwrap_or_default();
    let workers = job
        .workers
        .iter()
        .map(|w| {
            let state = if w.active { "active" } else { "dropped" };
            format!(
                "{} ({state}, {} rounds paid, {}ngnk, serving at {})",
                w.host, w.rounds_paid, w.earned, w.endpoint
            )
        })
        .collect::<Vec<_>>()
        .join(", ");
    fields(&[
        ("id", job.id.to_string()),
        ("creator", job.creator.clone()),
        ("status", job.status().as_str_name().to_string()),
        ("model", config.model),
        (
            "training",
            format!(
                "{} rounds of {} inner steps, {} sequences of {} bytes per step",
                job.outer_rounds, config.inner_steps, config.batch_size, config.seq_len
            ),
        ),
        (
            "round",
            format!("{} (deadline {})", job.round, job.round_deadline),
        ),
        (
            "workers",
            format!("{}/{}: {workers}", job.workers.len(), job.worker_count),
        ),
        ("dataset_root", hex::encode(&job.dataset_root)),
        (
            "budget",
            format!("{}ngnk of {}ngnk left", job.budget_left, job.reward_budget),
        ),
        (
            "trained_model",
            if job.model_id.is_empty() {
                "not published yet".to_string()
            } else {
                job.model_id.clone()
            },
        ),
    ])
}

fn checkpoint_text(c: &Checkpoint) -> String {
    fields(&[
        ("job", format!("{} round {}", c.job_id, c.round)),
        ("worker", c.worker.clone()),
        ("status", c.status().as_str_name().to_string()),
        ("weights_hash", hex::encode(&c.weights_hash)),
        (
            "loss",
            format!("{:.6} nats", c.loss_micro_nats as f64 / 1e6),
        ),
        ("verifier", c.verifier.clone()),
        (
            "paid",
            format!("{}ngnk, {} work units", c.paid, c.work_units),
        ),
    ])
}
