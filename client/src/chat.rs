//! Chat through gonka's transfer agents (TAs): OpenAI chat completions signed with the
//! requester's account key (see [`crate::request`]), sent to an ordered list of TAs with
//! fail-over, and answered either whole or as server-sent events handed over delta by delta.
//!
//! Fail-over: a connection error, no answer within the timeout, HTTP 5xx or 429 moves on to
//! the next TA, with a fresh nonce and signature. Any other 4xx is the caller's fault and is
//! returned at once ([`ChatError::Refused`]). Once a TA has started a successful answer
//! nothing is retried: the request may already have been served and paid for.
//!
//! Where TAs come from: [`discover_transfer_agents`] lists those registered on chain, and
//! [`identity`] asks one TA who it is and which others it knows.

use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use gonka_proto::query as q;
use k256::elliptic_curve::rand_core::{OsRng, RngCore};
use reqwest::header::{HeaderMap, CONTENT_TYPE};
use reqwest::{StatusCode, Url};
use serde::{Deserialize, Serialize};

pub use crate::openai::Sampling;
use crate::openai::{ChoiceLogprobs, Usage};
use crate::request::{prompt_token_bound, sign_request, RequestTerms};
use crate::sse::SseParser;
use crate::{unix_now, Key};

/// The model of the built-in reference ML node, which every localnet serves.
pub const DEFAULT_MODEL: &str = "gonka/reference-1";

/// The language model a localnet's ML nodes serve when its file is present
/// (SmolLM2-135M-Instruct, Q4_1 GGUF, as `scripts/fetch-model.sh` stores it).
pub const LLM_MODEL: &str = "HuggingFaceTB/SmolLM2-135M-Instruct";

/// Where under the gonka home (`${GONKA_HOME:-~/.gonka}`) `scripts/fetch-model.sh` stores
/// [`LLM_MODEL`]'s file.
pub const LLM_MODEL_FILE: &str = "models/SmolLM2-135M-Instruct.Q4_1.gguf";

/// The gonka home when none is given: `$GONKA_HOME`, else `~/.gonka` (where `gonkad` keeps its
/// keyring and `scripts/fetch-model.sh` the model).
pub fn default_home() -> std::path::PathBuf {
    std::env::var_os("GONKA_HOME")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            std::env::var_os("HOME")
                .map(std::path::PathBuf::from)
                .unwrap_or_else(|| std::path::PathBuf::from("."))
                .join(".gonka")
        })
}

/// Alternatives per position [`LLM_MODEL`]'s receipts commit to and its validators score
/// (its `logprob_top_k` in a localnet's model table).
pub const LLM_LOGPROB_TOP_K: u32 = 5;

/// Largest mean difference per compared log-probability, in 2^-16 nats, at which a scoring of
/// [`LLM_MODEL`] agrees with the executor's (its `logprob_threshold`): 0.4 nats, 1.8 times the
/// worst honest answer of another runtime measured (README, *Validation of inexact models*).
pub const LLM_LOGPROB_THRESHOLD: u64 = 26_214;

/// Largest sum of differences at one position, in 2^-16 nats (its
/// `logprob_position_threshold`): 20 nats, more than twice the worst honest position measured.
pub const LLM_LOGPROB_POSITION_THRESHOLD: u64 = 20 * 65_536;

/// [`LLM_MODEL`]'s `work_per_token`: what a token of it costs to compute over what a token of
/// the reference model costs, as the network's runtimes serve them on one core of this
/// project's machine: decoded tokens/s of the reference model (`cargo bench -p gonka-model
/// --bench reference`) over SmolLM2-135M's (gonka-llm's kernel, `GONKA_LLM_BENCH_CONFIGS=
/// 1:exact cargo bench -p gonka-llm`), run one after the other, three times: 14,329 / 108.0,
/// 13,648 / 109.4 and 13,429 / 108.5, ratios 132.7, 124.8 and 123.8, the median rounded up.
/// By parameters (134,515,008 against 98,432) it would be 1,367, but the integer reference
/// runtime spends about 11 times more per parameter, so self-dealing on SmolLM2 would then
/// buy 11 times more work per CPU-second.
pub const LLM_WORK_PER_TOKEN: u64 = 125;

