//! `gonkad proxy`: a local OpenAI endpoint for clients that cannot sign. Each chat request it
//! receives is signed with a key from the keyring (request/v3, as `gonkad chat` signs) and
//! sent to the network's transfer agents with fail-over; the answer comes back in the OpenAI
//! shape, plain or streamed. So the `openai` CLI, its Python and JS clients, LangChain or curl
//! work with gonka unchanged: point their base URL at the proxy.
//!
//! The proxy spends the key's escrow for whoever reaches it, so it listens on loopback only
//! unless `--allow-remote` says otherwise.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use futures_util::StreamExt;
use gonka_client::chat::{
    identity, ChatClient, ChatError, ChatRequest, ChatResponse, Message, DEFAULT_MAX_TOKENS,
};
use gonka_client::openai::{
    ApiError, AssistantMessage, ChatCompletion, ChatCompletionChunk, ChatCompletionRequest, Choice,
    ChunkChoice, Delta, ModelCard, ModelList,
};
use gonka_client::server::{read_body, serve, ServerArgs};
use gonka_client::unix_now;
use serde_json::json;
use tokio::sync::mpsc;

use crate::amount::parse_ngnk;
use crate::keys::load_key;
use crate::Global;

/// Largest request body the proxy reads.
const MAX_BODY_BYTES: usize = 1024 * 1024;

/// `gonkad proxy` arguments.
#[derive(clap::Args)]
#[command(after_help = "\
Examples:
  gonkad proxy --from alice
  OPENAI_BASE_URL=http://127.0.0.1:8000/v1 OPENAI_API_KEY=unused openai api chat.completions.create \\
    -m gonka/reference-1 -g user 'What is gonka?'

Requests may name any model the transfer agents serve (GET /v1/models lists them). Fields the \
network has no use for (temperature, top_p, ...) are accepted and ignored; the API key the \
client sends is ignored too: the proxy signs with --from.")]
pub struct Args {
    /// Key (name in the keyring) that signs every request; its escrow pays.
    #[arg(long, value_name = "KEY")]
    from: String,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8000")]
    listen: SocketAddr,
    /// Listen on an address other than loopback: anyone who reaches it spends the key's
    /// escrow.
    #[arg(long)]
    allow_remote: bool,
    /// Transfer agent base URL; repeat to fail over in order. Without --ta, the transfer
    /// agents registered on chain are used (asked over --node).
    #[arg(long = "ta", value_name = "URL")]
    transfer_agents: Vec<String>,
    /// Commission offered to the transfer agent with every request (1500ngnk, 0.5gnk or a
    /// bare number of ngnk).
    #[arg(long, value_name = "NGNK", default_value = "0", value_parser = parse_ngnk)]
    commission: u128,
    /// Most to pay per token, signed with every request; the price the transfer agent lists
    /// for the model when omitted.
    #[arg(long, value_name = "NGNK", value_parser = parse_ngnk)]
    max_price: Option<u128>,
    /// Seconds to wait for a transfer agent to start answering (and between two streamed
    /// chunks) before trying the next.
    #[arg(long, value_name = "N", default_value_t = 60)]
    timeout_secs: u64,
    #[command(flatten)]
    server: ServerArgs,
}

/// What the handlers share.
struct Proxy {
    client: Arc<ChatClient>,
    commission: u128,
    max_price: Option<u128>,
    body_timeout: Duration,
}

/// Runs `gonkad proxy` until Ctrl-C.
pub async fn run(global: &Global, args: Args) -> Result<()> {
    if !args.listen.ip().is_loopback() && !args.allow_remote {
        bail!(
            "--listen {} is not a loopback address: whoever reaches it would spend {}'s escrow; \
             add --allow-remote if that is what you want",
            args.listen,
            args.from
        );
    }
    let key = load_key(global, &args.from)?;
    let signer = key.address().to_string();
    let transfer_agents = crate::chat::transfer_agents(global, &args.transfer_agents).await?;
    let client = ChatClient::new(key, &transfer_agents)?
        .with_timeout(Duration::from_secs(args.timeout_secs));
    let limits = args.server.limits();
    let proxy = Arc::new(Proxy {
        client: Arc::new(client),
        commission: args.commission,
        max_price: args.max_price,
        body_timeout: limits.body_timeout,
    });
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("binding the proxy to {}", args.listen))?;
    let addr = listener.local_addr()?;
    eprintln!(
        "OpenAI base URL http://{addr}/v1, signing as {} ({signer}) for {}",
        args.from,
        transfer_agents.join(", ")
    );
    serve(listener, router(proxy), limits, async {
        let _ = tokio::signal::ctrl_c().await;
    })
    .await
    .context("serving the proxy")
}

