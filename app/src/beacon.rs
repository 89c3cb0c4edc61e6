//! The randomness beacon's consensus plumbing over ABCI 2.0 vote extensions (x/bls owns the
//! rules and the record; see `gonka_bls::beacon`).
//!
//! - **ExtendVote** (height `h`): a validator holding shares of the group that signs `h`
//!   puts one partial signature per slot of `gonka/beacon/v1` (chain id, `h`) in its
//!   extension. It derives its shares from the chain's dealings with the BLS key its
//!   validator sidecar keeps (`gonkad start --bls-dir`); without shares the extension is
//!   empty.
//! - **VerifyVoteExtension**: an empty extension is accepted (the validator contributes
//!   nothing, and refusing it would let a validator that lost its shares stall consensus);
//!   a non-empty one must come from a group member, name the group's round and carry valid
//!   partials of that member's slots only, checked in one pairing (`PublicShares`).
//! - **PrepareProposal** (height `h + 1`): the proposer combines the partials of the last
//!   commit's extensions into the group signature (Lagrange in the exponent; the result is
//!   unique, so it cannot choose among outcomes) and puts it first in the block as the
//!   beacon transaction. If the valid extensions hold fewer slots than the threshold, the
//!   transaction carries no signature but every extension of the last commit instead.
//! - **ProcessProposal**: a block of a height whose previous height has a signing group
//!   must start with a beacon transaction for it; a signature must verify against the group
//!   key (one pairing check), and a beacon without one must carry every precommit of the
//!   block's last commit with its extension, authenticated by the validator's ed25519
//!   extension signature, and their valid partials must stay below the threshold: a
//!   proposer cannot withhold a beacon it could have made.
//! - **FinalizeBlock**: the signature goes to x/bls in the block context, which checks and
//!   records it.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use gonka_bls::beacon::{self, signing_group};
use gonka_bls::shares::group_shares_in_state;
use gonka_bls_crypto::threshold::{
    combine, sign_all, Commitments, PartialSignature, PublicShares, SecretShare,
};
use gonka_bls_crypto::{PublicKey, SecretKey, Signature};
use gonka_proto::bls::{self as pb, BeaconTx, DkgRound, ExtendedVote, VoteExtension};
use gonka_proto::signing::beacon_message;
use gonka_sdk::{StateRead, StateReadExt};
use gonka_stake::StakeRead;
use prost::Message;
use sha2::{Digest, Sha256};
use tendermint_proto::v0_38::abci::{CommitInfo, ExtendedCommitInfo};
use tendermint_proto::v0_38::types::{BlockIdFlag, CanonicalVoteExtension};

use crate::{tx, App};

/// State key of the first height whose precommits carry vote extensions, written at genesis
/// from CometBFT's consensus parameters (absent: extensions are off and no height has a
/// group signature).
pub const VOTE_EXTENSIONS_KEY: &[u8] = b"app/vote_extensions_enable_height";

/// What the node knows about beacons besides the state: its own shares (a validator) and
/// the group it last looked at.
#[derive(Default)]
pub struct BeaconNode {
    shares: Option<ShareKeeper>,
    group: Mutex<Option<Arc<GroupView>>>,
}

impl BeaconNode {
    /// A node that signs with the shares of the BLS key its validator sidecar keeps in `dir`;
    /// `corrupt` (tests only) makes it sign the wrong message and, as proposer, a wrong
    /// beacon.
    pub fn signing(dir: PathBuf, corrupt: bool) -> BeaconNode {
        BeaconNode {
            shares: Some(ShareKeeper {
                dir,
                corrupt,
                loaded: Mutex::new(None),
            }),
            group: Mutex::new(None),
        }
    }

    fn corrupt(&self) -> bool {
        self.shares.as_ref().is_some_and(|s| s.corrupt)
    }
}

/// This validator's shares of the group keys: derived from the chain's dealings with the
/// BLS secret key its validator sidecar keeps in `bls.key` (`gonka_bls::shares`), so a
/// restarted node signs again with nothing else kept.
struct ShareKeeper {
    dir: PathBuf,
    corrupt: bool,
    loaded: Mutex<Option<(u64, Arc<Vec<SecretShare>>)>>,
}

