//! Signing requests (see the crate docs, "Certificates"): what the network signs through its
//! vote extensions besides the beacon — each epoch's certificate and each new group key's
//! handover — one at a time, oldest first.

use gonka_bls_crypto::{fast_aggregate_verify, PublicKey, Signature};
use gonka_epochs::EpochsRead;
use gonka_proto::bls::{BlsKey, EpochSummary, GroupHandover, SignRequest};
use gonka_proto::signing::{certificate_digest, handover_digest};
use gonka_rewards::RewardsRead;
use gonka_sdk::{BlockContext, ErrorCode, Event, Result, SdkError, StateRead, StateWrite};
use gonka_stake::StakeRead;
use sha2::{Digest, Sha256};

use crate::beacon::signing_group;
use crate::{BlsRead, SignWrite};

/// Kinds of signing requests.
pub mod kind {
    /// An epoch's certificate, signed by the group that signed its last block.
    pub const EPOCH_CERTIFICATE: &str = "epoch_certificate";
    /// A new group key, vouched for by the group it replaces (or the genesis signers).
    pub const GROUP_HANDOVER: &str = "group_handover";
}

/// Blocks a request waits for its signature before the next one is taken up (it stays
/// unsigned, and an event says so): a group whose members are gone cannot stall the rest.
pub const REQUEST_EXPIRY_BLOCKS: u64 = 100;

/// SHA-256 over `lines`, each followed by a newline: the roots of an epoch summary.
fn root(lines: impl Iterator<Item = String>) -> Vec<u8> {
    let mut hasher = Sha256::new();
    for line in lines {
        hasher.update(line.as_bytes());
        hasher.update(b"\n");
    }
    hasher.finalize().to_vec()
}

/// At the start of the block after an epoch's last (`ctx.height` starts epoch `e + 1`):
/// queues epoch `e`'s certificate, signed by the group that signed its last block (or, before
/// the first group, the genesis signers).
pub fn certify_ended_epoch(ctx: &BlockContext, state: &mut dyn StateWrite) -> Result<()> {
    let current = state.current_epoch()?;
    if current.number == 0 || current.start_height != ctx.height {
        return Ok(());
    }
    let epoch = current.number - 1;
    let end_height = ctx.height - 1;
    let credits = state.work_credits(epoch)?;
    let rewards = state.epoch_participant_rewards(epoch)?;
    let total_rewards: u128 = rewards
        .iter()
        .map(|r| r.amount.parse::<u128>().unwrap_or(0))
        .sum();
    let validators: Vec<String> = state
        .participants()?
        .into_iter()
        .filter(|p| p.power > 0 && !p.jailed)
        .map(|p| {
            format!(
                "{}={}={}",
                p.operator,
                p.power,
                hex::encode(&p.consensus_pubkey)
            )
        })
        .collect();
    let group = state.group_round()?;
    let summary = EpochSummary {
        chain_id: ctx.chain_id.clone(),
        epoch,
        end_height,
        work_root: root(
            credits
                .iter()
                .map(|c| format!("{}={}", c.operator, c.units)),
        ),
        total_work: credits.iter().map(|c| c.units).sum(),
        rewards_root: root(
            rewards
                .iter()
                .map(|r| format!("{}={}", r.operator, r.amount)),
        ),
        total_rewards: total_rewards.to_string(),
        validators_root: root(validators.into_iter()),
        group_round: group.as_ref().map_or(0, |g| g.id),
        group_pubkey: group.map(|g| g.group_pubkey).unwrap_or_default(),
    };
    let signer_round = signing_group(state, end_height)?.map_or(0, |g| g.id);
    let request = SignRequest {
        kind: kind::EPOCH_CERTIFICATE.into(),
        digest: certificate_digest(&summary).to_vec(),
        summary: Some(summary),
        signer_round,
        created_height: ctx.height,
        ..Default::default()
    };
    let id = state.queue_sign_request(request)?;
    state.index_certificate(epoch, id);
    Ok(())
}

/// When round `round` completes with `group_pubkey`: queues its handover, signed by the
/// group it replaces (`previous`, or the genesis signers for the first group).
pub fn request_handover(
    state: &mut dyn StateWrite,
    chain_id: &str,
    height: u64,
    round: u64,
    group_pubkey: &[u8],
    previous: Option<u64>,
) -> Result<()> {
    let handover = GroupHandover {
        chain_id: chain_id.into(),
        round,
        group_pubkey: group_pubkey.to_vec(),
    };
    let request = SignRequest {
        kind: kind::GROUP_HANDOVER.into(),
        digest: handover_digest(&handover).to_vec(),
        handover: Some(handover),
        signer_round: previous.unwrap_or(0),
        created_height: height,
        ..Default::default()
    };
    let id = state.queue_sign_request(request)?;
    state.index_handover(round, id);
    Ok(())
}

