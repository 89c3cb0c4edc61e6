//! The trainer's HTTP server: round blobs for peers and verifiers,
//! `GET /pol/v1/jobs/{job}/rounds/{round}/{blob}` with `blob` one of `start-weights`,
//! `end-weights`, `pseudo-gradient`, `optimizer-state` (canonical `format` bytes,
//! `application/octet-stream`). Unknown routes, blobs and rounds get a 404 with an
//! OpenAI-style JSON error. Reads only: nothing a stranger sends changes the trainer.

use axum::extract::{Path, State};
use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use gonka_client::openai::ApiError;

use super::store::{Blob, Store};

/// The blob route.
pub const BLOB_ROUTE: &str = "/pol/v1/jobs/{job}/rounds/{round}/{blob}";

/// The path of a blob on a worker's endpoint.
pub fn blob_path(job: u64, round: u64, blob: Blob) -> String {
    format!("/pol/v1/jobs/{job}/rounds/{round}/{}", blob.name())
}

/// The trainer's routes over `store`.
pub fn router(store: Store) -> Router {
    Router::new()
        .route(BLOB_ROUTE, get(blob))
        .fallback(|uri: axum::http::Uri| async move {
            ApiError::unavailable_here(
                "not_found",
                format!("no route for `{uri}`; expected GET {BLOB_ROUTE}"),
            )
        })
        .with_state(store)
}

async fn blob(
    State(store): State<Store>,
    Path((job, round, name)): Path<(u64, u64, String)>,
) -> Response {
    let Some(kind) = Blob::served(&name) else {
        let names: Vec<&str> = Blob::SERVED.iter().map(|b| b.name()).collect();
        return ApiError::unavailable_here(
            "unknown_blob",
            format!("no blob {name:?}; expected one of {}", names.join(", ")),
        )
        .into_response();
    };
    match tokio::task::spawn_blocking(move || store.get(job, round, kind)).await {
        Ok(Ok(Some(bytes))) => {
            ([(CONTENT_TYPE, "application/octet-stream")], bytes).into_response()
        }
        Ok(Ok(None)) => ApiError::unavailable_here(
            "round_not_held",
            format!("this trainer holds no {name} of round {round} of training job {job}"),
        )
        .into_response(),
        Ok(Err(e)) => ApiError::internal(format!("reading the {name} blob: {e}")).into_response(),
        Err(e) => ApiError::internal(format!("reading the {name} blob: {e}")).into_response(),
    }
}
