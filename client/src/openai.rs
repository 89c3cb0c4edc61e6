//! The OpenAI wire types more than one party of gonka reads or writes: the chat-completions
//! request, answer and stream chunks (ML node, `gonkad proxy`), the `usage` token counts (ML
//! node, transfer agent, chat client), the `/v1/models` listing (ML node, transfer agent,
//! proxy) and, with the `server` feature, the `{"error": {...}}` response the servers return
//! (`ApiError`).

use serde::{Deserialize, Serialize};

#[cfg(feature = "server")]
mod error;
#[cfg(feature = "server")]
pub use error::ApiError;

/// Token counts of a completion: the `usage` of an answer or of a stream's usage chunk.
/// Missing counts read as 0.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Tokens of the prompt (bytes of the chat-formatted prompt for the reference model).
    #[serde(default)]
    pub prompt_tokens: u64,
    /// Tokens generated.
    #[serde(default)]
    pub completion_tokens: u64,
    /// The sum of both.
    #[serde(default)]
    pub total_tokens: u64,
}

/// `GET /v1/models` entry.
#[derive(Debug, Clone, Serialize)]
pub struct ModelCard {
    /// The model id.
    pub id: String,
    /// Always `model`.
    pub object: &'static str,
    /// When the server started serving it (wall clock; 0 when unknown).
    pub created: u64,
    /// Who serves it.
    pub owned_by: &'static str,
}

/// `GET /v1/models` response.
#[derive(Debug, Clone, Serialize)]
pub struct ModelList {
    /// Always `list`.
    pub object: &'static str,
    /// The models served.
    pub data: Vec<ModelCard>,
}

/// `POST /v1/chat/completions` request body. The sampling fields are read by the language
/// model backend; the deterministic reference model ignores them (its decoding is always
/// greedy). Other OpenAI fields are accepted and ignored.
#[derive(Debug, Clone, Deserialize)]
pub struct ChatCompletionRequest {
    /// The model id.
    pub model: String,
    /// The conversation so far.
    pub messages: Vec<ChatMessage>,
    /// Completion budget; a default applies when absent.
    #[serde(default)]
    pub max_tokens: Option<i64>,
    /// OpenAI's newer name for `max_tokens`; used when `max_tokens` is absent.
    #[serde(default)]
    pub max_completion_tokens: Option<i64>,
    /// Send the answer as server-sent `chat.completion.chunk` events.
    #[serde(default)]
    pub stream: bool,
    /// Streaming options (`include_usage`).
    #[serde(default)]
    pub stream_options: Option<StreamOptions>,
    /// `temperature`, `top_p`, `seed`, `logprobs`, `top_logprobs`.
    #[serde(flatten)]
    pub sampling: Sampling,
}

/// How to decode and what to report: the sampling fields of a chat request, as clients send
/// them (and sign them, in gonka's). Read by language models; the deterministic reference
/// model decodes greedily whatever they say.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Sampling {
    /// Softmax temperature, 0 to 2; 0 (or absent) decodes greedily.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// Nucleus sampling mass, in (0, 1]; absent keeps every token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
    /// Seed of the sampler: equal seeds give equal answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// Report each generated token's log-probability.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub logprobs: bool,
    /// With `logprobs`, how many most likely alternatives to report per token (0 to 20).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_logprobs: Option<u32>,
}

/// The `logprobs` of a choice: one entry per generated token.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChoiceLogprobs {
    /// The generated tokens in order.
    pub content: Vec<TokenLogprob>,
}

/// One generated token with its log-probability and the most likely alternatives.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TokenLogprob {
    /// The token's text (UTF-8, lossy where a token holds part of a character).
    pub token: String,
    /// Natural log of its probability (≤ 0).
    pub logprob: f64,
    /// The token's bytes (null in OpenAI's schema when a server does not give them, as
    /// llama-cpp-python's server does not).
    #[serde(default)]
    pub bytes: Option<Vec<u8>>,
    /// The most likely tokens at this position, most likely first.
    pub top_logprobs: Vec<TopLogprob>,
}

/// An alternative token at one position.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TopLogprob {
    /// The token's text.
    pub token: String,
    /// Natural log of its probability (≤ 0).
    pub logprob: f64,
    /// The token's bytes (null in OpenAI's schema when a server does not give them, as
    /// llama-cpp-python's server does not).
    #[serde(default)]
    pub bytes: Option<Vec<u8>>,
}

/// `stream_options` of a request.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct StreamOptions {
    /// Send a final chunk with empty `choices` and the `usage` of the request.
    #[serde(default)]
    pub include_usage: bool,
}

/// One message of a request.
#[derive(Debug, Clone, Deserialize)]
pub struct ChatMessage {
    /// `system`, `user`, `assistant`, ...
    pub role: String,
    /// Text, or an array of content parts whose `text` parts are concatenated.
    #[serde(default)]
    pub content: Option<MessageContent>,
}

