//! gonka-node: the ML node, an OpenAI-compatible HTTP server in front of a model backend,
//! with its command line ([`cli`]: `gonka-sidecar ml-node`).
//!
//! The backend is the built-in deterministic reference model (the default), or an
//! OpenAI-compatible server (vLLM, llama.cpp) the node forwards to ([`forward`]). Beside it the
//! node may serve a language model from a GGUF file ([`LlmModel`], `--llm-model-file`) under
//! its own model id, with sampling and OpenAI log-probabilities.
//!
//! Routes: `POST /v1/chat/completions` (plain or `stream: true` server-sent events),
//! `GET /v1/models`, `GET /v1/load`, `GET /v1/identity`, `POST /gonka/v1/cosign` ([`cosign`])
//! and `POST /gonka/v1/score` ([`score`]: the language model's scores of given output tokens,
//! for the host's validation worker). At most
//! [`MlNodeConfig::max_concurrency`] requests are served at once, whatever the backend;
//! requests beyond the limit get 503 with `Retry-After`. Every error body is
//! `{"error": {"message", "type", "code"}}` (see [`ApiError`]). The server runs within
//! [`MlNodeConfig::server`]: a client must send its header block within the header timeout
//! (else the connection is closed) and its body within the body timeout (else 408
//! `request_timeout`), and at most `max_connections` connections are served at once.
//!
//! # Execution receipts
//! A request carrying the requester's signed headers
//! ([`REQUEST_HEADERS`](gonka_client::request::REQUEST_HEADERS), forwarded by the transfer
//! agent) is checked by the node itself before it runs: the signature must verify
//! over the request/v3 hash of the body it executes and the signed terms (401 otherwise),
//! the timestamp must be within `max_skew_secs`, the body must agree with the terms and the
//! signed model must be this node's (400 `terms_mismatch`, 404). The completion budget is the
//! signed `x-gonka-max-tokens`. Such a request is answered, when the node has a response key,
//! with a signed [`Receipt`] (receipt/v2: the request hash the node computed, a salted
//! commitment to the content the client receives, the token counts of `usage`, the node id
//! and its host): in the [`HEADER_RECEIPT`] header of a plain answer, or as the SSE comment
//! [`Receipt::sse_comment`] just before `data: [DONE]` of a stream. Nobody can obtain a
//! receipt for a request hash of their choosing. A request without signed headers (direct
//! use) gets no receipt.
//!
//! For the language model when the chain validates it by log-probabilities
//! ([`LlmModel::logprob_top_k`]), the receipt commits instead to the generation's scored
//! output (every generated token with its log-probability and the model's top-k alternatives,
//! and the stop token's when generation stopped; [`gonka_proto::scored`]) and carries it
//! ([`Receipt::sign_scored`]). The node generates with at least k alternatives for that, and
//! still reports to the client only the `top_logprobs` it asked for.
//!
//! # Cheating (tests and the simulation only, `testing` feature)
//! Built with the `testing` cargo feature, a node configured with
//! `MlNodeConfig::testing_cheat_fraction` above 0 answers a deterministic fraction of
//! receipted requests with the wrong model of its built-in backend and signs them anyway; see
//! `cheat`. The same feature exposes `testing`, the HTTP helper of the roles' socket tests.
//! Without it (release builds) neither the code nor the `--testing-cheat-fraction` flag exists.
//!
//! # Registration
//! With a chain, the node registers (or updates) itself there after it starts listening; see
//! [`register`].

pub mod access;
pub mod api;
mod builtin;
#[cfg(feature = "testing")]
pub mod cheat;
pub mod cli;
pub mod cosign;
pub mod forward;
mod llm;
mod metrics;
pub mod register;
pub mod score;
#[cfg(feature = "testing")]
pub mod testing;
pub mod weights;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use k256::ecdsa::SigningKey;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};

pub use api::*;
use forward::Upstream;
pub use gonka_client::openai::ApiError;
use gonka_client::receipt::{Receipt, HEADER_RECEIPT};
use gonka_client::request::{
    body_agrees, verify_request, RequestTerms, HEADER_MAX_PROMPT_TOKENS, HEADER_SIGNATURE,
};
use gonka_client::server::{read_body, ServerLimits};
use gonka_client::unix_now;
use gonka_model::weights::Weights;
use gonka_model::{self as reference, ChatTurn, ReferenceModel};
use gonka_proto::disputes::ScoredOutput;
use gonka_proto::signing::TEMPLATE_TOKENS;
pub use llm::LlmModel;

