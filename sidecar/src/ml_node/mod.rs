//! The ML node: an OpenAI-compatible HTTP server in front of the reference model.
//!
//! Routes: `POST /v1/chat/completions` (plain or `stream: true` server-sent events),
//! `GET /v1/models`, and `GET /v1/load`. At most [`MlNodeConfig::max_concurrency`] generations
//! run at once, each on a blocking thread so the server keeps answering; requests beyond the
//! limit get 503 with `Retry-After`. Every error body is `{"error": {"message", "type", "code"}}`
//! (see [`ApiError`]).

pub mod api;
pub mod cli;
pub mod error;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::body::Body;
use axum::extract::State;
use axum::http::Uri;
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use futures_util::Stream;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};

use crate::reference::{self, ChatTurn, ReferenceModel};
pub use api::*;
pub use error::ApiError;

/// Settings of an ML node.
#[derive(Debug, Clone)]
pub struct MlNodeConfig {
    /// Address to listen on (`127.0.0.1:0` picks a free port).
    pub listen: SocketAddr,
    /// The model id clients must name, e.g. `gonka/reference-1`.
    pub model_id: String,
    /// Seed of the reference model's weights.
    pub seed: u64,
    /// Generations allowed at once.
    pub max_concurrency: usize,
    /// Largest `max_tokens` accepted.
    pub max_tokens_cap: u32,
    /// `max_tokens` used when a request names none (capped by `max_tokens_cap`).
    pub default_max_tokens: u32,
    /// Largest chat-formatted prompt accepted, in bytes (= prompt tokens).
    pub max_prompt_bytes: usize,
    /// Largest request body accepted, in bytes.
    pub max_body_bytes: usize,
    /// FOR TESTS ONLY: sleep this long after each generated token, to hold generation slots
    /// busy long enough to observe the concurrency limit. Zero in production.
    pub testing_delay_per_token: Duration,
}

impl Default for MlNodeConfig {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            model_id: DEFAULT_MODEL_ID.to_string(),
            seed: reference::DEFAULT_SEED,
            max_concurrency: 4,
            max_tokens_cap: 4096,
            default_max_tokens: 256,
            max_prompt_bytes: 64 * 1024,
            max_body_bytes: 1024 * 1024,
            testing_delay_per_token: Duration::ZERO,
        }
    }
}

/// The model id the localnet and the tests use.
pub const DEFAULT_MODEL_ID: &str = "gonka/reference-1";

/// Shared state of the handlers.
struct Node {
    config: MlNodeConfig,
    model: Arc<ReferenceModel>,
    slots: Arc<Semaphore>,
    started: u64,
    next_request: AtomicU64,
}

/// The ML node's routes, ready to serve.
pub fn router(config: MlNodeConfig) -> Router {
    let slots = Arc::new(Semaphore::new(config.max_concurrency));
    let node = Arc::new(Node {
        model: Arc::new(ReferenceModel::new(config.seed)),
        slots,
        started: unix_now(),
        next_request: AtomicU64::new(0),
        config,
    });
    Router::new()
        .route("/v1/chat/completions", post(chat_completions))
        .route("/v1/models", get(models))
        .route("/v1/load", get(load))
        .fallback(|uri: Uri| async move { ApiError::route_not_found(uri.path()) })
        .with_state(node)
}

/// Serves the ML node on `listener` until `shutdown` completes.
pub async fn serve(
    listener: TcpListener,
    config: MlNodeConfig,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, router(config))
        .with_graceful_shutdown(shutdown)
        .await
}

/// Wall-clock seconds since the Unix epoch (the sidecar is not the state machine).
fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

async fn models(State(node): State<Arc<Node>>) -> Json<ModelList> {
    Json(ModelList {
        object: "list",
        data: vec![ModelCard {
            id: node.config.model_id.clone(),
            object: "model",
            created: node.started,
            owned_by: "gonka",
        }],
    })
}

async fn load(State(node): State<Arc<Node>>) -> Json<Load> {
    let max = node.config.max_concurrency;
    Json(Load {
        in_flight: max - node.slots.available_permits().min(max),
        max_concurrency: max,
    })
}

/// A request that passed validation and holds a generation slot.
struct Admitted {
    prompt_tokens: Vec<u32>,
    max_tokens: usize,
    stream: bool,
    include_usage: bool,
    permit: OwnedSemaphorePermit,
}

