//! The scoring call an ML node serves for its host's validation worker
//! (`POST /gonka/v1/score`, [`SCORE_PATH`]): the request body the worker sends, its node-call
//! signature, and the answer checked back into a [`ScoredOutput`], defined once for both ends
//! (the ML node's handler is `gonka_node::score`).
//!
//! The worker sends a record's original chat completion request, the executor's output tokens
//! (ending with the stop token when the executor's answer stopped) and the model's
//! `logprob_top_k`; the node scores the tokens after the rendered prompt in one teacher-forced
//! pass and answers the scored output as the executor's receipt carries it.

use anyhow::{anyhow, bail, Context};
use gonka_proto::disputes::ScoredOutput;
use gonka_proto::scored;
use prost::Message;
use serde::{Deserialize, Serialize};

use crate::http::{self as upstream, Limits};
use crate::node_call::sign_node_call;
use crate::{unix_now, Key};

/// The path of the scoring endpoint.
pub const SCORE_PATH: &str = "/gonka/v1/score";

/// Most alternatives per position a caller may ask for (the chain's bound on a model's
/// `logprob_top_k`).
pub const MAX_TOP_K: u32 = scored::MAX_TOP_K;

/// Body of `POST /gonka/v1/score`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScoreRequest {
    /// The original chat completion request body (`{model, messages, ...}`), as a JSON
    /// object: the prompt is rendered from its `model` and `messages`.
    pub request: serde_json::Value,
    /// The output tokens to score, in order; an answer that stopped ends with its stop token.
    pub tokens: Vec<u32>,
    /// Alternatives per position (the model's `logprob_top_k` on chain), 1 to [`MAX_TOP_K`].
    pub top_k: u32,
}

/// Answer of `POST /gonka/v1/score` (200).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScoreResponse {
    /// Hex of the protobuf `gonka.disputes.v1.ScoredOutput`: one position per token asked,
    /// log-probabilities as `gonka_llm::logprob_to_fixed`.
    pub scored: String,
    /// The prompt's token count (also the scored output's `prompt_tokens`).
    pub prompt_tokens: u64,
}

/// A score request ready to post: its body and the caller headers signing it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedScoreCall {
    /// The JSON [`ScoreRequest`].
    pub body: Vec<u8>,
    /// The node-call headers ([`gonka_client::node_call::CALLER_HEADERS`]) over `body`.
    pub headers: Vec<(&'static str, String)>,
}

impl ScoreRequest {
    /// The scoring request of `tokens` of a record whose request body was `payload` (as the
    /// requester signed it), with `top_k` alternatives per position.
    pub fn new(payload: &[u8], tokens: Vec<u32>, top_k: u32) -> anyhow::Result<ScoreRequest> {
        let request: serde_json::Value = serde_json::from_slice(payload)
            .context("the record's request body is not JSON; it cannot be scored")?;
        if !request.is_object() {
            bail!("the record's request body is JSON but not an object {{model, messages, ...}}");
        }
        Ok(ScoreRequest {
            request,
            tokens,
            top_k,
        })
    }

    /// The body to post and its caller headers, signed by `key` (the node's host) for node
    /// `node_id` at `timestamp` (unix seconds).
    pub fn signed(
        &self,
        key: &Key,
        node_id: &str,
        timestamp: u64,
    ) -> anyhow::Result<SignedScoreCall> {
        let body = serde_json::to_vec(self).context("serializing the score request")?;
        let headers = sign_node_call(key, node_id, None, &body, timestamp)?;
        Ok(SignedScoreCall { body, headers })
    }
}

impl ScoreResponse {
    /// The answer of a scoring call that ended with `status` and `body`: an error with the
    /// node's message unless it is a 200 [`ScoreResponse`].
    pub fn from_answer(status: u16, body: &[u8]) -> anyhow::Result<ScoreResponse> {
        if status != 200 {
            bail!(
                "the ML node answered {status} to {SCORE_PATH}: {}",
                String::from_utf8_lossy(body)
            );
        }
        serde_json::from_slice(body).with_context(|| {
            format!("the ML node's answer to {SCORE_PATH} is not {{scored, prompt_tokens}}")
        })
    }

    /// The scored output, checked against what `asked` for: well shaped
    /// ([`scored::check_shape`]), one position per asked token with that token, `top_k`
    /// alternatives at each, and the answer's prompt count.
    pub fn scored_output(&self, asked: &ScoreRequest) -> Result<ScoredOutput, String> {
        let output = hex::decode(&self.scored)
            .ok()
            .and_then(|bytes| ScoredOutput::decode(bytes.as_slice()).ok())
            .ok_or_else(|| "the score answer's `scored` is not a hex ScoredOutput".to_string())?;
        scored::check_shape("scored", &output)?;
        let tokens: Vec<u32> = output.positions.iter().map(|p| p.token).collect();
        if tokens != asked.tokens {
            return Err(format!(
                "the score answer scores {} tokens other than the {} asked",
                tokens.len(),
                asked.tokens.len()
            ));
        }
        scored::check_against("scored", &output, asked.top_k, tokens.len() as u64)?;
        if output.prompt_tokens != self.prompt_tokens {
            return Err(format!(
                "the score answer says {} prompt tokens but its scored output {}",
                self.prompt_tokens, output.prompt_tokens
            ));
        }
        Ok(output)
    }
}

/// Scores `request` on the ML node at `authority` (`host:port`), registered as `node_id`,
/// as its host `key`: the whole call within `limits`, the answer checked
/// ([`ScoreResponse::scored_output`]).
pub async fn request_score(
    key: &Key,
    authority: &str,
    node_id: &str,
    request: &ScoreRequest,
    limits: Limits,
) -> anyhow::Result<ScoredOutput> {
    let SignedScoreCall { body, headers } = request.signed(key, node_id, unix_now())?;
    let headers: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
    let call = async {
        let response =
            upstream::request_with_headers(authority, "POST", SCORE_PATH, &headers, &body, limits)
                .await?;
        let status = response.status;
        Ok::<_, std::io::Error>((status, response.read_body().await?))
    };
    let (status, answer) = call
        .await
        .with_context(|| format!("POST http://{authority}{SCORE_PATH}"))?;
    ScoreResponse::from_answer(status, &answer)?
        .scored_output(request)
        .map_err(|e| anyhow!("the ML node at {authority}: {e}"))
}