/// [`LLM_MODEL`]'s entry in a localnet's model table, at `price_per_token` ngnk: validated by
/// log-probabilities, as a real model served by other runtimes (`--upstream-url`) must be,
/// and crediting [`LLM_WORK_PER_TOKEN`] work units a token.
pub fn llm_model_entry(price_per_token: u128) -> gonka_proto::inference::Model {
    gonka_proto::inference::Model {
        id: LLM_MODEL.into(),
        price_per_token: price_per_token.to_string(),
        validation: "logprobs".into(),
        logprob_top_k: LLM_LOGPROB_TOP_K,
        logprob_threshold: LLM_LOGPROB_THRESHOLD,
        logprob_position_threshold: LLM_LOGPROB_POSITION_THRESHOLD,
        work_per_token: LLM_WORK_PER_TOKEN,
        ..gonka_proto::inference::Model::default()
    }
}

/// Completion budget signed when a request sets none.
pub const DEFAULT_MAX_TOKENS: u32 = 256;

/// How long a TA may take to start answering, and, in a stream, between two chunks.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// Response header carrying the inference id (hex of the signed request hash).
pub const HEADER_INFERENCE_ID: &str = "x-gonka-inference-id";

/// Response header naming the ML node that executed the request.
pub const HEADER_EXECUTOR: &str = "x-gonka-executor";

const CHAT_PATH: &str = "/v1/chat/completions";
const IDENTITY_PATH: &str = "/v1/identity";

/// One message of a conversation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Message {
    /// `system`, `user` or `assistant`.
    pub role: String,
    /// The text.
    pub content: String,
}

impl Message {
    /// A `system` message: instructions for the model.
    pub fn system(content: impl Into<String>) -> Message {
        Message {
            role: "system".into(),
            content: content.into(),
        }
    }

    /// A `user` message: the question.
    pub fn user(content: impl Into<String>) -> Message {
        Message {
            role: "user".into(),
            content: content.into(),
        }
    }
}

/// A chat completion to ask for.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatRequest {
    /// Model id, e.g. [`DEFAULT_MODEL`].
    pub model: String,
    /// The conversation so far.
    pub messages: Vec<Message>,
    /// Most tokens to generate (signed as `x-gonka-max-tokens`); [`DEFAULT_MAX_TOKENS`]
    /// when `None`.
    pub max_tokens: Option<u32>,
    /// Most ngnk per token to pay (signed as `x-gonka-max-price`); the price the TA lists
    /// for the model when `None`.
    pub max_price_per_token: Option<u128>,
    /// Ask for server-sent events, handed to the caller delta by delta.
    pub stream: bool,
    /// ngnk the requester agrees to pay the transfer agent; part of the signed message.
    pub commission: u128,
    /// Sampling and log-probabilities.
    pub sampling: Sampling,
}

impl ChatRequest {
    /// A streamed request for `model` with `messages`, no token limit and no commission.
    pub fn new(model: impl Into<String>, messages: Vec<Message>) -> ChatRequest {
        ChatRequest {
            model: model.into(),
            messages,
            max_tokens: None,
            max_price_per_token: None,
            stream: true,
            commission: 0,
            sampling: Sampling::default(),
        }
    }

    /// The completion budget that is signed and sent.
    pub fn max_tokens(&self) -> u32 {
        self.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS)
    }

    /// The OpenAI JSON body (`max_tokens` always set to the signed budget); a stream asks
    /// for a final usage chunk.
    fn body(&self) -> Vec<u8> {
        #[derive(Serialize)]
        struct StreamOptions {
            include_usage: bool,
        }
        #[derive(Serialize)]
        struct Body<'a> {
            model: &'a str,
            messages: &'a [Message],
            max_tokens: u32,
            stream: bool,
            #[serde(skip_serializing_if = "Option::is_none")]
            stream_options: Option<StreamOptions>,
            #[serde(flatten)]
            sampling: &'a Sampling,
        }
        serde_json::to_vec(&Body {
            model: &self.model,
            messages: &self.messages,
            max_tokens: self.max_tokens(),
            stream: self.stream,
            stream_options: self.stream.then_some(StreamOptions {
                include_usage: true,
            }),
            sampling: &self.sampling,
        })
        .expect("a chat request serializes")
    }
}

/// A transfer agent that could not serve a request, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FailedAttempt {
    /// The TA's base URL.
    pub url: String,
    /// What went wrong.
    pub error: String,
}

/// The answer to a [`ChatRequest`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChatResponse {
    /// The generated text.
    pub content: String,
    /// The generated tokens' log-probabilities, when asked for and the model reports them
    /// (a stream's chunks joined).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub logprobs: Option<ChoiceLogprobs>,
    /// The model that answered, as the answer names it.
    pub model: String,
    /// Token counts, if the answer carried them.
    pub usage: Option<Usage>,
    /// The inference id the TA assigned (hex of the signed request hash).
    pub inference_id: Option<String>,
    /// The ML node that executed the request.
    pub executor: Option<String>,
    /// Base URL of the TA that answered.
    pub transfer_agent: String,
    /// TAs tried before it, in order.
    pub failed_over: Vec<FailedAttempt>,
}