impl ShareKeeper {
    /// This validator's shares of `group`, if it holds some (and its key is readable).
    fn of(
        &self,
        state: &dyn StateRead,
        chain_id: &str,
        group: &DkgRound,
    ) -> Option<Arc<Vec<SecretShare>>> {
        let mut loaded = crate::app::lock(&self.loaded);
        if let Some((_, shares)) = loaded.as_ref().filter(|(round, _)| *round == group.id) {
            return Some(shares.clone());
        }
        let path = self.dir.join("bls.key");
        let key = std::fs::read_to_string(&path)
            .ok()
            .and_then(|text| hex::decode(text.trim()).ok())
            .and_then(|bytes| SecretKey::from_bytes(&bytes.try_into().ok()?));
        let Some(key) = key else {
            tracing::warn!(path = %path.display(), "no readable BLS key yet; voting with empty extensions");
            return None;
        };
        match group_shares_in_state(state, &key, chain_id, group) {
            Ok(shares) => {
                tracing::info!(
                    round = group.id,
                    slots = shares.len(),
                    "signing beacons with this validator's shares"
                );
                let shares = Arc::new(shares);
                *loaded = Some((group.id, shares.clone()));
                Some(shares)
            }
            Err(why) => {
                tracing::info!(round = group.id, "not signing beacons: {why}");
                *loaded = Some((group.id, Arc::new(Vec::new())));
                None
            }
        }
    }
}

/// A signing group as the node checks its signatures: computed once per group.
struct GroupView {
    round: u64,
    threshold: u64,
    public: PublicShares,
    /// Members not disqualified, by CometBFT address (first 20 bytes of SHA-256 of the
    /// consensus key).
    members: BTreeMap<Vec<u8>, MemberView>,
}

struct MemberView {
    first_slot: u64,
    slots: u64,
    consensus_key: Vec<u8>,
}

impl GroupView {
    fn build(state: &dyn gonka_sdk::StateRead, group: &DkgRound) -> Result<GroupView, String> {
        let commitments = Commitments::from_checked_bytes(&group.group_commitments)
            .ok_or_else(|| format!("round {}: stored group commitments do not decode", group.id))?;
        let mut members = BTreeMap::new();
        for m in group.members.iter().filter(|m| !m.disqualified) {
            let participant = state
                .participant(&m.address)
                .map_err(|e| e.to_string())?
                .filter(|p| p.consensus_pubkey.len() == 32);
            if let Some(p) = participant {
                members.insert(
                    Sha256::digest(&p.consensus_pubkey)[..20].to_vec(),
                    MemberView {
                        first_slot: m.first_slot,
                        slots: m.slots,
                        consensus_key: p.consensus_pubkey,
                    },
                );
            }
        }
        Ok(GroupView {
            round: group.id,
            threshold: group.threshold,
            public: PublicShares::new(&commitments, group.total_slots),
            members,
        })
    }

    /// The partials in validator `address`'s non-empty `extension`, if it is a well-formed
    /// extension of a member for this group, naming only that member's slots.
    fn partials(&self, address: &[u8], extension: &[u8]) -> Result<Vec<PartialSignature>, String> {
        let member = self.members.get(address).ok_or_else(|| {
            format!(
                "validator {} holds no slot in group round {}",
                hex::encode_upper(address),
                self.round
            )
        })?;
        let ext = VoteExtension::decode(extension)
            .map_err(|e| format!("vote extension does not decode: {e}"))?;
        if ext.round != self.round {
            return Err(format!(
                "vote extension for group round {}, but round {} signs this height",
                ext.round, self.round
            ));
        }
        let slots = member.first_slot..member.first_slot + member.slots;
        let partials: Vec<PartialSignature> = ext
            .partials
            .iter()
            .map(|p| {
                let signature = Signature::from_bytes(&p.signature)
                    .ok_or_else(|| format!("slot {}: not a G2 signature", p.slot))?;
                if !slots.contains(&p.slot) {
                    return Err(format!("slot {} is not this validator's", p.slot));
                }
                Ok(PartialSignature {
                    index: p.slot,
                    signature,
                })
            })
            .collect::<Result<_, String>>()?;
        if partials.is_empty() {
            return Err("a non-empty vote extension without partial signatures".into());
        }
        Ok(partials)
    }

    /// Combines the partials of `votes` into the group signature of `msg`, if they reach
    /// the threshold: all at once, or, if that does not verify (the proposer's own
    /// extension is the only one not checked on receipt), from the votes whose partials do.
    fn combine(
        &self,
        key: &PublicKey,
        msg: &[u8],
        votes: &[Vec<PartialSignature>],
    ) -> Option<Signature> {
        let attempt = |votes: &[&Vec<PartialSignature>]| {
            let partials: Vec<PartialSignature> =
                votes.iter().flat_map(|v| v.iter().copied()).collect();
            if (partials.len() as u64) < self.threshold {
                return None;
            }
            combine(&partials).filter(|s| key.verify(msg, s))
        };
        let all: Vec<&Vec<PartialSignature>> = votes.iter().collect();
        attempt(&all).or_else(|| {
            let valid: Vec<&Vec<PartialSignature>> = votes
                .iter()
                .filter(|v| self.public.verify_batch(msg, v))
                .collect();
            attempt(&valid)
        })
    }
}

