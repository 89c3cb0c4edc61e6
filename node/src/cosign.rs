//! `POST /gonka/v1/cosign`: the host's co-signature of a transfer agent's committed batch.
//!
//! The transfer agent sends the batch (without its signature) and every leaf of this node's
//! host with its proof, as a protobuf `gonka.settlement.v1.CosignRequest`. The node signs with
//! its host's BLS key only when [`check_host_leaves`] accepts: the leaves are exactly the
//! host's chain in the batch, each on the committed tree, each carrying a receipt this node
//! signed, each paid its tokens at the chain's price, adding up to the host's line — and
//! when none of them breaks a rule of its own (x/settlement's `leaf_fault`: the request
//! signed by its requester for this transfer agent, at most its signed price and tokens,
//! within `max_record_age_secs` less [`RECORD_AGE_MARGIN_SECS`] of now). So a host never
//! vouches for work it did not do, for less than its price, for a wrong total or for a
//! request its requester did not sign, and a challenge can never slash it for a batch it
//! signed. Anyone may ask: an answer costs a few hashes and a signature check per leaf and
//! one BLS signature, and the body is bounded like any other request.
//!
//! A host with several ML nodes needs one of them to see all its receipts; this node accepts
//! only its own, so the transfer agent takes each host's records from one of its nodes per
//! batch.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::State;
use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use gonka_client::bls::crypto::SecretKey;
use gonka_client::openai::ApiError;
use gonka_client::server::read_body;
use gonka_client::settlement::{check_host_leaves, cosign, ModelTerms, RECORD_AGE_MARGIN_SECS};
use gonka_client::unix_now;
use gonka_proto::inference::WorkRecord;
use gonka_proto::settlement::{CosignRequest, CosignResponse};
use gonka_proto::signing::ReceiptTerms;
use gonka_settlement::challenge::leaf_fault;
use k256::ecdsa::signature::Verifier;
use k256::ecdsa::{Signature, VerifyingKey};
use prost::Message;

use crate::Node;

/// Content type of the co-sign request and answer.
pub const PROTOBUF: &str = "application/x-protobuf";

/// What a node needs to co-sign its host's batches.
#[derive(Clone)]
pub struct Cosigner {
    /// The host's BLS key (registered on chain for the host's account).
    pub bls: SecretKey,
    /// The chain the batches settle on.
    pub chain_id: String,
    /// The chain's price (ngnk) and work per token of each model the node serves.
    pub models: BTreeMap<String, ModelTerms>,
    /// The chain's `max_record_age_secs` (x/settlement): older leaves are refused.
    pub max_record_age_secs: u64,
}

impl std::fmt::Debug for Cosigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cosigner")
            .field("chain_id", &self.chain_id)
            .field("models", &self.models)
            .finish_non_exhaustive()
    }
}

/// Fills `slot` with the host's co-signer once the chain answers its id and the price of each
/// of `served` models (retrying every few seconds until it does).
pub async fn prepare(
    client: gonka_client::Client,
    bls: SecretKey,
    served: Vec<String>,
    slot: Arc<std::sync::OnceLock<Cosigner>>,
) {
    use gonka_proto::query as q;
    loop {
        let answer = async {
            let chain_id = client.chain_id().await?;
            let models = client
                .query::<q::inference::Models>(&Default::default())
                .await?
                .models;
            let mut terms = BTreeMap::new();
            for model in &served {
                let found = models
                    .iter()
                    .find(|m| &m.id == model)
                    .and_then(|m| {
                        Some(ModelTerms {
                            price_per_token: gonka_proto::batch::parse_decimal(&m.price_per_token)?,
                            work_per_token: m.work_per_token,
                        })
                    })
                    .ok_or_else(|| anyhow::anyhow!("model {model} is not priced on chain"))?;
                terms.insert(model.clone(), found);
            }
            let age = client
                .query::<q::settlement::Params>(&Default::default())
                .await?
                .params
                .ok_or_else(|| anyhow::anyhow!("the chain has no settlement parameters"))?
                .max_record_age_secs;
            anyhow::Ok((chain_id, terms, age))
        };
        match answer.await {
            Ok((chain_id, models, max_record_age_secs)) => {
                tracing::info!(?models, "co-signing batches for the host");
                let _ = slot.set(Cosigner {
                    bls,
                    chain_id,
                    models,
                    max_record_age_secs,
                });
                return;
            }
            Err(error) => {
                tracing::warn!(%error, "cannot prepare batch co-signing yet; retrying");
                tokio::time::sleep(std::time::Duration::from_secs(3)).await;
            }
        }
    }
}

