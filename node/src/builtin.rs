//! The built-in reference model as a backend: each generation runs on a blocking thread so
//! the server keeps answering while it computes.

use std::sync::Arc;

use tokio::sync::mpsc;

use super::{
    unix_now, Admitted, Answer, ApiError, AssistantMessage, ChatCompletion, Choice, Chunks, Delta,
    Node, StreamItem, Usage,
};
use gonka_model::{self as reference, ReferenceModel};

fn finish_reason(ended_by_end_token: bool) -> &'static str {
    if ended_by_end_token {
        "stop"
    } else {
        "length"
    }
}

fn usage(prompt_tokens: u64, completion_tokens: u64) -> Usage {
    Usage {
        prompt_tokens,
        completion_tokens,
        total_tokens: prompt_tokens + completion_tokens,
    }
}

/// Generates the whole completion, then answers it as one `chat.completion`.
pub(super) async fn complete(
    node: &Node,
    model: &Arc<ReferenceModel>,
    admitted: Admitted,
) -> Result<Answer, ApiError> {
    let model = model.clone();
    let delay = node.config.testing_delay_per_token;
    let Admitted {
        prompt_tokens,
        max_tokens,
        permit,
        ..
    } = admitted;
    let prompt_len = prompt_tokens.len() as u64;
    let (tokens, ended) = tokio::task::spawn_blocking(move || {
        let _permit = permit; // the slot is busy until generation ends
        let mut generation = model.stream(&prompt_tokens, max_tokens);
        let mut tokens = Vec::new();
        for token in generation.by_ref() {
            tokens.push(token);
            if !delay.is_zero() {
                std::thread::sleep(delay);
            }
        }
        (tokens, generation.ended_by_end_token())
    })
    .await
    .map_err(|e| ApiError::internal(format!("generation thread failed: {e}")))?;
    let usage = usage(prompt_len, tokens.len() as u64);
    let content = reference::decode(&tokens);
    let completion = ChatCompletion {
        id: node.completion_id(),
        object: "chat.completion",
        created: unix_now(),
        model: node.config.model_id.clone(),
        choices: vec![Choice {
            index: 0,
            message: AssistantMessage {
                role: "assistant",
                content: content.clone(),
            },
            logprobs: None,
            finish_reason: finish_reason(ended),
        }],
        usage,
    };
    let body = serde_json::to_value(&completion)
        .map_err(|e| ApiError::internal(format!("cannot serialize the completion: {e}")))?;
    Ok(Answer {
        body,
        content,
        usage,
        scored: None,
    })
}

/// Starts generating on a blocking thread that sends one chunk per token: first the role,
/// then the tokens, the finish reason, the usage chunk if the request asked for it, and the
/// end. A client that goes away stops the generation.
pub(super) fn stream(
    node: &Node,
    model: &Arc<ReferenceModel>,
    admitted: Admitted,
) -> mpsc::Receiver<StreamItem> {
    let model = model.clone();
    let delay = node.config.testing_delay_per_token;
    let chunks = Chunks::new(node, node.config.model_id.clone());
    let Admitted {
        prompt_tokens,
        max_tokens,
        include_usage,
        permit,
        ..
    } = admitted;
    let (tx, rx) = mpsc::channel::<StreamItem>(64);
    tokio::task::spawn_blocking(move || {
        let _permit = permit; // the slot is busy until generation ends or the client leaves
        let chunk = |delta: Option<Delta>, finish: Option<&'static str>, usage: Option<Usage>| {
            chunks.chunk(delta, None, finish, usage)
        };
        let send = |item: StreamItem| tx.blocking_send(item).is_ok();
        let role = Delta {
            role: Some("assistant"),
            content: Some(String::new()),
        };
        if !send(chunk(Some(role), None, None)) {
            return;
        }
        let prompt_len = prompt_tokens.len() as u64;
        let mut generation = model.stream(&prompt_tokens, max_tokens);
        let mut sent = 0u64;
        for token in generation.by_ref() {
            let delta = Delta {
                role: None,
                content: Some(reference::decode(&[token])),
            };
            if !send(chunk(Some(delta), None, None)) {
                return; // the client went away: stop generating
            }
            sent += 1;
            if !delay.is_zero() {
                std::thread::sleep(delay);
            }
        }
        let finish = finish_reason(generation.ended_by_end_token());
        let usage = usage(prompt_len, sent);
        // Each send stops the sequence once the client has gone away.
        let _ = send(chunk(Some(Delta::default()), Some(finish), None))
            && (!include_usage || send(chunk(None, None, Some(usage))))
            && send(StreamItem::End {
                usage: Some(usage),
                scored: None,
            });
    });
    rx
}
