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
//! Every request is forwarded with the requester's signed headers (the node checks them
//! itself) and, with a chain, the TA's own signature of the call
//! ([`gonka_client::node_call`]). With a chain the ML node's [`Receipt`] must verify with the
//! node's registered key and host, commit to exactly the text relayed and claim no more
//! completion tokens than signed; otherwise the answer is treated as a node failure (the work
//! could never settle) and the request is retried on another node, as is a node answering
//! 401/403 or 5xx.
//!
//! Status codes beyond the ML node's: 401 authentication failed (see [`auth`]), 400 terms
//! that are not this TA's or disagree with the body ([`auth::check_terms`]),
//! 402 the requester's funds, less what it owes for unsettled requests, do not cover the
//! request's worst-case cost (its escrow for this TA when the TA settles committed batches,
//! see [`escrow`](crate::escrow); else its balance), 404 no node serves the model, 408 `request_timeout` the body
//! did not arrive within [`ServerLimits::body_timeout`], 429 (+ `Retry-After`)
//! `rate_limit_exceeded` the requester is over its [`RateLimit`] or `queue_full` the wait
//! queue is full or the wait timed out, 502 every attempt on a node failed, 503 the chain
//! cannot be reached to check the escrow or balance, or (`not_recorded`) the answer's work
//! record could not be made durable, so it is neither charged nor delivered.
//!
//! A misbehaving ML node costs a bounded wait: every call runs within
//! [`TaConfig::node_limits`] (connect, whole header block, silence between body reads, whole
//! exchange, body size), no node gets more than [`TaConfig::max_node_concurrency`] requests
//! at once whatever it declares, and a node that breaks a limit is a failed node (cooldown)
//! whose request is retried on another node, as long as nothing was sent to the client yet
//! (a stream is committed to once its first bytes arrived).

use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Json;
use serde::Deserialize;
use tokio::net::TcpListener;
use tokio::sync::Notify;

use gonka_proto::disputes::ScoredOutput;
use gonka_proto::inference::{TransferAgent as RegisteredTa, WorkRecord};

use super::auth::{self, Authenticated, ReplayCache};
use super::escrow::{self, EscrowBook, Reservation, Shortfall};
use super::leaves::{self, Leaves};
use super::metrics::TaMetrics;
use super::payloads::{self, OutputOpening, Payloads};
use super::ratelimit::{Limited, RateLimit, RateLimiter};
use super::recorder::{Entry, Recorder};
use super::registry::{RegisteredNode, Registry};
use super::settle::Outbox;
use super::{lock, Clock};
use super::{Backoff, Lease, NodeStatus, Outcome, Router, WaitQueue};
use gonka_client::chat::{Identity, KnownTransferAgent, PricedModel};
use gonka_client::http as upstream;
use gonka_client::node_call::sign_node_call_hashed;
use gonka_client::openai::{ApiError, ModelCard, ModelList, Usage};
use gonka_client::receipt::{response_hash, Receipt, VerifiedReceipt, HEADER_RECEIPT};
use gonka_client::request::REQUEST_HEADERS;
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
        }
    }
}

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
        /// The requesters' escrows for this transfer agent, which pay for what it serves.
        escrows: Arc<EscrowBook>,
        /// Makes each served request's body and record durable, in groups.
        recorder: Recorder,
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
    metrics: TaMetrics,
}

