//! `gonkad query disputes`: `/disputes/dispute`, `/disputes/list`, `/disputes/participant`,
//! `/disputes/pending`, `/disputes/reveals_due`, `/disputes/validation`, `/disputes/stats`,
//! `/disputes/params`.

use anyhow::Result;
use gonka_proto::disputes as pb;
use gonka_proto::query as q;
use serde_json::Value;

use super::{show_as, show_page_as, PageArgs};
use crate::amount::show_ngnk;
use crate::output::{fields, list, percent, to_json};
use crate::Global;

/// `gonkad query disputes` subcommands.
#[derive(clap::Subcommand)]
pub enum Query {
    /// One dispute: committee, votes, outcome and payouts.
    Dispute {
        /// Dispute id.
        id: u64,
    },
    /// Disputes, all or with one status.
    List {
        /// open, executor_faulted, executor_upheld, payload_withheld or undecided; all when
        /// omitted.
        #[arg(long)]
        status: Option<String>,
        #[command(flatten)]
        page: PageArgs,
    },
    /// Disputes an address takes part in (accuser, executor host or committee member).
    Participant {
        /// Address (gonka1...).
        address: String,
        #[command(flatten)]
        page: PageArgs,
    },
    /// Validations and dispute votes a validator still owes.
    Pending {
        /// Validator operator address (gonka1...).
        validator: String,
        #[command(flatten)]
        page: PageArgs,
    },
    /// Records whose output a transfer agent must reveal now (its sidecar does it).
    RevealsDue {
        /// Transfer agent address (gonka1...).
        transfer_agent: String,
        #[command(flatten)]
        page: PageArgs,
    },
    /// The validation of one sampled work record.
    Validation {
        /// Inference id.
        inference_id: String,
    },
    /// Sampling statistics of an executor host and its reputation as a validator.
    Stats {
        /// Participant address (gonka1...).
        address: String,
    },
    /// Disputes module parameters.
    Params,
}

/// Byte fields of the disputes module, rendered as lowercase hex in JSON.
const HEX_FIELDS: &[&str] = &["result_commitment", "claimed_hash", "accuser_commitment"];

/// [`to_json`], with the disputes module's hash fields as hex strings.
fn json<T: serde::Serialize>(message: &T) -> Value {
    fn fix(value: &mut Value) {
        match value {
            Value::Object(map) => {
                for (name, field) in map.iter_mut() {
                    let bytes: Option<Vec<u8>> = match &*field {
                        Value::Array(items) if HEX_FIELDS.contains(&name.as_str()) => items
                            .iter()
                            .map(|b| b.as_u64().and_then(|b| u8::try_from(b).ok()))
                            .collect(),
                        _ => None,
                    };
                    match bytes {
                        Some(bytes) => *field = Value::String(hex::encode(bytes)),
                        None => fix(field),
                    }
                }
            }
            Value::Array(items) => items.iter_mut().for_each(fix),
            _ => {}
        }
    }
    let mut value = to_json(message);
    fix(&mut value);
    value
}