/// Checks a request in the order a client would fix it: body size, JSON shape, model,
/// messages, max_tokens, prompt size; then takes a generation slot.
async fn admit(node: &Node, body: Body) -> Result<Admitted, ApiError> {
    let cfg = &node.config;
    let bytes = axum::body::to_bytes(body, cfg.max_body_bytes)
        .await
        .map_err(|_| {
            ApiError::too_large(
                "request_too_large",
                format!("request body must be at most {} bytes", cfg.max_body_bytes),
            )
        })?;
    let req: ChatCompletionRequest = serde_json::from_slice(&bytes).map_err(|e| {
        ApiError::invalid_json(format!(
            "expected a JSON chat completion request {{model, messages, ...}}: {e}"
        ))
    })?;
    if req.model != cfg.model_id {
        return Err(ApiError::model_not_found(&req.model, &cfg.model_id));
    }
    if req.messages.is_empty() {
        return Err(ApiError::invalid_value(
            "invalid_messages",
            "`messages` must hold at least one message but is empty".to_string(),
        ));
    }
    let cap = i64::from(cfg.max_tokens_cap);
    let max_tokens = match req.max_tokens.or(req.max_completion_tokens) {
        None => i64::from(cfg.default_max_tokens.min(cfg.max_tokens_cap)),
        Some(n) if (1..=cap).contains(&n) => n,
        Some(n) => {
            return Err(ApiError::invalid_value(
                "invalid_max_tokens",
                format!("`max_tokens` must be between 1 and {cap} but is {n}"),
            ))
        }
    };
    let texts: Vec<String> = req.messages.iter().map(ChatMessage::text).collect();
    let turns: Vec<ChatTurn<'_>> = req
        .messages
        .iter()
        .zip(&texts)
        .map(|(m, text)| ChatTurn {
            role: &m.role,
            content: text,
        })
        .collect();
    let prompt_tokens = reference::encode_chat(&turns);
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
    let permit = node
        .slots
        .clone()
        .try_acquire_owned()
        .map_err(|_| ApiError::overloaded(cfg.max_concurrency))?;
    Ok(Admitted {
        prompt_tokens,
        // max_tokens is in 1..=u32::MAX here, so it fits usize on every supported target.
        max_tokens: max_tokens as usize,
        stream: req.stream,
        include_usage: req.stream_options.is_some_and(|o| o.include_usage),
        permit,
    })
}

/// What the blocking generation thread reports to a streaming response.
enum Produced {
    Token(u32),
    Finished { ended_by_end_token: bool },
}

fn finish_reason(ended_by_end_token: bool) -> &'static str {
    if ended_by_end_token {
        "stop"
    } else {
        "length"
    }
}

async fn chat_completions(State(node): State<Arc<Node>>, body: Body) -> Response {
    let admitted = match admit(&node, body).await {
        Ok(a) => a,
        Err(e) => {
            tracing::info!(status = e.status.as_u16(), code = e.code, "request refused");
            return e.into_response();
        }
    };
    let n = node.next_request.fetch_add(1, Ordering::Relaxed);
    let created = unix_now();
    let id = format!("chatcmpl-{:x}{:06x}", node.started, n);
    if admitted.stream {
        stream_completion(&node, admitted, id, created).into_response()
    } else {
        match complete(&node, admitted, id, created).await {
            Ok(c) => Json(c).into_response(),
            Err(e) => e.into_response(),
        }
    }
}

async fn complete(
    node: &Node,
    admitted: Admitted,
    id: String,
    created: u64,
) -> Result<ChatCompletion, ApiError> {
    let model = node.model.clone();
    let delay = node.config.testing_delay_per_token;
    let Admitted {
        prompt_tokens,
        max_tokens,
        permit,
        ..
    } = admitted;
    let prompt_len = prompt_tokens.len() as u64;
    let (tokens, ended) = tokio::task::spawn_blocking(move || {
        let _permit = permit; // the slot is busy until generation ends
        let mut generation = model.stream(&prompt_tokens, max_tokens);
        let mut tokens = Vec::new();
        for token in generation.by_ref() {
            tokens.push(token);
            if !delay.is_zero() {
                std::thread::sleep(delay);
            }
        }
        (tokens, generation.ended_by_end_token())
    })
    .await
    .map_err(|e| ApiError::internal(format!("generation thread failed: {e}")))?;
    let usage = Usage {
        prompt_tokens: prompt_len,
        completion_tokens: tokens.len() as u64,
        total_tokens: prompt_len + tokens.len() as u64,
    };
    tracing::info!(%id, prompt_tokens = usage.prompt_tokens, completion_tokens = usage.completion_tokens, "completion served");
    Ok(ChatCompletion {
        id,
        object: "chat.completion",
        created,
        model: node.config.model_id.clone(),
        choices: vec![Choice {
            index: 0,
            message: AssistantMessage {
                role: "assistant",
                content: reference::decode(&tokens),
            },
            logprobs: None,
            finish_reason: finish_reason(ended),
        }],
        usage,
    })
}

