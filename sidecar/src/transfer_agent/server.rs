//! The transfer agent's HTTP front: authenticates OpenAI chat requests, routes each to an ML
//! node via [`Router`], waits in the [`WaitQueue`] when every node is busy, relays the answer
//! (whole body or server-sent events as they arrive), and records completed requests for the
//! batcher that will later put them on chain.
//!
//! Routes: `POST /v1/chat/completions`, `GET /v1/models` (union of the nodes' configured
//! models), `GET /v1/identity` (this TA's address, pubkey and public URL).
//!
//! Status codes beyond the ML node's: 401 authentication failed (see [`auth`](super::auth)),
//! 404 no configured node serves the model, 429 (+ `Retry-After`) the wait queue is full or
//! the wait timed out, 502 every attempt on a node failed.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Json;
use serde::{Deserialize, Serialize};
use tokio::io::AsyncReadExt;
use tokio::net::TcpListener;
use tokio::sync::Notify;

use super::auth::{self, Authenticated, ReplayCache};
use super::upstream;
use super::{Backoff, Lease, NodeInfo, NodeStatus, Outcome, Router, WaitQueue};
use crate::ml_node::{ApiError, ModelCard, ModelList};

/// An ML node the TA forwards to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaNodeConfig {
    /// Unique node id.
    pub id: String,
    /// Base URL, `http://HOST:PORT`.
    pub url: String,
    /// Models the node serves.
    pub models: Vec<String>,
    /// GPU memory in MiB (routing metadata).
    pub vram_mib: u64,
    /// Bandwidth in Mbit/s (routing tie-breaker).
    pub bandwidth_mbps: u64,
    /// Requests the TA sends the node at once.
    pub max_concurrency: u32,
}

/// Settings of a transfer agent.
#[derive(Debug, Clone)]
pub struct TaConfig {
    /// The TA's own account address (for `/v1/identity`).
    pub address: String,
    /// The TA's hex public key (for `/v1/identity`).
    pub pubkey: String,
    /// The URL clients reach this TA at (for `/v1/identity`).
    pub public_url: String,
    /// ML nodes to forward to.
    pub nodes: Vec<TaNodeConfig>,
    /// Allowed clock difference for request timestamps, in seconds.
    pub max_skew_secs: u64,
    /// Requests allowed to wait for a free node.
    pub queue_capacity: usize,
    /// Longest a request waits for a free node.
    pub queue_timeout: Duration,
    /// Nodes tried per request before giving up with 502.
    pub max_attempts: u32,
    /// Largest request body accepted.
    pub max_body_bytes: usize,
    /// Timeout for connecting to a node.
    pub connect_timeout: Duration,
    /// Cooldown of a node after failures.
    pub backoff: Backoff,
}

impl Default for TaConfig {
    fn default() -> Self {
        Self {
            address: String::new(),
            pubkey: String::new(),
            public_url: String::new(),
            nodes: Vec::new(),
            max_skew_secs: 60,
            queue_capacity: 64,
            queue_timeout: Duration::from_secs(30),
            max_attempts: 3,
            max_body_bytes: 1024 * 1024,
            connect_timeout: Duration::from_secs(2),
            backoff: Backoff::default(),
        }
    }
}

/// A completed request, as a later batcher will turn it into a work record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CompletedRecord {
    /// Lowercase hex of `request_hash`.
    pub inference_id: String,
    /// The signed request hash.
    pub request_hash: [u8; 32],
    /// Claimed requester address.
    pub requester: String,
    /// Requester's compressed public key.
    pub requester_pubkey: Vec<u8>,
    /// Requester's 64-byte signature over `request_hash`.
    pub signature: Vec<u8>,
    /// Signed timestamp.
    pub timestamp: u64,
    /// Signed nonce.
    pub nonce: String,
    /// Requested model.
    pub model: String,
    /// Id of the ML node that served it.
    pub executor: String,
    /// Prompt tokens from the response usage (0 if a stream carried no usage).
    pub prompt_tokens: u64,
    /// Completion tokens from the response usage (for streams without usage: content chunks).
    pub completion_tokens: u64,
}