/// Why a chat request failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChatError {
    /// A TA refused the request with a 4xx other than 429: the request itself is at fault,
    /// so no other TA was tried.
    Refused {
        /// The TA's base URL.
        url: String,
        /// HTTP status.
        status: u16,
        /// The OpenAI `error.message` (or the body, if it was not an OpenAI error).
        message: String,
        /// The OpenAI `error.code`, if any.
        code: Option<String>,
    },
    /// Every TA failed with a connection error, a timeout, 5xx or 429.
    Exhausted(Vec<FailedAttempt>),
    /// A TA accepted the request, but its answer broke off or was not a chat completion.
    BrokenAnswer {
        /// The TA's base URL.
        url: String,
        /// What was wrong with the answer.
        message: String,
    },
    /// The request could not be signed.
    Signing(String),
}

impl std::fmt::Display for ChatError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ChatError::Refused {
                url,
                status,
                message,
                code,
            } => {
                write!(f, "the TA {url} refused the request: {message} ({status}")?;
                if let Some(code) = code {
                    write!(f, " {code}")?;
                }
                write!(f, ")")
            }
            ChatError::Exhausted(failed) => {
                write!(f, "no transfer agent could serve the request: ")?;
                let reasons: Vec<String> = failed
                    .iter()
                    .map(|a| format!("{}: {}", a.url, a.error))
                    .collect();
                write!(f, "{}", reasons.join("; "))
            }
            ChatError::BrokenAnswer { url, message } => write!(
                f,
                "the answer of the TA {url} is broken: {message}; it was not retried elsewhere \
                 because the TA may already have served (and charged) it"
            ),
            ChatError::Signing(message) => write!(f, "cannot sign the request: {message}"),
        }
    }
}

impl std::error::Error for ChatError {}

/// How one attempt at one TA ended, when it did not answer.
enum AttemptError {
    /// Try the next TA.
    Next(String),
    /// Stop here.
    Stop(ChatError),
}

/// Sends signed chat requests to an ordered list of transfer agents with fail-over.
pub struct ChatClient {
    key: Key,
    transfer_agents: Vec<String>,
    timeout: Duration,
    http: reqwest::Client,
    /// Each TA's identity, by base URL, once asked.
    identities: std::sync::Mutex<std::collections::BTreeMap<String, Identity>>,
}

impl ChatClient {
    /// A client signing with `key` that tries `transfer_agents` in order. Each is a TA's base
    /// URL as [`base_url`] accepts it; duplicates are tried once.
    pub fn new(key: Key, transfer_agents: &[String]) -> Result<ChatClient> {
        let mut urls: Vec<String> = Vec::new();
        for url in transfer_agents {
            let url = base_url(url)?;
            if !urls.contains(&url) {
                urls.push(url);
            }
        }
        if urls.is_empty() {
            bail!("no transfer agent to send the request to; give at least one TA URL");
        }
        Ok(ChatClient {
            key,
            transfer_agents: urls,
            timeout: DEFAULT_TIMEOUT,
            http: http_client()?,
            identities: Default::default(),
        })
    }

    /// The same client with another timeout (until a TA starts answering, and between two
    /// chunks of a stream).
    pub fn with_timeout(self, timeout: Duration) -> ChatClient {
        ChatClient { timeout, ..self }
    }

    /// The TAs' base URLs, in the order they are tried.
    pub fn transfer_agents(&self) -> &[String] {
        &self.transfer_agents
    }

    /// Sends `request`, trying the TAs in order (see the module doc for when it moves on).
    /// Each content delta of a stream goes to `on_delta` as it arrives; a plain answer
    /// calls it never.
    pub async fn chat(
        &self,
        request: &ChatRequest,
        mut on_delta: impl FnMut(&str),
    ) -> Result<ChatResponse, ChatError> {
        let body = request.body();
        let mut failed = Vec::new();
        for url in &self.transfer_agents {
            match self.attempt(url, request, &body, &mut on_delta).await {
                Ok(mut response) => {
                    response.failed_over = failed;
                    return Ok(response);
                }
                Err(AttemptError::Next(error)) => {
                    tracing::info!(transfer_agent = %url, %error, "transfer agent failed; trying the next one");
                    failed.push(FailedAttempt {
                        url: url.clone(),
                        error,
                    });
                }
                Err(AttemptError::Stop(e)) => return Err(e),
            }
        }
        Err(ChatError::Exhausted(failed))
    }

