//! `POST /gonka/v1/score` ([`SCORE_PATH`]): the language model's scores of given output
//! tokens, for the host's validation worker checking a record of a model the chain validates
//! by log-probabilities (`Model.validation = "logprobs"`, [`gonka_proto::scored`]).
//!
//! The worker sends the record's original chat completion request, the executor's output
//! tokens (ending with the stop token when the executor's answer stopped) and the model's
//! `logprob_top_k` ([`ScoreRequest`]); the node renders the chat prompt exactly as generation
//! does, scores the tokens in one teacher-forced pass ([`gonka_llm::Llm::score`]) and answers
//! the scored output as the executor's receipt carries it ([`ScoreResponse`]): positions in
//! the chain's fixed point, `prompt_tokens` the prompt's token count. An honest executor
//! running this crate's kernel is reproduced exactly.
//!
//! Only the node's host may call (a node-call signature without a request hash, checked like
//! an unreceipted chat completion: [`crate::access`]); a node off chain (no callers
//! configured) serves anyone, as it does chat completions. A call takes a generation slot.
//! Errors are OpenAI-style JSON: 413 for a body over the node's limit, 401/403 for callers,
//! 400 `invalid_json`, 404 `model_not_found` for a model the node does not serve, 400
//! `model_not_scored` for one it serves but does not score (the reference model), 400
//! `invalid_top_k` (1 to [`MAX_TOP_K`]), 400 `invalid_tokens` (1 to the model's context, each
//! in its vocabulary), 400 `context_length_exceeded`, 503 `overloaded`.
//!
//! The caller's side (the request body, its signature, the answer checked back into a
//! `ScoredOutput`) is `gonka_client::score`, re-exported here, so both ends read one
//! definition.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::Json;
use gonka_client::openai::ApiError;
pub use gonka_client::score::{
    request_score, ScoreRequest, ScoreResponse, SignedScoreCall, MAX_TOP_K, SCORE_PATH,
};
use gonka_client::server::read_body;
use prost::Message;

use crate::{llm, ChatCompletionRequest, Node};

/// The handler of [`SCORE_PATH`].
pub(crate) async fn handle(
    State(node): State<Arc<Node>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let response = match score(&node, &headers, body).await {
        Ok(answer) => Json(answer).into_response(),
        Err(e) => {
            if e.status.is_server_error() {
                tracing::warn!(status = e.status.as_u16(), code = e.code, message = %e.message, "scoring failed");
            } else {
                tracing::info!(
                    status = e.status.as_u16(),
                    code = e.code,
                    "score request refused"
                );
            }
            e.into_response()
        }
    };
    node.metrics.scored(response.status().as_u16());
    response
}

/// Checks a score request in the order a caller would fix it (body size, caller, JSON shape,
/// model, messages, top_k, tokens, prompt), then scores it in a generation slot.
async fn score(node: &Node, headers: &HeaderMap, body: Body) -> Result<ScoreResponse, ApiError> {
    let cfg = &node.config;
    let bytes = read_body(body, cfg.max_body_bytes, cfg.server.body_timeout).await?;
    if let Some(callers) = &cfg.callers {
        // No request hash: only the host may call, as for an unreceipted chat completion.
        callers.admit(
            &cfg.node_id,
            headers,
            None,
            &bytes,
            gonka_client::unix_now(),
            cfg.max_skew_secs,
        )?;
    }
    let asked: ScoreRequest = serde_json::from_slice(&bytes).map_err(|e| {
        ApiError::invalid_json(format!(
            "expected a JSON score request {{request, tokens, top_k}}: {e}"
        ))
    })?;
    let req: ChatCompletionRequest =
        serde_json::from_value(asked.request.clone()).map_err(|e| {
            ApiError::invalid_json(format!(
            "expected `request` to be a JSON chat completion request {{model, messages, ...}}: {e}"
        ))
        })?;
    if !cfg.models().contains(&req.model) {
        return Err(ApiError::model_not_found(
            &req.model,
            &cfg.models().join(", "),
        ));
    }
    let Some(llm) = node.llm_for(&req.model) else {
        return Err(ApiError::invalid_value(
            "model_not_scored",
            format!(
                "the model `{}` is validated exactly on this ML node; only its language model{} is scored",
                req.model,
                cfg.llm
                    .as_ref()
                    .map(|m| format!(" `{}`", m.id))
                    .unwrap_or_default()
            ),
        ));
    };
    if req.messages.is_empty() {
        return Err(ApiError::invalid_value(
            "invalid_messages",
            "`request.messages` must hold at least one message but is empty".to_string(),
        ));
    }
    if !(1..=MAX_TOP_K).contains(&asked.top_k) {
        return Err(ApiError::invalid_value(
            "invalid_top_k",
            format!(
                "`top_k` must be between 1 and {MAX_TOP_K} but is {}",
                asked.top_k
            ),
        ));
    }
    let context = llm.model.context_length();
    let n = asked.tokens.len();
    if !(1..=context).contains(&n) {
        return Err(ApiError::invalid_value(
            "invalid_tokens",
            format!("`tokens` must hold 1 to {context} tokens (the model's context) but holds {n}"),
        ));
    }
    let vocab = llm.model.tokenizer().vocab_size();
    if let Some((i, t)) = asked
        .tokens
        .iter()
        .enumerate()
        .find(|(_, t)| **t as usize >= vocab)
    {
        return Err(ApiError::invalid_value(
            "invalid_tokens",
            format!("`tokens[{i}]` is {t}, outside the model's vocabulary of {vocab} tokens"),
        ));
    }
    let prompt = crate::prompt_of(node, &req)?;
    if prompt.len() + n > context {
        return Err(ApiError::invalid_value(
            "context_length_exceeded",
            format!(
                "{} prompt tokens plus {n} tokens to score exceed the model's context of {context}",
                prompt.len()
            ),
        ));
    }
    let permit = node
        .slots
        .clone()
        .try_acquire_owned()
        .map_err(|_| ApiError::overloaded(cfg.max_concurrency))?;
    let model = llm.model.clone();
    let k = asked.top_k as usize;
    let tokens = asked.tokens;
    let (prompt_tokens, positions) = tokio::task::spawn_blocking(move || {
        let _permit = permit; // the slot is busy until scoring ends
        model
            .score(&prompt, &tokens, k)
            .map(|positions| (prompt.len(), positions))
    })
    .await
    .map_err(|e| ApiError::internal(format!("scoring thread failed: {e}")))?
    .map_err(llm::model_error)?;
    let output = llm::scored_output(prompt_tokens, &positions, k);
    tracing::info!(
        prompt_tokens,
        tokens = output.positions.len(),
        top_k = k,
        "tokens scored"
    );
    Ok(ScoreResponse {
        scored: hex::encode(output.encode_to_vec()),
        prompt_tokens: output.prompt_tokens,
    })
}
