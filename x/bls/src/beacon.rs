//! The randomness beacon (see the crate docs, "Beacon"): which group signs a height, the
//! beacon transaction a proposer puts first in its block, the record of every height's
//! randomness, and [`seed`], the one source of the seeds the chain draws with.

use gonka_bls_crypto::{PublicKey, Signature};
use gonka_proto::bls::{Beacon, BeaconTx, DkgRound};
use gonka_proto::signing::beacon_message;
use gonka_sdk::{BlockContext, ErrorCode, Result, SdkError, StateRead, StateReadExt, StateWrite};
use prost::Message;
use sha2::{Digest, Sha256};

use crate::{BlsRead, DkgWrite};

/// The bytes a beacon transaction starts with. The leading zero byte is no protobuf field
/// tag, so no signed transaction can start like this (`CheckTx` refuses them as undecodable).
pub const TX_PREFIX: &[u8] = b"\0gonka/beacon/v1\0";

/// Where a height's randomness came from ([`Beacon::source`]).
pub mod source {
    /// The group signature of the height.
    pub const GROUP: &str = "group";
    /// The next block's hash: no group could sign the height (before the first group, or
    /// with vote extensions off).
    pub const BLOCK_HASH: &str = "block_hash";
    /// No randomness: a group signs the height, but the next block carried no signature
    /// (its last commit's valid extensions held fewer slots than the threshold). The
    /// proposer chooses that last commit, so a value from it would be its to grind: draws
    /// that would use this height wait for the next signed one ([`seed`] is `None`).
    pub const UNSIGNED: &str = "unsigned";
}

/// The purposes seeds are drawn for: each gets its own seed from a height's beacon.
pub mod purpose {
    /// Which work records of a height are validated, and by whom (x/disputes).
    pub const VALIDATION_SAMPLING: &[u8] = b"validation-sampling";
    /// The committees of the disputes opened at a height (x/disputes).
    pub const DISPUTE_COMMITTEE: &[u8] = b"dispute-committee";
    /// Which training checkpoints of a closed round are re-executed, and by whom (x/pol).
    pub const CHECKPOINT_SAMPLING: &[u8] = b"checkpoint-sampling";
}

/// State key of the first height whose precommits carry vote extensions, written by the app
/// at genesis from CometBFT's consensus parameters (absent: extensions are off, and no height
/// has a group signature).
pub const VOTE_EXTENSIONS_KEY: &[u8] = b"app/vote_extensions_enable_height";

const SEED_DOMAIN: &[u8] = b"gonka/seed/v1";
const FALLBACK_DOMAIN: &[u8] = b"gonka/beacon-fallback/v1";

/// `tx` as the bytes of a block's beacon transaction.
pub fn encode_tx(tx: &BeaconTx) -> Vec<u8> {
    let mut bytes = TX_PREFIX.to_vec();
    bytes.extend(tx.encode_to_vec());
    bytes
}

/// `None` if `bytes` is no beacon transaction; otherwise the decoded one or why it does
/// not decode.
pub fn decode_tx(bytes: &[u8]) -> Option<std::result::Result<BeaconTx, String>> {
    let body = bytes.strip_prefix(TX_PREFIX)?;
    Some(BeaconTx::decode(body).map_err(|e| format!("beacon transaction does not decode: {e}")))
}

/// The group whose members sign the vote extensions of `height`: the group in force when
/// block `height` began. Reads the state committed at `height - 1` (extending and verifying
/// votes of `height`) or at `height` (checking the next block's beacon): when block `height`
/// itself completed a new group, the group it replaced signed.
pub fn signing_group<S: StateRead + ?Sized>(state: &S, height: u64) -> Result<Option<DkgRound>> {
    match state.group_round()? {
        Some(group) if group.finalized_height >= height => state.previous_group_round(),
        group => Ok(group),
    }
}

/// Whether the precommits of `height` carry vote extensions (the group's partials).
pub fn extensions_at<S: StateRead + ?Sized>(state: &S, height: u64) -> Result<bool> {
    let from = state.get_proto::<u64>(VOTE_EXTENSIONS_KEY)?.unwrap_or(0);
    Ok(height > 0 && from > 0 && height >= from)
}

/// The group whose signature of `height` the next block carries: [`signing_group`], when the
/// precommits of `height` carry vote extensions.
pub fn beacon_group<S: StateRead + ?Sized>(state: &S, height: u64) -> Result<Option<DkgRound>> {
    if !extensions_at(state, height)? {
        return Ok(None);
    }
    signing_group(state, height)
}

