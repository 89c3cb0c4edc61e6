//! What the ML node answers besides chat completions (`/v1/load`, `/v1/identity`); the
//! OpenAI chat-completions wire format it reads and writes is shared with the transfer agent
//! and `gonkad proxy` and lives in [`gonka_client::openai`].

use serde::{Deserialize, Serialize};

pub use gonka_client::openai::{
    AssistantMessage, ChatCompletion, ChatCompletionChunk, ChatCompletionRequest, ChatMessage,
    Choice, ChunkChoice, ContentPart, Delta, MessageContent, ModelCard, ModelList, StreamOptions,
    Usage,
};

/// `GET /v1/load` response: how busy the ML node is.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub struct Load {
    /// Generations running now (streaming ones count until their last event is produced).
    pub in_flight: usize,
    /// Generations allowed at once; more get 503.
    pub max_concurrency: usize,
}

/// `GET /v1/identity` response: who this ML node is, as it registers itself on chain.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Identity {
    /// The node id its receipts name.
    pub node_id: String,
    /// Hex of the compressed SEC1 public key that signs its receipts; null without a
    /// response key.
    pub pubkey: Option<String>,
    /// Model ids served.
    pub models: Vec<String>,
    /// Generations allowed at once; more get 503.
    pub max_concurrency: usize,
}
