//! Committing served records as one batch (x/settlement): the transfer agent builds the
//! batch's tree and lines, asks every host's ML node to co-sign it (`POST /gonka/v1/cosign`
//! with that host's leaves and their proofs) and aggregates the signatures. A host that
//! refuses or does not answer within the limits is left out: its records are dropped from
//! this batch (they stay pending for a later one), the tree is rebuilt and every remaining
//! host is asked again, since the root changed. At most [`MAX_ROUNDS`] rounds.

use std::collections::BTreeMap;

use futures_util::future::join_all;
use gonka_client::bls::crypto::Signature;
use gonka_client::http::{authority, request, Limits};
use gonka_client::settlement::{Batch, Served};
use gonka_proto::settlement::{CosignRequest, CosignResponse, MsgSettleBatch};
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

/// Asks `node_url`, the ML node of `host`, to co-sign `batch`.
async fn ask(
    batch: &Batch,
    host: &str,
    node_url: &str,
    limits: Limits,
) -> Result<Signature, String> {
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
    Signature::from_bytes(&answer.signature)
        .ok_or_else(|| format!("{node_url}: the signature is not a G2 point"))
}

/// Builds batch `number` of `transfer_agent` from `served` and collects every host's
/// co-signature from its node (`node_urls`: host → its ML node's URL). `None` when no host
/// co-signed (every record stays pending). The signatures are not checked here: the chain
/// checks the aggregate, and a host that signs garbage only makes the batch fail, which the
/// caller sees when it submits.
pub async fn commit(
    transfer_agent: &str,
    number: u64,
    mut served: Vec<Served>,
    node_urls: &BTreeMap<String, String>,
    limits: Limits,
) -> anyhow::Result<Option<Committed>> {
    let mut left_out = BTreeMap::new();
    for _ in 0..MAX_ROUNDS {
        // Records of hosts without a known node cannot be co-signed.
        served.retain(|s| {
            let known = node_urls.contains_key(&s.host);
            if !known {
                left_out
                    .entry(s.host.clone())
                    .or_insert_with(|| "no ML node of this host is known".to_string());
            }
            known && !left_out.contains_key(&s.host)
        });
        if served.is_empty() {
            return Ok(None);
        }
        let batch = Batch::build(transfer_agent, number, served.clone())?;
        let hosts: Vec<String> = batch.hosts().map(str::to_string).collect();
        let answers = join_all(
            hosts
                .iter()
                .map(|host| ask(&batch, host, &node_urls[host], limits)),
        )
        .await;
        let mut signatures = Vec::with_capacity(hosts.len());
        let mut refused = false;
        for (host, answer) in hosts.iter().zip(answers) {
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
