//! A language model (a GGUF file run by [`gonka_llm`] on the CPU) as a backend: sampling
//! (`temperature`, `top_p`, `seed`; greedy at temperature 0), OpenAI `logprobs` and
//! `top_logprobs`, plain and streamed answers. Each generation runs on a blocking thread so
//! the server keeps answering while it computes.

use std::sync::Arc;

use gonka_llm::{GenerateParams, Generation, Llm, TokenLogprobs};
use tokio::sync::mpsc;

use super::{
    unix_now, Admitted, Answer, ApiError, AssistantMessage, ChatCompletion, Choice, Chunks, Delta,
    Node, Sampling, StreamItem, Usage,
};
use gonka_client::openai::{ChoiceLogprobs, TokenLogprob, TopLogprob};

/// A language model the ML node serves, under its model id.
#[derive(Clone)]
pub struct LlmModel {
    /// The model id clients name and the chain prices, e.g. `HuggingFaceTB/SmolLM2-135M-Instruct`.
    pub id: String,
    /// The loaded model.
    pub model: Arc<Llm>,
}

impl std::fmt::Debug for LlmModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LlmModel")
            .field("id", &self.id)
            .field("model", &self.model)
            .finish()
    }
}

/// The chat-formatted prompt of `turns` as the model's tokens.
pub(super) fn prompt(model: &Llm, turns: &[(String, String)]) -> Result<Vec<u32>, ApiError> {
    let messages: Vec<gonka_llm::ChatMessage> = turns
        .iter()
        .map(|(role, content)| gonka_llm::ChatMessage::new(role.clone(), content.clone()))
        .collect();
    model.chat_prompt(&messages).map_err(|e| {
        ApiError::invalid_value("invalid_messages", format!("cannot format the chat: {e}"))
    })
}

/// The generation parameters of an admitted request.
fn params(admitted: &Admitted) -> GenerateParams {
    let Sampling {
        temperature,
        top_p,
        seed,
        top_logprobs,
        ..
    } = admitted.sampling;
    GenerateParams {
        max_tokens: admitted.max_tokens,
        temperature,
        top_p,
        seed,
        top_logprobs,
    }
}

fn model_error(e: gonka_llm::Error) -> ApiError {
    match e {
        gonka_llm::Error::InvalidRequest(message) => {
            ApiError::invalid_value("context_length_exceeded", message)
        }
        other => ApiError::internal(format!("the model failed: {other}")),
    }
}

/// OpenAI's form of one position's log-probabilities.
fn token_logprob(model: &Llm, lp: &TokenLogprobs) -> TokenLogprob {
    let text = |token: u32| {
        let bytes = model.tokenizer().token_bytes(token).to_vec();
        (String::from_utf8_lossy(&bytes).into_owned(), bytes)
    };
    let (token, bytes) = text(lp.token);
    TokenLogprob {
        token,
        logprob: f64::from(lp.logprob),
        bytes: Some(bytes),
        top_logprobs: lp
            .top
            .iter()
            .map(|&(id, logprob)| {
                let (token, bytes) = text(id);
                TopLogprob {
                    token,
                    logprob: f64::from(logprob),
                    bytes: Some(bytes),
                }
            })
            .collect(),
    }
}

fn usage(generation_prompt: usize, completion: usize) -> Usage {
    Usage {
        prompt_tokens: generation_prompt as u64,
        completion_tokens: completion as u64,
        total_tokens: (generation_prompt + completion) as u64,
    }
}

/// Generates the whole completion, then answers it as one `chat.completion`.
pub(super) async fn complete(
    node: &Node,
    model: &LlmModel,
    admitted: Admitted,
) -> Result<Answer, ApiError> {
    let llm = model.model.clone();
    let params = params(&admitted);
    let logprobs = admitted.sampling.logprobs;
    let Admitted {
        prompt_tokens,
        permit,
        ..
    } = admitted;
    let generation: Generation = tokio::task::spawn_blocking(move || {
        let _permit = permit; // the slot is busy until generation ends
        llm.generate(&prompt_tokens, &params, |_| true)
    })
    .await
    .map_err(|e| ApiError::internal(format!("generation thread failed: {e}")))?
    .map_err(model_error)?;
    let usage = usage(generation.prompt_tokens, generation.tokens.len());
    let completion = ChatCompletion {
        id: node.completion_id(),
        object: "chat.completion",
        created: unix_now(),
        model: model.id.clone(),
        choices: vec![Choice {
            index: 0,
            message: AssistantMessage {
                role: "assistant",
                content: generation.text.clone(),
            },
            logprobs: logprobs.then(|| ChoiceLogprobs {
                content: generation
                    .logprobs
                    .iter()
                    .map(|lp| token_logprob(&model.model, lp))
                    .collect(),
            }),
            finish_reason: generation.finish_reason.as_str(),
        }],
        usage,
    };
    let body = serde_json::to_value(&completion)
        .map_err(|e| ApiError::internal(format!("cannot serialize the completion: {e}")))?;
    Ok(Answer {
        body,
        content: generation.text,
        usage,
    })
}

/// Starts generating on a blocking thread that sends one chunk per token (with its
/// log-probabilities when asked): first the role, then the tokens, the finish reason, the
/// usage chunk if the request asked for it, and the end. A client that goes away stops the
/// generation.
pub(super) fn stream(
    node: &Node,
    model: &LlmModel,
    admitted: Admitted,
) -> mpsc::Receiver<StreamItem> {
    let llm = model.model.clone();
    let chunks = Chunks::new(node, model.id.clone());
    let params = params(&admitted);
    let logprobs = admitted.sampling.logprobs;
    let Admitted {
        prompt_tokens,
        include_usage,
        permit,
        ..
    } = admitted;
    let (tx, rx) = mpsc::channel::<StreamItem>(64);
    tokio::task::spawn_blocking(move || {
        let _permit = permit; // the slot is busy until generation ends
        let chunk = |delta, logprobs, finish, usage| chunks.chunk(delta, logprobs, finish, usage);
        let send = |item: StreamItem| tx.blocking_send(item).is_ok();
        let role = Delta {
            role: Some("assistant"),
            content: Some(String::new()),
        };
        let mut open = send(chunk(Some(role), None, None, None));
        let mut streamed = String::new();
        let generated = llm.generate(&prompt_tokens, &params, |event| {
            if !open {
                return false;
            }
            streamed.push_str(event.text);
            let delta = Delta {
                role: None,
                content: Some(event.text.to_string()),
            };
            let lp = logprobs.then(|| ChoiceLogprobs {
                content: vec![token_logprob(&llm, event.logprobs)],
            });
            open = send(chunk(Some(delta), lp, None, None));
            // The client went away: stop generating.
            open
        });
        let generation = match generated {
            Ok(generation) => generation,
            Err(e) => {
                tracing::warn!(error = %e, "generation failed; the stream ends unfinished");
                return;
            }
        };
        if !open {
            return;
        }
        let usage = usage(generation.prompt_tokens, generation.tokens.len());
        // Bytes of a character the last tokens left unfinished come out with the final text.
        if let Some(rest) = generation.text.strip_prefix(streamed.as_str()) {
            if !rest.is_empty() {
                let delta = Delta {
                    role: None,
                    content: Some(rest.to_string()),
                };
                if !send(chunk(Some(delta), None, None, None)) {
                    return;
                }
            }
        }
        let finish = generation.finish_reason.as_str();
        let _ = send(chunk(Some(Delta::default()), None, Some(finish), None))
            && (!include_usage || send(chunk(None, None, None, Some(usage))))
            && send(StreamItem::End { usage: Some(usage) });
    });
    rx
}