/// Settings of an ML node.
#[derive(Debug, Clone)]
pub struct MlNodeConfig {
    /// Address to listen on (`127.0.0.1:0` picks a free port).
    pub listen: SocketAddr,
    /// The model id clients must name, e.g. `gonka/reference-1`.
    pub model_id: String,
    /// The id the node is registered under on chain and names in its receipts.
    pub node_id: String,
    /// The host account the node is registered by, named in its receipts (empty off chain).
    pub host: String,
    /// Allowed difference between a signed request's timestamp and the node's clock, in
    /// seconds (larger than the TA's: a request may wait in the TA's queue).
    pub max_skew_secs: u64,
    /// Who may call the node (see [`access`]); `None` serves anyone (a node off chain, tests).
    pub callers: Option<Arc<access::Callers>>,
    /// The key that signs execution receipts (its public key is registered on chain);
    /// without one the node answers without receipts.
    pub response_key: Option<SigningKey>,
    /// The host's co-signer of committed batches (`POST /gonka/v1/cosign`), set once the chain
    /// answered its id and the model's price ([`cosign::prepare`]); empty off chain.
    pub cosigner: Arc<std::sync::OnceLock<cosign::Cosigner>>,
    /// The OpenAI-compatible server to forward to; `None` runs the built-in reference model.
    pub upstream: Option<Upstream>,
    /// Seed of the reference model's weights.
    pub seed: u64,
    /// Weights the built-in reference model serves instead of the seed's: a model trained on
    /// chain, loaded and checked against its SHA-256 ([`weights::load`]).
    pub trained_weights: Option<Arc<Weights>>,
    /// A language model served beside `model_id`, under its own id.
    pub llm: Option<LlmModel>,
    /// Requests served at once.
    pub max_concurrency: usize,
    /// Largest `max_tokens` accepted.
    pub max_tokens_cap: u32,
    /// `max_tokens` used when a request names none (capped by `max_tokens_cap`).
    pub default_max_tokens: u32,
    /// Largest chat-formatted prompt accepted, in bytes (= prompt tokens of the reference
    /// model).
    pub max_prompt_bytes: usize,
    /// Largest request body accepted, in bytes.
    pub max_body_bytes: usize,
    /// Largest co-sign request accepted (`POST /gonka/v1/cosign`), in bytes: every leaf of
    /// the host's share of a batch with its proof, about 2.5 kB each, so it bounds the
    /// records a host can co-sign in one batch ([`MAX_COSIGN_BODY_BYTES`] by default).
    pub max_cosign_body_bytes: usize,
    /// Header and body timeouts and the connection cap of the node's server.
    pub server: ServerLimits,
    /// FOR TESTS ONLY: sleep this long after each generated token, to hold generation slots
    /// busy long enough to observe the concurrency limit. Zero in production.
    pub testing_delay_per_token: Duration,
    /// FOR TESTS AND THE SIMULATION ONLY: the fraction (0.0 to 1.0) of requests carrying a
    /// request hash that the built-in backend answers wrongly, still signing a receipt (see
    /// [`cheat`]). Ignored by the forwarding backend.
    #[cfg(feature = "testing")]
    pub testing_cheat_fraction: f64,
}

impl Default for MlNodeConfig {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            model_id: DEFAULT_MODEL_ID.to_string(),
            node_id: DEFAULT_NODE_ID.to_string(),
            host: String::new(),
            max_skew_secs: 300,
            callers: None,
            response_key: None,
            cosigner: Arc::default(),
            upstream: None,
            seed: reference::DEFAULT_SEED,
            trained_weights: None,
            llm: None,
            max_concurrency: 4,
            max_tokens_cap: 4096,
            default_max_tokens: 256,
            max_prompt_bytes: 64 * 1024,
            max_body_bytes: 1024 * 1024,
            max_cosign_body_bytes: MAX_COSIGN_BODY_BYTES,
            server: ServerLimits::default(),
            testing_delay_per_token: Duration::ZERO,
            #[cfg(feature = "testing")]
            testing_cheat_fraction: 0.0,
        }
    }
}

impl MlNodeConfig {
    /// What `GET /v1/identity` answers, and what the node registers on chain.
    pub fn identity(&self) -> Identity {
        Identity {
            node_id: self.node_id.clone(),
            pubkey: self
                .response_key
                .as_ref()
                .map(|key| hex::encode(key.verifying_key().to_encoded_point(true).as_bytes())),
            models: self.models(),
            max_concurrency: self.max_concurrency,
        }
    }