fn router(proxy: Arc<Proxy>) -> Router {
    Router::new()
        .route("/v1/chat/completions", post(chat_completions))
        .route("/v1/models", get(models))
        .fallback(|uri: axum::http::Uri| async move { ApiError::route_not_found(uri.path()) })
        .with_state(proxy)
}

/// `GET /v1/models`: the models the first reachable transfer agent lists.
async fn models(State(proxy): State<Arc<Proxy>>) -> Response {
    for url in proxy.client.transfer_agents() {
        if let Ok(ta) = identity(url, Duration::from_secs(5)).await {
            let data = ta
                .models
                .into_iter()
                .map(|m| ModelCard {
                    id: m.id,
                    object: "model",
                    created: 0,
                    owned_by: "gonka",
                })
                .collect();
            return Json(ModelList {
                object: "list",
                data,
            })
            .into_response();
        }
    }
    ApiError::upstream("no transfer agent answered GET /v1/identity".into()).into_response()
}

/// The signed request `body` asks for, or why it cannot be sent.
fn chat_request(proxy: &Proxy, body: &ChatCompletionRequest) -> Result<ChatRequest, ApiError> {
    if body.model.is_empty() {
        return Err(ApiError::invalid_value(
            "invalid_model",
            "`model` must name a model the transfer agents serve (GET /v1/models)".into(),
        ));
    }
    let max_tokens = match body.max_tokens.or(body.max_completion_tokens) {
        None => None,
        Some(n) if (1..=i64::from(u32::MAX)).contains(&n) => Some(n as u32),
        Some(n) => {
            return Err(ApiError::invalid_value(
                "invalid_max_tokens",
                format!("`max_tokens` must be a positive 32-bit number but is {n}"),
            ))
        }
    };
    Ok(ChatRequest {
        model: body.model.clone(),
        messages: body
            .messages
            .iter()
            .map(|m| Message {
                role: m.role.clone(),
                content: m.text(),
            })
            .collect(),
        max_tokens,
        max_price_per_token: proxy.max_price,
        stream: body.stream,
        commission: proxy.commission,
        sampling: body.sampling.clone(),
    })
}

/// A chat error as the OpenAI error the client reads: a transfer agent's refusal keeps its
/// status, message and code; no TA reachable is 502.
fn error_response(error: &ChatError) -> Response {
    let (status, code, kind) = match error {
        ChatError::Refused { status, code, .. } => (
            StatusCode::from_u16(*status).unwrap_or(StatusCode::BAD_GATEWAY),
            code.clone().unwrap_or_else(|| "refused".into()),
            if *status == 401 {
                "authentication_error"
            } else {
                "invalid_request_error"
            },
        ),
        ChatError::Exhausted(_) | ChatError::BrokenAnswer { .. } => (
            StatusCode::BAD_GATEWAY,
            "upstream_error".to_string(),
            "server_error",
        ),
        ChatError::Signing(_) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            "signing_failed".to_string(),
            "server_error",
        ),
    };
    let message = match error {
        ChatError::Refused { message, .. } => message.clone(),
        other => other.to_string(),
    };
    (
        status,
        Json(json!({"error": {"message": message, "type": kind, "code": code}})),
    )
        .into_response()
}

/// `stop`, or `length` when the answer used its whole budget.
fn finish_reason(response: &ChatResponse, max_tokens: u32) -> &'static str {
    match response.usage {
        Some(usage) if usage.completion_tokens >= u64::from(max_tokens) => "length",
        _ => "stop",
    }
}

