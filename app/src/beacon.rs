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

use gonka_bls::beacon;
use gonka_bls::shares::group_shares_in_state;
use gonka_bls::{sign, BlsRead};
use gonka_bls_crypto::threshold::{
    combine, sign_all, Commitments, PartialSignature, PublicShares, SecretShare,
};
use gonka_bls_crypto::{PublicKey, SecretKey, Signature};
use gonka_proto::bls::{
    self as pb, BeaconTx, BlsKey, DkgRound, ExtendedVote, SignRequest, VoteExtension,
};
use gonka_proto::signing::beacon_message;
use gonka_sdk::StateRead;
use gonka_stake::StakeRead;
use prost::Message;
use sha2::{Digest, Sha256};
use tendermint_proto::v0_38::abci::{CommitInfo, ExtendedCommitInfo};
use tendermint_proto::v0_38::types::{BlockIdFlag, CanonicalVoteExtension};

use crate::{tx, App};

pub use gonka_bls::beacon::VOTE_EXTENSIONS_KEY;

/// What the node knows about beacons besides the state: its own shares (a validator) and
/// the group it last looked at.
#[derive(Default)]
pub struct BeaconNode {
    shares: Option<ShareKeeper>,
    /// Views of the last groups looked at (the beacon's and a signing request's), by round.
    groups: Mutex<BTreeMap<u64, Arc<GroupView>>>,
}

/// Groups (and share sets) kept in memory: the beacon's group and a request's signer.
const CACHED_GROUPS: usize = 2;

/// Inserts `value` under `round`, dropping the oldest rounds beyond [`CACHED_GROUPS`].
fn cache_insert<T>(cache: &mut BTreeMap<u64, T>, round: u64, value: T) {
    cache.insert(round, value);
    while cache.len() > CACHED_GROUPS {
        cache.pop_first();
    }
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
                key: Mutex::new(None),
                loaded: Mutex::new(BTreeMap::new()),
            }),
            groups: Mutex::new(BTreeMap::new()),
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
    key: Mutex<Option<SecretKey>>,
    loaded: Mutex<BTreeMap<u64, Arc<Vec<SecretShare>>>>,
}

impl ShareKeeper {
    /// The validator's BLS key, once its sidecar has written it.
    fn key(&self) -> Option<SecretKey> {
        let mut cached = crate::lock::lock(&self.key);
        if cached.is_none() {
            let path = self.dir.join("bls.key");
            *cached = std::fs::read_to_string(&path)
                .ok()
                .and_then(|text| hex::decode(text.trim()).ok())
                .and_then(|bytes| SecretKey::from_bytes(&bytes.try_into().ok()?));
            if cached.is_none() {
                tracing::warn!(path = %path.display(), "no readable BLS key yet; voting with empty extensions");
            }
        }
        cached.clone()
    }

    /// This validator's shares of `group`, if it holds some.
    fn of(
        &self,
        state: &dyn StateRead,
        chain_id: &str,
        group: &DkgRound,
    ) -> Option<Arc<Vec<SecretShare>>> {
        let key = self.key()?;
        let mut loaded = crate::lock::lock(&self.loaded);
        if let Some(shares) = loaded.get(&group.id) {
            return Some(shares.clone()).filter(|s| !s.is_empty());
        }
        let shares = match group_shares_in_state(state, &key, chain_id, group) {
            Ok(shares) => {
                tracing::info!(
                    round = group.id,
                    slots = shares.len(),
                    "signing with this validator's shares of the group"
                );
                shares
            }
            Err(why) => {
                tracing::info!(round = group.id, "not signing for the group: {why}");
                Vec::new()
            }
        };
        let shares = Arc::new(shares);
        cache_insert(&mut loaded, group.id, shares.clone());
        Some(shares).filter(|s| !s.is_empty())
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

    /// `list` as partial signatures of validator `address`, if it is a member and they name
    /// only its slots.
    fn partials(
        &self,
        address: &[u8],
        list: &[pb::PartialSignature],
    ) -> Result<Vec<PartialSignature>, String> {
        let member = self.members.get(address).ok_or_else(|| {
            format!(
                "validator {} holds no slot in group round {}",
                hex::encode_upper(address),
                self.round
            )
        })?;
        let slots = member.first_slot..member.first_slot + member.slots;
        let partials: Vec<PartialSignature> = list
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
            return Err("no partial signatures".into());
        }
        Ok(partials)
    }

