//! The transfer agent's HTTP front: authenticates OpenAI chat requests, checks that the
//! requester can pay, routes each to an ML node via [`Router`], waits in the [`WaitQueue`] when
//! every node is busy, relays the answer (whole body or server-sent events as they arrive), and
//! turns each completed request into a signed work record (see [`settle`](crate::settle)).
//!
//! Routes: `POST /v1/chat/completions`, `GET /v1/models` (the chain's model table, or the
//! nodes' models without a chain), `GET /v1/identity` (this TA's address, key, chain id, URL
//! and the other registered transfer agents); with a chain also `GET /v1/payloads/{inference_id}`
//! (request bodies for the assigned validators, see [`payloads`]).
//!
//! Every request is forwarded with the [`HEADER_REQUEST_HASH`] header; with a chain, the ML
//! node's [`Receipt`] must verify with the node's registered key, otherwise the answer is
//! treated as a node failure (the work could never settle) and the request is retried on
//! another node.
//!
//! Status codes beyond the ML node's: 401 authentication failed (see [`auth`]),
//! 402 the requester's balance, less what it owes for unsettled requests, does not cover the
//! request's worst-case cost, 404 no node serves the model, 408 `request_timeout` the body
//! did not arrive within [`ServerLimits::body_timeout`], 429 (+ `Retry-After`)
//! `rate_limit_exceeded` the requester is over its [`RateLimit`] or `queue_full` the wait
//! queue is full or the wait timed out, 502 every attempt on a node failed, 503 the chain
//! cannot be reached to check the balance.
//!
//! A misbehaving ML node costs a bounded wait: every call runs within
//! [`TaConfig::node_limits`] (connect, whole header block, silence between body reads, whole
//! exchange, body size), no node gets more than [`TaConfig::max_node_concurrency`] requests
//! at once whatever it declares, and a node that breaks a limit is a failed node (cooldown)
//! whose request is retried on another node, as long as nothing was sent to the client yet
//! (a stream is committed to once its first bytes arrived).

use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Json;
use serde::{Deserialize, Serialize};
use tokio::net::TcpListener;
use tokio::sync::Notify;

use gonka_proto::inference::{TransferAgent as RegisteredTa, WorkRecord};

use super::auth::{self, Authenticated, ReplayCache};
use super::payloads::{self, Payloads};
use super::ratelimit::{Limited, RateLimit, RateLimiter};
use super::registry::Registry;
use super::settle::Outbox;
use super::{Backoff, Lease, NodeStatus, Outcome, Router, WaitQueue};
use gonka_client::http as upstream;
use gonka_client::openai::{ApiError, ModelCard, ModelList, Usage};
use gonka_client::receipt::{Receipt, HEADER_RECEIPT, HEADER_REQUEST_HASH};
use gonka_client::server::{read_body, ServerLimits};
use gonka_client::sse::SseParser;
use gonka_client::{unix_now, Chain};

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
    /// Timeouts and body bounds of every call to an ML node: a node that does not connect,
    /// send its headers, keep sending, or stop sending within them failed (cooldown, and
    /// the request is retried on another node while nothing went to the client yet).
    pub node_limits: upstream::Limits,
    /// Most requests in flight on one ML node, whatever `max_concurrency` it declares.
    pub max_node_concurrency: u32,
    /// Cooldown of a node after failures.
    pub backoff: Backoff,
    /// Header and body timeouts and the connection cap of the TA's own server.
    pub server: ServerLimits,
    /// Requests per requester address.
    pub rate_limit: RateLimit,
    /// `max_tokens` assumed for the payment check when a request names none.
    pub default_max_tokens: u64,
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
            node_limits: upstream::Limits::default(),
            max_node_concurrency: 64,
            backoff: Backoff::default(),
            server: ServerLimits::default(),
            rate_limit: RateLimit::default(),
            default_max_tokens: 256,
        }
    }
}

/// Wall-clock source in unix seconds (replaceable in tests).
pub type Clock = Arc<dyn Fn() -> u64 + Send + Sync>;

struct Sched {
    router: Router,
    queue: WaitQueue<Arc<Notify>>,
}