/// The completion id: the network's inference id, which finds its record on chain.
fn completion_id(response: Option<&ChatResponse>) -> String {
    let id = response
        .and_then(|r| r.inference_id.clone())
        .unwrap_or_else(|| format!("{:x}", unix_now()));
    format!("chatcmpl-{id}")
}

/// `POST /v1/chat/completions`.
async fn chat_completions(State(proxy): State<Arc<Proxy>>, request: Request) -> Response {
    let body = match read_body(request.into_body(), MAX_BODY_BYTES, proxy.body_timeout).await {
        Ok(body) => body,
        Err(e) => return e.into_response(),
    };
    let parsed: ChatCompletionRequest = match serde_json::from_slice(&body) {
        Ok(parsed) => parsed,
        Err(e) => {
            return ApiError::invalid_json(format!(
                "the body is not a chat completion request {{model, messages, ...}}: {e}"
            ))
            .into_response()
        }
    };
    let request = match chat_request(&proxy, &parsed) {
        Ok(request) => request,
        Err(e) => return e.into_response(),
    };
    if request.stream {
        let include_usage = parsed.stream_options.is_some_and(|o| o.include_usage);
        return streamed(proxy, request, include_usage).await;
    }
    let max_tokens = request.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS);
    match proxy.client.chat(&request, |_| {}).await {
        Ok(response) => Json(ChatCompletion {
            id: completion_id(Some(&response)),
            object: "chat.completion",
            created: unix_now(),
            model: response.model.clone(),
            choices: vec![Choice {
                index: 0,
                message: AssistantMessage {
                    role: "assistant",
                    content: response.content.clone(),
                },
                logprobs: response.logprobs.clone(),
                finish_reason: finish_reason(&response, max_tokens),
            }],
            usage: response.usage.unwrap_or_default(),
        })
        .into_response(),
        Err(e) => error_response(&e),
    }
}

/// What the signing task reports while a streamed request runs.
enum Progress {
    /// Text the answer added.
    Delta(String),
    /// The request ended.
    Done(Result<ChatResponse, ChatError>),
}

/// One server-sent event.
fn event(chunk: &ChatCompletionChunk) -> Bytes {
    let json = serde_json::to_string(chunk).expect("a chunk serializes");
    Bytes::from(format!("data: {json}\n\n"))
}