    /// The terms to sign for `request` at the TA `url`: its address and chain (asked at its
    /// `/v1/identity` once, and again when it did not list the request's model then, e.g. a
    /// model published since), the request's model and budget, the ceiling price (the
    /// request's own, or the price the TA lists for the model), and the prompt bound of its
    /// `body`.
    async fn terms_at(
        &self,
        url: &str,
        request: &ChatRequest,
        body: &[u8],
    ) -> Result<RequestTerms, AttemptError> {
        let known = self
            .identities
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(url)
            .cloned()
            .filter(|ta| ta.models.iter().any(|m| m.id == request.model));
        let ta = match known {
            Some(ta) => ta,
            None => {
                let ta = identity(url, self.timeout)
                    .await
                    .map_err(|e| AttemptError::Next(format!("{e:#}")))?;
                self.identities
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(url.to_string(), ta.clone());
                ta
            }
        };
        let listed = ta
            .models
            .iter()
            .find(|m| m.id == request.model)
            .and_then(|m| m.price_per_token.parse().ok());
        // A model the TA does not list is signed at 0: the TA refuses it (404, or 400
        // `max_price_too_low` if it is priced after all), which is the caller's answer.
        let max_price_per_token = request.max_price_per_token.or(listed).unwrap_or(0);
        Ok(RequestTerms {
            chain_id: ta.chain_id,
            body_hash: [0; 32],
            timestamp: unix_now(),
            nonce: nonce(),
            commission: request.commission,
            transfer_agent: ta.address,
            model: request.model.clone(),
            max_price_per_token,
            max_completion_tokens: u64::from(request.max_tokens()),
            max_prompt_tokens: prompt_token_bound(body),
        })
    }

    /// One signed attempt at the TA `url`.
    async fn attempt(
        &self,
        url: &str,
        request: &ChatRequest,
        body: &[u8],
        on_delta: &mut impl FnMut(&str),
    ) -> Result<ChatResponse, AttemptError> {
        let terms = self.terms_at(url, request, body).await?;
        let headers = sign_request(&self.key, body, terms)
            .map_err(|e| AttemptError::Stop(ChatError::Signing(format!("{e:#}"))))?;
        let mut post = self
            .http
            .post(format!("{url}{CHAT_PATH}"))
            .header(CONTENT_TYPE, "application/json")
            .body(body.to_vec());
        for (name, value) in headers {
            post = post.header(name, value);
        }
        let mut response = match tokio::time::timeout(self.timeout, post.send()).await {
            Err(_) => return Err(AttemptError::Next(self.no_answer())),
            Ok(Err(e)) => return Err(AttemptError::Next(describe(&e))),
            Ok(Ok(response)) => response,
        };
        let status = response.status();
        if !status.is_success() {
            let (message, code) = self.error_of(response).await;
            let refused = status.is_client_error() && status != StatusCode::TOO_MANY_REQUESTS;
            return Err(if refused {
                AttemptError::Stop(ChatError::Refused {
                    url: url.to_string(),
                    status: status.as_u16(),
                    message,
                    code,
                })
            } else {
                let code = code.map(|c| format!(" {c}")).unwrap_or_default();
                AttemptError::Next(format!("{}{code}: {message}", status.as_u16()))
            });
        }
        let header = |name: &str| header_text(response.headers(), name);
        let inference_id = header(HEADER_INFERENCE_ID);
        let executor = header(HEADER_EXECUTOR);
        let is_stream =
            header(CONTENT_TYPE.as_str()).is_some_and(|ct| ct.starts_with("text/event-stream"));
        let answer = if is_stream {
            self.read_stream(&mut response, on_delta).await
        } else {
            self.read_completion(response).await
        };
        let answer = answer.map_err(|message| {
            AttemptError::Stop(ChatError::BrokenAnswer {
                url: url.to_string(),
                message,
            })
        })?;
        Ok(ChatResponse {
            content: answer.content,
            logprobs: answer.logprobs,
            model: answer.model,
            usage: answer.usage,
            inference_id,
            executor,
            transfer_agent: url.to_string(),
            failed_over: Vec::new(),
        })
    }

    fn no_answer(&self) -> String {
        format!("no answer within {} ms", self.timeout.as_millis())
    }