    /// The model ids served: `model_id`, then the language model's if any.
    pub fn models(&self) -> Vec<String> {
        std::iter::once(self.model_id.clone())
            .chain(self.llm.as_ref().map(|m| m.id.clone()))
            .collect()
    }
}

/// The model id the localnet and the tests use.
pub const DEFAULT_MODEL_ID: &str = "gonka/reference-1";

/// The model id `--llm-model-file` serves by default (SmolLM2-135M-Instruct).
pub const LLM_MODEL_ID: &str = gonka_client::chat::LLM_MODEL;

/// The node id used when none is configured.
pub const DEFAULT_NODE_ID: &str = "ml-node-1";

/// Default largest co-sign request, 32 MiB: a host's share of a full batch of the transfer
/// agent's default 10,000 records fits (a 1 MiB limit, the inference requests' default,
/// stalled settlement for good once a host's share passed about 400 leaves: each refused
/// batch came back larger).
pub const MAX_COSIGN_BODY_BYTES: usize = 32 * 1024 * 1024;

/// What computes the completions.
enum Backend {
    /// The built-in deterministic reference model, run on blocking threads.
    Reference(Arc<ReferenceModel>),
    /// An OpenAI-compatible server the requests are forwarded to.
    Forward(Upstream),
    /// A language model from a GGUF file.
    Llm(LlmModel),
}

/// Shared state of the handlers.
struct Node {
    config: MlNodeConfig,
    backend: Backend,
    /// The language model served beside `backend`, if any.
    llm: Option<Backend>,
    /// The wrong backend of a cheating node and when it answers with it.
    #[cfg(feature = "testing")]
    cheat: Option<cheat::Cheat>,
    slots: Arc<Semaphore>,
    started: u64,
    next_request: AtomicU64,
    metrics: metrics::NodeMetrics,
}

impl Node {
    /// A fresh `chatcmpl-...` id.
    fn completion_id(&self) -> String {
        let n = self.next_request.fetch_add(1, Ordering::Relaxed);
        format!("chatcmpl-{:x}{:06x}", self.started, n)
    }

    /// The language model, if `model` names it.
    fn llm_for(&self, model: &str) -> Option<&LlmModel> {
        match &self.llm {
            Some(Backend::Llm(llm)) if llm.id == model => Some(llm),
            _ => None,
        }
    }

    /// The backend that answers an admitted request: the language model for its id, else
    /// the configured one, or the wrong one for a request a cheating node (`testing`
    /// feature) selects.
    #[cfg_attr(not(feature = "testing"), allow(unused_variables))]
    fn backend_for(&self, model: &str, request_hash: Option<&[u8; 32]>) -> &Backend {
        if let Some(llm @ Backend::Llm(m)) = &self.llm {
            if m.id == model {
                return llm;
            }
        }
        #[cfg(feature = "testing")]
        if let Some(wrong) = self
            .cheat
            .as_ref()
            .and_then(|c| c.backend_for(request_hash))
        {
            return wrong;
        }
        &self.backend
    }
}

/// The ML node's routes, ready to serve.
pub fn router(config: MlNodeConfig) -> Router {
    let backend = match &config.upstream {
        Some(upstream) => Backend::Forward(upstream.clone()),
        None => Backend::Reference(Arc::new(match &config.trained_weights {
            Some(weights) => ReferenceModel::from_weights(config.seed, Weights::clone(weights)),
            None => ReferenceModel::new(config.seed),
        })),
    };
    let node = Arc::new(Node {
        backend,
        llm: config.llm.clone().map(Backend::Llm),
        #[cfg(feature = "testing")]
        cheat: cheat::Cheat::new(&config),
        slots: Arc::new(Semaphore::new(config.max_concurrency)),
        started: unix_now(),
        next_request: AtomicU64::new(0),
        metrics: metrics::NodeMetrics::default(),
        config,
    });
    let scraped = node.clone();
    let metrics = gonka_client::metrics::router(node.metrics.registry(), move || {
        let slots = scraped.config.max_concurrency;
        let free = scraped.slots.available_permits();
        scraped.metrics.slots.set(slots as i64);
        scraped
            .metrics
            .busy_slots
            .set(slots.saturating_sub(free) as i64);
    });
    Router::new()
        .route("/v1/chat/completions", post(chat_completions))
        .route("/v1/models", get(models))
        .route("/v1/load", get(load))
        .route("/v1/identity", get(identity))
        .route("/gonka/v1/cosign", post(cosign::handle))
        .route(score::SCORE_PATH, post(score::handle))
        .fallback(|uri: Uri| async move { ApiError::route_not_found(uri.path()) })
        .with_state(node)
        .merge(metrics)
}

