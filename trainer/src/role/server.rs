//! The trainer's HTTP server: round blobs for peers and verifiers,
//! `GET /pol/v1/jobs/{job}/rounds/{round}/{blob}` with `blob` one of `start-weights`,
//! `end-weights`, `pseudo-gradient`, `optimizer-state` (canonical `format` bytes,
//! `application/octet-stream`), and a completed job's trained model,
//! `GET /pol/v1/jobs/{job}/model` (gonka-model's weights file, whose SHA-256 the chain's
//! model table holds once published), and its metrics, `GET /metrics`
//! ([`super::metrics`]). Unknown routes, blobs, rounds and models get a 404
//! with an OpenAI-style JSON error. Reads only: nothing a stranger sends changes the trainer.

use axum::extract::{Path, State};
use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use gonka_client::openai::ApiError;

use super::store::{Blob, Store};

/// The blob route.
pub const BLOB_ROUTE: &str = "/pol/v1/jobs/{job}/rounds/{round}/{blob}";

/// The trained-model route.
pub const MODEL_ROUTE: &str = "/pol/v1/jobs/{job}/model";

/// The path of a job's trained model on a worker's endpoint.
pub fn model_path(job: u64) -> String {
    format!("/pol/v1/jobs/{job}/model")
}

/// The path of a blob on a worker's endpoint.
pub fn blob_path(job: u64, round: u64, blob: Blob) -> String {
    format!("/pol/v1/jobs/{job}/rounds/{round}/{}", blob.name())
}

/// The trainer's routes over `store`, and its metrics from `metrics` at `/metrics`.
pub fn router(store: Store, metrics: std::sync::Arc<gonka_client::metrics::Registry>) -> Router {
    Router::new()
        .route(BLOB_ROUTE, get(blob))
        .route(MODEL_ROUTE, get(model))
        .merge(gonka_client::metrics::router(metrics, || {}))
        .fallback(|uri: axum::http::Uri| async move {
            ApiError::unavailable_here(
                "not_found",
                format!("no route for `{uri}`; expected GET {BLOB_ROUTE} or {MODEL_ROUTE}"),
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
    let read = tokio::task::spawn_blocking(move || store.get(job, round, kind)).await;
    octet_stream(read, &name, || {
        format!("this trainer holds no {name} of round {round} of training job {job}")
    })
}

async fn model(State(store): State<Store>, Path(job): Path<u64>) -> Response {
    let read = tokio::task::spawn_blocking(move || store.model(job)).await;
    octet_stream(read, "model", || {
        format!("this trainer holds no trained model of training job {job} (not completed, or not one of its workers)")
    })
}

/// A stored file as `application/octet-stream`, or the error that says why not.
fn octet_stream(
    read: Result<std::io::Result<Option<Vec<u8>>>, tokio::task::JoinError>,
    name: &str,
    missing: impl FnOnce() -> String,
) -> Response {
    match read {
        Ok(Ok(Some(bytes))) => {
            ([(CONTENT_TYPE, "application/octet-stream")], bytes).into_response()
        }
        Ok(Ok(None)) => ApiError::unavailable_here("not_held", missing()).into_response(),
        Ok(Err(e)) => ApiError::internal(format!("reading the {name} file: {e}")).into_response(),
        Err(e) => ApiError::internal(format!("reading the {name} file: {e}")).into_response(),
    }
}

/// FOR TESTS ONLY (`testing` feature): `router` answering 404 to every pseudo-gradient fetch,
/// as a worker that commits its round and then withholds its update from its peers.
#[cfg(feature = "testing")]
pub fn withholding_pseudo_gradients(router: Router) -> Router {
    router.layer(axum::middleware::from_fn(
        |request: axum::extract::Request, next: axum::middleware::Next| async move {
            if request.uri().path().ends_with(Blob::PseudoGradient.name()) {
                return ApiError::unavailable_here(
                    "not_held",
                    "TESTING: pseudo-gradients withheld".into(),
                )
                .into_response();
            }
            next.run(request).await
        },
    ))
}
