//! The validator's part in key generation (x/bls): it keeps a BLS key, registers it, and in
//! every round it is a member of it deals, checks the shares dealt to it (complaining about
//! bad ones) and answers complaints about its own dealing.
//!
//! Everything secret lives in one directory (`--bls-dir`, mode 0600 files written before
//! they are used, so a restart picks up where the process stopped):
//! - `bls.key`: the BLS secret key (the chain encrypts the members' shares to its public key;
//!   the node, `gonkad start --bls-dir`, reads it to derive its shares of each group key
//!   from the chain's dealings and sign the randomness beacon);
//! - `round-<id>.secret`: the seeds of this validator's polynomial and ephemeral key in round
//!   `id`, written before its dealing is sent (a restarted dealer sends the same dealing, and
//!   can still answer complaints).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use gonka_bls_crypto::dkg::Ephemeral;
use gonka_bls_crypto::member::dealt_to;
use gonka_bls_crypto::threshold::Polynomial;
use gonka_bls_crypto::{PublicKey, SecretKey};
use gonka_client::bls::{
    load_or_create_key, load_or_create_secret, msg_dkg_complain, msg_dkg_deal, msg_dkg_reveal,
    msg_register_bls_key,
};
use gonka_client::keys::Key;
use gonka_client::rpc::QueryError;
use gonka_client::{Chain, TxOutcome};
use gonka_proto::bls as pb;
use gonka_proto::query::bls as q;
use k256::elliptic_curve::rand_core::{OsRng, RngCore};
use std::time::Duration;

/// Codespace and code of "no such round" and "no dealing" answers.
const BLS: &str = "bls";
const UNKNOWN_ROUND: u32 = 16;
const NO_DEALING: u32 = 12;

/// A validator's key generation state: its BLS key, its secrets directory and what it has
/// already done this run (the chain refuses repeats anyway).
pub struct DkgParticipant {
    dir: PathBuf,
    key: SecretKey,
    registered: bool,
    done: BTreeSet<(u64, &'static str, String)>,
}

impl std::fmt::Debug for DkgParticipant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DkgParticipant")
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

impl DkgParticipant {
    /// Opens (or creates) the secrets directory `dir` and its BLS key (derived from the
    /// operator `account` the first time).
    pub fn open(dir: &Path, account: &Key) -> Result<DkgParticipant> {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        Ok(DkgParticipant {
            dir: dir.to_path_buf(),
            key: load_or_create_key(&dir.join("bls.key"), account)?,
            registered: false,
            done: BTreeSet::new(),
        })
    }

    /// One look at the chain: registers the key if the chain does not have it, then does
    /// whatever the latest round's phase asks of this validator.
    pub async fn step(&mut self, chain: &Chain, timeout: Duration) -> Result<()> {
        if !self.registered {
            self.register(chain, timeout).await?;
        }
        let Some(round) = latest_round(chain).await? else {
            return Ok(());
        };
        let Some(me) = member(&round, chain.address()) else {
            return Ok(());
        };
        if round.status != "running" {
            return Ok(());
        }
        let next = chain
            .client()
            .status()
            .await?
            .sync_info
            .latest_block_height
            .value()
            + 1;
        if next <= round.deal_deadline {
            self.deal(chain, &round, timeout).await
        } else if next <= round.complaint_deadline {
            self.check_shares(chain, &round, &me, timeout).await
        } else if next <= round.reveal_deadline {
            self.answer_complaints(chain, &round, timeout).await
        } else {
            Ok(())
        }
    }

    async fn register(&mut self, chain: &Chain, timeout: Duration) -> Result<()> {
        let pubkey = self.key.public_key().to_bytes().to_vec();
        let current = chain
            .client()
            .query::<q::Key>(&pb::QueryKeyRequest {
                address: chain.address().into(),
            })
            .await;
        let registered = match current {
            Ok(r) => r.key.is_some_and(|k| k.pubkey == pubkey),
            Err(e) if is(&e, UNKNOWN_KEY) => false,
            Err(e) => return Err(e),
        };
        if !registered {
            let msg = msg_register_bls_key(chain.address(), chain.chain_id(), &self.key);
            submit(chain, msg, timeout).await?;
            tracing::info!(pubkey = %hex::encode(&pubkey), "registered the BLS key");
        }
        self.registered = true;
        Ok(())
    }

    async fn deal(&mut self, chain: &Chain, round: &pb::DkgRound, timeout: Duration) -> Result<()> {
        let action = (round.id, "deal", String::new());
        if self.done.contains(&action) || dealing(chain, round.id, chain.address()).await?.is_some()
        {
            self.done.insert(action);
            return Ok(());
        }
        let (poly, ephemeral) = self.round_secrets(round)?;
        let msg = msg_dkg_deal(chain.chain_id(), round, chain.address(), &poly, &ephemeral)
            .ok_or_else(|| anyhow!("round {}: a member's BLS key does not decode", round.id))?;
        submit(chain, msg, timeout).await?;
        tracing::info!(round = round.id, "dealt");
        self.done.insert(action);
        Ok(())
    }