/// Streams the answer as `chat.completion.chunk` events as the transfer agent sends it. The
/// status is decided by the first thing the request produces: an error before any text is
/// answered as an error; after that, a failure ends the stream without `[DONE]`.
async fn streamed(proxy: Arc<Proxy>, request: ChatRequest, include_usage: bool) -> Response {
    let (progress, mut events) = mpsc::unbounded_channel();
    let max_tokens = request.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS);
    let model = request.model.clone();
    let client = proxy.client.clone();
    tokio::spawn(async move {
        let deltas = progress.clone();
        let done = client
            .chat(&request, |delta| {
                let _ = deltas.send(Progress::Delta(delta.to_string()));
            })
            .await;
        let _ = progress.send(Progress::Done(done));
    });
    let first = match events.recv().await {
        Some(Progress::Done(Err(e))) => return error_response(&e),
        Some(first) => first,
        None => return ApiError::internal("the request task ended".into()).into_response(),
    };
    let id = completion_id(None);
    let created = unix_now();
    let chunk = move |delta: Delta, finish: Option<&'static str>| ChatCompletionChunk {
        id: id.clone(),
        object: "chat.completion.chunk",
        created,
        model: model.clone(),
        choices: vec![ChunkChoice {
            index: 0,
            delta,
            logprobs: None,
            finish_reason: finish,
        }],
        usage: None,
    };
    let opening = event(&chunk(
        Delta {
            role: Some("assistant"),
            content: None,
        },
        None,
    ));
    let stream = futures_util::stream::unfold(
        (Some(first), events, false),
        move |(pending, mut events, ended)| {
            let chunk = chunk.clone();
            async move {
                if ended {
                    return None;
                }
                let next = match pending {
                    Some(p) => Some(p),
                    None => events.recv().await,
                };
                let bytes = match next {
                    Some(Progress::Delta(text)) => event(&chunk(
                        Delta {
                            role: None,
                            content: Some(text),
                        },
                        None,
                    )),
                    Some(Progress::Done(Ok(response))) => {
                        // The tokens' log-probabilities, when asked for, ride on the last
                        // chunk: the transfer agent's stream is relayed text by text.
                        let mut last =
                            chunk(Delta::default(), Some(finish_reason(&response, max_tokens)));
                        if let Some(choice) = last.choices.first_mut() {
                            choice.logprobs = response.logprobs.clone();
                        }
                        let mut out = event(&last).to_vec();
                        if include_usage {
                            last.choices.clear();
                            last.usage = Some(response.usage.unwrap_or_default());
                            out.extend_from_slice(&event(&last));
                        }
                        out.extend_from_slice(b"data: [DONE]\n\n");
                        return Some((
                            Ok::<Bytes, Infallible>(Bytes::from(out)),
                            (None, events, true),
                        ));
                    }
                    Some(Progress::Done(Err(e))) => {
                        tracing::warn!(error = %e, "a streamed answer broke off");
                        return None;
                    }
                    None => return None,
                };
                Some((Ok(bytes), (None, events, false)))
            }
        },
    );
    let body =
        futures_util::stream::once(async move { Ok::<Bytes, Infallible>(opening) }).chain(stream);
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(Body::from_stream(body))
        .expect("a valid response")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proxy() -> Proxy {
        let key =
            gonka_client::Key::from_mnemonic(&gonka_client::keys::well_known_mnemonic("alice"))
                .unwrap();
        Proxy {
            client: Arc::new(ChatClient::new(key, &["http://127.0.0.1:1".into()]).unwrap()),
            commission: 7,
            max_price: None,
            body_timeout: Duration::from_secs(1),
        }
    }

    fn parse(json: serde_json::Value) -> ChatCompletionRequest {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn openai_requests_become_signed_chat_requests_and_bad_ones_are_refused() {
        let proxy = proxy();
        let request = chat_request(
            &proxy,
            &parse(json!({
                "model": "gonka/reference-1",
                "messages": [
                    {"role": "system", "content": "Be brief."},
                    {"role": "user", "content": [{"type": "text", "text": "Hi"}]}
                ],
                "max_completion_tokens": 16,
                "temperature": 0.2,
                "stream": true
            })),
        )
        .unwrap();
        assert_eq!(request.model, "gonka/reference-1");
        assert_eq!(
            request.messages,
            vec![Message::system("Be brief."), Message::user("Hi")]
        );
        assert_eq!(
            (request.max_tokens, request.stream, request.commission),
            (Some(16), true, 7)
        );
        for (bad, code) in [
            (json!({"model": "", "messages": []}), "invalid_model"),
            (
                json!({"model": "m", "messages": [], "max_tokens": 0}),
                "invalid_max_tokens",
            ),
        ] {
            assert_eq!(chat_request(&proxy, &parse(bad)).unwrap_err().code, code);
        }
    }

    #[tokio::test]
    async fn an_unreachable_network_is_a_bad_gateway_in_the_openai_shape() {
        let proxy = Arc::new(proxy());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(serve(
            listener,
            router(proxy),
            gonka_client::server::ServerLimits::default(),
            std::future::pending(),
        ));
        let client = reqwest::Client::new();
        let url = format!("http://{addr}/v1/chat/completions");
        let answer = client
            .post(&url)
            .body(r#"{"model":"m","messages":[{"role":"user","content":"hi"}]}"#)
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 502);
        let body: serde_json::Value = serde_json::from_str(&answer.text().await.unwrap()).unwrap();
        assert_eq!(body["error"]["code"], "upstream_error", "{body}");
        let answer = client.post(&url).body("not json").send().await.unwrap();
        assert_eq!(answer.status(), 400);
        let answer = client
            .get(format!("http://{addr}/v1/nothing"))
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 404);
    }
}
