//! `gonkad query bls`: `/bls/key`, `/bls/keys`, `/bls/dkg`, `/bls/group`, `/bls/certificate`,
//! `/bls/beacon`, `/bls/params`.

use anyhow::Result;
use gonka_proto::bls::{
    Beacon, BlsKey, DkgRound, QueryBeaconRequest, QueryBeaconResponse, QueryCertificateRequest,
    QueryCertificateResponse, QueryDkgRequest, QueryDkgResponse, QueryGroupRequest,
    QueryGroupResponse, QueryKeyRequest, QueryKeyResponse, QueryKeysRequest, QueryKeysResponse,
    QueryParamsRequest, QueryParamsResponse, SignRequest,
};
use gonka_proto::query as q;

use super::{show, show_page, PageArgs};
use crate::output::{fields, list};
use crate::Global;

/// `gonkad query bls` subcommands.
#[derive(clap::Subcommand)]
pub enum Query {
    /// A participant's registered BLS public key.
    Key {
        /// Participant address (gonka1...).
        address: String,
    },
    /// Every registered BLS key, by address.
    Keys {
        #[command(flatten)]
        page: PageArgs,
    },
    /// A key generation round: members, slots, phases, outcome.
    Dkg {
        /// Round id (the epoch whose validators it is for); the latest round when omitted.
        round: Option<u64>,
    },
    /// The group key in force (the latest completed round).
    Group,
    /// An epoch's certificate: its summary, the group that signs it and the signature
    /// (check the whole chain with `gonkad verify-epochs`).
    Certificate {
        /// Epoch number.
        epoch: u64,
    },
    /// The randomness beacon of a height: the group's threshold signature of it (checkable
    /// against the round's group key) or, for a height no group signed, the fallback.
    Beacon {
        /// Block height; the latest recorded when omitted.
        height: Option<u64>,
    },
    /// Bls parameters.
    Params,
}

/// Runs a `gonkad query bls` subcommand.
pub async fn run(global: &Global, query: Query) -> Result<()> {
    match query {
        Query::Key { address } => {
            show::<q::bls::Key>(
                global,
                QueryKeyRequest { address },
                |r: &QueryKeyResponse| r.key.as_ref().map(key_text).unwrap_or_default(),
            )
            .await
        }
        Query::Keys { page } => {
            show_page::<q::bls::Keys>(
                global,
                QueryKeysRequest::default(),
                &page,
                |r: &QueryKeysResponse| list(&r.keys, "no BLS keys registered", key_text),
            )
            .await
        }
        Query::Dkg { round } => {
            let request = QueryDkgRequest {
                round: round.unwrap_or(0),
            };
            show::<q::bls::Dkg>(global, request, |r: &QueryDkgResponse| {
                r.round.as_ref().map(round_text).unwrap_or_default()
            })
            .await
        }
        Query::Group => {
            show::<q::bls::Group>(global, QueryGroupRequest {}, |r: &QueryGroupResponse| {
                r.round.as_ref().map(round_text).unwrap_or_else(|| {
                    "no group key yet: no key generation round has completed".into()
                })
            })
            .await
        }
        Query::Certificate { epoch } => {
            show::<q::bls::Certificate>(
                global,
                QueryCertificateRequest { epoch },
                |r: &QueryCertificateResponse| {
                    r.certificate
                        .as_ref()
                        .map(certificate_text)
                        .unwrap_or_default()
                },
            )
            .await
        }
        Query::Beacon { height } => {
            let request = QueryBeaconRequest {
                height: height.unwrap_or(0),
            };
            show::<q::bls::Beacon>(global, request, |r: &QueryBeaconResponse| {
                r.beacon.as_ref().map(beacon_text).unwrap_or_default()
            })
            .await
        }
        Query::Params => {
            show::<q::bls::Params>(global, QueryParamsRequest {}, |r: &QueryParamsResponse| {
                let p = r.params.unwrap_or_default();
                fields(&[
                    ("dkg_slots", p.dkg_slots.to_string()),
                    ("dkg_deal_blocks", p.dkg_deal_blocks.to_string()),
                    ("dkg_complaint_blocks", p.dkg_complaint_blocks.to_string()),
                    ("dkg_reveal_blocks", p.dkg_reveal_blocks.to_string()),
                    ("beacon_keep_blocks", p.beacon_keep_blocks.to_string()),
                ])
            })
            .await
        }
    }
}

fn round_text(r: &DkgRound) -> String {
    let members = r
        .members
        .iter()
        .map(|m| {
            let status = if m.disqualified {
                format!(" disqualified: {}", m.disqualified_for)
            } else {
                String::new()
            };
            format!(
                "{} ({} slots from {}){status}",
                m.address, m.slots, m.first_slot
            )
        })
        .collect::<Vec<_>>()
        .join(", ");
    fields(&[
        ("round", r.id.to_string()),
        ("status", r.status.clone()),
        ("failure", r.failure.clone()),
        (
            "threshold",
            format!("{} of {} slots", r.threshold, r.total_slots),
        ),
        (
            "phases",
            format!(
                "deal to {}, complain to {}, reveal to {}",
                r.deal_deadline, r.complaint_deadline, r.reveal_deadline
            ),
        ),
        ("members", members),
        ("group_pubkey", hex::encode(&r.group_pubkey)),
        ("qualified_dealers", r.qualified_dealers.join(", ")),
    ])
}

fn certificate_text(c: &SignRequest) -> String {
    let s = c.summary.clone().unwrap_or_default();
    let signer = match c.signer_round {
        0 => "the genesis signers".to_string(),
        r => format!("round {r}'s group"),
    };
    fields(&[
        ("epoch", s.epoch.to_string()),
        ("end_height", s.end_height.to_string()),
        ("total_work", s.total_work.to_string()),
        ("work_root", hex::encode(&s.work_root)),
        ("total_rewards", format!("{}ngnk", s.total_rewards)),
        ("rewards_root", hex::encode(&s.rewards_root)),
        ("validators_root", hex::encode(&s.validators_root)),
        (
            "group",
            format!("round {} {}", s.group_round, hex::encode(&s.group_pubkey)),
        ),
        ("digest", hex::encode(&c.digest)),
        ("signed_by", signer),
        ("signers", c.signers.join(", ")),
        (
            "signature",
            if c.signature.is_empty() {
                "(not signed yet)".into()
            } else {
                hex::encode(&c.signature)
            },
        ),
        ("signed_height", c.signed_height.to_string()),
    ])
}

fn beacon_text(b: &Beacon) -> String {
    fields(&[
        ("height", b.height.to_string()),
        ("value", hex::encode(&b.value)),
        ("source", b.source.clone()),
        ("round", b.round.to_string()),
        ("signature", hex::encode(&b.signature)),
    ])
}

fn key_text(k: &BlsKey) -> String {
    fields(&[
        ("address", k.address.clone()),
        ("pubkey", hex::encode(&k.pubkey)),
        ("registered_height", k.registered_height.to_string()),
    ])
}
