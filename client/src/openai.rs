//! The OpenAI wire types more than one party of gonka reads or writes: the `usage` token
//! counts (ML node, transfer agent, chat client), the `/v1/models` listing (ML node and
//! transfer agent) and, with the `server` feature, the `{"error": {...}}` response both
//! servers return (`ApiError`).

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
}