/// Serves the ML node on `listener` until `shutdown` completes, within
/// [`MlNodeConfig::server`] (header timeout, connection cap).
pub async fn serve(
    listener: TcpListener,
    config: MlNodeConfig,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let limits = config.server;
    gonka_client::server::serve(listener, router(config), limits, shutdown).await
}

async fn models(State(node): State<Arc<Node>>) -> Json<ModelList> {
    Json(ModelList {
        object: "list",
        data: node
            .config
            .models()
            .into_iter()
            .map(|id| ModelCard {
                id,
                object: "model",
                created: node.started,
                owned_by: "gonka",
            })
            .collect(),
    })
}

async fn load(State(node): State<Arc<Node>>) -> Json<Load> {
    let max = node.config.max_concurrency;
    Json(Load {
        in_flight: max - node.slots.available_permits().min(max),
        max_concurrency: max,
    })
}

async fn identity(State(node): State<Arc<Node>>) -> Json<Identity> {
    Json(node.config.identity())
}

/// How a request asked to be decoded (read by the language model backend only).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Sampling {
    /// 0 decodes greedily.
    temperature: f32,
    top_p: f32,
    seed: u64,
    /// Report the tokens' log-probabilities.
    logprobs: bool,
    /// Alternatives reported per token.
    top_logprobs: usize,
}

/// Largest `top_logprobs` (OpenAI's limit).
const MAX_TOP_LOGPROBS: u32 = 20;

impl Sampling {
    /// The request's sampling fields, checked.
    fn of(req: &ChatCompletionRequest) -> Result<Sampling, ApiError> {
        let req = &req.sampling;
        let temperature = req.temperature.unwrap_or(0.0);
        if !(0.0..=2.0).contains(&temperature) {
            return Err(ApiError::invalid_value(
                "invalid_temperature",
                format!("`temperature` must be between 0 and 2 but is {temperature}"),
            ));
        }
        let top_p = req.top_p.unwrap_or(1.0);
        if !(top_p > 0.0 && top_p <= 1.0) {
            return Err(ApiError::invalid_value(
                "invalid_top_p",
                format!("`top_p` must be in (0, 1] but is {top_p}"),
            ));
        }
        let top_logprobs = req.top_logprobs.unwrap_or(0);
        if top_logprobs > MAX_TOP_LOGPROBS {
            return Err(ApiError::invalid_value(
                "invalid_top_logprobs",
                format!(
                    "`top_logprobs` must be between 0 and {MAX_TOP_LOGPROBS} but is {top_logprobs}"
                ),
            ));
        }
        if top_logprobs > 0 && !req.logprobs {
            return Err(ApiError::invalid_value(
                "invalid_top_logprobs",
                "`top_logprobs` needs `logprobs: true`".to_string(),
            ));
        }
        Ok(Sampling {
            temperature: temperature as f32,
            top_p: top_p as f32,
            seed: req.seed.unwrap_or(0),
            logprobs: req.logprobs,
            top_logprobs: top_logprobs as usize,
        })
    }
}

/// A request that passed validation and holds a generation slot.
struct Admitted {
    /// The request body as received (the forwarding backend re-sends it).
    body: Bytes,
    /// The model id the request names (one this node serves).
    model: String,
    /// The chat-formatted prompt as tokens of the model that answers (bytes for the
    /// reference model and the forwarding backend).
    prompt_tokens: Vec<u32>,
    /// Sampling and log-probabilities.
    sampling: Sampling,
    max_tokens: usize,
    stream: bool,
    include_usage: bool,
    /// The request/v3 hash of a signed request, computed by this node from the body and the
    /// requester's signed terms.
    request_hash: Option<[u8; 32]>,
    /// Alternatives per position of the scored output the receipt commits to: set for a
    /// request this node receipts ([`ReceiptOrder::for_request`]) of the language model when
    /// the chain validates it by log-probabilities ([`LlmModel::logprob_top_k`]).
    scored_top_k: Option<usize>,
    /// The generation slot, held until the answer is complete.
    permit: OwnedSemaphorePermit,
}

