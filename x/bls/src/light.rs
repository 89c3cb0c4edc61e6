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
///
/// Trust moves forward only: the group in force starts as the genesis signers; a newer
/// round is trusted only through a chain of handovers that starts at the group in force
/// (each signed by the group it replaces), and then it is in force. A certificate names the
/// group in force at its epoch's end and is signed by that group or by the one it replaced
/// (which still signs in the block that completed it). So keys of a replaced group —
/// the genesis signers' above all — can neither vouch for a new group nor certify an epoch.
pub fn verify_epochs(
    trust: &Trust,
    certificates: &[SignRequest],
    handovers: &BTreeMap<u64, SignRequest>,
) -> Result<Vec<VerifiedEpoch>, BadLink> {
    let mut chain = KeyChain {
        trust,
        handovers,
        in_force: 0,
        groups: BTreeMap::new(),
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
        let round = summary.group_round;
        chain
            .advance_to(round)
            .map_err(|why| bad(format!("group key of round {round}: {why}")))?;
        if let Some(group) = chain.groups.get(&round) {
            if group.key.to_bytes().as_slice() != summary.group_pubkey {
                return Err(bad(format!(
                    "the summary's group key is not round {round}'s handed-over key"
                )));
            }
        }
        let replaced = chain.groups.get(&round).map(|g| g.vouched_by);
        if certificate.signer_round != round && Some(certificate.signer_round) != replaced {
            return Err(bad(format!(
                "signed by {}, but round {round} is in force: only it or the group it replaced signs",
                signer_name(certificate.signer_round)
            )));
        }
        chain
            .check_signature(certificate)
            .map_err(|why| bad(format!("certificate signature: {why}")))?;
        verified.push(VerifiedEpoch {
            epoch: expected,
            signer_round: certificate.signer_round,
        });
    }
    Ok(verified)
}

/// How a signing group reads to a person: round 0 is the genesis signers.
pub fn signer_name(round: u64) -> String {
    match round {
        0 => "the genesis signers".into(),
        r => format!("round {r}'s group"),
    }
}

/// A group the light client trusts.
struct TrustedGroup {
    key: PublicKey,
    /// The round whose group signed its handover (0: the genesis signers).
    vouched_by: u64,
}

/// Group keys verified so far, from the genesis signers through the handovers.
struct KeyChain<'a> {
    trust: &'a Trust,
    handovers: &'a BTreeMap<u64, SignRequest>,
    /// The newest trusted round (0: the genesis signers).
    in_force: u64,
    groups: BTreeMap<u64, TrustedGroup>,
}

impl<'a> KeyChain<'a> {
    /// Whether `request` carries a valid signature by its signer.
    fn check_signature(&self, request: &SignRequest) -> Result<(), String> {
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
        let group = self
            .groups
            .get(&request.signer_round)
            .ok_or_else(|| format!("round {} is not trusted", request.signer_round))?;
        if group.key.verify(&request.digest, &signature) {
            Ok(())
        } else {
            Err(format!(
                "not signed by round {}'s group key",
                request.signer_round
            ))
        }
    }

    /// Makes round `round` the group in force: nothing to do when it is; refused when it
    /// is older; otherwise the handovers from the group in force up to `round` are each
    /// checked against the group before it, oldest first.
    fn advance_to(&mut self, round: u64) -> Result<(), String> {
        if round < self.in_force {
            return Err(format!(
                "round {round} was replaced by round {}",
                self.in_force
            ));
        }
        // Walk back from `round` to the group in force; each step is bounded by the
        // handovers given (the rounds strictly decrease).
        let mut path = Vec::new();
        let mut at = round;
        while at != self.in_force {
            let request = self.handover(at)?;
            let signer = request.signer_round;
            if signer >= at {
                return Err(format!(
                    "round {at} is vouched for by a later round {signer}"
                ));
            }
            if signer < self.in_force {
                return Err(format!(
                    "the handover of round {at} is signed by {}, not by {}, the group in force it would replace",
                    signer_name(signer),
                    signer_name(self.in_force)
                ));
            }
            path.push((at, request));
            at = signer;
        }
        for (at, request) in path.into_iter().rev() {
            self.check_signature(request)
                .map_err(|why| format!("handover of round {at}: {why}"))?;
            let handover = request.handover.as_ref().expect("checked by handover()");
            let key = PublicKey::from_bytes(&handover.group_pubkey)
                .ok_or_else(|| format!("round {at}'s group key does not decode"))?;
            self.groups.insert(
                at,
                TrustedGroup {
                    key,
                    vouched_by: request.signer_round,
                },
            );
            self.in_force = at;
        }
        Ok(())
    }

    /// Round `round`'s handover, well formed and hashing to its digest.
    fn handover(&self, round: u64) -> Result<&'a SignRequest, String> {
        let handovers: &'a BTreeMap<u64, SignRequest> = self.handovers;
        let request = handovers
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
        Ok(request)
    }
}
