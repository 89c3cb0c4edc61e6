//! `gonkad query settlement`: `/settlement/escrow`, `/settlement/batch`,
//! `/settlement/batch_number`, `/settlement/demands`, `/settlement/params`.

use anyhow::Result;
use gonka_proto::query as q;
use gonka_proto::settlement::{
    Batch, BatchStatus, QueryBatchNumberRequest, QueryBatchNumberResponse, QueryBatchRequest,
    QueryBatchResponse, QueryDemandsRequest, QueryDemandsResponse, QueryEscrowRequest,
    QueryEscrowResponse, QueryParamsRequest, QueryParamsResponse,
};

use super::{show, show_value};
use crate::output::{fields, list};
use crate::prove::ProveArgs;
use crate::Global;

/// `gonkad query settlement` subcommands.
#[derive(clap::Subcommand)]
pub enum Query {
    /// A requester's escrow for a transfer agent: balance, expiry, release.
    Escrow {
        /// Requester address (gonka1...).
        requester: String,
        /// Transfer agent address.
        transfer_agent: String,
        #[command(flatten)]
        prove: ProveArgs,
    },
    /// A settled batch: its root, totals, lines and status; by id, or by its transfer
    /// agent's own number (what the agent's leaf endpoints name it by).
    Batch {
        /// Batch id (from the `batch_settled` event).
        #[arg(required_unless_present = "transfer_agent")]
        id: Option<u64>,
        /// The batch's transfer agent (with --number, instead of an id).
        #[arg(long, requires = "number", conflicts_with = "id")]
        transfer_agent: Option<String>,
        /// The transfer agent's batch number.
        #[arg(long, requires = "transfer_agent")]
        number: Option<u64>,
    },
    /// A transfer agent's last batch number (0 before its first).
    BatchNumber {
        /// Transfer agent address.
        transfer_agent: String,
    },
    /// The open leaf demands on a transfer agent's batches, by batch then leaf: what it must
    /// answer with the leaf and its proof before each deadline.
    Demands {
        /// Transfer agent address.
        transfer_agent: String,
        /// Most demands to show (default and most: 100).
        #[arg(long)]
        limit: Option<u64>,
    },
    /// Settlement parameters.
    Params,
}

/// Runs a `gonkad query settlement` subcommand.
pub async fn run(global: &Global, query: Query) -> Result<()> {
    match query {
        Query::Escrow {
            requester,
            transfer_agent,
            prove,
        } => {
            let key = gonka_settlement::keys::escrow(&requester, &transfer_agent);
            let absent = format!("{requester} holds no escrow for transfer agent {transfer_agent}");
            let request = QueryEscrowRequest {
                requester,
                transfer_agent,
            };
            let wrap = |e| QueryEscrowResponse { escrow: Some(e) };
            show_value::<q::settlement::Escrow, gonka_proto::settlement::Escrow>(
                global,
                request,
                (&prove, key),
                wrap,
                || absent,
                |r: &QueryEscrowResponse| {
                    let e = r.escrow.clone().unwrap_or_default();
                    fields(&[
                        ("requester", e.requester),
                        ("transfer_agent", e.transfer_agent),
                        ("balance", format!("{}ngnk", e.balance)),
                        ("expires_at", e.expires_at.to_string()),
                        ("release_at", e.release_at.to_string()),
                    ])
                },
            )
            .await
        }
        Query::Batch {
            id,
            transfer_agent,
            number,
        } => {
            show::<q::settlement::Batch>(
                global,
                QueryBatchRequest {
                    id: id.unwrap_or(0),
                    transfer_agent: transfer_agent.unwrap_or_default(),
                    number: number.unwrap_or(0),
                },
                |r: &QueryBatchResponse| r.batch.as_ref().map(batch_text).unwrap_or_default(),
            )
            .await
        }
        Query::BatchNumber { transfer_agent } => {
            show::<q::settlement::BatchNumber>(
                global,
                QueryBatchNumberRequest { transfer_agent },
                |r: &QueryBatchNumberResponse| r.number.to_string(),
            )
            .await
        }
        Query::Demands {
            transfer_agent,
            limit,
        } => {
            let request = QueryDemandsRequest {
                transfer_agent,
                limit: limit.unwrap_or(0),
                ..QueryDemandsRequest::default()
            };
            show::<q::settlement::Demands>(global, request, |r: &QueryDemandsResponse| {
                list(&r.demands, "no open leaf demands", |d| {
                    fields(&[
                        ("batch_id", d.batch_id.to_string()),
                        ("index", d.index.to_string()),
                        ("challenger", d.challenger.clone()),
                        ("deposit", format!("{}ngnk", d.deposit)),
                        ("deadline", d.deadline.to_string()),
                    ])
                })
            })
            .await
        }
        Query::Params => {
            show::<q::settlement::Params>(
                global,
                QueryParamsRequest {},
                |r: &QueryParamsResponse| {
                    let p = r.params.clone().unwrap_or_default();
                    fields(&[
                        (
                            "challenge_window_blocks",
                            p.challenge_window_blocks.to_string(),
                        ),
                        ("max_batch_lines", p.max_batch_lines.to_string()),
                        ("max_batch_records", p.max_batch_records.to_string()),
                        ("fraud_slash_ppm", p.fraud_slash_ppm.to_string()),
                        ("leaf_answer_blocks", p.leaf_answer_blocks.to_string()),
                        ("min_leaf_deposit", format!("{}ngnk", p.min_leaf_deposit)),
                    ])
                },
            )
            .await
        }
    }
}

fn batch_text(b: &Batch) -> String {
    let msg = b.settled.clone().unwrap_or_default();
    let status = match BatchStatus::try_from(b.status) {
        Ok(BatchStatus::Pending) => format!("pending until height {}", b.final_at),
        Ok(BatchStatus::Final) => format!("final (paid at height {})", b.final_at),
        Ok(BatchStatus::Voided) => format!("voided: {}", b.voided_reason),
        _ => "unknown".into(),
    };
    let mut rows = vec![
        ("id", b.id.to_string()),
        ("transfer_agent", msg.transfer_agent),
        ("number", msg.number.to_string()),
        ("root", hex::encode(&msg.root)),
        ("records", msg.record_count.to_string()),
        ("total", format!("{}ngnk", msg.total)),
        ("height", b.height.to_string()),
        ("status", status),
    ];
    let requesters = msg
        .requesters
        .iter()
        .map(|l| format!("{} {}ngnk", l.requester, l.amount))
        .collect::<Vec<_>>()
        .join(", ");
    let hosts = msg
        .hosts
        .iter()
        .map(|l| format!("{} {} units {}ngnk", l.host, l.work_units, l.payout))
        .collect::<Vec<_>>()
        .join(", ");
    rows.push(("requesters", requesters));
    rows.push(("hosts", hosts));
    fields(&rows)
}