/// Wall-clock source in unix seconds (replaceable in tests).
pub type Clock = Arc<dyn Fn() -> u64 + Send + Sync>;

struct Sched {
    router: Router,
    queue: WaitQueue<Arc<Notify>>,
    replay: ReplayCache,
}

/// Shared state of a running transfer agent.
pub struct TransferAgent {
    config: TaConfig,
    authorities: Vec<(String, String)>,
    sched: Mutex<Sched>,
    records: Mutex<Vec<CompletedRecord>>,
    clock: Clock,
}

impl std::fmt::Debug for TransferAgent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TransferAgent")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl TransferAgent {
    /// A TA using the wall clock. Fails on a malformed node URL.
    pub fn new(config: TaConfig) -> Result<Arc<Self>, String> {
        Self::with_clock(config, Arc::new(unix_now))
    }

    /// A TA with a custom clock (unix seconds).
    pub fn with_clock(config: TaConfig, clock: Clock) -> Result<Arc<Self>, String> {
        let mut router = Router::new(config.backoff);
        let mut authorities = Vec::new();
        for n in &config.nodes {
            authorities.push((n.id.clone(), upstream::authority(&n.url)?));
            router.upsert_node(NodeInfo {
                id: n.id.clone(),
                models: n.models.clone(),
                vram_mib: n.vram_mib,
                bandwidth_mbps: n.bandwidth_mbps,
                max_concurrency: n.max_concurrency,
            });
        }
        Ok(Arc::new(Self {
            sched: Mutex::new(Sched {
                router,
                queue: WaitQueue::new(config.queue_capacity),
                replay: ReplayCache::default(),
            }),
            authorities,
            records: Mutex::new(Vec::new()),
            clock,
            config,
        }))
    }

    /// Completed requests recorded so far (the batcher's input).
    pub fn completed_records(&self) -> Vec<CompletedRecord> {
        lock(&self.records).clone()
    }

    /// Takes the recorded requests, leaving none.
    pub fn drain_records(&self) -> Vec<CompletedRecord> {
        std::mem::take(&mut *lock(&self.records))
    }

    /// Requests currently waiting for a node.
    pub fn queued(&self) -> usize {
        lock(&self.sched).queue.len()
    }

    /// Per node: requests the TA has in flight there.
    pub fn in_flight(&self) -> Vec<(String, u32)> {
        lock(&self.sched)
            .router
            .nodes()
            .map(|n| (n.info.id.clone(), n.in_flight))
            .collect()
    }

    /// Scheduling state of every node (load, failures, cooldown), in id order.
    pub fn node_status(&self) -> Vec<NodeStatus> {
        lock(&self.sched).router.nodes().cloned().collect()
    }

    fn authority(&self, node_id: &str) -> Option<&str> {
        self.authorities
            .iter()
            .find(|(id, _)| id == node_id)
            .map(|(_, a)| a.as_str())
    }

    fn serves(&self, model: &str) -> bool {
        self.config
            .nodes
            .iter()
            .any(|n| n.models.iter().any(|m| m == model))
    }

    /// Releases a lease and wakes the best waiter.
    fn finish(&self, lease: Lease, outcome: Outcome) {
        let mut s = lock(&self.sched);
        s.router.finish(lease, outcome, Instant::now());
        if let Some(waiter) = s.queue.pop() {
            waiter.notify_one();
        }
    }

    /// A lease on a node serving `model`, waiting in the queue if needed.
    async fn acquire(&self, model: &str, commission: u64) -> Result<Lease, ApiError> {
        let deadline = Instant::now() + self.config.queue_timeout;
        let notify = Arc::new(Notify::new());
        let mut ticket = None;
        loop {
            {
                let mut s = lock(&self.sched);
                if let Some(t) = ticket {
                    if !s.queue.contains(t) {
                        ticket = None; // popped by a finishing request: we were woken
                    }
                }
                if let Some(lease) = s.router.pick(model, 0, Instant::now()) {
                    if let Some(t) = ticket {
                        s.queue.remove(t);
                    }
                    return Ok(lease);
                }
                if ticket.is_none() {
                    match s.queue.push(notify.clone(), commission) {
                        Ok(t) => ticket = Some(t),
                        Err(full) => {
                            return Err(too_many(format!(
                                "every ML node serving `{model}` is busy and the wait queue is full (capacity {})",
                                full.capacity
                            )))
                        }
                    }
                }
            }
            let now = Instant::now();
            if now >= deadline {
                if let Some(t) = ticket {
                    lock(&self.sched).queue.remove(t);
                }
                return Err(too_many(format!(
                    "no ML node serving `{model}` became free within {} ms",
                    self.config.queue_timeout.as_millis()
                )));
            }
            // Also poll now and then: nodes leaving cooldown wake nobody.
            let wait = (deadline - now).min(Duration::from_millis(100));
            let _ = tokio::time::timeout(wait, notify.notified()).await;
        }
    }
}

