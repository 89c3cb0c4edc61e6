//! A language model (a GGUF file run by [`gonka_llm`] on the CPU) as a backend: sampling
//! (`temperature`, `top_p`, `seed`; greedy at temperature 0), OpenAI `logprobs` and
//! `top_logprobs`, plain and streamed answers. Each generation runs on a blocking thread so
//! the server keeps answering while it computes.
//!
//! When the chain validates the model by log-probabilities ([`LlmModel::logprob_top_k`]), a
//! receipted answer also yields its scored output ([`scored_output`]), which the receipt
//! commits to; the same conversion serves `POST /gonka/v1/score` ([`crate::score`]), so an
//! executor's and a validator's scores of the same tokens are equal bit for bit.

use std::sync::Arc;

use gonka_llm::{logprob_to_fixed, GenerateParams, Generation, Llm, TokenLogprobs};
use gonka_proto::disputes::{ScoredOutput, ScoredToken};
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
    /// `Some(k)` when the chain validates this model by log-probabilities
    /// (`Model.validation = "logprobs"`) with `k` alternatives per position (1 to 20): the
    /// receipts of its answers commit to their scored output. `None` for an "exact" model.
    pub logprob_top_k: Option<u32>,
}

impl std::fmt::Debug for LlmModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LlmModel")
            .field("id", &self.id)
            .field("model", &self.model)
            .field("logprob_top_k", &self.logprob_top_k)
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

/// The generation parameters of an admitted request: the alternatives its client asked for,
/// or the scored output's `k` when that is more (the client still gets only its own).
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
        top_logprobs: top_logprobs.max(admitted.scored_top_k.unwrap_or(0)),
    }
}

pub(crate) fn model_error(e: gonka_llm::Error) -> ApiError {
    match e {
        gonka_llm::Error::InvalidRequest(message) => {
            ApiError::invalid_value("context_length_exceeded", message)
        }
        other => ApiError::internal(format!("the model failed: {other}")),
    }
}

/// One position of a scored output: `lp`'s token and log-probability and its `k` most likely
/// alternatives, in the chain's fixed point ([`logprob_to_fixed`]).
fn scored_token(lp: &TokenLogprobs, k: usize) -> ScoredToken {
    let top = &lp.top[..k.min(lp.top.len())];
    ScoredToken {
        token: lp.token,
        logprob: logprob_to_fixed(lp.logprob),
        top_tokens: top.iter().map(|&(token, _)| token).collect(),
        top_logprobs: top
            .iter()
            .map(|&(_, logprob)| logprob_to_fixed(logprob))
            .collect(),
    }
}

/// The scored output of `positions` (each scored with at least `k` alternatives) after a
/// prompt of `prompt_tokens`: what a receipt of a "logprobs" model commits to and what
/// `POST /gonka/v1/score` answers.
pub(crate) fn scored_output<'a>(
    prompt_tokens: usize,
    positions: impl IntoIterator<Item = &'a TokenLogprobs>,
    k: usize,
) -> ScoredOutput {
    ScoredOutput {
        prompt_tokens: prompt_tokens as u64,
        positions: positions
            .into_iter()
            .map(|lp| scored_token(lp, k))
            .collect(),
    }
}

/// The scored output of a generation: every generated token, then the stop token when the
/// model stopped.
fn generation_scored(generation: &Generation, k: usize) -> ScoredOutput {
    scored_output(
        generation.prompt_tokens,
        generation.logprobs.iter().chain(&generation.stop),
        k,
    )
}

/// OpenAI's form of one position's log-probabilities, with the `k` alternatives the client
/// asked for (generation may have computed more for the scored output).
fn token_logprob(model: &Llm, lp: &TokenLogprobs, k: usize) -> TokenLogprob {
    let text = |token: u32| {
        let bytes = model.tokenizer().token_bytes(token).to_vec();
        (String::from_utf8_lossy(&bytes).into_owned(), bytes)
    };
    let (token, bytes) = text(lp.token);
    TokenLogprob {
        token,
        logprob: f64::from(lp.logprob),
        bytes: Some(bytes),
        top_logprobs: lp.top[..k.min(lp.top.len())]
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
    let Sampling {
        logprobs,
        top_logprobs,
        ..
    } = admitted.sampling;
    let Admitted {
        prompt_tokens,
        scored_top_k,
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
                    .map(|lp| token_logprob(&model.model, lp, top_logprobs))
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
        scored: scored_top_k.map(|k| generation_scored(&generation, k)),
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
    let Sampling {
        logprobs,
        top_logprobs,
        ..
    } = admitted.sampling;
    let Admitted {
        prompt_tokens,
        include_usage,
        scored_top_k,
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
                content: vec![token_logprob(&llm, event.logprobs, top_logprobs)],
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
            && send(StreamItem::End {
                usage: Some(usage),
                scored: scored_top_k.map(|k| generation_scored(&generation, k)),
            });
    });
    rx
}