/// Checks a requester-signed request (see the module docs): the request hash the node
/// computed itself, and the signed completion budget.
/// A requester-signed request as the node checked it.
struct SignedByRequester {
    /// The request/v3 hash, computed here.
    hash: [u8; 32],
    /// The signed completion budget.
    budget: i64,
    terms: RequestTerms,
}

fn check_signed(
    cfg: &MlNodeConfig,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<SignedByRequester, ApiError> {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let signed = verify_request(&header, body, unix_now(), cfg.max_skew_secs)
        .map_err(|e| ApiError::unauthorized(e.code, e.message))?;
    let budget =
        body_agrees(body, &signed.terms).map_err(|e| ApiError::invalid_value(e.code, e.message))?;
    if !cfg.models().contains(&signed.terms.model) {
        return Err(ApiError::model_not_found(
            &signed.terms.model,
            &cfg.models().join(", "),
        ));
    }
    Ok(SignedByRequester {
        hash: signed.caller.signed,
        budget: i64::try_from(budget).unwrap_or(i64::MAX),
        terms: signed.terms,
    })
}

/// Checks a request in the order a client would fix it: body size, signed terms (when
/// signed), JSON shape, model, messages, max_tokens, prompt size; then takes a generation
/// slot.
async fn admit(node: &Node, headers: &HeaderMap, body: Body) -> Result<Admitted, ApiError> {
    let cfg = &node.config;
    let bytes = read_body(body, cfg.max_body_bytes, cfg.server.body_timeout).await?;
    let signed = match headers.contains_key(HEADER_SIGNATURE) {
        true => Some(check_signed(cfg, headers, &bytes)?),
        false => None,
    };
    if let Some(callers) = &cfg.callers {
        if let Some(signed) = &signed {
            // A transfer agent registered since the last read is served at once.
            callers.learn(&signed.terms.transfer_agent).await;
        }
        callers.admit(
            &cfg.node_id,
            headers,
            signed.as_ref().map(|s| (&s.terms, s.hash)),
            &bytes,
            unix_now(),
            cfg.max_skew_secs,
        )?;
    }
    let req: ChatCompletionRequest = serde_json::from_slice(&bytes).map_err(|e| {
        ApiError::invalid_json(format!(
            "expected a JSON chat completion request {{model, messages, ...}}: {e}"
        ))
    })?;
    if !cfg.models().contains(&req.model) {
        return Err(ApiError::model_not_found(
            &req.model,
            &cfg.models().join(", "),
        ));
    }
    if req.messages.is_empty() {
        return Err(ApiError::invalid_value(
            "invalid_messages",
            "`messages` must hold at least one message but is empty".to_string(),
        ));
    }
    let cap = i64::from(cfg.max_tokens_cap);
    let asked = match &signed {
        Some(s) => Some(s.budget),
        None => req.max_tokens.or(req.max_completion_tokens),
    };
    let max_tokens = match asked {
        None => i64::from(cfg.default_max_tokens.min(cfg.max_tokens_cap)),
        Some(n) if (1..=cap).contains(&n) => n,
        Some(n) => {
            return Err(ApiError::invalid_value(
                "invalid_max_tokens",
                format!("`max_tokens` must be between 1 and {cap} but is {n}"),
            ))
        }
    };
    let prompt_tokens = prompt_of(node, &req)?;
    if let Some(signed) = &signed {
        check_prompt_budget(node, &req.model, prompt_tokens.len(), &signed.terms)?;
    }
    let sampling = Sampling::of(&req)?;
    let scored_top_k = match node.llm_for(&req.model) {
        Some(llm) if signed.is_some() && cfg.response_key.is_some() => {
            llm.logprob_top_k.map(|k| k as usize)
        }
        _ => None,
    };
    let permit = node
        .slots
        .clone()
        .try_acquire_owned()
        .map_err(|_| ApiError::overloaded(cfg.max_concurrency))?;
    Ok(Admitted {
        body: bytes,
        model: req.model,
        prompt_tokens,
        sampling,
        // max_tokens is in 1..=u32::MAX here, so it fits usize on every supported target.
        max_tokens: max_tokens as usize,
        stream: req.stream,
        include_usage: req.stream_options.is_some_and(|o| o.include_usage),
        request_hash: signed.map(|s| s.hash),
        scored_top_k,
        permit,
    })
}

/// Refuses a prompt of more tokens than the requester signed for (`prompt_too_long`), for
/// the backends that count the tokens they read: the reference model and a language model.
/// A forwarded request's tokens are the upstream's to count; the transfer agent refuses a
/// receipt claiming more than the signed bound.
fn check_prompt_budget(
    node: &Node,
    model: &str,
    tokens: usize,
    terms: &RequestTerms,
) -> Result<(), ApiError> {
    let counted = !matches!(node.backend_for(model, None), Backend::Forward(_));
    if counted && tokens as u64 > terms.max_prompt_tokens {
        return Err(ApiError::invalid_value(
            "prompt_too_long",
            format!(
                "the chat-formatted prompt is {tokens} tokens of {model} but `{HEADER_MAX_PROMPT_TOKENS}` signs at most {}; sign a larger bound (the body's length in bytes plus {TEMPLATE_TOKENS} always suffices)",
                terms.max_prompt_tokens
            ),
        ));
    }
    Ok(())
}

/// The chat-formatted prompt of a request for a model this node serves, as the tokens of
/// the model that answers it: bounded by [`MlNodeConfig::max_prompt_bytes`] for every
/// backend (413 beyond), then the language model's own tokens for it, the reference model's
/// (bytes) for the others. Generation and scoring ([`score`]) read prompts only from here, so
/// both see the same tokens.
fn prompt_of(node: &Node, req: &ChatCompletionRequest) -> Result<Vec<u32>, ApiError> {
    let cfg = &node.config;
    let prompt_tokens = reference_prompt(&req.messages);
    if prompt_tokens.len() > cfg.max_prompt_bytes {
        return Err(ApiError::too_large(
            "context_length_exceeded",
            format!(
                "the chat-formatted prompt must be at most {} bytes but is {}",
                cfg.max_prompt_bytes,
                prompt_tokens.len()
            ),
        ));
    }
    match node.llm_for(&req.model) {
        Some(llm) => {
            let turns: Vec<(String, String)> = req
                .messages
                .iter()
                .map(|m| (m.role.clone(), m.text()))
                .collect();
            llm::prompt(&llm.model, &turns)
        }
        None => Ok(prompt_tokens),
    }
}

/// The chat-formatted prompt of `messages` as the reference model's tokens (one per byte):
/// what the node bounds by [`MlNodeConfig::max_prompt_bytes`] for every backend and what the
/// reference model reads.
pub fn reference_prompt(messages: &[ChatMessage]) -> Vec<u32> {
    let texts: Vec<String> = messages.iter().map(ChatMessage::text).collect();
    let turns: Vec<ChatTurn<'_>> = messages
        .iter()
        .zip(&texts)
        .map(|(m, text)| ChatTurn {
            role: &m.role,
            content: text,
        })
        .collect();
    reference::encode_chat(&turns)
}

/// A complete plain answer of a backend, before its receipt.
struct Answer {
    /// The `chat.completion` body, `model` already the served id.
    body: serde_json::Value,
    /// `choices[0].message.content`: the text the receipt hashes.
    content: String,
    /// The token counts of `body.usage`.
    usage: Usage,
    /// The scored output the receipt commits to instead of `content` (see
    /// [`Admitted::scored_top_k`]).
    scored: Option<ScoredOutput>,
}

/// Builds the `chat.completion.chunk` events of one streamed answer (same id, creation time
/// and model on every chunk).
struct Chunks {
    id: String,
    created: u64,
    model: String,
}

impl Chunks {
    /// A fresh answer's chunks, as `model`.
    fn new(node: &Node, model: String) -> Chunks {
        Chunks {
            id: node.completion_id(),
            created: unix_now(),
            model,
        }
    }

    /// One chunk: a choice with `delta` (none for the usage chunk), its tokens'
    /// log-probabilities, the finish reason on the last content chunk, `usage` on the usage
    /// chunk.
    fn chunk(
        &self,
        delta: Option<Delta>,
        logprobs: Option<gonka_client::openai::ChoiceLogprobs>,
        finish: Option<&'static str>,
        usage: Option<Usage>,
    ) -> StreamItem {
        let content = delta
            .as_ref()
            .and_then(|d| d.content.clone())
            .unwrap_or_default();
        let c = ChatCompletionChunk {
            id: self.id.clone(),
            object: "chat.completion.chunk",
            created: self.created,
            model: self.model.clone(),
            choices: delta
                .map(|delta| ChunkChoice {
                    index: 0,
                    delta,
                    logprobs,
                    finish_reason: finish,
                })
                .into_iter()
                .collect(),
            usage,
        };
        // Serialising plain structs of strings and numbers cannot fail.
        let data = serde_json::to_string(&c).unwrap_or_default();
        StreamItem::Chunk { data, content }
    }
}

/// What a backend's streaming task hands the response, in order.
enum StreamItem {
    /// One `chat.completion.chunk` to send as a `data:` event (compact JSON, no newline),
    /// with the text its delta adds.
    Chunk { data: String, content: String },
    /// The completion is over; `usage` holds its token counts if the backend reported them,
    /// `scored` the scored output the receipt commits to (see [`Admitted::scored_top_k`]).
    End {
        usage: Option<Usage>,
        scored: Option<ScoredOutput>,
    },
}

impl Backend {
    async fn complete(&self, node: &Node, admitted: Admitted) -> Result<Answer, ApiError> {
        match self {
            Backend::Reference(model) => builtin::complete(node, model, admitted).await,
            Backend::Forward(upstream) => upstream.complete(&node.config.model_id, admitted).await,
            Backend::Llm(model) => llm::complete(node, model, admitted).await,
        }
    }

    async fn stream(
        &self,
        node: &Node,
        admitted: Admitted,
    ) -> Result<mpsc::Receiver<StreamItem>, ApiError> {
        match self {
            Backend::Reference(model) => Ok(builtin::stream(node, model, admitted)),
            Backend::Forward(upstream) => upstream.stream(&node.config.model_id, admitted).await,
            Backend::Llm(model) => Ok(llm::stream(node, model, admitted)),
        }
    }
}

/// A receipt the caller asked for and this node can sign.
struct ReceiptOrder {
    key: SigningKey,
    node_id: String,
    host: String,
    request_hash: [u8; 32],
}

impl ReceiptOrder {
    /// The receipt a signed request with `request_hash` asks for: `None` for an unsigned
    /// request or without a response key.
    fn for_request(config: &MlNodeConfig, request_hash: Option<[u8; 32]>) -> Option<Self> {
        let request_hash = request_hash?;
        let Some(key) = &config.response_key else {
            tracing::debug!("a receipt was asked for but this ML node has no response key");
            return None;
        };
        Some(Self {
            key: key.clone(),
            node_id: config.node_id.clone(),
            host: config.host.clone(),
            request_hash,
        })
    }

    /// The receipt of an answer of `text` with `usage`: committing to its `scored` output
    /// when it has one (a "logprobs" model), else to the text.
    fn sign(&self, text: &str, usage: &Usage, scored: Option<&ScoredOutput>) -> Receipt {
        match scored {
            Some(output) => Receipt::sign_scored(
                &self.key,
                &self.node_id,
                &self.host,
                &self.request_hash,
                output,
                usage.completion_tokens,
            ),
            None => Receipt::sign(
                &self.key,
                &self.node_id,
                &self.host,
                &self.request_hash,
                text,
                usage.prompt_tokens,
                usage.completion_tokens,
            ),
        }
    }
}

async fn chat_completions(
    State(node): State<Arc<Node>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let started = std::time::Instant::now();
    let served = async {
        let admitted = admit(&node, &headers, body).await?;
        let order = ReceiptOrder::for_request(&node.config, admitted.request_hash);
        let backend = node.backend_for(&admitted.model, admitted.request_hash.as_ref());
        if admitted.stream {
            let items = backend.stream(&node, admitted).await?;
            Ok(stream_response(items, order))
        } else {
            let answer = backend.complete(&node, admitted).await?;
            plain_response(answer, order.as_ref())
        }
    }
    .await;
    let response = served.unwrap_or_else(|e| {
        if e.status.is_server_error() {
            tracing::warn!(status = e.status.as_u16(), code = e.code, message = %e.message, "request failed");
        } else {
            tracing::info!(status = e.status.as_u16(), code = e.code, "request refused");
        }
        e.into_response()
    });
    node.metrics
        .answered(response.status().as_u16(), started.elapsed());
    response
}

/// A plain answer as JSON, with its receipt in [`HEADER_RECEIPT`] when one was ordered.
fn plain_response(answer: Answer, order: Option<&ReceiptOrder>) -> Result<Response, ApiError> {
    tracing::info!(
        prompt_tokens = answer.usage.prompt_tokens,
        completion_tokens = answer.usage.completion_tokens,
        receipt = order.is_some(),
        "completion served"
    );
    let mut response = Json(&answer.body).into_response();
    if let Some(order) = order {
        let receipt = order.sign(&answer.content, &answer.usage, answer.scored.as_ref());
        let value = HeaderValue::try_from(receipt.to_header()).map_err(|e| {
            ApiError::internal(format!("the receipt is not a valid header value: {e}"))
        })?;
        response.headers_mut().insert(HEADER_RECEIPT, value);
    }
    Ok(response)
}

/// A server-sent event stream of the backend's chunks; at the end, the receipt comment (when
/// one was ordered) and `data: [DONE]`. If the backend stops without finishing, the stream
/// ends without `[DONE]`, so the client sees an incomplete answer rather than a wrong one.
fn stream_response(items: mpsc::Receiver<StreamItem>, order: Option<ReceiptOrder>) -> Response {
    struct Relay {
        items: mpsc::Receiver<StreamItem>,
        order: Option<ReceiptOrder>,
        text: String,
        over: bool,
    }
    let relay = Relay {
        items,
        order,
        text: String::new(),
        over: false,
    };
    let events = futures_util::stream::unfold(relay, |mut st| async move {
        if st.over {
            return None;
        }
        let event = match st.items.recv().await {
            Some(StreamItem::Chunk { data, content }) => {
                st.text.push_str(&content);
                format!("data: {data}\n\n")
            }
            Some(StreamItem::End { usage, scored }) => {
                st.over = true;
                tracing::info!(
                    prompt_tokens = usage.map(|u| u.prompt_tokens),
                    completion_tokens = usage.map(|u| u.completion_tokens),
                    receipt = st.order.is_some(),
                    "streamed completion served"
                );
                let receipt = match (&st.order, usage) {
                    (Some(order), Some(usage)) => {
                        order.sign(&st.text, &usage, scored.as_ref()).sse_comment()
                    }
                    (Some(_), None) => {
                        tracing::warn!(
                            "the backend reported no usage: the stream ends without a receipt"
                        );
                        String::new()
                    }
                    (None, _) => String::new(),
                };
                format!("{receipt}data: [DONE]\n\n")
            }
            None => {
                tracing::warn!("the backend ended the stream without finishing the completion");
                return None;
            }
        };
        Some((Ok::<_, Infallible>(event), st))
    });
    (
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        Body::from_stream(events),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_localnet_and_the_runtime_name_the_same_model_file() {
        // gonka-client (which must not pull in the runtime) and gonka-llm each know where
        // scripts/fetch-model.sh puts the file; this crate sees both.
        assert_eq!(
            gonka_client::chat::LLM_MODEL_FILE,
            format!("models/{}", gonka_llm::MODEL_FILE_NAME)
        );
    }

    fn sampling(json: serde_json::Value) -> Result<Sampling, ApiError> {
        let mut body = serde_json::json!({"model": "m", "messages": []});
        body.as_object_mut()
            .unwrap()
            .extend(json.as_object().unwrap().clone());
        Sampling::of(&serde_json::from_value(body).unwrap())
    }

    #[test]
    fn sampling_defaults_to_greedy_without_logprobs() {
        let s = sampling(serde_json::json!({})).unwrap();
        assert_eq!(
            s,
            Sampling {
                temperature: 0.0,
                top_p: 1.0,
                seed: 0,
                logprobs: false,
                top_logprobs: 0
            }
        );
        let s = sampling(serde_json::json!({"temperature": 0.7, "top_p": 0.9, "seed": 7, "logprobs": true, "top_logprobs": 20})).unwrap();
        assert_eq!((s.seed, s.logprobs, s.top_logprobs), (7, true, 20));
    }

    #[test]
    fn out_of_range_sampling_is_refused_with_its_own_code() {
        for (json, code) in [
            (
                serde_json::json!({"temperature": 2.5}),
                "invalid_temperature",
            ),
            (
                serde_json::json!({"temperature": -1}),
                "invalid_temperature",
            ),
            (serde_json::json!({"top_p": 0}), "invalid_top_p"),
            (serde_json::json!({"top_p": 1.5}), "invalid_top_p"),
            (
                serde_json::json!({"logprobs": true, "top_logprobs": 21}),
                "invalid_top_logprobs",
            ),
            (
                serde_json::json!({"top_logprobs": 2}),
                "invalid_top_logprobs",
            ),
        ] {
            let e = sampling(json.clone()).unwrap_err();
            assert_eq!((e.status.as_u16(), e.code), (400, code), "{json}");
        }
    }
}