fn too_many(message: String) -> ApiError {
    ApiError {
        status: StatusCode::TOO_MANY_REQUESTS,
        message,
        kind: "rate_limit_error",
        code: "queue_full",
        retry_after_secs: Some(1),
    }
}

fn bad_gateway(message: String) -> ApiError {
    ApiError {
        status: StatusCode::BAD_GATEWAY,
        message,
        kind: "server_error",
        code: "upstream_failed",
        retry_after_secs: Some(1),
    }
}

fn model_unknown(model: &str) -> ApiError {
    ApiError {
        status: StatusCode::NOT_FOUND,
        message: format!("the model `{model}` is not served by any ML node of this transfer agent"),
        kind: "invalid_request_error",
        code: "model_not_found",
        retry_after_secs: None,
    }
}

/// Finishes a lease when dropped (e.g. the client leaves mid-stream).
struct LeaseGuard {
    ta: Arc<TransferAgent>,
    lease: Option<Lease>,
}

impl LeaseGuard {
    fn node_id(&self) -> String {
        self.lease
            .as_ref()
            .map(|l| l.node_id().to_string())
            .unwrap_or_default()
    }

    fn finish(&mut self, outcome: Outcome) {
        if let Some(lease) = self.lease.take() {
            self.ta.finish(lease, outcome);
        }
    }
}

impl Drop for LeaseGuard {
    fn drop(&mut self) {
        self.finish(Outcome::Ok);
    }
}

/// The TA's routes, ready to serve.
pub fn router(ta: Arc<TransferAgent>) -> axum::Router {
    axum::Router::new()
        .route("/v1/chat/completions", post(chat_completions))
        .route("/v1/models", get(models))
        .route("/v1/identity", get(identity))
        .fallback(|uri: Uri| async move { ApiError::route_not_found(uri.path()) })
        .with_state(ta)
}

/// Serves the TA on `listener` until `shutdown` completes.
pub async fn serve(
    listener: TcpListener,
    ta: Arc<TransferAgent>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, router(ta))
        .with_graceful_shutdown(shutdown)
        .await
}

/// The TA's identity as served at `/v1/identity`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Identity {
    /// Account address.
    pub address: String,
    /// Hex compressed public key.
    pub pubkey: String,
    /// Public URL.
    pub url: String,
}

async fn identity(State(ta): State<Arc<TransferAgent>>) -> Json<Identity> {
    Json(Identity {
        address: ta.config.address.clone(),
        pubkey: ta.config.pubkey.clone(),
        url: ta.config.public_url.clone(),
    })
}

async fn models(State(ta): State<Arc<TransferAgent>>) -> Json<ModelList> {
    let mut ids: Vec<&String> = ta.config.nodes.iter().flat_map(|n| &n.models).collect();
    ids.sort();
    ids.dedup();
    Json(ModelList {
        object: "list",
        data: ids
            .into_iter()
            .map(|id| ModelCard {
                id: id.clone(),
                object: "model",
                created: 0,
                owned_by: "gonka",
            })
            .collect(),
    })
}

/// Just the fields the TA routes on.
#[derive(Deserialize)]
struct Routing {
    model: String,
    #[serde(default)]
    stream: bool,
}

/// `usage` of a completion or of a stream's usage chunk.
#[derive(Deserialize, Default)]
struct UsageOnly {
    #[serde(default)]
    usage: Option<TokenCounts>,
}

