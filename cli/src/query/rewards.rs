//! `gonkad query rewards`: `/rewards/epoch`, `/rewards/participant`, `/rewards/params`.

use anyhow::Result;
use gonka_proto::query as q;
use gonka_proto::rewards::{
    ParticipantReward, QueryEpochRewardsRequest, QueryEpochRewardsResponse, QueryParamsRequest,
    QueryParamsResponse, QueryParticipantRewardsRequest, QueryParticipantRewardsResponse,
};

use super::{show, show_page, PageArgs};
use crate::amount::show_ngnk;
use crate::output::{fields, list, percent};
use crate::Global;

/// `gonkad query rewards` subcommands.
#[derive(clap::Subcommand)]
pub enum Query {
    /// How one finished epoch's rewards were settled, and what each participant got.
    Epoch {
        /// Epoch number.
        epoch: u64,
        #[command(flatten)]
        page: PageArgs,
    },
    /// What one participant earned, epoch by epoch.
    Participant {
        /// Operator address (gonka1...).
        address: String,
        #[command(flatten)]
        page: PageArgs,
    },
    /// Rewards module parameters.
    Params,
}

/// Runs a `gonkad query rewards` subcommand.
pub async fn run(global: &Global, query: Query) -> Result<()> {
    match query {
        Query::Epoch { epoch, page } => {
            let request = QueryEpochRewardsRequest {
                epoch,
                ..Default::default()
            };
            show_page::<q::rewards::Epoch>(
                global,
                request,
                &page,
                |r: &QueryEpochRewardsResponse| {
                    let Some(e) = &r.rewards else {
                        return format!("no rewards settled for epoch {epoch}");
                    };
                    let summary = fields(&[
                        ("epoch", e.epoch.to_string()),
                        ("emission", show_ngnk(&e.emission)),
                        ("fees", show_ngnk(&e.fees)),
                        ("validation_share", show_ngnk(&e.validation_share)),
                        ("distributed", show_ngnk(&e.distributed)),
                        ("community", show_ngnk(&e.community)),
                        ("total_work", e.total_work.to_string()),
                    ]);
                    let paid = list(&r.participants, "no participant was paid", reward_text);
                    format!("{summary}\n\n{paid}")
                },
            )
            .await
        }
        Query::Participant { address, page } => {
            let request = QueryParticipantRewardsRequest {
                operator: address,
                ..Default::default()
            };
            show_page::<q::rewards::Participant>(
                global,
                request,
                &page,
                |r: &QueryParticipantRewardsResponse| {
                    list(&r.rewards, "no rewards yet", reward_text)
                },
            )
            .await
        }
        Query::Params => {
            show::<q::rewards::Params>(global, QueryParamsRequest {}, |r: &QueryParamsResponse| {
                let p = r.params.clone().unwrap_or_default();
                fields(&[
                    ("initial_emission", show_ngnk(&p.initial_emission)),
                    ("decay_ppb", percent(p.decay_ppb, 1_000_000_000)),
                    (
                        "validation_share_ppm",
                        percent(p.validation_share_ppm, 1_000_000),
                    ),
                ])
            })
            .await
        }
    }
}

fn reward_text(r: &ParticipantReward) -> String {
    fields(&[
        ("epoch", r.epoch.to_string()),
        ("operator", r.operator.clone()),
        ("work", r.work.to_string()),
        ("amount", show_ngnk(&r.amount)),
    ])
}