    /// The OpenAI `error.message` and `error.code` of a failed response, else its body.
    async fn error_of(&self, response: reqwest::Response) -> (String, Option<String>) {
        #[derive(Deserialize)]
        struct ErrorBody {
            error: ErrorDetail,
        }
        #[derive(Deserialize)]
        struct ErrorDetail {
            message: String,
            #[serde(default)]
            code: Option<String>,
        }
        let status = response.status();
        let bytes = match tokio::time::timeout(self.timeout, response.bytes()).await {
            Ok(Ok(bytes)) => bytes,
            Ok(Err(e)) => return (describe(&e), None),
            Err(_) => return (self.no_answer(), None),
        };
        if let Ok(body) = serde_json::from_slice::<ErrorBody>(&bytes) {
            return (body.error.message, body.error.code);
        }
        let text = String::from_utf8_lossy(&bytes);
        let text = text.trim();
        let message = if text.is_empty() {
            status
                .canonical_reason()
                .unwrap_or("no reason given")
                .to_string()
        } else {
            text.chars().take(300).collect()
        };
        (message, None)
    }

    /// A whole `chat.completion` body.
    async fn read_completion(&self, response: reqwest::Response) -> Result<Answer, String> {
        #[derive(Deserialize)]
        struct Completion {
            #[serde(default)]
            model: String,
            choices: Vec<Choice>,
            #[serde(default)]
            usage: Option<Usage>,
        }
        #[derive(Deserialize)]
        struct Choice {
            message: AssistantMessage,
            #[serde(default)]
            logprobs: Option<ChoiceLogprobs>,
        }
        #[derive(Deserialize)]
        struct AssistantMessage {
            #[serde(default)]
            content: Option<String>,
        }
        let bytes = match tokio::time::timeout(self.timeout, response.bytes()).await {
            Ok(Ok(bytes)) => bytes,
            Ok(Err(e)) => return Err(describe(&e)),
            Err(_) => return Err(self.no_answer()),
        };
        let completion: Completion = serde_json::from_slice(&bytes)
            .map_err(|e| format!("expected a chat.completion JSON body: {e}"))?;
        let (content, logprobs) = completion
            .choices
            .into_iter()
            .next()
            .map(|c| (c.message.content.unwrap_or_default(), c.logprobs))
            .unwrap_or_default();
        Ok(Answer {
            content,
            logprobs,
            model: completion.model,
            usage: completion.usage,
            done: true,
        })
    }

    /// A server-sent event stream of `chat.completion.chunk`s, up to `data: [DONE]`.
    async fn read_stream(
        &self,
        response: &mut reqwest::Response,
        on_delta: &mut impl FnMut(&str),
    ) -> Result<Answer, String> {
        let mut events = SseParser::default();
        let mut answer = Answer::default();
        loop {
            let chunk = match tokio::time::timeout(self.timeout, response.chunk()).await {
                Err(_) => return Err(format!("the stream stalled: {}", self.no_answer())),
                Ok(Err(e)) => return Err(format!("the stream broke off: {}", describe(&e))),
                Ok(Ok(None)) => break,
                Ok(Ok(Some(chunk))) => chunk,
            };
            for data in events.push(&chunk) {
                answer.apply(&data, on_delta)?;
            }
        }
        if let Some(data) = events.finish() {
            answer.apply(&data, on_delta)?;
        }
        if !answer.done {
            return Err("the stream ended before `data: [DONE]`; the answer is incomplete".into());
        }
        Ok(answer)
    }
}

/// What an answer carried, assembled.
#[derive(Debug, Default)]
struct Answer {
    content: String,
    logprobs: Option<ChoiceLogprobs>,
    model: String,
    usage: Option<Usage>,
    done: bool,
}

impl Answer {
    /// Adds the `data` of one event of a stream.
    fn apply(&mut self, data: &str, on_delta: &mut impl FnMut(&str)) -> Result<(), String> {
        #[derive(Deserialize)]
        struct Chunk {
            #[serde(default)]
            model: String,
            #[serde(default)]
            choices: Vec<ChunkChoice>,
            #[serde(default)]
            usage: Option<Usage>,
            #[serde(default)]
            error: Option<StreamError>,
        }
        #[derive(Deserialize)]
        struct ChunkChoice {
            #[serde(default)]
            delta: Delta,
            #[serde(default)]
            logprobs: Option<ChoiceLogprobs>,
        }
        #[derive(Deserialize, Default)]
        struct Delta {
            #[serde(default)]
            content: Option<String>,
        }
        #[derive(Deserialize)]
        struct StreamError {
            #[serde(default)]
            message: String,
        }
        if self.done {
            return Ok(());
        }
        if data == "[DONE]" {
            self.done = true;
            return Ok(());
        }
        let chunk: Chunk = serde_json::from_str(data)
            .map_err(|e| format!("expected a chat.completion.chunk event, got {data:?}: {e}"))?;
        if let Some(error) = chunk.error {
            return Err(format!("the stream reported an error: {}", error.message));
        }
        if self.model.is_empty() {
            self.model = chunk.model;
        }
        if chunk.usage.is_some() {
            self.usage = chunk.usage;
        }
        for choice in chunk.choices {
            if let Some(lp) = choice.logprobs {
                self.logprobs
                    .get_or_insert_with(|| ChoiceLogprobs {
                        content: Vec::new(),
                    })
                    .content
                    .extend(lp.content);
            }
            if let Some(delta) = choice.delta.content.filter(|c| !c.is_empty()) {
                on_delta(&delta);
                self.content.push_str(&delta);
            }
        }
        Ok(())
    }
}

