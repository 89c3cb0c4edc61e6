//! A light client of the chain of group keys (`gonkad verify-epochs`): starting from the
//! genesis signers in genesis.json alone, it follows each group handover to the group keys
//! and checks each epoch certificate's summary and signature. It trusts nothing the node
//! says beyond what a signature it can check covers.

use std::collections::BTreeMap;

use gonka_bls_crypto::{fast_aggregate_verify, PublicKey, Signature};
use gonka_proto::bls::{BlsKey, SignRequest};
use gonka_proto::signing::{certificate_digest, handover_digest};

use crate::sign::{genesis_keys, kind};

/// What the light client trusts: the chain id and the genesis signers, both read from
/// genesis.json.
#[derive(Debug, Clone)]
pub struct Trust {
    /// The chain id.
    pub chain_id: String,
    /// The genesis validators' BLS keys (`app_state.bls.keys` of the genesis validators).
    pub genesis_signers: Vec<BlsKey>,
}

impl Trust {
    /// The trust root of a genesis.json document: its chain id, and the BLS keys in
    /// `app_state.bls.keys` whose owners are genesis validators (participants with a
    /// consensus key in `app_state.stake`), as the chain computes them at genesis.
    pub fn from_genesis(genesis: &serde_json::Value) -> Result<Trust, String> {
        let chain_id = genesis["chain_id"]
            .as_str()
            .ok_or("genesis.json has no chain_id")?
            .to_string();
        let app_state = &genesis["app_state"];
        let stake: gonka_proto::stake::GenesisState =
            serde_json::from_value(app_state["stake"].clone())
                .map_err(|e| format!("app_state.stake: {e}"))?;
        let bls: gonka_proto::bls::GenesisState =
            serde_json::from_value(app_state["bls"].clone()).unwrap_or_default();
        let mut genesis_signers: Vec<BlsKey> = bls
            .keys
            .into_iter()
            .filter(|k| {
                stake
                    .participants
                    .iter()
                    .any(|p| p.operator == k.address && p.consensus_pubkey.len() == 32)
            })
            .collect();
        genesis_signers.sort_by(|a, b| a.address.cmp(&b.address));
        if genesis_signers.is_empty() {
            return Err("genesis.json names no genesis validator with a BLS key (app_state.bls.keys): nothing to start trusting from".into());
        }
        Ok(Trust {
            chain_id,
            genesis_signers,
        })
    }
}

/// One verified epoch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifiedEpoch {
    /// The epoch.
    pub epoch: u64,
    /// The group that signed its certificate (0: the genesis signers).
    pub signer_round: u64,
}

/// The first link that does not verify.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadLink {
    /// The epoch whose certificate could not be verified.
    pub epoch: u64,
    /// Why.
    pub reason: String,
}

/// Verifies `certificates` (epochs `0, 1, …` in order) from `trust`, looking group keys up
/// through `handovers` (by round): every verified epoch, or the first bad link.
pub fn verify_epochs(
    trust: &Trust,
    certificates: &[SignRequest],
    handovers: &BTreeMap<u64, SignRequest>,
) -> Result<Vec<VerifiedEpoch>, BadLink> {
    let mut chain = KeyChain {
        trust,
        handovers,
        keys: BTreeMap::new(),
    };
    let mut verified = Vec::new();
    for (expected, certificate) in (0u64..).zip(certificates) {
        let bad = |reason: String| BadLink {
            epoch: expected,
            reason,
        };
        let summary = certificate
            .summary
            .as_ref()
            .filter(|_| certificate.kind == kind::EPOCH_CERTIFICATE)
            .ok_or_else(|| bad("not an epoch certificate".into()))?;
        if summary.epoch != expected || summary.chain_id != trust.chain_id {
            return Err(bad(format!(
                "the certificate is for epoch {} of chain {:?}",
                summary.epoch, summary.chain_id
            )));
        }
        if certificate.digest != certificate_digest(summary) {
            return Err(bad(
                "the summary does not hash to the digest it claims (tampered summary)".into(),
            ));
        }
        chain
            .check_signature(certificate)
            .map_err(|why| bad(format!("certificate signature: {why}")))?;
        if summary.group_round > 0 {
            let key = chain
                .group_key(summary.group_round, 0)
                .map_err(|why| bad(format!("group key of round {}: {why}", summary.group_round)))?;
            if key.to_bytes().as_slice() != summary.group_pubkey {
                return Err(bad(format!(
                    "the summary's group key is not round {}'s handed-over key",
                    summary.group_round
                )));
            }
        }
        verified.push(VerifiedEpoch {
            epoch: expected,
            signer_round: certificate.signer_round,
        });
    }
    Ok(verified)
}

/// Group keys verified so far, from the genesis signers through the handovers.
struct KeyChain<'a> {
    trust: &'a Trust,
    handovers: &'a BTreeMap<u64, SignRequest>,
    keys: BTreeMap<u64, PublicKey>,
}

impl KeyChain<'_> {
    /// Whether `request` carries a valid signature by its signer.
    fn check_signature(&mut self, request: &SignRequest) -> Result<(), String> {
        let signature =
            Signature::from_bytes(&request.signature).ok_or("unsigned or not a G2 signature")?;
        if request.signer_round == 0 {
            let keys = genesis_keys(&self.trust.genesis_signers, &request.signers)?;
            return if fast_aggregate_verify(&keys, &request.digest, &signature) {
                Ok(())
            } else {
                Err("not signed by the genesis signers it names".into())
            };
        }
        let key = self.group_key(request.signer_round, 0)?;
        if key.verify(&request.digest, &signature) {
            Ok(())
        } else {
            Err(format!(
                "not signed by round {}'s group key",
                request.signer_round
            ))
        }
    }

    /// Round `round`'s group key, verified through its handover (and the handovers of the
    /// groups that vouched for it).
    fn group_key(&mut self, round: u64, depth: usize) -> Result<PublicKey, String> {
        if let Some(key) = self.keys.get(&round) {
            return Ok(*key);
        }
        if depth > self.handovers.len() {
            return Err("the handovers vouch for each other in a loop".into());
        }
        let request = self
            .handovers
            .get(&round)
            .ok_or_else(|| format!("no handover of round {round}"))?;
        let handover = request
            .handover
            .as_ref()
            .filter(|h| request.kind == kind::GROUP_HANDOVER && h.round == round)
            .ok_or_else(|| format!("the handover of round {round} is malformed"))?;
        if handover.chain_id != self.trust.chain_id || request.digest != handover_digest(handover) {
            return Err(format!(
                "the handover of round {round} does not hash to its digest (tampered)"
            ));
        }
        if request.signer_round >= round {
            return Err(format!(
                "round {round} is vouched for by a later round {}",
                request.signer_round
            ));
        }
        let request = request.clone();
        if request.signer_round > 0 {
            self.group_key(request.signer_round, depth + 1)?;
        }
        self.check_signature(&request)
            .map_err(|why| format!("handover of round {round}: {why}"))?;
        let key = PublicKey::from_bytes(&handover.group_pubkey)
            .ok_or_else(|| format!("round {round}'s group key does not decode"))?;
        self.keys.insert(round, key);
        Ok(key)
    }
}