/// The `content` of a message.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum MessageContent {
    /// Plain text.
    Text(String),
    /// Content parts; only `text` parts carry text the reference model reads.
    Parts(Vec<ContentPart>),
}

/// One content part.
#[derive(Debug, Clone, Deserialize)]
pub struct ContentPart {
    /// Part type (`text`, `image_url`, ...).
    #[serde(rename = "type")]
    pub kind: String,
    /// The text of a `text` part.
    #[serde(default)]
    pub text: Option<String>,
}

impl ChatMessage {
    /// The text of the message (content parts concatenated, non-text parts skipped).
    pub fn text(&self) -> String {
        match &self.content {
            None => String::new(),
            Some(MessageContent::Text(t)) => t.clone(),
            Some(MessageContent::Parts(parts)) => parts
                .iter()
                .filter(|p| p.kind == "text")
                .filter_map(|p| p.text.as_deref())
                .collect(),
        }
    }
}

/// A complete assistant message.
#[derive(Debug, Clone, Serialize)]
pub struct AssistantMessage {
    /// Always `assistant`.
    pub role: &'static str,
    /// The generated text.
    pub content: String,
}

/// One choice of a non-streaming response.
#[derive(Debug, Clone, Serialize)]
pub struct Choice {
    /// Always 0 (one choice per request).
    pub index: u32,
    /// The answer.
    pub message: AssistantMessage,
    /// The tokens' log-probabilities when the request asked for them (`logprobs: true`) and
    /// the model reports them; null otherwise.
    pub logprobs: Option<ChoiceLogprobs>,
    /// `stop` (end token) or `length` (max_tokens reached).
    pub finish_reason: &'static str,
}

/// A `chat.completion` response.
#[derive(Debug, Clone, Serialize)]
pub struct ChatCompletion {
    /// `chatcmpl-...`, unique per request.
    pub id: String,
    /// Always `chat.completion`.
    pub object: &'static str,
    /// Wall-clock seconds since the Unix epoch.
    pub created: u64,
    /// The model id served.
    pub model: String,
    /// The single choice.
    pub choices: Vec<Choice>,
    /// Token counts.
    pub usage: Usage,
}

/// The `delta` of a streamed chunk: the role on the first chunk, text on the following ones,
/// nothing on the last.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Delta {
    /// `assistant` on the first chunk.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<&'static str>,
    /// Text added by this chunk.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
}

/// One choice of a streamed chunk.
#[derive(Debug, Clone, Serialize)]
pub struct ChunkChoice {
    /// Always 0.
    pub index: u32,
    /// What this chunk adds.
    pub delta: Delta,
    /// The log-probabilities of this chunk's tokens, as in [`Choice::logprobs`].
    pub logprobs: Option<ChoiceLogprobs>,
    /// Null until the last content chunk, then `stop` or `length`.
    pub finish_reason: Option<&'static str>,
}

/// A `chat.completion.chunk` server-sent event.
#[derive(Debug, Clone, Serialize)]
pub struct ChatCompletionChunk {
    /// The same id on every chunk of a response.
    pub id: String,
    /// Always `chat.completion.chunk`.
    pub object: &'static str,
    /// The same timestamp on every chunk of a response.
    pub created: u64,
    /// The model id served.
    pub model: String,
    /// One choice, or none on the usage chunk.
    pub choices: Vec<ChunkChoice>,
    /// Present (non-null) only on the usage chunk of `include_usage`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_keeps_the_openai_field_order_and_reads_missing_counts_as_zero() {
        let usage = Usage {
            prompt_tokens: 3,
            completion_tokens: 2,
            total_tokens: 5,
        };
        assert_eq!(
            serde_json::to_string(&usage).unwrap(),
            r#"{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}"#
        );
        let partial: Usage = serde_json::from_str(r#"{"completion_tokens":7}"#).unwrap();
        assert_eq!((partial.prompt_tokens, partial.completion_tokens), (0, 7));
    }

    #[test]
    fn logprobs_without_bytes_parse_as_llama_cpp_python_sends_them() {
        let entry: TokenLogprob = serde_json::from_str(
            r#"{"token":" Paris","logprob":-0.01,"bytes":null,"top_logprobs":[{"token":" Paris","logprob":-0.01,"bytes":null}]}"#,
        )
        .unwrap();
        assert_eq!((entry.bytes, &entry.top_logprobs[0].bytes), (None, &None));
        let given: TopLogprob =
            serde_json::from_str(r#"{"token":"a","logprob":-1.5,"bytes":[97]}"#).unwrap();
        assert_eq!(given.bytes, Some(vec![97]));
    }
}