fn stream_completion(
    node: &Node,
    admitted: Admitted,
    id: String,
    created: u64,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let model = node.model.clone();
    let delay = node.config.testing_delay_per_token;
    let Admitted {
        prompt_tokens,
        max_tokens,
        include_usage,
        permit,
        ..
    } = admitted;
    let prompt_len = prompt_tokens.len() as u64;
    let (tx, rx) = mpsc::channel::<Produced>(64);
    tokio::task::spawn_blocking(move || {
        let _permit = permit; // the slot is busy until generation ends or the client leaves
        let mut generation = model.stream(&prompt_tokens, max_tokens);
        for token in generation.by_ref() {
            if tx.blocking_send(Produced::Token(token)).is_err() {
                return; // the client went away: stop generating
            }
            if !delay.is_zero() {
                std::thread::sleep(delay);
            }
        }
        let _ = tx.blocking_send(Produced::Finished {
            ended_by_end_token: generation.ended_by_end_token(),
        });
    });

    let chunk = {
        let id = id.clone();
        let model_id = node.config.model_id.clone();
        move |delta: Option<Delta>, finish: Option<&'static str>, usage: Option<Usage>| {
            let c = ChatCompletionChunk {
                id: id.clone(),
                object: "chat.completion.chunk",
                created,
                model: model_id.clone(),
                choices: delta
                    .map(|delta| ChunkChoice {
                        index: 0,
                        delta,
                        logprobs: None,
                        finish_reason: finish,
                    })
                    .into_iter()
                    .collect(),
                usage,
            };
            // Serialising plain structs of strings and integers cannot fail.
            Event::default().data(serde_json::to_string(&c).unwrap_or_default())
        }
    };

    // Stream state: the receiver, tokens sent so far, and what is left to send after it closes.
    struct St<F> {
        rx: mpsc::Receiver<Produced>,
        chunk: F,
        sent: u64,
        phase: u8, // 0: role chunk next, 1: tokens, 2: usage chunk next, 3: [DONE] next, 4: over
        include_usage: bool,
        prompt_len: u64,
        id: String,
    }
    let st = St {
        rx,
        chunk,
        sent: 0,
        phase: 0,
        include_usage,
        prompt_len,
        id,
    };
    let events = futures_util::stream::unfold(st, |mut st| async move {
        let event = match st.phase {
            0 => {
                st.phase = 1;
                (st.chunk)(
                    Some(Delta {
                        role: Some("assistant"),
                        content: Some(String::new()),
                    }),
                    None,
                    None,
                )
            }
            1 => match st.rx.recv().await {
                Some(Produced::Token(t)) => {
                    st.sent += 1;
                    (st.chunk)(
                        Some(Delta {
                            role: None,
                            content: Some(reference::decode(&[t])),
                        }),
                        None,
                        None,
                    )
                }
                Some(Produced::Finished { ended_by_end_token }) => {
                    st.phase = if st.include_usage { 2 } else { 3 };
                    tracing::info!(id = %st.id, prompt_tokens = st.prompt_len, completion_tokens = st.sent, "streamed completion served");
                    (st.chunk)(
                        Some(Delta::default()),
                        Some(finish_reason(ended_by_end_token)),
                        None,
                    )
                }
                None => {
                    // The generation thread died without finishing: end the stream without
                    // [DONE], so the client sees an incomplete answer rather than a wrong one.
                    tracing::warn!(id = %st.id, "generation ended without a finish");
                    return None;
                }
            },
            2 => {
                st.phase = 3;
                (st.chunk)(
                    None,
                    None,
                    Some(Usage {
                        prompt_tokens: st.prompt_len,
                        completion_tokens: st.sent,
                        total_tokens: st.prompt_len + st.sent,
                    }),
                )
            }
            3 => {
                st.phase = 4;
                Event::default().data("[DONE]")
            }
            _ => return None,
        };
        Some((Ok(event), st))
    });
    Sse::new(events)
}