#[derive(Deserialize, Default, Clone, Copy)]
struct TokenCounts {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
}

async fn chat_completions(
    State(ta): State<Arc<TransferAgent>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    match handle_chat(ta, headers, body).await {
        Ok(r) => r,
        Err(e) => {
            tracing::info!(status = e.status.as_u16(), code = e.code, "request refused");
            e.into_response()
        }
    }
}

fn record(ta: &TransferAgent, auth: &Authenticated, model: &str, node: &str, t: TokenCounts) {
    lock(&ta.records).push(CompletedRecord {
        inference_id: auth.inference_id(),
        request_hash: auth.request_hash,
        requester: auth.address.clone(),
        requester_pubkey: auth.pubkey.clone(),
        signature: auth.signature.clone(),
        timestamp: auth.timestamp,
        nonce: auth.nonce.clone(),
        model: model.to_string(),
        executor: node.to_string(),
        prompt_tokens: t.prompt_tokens,
        completion_tokens: t.completion_tokens,
    });
}

async fn handle_chat(
    ta: Arc<TransferAgent>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let limit = ta.config.max_body_bytes;
    let bytes = axum::body::to_bytes(body, limit).await.map_err(|_| {
        ApiError::too_large(
            "request_too_large",
            format!("request body must be at most {limit} bytes"),
        )
    })?;
    let auth = {
        let now = (ta.clock)();
        let mut s = lock(&ta.sched);
        auth::authenticate(
            &headers,
            &bytes,
            now,
            ta.config.max_skew_secs,
            &mut s.replay,
        )?
    };
    let routing: Routing = serde_json::from_slice(&bytes).map_err(|e| {
        ApiError::invalid_json(format!(
            "expected a JSON chat completion request {{model, messages, ...}}: {e}"
        ))
    })?;
    if !ta.serves(&routing.model) {
        return Err(model_unknown(&routing.model));
    }
    // The queue orders by the signed commission; bids beyond u64 ngnk all rank first.
    let commission = u64::try_from(auth.commission).unwrap_or(u64::MAX);

    let mut last_error = String::new();
    for attempt in 1..=ta.config.max_attempts.max(1) {
        let lease = ta.acquire(&routing.model, commission).await?;
        let mut guard = LeaseGuard {
            ta: ta.clone(),
            lease: Some(lease),
        };
        let node = guard.node_id();
        let authority = ta.authority(&node).unwrap_or_default().to_string();
        let resp = match upstream::post_json(
            &authority,
            "/v1/chat/completions",
            &bytes,
            ta.config.connect_timeout,
        )
        .await
        {
            Ok(r) if r.status < 500 => r,
            Ok(r) => {
                last_error = format!("node `{node}` answered {}", r.status);
                tracing::warn!(%node, attempt, status = r.status, "ML node failed; retrying elsewhere");
                guard.finish(Outcome::Failed);
                continue;
            }
            Err(e) => {
                last_error = format!("node `{node}`: {e}");
                tracing::warn!(%node, attempt, error = %e, "ML node unreachable; retrying elsewhere");
                guard.finish(Outcome::Failed);
                continue;
            }
        };
        let status = StatusCode::from_u16(resp.status).unwrap_or(StatusCode::BAD_GATEWAY);
        let content_type = resp
            .header("content-type")
            .and_then(|v| HeaderValue::from_str(v).ok());
        let retry_after = resp
            .header("retry-after")
            .and_then(|v| HeaderValue::from_str(v).ok());
        let is_sse = resp
            .header("content-type")
            .is_some_and(|v| v.starts_with("text/event-stream"));
        let ok = status.is_success();
        let body = if routing.stream && is_sse {
            stream_body(
                ta.clone(),
                guard,
                resp,
                ok.then(|| (auth.clone(), routing.model.clone())),
            )
        } else {
            let full = match resp.read_body().await {
                Ok(b) => b,
                Err(e) => {
                    last_error = format!("node `{node}`: reading the answer: {e}");
                    guard.finish(Outcome::Failed);
                    continue;
                }
            };
            guard.finish(Outcome::Ok);
            if ok {
                let usage = serde_json::from_slice::<UsageOnly>(&full)
                    .ok()
                    .and_then(|u| u.usage)
                    .unwrap_or_default();
                record(&ta, &auth, &routing.model, &node, usage);
            }
            Body::from(full)
        };
        let mut response = Response::new(body);
        *response.status_mut() = status;
        if let Some(ct) = content_type {
            response.headers_mut().insert(header::CONTENT_TYPE, ct);
        }
        if let Some(ra) = retry_after {
            response.headers_mut().insert(header::RETRY_AFTER, ra);
        }
        response.headers_mut().insert(
            "x-gonka-inference-id",
            HeaderValue::from_str(&auth.inference_id()).expect("hex is a valid header value"),
        );
        response.headers_mut().insert(
            "x-gonka-executor",
            HeaderValue::from_str(&node).unwrap_or(HeaderValue::from_static("?")),
        );
        return Ok(response);
    }
    Err(bad_gateway(format!(
        "no ML node could serve the request after {} attempts; last error: {last_error}",
        ta.config.max_attempts.max(1)
    )))
}