/// The base URL of a TA (`scheme://host[:port][/prefix]`, no trailing slash) from what a
/// person may type: `http://` is assumed when no scheme is given, and a trailing `/v1` or
/// `/v1/chat/completions` (an OpenAI base URL or endpoint) is dropped.
pub fn base_url(url: &str) -> Result<String> {
    let text = url.trim();
    let with_scheme = if text.contains("://") {
        text.to_string()
    } else {
        format!("http://{text}")
    };
    let mut parsed = Url::parse(&with_scheme).with_context(|| {
        format!("{url:?} is not a transfer agent URL; expected e.g. http://127.0.0.1:8080")
    })?;
    if !matches!(parsed.scheme(), "http" | "https") {
        bail!("{url:?}: a transfer agent URL starts with http:// or https://");
    }
    if parsed.query().is_some() || parsed.fragment().is_some() {
        bail!("{url:?}: a transfer agent URL has no query or fragment");
    }
    let path = parsed.path().trim_end_matches('/');
    let path = path.strip_suffix("/chat/completions").unwrap_or(path);
    let path = path.strip_suffix("/v1").unwrap_or(path).to_string();
    parsed.set_path(&path);
    Ok(parsed.as_str().trim_end_matches('/').to_string())
}

/// Base URLs of the transfer agents registered on chain, in the chain's order. URLs that are
/// not valid are skipped (and logged).
pub async fn discover_transfer_agents(rpc: &crate::Client) -> Result<Vec<String>> {
    let agents = rpc
        .query_all::<q::inference::TransferAgents>(Default::default())
        .await?;
    let mut urls = Vec::new();
    for ta in agents {
        match base_url(&ta.url) {
            Ok(url) if !urls.contains(&url) => urls.push(url),
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(transfer_agent = %ta.address, error = %e, "skipping a registered transfer agent with an unusable URL");
            }
        }
    }
    Ok(urls)
}

/// Another TA a TA knows of, as listed in its [`Identity`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KnownTransferAgent {
    /// Its account address.
    pub address: String,
    /// Its public base URL.
    pub url: String,
}

/// What a TA says about itself at `GET /v1/identity`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Identity {
    /// The TA's account address.
    pub address: String,
    /// Hex of its compressed public key.
    pub pubkey: String,
    /// Its public base URL.
    pub url: String,
    /// The chain it serves (empty for a TA without a chain).
    #[serde(default)]
    pub chain_id: String,
    /// Every TA registered on chain (this one included), so clients can fail over.
    #[serde(default)]
    pub transfer_agents: Vec<KnownTransferAgent>,
    /// The models it serves with the chain's price per token: what a requester signs as
    /// `x-gonka-max-price` unless it sets its own ceiling.
    #[serde(default)]
    pub models: Vec<PricedModel>,
}

/// A model and its price on chain, as a TA's [`Identity`] lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PricedModel {
    /// Model id.
    pub id: String,
    /// ngnk per token (decimal).
    pub price_per_token: String,
}

/// Asks the TA at `url` who it is and which other TAs it knows, waiting at most `timeout`.
pub async fn identity(url: &str, timeout: Duration) -> Result<Identity> {
    let endpoint = format!("{}{IDENTITY_PATH}", base_url(url)?);
    let (status, bytes) = get(&endpoint, timeout).await?;
    if !status.is_success() {
        bail!("{endpoint} answered {status}; is this a gonka transfer agent?");
    }
    serde_json::from_slice::<Identity>(&bytes).with_context(|| {
        format!("{endpoint} did not answer {{address, pubkey, url, ...}}; is this a gonka transfer agent?")
    })
}