/// Whether `record` carries a receipt `key` signed as node `node_id` of `host`.
pub fn own_receipt(key: &VerifyingKey, node_id: &str, host: &str, record: &WorkRecord) -> bool {
    let (Ok(request_hash), Ok(output_commitment), Ok(signature)) = (
        <[u8; 32]>::try_from(record.request_hash.as_slice()),
        <[u8; 32]>::try_from(record.output_commitment.as_slice()),
        Signature::from_slice(&record.executor_signature),
    ) else {
        return false;
    };
    let terms = ReceiptTerms {
        request_hash,
        output_commitment,
        prompt_tokens: record.prompt_tokens,
        completion_tokens: record.completion_tokens,
        node_id: node_id.to_string(),
        host: host.to_string(),
    };
    record.executor_node == node_id && key.verify(&terms.sign_bytes(), &signature).is_ok()
}

/// The handler of `POST /gonka/v1/cosign`.
pub(crate) async fn handle(State(node): State<Arc<Node>>, body: Body) -> Response {
    match answer(&node, body).await {
        Ok(response) => response,
        Err(error) => error.into_response(),
    }
}

async fn answer(node: &Node, body: Body) -> Result<Response, ApiError> {
    let config = &node.config;
    let (Some(cosigner), Some(key)) = (config.cosigner.get(), &config.response_key) else {
        return Err(ApiError::unavailable_here(
            "cosign_disabled",
            "this ML node does not co-sign batches (yet): it runs without a chain (--chain-rpc, --mnemonic-file) or has not reached it".into(),
        ));
    };
    let bytes = read_body(
        body,
        config.max_cosign_body_bytes,
        config.server.body_timeout,
    )
    .await?;
    let request = CosignRequest::decode(bytes.as_ref()).map_err(|e| {
        ApiError::invalid_json(format!(
            "expected a protobuf gonka.settlement.v1.CosignRequest: {e}"
        ))
    })?;
    let batch = request.batch.ok_or_else(|| {
        ApiError::invalid_value("missing_batch", "the request carries no batch".into())
    })?;
    let verifying = *key.verifying_key();
    let (node_id, host) = (&config.node_id, &config.host);
    check_host_leaves(
        &batch,
        host,
        &request.leaves,
        |record| own_receipt(&verifying, node_id, host, record),
        |model| cosigner.models.get(model).copied(),
    )
    .map_err(|e| ApiError::invalid_value("batch_refused", format!("{e:#}")))?;
    // A leaf that breaks a rule of its own would let anyone void the batch and slash this
    // host, whose receipt it carries.
    let age = cosigner
        .max_record_age_secs
        .saturating_sub(RECORD_AGE_MARGIN_SECS);
    let now = i64::try_from(unix_now()).unwrap_or(i64::MAX);
    for proof in &request.leaves {
        let leaf = proof.leaf.as_ref().expect("checked by check_host_leaves");
        if let Some(fault) = leaf_fault(&cosigner.chain_id, &batch.transfer_agent, now, age, leaf) {
            return Err(ApiError::invalid_value(
                "batch_refused",
                format!("leaf {}: {fault}", proof.index),
            ));
        }
    }
    let signature = cosign(&cosigner.bls, &cosigner.chain_id, &batch);
    tracing::info!(
        transfer_agent = %batch.transfer_agent,
        number = batch.number,
        leaves = request.leaves.len(),
        "co-signed a batch"
    );
    let body = CosignResponse {
        signature: signature.to_bytes().to_vec(),
    }
    .encode_to_vec();
    Ok((
        [(header::CONTENT_TYPE, HeaderValue::from_static(PROTOBUF))],
        body,
    )
        .into_response())
}
