//! `gonkad query inference`: `/inference/models`, `/inference/nodes`, `/inference/node`,
//! `/inference/transfer_agents`, `/inference/record`, `/inference/records`,
//! `/inference/params`.

use anyhow::Result;
use gonka_proto::inference as pb;
use gonka_proto::query as q;

use super::{show, show_page, PageArgs};
use crate::amount::show_ngnk;
use crate::output::{fields, list};
use crate::Global;

/// `gonkad query inference` subcommands.
#[derive(clap::Subcommand)]
pub enum Query {
    /// Models the chain prices, with their price per token and least VRAM.
    Models {
        #[command(flatten)]
        page: PageArgs,
    },
    /// Registered ML nodes, all or of one host.
    Nodes {
        /// Only the nodes of this host (operator address, gonka1...); all when omitted.
        #[arg(long)]
        host: Option<String>,
        #[command(flatten)]
        page: PageArgs,
    },
    /// One registered ML node.
    Node {
        /// Node id.
        id: String,
    },
    /// Registered transfer agents.
    TransferAgents {
        #[command(flatten)]
        page: PageArgs,
    },
    /// One stored work record.
    Record {
        /// Inference id: the lowercase hex of the request hash.
        id: String,
    },
    /// Work records of one epoch, all or of one executor node.
    Records {
        /// Epoch number.
        #[arg(long)]
        epoch: u64,
        /// Only the records executed by this node id; all when omitted.
        #[arg(long)]
        executor: Option<String>,
        #[command(flatten)]
        page: PageArgs,
    },
    /// Inference module parameters.
    Params,
}

/// Runs a `gonkad query inference` subcommand.
pub async fn run(global: &Global, query: Query) -> Result<()> {
    match query {
        Query::Models { page } => {
            show_page::<q::inference::Models>(
                global,
                pb::QueryModelsRequest::default(),
                &page,
                |r: &pb::QueryModelsResponse| list(&r.models, "no models", model_text),
            )
            .await
        }
        Query::Nodes { host, page } => {
            let request = pb::QueryNodesRequest {
                host: host.unwrap_or_default(),
                ..Default::default()
            };
            show_page::<q::inference::Nodes>(
                global,
                request,
                &page,
                |r: &pb::QueryNodesResponse| list(&r.nodes, "no nodes", node_text),
            )
            .await
        }
        Query::Node { id } => {
            show::<q::inference::Node>(
                global,
                pb::QueryNodeRequest { node_id: id },
                |r: &pb::QueryNodeResponse| {
                    r.node
                        .as_ref()
                        .map_or("no node in the answer".into(), node_text)
                },
            )
            .await
        }
        Query::TransferAgents { page } => {
            show_page::<q::inference::TransferAgents>(
                global,
                pb::QueryTransferAgentsRequest::default(),
                &page,
                |r: &pb::QueryTransferAgentsResponse| {
                    list(&r.transfer_agents, "no transfer agents", |t| {
                        fields(&[
                            ("address", t.address.clone()),
                            ("url", t.url.clone()),
                            ("pubkey", hex::encode(&t.pubkey)),
                        ])
                    })
                },
            )
            .await
        }
        Query::Record { id } => {
            show::<q::inference::Record>(
                global,
                pb::QueryRecordRequest { inference_id: id },
                |r: &pb::QueryRecordResponse| {
                    r.record
                        .as_ref()
                        .map_or("no record in the answer".into(), record_text)
                },
            )
            .await
        }
        Query::Records {
            epoch,
            executor,
            page,
        } => {
            let request = pb::QueryRecordsRequest {
                epoch,
                executor: executor.unwrap_or_default(),
                ..Default::default()
            };
            show_page::<q::inference::Records>(
                global,
                request,
                &page,
                |r: &pb::QueryRecordsResponse| {
                    let empty = format!("no work records in epoch {epoch}");
                    list(&r.records, &empty, record_text)
                },
            )
            .await
        }
        Query::Params => {
            show::<q::inference::Params>(
                global,
                pb::QueryParamsRequest {},
                |r: &pb::QueryParamsResponse| {
                    let p = r.params.unwrap_or_default();
                    fields(&[
                        ("max_tokens_per_record", p.max_tokens_per_record.to_string()),
                        (
                            "payload_retention_blocks",
                            p.payload_retention_blocks.to_string(),
                        ),
                    ])
                },
            )
            .await
        }
    }
}

fn model_text(m: &pb::Model) -> String {
    let mut lines = vec![
        ("id", m.id.clone()),
        ("price_per_token", show_ngnk(&m.price_per_token)),
        ("min_vram_mib", m.min_vram_mib.to_string()),
        (
            "work_per_token",
            format!("{} work units", m.work_per_token.max(1)),
        ),
    ];
    if !m.weights_sha256.is_empty() {
        lines.push(("weights_sha256", hex::encode(&m.weights_sha256)));
    }
    if m.trained_by_job != 0 {
        lines.push(("trained_by_job", m.trained_by_job.to_string()));
    }
    if m.validation == "logprobs" {
        lines.push(("validation", "logprobs".into()));
        lines.push(("logprob_top_k", m.logprob_top_k.to_string()));
        lines.push((
            "logprob_threshold",
            format!("{} (2^-16 nats per logprob)", m.logprob_threshold),
        ));
        lines.push((
            "logprob_position_threshold",
            format!("{} (2^-16 nats per position)", m.logprob_position_threshold),
        ));
    } else {
        lines.push(("validation", "exact".into()));
    }
    fields(&lines)
}

fn node_text(n: &pb::Node) -> String {
    fields(&[
        ("id", n.id.clone()),
        ("host", n.host.clone()),
        ("models", n.models.join(", ")),
        ("vram_mib", n.vram_mib.to_string()),
        ("bandwidth_mbps", n.bandwidth_mbps.to_string()),
        ("max_concurrency", n.max_concurrency.to_string()),
        ("endpoint", n.endpoint.clone()),
        ("pubkey", hex::encode(&n.pubkey)),
    ])
}

fn record_text(s: &pb::StoredRecord) -> String {
    let w = s.record.clone().unwrap_or_default();
    fields(&[
        ("inference_id", w.inference_id),
        ("epoch", s.epoch.to_string()),
        ("height", s.height.to_string()),
        ("model", w.model),
        ("prompt_tokens", w.prompt_tokens.to_string()),
        ("completion_tokens", w.completion_tokens.to_string()),
        ("cost", show_ngnk(&s.cost)),
        ("commission", show_ngnk(&w.commission)),
        ("requester", w.requester),
        ("executor_node", w.executor_node),
        ("executor_host", s.executor_host.clone()),
        ("transfer_agent", s.transfer_agent.clone()),
        ("request_hash", hex::encode(&w.request_hash)),
        ("prompt_hash", hex::encode(&w.prompt_hash)),
        ("output_commitment", hex::encode(&w.output_commitment)),
        ("max_price_per_token", show_ngnk(&w.max_price_per_token)),
        ("max_completion_tokens", w.max_completion_tokens.to_string()),
    ])
}