    async fn check_shares(
        &mut self,
        chain: &Chain,
        round: &pb::DkgRound,
        me: &pb::DkgMember,
        timeout: Duration,
    ) -> Result<()> {
        for dealer in round.members.iter().filter(|m| m.address != me.address) {
            let action = (round.id, "complain", dealer.address.clone());
            if self.done.contains(&action) {
                continue;
            }
            let Some(dealing) = dealing(chain, round.id, &dealer.address).await? else {
                self.done.insert(action);
                continue;
            };
            if dealt_to(&self.key, chain.chain_id(), &dealing, me).is_none() {
                tracing::warn!(round = round.id, dealer = %dealer.address, "a share dealt to this validator does not verify; complaining");
                let msg = msg_dkg_complain(round.id, chain.address(), &dealer.address);
                submit(chain, msg, timeout).await?;
            }
            self.done.insert(action);
        }
        Ok(())
    }

    async fn answer_complaints(
        &mut self,
        chain: &Chain,
        round: &pb::DkgRound,
        timeout: Duration,
    ) -> Result<()> {
        let complaints = chain
            .client()
            .query::<q::Complaints>(&pb::QueryComplaintsRequest {
                round: round.id,
                dealer: chain.address().into(),
            })
            .await?
            .complaints;
        for complaint in complaints.iter().filter(|c| c.outcome.is_empty()) {
            let action = (round.id, "reveal", complaint.complainer.clone());
            if self.done.contains(&action) {
                continue;
            }
            let key = round
                .members
                .iter()
                .find(|m| m.address == complaint.complainer)
                .and_then(|m| PublicKey::from_bytes(&m.pubkey))
                .ok_or_else(|| anyhow!("a complaint from a non-member"))?;
            let (_, ephemeral) = self.round_secrets(round)?;
            let msg = msg_dkg_reveal(
                round.id,
                chain.address(),
                &complaint.complainer,
                &key,
                &ephemeral,
            );
            submit(chain, msg, timeout).await?;
            tracing::info!(round = round.id, complainer = %complaint.complainer, "answered a complaint");
            self.done.insert(action);
        }
        Ok(())
    }

    /// This validator's polynomial and ephemeral key of `round`, from its secrets file
    /// (drawn and written durably the first time).
    fn round_secrets(&self, round: &pb::DkgRound) -> Result<(Polynomial, Ephemeral)> {
        let path = self.dir.join(format!("round-{}.secret", round.id));
        let seeds: [u8; 64] = load_or_create_secret(&path, || {
            let mut seeds = [0u8; 64];
            OsRng.fill_bytes(&mut seeds);
            seeds
        })?;
        let ephemeral_seed: [u8; 32] = seeds[32..].try_into().expect("32 bytes");
        Ok((
            Polynomial::from_seed(round.threshold as usize, &seeds[..32]),
            Ephemeral::from_seed(&ephemeral_seed),
        ))
    }
}

/// `address`'s entry among `round`'s members.
fn member(round: &pb::DkgRound, address: &str) -> Option<pb::DkgMember> {
    round.members.iter().find(|m| m.address == address).cloned()
}

/// Codespace code of "no BLS key registered".
const UNKNOWN_KEY: u32 = 6;

fn is(e: &anyhow::Error, code: u32) -> bool {
    e.downcast_ref::<QueryError>()
        .is_some_and(|q| q.codespace == BLS && q.code == code)
}

async fn latest_round(chain: &Chain) -> Result<Option<pb::DkgRound>> {
    match chain
        .client()
        .query::<q::Dkg>(&pb::QueryDkgRequest { round: 0 })
        .await
    {
        Ok(r) => Ok(r.round),
        Err(e) if is(&e, UNKNOWN_ROUND) => Ok(None),
        Err(e) => Err(e),
    }
}

async fn dealing(chain: &Chain, round: u64, dealer: &str) -> Result<Option<pb::Dealing>> {
    match chain
        .client()
        .query::<q::Dealing>(&pb::QueryDealingRequest {
            round,
            dealer: dealer.into(),
        })
        .await
    {
        Ok(r) => Ok(r.dealing),
        Err(e) if is(&e, NO_DEALING) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Submits `msg`; a refusal is an error like an unreachable chain (the next poll looks at
/// the chain again and decides afresh).
async fn submit(chain: &Chain, msg: gonka_client::Any, timeout: Duration) -> Result<()> {
    match chain.submit_for_outcome(vec![msg], timeout).await? {
        TxOutcome::Executed(_) => Ok(()),
        TxOutcome::Refused(reason) => bail!("the chain refused it: {reason}"),
    }
}