impl App {
    /// The first height with vote extensions (0: none).
    fn vote_extensions_from(&self) -> u64 {
        self.store()
            .get_proto::<u64>(VOTE_EXTENSIONS_KEY)
            .ok()
            .flatten()
            .unwrap_or(0)
    }

    /// The signing group of `height`, if vote extensions are on there and a group exists.
    fn beacon_group(&self, height: u64) -> Option<DkgRound> {
        let from = self.vote_extensions_from();
        if height == 0 || from == 0 || height < from {
            return None;
        }
        signing_group(self.store(), height).ok().flatten()
    }

    fn group_view(&self, group: &DkgRound) -> Result<Arc<GroupView>, String> {
        let mut cached = crate::app::lock(&self.beacon_node().group);
        if let Some(view) = cached.as_ref().filter(|v| v.round == group.id) {
            return Ok(view.clone());
        }
        let view = Arc::new(GroupView::build(self.store(), group)?);
        *cached = Some(view.clone());
        Ok(view)
    }

    fn chain_id(&self) -> String {
        tx::chain_id(self.store()).unwrap_or_default()
    }

    /// This validator's vote extension for `height`: its partial signatures of the height's
    /// beacon message, or nothing.
    pub(crate) fn extend_vote(&self, height: u64) -> Vec<u8> {
        let node = self.beacon_node();
        let (Some(keeper), Some(group)) = (&node.shares, self.beacon_group(height)) else {
            return Vec::new();
        };
        let chain_id = self.chain_id();
        let Some(shares) = keeper
            .of(self.store(), &chain_id, &group)
            .filter(|s| !s.is_empty())
        else {
            return Vec::new();
        };
        // A corrupt signer signs the next height's message: well-formed, and wrong.
        let signed_height = if keeper.corrupt { height + 1 } else { height };
        let partials = sign_all(&shares, &beacon_message(&chain_id, signed_height));
        VoteExtension {
            round: group.id,
            partials: partials
                .into_iter()
                .map(|p| pb::PartialSignature {
                    slot: p.index,
                    signature: p.signature.to_bytes().to_vec(),
                })
                .collect(),
        }
        .encode_to_vec()
    }

    /// Whether `extension`, validator `address`'s extension of its precommit at `height`,
    /// is acceptable (see the module docs); the error says why not.
    pub(crate) fn verify_vote_extension(
        &self,
        height: u64,
        address: &[u8],
        extension: &[u8],
    ) -> Result<(), String> {
        if extension.is_empty() {
            return Ok(());
        }
        let group = self.beacon_group(height).ok_or_else(|| {
            format!("no group signs height {height}, yet the extension is not empty")
        })?;
        let view = self.group_view(&group)?;
        let partials = view.partials(address, extension)?;
        if !view
            .public
            .verify_batch(&beacon_message(&self.chain_id(), height), &partials)
        {
            return Err(format!(
                "the partial signatures of height {height} do not verify against group round {}",
                group.id
            ));
        }
        Ok(())
    }

    /// The beacon transaction of a proposal at `height` from the proposer's extended last
    /// commit, or `None` when the last height has no signing group.
    pub(crate) fn beacon_tx(
        &self,
        height: u64,
        commit: Option<&ExtendedCommitInfo>,
    ) -> Option<Vec<u8>> {
        let signed = height.checked_sub(1)?;
        let group = self.beacon_group(signed)?;
        let view = match self.group_view(&group) {
            Ok(v) => v,
            Err(e) => {
                tracing::error!(error = %e, "cannot read the signing group; proposing without a beacon");
                return None;
            }
        };
        let key = PublicKey::from_bytes(&group.group_pubkey)?;
        let empty = ExtendedCommitInfo::default();
        let commit = commit.unwrap_or(&empty);
        let committed: Vec<_> = commit
            .votes
            .iter()
            .filter(|v| v.block_id_flag == BlockIdFlag::Commit as i32)
            .collect();
        let votes: Vec<Vec<PartialSignature>> = committed
            .iter()
            .filter(|v| !v.vote_extension.is_empty())
            .filter_map(|v| {
                let address = v.validator.as_ref()?.address.as_ref();
                view.partials(address, &v.vote_extension).ok()
            })
            .collect();
        let msg = beacon_message(&self.chain_id(), signed);
        let mut tx = BeaconTx {
            height: signed,
            round: group.id,
            commit_round: i64::from(commit.round),
            ..Default::default()
        };
        match view.combine(&key, &msg, &votes) {
            Some(_) if self.beacon_node().corrupt() => {
                // Tests only: a well-formed point that is not the group signature.
                tx.signature = votes[0][0].signature.to_bytes().to_vec();
            }
            Some(signature) => tx.signature = signature.to_bytes().to_vec(),
            None => {
                tracing::warn!(
                    height = signed,
                    "the extensions hold too few valid slots for a beacon"
                );
                tx.votes = committed
                    .iter()
                    .map(|v| ExtendedVote {
                        validator_address: v
                            .validator
                            .as_ref()
                            .map(|val| val.address.to_vec())
                            .unwrap_or_default(),
                        extension: v.vote_extension.to_vec(),
                        extension_signature: v.extension_signature.to_vec(),
                    })
                    .collect();
            }
        }
        Some(beacon::encode_tx(&tx))
    }