    /// The beacon partials of validator `address`'s non-empty `extension`, if it is a
    /// member's extension for this group naming only its slots.
    fn beacon_partials(
        &self,
        address: &[u8],
        extension: &[u8],
    ) -> Result<Vec<PartialSignature>, String> {
        let ext = decode_extension(extension)?;
        if ext.round != self.round {
            return Err(format!(
                "vote extension for group round {}, but round {} signs this height",
                ext.round, self.round
            ));
        }
        self.partials(address, &ext.partials)
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

fn decode_extension(extension: &[u8]) -> Result<VoteExtension, String> {
    VoteExtension::decode(extension).map_err(|e| format!("vote extension does not decode: {e}"))
}

fn to_proto(partials: Vec<PartialSignature>) -> Vec<pb::PartialSignature> {
    partials
        .into_iter()
        .map(|p| pb::PartialSignature {
            slot: p.index,
            signature: p.signature.to_bytes().to_vec(),
        })
        .collect()
}

/// The committed votes of a last commit: `(address, extension, extension signature)`.
fn committed_votes(commit: &ExtendedCommitInfo) -> Vec<(&[u8], &[u8], &[u8])> {
    commit
        .votes
        .iter()
        .filter(|v| v.block_id_flag == BlockIdFlag::Commit as i32)
        .filter_map(|v| {
            let address = v.validator.as_ref()?.address.as_ref();
            Some((
                address,
                v.vote_extension.as_ref(),
                v.extension_signature.as_ref(),
            ))
        })
        .collect()
}

impl App {
    /// Whether the precommits of `height` carry vote extensions.
    fn extensions_at(&self, height: u64) -> bool {
        beacon::extensions_at(self.store(), height).unwrap_or(false)
    }

    /// The signing group of `height`, if vote extensions are on there and a group exists.
    fn beacon_group(&self, height: u64) -> Option<DkgRound> {
        beacon::beacon_group(self.store(), height).ok().flatten()
    }

    /// The signing request the extensions of `height` sign, if extensions are on there.
    fn pending_request(&self, height: u64) -> Option<SignRequest> {
        if !self.extensions_at(height) {
            return None;
        }
        sign::pending(self.store(), height).ok().flatten()
    }

    fn group_view(&self, group: &DkgRound) -> Result<Arc<GroupView>, String> {
        let mut cached = crate::lock::lock(&self.beacon_node().groups);
        if let Some(view) = cached.get(&group.id) {
            return Ok(view.clone());
        }
        let view = Arc::new(GroupView::build(self.store(), group)?);
        cache_insert(&mut cached, group.id, view.clone());
        Ok(view)
    }

    /// The view of round `round`'s group, if it completed.
    fn round_view(&self, round: u64) -> Result<(DkgRound, Arc<GroupView>), String> {
        let group = self
            .store()
            .dkg_round(round)
            .map_err(|e| e.to_string())?
            .filter(|r| r.status == gonka_bls::status::COMPLETED)
            .ok_or_else(|| format!("round {round} has no group"))?;
        let view = self.group_view(&group)?;
        Ok((group, view))
    }

    /// The genesis signer whose consensus address is `address`.
    fn genesis_signer_at(&self, address: &[u8]) -> Option<BlsKey> {
        let signers = self.store().genesis_signers().ok()?;
        signers.into_iter().find(|k| {
            self.store()
                .participant(&k.address)
                .ok()
                .flatten()
                .is_some_and(|p| Sha256::digest(&p.consensus_pubkey)[..20] == *address)
        })
    }

    fn chain_id(&self) -> String {
        tx::chain_id(self.store()).unwrap_or_default()
    }

    /// This validator's vote extension for `height`: its partial signatures of the height's
    /// beacon message and its part of the pending signing request's signature, or nothing.
    pub(crate) fn extend_vote(&self, height: u64) -> Vec<u8> {
        let Some(keeper) = &self.beacon_node().shares else {
            return Vec::new();
        };
        let chain_id = self.chain_id();
        let mut ext = VoteExtension::default();
        if let Some(group) = self.beacon_group(height) {
            if let Some(shares) = keeper.of(self.store(), &chain_id, &group) {
                // A corrupt signer signs the next height's message: well-formed, and wrong.
                let signed_height = if keeper.corrupt { height + 1 } else { height };
                let partials = sign_all(&shares, &beacon_message(&chain_id, signed_height));
                ext.round = group.id;
                ext.partials = to_proto(partials);
            }
        }
        if let Some(request) = self.pending_request(height) {
            if request.signer_round > 0 {
                let group = self.store().dkg_round(request.signer_round).ok().flatten();
                if let Some(shares) = group.and_then(|g| keeper.of(self.store(), &chain_id, &g)) {
                    ext.request_id = request.id;
                    ext.request_partials = to_proto(sign_all(&shares, &request.digest));
                }
            } else if let Some(key) = keeper.key() {
                let pubkey = key.public_key().to_bytes();
                let genesis = self.store().genesis_signers().unwrap_or_default();
                if genesis.iter().any(|k| k.pubkey == pubkey) {
                    ext.request_id = request.id;
                    ext.request_signature = key.sign(&request.digest).to_bytes().to_vec();
                }
            }
        }
        if ext == VoteExtension::default() {
            Vec::new()
        } else {
            ext.encode_to_vec()
        }
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
        let ext = decode_extension(extension)?;
        if ext.round != 0 || !ext.partials.is_empty() {
            let group = self.beacon_group(height).ok_or_else(|| {
                format!("no group signs height {height}, yet the extension carries beacon partials")
            })?;
            let view = self.group_view(&group)?;
            let partials = view.beacon_partials(address, extension)?;
            let msg = beacon_message(&self.chain_id(), height);
            if !view.public.verify_batch(&msg, &partials) {
                return Err(format!(
                    "the partial signatures of height {height} do not verify against group round {}",
                    group.id
                ));
            }
        }
        if ext.request_id == 0 {
            if ext.request_partials.is_empty() && ext.request_signature.is_empty() {
                return Ok(());
            }
            return Err("request signatures without a request id".into());
        }
        let request = self
            .pending_request(height)
            .filter(|r| r.id == ext.request_id)
            .ok_or_else(|| {
                format!(
                    "request {} is not pending at height {height}",
                    ext.request_id
                )
            })?;
        if request.signer_round > 0 {
            let (_, view) = self.round_view(request.signer_round)?;
            let partials = view.partials(address, &ext.request_partials)?;
            if !view.public.verify_batch(&request.digest, &partials) {
                return Err(format!(
                    "the partial signatures of request {} do not verify",
                    request.id
                ));
            }
            return Ok(());
        }
        let signer = self
            .genesis_signer_at(address)
            .ok_or("request signatures from a validator that is no genesis signer")?;
        let key = PublicKey::from_bytes(&signer.pubkey).ok_or("a genesis key does not decode")?;
        let signature = Signature::from_bytes(&ext.request_signature)
            .ok_or("the request signature is no G2 point")?;
        if !key.verify(&request.digest, &signature) {
            return Err(format!(
                "the signature of request {} does not verify",
                request.id
            ));
        }
        Ok(())
    }

    /// The beacon transaction of a proposal at `height` from the proposer's extended last
    /// commit: the last height's beacon (when a group signs it) and the pending request's
    /// signature (when the extensions make one); `None` when there is neither.
    pub(crate) fn beacon_tx(
        &self,
        height: u64,
        commit: Option<&ExtendedCommitInfo>,
    ) -> Option<Vec<u8>> {
        let signed = height.checked_sub(1)?;
        let empty = ExtendedCommitInfo::default();
        let commit = commit.unwrap_or(&empty);
        let votes = committed_votes(commit);
        let mut tx = BeaconTx {
            height: signed,
            commit_round: i64::from(commit.round),
            ..Default::default()
        };
        let group = self.beacon_group(signed);
        if let Some(group) = &group {
            tx.round = group.id;
            if let Err(e) = self.combine_beacon(group, &votes, &mut tx) {
                tracing::error!(error = %e, "cannot read the signing group; proposing without a beacon");
                return None;
            }
        }
        if let Some(request) = self.pending_request(height) {
            self.combine_request(&request, &votes, &mut tx);
        }
        (group.is_some() || tx.request_id != 0).then(|| beacon::encode_tx(&tx))
    }

    fn combine_beacon(
        &self,
        group: &DkgRound,
        votes: &[(&[u8], &[u8], &[u8])],
        tx: &mut BeaconTx,
    ) -> Result<(), String> {
        let view = self.group_view(group)?;
        let key = PublicKey::from_bytes(&group.group_pubkey).ok_or("no group key")?;
        let partials: Vec<Vec<PartialSignature>> = votes
            .iter()
            .filter(|(_, ext, _)| !ext.is_empty())
            .filter_map(|(address, ext, _)| view.beacon_partials(address, ext).ok())
            .collect();
        let msg = beacon_message(&self.chain_id(), tx.height);
        match view.combine(&key, &msg, &partials) {
            Some(_) if self.beacon_node().corrupt() => {
                // Tests only: a well-formed point that is not the group signature.
                tx.signature = partials[0][0].signature.to_bytes().to_vec();
            }
            Some(signature) => tx.signature = signature.to_bytes().to_vec(),
            None => {
                tracing::warn!(
                    height = tx.height,
                    "the extensions hold too few valid slots for a beacon"
                );
                tx.votes = votes
                    .iter()
                    .map(|(address, ext, signature)| ExtendedVote {
                        validator_address: address.to_vec(),
                        extension: ext.to_vec(),
                        extension_signature: signature.to_vec(),
                    })
                    .collect();
            }
        }
        Ok(())
    }

    /// Adds the signature of `request` to `tx` if the extensions of `votes` make one.
    fn combine_request(
        &self,
        request: &SignRequest,
        votes: &[(&[u8], &[u8], &[u8])],
        tx: &mut BeaconTx,
    ) {
        let parts: Vec<(&[u8], VoteExtension)> = votes
            .iter()
            .filter(|(_, ext, _)| !ext.is_empty())
            .filter_map(|(address, ext, _)| Some((*address, decode_extension(ext).ok()?)))
            .filter(|(_, ext)| ext.request_id == request.id)
            .collect();
        if request.signer_round > 0 {
            let Ok((group, view)) = self.round_view(request.signer_round) else {
                return;
            };
            let Some(key) = PublicKey::from_bytes(&group.group_pubkey) else {
                return;
            };
            let partials: Vec<Vec<PartialSignature>> = parts
                .iter()
                .filter_map(|(address, ext)| view.partials(address, &ext.request_partials).ok())
                .collect();
            if let Some(signature) = view.combine(&key, &request.digest, &partials) {
                tx.request_id = request.id;
                tx.request_signature = signature.to_bytes().to_vec();
            }
            return;
        }
        // The genesis signers: every valid individual signature, aggregated.
        let mut signers = Vec::new();
        let mut signatures = Vec::new();
        for (address, ext) in &parts {
            let Some(signer) = self.genesis_signer_at(address) else {
                continue;
            };
            let valid = PublicKey::from_bytes(&signer.pubkey)
                .zip(Signature::from_bytes(&ext.request_signature))
                .filter(|(key, sig)| key.verify(&request.digest, sig));
            if let Some((_, signature)) = valid {
                signers.push(signer.address);
                signatures.push(signature);
            }
        }
        let aggregate = gonka_bls_crypto::aggregate(&signatures).to_bytes().to_vec();
        if !signatures.is_empty()
            && sign::verify(self.store(), request, &aggregate, &signers).is_ok()
        {
            tx.request_id = request.id;
            tx.request_signature = aggregate;
            tx.request_signers = signers;
        }
    }

    /// Checks the beacon transaction of a proposal at `height` (see the module docs); the
    /// error says what is wrong with it.
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
        let tx = match txs.first().and_then(|t| beacon::decode_tx(t.as_ref())) {
            Some(tx) => tx?,
            None if group.is_some() => return Err(format!("no beacon for height {signed}")),
            None => return Ok(()),
        };
        if tx.height != signed {
            return Err(format!(
                "a beacon transaction for height {}, not {signed}",
                tx.height
            ));
        }
        match &group {
            Some(group) => self.check_group_beacon(group, &tx, commit)?,
            None if tx.signature.is_empty() && tx.votes.is_empty() && tx.round == 0 => {}
            None => {
                return Err(format!(
                    "a beacon for height {signed}, which no group signs"
                ))
            }
        }
        if tx.request_id == 0 {
            if tx.request_signature.is_empty() && tx.request_signers.is_empty() {
                return Ok(());
            }
            return Err("a request signature without a request id".into());
        }
        let request = self
            .pending_request(height)
            .filter(|r| r.id == tx.request_id)
            .ok_or_else(|| format!("request {} is not pending", tx.request_id))?;
        sign::verify(
            self.store(),
            &request,
            &tx.request_signature,
            &tx.request_signers,
        )
    }

    fn check_group_beacon(
        &self,
        group: &DkgRound,
        tx: &BeaconTx,
        commit: Option<&CommitInfo>,
    ) -> Result<(), String> {
        if tx.round != group.id {
            return Err(format!(
                "a beacon by round {}, but height {} is signed by round {}",
                tx.round, tx.height, group.id
            ));
        }
        let chain_id = self.chain_id();
        if !tx.signature.is_empty() {
            if !tx.votes.is_empty() {
                return Err("a beacon with a signature carries no votes".into());
            }
            if !beacon::verify_group_signature(group, &chain_id, tx.height, &tx.signature) {
                return Err(format!(
                    "the beacon of height {} does not verify against round {}'s group key",
                    tx.height, group.id
                ));
            }
            return Ok(());
        }
        self.check_withheld_beacon(group, &chain_id, tx, commit)
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
            if let Ok(partials) = view.beacon_partials(&vote.validator_address, &vote.extension) {
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