/// The request the vote extensions sign now: the oldest unsigned one not expired at
/// `height`.
pub fn pending<S: StateRead + ?Sized>(state: &S, height: u64) -> Result<Option<SignRequest>> {
    Ok(state
        .first_unsigned_request()?
        .filter(|r| height <= r.created_height + REQUEST_EXPIRY_BLOCKS))
}

/// Checks `signature` (by `signers`, for the genesis signers) of `request`; the error says
/// what is wrong.
pub fn verify<S: StateRead + ?Sized>(
    state: &S,
    request: &SignRequest,
    signature: &[u8],
    signers: &[String],
) -> std::result::Result<(), String> {
    let signature = Signature::from_bytes(signature).ok_or("not a G2 signature")?;
    if request.signer_round > 0 {
        if !signers.is_empty() {
            return Err("a group signature names no signers".into());
        }
        let round = state
            .dkg_round(request.signer_round)
            .map_err(|e| e.to_string())?
            .ok_or("the signing group's round is gone")?;
        let key = PublicKey::from_bytes(&round.group_pubkey).ok_or("no group key")?;
        return if key.verify(&request.digest, &signature) {
            Ok(())
        } else {
            Err(format!(
                "request {} is not signed by round {}'s group key",
                request.id, request.signer_round
            ))
        };
    }
    let genesis = state.genesis_signers().map_err(|e| e.to_string())?;
    let keys = genesis_keys(&genesis, signers)?;
    if !fast_aggregate_verify(&keys, &request.digest, &signature) {
        return Err(format!(
            "request {} is not signed by the genesis signers it names",
            request.id
        ));
    }
    Ok(())
}

/// The keys of `signers`, which must be distinct genesis signers, more than two thirds of
/// them.
pub fn genesis_keys(
    genesis: &[BlsKey],
    signers: &[String],
) -> std::result::Result<Vec<PublicKey>, String> {
    let mut seen = std::collections::BTreeSet::new();
    let mut keys = Vec::with_capacity(signers.len());
    for signer in signers {
        let key = genesis
            .iter()
            .find(|k| &k.address == signer)
            .ok_or_else(|| format!("{signer} is no genesis signer"))?;
        if !seen.insert(signer) {
            return Err(format!("{signer} signs twice"));
        }
        keys.push(PublicKey::from_bytes(&key.pubkey).ok_or("a genesis key does not decode")?);
    }
    if keys.len() * 3 <= genesis.len() * 2 {
        return Err(format!(
            "{} of {} genesis signers is not more than two thirds",
            keys.len(),
            genesis.len()
        ));
    }
    Ok(keys)
}

/// At the start of block `ctx.height`: records the signature of the pending request that the
/// block's beacon transaction carries (checked again: a replayed block skipped
/// `ProcessProposal`), then expires the pending request if its time is up.
pub fn record(
    ctx: &BlockContext,
    state: &mut dyn StateWrite,
    request_id: u64,
    signature: &[u8],
    signers: &[String],
) -> Result<()> {
    let pending = pending(state, ctx.height)?;
    if request_id != 0 {
        let mut request = pending.filter(|r| r.id == request_id).ok_or_else(|| {
            SdkError::Internal.err(format!(
                "block {} signs request {request_id}, which is not pending",
                ctx.height
            ))
        })?;
        verify(state, &request, signature, signers)
            .map_err(|why| SdkError::Internal.err(format!("block {}: {why}", ctx.height)))?;
        request.signature = signature.to_vec();
        request.signers = signers.to_vec();
        request.signed_height = ctx.height;
        state.emit(
            Event::new("sign_request_signed")
                .attr("id", request.id)
                .attr("kind", &request.kind)
                .attr("signer_round", request.signer_round),
        );
        state.finish_sign_request(&request);
        return Ok(());
    }
    if let Some(first) = state.first_unsigned_request()? {
        if ctx.height > first.created_height + REQUEST_EXPIRY_BLOCKS {
            tracing::warn!(id = first.id, kind = %first.kind, "signing request expired unsigned");
            state.emit(
                Event::new("sign_request_expired")
                    .attr("id", first.id)
                    .attr("kind", &first.kind)
                    .attr("signer_round", first.signer_round),
            );
            state.finish_sign_request(&first);
        }
    }
    Ok(())
}