/// Tokens of a finished event stream: the usage chunk if any, else the content chunks.
fn stream_usage(sse: &[u8]) -> TokenCounts {
    let text = String::from_utf8_lossy(sse);
    let mut content_chunks = 0u64;
    for line in text.lines() {
        let Some(data) = line.strip_prefix("data:") else {
            continue;
        };
        let Ok(v) = serde_json::from_str::<serde_json::Value>(data.trim()) else {
            continue;
        };
        if let Some(u) = v.get("usage").filter(|u| !u.is_null()) {
            if let Ok(t) = serde_json::from_value::<TokenCounts>(u.clone()) {
                return t;
            }
        }
        let has_content = v["choices"][0]["delta"]["content"]
            .as_str()
            .is_some_and(|s| !s.is_empty());
        if has_content {
            content_chunks += 1;
        }
    }
    TokenCounts {
        prompt_tokens: 0,
        completion_tokens: content_chunks,
    }
}

/// Relays the node's event stream as it arrives; records the request at a clean end.
fn stream_body(
    ta: Arc<TransferAgent>,
    guard: LeaseGuard,
    resp: upstream::UpstreamResponse,
    record_as: Option<(Authenticated, String)>,
) -> Body {
    struct St {
        ta: Arc<TransferAgent>,
        guard: LeaseGuard,
        node: String,
        stream: tokio::net::TcpStream,
        first: Option<Vec<u8>>,
        seen: Vec<u8>,
        record_as: Option<(Authenticated, String)>,
        done: bool,
    }
    let node = guard.node_id();
    let st = St {
        ta,
        guard,
        node,
        stream: resp.stream,
        first: Some(resp.leftover).filter(|b| !b.is_empty()),
        seen: Vec::new(),
        record_as,
        done: false,
    };
    let events = futures_util::stream::unfold(st, |mut st| async move {
        if st.done {
            return None;
        }
        if let Some(first) = st.first.take() {
            st.seen.extend_from_slice(&first);
            return Some((Ok::<_, std::io::Error>(Bytes::from(first)), st));
        }
        let mut buf = vec![0u8; 8192];
        match st.stream.read(&mut buf).await {
            Ok(0) => {
                let complete = st.seen.ends_with(b"data: [DONE]\n\n");
                if complete {
                    if let Some((auth, model)) = st.record_as.take() {
                        record(&st.ta, &auth, &model, &st.node, stream_usage(&st.seen));
                    }
                    st.guard.finish(Outcome::Ok);
                } else {
                    tracing::warn!(node = %st.node, "ML node ended the stream early");
                    st.guard.finish(Outcome::Failed);
                }
                None
            }
            Ok(n) => {
                buf.truncate(n);
                st.seen.extend_from_slice(&buf);
                Some((Ok(Bytes::from(buf)), st))
            }
            Err(e) => {
                tracing::warn!(node = %st.node, error = %e, "ML node stream broke");
                st.guard.finish(Outcome::Failed);
                st.done = true;
                Some((Err(e), st))
            }
        }
    });
    Body::from_stream(events)
}
