//! `gonkad query stake`: `/stake/participants`, `/stake/participant`, `/stake/unbonding`,
//! `/stake/work`, `/stake/params`.

use anyhow::Result;
use gonka_proto::query as q;
use gonka_proto::stake::{
    Participant, QueryParamsRequest, QueryParamsResponse, QueryParticipantRequest,
    QueryParticipantResponse, QueryParticipantsRequest, QueryParticipantsResponse,
    QueryUnbondingRequest, QueryUnbondingResponse, QueryWorkRequest, QueryWorkResponse,
};

use super::{show, show_page, show_value, PageArgs};
use crate::amount::show_ngnk;
use crate::output::{fields, list, percent};
use crate::prove::ProveArgs;
use crate::Global;

/// `gonkad query stake` subcommands.
#[derive(clap::Subcommand)]
pub enum Query {
    /// The participants with their bond, power and jail state.
    Participants {
        #[command(flatten)]
        page: PageArgs,
    },
    /// One participant.
    Participant {
        /// Operator address (gonka1...).
        address: String,
        #[command(flatten)]
        prove: ProveArgs,
    },
    /// Stake on its way back to its operators.
    Unbonding {
        /// Only this operator's entries (gonka1...); all when omitted.
        address: Option<String>,
        #[command(flatten)]
        page: PageArgs,
    },
    /// Work units credited to participants in one epoch.
    Work {
        /// Epoch number.
        epoch: u64,
        #[command(flatten)]
        page: PageArgs,
    },
    /// Stake module parameters.
    Params,
}

/// Runs a `gonkad query stake` subcommand.
pub async fn run(global: &Global, query: Query) -> Result<()> {
    match query {
        Query::Participants { page } => {
            let request = QueryParticipantsRequest::default();
            show_page::<q::stake::Participants>(
                global,
                request,
                &page,
                |r: &QueryParticipantsResponse| {
                    list(&r.participants, "no participants", participant_text)
                },
            )
            .await
        }
        Query::Participant { address, prove } => {
            let key = gonka_stake::keys::participant(&address);
            let absent = format!("{address} is not a participant");
            let request = QueryParticipantRequest { operator: address };
            show_value::<q::stake::Participant, Participant>(
                global,
                request,
                (&prove, key),
                |p| QueryParticipantResponse {
                    participant: Some(p),
                },
                || absent,
                |r: &QueryParticipantResponse| {
                    r.participant
                        .as_ref()
                        .map_or("no participant in the answer".into(), participant_text)
                },
            )
            .await
        }
        Query::Unbonding { address, page } => {
            let request = QueryUnbondingRequest {
                operator: address.unwrap_or_default(),
                ..Default::default()
            };
            show_page::<q::stake::Unbonding>(
                global,
                request,
                &page,
                |r: &QueryUnbondingResponse| {
                    list(&r.entries, "nothing is unbonding", |e| {
                        fields(&[
                            ("operator", e.operator.clone()),
                            ("amount", show_ngnk(&e.amount)),
                            ("created_epoch", e.created_epoch.to_string()),
                            (
                                "completes_epoch",
                                format!("{} (paid back at its end)", e.completes_epoch),
                            ),
                            ("id", e.id.to_string()),
                        ])
                    })
                },
            )
            .await
        }
        Query::Work { epoch, page } => {
            show_page::<q::stake::Work>(
                global,
                QueryWorkRequest {
                    epoch,
                    ..Default::default()
                },
                &page,
                |r: &QueryWorkResponse| {
                    let total: u128 = r.credits.iter().map(|w| u128::from(w.units)).sum();
                    let rows = r
                        .credits
                        .iter()
                        .map(|w| format!("{}: {} units", w.operator, w.units));
                    let rows: Vec<_> = rows.collect();
                    if rows.is_empty() {
                        format!("no work credited in epoch {epoch}")
                    } else {
                        // The total of this page: more may follow (see its --page-key).
                        let total_label = match r.pagination.as_ref() {
                            Some(p) if !p.next_key.is_empty() => "total of this page",
                            _ => "total",
                        };
                        format!(
                            "epoch {epoch}\n{}\n{total_label}: {total} units",
                            rows.join("\n")
                        )
                    }
                },
            )
            .await
        }
        Query::Params => {
            show::<q::stake::Params>(global, QueryParamsRequest {}, |r: &QueryParamsResponse| {
                let p = r.params.clone().unwrap_or_default();
                fields(&[
                    ("min_stake", show_ngnk(&p.min_stake)),
                    ("unbonding_epochs", p.unbonding_epochs.to_string()),
                    ("stake_weight_ppm", percent(p.stake_weight_ppm, 1_000_000)),
                    (
                        "max_power_share_ppm",
                        percent(p.max_power_share_ppm, 1_000_000),
                    ),
                    ("jail_epochs", p.jail_epochs.to_string()),
                ])
            })
            .await
        }
    }
}

fn participant_text(p: &Participant) -> String {
    let jailed = if p.jailed {
        format!("yes, until epoch {}", p.jailed_until_epoch)
    } else {
        "no".into()
    };
    let key = if p.consensus_pubkey.is_empty() {
        "(none: not a validator)".into()
    } else {
        crate::b64::encode(&p.consensus_pubkey)
    };
    fields(&[
        ("operator", p.operator.clone()),
        ("moniker", p.moniker.clone()),
        ("bonded", show_ngnk(&p.bonded)),
        ("power", p.power.to_string()),
        ("jailed", jailed),
        ("consensus_pubkey", key),
    ])
}
