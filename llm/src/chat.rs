//! The GGUF's `tokenizer.chat_template`, rendered with minijinja.

use candle_core::quantized::gguf_file::Content;
use serde::{Deserialize, Serialize};

use crate::{Error, Tokenizer};

/// One OpenAI-style chat message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatMessage {
    /// `system`, `user` or `assistant`.
    pub role: String,
    /// The message text.
    pub content: String,
}

impl ChatMessage {
    /// A message with the given role and content.
    pub fn new(role: impl Into<String>, content: impl Into<String>) -> Self {
        Self {
            role: role.into(),
            content: content.into(),
        }
    }
}

/// The compiled template with the special tokens it may refer to.
pub(crate) struct ChatTemplate {
    env: minijinja::Environment<'static>,
    bos_token: String,
    eos_token: String,
}

const NAME: &str = "chat";

impl ChatTemplate {
    pub(crate) fn from_gguf(ct: &Content, tokenizer: &Tokenizer) -> Result<Self, Error> {
        let source = ct
            .metadata
            .get("tokenizer.chat_template")
            .and_then(|v| v.to_string().ok())
            .ok_or_else(|| Error::Format("GGUF metadata has no tokenizer.chat_template".into()))?
            .clone();
        let mut env = minijinja::Environment::new();
        env.add_template_owned(NAME, source)
            .map_err(|e| Error::Template(e.to_string()))?;
        let text = |id: Option<u32>| {
            id.map(|t| String::from_utf8_lossy(tokenizer.token_bytes(t)).into_owned())
                .unwrap_or_default()
        };
        Ok(Self {
            env,
            bos_token: text(tokenizer.bos()),
            eos_token: text(Some(tokenizer.eos())),
        })
    }

    pub(crate) fn render(&self, messages: &[ChatMessage]) -> Result<String, Error> {
        if messages.is_empty() {
            return Err(Error::InvalidRequest(
                "a chat needs at least one message".into(),
            ));
        }
        let tmpl = self
            .env
            .get_template(NAME)
            .map_err(|e| Error::Template(e.to_string()))?;
        tmpl.render(minijinja::context! {
            messages => messages,
            add_generation_prompt => true,
            bos_token => self.bos_token,
            eos_token => self.eos_token,
        })
        .map_err(|e| Error::Template(e.to_string()))
    }
}
