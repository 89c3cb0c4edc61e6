//! Query routing for `/bls/*` paths.

use gonka_proto::bls as pb;
use gonka_proto::query::bls as q;
use gonka_sdk::{ErrorCode, QueryRouter, Result, StateRead};

use crate::{BlsError, BlsRead};

/// Answers `path` if it is a bls query.
pub fn route(path: &str, data: &[u8], state: &dyn StateRead) -> Option<Result<Vec<u8>>> {
    QueryRouter::new(path, data)
        .on::<q::Key>(|r| {
            let key = state.bls_key(&r.address)?.ok_or_else(|| {
                BlsError::UnknownKey.err(format!(
                    "{} has no BLS key; register one with gonkad tx bls register-key",
                    r.address
                ))
            })?;
            Ok(pb::QueryKeyResponse { key: Some(key) })
        })
        .on::<q::Dkg>(|r| {
            let round = if r.round == 0 {
                state.latest_dkg_round()?
            } else {
                state.dkg_round(r.round)?
            };
            let round = round.ok_or_else(|| {
                BlsError::UnknownRound.err(format!("no key generation round {}", r.round))
            })?;
            Ok(pb::QueryDkgResponse { round: Some(round) })
        })
        .on::<q::Dealing>(|r| {
            let dealing = state.dealing(r.round, &r.dealer)?.ok_or_else(|| {
                BlsError::NoDealing.err(format!("{} did not deal in round {}", r.dealer, r.round))
            })?;
            Ok(pb::QueryDealingResponse {
                dealing: Some(dealing),
            })
        })
        .on::<q::Complaints>(|r| {
            Ok(pb::QueryComplaintsResponse {
                complaints: state.complaints_about(r.round, &r.dealer)?,
            })
        })
        .on::<q::Group>(|_| {
            Ok(pb::QueryGroupResponse {
                round: state.group_round()?,
            })
        })
        .on::<q::Beacon>(|r| {
            let height = match r.height {
                0 => state.latest_beacon_height()?,
                h => h,
            };
            let beacon = state.beacon(height)?.ok_or_else(|| {
                BlsError::UnknownBeacon.err(format!(
                    "no beacon is kept for height {height}: a height's beacon is recorded by the next block, and the state keeps the last beacon_keep_blocks (older ones are in each block's first transaction)"
                ))
            })?;
            Ok(pb::QueryBeaconResponse {
                beacon: Some(beacon),
            })
        })
        .on::<q::Certificate>(|r| {
            let certificate = state.certificate(r.epoch)?.ok_or_else(|| {
                BlsError::UnknownCertificate.err(format!(
                    "epoch {} has no certificate: an epoch's certificate is made in the block after its last",
                    r.epoch
                ))
            })?;
            Ok(pb::QueryCertificateResponse {
                certificate: Some(certificate),
            })
        })
        .on::<q::Handover>(|r| {
            let handover = state.handover(r.round)?.ok_or_else(|| {
                BlsError::UnknownRound.err(format!(
                    "round {} has no handover: only a completed round's group key is handed over",
                    r.round
                ))
            })?;
            Ok(pb::QueryHandoverResponse {
                handover: Some(handover),
            })
        })
        .on::<q::GenesisSigners>(|_| {
            Ok(pb::QueryGenesisSignersResponse {
                signers: state.genesis_signers()?,
            })
        })
        .on::<q::Params>(|_| {
            Ok(pb::QueryParamsResponse {
                params: Some(state.bls_params()?),
            })
        })
        .on::<q::Keys>(|r| {
            let page = state.bls_keys_page(r.pagination.as_ref())?;
            Ok(pb::QueryKeysResponse {
                keys: page.items,
                pagination: page.pagination,
            })
        })
        .answer()
}
