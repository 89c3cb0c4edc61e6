//! Verified reads (`gonkad query ... --prove`): a value is fetched from the store with its
//! ics23 proof and checked against the app hash of a header that a CometBFT light client
//! (`tendermint-light-client-verifier`) verified from a header the user trusts, so a node
//! that lies about the value or about the header is caught.
//!
//! - Trust comes from `--trust-height` and `--trust-hash` (a header hash taken from a source
//!   other than the node being asked: your own node, a block explorer you trust, a friend),
//!   never from the node being checked. The trusted header is fetched and must hash to it.
//! - The value is read at height H = latest − 1 and proven against the app hash in header
//!   H + 1 (CometBFT puts the state after block H into header H + 1). Header H + 1 is
//!   verified by skipping verification from the trusted header (a third of the trusted
//!   validators' power must have signed it, and two thirds of its own), bisecting when the
//!   validator set changed too much for one step.
//! - The trusted header must be younger than `--trusting-period`, which must stay below the
//!   chain's unbonding time (validators that have unbonded could otherwise sign a fake
//!   history without losing stake).

use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use gonka_client::Client;
use tendermint::block::Height;
use tendermint::validator::Set as ValidatorSet;
use tendermint::Hash;
use tendermint_light_client_verifier::options::Options;
use tendermint_light_client_verifier::types::{LightBlock, TrustThreshold};
use tendermint_light_client_verifier::{ProdVerifier, Verdict, Verifier};
use tendermint_rpc::{Client as _, Paging};

/// How many headers the bisection may fetch before giving up.
const MAX_BISECTION_STEPS: usize = 64;

use gonka_store::PROOF_OP_TYPE;

/// `--prove` and the trust anchor it verifies from.
#[derive(clap::Args, Clone, Debug)]
pub struct ProveArgs {
    /// Verify the answer: fetch it with its ics23 proof and check it against the app hash of
    /// a header verified by a light client from the trusted header (--trust-height,
    /// --trust-hash).
    #[arg(long, requires_all = ["trust_height", "trust_hash"])]
    pub prove: bool,
    /// Height of a header you trust, learnt from a source other than --node.
    #[arg(long)]
    pub trust_height: Option<u64>,
    /// Hash (hex) of the header at --trust-height.
    #[arg(long)]
    pub trust_hash: Option<String>,
    /// How long a trusted header is trusted for, in seconds; keep it below the chain's
    /// unbonding time.
    #[arg(long, default_value_t = 14 * 24 * 3600)]
    pub trusting_period: u64,
}

/// A store value (or its absence) proven at a height.
#[derive(Debug)]
pub struct Proven {
    /// The height the value was read at (its block).
    pub height: u64,
    /// The value, `None` when the key is proven absent.
    pub value: Option<Vec<u8>>,
}

impl ProveArgs {
    fn anchor(&self) -> Result<(Height, Hash)> {
        let (Some(height), Some(hash)) = (self.trust_height, &self.trust_hash) else {
            bail!("--prove needs --trust-height and --trust-hash");
        };
        let height = Height::try_from(height).context("--trust-height")?;
        let hash = Hash::from_hex_upper(tendermint::hash::Algorithm::Sha256, &hash.to_uppercase())
            .context("--trust-hash must be the 64 hex digits of a header hash")?;
        Ok((height, hash))
    }
}

/// The light block at `height` as `client` serves it (header, commit, validators, next
/// validators), not yet verified.
async fn light_block(client: &Client, height: Height) -> Result<LightBlock> {
    let rpc = client.http();
    let signed_header = rpc
        .commit(height)
        .await
        .with_context(|| format!("fetching the header and commit of height {height}"))?
        .signed_header;
    let validators = rpc
        .validators(height, Paging::All)
        .await
        .with_context(|| format!("fetching the validators of height {height}"))?
        .validators;
    let next = rpc
        .validators(height.increment(), Paging::All)
        .await
        .with_context(|| format!("fetching the validators of height {}", height.increment()))?
        .validators;
    Ok(LightBlock::new(
        signed_header,
        ValidatorSet::without_proposer(validators),
        ValidatorSet::without_proposer(next),
        tendermint::node::Id::new([0; 20]),
    ))
}