/// Runs a `gonkad query disputes` subcommand.
pub async fn run(global: &Global, query: Query) -> Result<()> {
    match query {
        Query::Dispute { id } => {
            show_as::<q::disputes::Dispute>(
                global,
                pb::QueryDisputeRequest { id },
                json,
                |r: &pb::QueryDisputeResponse| {
                    r.dispute
                        .as_ref()
                        .map(dispute_text)
                        .unwrap_or_else(|| format!("no dispute {id}"))
                },
            )
            .await
        }
        Query::List { status, page } => {
            let request = pb::QueryDisputesRequest {
                status: status.unwrap_or_default(),
                ..Default::default()
            };
            show_page_as::<q::disputes::List>(
                global,
                request,
                &page,
                json,
                |r: &pb::QueryDisputesResponse| list(&r.disputes, "no disputes", dispute_text),
            )
            .await
        }
        Query::Participant { address, page } => {
            show_page_as::<q::disputes::Participant>(
                global,
                pb::QueryParticipantDisputesRequest {
                    address,
                    ..Default::default()
                },
                &page,
                json,
                |r: &pb::QueryParticipantDisputesResponse| {
                    list(&r.disputes, "no disputes", dispute_text)
                },
            )
            .await
        }
        Query::Pending { validator, page } => {
            show_page_as::<q::disputes::Pending>(
                global,
                pb::QueryPendingRequest {
                    validator,
                    ..Default::default()
                },
                &page,
                json,
                |r: &pb::QueryPendingResponse| list(&r.work, "nothing pending", pending_text),
            )
            .await
        }
        Query::RevealsDue {
            transfer_agent,
            page,
        } => {
            show_page_as::<q::disputes::RevealsDue>(
                global,
                pb::QueryRevealsDueRequest {
                    transfer_agent,
                    ..Default::default()
                },
                &page,
                json,
                |r: &pb::QueryRevealsDueResponse| {
                    list(&r.reveals, "no reveal due", |d| {
                        fields(&[
                            ("inference_id", d.inference_id.clone()),
                            ("deadline_height", d.deadline_height.to_string()),
                        ])
                    })
                },
            )
            .await
        }
        Query::Validation { inference_id } => {
            show_as::<q::disputes::Validation>(
                global,
                pb::QueryValidationRequest { inference_id },
                json,
                |r: &pb::QueryValidationResponse| {
                    r.validation
                        .as_ref()
                        .map(validation_text)
                        .unwrap_or_default()
                },
            )
            .await
        }
        Query::Stats { address } => {
            show_as::<q::disputes::Stats>(
                global,
                pb::QueryStatsRequest { address },
                json,
                |r: &pb::QueryStatsResponse| {
                    let e = r.executor.clone().unwrap_or_default();
                    let v = r.reputation.clone().unwrap_or_default();
                    fields(&[
                        ("host", e.host),
                        ("records", e.records.to_string()),
                        ("sampled", e.sampled.to_string()),
                        ("passed", e.passed.to_string()),
                        ("faults", e.faults.to_string()),
                        ("clean_streak", e.clean_streak.to_string()),
                        ("current_rate", percent(r.current_rate_ppm, 1_000_000)),
                        ("reputation", percent(v.score_ppm, 1_000_000)),
                        ("answered", v.answered.to_string()),
                        ("missed", v.missed.to_string()),
                        ("missed_in_row", v.missed_in_row.to_string()),
                        ("false_accusations", v.false_accusations.to_string()),
                    ])
                },
            )
            .await
        }
        Query::Params => {
            show_as::<q::disputes::Params>(
                global,
                pb::QueryParamsRequest {},
                json,
                |r: &pb::QueryParamsResponse| {
                    let p = r.params.clone().unwrap_or_default();
                    fields(&[
                        ("min_sample", percent(p.min_sample_ppm, 1_000_000)),
                        ("max_sample", percent(p.max_sample_ppm, 1_000_000)),
                        ("decay_validations", p.decay_validations.to_string()),
                        (
                            "validation_deadline_blocks",
                            p.validation_deadline_blocks.to_string(),
                        ),
                        (
                            "dispute_deadline_blocks",
                            p.dispute_deadline_blocks.to_string(),
                        ),
                        ("committee_size", p.committee_size.to_string()),
                        ("slash_fraction", percent(p.slash_fraction_ppm, 1_000_000)),
                        ("min_deposit", show_ngnk(&p.min_deposit)),
                        (
                            "validation_reward",
                            percent(p.validation_reward_ppm, 1_000_000),
                        ),
                        ("jail_after_misses", p.jail_after_misses.to_string()),
                        ("miss_penalty", percent(p.miss_penalty_ppm, 1_000_000)),
                        ("dispute_window_blocks", p.dispute_window_blocks.to_string()),
                        (
                            "reveal_deadline_blocks",
                            p.reveal_deadline_blocks.to_string(),
                        ),
                    ])
                },
            )
            .await
        }
    }
}

fn dispute_text(d: &pb::Dispute) -> String {
    let votes = d
        .votes
        .iter()
        .map(|v| {
            let side = if v.payload_unavailable {
                "payload unavailable"
            } else if v.supports_executor {
                "executor"
            } else {
                "accuser, or awaiting the reveal"
            };
            format!("{} ({side}) at {}", v.voter, v.height)
        })
        .collect::<Vec<_>>()
        .join(", ");
    let payouts = d
        .payouts
        .iter()
        .map(|p| format!("{} {} ({})", p.to, show_ngnk(&p.amount), p.reason))
        .collect::<Vec<_>>()
        .join(", ");
    fields(&[
        ("id", d.id.to_string()),
        ("inference_id", d.inference_id.clone()),
        ("kind", d.kind.clone()),
        ("status", d.status.clone()),
        ("accuser", d.accuser.clone()),
        ("executor_host", d.executor_host.clone()),
        ("executor_node", d.executor_node.clone()),
        ("committee", d.committee.join(", ")),
        ("votes", votes),
        ("opened_height", d.opened_height.to_string()),
        ("deadline_height", d.deadline_height.to_string()),
        ("deposit", show_ngnk(&d.deposit)),
        ("slashed", d.slashed.clone()),
        ("slashed_amount", show_ngnk(&d.slashed_amount)),
        ("payouts", payouts),
    ])
}

fn pending_text(p: &pb::PendingWork) -> String {
    fields(&[
        ("kind", p.kind.clone()),
        ("inference_id", p.inference_id.clone()),
        ("dispute_id", p.dispute_id.to_string()),
        ("model", p.model.clone()),
        ("executor_node", p.executor_node.clone()),
        ("transfer_agent", p.transfer_agent.clone()),
        ("deadline_height", p.deadline_height.to_string()),
    ])
}

fn validation_text(v: &pb::Validation) -> String {
    fields(&[
        ("inference_id", v.inference_id.clone()),
        ("status", v.status.clone()),
        ("validator", v.validator.clone()),
        ("executor_host", v.executor_host.clone()),
        ("executor_node", v.executor_node.clone()),
        ("rate", percent(v.rate_ppm, 1_000_000)),
        ("sampled_height", v.sampled_height.to_string()),
        ("deadline_height", v.deadline_height.to_string()),
        (
            "reveal_deadline_height",
            v.reveal_deadline_height.to_string(),
        ),
        ("reward", show_ngnk(&v.reward)),
    ])
}