/// Where completed work records go.
enum Sink {
    /// Kept in memory (no chain: tests and benches).
    Memory(Mutex<Vec<WorkRecord>>),
    /// Written to the durable outbox for settlement on `chain`; request bodies are kept in
    /// `payloads` for the validators.
    Chain {
        chain: Arc<Chain>,
        outbox: Arc<Outbox>,
        payloads: Arc<Payloads>,
    },
}

/// Shared state of a running transfer agent.
pub struct TransferAgent {
    config: TaConfig,
    registry: RwLock<Registry>,
    sched: Mutex<Sched>,
    replay: Mutex<ReplayCache>,
    rate: Mutex<RateLimiter>,
    sink: Sink,
    clock: Clock,
}

impl std::fmt::Debug for TransferAgent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TransferAgent")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl TransferAgent {
    /// A chain-less TA over the configured nodes, using the wall clock; records stay in
    /// memory. Fails on a malformed node URL.
    pub fn new(config: TaConfig) -> Result<Arc<Self>, String> {
        Self::with_clock(config, Arc::new(unix_now))
    }

    /// A chain-less TA with a custom clock (unix seconds).
    pub fn with_clock(config: TaConfig, clock: Clock) -> Result<Arc<Self>, String> {
        let registry = Registry::from_config(&config.nodes)?;
        Ok(Self::build(
            config,
            registry,
            Sink::Memory(Mutex::new(Vec::new())),
            clock,
        ))
    }

    /// A TA that routes on the chain's `registry`, checks balances on `chain`, writes
    /// completed work records to `outbox` for settlement and keeps their request bodies in
    /// `payloads` (served at `GET /v1/payloads/{inference_id}`).
    pub fn with_chain(
        config: TaConfig,
        registry: Registry,
        chain: Arc<Chain>,
        outbox: Arc<Outbox>,
        payloads: Arc<Payloads>,
    ) -> Arc<Self> {
        Self::build(
            config,
            registry,
            Sink::Chain {
                chain,
                outbox,
                payloads,
            },
            Arc::new(unix_now),
        )
    }

    fn build(config: TaConfig, registry: Registry, sink: Sink, clock: Clock) -> Arc<Self> {
        let ta = Arc::new(Self {
            sched: Mutex::new(Sched {
                router: Router::new(config.backoff)
                    .with_concurrency_cap(config.max_node_concurrency),
                queue: WaitQueue::new(config.queue_capacity),
            }),
            replay: Mutex::new(ReplayCache::default()),
            rate: Mutex::new(RateLimiter::new(config.rate_limit)),
            registry: RwLock::new(Registry::default()),
            sink,
            clock,
            config,
        });
        ta.set_registry(registry);
        ta
    }

    /// Replaces the registry: new and changed nodes are (re)declared to the router, nodes no
    /// longer registered are dropped (requests in flight there finish normally).
    pub fn set_registry(&self, registry: Registry) {
        {
            let mut s = lock(&self.sched);
            let gone: Vec<String> = s
                .router
                .nodes()
                .map(|n| n.info.id.clone())
                .filter(|id| !registry.nodes.contains_key(id))
                .collect();
            for id in gone {
                s.router.remove_node(&id);
            }
            for node in registry.nodes.values() {
                if s.router.node(&node.info.id).map(|n| &n.info) != Some(&node.info) {
                    s.router.upsert_node(node.info.clone());
                }
            }
        }
        *self.registry.write().unwrap_or_else(|p| p.into_inner()) = registry;
    }

    fn registry(&self) -> std::sync::RwLockReadGuard<'_, Registry> {
        self.registry.read().unwrap_or_else(|p| p.into_inner())
    }

    /// `(node id, host:port)` of every node in the registry.
    pub fn node_authorities(&self) -> Vec<(String, String)> {
        self.registry()
            .nodes
            .values()
            .map(|n| (n.info.id.clone(), n.authority.clone()))
            .collect()
    }

    /// The chain's `max_records_per_batch` as last read (0 without a chain).
    pub fn max_records_per_batch(&self) -> usize {
        self.registry().max_records_per_batch
    }

    /// Records an ML node's own report of its in-flight requests.
    pub fn report_load(&self, node_id: &str, in_flight: u32) {
        lock(&self.sched).router.report_load(node_id, in_flight);
    }

    /// Work records completed by a chain-less TA so far (with a chain they are in the outbox).
    pub fn completed_records(&self) -> Vec<WorkRecord> {
        match &self.sink {
            Sink::Memory(records) => lock(records).clone(),
            Sink::Chain { .. } => Vec::new(),
        }
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

    /// The node's address and registered key.
    fn endpoint(&self, node_id: &str) -> Option<(String, Vec<u8>)> {
        self.registry()
            .nodes
            .get(node_id)
            .map(|n| (n.authority.clone(), n.pubkey.clone()))
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
    async fn acquire(
        &self,
        model: &str,
        min_vram_mib: u64,
        commission: u64,
    ) -> Result<Lease, ApiError> {
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
                if let Some(lease) = s.router.pick(model, min_vram_mib, Instant::now()) {
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

fn rate_limited(requester: &str, limit: RateLimit, limited: Limited) -> ApiError {
    ApiError {
        status: StatusCode::TOO_MANY_REQUESTS,
        message: format!(
            "requester {requester} sent more than {} requests per second (bursts of {}); retry in {} ms",
            limit.per_second,
            limit.burst,
            limited.retry_after.as_millis()
        ),
        kind: "rate_limit_error",
        code: "rate_limit_exceeded",
        retry_after_secs: Some(limited.retry_after_secs()),
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
    let stored = match &ta.sink {
        Sink::Chain { payloads, .. } => payloads::router(payloads.clone()),
        Sink::Memory(_) => axum::Router::new(),
    };
    axum::Router::new()
        .route("/v1/chat/completions", post(chat_completions))
        .route("/v1/models", get(models))
        .route("/v1/identity", get(identity))
        .fallback(|uri: Uri| async move { ApiError::route_not_found(uri.path()) })
        .with_state(ta)
        .merge(stored)
}

/// Serves the TA on `listener` until `shutdown` completes, within [`TaConfig::server`]
/// (header timeout, connection cap).
pub async fn serve(
    listener: TcpListener,
    ta: Arc<TransferAgent>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let limits = ta.config.server;
    gonka_client::server::serve(listener, router(ta), limits, shutdown).await
}

/// Another transfer agent, as `/v1/identity` lists it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct PeerTa {
    /// Account address.
    pub address: String,
    /// Public URL.
    pub url: String,
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
    /// Chain id (empty without a chain).
    #[serde(default)]
    pub chain_id: String,
    /// Every transfer agent registered on chain (this one included), so clients can fail over.
    #[serde(default)]
    pub transfer_agents: Vec<PeerTa>,
}

async fn identity(State(ta): State<Arc<TransferAgent>>) -> Json<Identity> {
    let (address, pubkey, chain_id) = match &ta.sink {
        Sink::Chain { chain, .. } => (
            chain.address().to_string(),
            hex::encode(chain.pubkey()),
            chain.chain_id().to_string(),
        ),
        Sink::Memory(_) => (
            ta.config.address.clone(),
            ta.config.pubkey.clone(),
            String::new(),
        ),
    };
    let transfer_agents = ta
        .registry()
        .transfer_agents
        .iter()
        .map(|t: &RegisteredTa| PeerTa {
            address: t.address.clone(),
            url: t.url.clone(),
        })
        .collect();
    Json(Identity {
        address,
        pubkey,
        url: ta.config.public_url.clone(),
        chain_id,
        transfer_agents,
    })
}

async fn models(State(ta): State<Arc<TransferAgent>>) -> Json<ModelList> {
    Json(ModelList {
        object: "list",
        data: ta
            .registry()
            .model_ids()
            .into_iter()
            .map(|id| ModelCard {
                id,
                object: "model",
                created: 0,
                owned_by: "gonka",
            })
            .collect(),
    })
}

/// Just the fields the TA routes and prices on.
#[derive(Deserialize)]
struct Routing {
    model: String,
    #[serde(default)]
    stream: bool,
    #[serde(default)]
    max_tokens: Option<i64>,
    #[serde(default)]
    max_completion_tokens: Option<i64>,
}

/// `usage` of a completion or of a stream's usage chunk.
#[derive(Deserialize, Default)]
struct UsageOnly {
    #[serde(default)]
    usage: Option<Usage>,
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

/// What the ML node proved about one answer.
struct Served {
    response_hash: Vec<u8>,
    executor_signature: Vec<u8>,
    tokens: Usage,
}

/// Checks a node's receipt. With a chain it is required and must verify with the node's
/// registered key (the chain would refuse the record otherwise); a chain-less TA takes a
/// receipt as given when there is one and the reported usage otherwise.
fn served(
    ta: &TransferAgent,
    node: &str,
    pubkey: &[u8],
    auth: &Authenticated,
    model: &str,
    receipt: Option<Receipt>,
    usage: Usage,
) -> Result<Served, String> {
    let Some(receipt) = receipt else {
        return match ta.sink {
            Sink::Chain { .. } => Err(format!("node `{node}` sent no execution receipt")),
            Sink::Memory(_) => Ok(Served {
                response_hash: Vec::new(),
                executor_signature: Vec::new(),
                tokens: usage,
            }),
        };
    };
    if receipt.node_id != node {
        return Err(format!(
            "node `{node}` sent a receipt of node `{}`",
            receipt.node_id
        ));
    }
    let tokens = Usage {
        prompt_tokens: receipt.prompt_tokens,
        completion_tokens: receipt.completion_tokens,
        total_tokens: receipt
            .prompt_tokens
            .saturating_add(receipt.completion_tokens),
    };
    let (response_hash, executor_signature) = match ta.sink {
        Sink::Chain { .. } => {
            let (hash, signature) = receipt.verify(pubkey, &auth.request_hash, model)?;
            (hash.to_vec(), signature)
        }
        Sink::Memory(_) => (
            hex::decode(&receipt.response_hash).unwrap_or_default(),
            hex::decode(&receipt.signature).unwrap_or_default(),
        ),
    };
    Ok(Served {
        response_hash,
        executor_signature,
        tokens,
    })
}

/// Turns a served request into a work record and hands it to the sink (with a chain: the
/// request `body` to the payload store, then the record to the durable outbox, charging the
/// requester tokens × price + commission).
fn record(
    ta: &TransferAgent,
    auth: &Authenticated,
    body: &[u8],
    model: &str,
    node: &str,
    served: Served,
) {
    let record = WorkRecord {
        inference_id: auth.inference_id(),
        requester: auth.address.clone(),
        requester_pubkey: auth.pubkey.clone(),
        requester_signature: auth.signature.clone(),
        request_hash: auth.request_hash.to_vec(),
        model: model.to_string(),
        prompt_hash: auth.body_hash.to_vec(),
        response_hash: served.response_hash,
        prompt_tokens: served.tokens.prompt_tokens,
        completion_tokens: served.tokens.completion_tokens,
        executor_node: node.to_string(),
        commission: auth.commission.to_string(),
        executor_signature: served.executor_signature,
        timestamp: auth.timestamp,
        nonce: auth.nonce.clone(),
    };
    match &ta.sink {
        Sink::Memory(records) => lock(records).push(record),
        Sink::Chain {
            outbox, payloads, ..
        } => {
            payloads.keep(&record.inference_id, body);
            let tokens = u128::from(record.prompt_tokens) + u128::from(record.completion_tokens);
            let cost = tokens
                .saturating_mul(ta.registry().terms(model).price_per_token)
                .saturating_add(auth.commission);
            if let Err(e) = outbox.put(&record, cost) {
                tracing::error!(inference = %record.inference_id, error = %e, "cannot write the work record to the outbox; it will not be settled");
            }
        }
    }
}

/// 402 unless the requester's balance, less what it owes for unsettled records, covers the
/// request's worst case: (body bytes + max_tokens) × price + commission. Body bytes bound the
/// prompt tokens of byte-level tokenizers such as the reference model's (real tokenizers
/// produce fewer tokens than bytes).
async fn check_funds(
    chain: &Chain,
    outbox: &Outbox,
    auth: &Authenticated,
    body_len: usize,
    max_tokens: u64,
    price_per_token: u128,
) -> Result<(), ApiError> {
    let bound = (body_len as u128)
        .saturating_add(u128::from(max_tokens))
        .saturating_mul(price_per_token)
        .saturating_add(auth.commission);
    let balance = chain.balance(&auth.address).await.map_err(|e| ApiError {
        status: StatusCode::SERVICE_UNAVAILABLE,
        message: format!("cannot check the requester's balance on chain: {e:#}"),
        kind: "server_error",
        code: "chain_unavailable",
        retry_after_secs: Some(2),
    })?;
    let owed = outbox.owed_by(&auth.address);
    if balance.saturating_sub(owed) < bound {
        return Err(ApiError {
            status: StatusCode::PAYMENT_REQUIRED,
            message: format!(
                "account {} holds {balance} ngnk and owes {owed} ngnk for unsettled requests, but this request may cost up to {bound} ngnk ((prompt bytes + max_tokens) x price + commission); fund the account (e.g. `gonkad tx bank send`) or lower max_tokens",
                auth.address
            ),
            kind: "invalid_request_error",
            code: "insufficient_funds",
            retry_after_secs: None,
        });
    }
    Ok(())
}

async fn handle_chat(
    ta: Arc<TransferAgent>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let bytes = read_body(
        body,
        ta.config.max_body_bytes,
        ta.config.server.body_timeout,
    )
    .await?;
    // The signature check runs outside every lock; only the replay check is serialised.
    let now = (ta.clock)();
    let auth = auth::verify(&headers, &bytes, now, ta.config.max_skew_secs)?;
    // Before the replay cache: a request refused here can be sent again as it is.
    lock(&ta.rate)
        .admit(&auth.address, Instant::now())
        .map_err(|limited| rate_limited(&auth.address, ta.config.rate_limit, limited))?;
    lock(&ta.replay).admit(&auth, now, ta.config.max_skew_secs)?;
    let routing: Routing = serde_json::from_slice(&bytes).map_err(|e| {
        ApiError::invalid_json(format!(
            "expected a JSON chat completion request {{model, messages, ...}}: {e}"
        ))
    })?;
    let (serves, terms, token_limit) = {
        let registry = ta.registry();
        (
            registry.serves(&routing.model),
            registry.terms(&routing.model),
            registry.max_tokens_per_record,
        )
    };
    if !serves {
        return Err(model_unknown(&routing.model));
    }
    let max_tokens = match routing.max_tokens.or(routing.max_completion_tokens) {
        None => ta.config.default_max_tokens,
        Some(n) if n >= 1 && (token_limit == 0 || n.unsigned_abs() <= token_limit) => {
            n.unsigned_abs()
        }
        Some(n) => {
            return Err(ApiError::invalid_value(
                "invalid_max_tokens",
                format!(
                    "`max_tokens` must be between 1 and {} but is {n}",
                    if token_limit == 0 {
                        i64::MAX as u64
                    } else {
                        token_limit
                    }
                ),
            ))
        }
    };
    if let Sink::Chain { chain, outbox, .. } = &ta.sink {
        check_funds(
            chain,
            outbox,
            &auth,
            bytes.len(),
            max_tokens,
            terms.price_per_token,
        )
        .await?;
    }
    // The queue orders by the signed commission; bids beyond u64 ngnk all rank first.
    let commission = u64::try_from(auth.commission).unwrap_or(u64::MAX);
    let request_hash = hex::encode(auth.request_hash);

    let mut last_error = String::new();
    for attempt in 1..=ta.config.max_attempts.max(1) {
        let lease = ta
            .acquire(&routing.model, terms.min_vram_mib, commission)
            .await?;
        let mut guard = LeaseGuard {
            ta: ta.clone(),
            lease: Some(lease),
        };
        let node = guard.node_id();
        let (authority, pubkey) = ta.endpoint(&node).unwrap_or_default();
        let resp = match upstream::request_with_headers(
            &authority,
            "POST",
            "/v1/chat/completions",
            &[(HEADER_REQUEST_HASH, &request_hash)],
            &bytes,
            ta.config.node_limits,
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
        let receipt = resp.header(HEADER_RECEIPT).and_then(Receipt::from_header);
        let is_sse = resp
            .header("content-type")
            .is_some_and(|v| v.starts_with("text/event-stream"));
        let ok = status.is_success();
        let body = if routing.stream && is_sse {
            // The stream's first bytes before anything goes to the client: a node that
            // answers headers and then nothing can still be replaced.
            let mut resp = resp;
            let first = match resp.next_chunk().await {
                Ok(Some(first)) => first,
                Ok(None) => {
                    last_error = format!("node `{node}` ended its stream before any event");
                    tracing::warn!(%node, attempt, "ML node sent an empty stream; retrying elsewhere");
                    guard.finish(Outcome::Failed);
                    continue;
                }
                Err(e) => {
                    last_error = format!("node `{node}`: reading the stream: {e}");
                    tracing::warn!(%node, attempt, error = %e, "ML node stream failed before its first event; retrying elsewhere");
                    guard.finish(Outcome::Failed);
                    continue;
                }
            };
            let settle = ok.then(|| Settle {
                auth: auth.clone(),
                body: bytes.clone(),
                model: routing.model.clone(),
                pubkey: pubkey.clone(),
            });
            stream_body(ta.clone(), guard, resp, first, settle)
        } else {
            let full = match resp.read_body().await {
                Ok(b) => b,
                Err(e) => {
                    last_error = format!("node `{node}`: reading the answer: {e}");
                    tracing::warn!(%node, attempt, error = %e, "ML node answer failed; retrying elsewhere");
                    guard.finish(Outcome::Failed);
                    continue;
                }
            };
            if ok {
                let usage = serde_json::from_slice::<UsageOnly>(&full)
                    .ok()
                    .and_then(|u| u.usage)
                    .unwrap_or_default();
                match served(&ta, &node, &pubkey, &auth, &routing.model, receipt, usage) {
                    Ok(served) => record(&ta, &auth, &bytes, &routing.model, &node, served),
                    Err(e) => {
                        tracing::warn!(%node, attempt, error = %e, "answer cannot settle; retrying elsewhere");
                        last_error = e;
                        guard.finish(Outcome::Failed);
                        continue;
                    }
                }
            }
            guard.finish(Outcome::Ok);
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
            HeaderValue::from_str(&request_hash).expect("hex is a valid header value"),
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

/// What a successful stream needs to become a work record at its end.
struct Settle {
    auth: Authenticated,
    /// The request body as signed, for the payload store.
    body: Bytes,
    model: String,
    pubkey: Vec<u8>,
}

/// Tokens of a finished event stream: the usage chunk if any, else the content chunks.
fn stream_usage(sse: &[u8]) -> Usage {
    let mut content_chunks = 0u64;
    for data in SseParser::parse_all(sse) {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(&data) else {
            continue;
        };
        if let Some(u) = v.get("usage").filter(|u| !u.is_null()) {
            if let Ok(t) = serde_json::from_value::<Usage>(u.clone()) {
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
    Usage {
        prompt_tokens: 0,
        completion_tokens: content_chunks,
        total_tokens: content_chunks,
    }
}

/// Relays the node's event stream as it arrives (starting with its `first` bytes, already
/// read) within the node limits; records the request at a clean end. A node that goes
/// silent, runs past the total time or sends too much is cut off and cooled down.
fn stream_body(
    ta: Arc<TransferAgent>,
    guard: LeaseGuard,
    resp: upstream::UpstreamResponse,
    first: Vec<u8>,
    settle: Option<Settle>,
) -> Body {
    struct St {
        ta: Arc<TransferAgent>,
        guard: LeaseGuard,
        node: String,
        resp: upstream::UpstreamResponse,
        first: Option<Vec<u8>>,
        seen: Vec<u8>,
        settle: Option<Settle>,
        done: bool,
    }
    let node = guard.node_id();
    let st = St {
        ta,
        guard,
        node,
        resp,
        first: Some(first),
        seen: Vec::new(),
        settle,
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
        match st.resp.next_chunk().await {
            Ok(None) => {
                let complete = st.seen.ends_with(b"data: [DONE]\n\n");
                if complete {
                    let mut outcome = Outcome::Ok;
                    if let Some(s) = st.settle.take() {
                        let receipt = Receipt::find_in_sse(&st.seen);
                        let usage = stream_usage(&st.seen);
                        match served(
                            &st.ta, &st.node, &s.pubkey, &s.auth, &s.model, receipt, usage,
                        ) {
                            Ok(served) => {
                                record(&st.ta, &s.auth, &s.body, &s.model, &st.node, served)
                            }
                            Err(e) => {
                                tracing::warn!(node = %st.node, error = %e, "streamed answer cannot settle");
                                outcome = Outcome::Failed;
                            }
                        }
                    }
                    st.guard.finish(outcome);
                } else {
                    tracing::warn!(node = %st.node, "ML node ended the stream early");
                    st.guard.finish(Outcome::Failed);
                }
                None
            }
            Ok(Some(chunk)) => {
                st.seen.extend_from_slice(&chunk);
                Some((Ok(Bytes::from(chunk)), st))
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