    /// Checks the beacon of a proposal at `height` (see the module docs); the error says
    /// what is wrong with it.
    pub(crate) fn check_beacon(
        &self,
        height: u64,
        txs: &[impl AsRef<[u8]>],
        commit: Option<&CommitInfo>,
    ) -> Result<(), String> {
        if let Some(i) = txs
            .iter()
            .skip(1)
            .position(|t| beacon::decode_tx(t.as_ref()).is_some())
        {
            return Err(format!("a beacon transaction at position {}", i + 1));
        }
        let signed = height.saturating_sub(1);
        let group = self.beacon_group(signed);
        let tx = match (
            group.as_ref(),
            txs.first().and_then(|t| beacon::decode_tx(t.as_ref())),
        ) {
            (None, None) => return Ok(()),
            (None, Some(_)) => {
                return Err(format!(
                    "a beacon for height {signed}, which no group signs"
                ))
            }
            (Some(_), None) => return Err(format!("no beacon for height {signed}")),
            (Some(_), Some(tx)) => tx?,
        };
        let group = group.expect("matched above");
        if tx.height != signed || tx.round != group.id {
            return Err(format!(
                "a beacon for height {} by round {}, but height {signed} is signed by round {}",
                tx.height, tx.round, group.id
            ));
        }
        let chain_id = self.chain_id();
        if !tx.signature.is_empty() {
            if !tx.votes.is_empty() {
                return Err("a beacon with a signature carries no votes".into());
            }
            if !beacon::verify_group_signature(&group, &chain_id, signed, &tx.signature) {
                return Err(format!(
                    "the beacon of height {signed} does not verify against round {}'s group key",
                    group.id
                ));
            }
            return Ok(());
        }
        self.check_withheld_beacon(&group, &chain_id, &tx, commit)
    }

    /// A beacon without a signature: every precommit of the last commit must be there with
    /// the extension its validator signed, and their valid partials below the threshold.
    fn check_withheld_beacon(
        &self,
        group: &DkgRound,
        chain_id: &str,
        tx: &BeaconTx,
        commit: Option<&CommitInfo>,
    ) -> Result<(), String> {
        let commit = commit.ok_or("a beacon without a signature, and no last commit")?;
        let committed: Vec<&[u8]> = commit
            .votes
            .iter()
            .filter(|v| v.block_id_flag == BlockIdFlag::Commit as i32)
            .filter_map(|v| v.validator.as_ref().map(|val| val.address.as_ref()))
            .collect();
        let carried: Vec<&[u8]> = tx
            .votes
            .iter()
            .map(|v| v.validator_address.as_slice())
            .collect();
        if committed != carried || tx.commit_round != i64::from(commit.round) {
            return Err(
                "a beacon without a signature must carry exactly the last commit's precommits"
                    .into(),
            );
        }
        let view = self.group_view(group)?;
        let msg = beacon_message(chain_id, tx.height);
        let mut valid_slots = 0u64;
        for vote in &tx.votes {
            let Some(member) = view.members.get(&vote.validator_address) else {
                continue;
            };
            let sign_bytes = CanonicalVoteExtension {
                extension: vote.extension.clone(),
                height: tx.height as i64,
                round: tx.commit_round,
                chain_id: chain_id.to_string(),
            }
            .encode_length_delimited_to_vec();
            let authentic = <[u8; 32]>::try_from(member.consensus_key.as_slice())
                .ok()
                .and_then(|k| ed25519_consensus::VerificationKey::try_from(k).ok())
                .zip(<[u8; 64]>::try_from(vote.extension_signature.as_slice()).ok())
                .is_some_and(|(key, sig)| {
                    key.verify(&ed25519_consensus::Signature::from(sig), &sign_bytes)
                        .is_ok()
                });
            if !authentic {
                return Err(format!(
                    "the extension carried for {} is not the one it signed",
                    hex::encode_upper(&vote.validator_address)
                ));
            }
            if vote.extension.is_empty() {
                continue;
            }
            if let Ok(partials) = view.partials(&vote.validator_address, &vote.extension) {
                if view.public.verify_batch(&msg, &partials) {
                    valid_slots += partials.len() as u64;
                }
            }
        }
        if valid_slots >= view.threshold {
            return Err(format!(
                "the extensions hold {valid_slots} valid slots, at least the threshold {}, but the beacon was left out",
                view.threshold
            ));
        }
        Ok(())
    }
}
