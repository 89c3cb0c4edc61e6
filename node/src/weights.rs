//! Trained weights for the built-in backend. A model trained on chain (x/pol) is served from
//! the weights file its trainers publish (`GET /pol/v1/jobs/{job}/model` on a worker's
//! endpoint), checked against the SHA-256 the chain's model table holds before the node
//! answers a single request: every ML node and validator serving the model then runs the same
//! integer weights, so its inference is validated `exact` like the reference model's.

use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use gonka_client::http::{self as upstream, Limits};
use gonka_client::Client;
use gonka_model::weights::{Weights, WEIGHTS_BYTES};
use gonka_proto::inference::QueryModelsRequest;
use gonka_proto::query as q;
use sha2::{Digest, Sha256};

/// Limits of the weights download: the architecture's file is [`WEIGHTS_BYTES`] (about
/// 0.4 MB); anything longer is refused while it is read.
pub const FETCH_LIMITS: Limits = Limits {
    connect: Duration::from_secs(5),
    first_byte: Duration::from_secs(10),
    idle: Duration::from_secs(10),
    total: Duration::from_secs(60),
    max_body: WEIGHTS_BYTES,
};

/// The weights in `bytes` if they hash to `sha256` and are a valid weights file.
pub fn check(bytes: &[u8], sha256: &[u8; 32]) -> Result<Weights> {
    let found: [u8; 32] = Sha256::digest(bytes).into();
    if &found != sha256 {
        bail!(
            "the weights have SHA-256 {}, not the expected {}",
            hex::encode(found),
            hex::encode(sha256)
        );
    }
    Weights::from_bytes(bytes).map_err(|e| anyhow!("not a weights file: {e}"))
}

/// Downloads the weights at `url` and [`check`]s them.
pub async fn load(url: &str, sha256: &[u8; 32]) -> Result<Weights> {
    let bytes = upstream::get_bytes(url, FETCH_LIMITS)
        .await
        .context("downloading the weights")?;
    check(&bytes, sha256).with_context(|| format!("weights from {url}"))
}

/// The SHA-256 of `model_id`'s weights in the chain's model table: `None` for a model priced
/// in genesis (it names no weights), an error when the table does not list the model.
pub async fn chain_sha256(client: &Client, model_id: &str) -> Result<Option<[u8; 32]>> {
    let models = client
        .query_all::<q::inference::Models>(QueryModelsRequest::default())
        .await
        .context("reading the chain's model table")?;
    let model = models
        .into_iter()
        .find(|m| m.id == model_id)
        .ok_or_else(|| anyhow!("the chain's model table does not list {model_id}; see `gonkad query inference models`"))?;
    if model.weights_sha256.is_empty() {
        return Ok(None);
    }
    model
        .weights_sha256
        .try_into()
        .map(Some)
        .map_err(|_| anyhow!("the chain's weights hash of {model_id} is not 32 bytes"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_weights_of_the_expected_hash_are_accepted() {
        let bytes = Weights::generate(7).to_bytes();
        let sha256: [u8; 32] = Sha256::digest(&bytes).into();
        let weights = check(&bytes, &sha256).unwrap();
        assert_eq!(weights.to_bytes(), bytes);
        let other = Weights::generate(8).to_bytes();
        let err = check(&other, &sha256).unwrap_err().to_string();
        assert!(err.contains("not the expected"), "{err}");
        let garbage = b"not weights";
        let garbage_sha: [u8; 32] = Sha256::digest(garbage).into();
        let err = check(garbage, &garbage_sha).unwrap_err().to_string();
        assert!(err.contains("not a weights file"), "{err}");
    }
}