impl std::fmt::Debug for TransferAgent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TransferAgent")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
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

    /// A TA that routes on the chain's `registry`, checks what requesters can pay from their
    /// escrows on `chain` (tracked in `escrows`), writes completed work records to `outbox`
    /// for settlement in committed batches and keeps their request bodies in `payloads`
    /// (served at `GET /v1/payloads/{inference_id}`), both made durable by `recorder` (over
    /// the same outbox and payload store) before an answer ends.
    pub fn with_chain(
        config: TaConfig,
        registry: Registry,
        chain: Arc<Chain>,
        outbox: Arc<Outbox>,
        payloads: Arc<Payloads>,
        escrows: Arc<EscrowBook>,
        recorder: Recorder,
    ) -> Arc<Self> {
        let clock: Clock = Arc::new(unix_now);
        Self::build(
            config,
            registry,
            Sink::Chain {
                chain,
                outbox,
                payloads,
                escrows,
                recorder,
            },
            clock,
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
            metrics: TaMetrics::default(),
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

    /// Sets the gauges of [`TaMetrics`] that are read at scrape time.
    fn refresh_metrics(&self) {
        let m = &self.metrics;
        m.queued.set(self.queued() as i64);
        m.node_in_flight.clear();
        for (node, in_flight) in self.in_flight() {
            m.node_in_flight
                .get_or_create(&vec![("node", node)])
                .set(i64::from(in_flight));
        }
        if let Sink::Chain { outbox, .. } = &self.sink {
            m.unsettled.set(outbox.len() as i64);
        }
    }

    /// Scheduling state of every node (load, failures, cooldown), in id order.
    pub fn node_status(&self) -> Vec<NodeStatus> {
        lock(&self.sched).router.nodes().cloned().collect()
    }

    /// The registered node `node_id` (address, key, host), if the registry lists it.
    pub fn registered_node(&self, node_id: &str) -> Option<RegisteredNode> {
        self.registry().nodes.get(node_id).cloned()
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

/// 503 for an answer whose work record could not be made durable: it is not charged, so it
/// is not delivered either.
fn not_recorded(message: String) -> ApiError {
    ApiError {
        status: StatusCode::SERVICE_UNAVAILABLE,
        message,
        kind: "server_error",
        code: "not_recorded",
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
    let stored = match &ta.sink {
        Sink::Chain {
            payloads,
            outbox,
            chain,
            ..
        } => payloads::router(payloads.clone())
            .merge(leaves::router(Leaves::new(outbox.clone(), chain.address()))),
        Sink::Memory(_) => axum::Router::new(),
    };
    let scraped = ta.clone();
    let metrics =
        gonka_client::metrics::router(ta.metrics.registry(), move || scraped.refresh_metrics());
    axum::Router::new()
        .route("/v1/chat/completions", post(chat_completions))
        .route("/v1/models", get(models))
        .route("/v1/identity", get(identity))
        .fallback(|uri: Uri| async move { ApiError::route_not_found(uri.path()) })
        .with_state(ta)
        .merge(stored)
        .merge(metrics)
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

/// This TA's address and chain id: what requests must be signed for (`x-gonka-transfer-agent`,
/// `x-gonka-chain-id`). A chain-less TA has its configured address and no chain id.
fn own_terms(ta: &TransferAgent) -> (String, String) {
    match &ta.sink {
        Sink::Chain { chain, .. } => (chain.address().to_string(), chain.chain_id().to_string()),
        Sink::Memory(_) => (ta.config.address.clone(), String::new()),
    }
}

async fn identity(State(ta): State<Arc<TransferAgent>>) -> Json<Identity> {
    let (address, chain_id) = own_terms(&ta);
    let pubkey = match &ta.sink {
        Sink::Chain { chain, .. } => hex::encode(chain.pubkey()),
        Sink::Memory(_) => ta.config.pubkey.clone(),
    };
    let registry = ta.registry();
    let transfer_agents = registry
        .transfer_agents
        .iter()
        .map(|t: &RegisteredTa| KnownTransferAgent {
            address: t.address.clone(),
            url: t.url.clone(),
        })
        .collect();
    let models = registry
        .model_ids()
        .into_iter()
        .map(|id| PricedModel {
            price_per_token: registry.terms(&id).price_per_token.to_string(),
            id,
        })
        .collect();
    Json(Identity {
        address,
        pubkey,
        url: ta.config.public_url.clone(),
        chain_id,
        transfer_agents,
        models,
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

/// The body field the TA routes on beyond the signed terms.
#[derive(Deserialize)]
struct Routing {
    #[serde(default)]
    stream: bool,
}

/// The text and `usage` of a plain completion.
#[derive(Deserialize, Default)]
struct AnswerOnly {
    #[serde(default)]
    choices: Vec<serde_json::Value>,
    #[serde(default)]
    usage: Option<Usage>,
}

impl AnswerOnly {
    /// `choices[0].message.content`, the text the receipt commits to.
    fn text(&self) -> String {
        self.choices
            .first()
            .and_then(|c| c["message"]["content"].as_str())
            .unwrap_or_default()
            .to_string()
    }
}

async fn chat_completions(
    State(ta): State<Arc<TransferAgent>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let started = Instant::now();
    let mut node_time = None;
    let response = match handle_chat(ta.clone(), headers, body, &mut node_time).await {
        Ok(r) => r,
        Err(e) => {
            tracing::info!(status = e.status.as_u16(), code = e.code, "request refused");
            e.into_response()
        }
    };
    ta.metrics.answered(response.status().as_u16());
    if let Some(node_time) = node_time {
        ta.metrics
            .added(started.elapsed().saturating_sub(node_time));
    }
    response
}

/// What the ML node proved about one answer.
struct Served {
    receipt: VerifiedReceipt,
    tokens: Usage,
    /// SHA-256 of the answer text the requester got (what the receipt commits to for an
    /// "exact" model).
    response_hash: [u8; 32],
    /// A "logprobs" model's scored output, which the receipt commits to instead.
    scored: Option<ScoredOutput>,
}

/// Checks a node's receipt for the answer `text` the TA relays. With a chain it is required,
/// must verify with the node's registered key and host (the chain would refuse the record
/// otherwise), and must commit to exactly `text` (else the node signed something other than
/// what the requester got) — or, for a model the chain validates by log-probabilities, to
/// the scored output it carries ([`Receipt::scored_output`]; the TA cannot tokenize, so that
/// the tokens spell `text` is left to the requester's dispute); a chain-less TA takes a
/// receipt as given when there is one and the reported usage otherwise.
fn served(
    ta: &TransferAgent,
    node: &RegisteredNode,
    auth: &Authenticated,
    text: &str,
    receipt: Option<Receipt>,
    usage: Usage,
) -> Result<Served, String> {
    let id = &node.info.id;
    let answer = response_hash(text);
    let Some(receipt) = receipt else {
        return match ta.sink {
            Sink::Chain { .. } => Err(format!("node `{id}` sent no execution receipt")),
            Sink::Memory(_) => Ok(Served {
                receipt: VerifiedReceipt {
                    output_commitment: [0; 32],
                    salt: [0; 32],
                    signature: Vec::new(),
                },
                tokens: usage,
                response_hash: answer,
                scored: None,
            }),
        };
    };
    if receipt.node_id != *id {
        return Err(format!(
            "node `{id}` sent a receipt of node `{}`",
            receipt.node_id
        ));
    }
    let scored = match ta.registry().terms(&auth.terms.model).logprob_top_k {
        Some(top_k) => Some(receipt.scored_output(top_k)?.ok_or_else(|| {
            format!(
                "node `{id}` sent a receipt without the scored output model {} is validated by",
                auth.terms.model
            )
        })?),
        None if receipt.scored.is_some() => {
            return Err(format!(
            "node `{id}` sent a scored receipt for model {}, which is validated by exact answers",
            auth.terms.model
        ))
        }
        None if !receipt.commits_to(text) => {
            return Err(format!(
                "node `{id}` sent a receipt that does not commit to the answer it sent"
            ))
        }
        None => None,
    };
    let tokens = Usage {
        prompt_tokens: receipt.prompt_tokens,
        completion_tokens: receipt.completion_tokens,
        total_tokens: receipt
            .prompt_tokens
            .saturating_add(receipt.completion_tokens),
    };
    if tokens.completion_tokens > auth.terms.max_completion_tokens {
        return Err(format!(
            "node `{id}` claims {} completion tokens but the requester signed for at most {}",
            tokens.completion_tokens, auth.terms.max_completion_tokens
        ));
    }
    if tokens.prompt_tokens > auth.terms.max_prompt_tokens {
        return Err(format!(
            "node `{id}` claims {} prompt tokens but the requester signed for at most {}",
            tokens.prompt_tokens, auth.terms.max_prompt_tokens
        ));
    }
    let receipt = match ta.sink {
        Sink::Chain { .. } => receipt.verify(&node.pubkey, &node.host, &auth.request_hash)?,
        Sink::Memory(_) => VerifiedReceipt {
            output_commitment: hex32(&receipt.output_commitment),
            salt: hex32(&receipt.salt),
            signature: hex::decode(&receipt.signature).unwrap_or_default(),
        },
    };
    Ok(Served {
        receipt,
        tokens,
        response_hash: answer,
        scored,
    })
}

fn hex32(text: &str) -> [u8; 32] {
    hex::decode(text)
        .ok()
        .and_then(|b| b.try_into().ok())
        .unwrap_or([0; 32])
}

/// Turns a served request into a work record and hands it to the sink (with a chain: the
/// request `body` to the payload store, then the record to the durable outbox, charging the
/// requester tokens × price + commission). `Err` when the record could not be made durable:
/// the request is then never charged, and the requester must not get the answer's end.
async fn record(
    ta: &TransferAgent,
    auth: &Authenticated,
    body: &[u8],
    node: &RegisteredNode,
    served: Served,
) -> Result<(), String> {
    let terms = &auth.terms;
    let record = WorkRecord {
        inference_id: auth.inference_id(),
        requester: auth.address.clone(),
        requester_pubkey: auth.pubkey.clone(),
        requester_signature: auth.signature.clone(),
        request_hash: auth.request_hash.to_vec(),
        model: terms.model.clone(),
        prompt_hash: terms.body_hash.to_vec(),
        output_commitment: served.receipt.output_commitment.to_vec(),
        prompt_tokens: served.tokens.prompt_tokens,
        completion_tokens: served.tokens.completion_tokens,
        executor_node: node.info.id.clone(),
        commission: terms.commission.to_string(),
        executor_signature: served.receipt.signature,
        timestamp: terms.timestamp,
        nonce: terms.nonce.clone(),
        transfer_agent: terms.transfer_agent.clone(),
        max_price_per_token: terms.max_price_per_token.to_string(),
        max_completion_tokens: terms.max_completion_tokens,
        max_prompt_tokens: terms.max_prompt_tokens,
    };
    match &ta.sink {
        Sink::Chain { recorder, .. } => {
            let opening = OutputOpening {
                salt: served.receipt.salt,
                response_hash: served.response_hash,
                scored: served.scored,
            };
            let tokens = u128::from(record.prompt_tokens) + u128::from(record.completion_tokens);
            let model = ta.registry().terms(&terms.model);
            let cost = tokens.saturating_mul(model.price_per_token);
            let id = record.inference_id.clone();
            let served = gonka_client::settlement::Served {
                record,
                host: node.host.clone(),
                cost,
                work_per_token: model.work_per_token,
            };
            let entry = Entry {
                served,
                body: body.to_vec(),
                opening,
            };
            recorder.record(entry).await.inspect_err(|e| {
                tracing::error!(inference = %id, error = %e, "the request could not be made durable; it is not charged");
            })
        }
        Sink::Memory(records) => {
            lock(records).push(record);
            Ok(())
        }
    }
}

fn chain_unavailable(what: &str, e: anyhow::Error) -> ApiError {
    ApiError {
        status: StatusCode::SERVICE_UNAVAILABLE,
        message: format!("cannot check the requester's {what} on chain: {e:#}"),
        kind: "server_error",
        code: "chain_unavailable",
        retry_after_secs: Some(2),
    }
}

fn payment_required(message: String) -> ApiError {
    ApiError {
        status: StatusCode::PAYMENT_REQUIRED,
        message,
        kind: "invalid_request_error",
        code: "insufficient_funds",
        retry_after_secs: None,
    }
}

/// Holds the request's worst case `bound` against the requester's escrow for this TA (see
/// [`escrow`](crate::escrow)); 402 when the escrow cannot cover it, after asking the chain
/// again if the view was not just read.
async fn reserve_escrow(
    chain: &Chain,
    outbox: &Outbox,
    escrows: &Arc<EscrowBook>,
    auth: &Authenticated,
    bound: u128,
) -> Result<Reservation, ApiError> {
    let requester = auth.address.as_str();
    if escrows.needs_query(requester, Instant::now(), false) {
        escrow::fetch(chain, escrows, requester)
            .await
            .map_err(|e| chain_unavailable("escrow", e))?;
    }
    let shortfall = match escrows.reserve(requester, bound, outbox.owed_by(requester)) {
        Ok(held) => return Ok(held),
        Err(shortfall) => shortfall,
    };
    let shortfall = if escrows.needs_query(requester, Instant::now(), true) {
        escrow::fetch(chain, escrows, requester)
            .await
            .map_err(|e| chain_unavailable("escrow", e))?;
        match escrows.reserve(requester, bound, outbox.owed_by(requester)) {
            Ok(held) => return Ok(held),
            Err(shortfall) => shortfall,
        }
    } else {
        shortfall
    };
    let fix = match shortfall {
        Shortfall::Short { .. } => {
            "top it up (`gonkad tx settlement top-up-escrow`) or lower max_tokens"
        }
        _ => "open one (`gonkad tx settlement open-escrow`)",
    };
    Err(payment_required(format!(
        "requester {requester} cannot pay transfer agent {}: {shortfall}; {fix}",
        chain.address()
    )))
}

/// Serves one chat completion request. For a plain answer that went out, `node_time` is
/// set to how long the ML node that answered took (from the call to its last byte).
async fn handle_chat(
    ta: Arc<TransferAgent>,
    headers: HeaderMap,
    body: Body,
    node_time: &mut Option<Duration>,
) -> Result<Response, ApiError> {
    let bytes = read_body(
        body,
        ta.config.max_body_bytes,
        ta.config.server.body_timeout,
    )
    .await?;
    // The signature check runs outside every lock; only the replay check is serialised,
    // and it runs last so that refused requests fill no cache.
    let now = (ta.clock)();
    let auth = auth::verify(&headers, &bytes, now, ta.config.max_skew_secs)?;
    // A request refused here can be sent again as it is: its nonce is not remembered yet.
    lock(&ta.rate)
        .admit(&auth.address, Instant::now())
        .map_err(|limited| rate_limited(&auth.address, ta.config.rate_limit, limited))?;
    let routing: Routing = serde_json::from_slice(&bytes).map_err(|e| {
        ApiError::invalid_json(format!(
            "expected a JSON chat completion request {{model, messages, ...}}: {e}"
        ))
    })?;
    let model = auth.terms.model.clone();
    let (serves, terms, token_limit) = {
        let registry = ta.registry();
        (
            registry.serves(&model),
            registry.terms(&model),
            registry.max_tokens_per_record,
        )
    };
    let (address, chain_id) = own_terms(&ta);
    let max_tokens = auth::check_terms(
        &auth,
        &bytes,
        &address,
        &chain_id,
        terms.price_per_token,
        token_limit,
    )?;
    if !serves {
        return Err(model_unknown(&model));
    }
    // The worst case: the prompt and completion tokens the requester signed for (the ML node
    // refuses a longer prompt, and this TA a receipt claiming more).
    let bound = u128::from(auth.terms.max_prompt_tokens)
        .saturating_add(u128::from(max_tokens))
        .saturating_mul(terms.price_per_token)
        .saturating_add(auth.terms.commission);
    let mut reservation = match &ta.sink {
        Sink::Chain {
            chain,
            outbox,
            escrows,
            ..
        } => Some(reserve_escrow(chain, outbox, escrows, &auth, bound).await?),
        Sink::Memory(_) => None,
    };
    lock(&ta.replay).admit(&auth, now, ta.config.max_skew_secs)?;
    // The queue orders by the signed commission; bids beyond u64 ngnk all rank first.
    let commission = u64::try_from(auth.terms.commission).unwrap_or(u64::MAX);
    let inference_id = auth.inference_id();
    // The requester's signed headers go to the ML node, which checks the request itself.
    let forwarded: Vec<(&str, &str)> = REQUEST_HEADERS
        .iter()
        .filter_map(|name| {
            headers
                .get(*name)
                .and_then(|v| v.to_str().ok())
                .map(|v| (*name, v))
        })
        .collect();

    let mut last_error = String::new();
    for attempt in 1..=ta.config.max_attempts.max(1) {
        let lease = ta.acquire(&model, terms.min_vram_mib, commission).await?;
        let mut guard = LeaseGuard {
            ta: ta.clone(),
            lease: Some(lease),
        };
        let node = guard.node_id();
        let Some(registered) = ta.registered_node(&node) else {
            last_error = format!("node `{node}` left the registry");
            guard.finish(Outcome::Failed);
            continue;
        };
        // With a chain, the TA signs each call: an ML node on chain serves registered
        // transfer agents only, and only the one the requester named.
        let caller = match &ta.sink {
            // The body is the one authenticated: its hash is in the signed terms.
            Sink::Chain { chain, .. } => sign_node_call_hashed(
                chain.key(),
                &node,
                Some(auth.request_hash),
                &auth.terms.body_hash,
                (ta.clock)(),
            )
            .unwrap_or_default(),
            Sink::Memory(_) => Vec::new(),
        };
        let mut call_headers = forwarded.clone();
        call_headers.extend(caller.iter().map(|(name, value)| (*name, value.as_str())));
        let called = Instant::now();
        let resp = match upstream::request_with_headers(
            &registered.authority,
            "POST",
            "/v1/chat/completions",
            &call_headers,
            &bytes,
            ta.config.node_limits,
        )
        .await
        {
            // The TA checked the request already: a node that refuses it as unauthenticated
            // or forbidden disagrees with the chain (its list of transfer agents, its clock)
            // and is treated as failed, like a 5xx.
            Ok(r) if r.status < 500 && r.status != 401 && r.status != 403 => r,
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
                node: registered.clone(),
                _reservation: reservation.take(),
            });
            stream_body(ta.clone(), guard, resp, first, settle)
        } else {
            let full = match resp.read_body().await {
                Ok(b) => {
                    *node_time = Some(called.elapsed());
                    b
                }
                Err(e) => {
                    last_error = format!("node `{node}`: reading the answer: {e}");
                    tracing::warn!(%node, attempt, error = %e, "ML node answer failed; retrying elsewhere");
                    guard.finish(Outcome::Failed);
                    continue;
                }
            };
            if ok {
                let answer = serde_json::from_slice::<AnswerOnly>(&full).unwrap_or_default();
                let text = answer.text();
                let usage = answer.usage.unwrap_or_default();
                match served(&ta, &registered, &auth, &text, receipt, usage) {
                    Ok(served) => {
                        if let Err(message) = record(&ta, &auth, &bytes, &registered, served).await
                        {
                            guard.finish(Outcome::Ok);
                            return Err(not_recorded(message));
                        }
                    }
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
            HeaderValue::from_str(&inference_id).expect("hex is a valid header value"),
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
    /// The request's hold on its requester's escrow, until the record counts as owed.
    _reservation: Option<Reservation>,
    /// The request body as signed, for the payload store.
    body: Bytes,
    node: RegisteredNode,
}

/// The answer text (the content deltas, concatenated) and the tokens of a finished event
/// stream: the usage chunk if any, else one completion token per content chunk.
fn stream_answer(sse: &[u8]) -> (String, Usage) {
    let mut text = String::new();
    let mut content_chunks = 0u64;
    let mut usage = None;
    for data in SseParser::parse_all(sse) {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(&data) else {
            continue;
        };
        if let Some(u) = v.get("usage").filter(|u| !u.is_null()) {
            if let Ok(t) = serde_json::from_value::<Usage>(u.clone()) {
                usage = Some(t);
            }
        }
        if let Some(delta) = v["choices"][0]["delta"]["content"]
            .as_str()
            .filter(|s| !s.is_empty())
        {
            text.push_str(delta);
            content_chunks += 1;
        }
    }
    let usage = usage.unwrap_or(Usage {
        prompt_tokens: 0,
        completion_tokens: content_chunks,
        total_tokens: content_chunks,
    });
    (text, usage)
}

/// How an OpenAI event stream ends.
const STREAM_END: &[u8] = b"data: [DONE]\n\n";

/// Chunks relayed to the client that may wait unread.
const RELAY_BUFFER_CHUNKS: usize = 64;

/// Longest a client may leave a full relay buffer unread before the TA stops relaying to it
/// (and finishes reading the node without it).
const CLIENT_STALL: Duration = Duration::from_secs(30);

/// Hands `chunk` to the client unless it is gone or stalled, in which case it is dropped for
/// the rest of the stream: the node is read to the end regardless, to settle what was served.
async fn relay(
    client: &mut Option<tokio::sync::mpsc::Sender<std::io::Result<Bytes>>>,
    chunk: Bytes,
    node: &str,
) {
    let Some(tx) = client else { return };
    let sent = tokio::time::timeout(CLIENT_STALL, tx.send(Ok(chunk))).await;
    if !matches!(sent, Ok(Ok(()))) {
        tracing::info!(%node, "the client left or stopped reading the stream; finishing it without the client");
        *client = None;
    }
}

/// Relays the node's event stream as it arrives (starting with its `first` bytes, already
/// read) within the node limits, and records the request at a clean end; the chunk that ends
/// the stream (`data: [DONE]`) goes out only once the record is durable, and never when it
/// could not be made so (the client gets an error instead, and the request is not charged).
/// A node that goes silent, runs past the total time or sends too much is cut off and cooled
/// down.
///
/// A task reads the node, not the client's connection: when the client hangs up after
/// content was delivered, the task still reads the stream to its end and its receipt, and
/// the delivered work is settled (the requester got the tokens it asked for).
fn stream_body(
    ta: Arc<TransferAgent>,
    mut guard: LeaseGuard,
    mut resp: upstream::UpstreamResponse,
    first: Vec<u8>,
    settle: Option<Settle>,
) -> Body {
    let (tx, rx) = tokio::sync::mpsc::channel::<std::io::Result<Bytes>>(RELAY_BUFFER_CHUNKS);
    let node = guard.node_id();
    tokio::spawn(async move {
        let mut client = Some(tx);
        // The chunk that ends the stream goes out only once the request is recorded.
        let mut held = None;
        let mut seen = Vec::new();
        let mut next = Some(first);
        loop {
            let chunk = match next.take() {
                Some(chunk) => chunk,
                None => match resp.next_chunk().await {
                    Ok(None) => break,
                    Ok(Some(chunk)) => chunk,
                    Err(e) => {
                        tracing::warn!(%node, error = %e, "ML node stream broke");
                        if let Some(tx) = client.take() {
                            let _ = tx.send(Err(e)).await;
                        }
                        guard.finish(Outcome::Failed);
                        return;
                    }
                },
            };
            seen.extend_from_slice(&chunk);
            if let Some(earlier) = held.take() {
                relay(&mut client, earlier, &node).await;
            }
            if seen.ends_with(STREAM_END) {
                held = Some(Bytes::from(chunk));
            } else {
                relay(&mut client, Bytes::from(chunk), &node).await;
            }
        }
        if !seen.ends_with(STREAM_END) {
            tracing::warn!(%node, "ML node ended the stream early");
            guard.finish(Outcome::Failed);
            return;
        }
        let mut outcome = Outcome::Ok;
        if let Some(s) = settle {
            let receipt = Receipt::find_in_sse(&seen);
            let (text, usage) = stream_answer(&seen);
            match served(&ta, &s.node, &s.auth, &text, receipt, usage) {
                Ok(served) => {
                    if let Err(message) = record(&ta, &s.auth, &s.body, &s.node, served).await {
                        if let Some(tx) = client.take() {
                            let _ = tx.send(Err(std::io::Error::other(message))).await;
                        }
                        held = None;
                    }
                }
                Err(e) => {
                    tracing::warn!(%node, error = %e, "streamed answer cannot settle");
                    outcome = Outcome::Failed;
                }
            }
        }
        if let Some(end) = held {
            relay(&mut client, end, &node).await;
        }
        guard.finish(outcome);
    });
    Body::from_stream(futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|item| (item, rx))
    }))
}