/// The committed leaf of request `inference_id` with its proof, as the TA at `url` serves it
/// (`GET /v1/leaves/{inference_id}`); `None` when the TA holds none (not its request, still
/// waiting for a batch, or pruned).
pub async fn served_leaf(
    url: &str,
    inference_id: &str,
    timeout: Duration,
) -> Result<Option<gonka_proto::settlement::ServedLeaf>> {
    get_protobuf(url, &format!("/v1/leaves/{inference_id}"), timeout).await
}

/// Leaf `index` of the TA's own batch `number` with its proof, as the TA at `url` serves it
/// (`GET /v1/batches/{number}/leaves/{index}`); `None` when it keeps no such leaf.
pub async fn batch_leaf(
    url: &str,
    number: u64,
    index: u64,
    timeout: Duration,
) -> Result<Option<gonka_proto::settlement::LeafProof>> {
    get_protobuf(
        url,
        &format!("/v1/batches/{number}/leaves/{index}"),
        timeout,
    )
    .await
}

/// The protobuf `M` the TA at `url` serves at `path`; `None` on 404.
async fn get_protobuf<M: prost::Message + Default + prost::Name>(
    url: &str,
    path: &str,
    timeout: Duration,
) -> Result<Option<M>> {
    let endpoint = format!("{}{path}", base_url(url)?);
    let (status, bytes) = get(&endpoint, timeout).await?;
    if status == reqwest::StatusCode::NOT_FOUND {
        return Ok(None);
    }
    if !status.is_success() {
        bail!(
            "{endpoint} answered {status}: {}",
            String::from_utf8_lossy(&bytes)
        );
    }
    M::decode(bytes.as_slice()).map(Some).with_context(|| {
        format!(
            "{endpoint} did not answer a {}; is this a gonka transfer agent?",
            M::full_name()
        )
    })
}

/// GETs `endpoint` within `timeout`: its status and body.
async fn get(endpoint: &str, timeout: Duration) -> Result<(reqwest::StatusCode, Vec<u8>)> {
    let fetch = async {
        let response = http_client()?
            .get(endpoint)
            .send()
            .await
            .map_err(|e| anyhow!("{endpoint}: {}", describe(&e)))?;
        let status = response.status();
        let bytes = response
            .bytes()
            .await
            .map_err(|e| anyhow!("{endpoint}: {}", describe(&e)))?;
        Ok((status, bytes.to_vec()))
    };
    tokio::time::timeout(timeout, fetch)
        .await
        .with_context(|| format!("{endpoint} did not answer within {timeout:?}"))?
}

fn http_client() -> Result<reqwest::Client> {
    reqwest::Client::builder()
        .build()
        .context("cannot create an HTTP client")
}

