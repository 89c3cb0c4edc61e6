//! Committing served records as one batch (x/settlement): the transfer agent builds the
//! batch's tree and lines, asks every host's ML node to co-sign it (`POST /gonka/v1/cosign`
//! with that host's leaves and their proofs) and aggregates the signatures. A host that
//! refuses or does not answer within the limits is left out: its records are dropped from
//! this batch (they stay pending for a later one), the tree is rebuilt and every remaining
//! host is asked again, since the root changed. At most [`MAX_ROUNDS`] rounds. Each answer is
//! checked against the host's registered BLS key before it joins the aggregate, so one host
//! signing garbage (or with a key the chain does not know) costs the batch that host, not
//! the whole batch's refusal on chain.

use std::collections::BTreeMap;

use futures_util::future::join_all;
use gonka_client::bls::crypto::{PublicKey, Signature};
use gonka_client::http::{authority, request, Limits};
use gonka_client::settlement::{Batch, Served};
use gonka_proto::settlement::{CosignRequest, CosignResponse, MsgSettleBatch};
use gonka_proto::signing::batch_sign_bytes;
use prost::Message;

/// Rounds of asking before the transfer agent gives up on a batch.
pub const MAX_ROUNDS: usize = 3;

/// A batch every remaining host co-signed.
#[derive(Debug, Clone)]
pub struct Committed {
    /// The batch (its leaves and tree, to serve proofs from).
    pub batch: Batch,
    /// The message with the aggregate host signature, ready to submit.
    pub msg: MsgSettleBatch,
    /// Hosts left out, with why; their records are not in the batch.
    pub left_out: BTreeMap<String, String>,
}

/// What the transfer agent knows of a host: the URL of the ML node that served its records
/// and the BLS key registered on chain for it.
#[derive(Debug, Clone)]
pub struct HostEndpoint {
    /// `http://host:port` of its ML node.
    pub node_url: String,
    /// Its registered BLS key.
    pub bls_key: PublicKey,
}

/// Asks the ML node of `host` at `endpoint` to co-sign `batch` on `chain_id`, and checks the
/// signature with the host's key.
async fn ask(
    batch: &Batch,
    chain_id: &str,
    host: &str,
    endpoint: &HostEndpoint,
    limits: Limits,
) -> Result<Signature, String> {
    let node_url = endpoint.node_url.as_str();
    let leaves = (0..batch.leaves.len() as u64)
        .filter(|&i| batch.leaves[i as usize].executor_host == host)
        .filter_map(|i| batch.leaf_proof(i))
        .collect();
    let body = CosignRequest {
        batch: Some(batch.msg.clone()),
        leaves,
    }
    .encode_to_vec();
    let authority = authority(node_url)?;
    let response = request(&authority, "POST", "/gonka/v1/cosign", &body, limits)
        .await
        .map_err(|e| format!("{node_url}: {e}"))?;
    let status = response.status;
    let bytes = response
        .read_body()
        .await
        .map_err(|e| format!("{node_url}: {e}"))?;
    if status != 200 {
        return Err(format!(
            "{node_url} refused ({status}): {}",
            String::from_utf8_lossy(&bytes)
        ));
    }
    let answer = CosignResponse::decode(bytes.as_slice())
        .map_err(|e| format!("{node_url}: not a CosignResponse: {e}"))?;
    let signature = Signature::from_bytes(&answer.signature)
        .ok_or_else(|| format!("{node_url}: the signature is not a G2 point"))?;
    if !endpoint
        .bls_key
        .verify(&batch_sign_bytes(chain_id, &batch.msg), &signature)
    {
        return Err(format!(
            "{node_url} signed with a key other than {host}'s registered BLS key"
        ));
    }
    Ok(signature)
}

/// Builds batch `number` of `transfer_agent` on `chain_id` from `served` and collects every
/// host's co-signature from its node (`hosts`: what is known of each). `None` when no host
/// co-signed (every record stays pending).
pub async fn commit(
    transfer_agent: &str,
    chain_id: &str,
    number: u64,
    mut served: Vec<Served>,
    hosts: &BTreeMap<String, HostEndpoint>,
    limits: Limits,
) -> anyhow::Result<Option<Committed>> {
    let mut left_out = BTreeMap::new();
    for _ in 0..MAX_ROUNDS {
        // Records of hosts without a known node or key cannot be co-signed.
        served.retain(|s| {
            let known = hosts.contains_key(&s.host);
            if !known {
                left_out.entry(s.host.clone()).or_insert_with(|| {
                    "no ML node or registered BLS key of this host is known".to_string()
                });
            }
            known && !left_out.contains_key(&s.host)
        });
        if served.is_empty() {
            return Ok(None);
        }
        let batch = Batch::build(transfer_agent, number, served.clone())?;
        let signers: Vec<String> = batch.hosts().map(str::to_string).collect();
        let answers = join_all(
            signers
                .iter()
                .map(|host| ask(&batch, chain_id, host, &hosts[host], limits)),
        )
        .await;
        let mut signatures = Vec::with_capacity(signers.len());
        let mut refused = false;
        for (host, answer) in signers.iter().zip(answers) {
            match answer {
                Ok(signature) => signatures.push(signature),
                Err(reason) => {
                    tracing::warn!(%host, %reason, "host did not co-sign; its records wait for a later batch");
                    left_out.insert(host.clone(), reason);
                    refused = true;
                }
            }
        }
        if !refused {
            let msg = batch.signed(&signatures);
            return Ok(Some(Committed {
                batch,
                msg,
                left_out,
            }));
        }
    }
    Ok(None)
}
