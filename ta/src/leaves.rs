//! `GET /v1/batches/{number}/leaves/{index}`: leaf `index` of this TA's committed batch
//! `number` with its Merkle proof (protobuf `gonka.settlement.v1.LeafProof`), for validators,
//! requesters and anyone checking a batch — and what the TA sends on chain to answer a leaf
//! demand. A leaf holds the signed record with hashes of prompt and answer, never their text.
//! `GET /v1/leaves/{inference_id}` answers the same for one request (protobuf
//! `gonka.settlement.v1.ServedLeaf`, with the number of the batch holding it): what its
//! requester needs to dispute an answer nobody sampled (`MsgDisputeLeaf`).
//!
//! Anyone may ask, so the work is bounded: a batch's tree is rebuilt from its stored leaves
//! at most once while it stays among the [`CACHED_BATCHES`] most recently asked, and one
//! rebuild runs at a time (off the async threads).

use std::collections::VecDeque;
use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use gonka_client::openai::ApiError;
use gonka_client::settlement::Batch;
use gonka_proto::settlement::{LeafProof, ServedLeaf};
use prost::Message;

use crate::settle::Outbox;

/// Batches whose trees are kept built.
pub const CACHED_BATCHES: usize = 8;

/// Serves the leaves of the committed batches of one transfer agent.
pub struct Leaves {
    outbox: Arc<Outbox>,
    transfer_agent: String,
    /// Recently built batches, most recent last; the lock also lets one rebuild run at a time.
    built: tokio::sync::Mutex<VecDeque<(u64, Arc<Batch>)>>,
}

impl std::fmt::Debug for Leaves {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Leaves")
            .field("transfer_agent", &self.transfer_agent)
            .finish_non_exhaustive()
    }
}

impl Leaves {
    /// The leaves of `transfer_agent`'s batches kept in `outbox`.
    pub fn new(outbox: Arc<Outbox>, transfer_agent: &str) -> Arc<Leaves> {
        Arc::new(Leaves {
            outbox,
            transfer_agent: transfer_agent.to_string(),
            built: tokio::sync::Mutex::new(VecDeque::new()),
        })
    }

    /// Batch `number` with its tree, if kept.
    async fn batch(&self, number: u64) -> anyhow::Result<Option<Arc<Batch>>> {
        let mut built = self.built.lock().await;
        if let Some((_, batch)) = built.iter().find(|(n, _)| *n == number) {
            return Ok(Some(batch.clone()));
        }
        let outbox = self.outbox.clone();
        let agent = self.transfer_agent.clone();
        let batch = tokio::task::spawn_blocking(move || -> anyhow::Result<Option<Batch>> {
            let Some(stored) = outbox.batch(number)? else {
                return Ok(None);
            };
            Ok(Some(Batch::from_leaves(&agent, number, stored.leaves)?))
        })
        .await??;
        let Some(batch) = batch.map(Arc::new) else {
            return Ok(None);
        };
        if built.len() == CACHED_BATCHES {
            built.pop_front();
        }
        built.push_back((number, batch.clone()));
        Ok(Some(batch))
    }

    /// Leaf `index` of batch `number` with its proof; `None` when the batch is not kept or
    /// has no such leaf.
    pub async fn proof(&self, number: u64, index: u64) -> anyhow::Result<Option<LeafProof>> {
        Ok(self
            .batch(number)
            .await?
            .and_then(|batch| batch.leaf_proof(index)))
    }

    /// The committed leaf of request `inference_id` with its proof and batch number; `None`
    /// while the request waits for a batch, or once its batch is pruned.
    pub async fn served(&self, inference_id: &str) -> anyhow::Result<Option<ServedLeaf>> {
        let outbox = self.outbox.clone();
        let id = inference_id.to_string();
        let Some((number, index)) =
            tokio::task::spawn_blocking(move || outbox.leaf_at(&id)).await??
        else {
            return Ok(None);
        };
        Ok(self.proof(number, index).await?.map(|proof| ServedLeaf {
            batch_number: number,
            proof: Some(proof),
        }))
    }
}

/// The routes.
pub fn router(leaves: Arc<Leaves>) -> axum::Router {
    axum::Router::new()
        .route("/v1/batches/{number}/leaves/{index}", get(fetch))
        .route("/v1/leaves/{inference_id}", get(fetch_served))
        .with_state(leaves)
}

fn protobuf(message: &impl Message) -> Response {
    (
        [(header::CONTENT_TYPE, "application/x-protobuf")],
        message.encode_to_vec(),
    )
        .into_response()
}

async fn fetch_served(
    State(leaves): State<Arc<Leaves>>,
    Path(inference_id): Path<String>,
) -> Response {
    if !gonka_proto::signing::is_inference_id(&inference_id) {
        return ApiError::invalid_value(
            "invalid_inference_id",
            "an inference id is 64 lowercase hex digits (the `inference_id` a chat answer names)"
                .into(),
        )
        .into_response();
    }
    match leaves.served(&inference_id).await {
        Ok(Some(served)) => protobuf(&served),
        Ok(None) => ApiError::unavailable_here(
            "leaf_not_found",
            format!(
                "this transfer agent holds no committed leaf of request {inference_id}: it is not one of its requests, is still waiting for its batch (retry in a few blocks), or its batch was pruned after two challenge windows"
            ),
        )
        .into_response(),
        Err(e) => ApiError::internal(format!("finding the leaf of {inference_id}: {e:#}"))
            .into_response(),
    }
}

async fn fetch(
    State(leaves): State<Arc<Leaves>>,
    Path((number, index)): Path<(u64, u64)>,
) -> Response {
    match leaves.proof(number, index).await {
        Ok(Some(proof)) => protobuf(&proof),
        Ok(None) => ApiError::unavailable_here(
            "leaf_not_found",
            format!(
                "this transfer agent keeps no leaf {index} of its batch {number} (batches are kept for two challenge windows after their block)"
            ),
        )
        .into_response(),
        Err(e) => ApiError::internal(format!("reading batch {number}: {e:#}")).into_response(),
    }
}