/// Whether `signature` is `group`'s signature of the beacon message of `height`.
pub fn verify_group_signature(
    group: &DkgRound,
    chain_id: &str,
    height: u64,
    signature: &[u8],
) -> bool {
    match (
        PublicKey::from_bytes(&group.group_pubkey),
        Signature::from_bytes(signature),
    ) {
        (Some(key), Some(signature)) => key.verify(&beacon_message(chain_id, height), &signature),
        _ => false,
    }
}

/// The beacon transaction block `ctx` carries (an empty one if none).
pub fn block_tx(ctx: &BlockContext) -> Result<BeaconTx> {
    match &ctx.beacon_tx {
        Some(body) => BeaconTx::decode(body.as_slice()).map_err(|e| {
            SdkError::Internal.err(format!("block {}: beacon transaction: {e}", ctx.height))
        }),
        None => Ok(BeaconTx::default()),
    }
}

/// At the start of block `ctx.height`: records the randomness of the previous height, from
/// the group `signature` its beacon transaction carries (checked again: a block replayed
/// from the block store skipped `ProcessProposal`), or, without one, none if a group signs
/// the height and this block's hash before the first group; forgets the beacon
/// `beacon_keep_blocks` older.
pub fn record(ctx: &BlockContext, state: &mut dyn StateWrite, signature: &[u8]) -> Result<()> {
    match ctx.height.checked_sub(1).filter(|h| *h > 0) {
        Some(height) => record_beacon(ctx, state, height, signature),
        None => Ok(()),
    }
}

fn record_beacon(
    ctx: &BlockContext,
    state: &mut dyn StateWrite,
    height: u64,
    signature: &[u8],
) -> Result<()> {
    let beacon = match beacon_group(state, height)? {
        None if signature.is_empty() => {
            let mut hasher = Sha256::new();
            hasher.update(FALLBACK_DOMAIN);
            hasher.update(ctx.block_hash);
            Beacon {
                height,
                value: hasher.finalize().to_vec(),
                source: source::BLOCK_HASH.into(),
                round: 0,
                signature: Vec::new(),
            }
        }
        None => {
            return Err(SdkError::Internal.err(format!(
                "block {} carries a beacon for height {height}, which no group signs",
                ctx.height
            )))
        }
        Some(group) if signature.is_empty() => Beacon {
            height,
            value: Vec::new(),
            source: source::UNSIGNED.into(),
            round: group.id,
            signature: Vec::new(),
        },
        Some(group) => {
            if !verify_group_signature(&group, &ctx.chain_id, height, signature) {
                return Err(SdkError::Internal.err(format!(
                    "the beacon of height {height} does not verify against round {}'s group key",
                    group.id
                )));
            }
            Beacon {
                height,
                value: Sha256::digest(signature).to_vec(),
                source: source::GROUP.into(),
                round: group.id,
                signature: signature.to_vec(),
            }
        }
    };
    let keep = state.bls_params()?.beacon_keep_blocks;
    state.put_beacon(&beacon, keep);
    Ok(())
}

/// The seed of `purpose` (one of [`purpose`]) at `height`: SHA-256(`"gonka/seed/v1"` ‖
/// purpose (length-prefixed) ‖ height (u64) ‖ the height's beacon value); `None` for an
/// [`source::UNSIGNED`] height, whose draws the caller defers to the next block (and so to
/// the next signed height). A height's beacon is recorded by the next block, so a block
/// draws with the seeds of earlier heights.
pub fn seed<S: StateRead + ?Sized>(
    state: &S,
    purpose: &[u8],
    height: u64,
) -> Result<Option<[u8; 32]>> {
    let beacon = state.beacon(height)?.ok_or_else(|| {
        SdkError::Internal.err(format!(
            "no beacon is recorded for height {height} (a height's beacon is recorded by the next block and kept for beacon_keep_blocks)"
        ))
    })?;
    if beacon.source == source::UNSIGNED {
        return Ok(None);
    }
    let mut hasher = Sha256::new();
    hasher.update(SEED_DOMAIN);
    hasher.update((purpose.len() as u32).to_be_bytes());
    hasher.update(purpose);
    hasher.update(height.to_be_bytes());
    hasher.update(&beacon.value);
    Ok(Some(hasher.finalize().into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn beacon_transactions_are_recognised_by_their_prefix_only() {
        let tx = BeaconTx {
            height: 7,
            round: 2,
            signature: vec![1; 96],
            ..Default::default()
        };
        let bytes = encode_tx(&tx);
        assert_eq!(decode_tx(&bytes), Some(Ok(tx)));
        assert_eq!(decode_tx(b"\x0a\x02hi"), None, "a signed tx is no beacon");
        let mut garbled = TX_PREFIX.to_vec();
        garbled.push(0xff);
        assert!(matches!(decode_tx(&garbled), Some(Err(_))));
    }
}