/// Verifies the header at `target` from the trusted light block, bisecting as needed.
async fn verify_header(
    client: &Client,
    trusted: LightBlock,
    target: Height,
    options: &Options,
) -> Result<LightBlock> {
    let verifier = ProdVerifier::default();
    let now = tendermint::Time::now();
    let mut trusted = trusted;
    // Heights still to verify, the last one first to try.
    let mut pending = vec![target];
    let mut steps = 0;
    while let Some(&height) = pending.last() {
        steps += 1;
        if steps > MAX_BISECTION_STEPS {
            bail!("could not verify height {target} within {MAX_BISECTION_STEPS} headers");
        }
        let untrusted = light_block(client, height).await?;
        if untrusted.next_validators.hash() != untrusted.signed_header.header.next_validators_hash {
            bail!("the node's next validator set of height {height} does not match its header");
        }
        match verifier.verify_update_header(
            untrusted.as_untrusted_state(),
            trusted.as_trusted_state(),
            options,
            now,
        ) {
            Verdict::Success => {
                trusted = untrusted;
                pending.pop();
            }
            Verdict::NotEnoughTrust(_) => {
                let low = trusted.height().value();
                let pivot = low + (height.value() - low) / 2;
                if pivot == low {
                    bail!("height {height} cannot be verified from height {low}: not enough trusted power signed it");
                }
                pending.push(Height::try_from(pivot)?);
            }
            Verdict::Invalid(detail) => {
                bail!("the header of height {height} does not verify: {detail}")
            }
        }
    }
    Ok(trusted)
}

/// Reads `key` from the store through `client` and proves it (see the module doc).
pub async fn read(client: &Client, args: &ProveArgs, key: &[u8]) -> Result<Proven> {
    let (trust_height, trust_hash) = args.anchor()?;
    let options = Options {
        trust_threshold: TrustThreshold::ONE_THIRD,
        trusting_period: Duration::from_secs(args.trusting_period),
        clock_drift: Duration::from_secs(10),
    };
    let trusted = light_block(client, trust_height).await?;
    let header = &trusted.signed_header.header;
    if header.hash() != trust_hash {
        bail!(
            "the node's header at height {trust_height} has hash {}, not the trusted {trust_hash}: it is on another chain or lying",
            header.hash()
        );
    }
    if trusted.validators.hash() != header.validators_hash
        || trusted.next_validators.hash() != header.next_validators_hash
    {
        bail!("the node's validator sets at the trusted height do not match the trusted header");
    }

    let latest = client.status().await?.sync_info.latest_block_height.value();
    if latest <= trust_height.value() {
        bail!("the trusted height {trust_height} is the node's latest ({latest}) or beyond: wait for the next block");
    }
    // header_height > trust_height, so the value's header is always verified from trust.
    let value_height = latest - 1;
    let header_height = Height::try_from(latest)?;
    let verified = verify_header(client, trusted, header_height, &options).await?;
    let app_hash: [u8; 32] = verified
        .signed_header
        .header
        .app_hash
        .as_bytes()
        .try_into()
        .map_err(|_| anyhow!("the verified header's app hash is not 32 bytes"))?;

    let answer = client
        .http()
        .abci_query(
            Some("/store/key".into()),
            key.to_vec(),
            Some(Height::try_from(value_height)?),
            true,
        )
        .await
        .context("reading the value with its proof")?;
    if answer.code.is_err() {
        bail!("the node refused the proof query: {}", answer.log);
    }
    if answer.height.value() != value_height {
        bail!(
            "the node answered at height {}, not the asked {value_height}",
            answer.height
        );
    }
    let op = answer
        .proof
        .as_ref()
        .and_then(|p| p.ops.iter().find(|op| op.field_type == PROOF_OP_TYPE))
        .ok_or_else(|| anyhow!("the node sent no {PROOF_OP_TYPE} proof"))?;
    let proof = <gonka_store::ics23::CommitmentProof as prost::Message>::decode(op.data.as_slice())
        .context("the node's proof is not an ics23 commitment proof")?;
    let value = (!answer.value.is_empty()).then(|| answer.value.clone());
    let valid = match &value {
        Some(value) => gonka_store::verify_membership(&app_hash, key, value, &proof),
        None => gonka_store::verify_non_membership(&app_hash, key, &proof),
    };
    if !valid {
        bail!(
            "the node's value at height {value_height} does not match the app hash of the verified header {header_height}: the answer was tampered with"
        );
    }
    Ok(Proven {
        height: value_height,
        value,
    })
}
