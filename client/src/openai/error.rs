//! OpenAI-style error responses: `{"error": {"message", "type", "code"}}`, as the ML node
//! and the transfer agent return them.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

/// An error an ML node or a transfer agent returns to its caller, with the HTTP status it
/// maps to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// HTTP status of the response.
    pub status: StatusCode,
    /// What was expected and what was found, for a person to act on.
    pub message: String,
    /// OpenAI's error `type` (`invalid_request_error`, `server_error`, ...).
    pub kind: &'static str,
    /// Stable machine-readable code (`invalid_json`, `model_not_found`, ...).
    pub code: &'static str,
    /// Seconds the caller should wait before retrying, sent as `Retry-After`.
    pub retry_after_secs: Option<u32>,
}

impl ApiError {
    fn new(status: StatusCode, kind: &'static str, code: &'static str, message: String) -> Self {
        Self {
            status,
            message,
            kind,
            code,
            retry_after_secs: None,
        }
    }

    /// 400: a request that is not well-formed JSON of the expected shape.
    pub fn invalid_json(message: String) -> Self {
        Self::new(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            "invalid_json",
            message,
        )
    }

    /// 400: a well-formed request with a field value out of range.
    pub fn invalid_value(code: &'static str, message: String) -> Self {
        Self::new(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            code,
            message,
        )
    }

    /// 401: a request whose signed `x-gonka-*` headers do not authenticate it (`code` names
    /// why, e.g. `invalid_signature`, `stale_timestamp`).
    pub fn unauthorized(code: &'static str, message: String) -> Self {
        Self::new(
            StatusCode::UNAUTHORIZED,
            "authentication_error",
            code,
            message,
        )
    }

    /// 404: a model this ML node does not serve.
    pub fn model_not_found(requested: &str, served: &str) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "invalid_request_error",
            "model_not_found",
            format!("the model `{requested}` does not exist on this ML node; it serves `{served}`"),
        )
    }

    /// 404: a path this ML node does not serve.
    pub fn route_not_found(path: &str) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "invalid_request_error",
            "not_found",
            format!(
                "no route for `{path}`; expected /v1/chat/completions, /v1/models, /v1/load, /v1/identity, /gonka/v1/cosign or /gonka/v1/score"
            ),
        )
    }

    /// 404: a feature this server does not offer as configured (`code` names it).
    pub fn unavailable_here(code: &'static str, message: String) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "invalid_request_error",
            code,
            message,
        )
    }

    /// 413: a body or prompt over the configured size.
    pub fn too_large(code: &'static str, message: String) -> Self {
        Self::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "invalid_request_error",
            code,
            message,
        )
    }

    /// 503: every generation slot is busy.
    pub fn overloaded(max_concurrency: usize) -> Self {
        let mut e = Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "server_error",
            "overloaded",
            format!("all {max_concurrency} generation slots of this ML node are busy; retry later"),
        );
        e.retry_after_secs = Some(1);
        e
    }

    /// 502: the OpenAI-compatible server this ML node forwards to failed or answered
    /// something unusable.
    pub fn upstream(message: String) -> Self {
        Self::new(
            StatusCode::BAD_GATEWAY,
            "server_error",
            "upstream_error",
            message,
        )
    }

    /// 500: generation failed inside the server.
    pub fn internal(message: String) -> Self {
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "server_error",
            "internal_error",
            message,
        )
    }
}

#[derive(Serialize)]
struct ErrorBody<'a> {
    error: ErrorDetail<'a>,
}

#[derive(Serialize)]
struct ErrorDetail<'a> {
    message: &'a str,
    #[serde(rename = "type")]
    kind: &'a str,
    code: &'a str,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorBody {
            error: ErrorDetail {
                message: &self.message,
                kind: self.kind,
                code: self.code,
            },
        };
        let mut response = (self.status, axum::Json(body)).into_response();
        if let Some(secs) = self.retry_after_secs {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        response
    }
}