/// A header's value, if present and text.
fn header_text(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

/// A reqwest error as what failed and its innermost cause (`cannot connect: Connection
/// refused`), without the URL the caller reports anyway.
fn describe(error: &reqwest::Error) -> String {
    let what = if error.is_connect() {
        "cannot connect"
    } else if error.is_timeout() {
        "timed out"
    } else if error.is_body() || error.is_decode() {
        "reading the answer failed"
    } else {
        "the request failed"
    };
    let mut cause = None;
    let mut source = std::error::Error::source(error);
    while let Some(inner) = source {
        cause = Some(inner.to_string());
        source = inner.source();
    }
    match cause {
        Some(cause) => format!("{what}: {cause}"),
        None => what.to_string(),
    }
}

/// 16 random bytes from the OS RNG, hex: unique per request.
fn nonce() -> String {
    let mut bytes = [0u8; 16];
    OsRng.fill_bytes(&mut bytes);
    hex::encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_events_assemble_the_answer() {
        let chunk = |content: &str| {
            format!(
                r#"{{"model":"m","choices":[{{"index":0,"delta":{{"content":{content:?}}}}}]}}"#
            )
        };
        let mut answer = Answer::default();
        let mut deltas = Vec::new();
        let mut on_delta = |d: &str| deltas.push(d.to_string());
        answer
            .apply(
                r#"{"model":"m","choices":[{"delta":{"role":"assistant"}}]}"#,
                &mut on_delta,
            )
            .unwrap();
        answer.apply(&chunk("Hel"), &mut on_delta).unwrap();
        answer.apply(&chunk("lo"), &mut on_delta).unwrap();
        answer
            .apply(
                r#"{"model":"m","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}"#,
                &mut on_delta,
            )
            .unwrap();
        assert!(!answer.done);
        answer.apply("[DONE]", &mut on_delta).unwrap();
        assert!(answer.done);
        assert_eq!(deltas, ["Hel", "lo"]);
        assert_eq!(answer.content, "Hello");
        assert_eq!(answer.model, "m");
        assert_eq!(answer.usage.unwrap().total_tokens, 5);

        let mut ignore = |_: &str| {};
        let mut fresh = Answer::default();
        let e = fresh
            .apply(r#"{"error":{"message":"node died"}}"#, &mut ignore)
            .unwrap_err();
        assert!(e.contains("node died"), "{e}");
        assert!(fresh.apply("not json", &mut ignore).is_err());
    }

    #[test]
    fn base_urls_are_normalized() {
        for (typed, base) in [
            ("http://127.0.0.1:8080", "http://127.0.0.1:8080"),
            ("http://127.0.0.1:8080/", "http://127.0.0.1:8080"),
            (" 127.0.0.1:8080 ", "http://127.0.0.1:8080"),
            ("https://ta.example/v1", "https://ta.example"),
            ("https://ta.example/v1/", "https://ta.example"),
            (
                "http://ta.example/gonka/v1/chat/completions",
                "http://ta.example/gonka",
            ),
            ("HTTP://TA.example:80/", "http://ta.example"),
        ] {
            assert_eq!(base_url(typed).unwrap(), base, "{typed}");
        }
        for bad in ["ftp://ta.example", "http://", "http://ta.example/?x=1", ""] {
            assert!(base_url(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn client_dedupes_and_needs_a_transfer_agent() {
        let key = || Key::from_mnemonic(&crate::keys::well_known_mnemonic("alice")).unwrap();
        let urls = [
            "http://a:1/".to_string(),
            "a:1".into(),
            "http://b:2/v1".into(),
        ];
        let client = ChatClient::new(key(), &urls).unwrap();
        assert_eq!(client.transfer_agents(), ["http://a:1", "http://b:2"]);
        assert!(ChatClient::new(key(), &[]).is_err());
        assert!(ChatClient::new(key(), &["ftp://a".into()]).is_err());
    }

    #[test]
    fn body_is_openai_json_and_nonces_are_fresh() {
        let mut request = ChatRequest::new(DEFAULT_MODEL, vec![Message::user("hi")]);
        let body: serde_json::Value = serde_json::from_slice(&request.body()).unwrap();
        assert_eq!(
            body,
            serde_json::json!({
                "model": DEFAULT_MODEL,
                "messages": [{"role": "user", "content": "hi"}],
                "max_tokens": DEFAULT_MAX_TOKENS,
                "stream": true,
                "stream_options": {"include_usage": true},
            })
        );
        request.stream = false;
        request.max_tokens = Some(7);
        let body: serde_json::Value = serde_json::from_slice(&request.body()).unwrap();
        assert_eq!(body["max_tokens"], 7);
        assert!(body.get("stream_options").is_none());
        assert_eq!(nonce().len(), 32);
        assert_ne!(nonce(), nonce());
    }

    #[test]
    fn identity_fields_of_newer_tas_are_optional() {
        let old: Identity =
            serde_json::from_str(r#"{"address":"gonka1ta","pubkey":"02ab","url":"http://ta"}"#)
                .unwrap();
        assert_eq!(old.chain_id, "");
        assert!(old.transfer_agents.is_empty() && old.models.is_empty());
        let new: Identity = serde_json::from_str(
            r#"{"address":"a","pubkey":"p","url":"u","chain_id":"gonka-1","transfer_agents":[{"address":"b","url":"http://b"}],"models":[{"id":"m","price_per_token":"3"}]}"#,
        )
        .unwrap();
        assert_eq!(new.chain_id, "gonka-1");
        assert_eq!(new.models[0].price_per_token, "3");
        assert_eq!(new.transfer_agents[0].url, "http://b");
    }

    #[test]
    fn errors_say_what_happened() {
        let refused = ChatError::Refused {
            url: "http://ta".into(),
            status: 401,
            message: "bad signature".into(),
            code: Some("invalid_signature".into()),
        };
        assert_eq!(
            refused.to_string(),
            "the TA http://ta refused the request: bad signature (401 invalid_signature)"
        );
        let exhausted = ChatError::Exhausted(vec![
            FailedAttempt {
                url: "http://a".into(),
                error: "connection refused".into(),
            },
            FailedAttempt {
                url: "http://b".into(),
                error: "503: busy".into(),
            },
        ]);
        assert_eq!(
            exhausted.to_string(),
            "no transfer agent could serve the request: http://a: connection refused; http://b: 503: busy"
        );
    }
}
