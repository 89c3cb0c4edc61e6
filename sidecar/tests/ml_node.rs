//! The ML node over real sockets on 127.0.0.1, spoken to with hand-written HTTP/1.1 (no HTTP
//! client crate).

use std::net::SocketAddr;
use std::time::Duration;

use gonka_sidecar::ml_node::{self, MlNodeConfig, DEFAULT_MODEL_ID};
use serde_json::{json, Value};
use tokio::net::TcpListener;

mod common;
use common::*;

/// Starts an ML node on a free port and returns its address. It runs until the test ends.
async fn start(config: MlNodeConfig) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(ml_node::serve(listener, config, std::future::pending()));
    addr
}

fn config() -> MlNodeConfig {
    MlNodeConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        max_tokens_cap: 512,
        max_prompt_bytes: 2048,
        max_body_bytes: 16 * 1024,
        ..MlNodeConfig::default()
    }
}

/// Sends one request without extra headers.
async fn http(addr: SocketAddr, method: &str, path: &str, body: &[u8]) -> HttpResponse {
    http_request(addr, method, path, &[], body).await
}

async fn chat(addr: SocketAddr, body: Value) -> HttpResponse {
    http(
        addr,
        "POST",
        "/v1/chat/completions",
        body.to_string().as_bytes(),
    )
    .await
}

fn request(content: &str, max_tokens: u32, stream: bool) -> Value {
    json!({
        "model": DEFAULT_MODEL_ID,
        "messages": [
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": content}
        ],
        "max_tokens": max_tokens,
        "stream": stream,
        "temperature": 0.7
    })
}

/// The JSON payloads of a server-sent event stream, in order.
fn sse_data(body: &str) -> Vec<String> {
    assert!(
        body.ends_with("\n\n"),
        "event stream ends with a blank line"
    );
    body.split("\n\n")
        .filter(|e| !e.is_empty())
        .map(|e| {
            e.strip_prefix("data: ")
                .unwrap_or_else(|| panic!("event is not a data line: {e:?}"))
                .to_string()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn non_streaming_answer_has_openai_shape_and_usage() {
    let addr = start(config()).await;
    let prompt = "What is the capital of France?";
    let resp = chat(addr, request(prompt, 24, false)).await;
    assert_eq!(resp.status, 200, "body: {}", resp.body);
    let v = resp.json();
    assert!(v["id"].as_str().unwrap().starts_with("chatcmpl-"));
    assert_eq!(v["object"], "chat.completion");
    assert!(v["created"].as_u64().unwrap() > 1_600_000_000);
    assert_eq!(v["model"], DEFAULT_MODEL_ID);
    let choices = v["choices"].as_array().unwrap();
    assert_eq!(choices.len(), 1);
    assert_eq!(choices[0]["index"], 0);
    assert_eq!(choices[0]["message"]["role"], "assistant");
    let content = choices[0]["message"]["content"].as_str().unwrap();
    let finish = choices[0]["finish_reason"].as_str().unwrap();
    assert!(finish == "stop" || finish == "length");
    // Prompt tokens are the bytes of the chat-formatted prompt.
    let formatted =
        format!("<|system|>\nYou are a helpful assistant.\n<|user|>\n{prompt}\n<|assistant|>\n");
    let usage = &v["usage"];
    assert_eq!(usage["prompt_tokens"], formatted.len() as u64);
    assert_eq!(usage["completion_tokens"], content.len() as u64);
    assert_eq!(
        usage["total_tokens"].as_u64().unwrap(),
        formatted.len() as u64 + content.len() as u64
    );
    assert!(content.len() <= 24);
    if finish == "length" {
        assert_eq!(content.len(), 24);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streaming_chunks_concatenate_to_the_non_streaming_content() {
    let addr = start(config()).await;
    let plain = chat(addr, request("Tell me a story.", 48, false))
        .await
        .json();
    let expected = plain["choices"][0]["message"]["content"].as_str().unwrap();

    let mut body = request("Tell me a story.", 48, true);
    body["stream_options"] = json!({"include_usage": true});
    let resp = chat(addr, body).await;
    assert_eq!(resp.status, 200);
    assert!(resp
        .header("content-type")
        .unwrap()
        .starts_with("text/event-stream"));
    let events = sse_data(&resp.body);
    assert_eq!(events.last().unwrap(), "[DONE]");
    let chunks: Vec<Value> = events[..events.len() - 1]
        .iter()
        .map(|e| serde_json::from_str(e).unwrap())
        .collect();
    let id = chunks[0]["id"].as_str().unwrap();
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    let mut text = String::new();
    let mut finish = None;
    for c in &chunks {
        assert_eq!(c["object"], "chat.completion.chunk");
        assert_eq!(c["id"], id);
        assert_eq!(c["model"], DEFAULT_MODEL_ID);
        if let Some(choice) = c["choices"].as_array().unwrap().first() {
            assert_eq!(choice["index"], 0);
            if let Some(t) = choice["delta"]["content"].as_str() {
                text.push_str(t);
            }
            if let Some(f) = choice["finish_reason"].as_str() {
                finish = Some(f.to_string());
            }
        }
    }
    assert_eq!(text, expected);
    assert_eq!(
        finish.as_deref(),
        plain["choices"][0]["finish_reason"].as_str()
    );
    // include_usage: the last chunk has no choices and the same usage as the plain answer.
    let usage_chunk = chunks.last().unwrap();
    assert!(usage_chunk["choices"].as_array().unwrap().is_empty());
    assert_eq!(usage_chunk["usage"], plain["usage"]);

    // Without include_usage no chunk carries usage.
    let resp = chat(addr, request("Tell me a story.", 48, true)).await;
    let events = sse_data(&resp.body);
    assert_eq!(events.last().unwrap(), "[DONE]");
    assert!(events.iter().all(|e| !e.contains("\"usage\"")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrency_limit_gives_503_while_saturated() {
    let addr = start(MlNodeConfig {
        max_concurrency: 1,
        testing_delay_per_token: Duration::from_millis(10),
        ..config()
    })
    .await;
    let slow = tokio::spawn(chat(addr, request("Keep me busy.", 300, false)));
    // Wait until the slow request holds the only slot; /v1/load answers meanwhile, so the
    // server stays responsive during generation.
    let mut saturated = false;
    for _ in 0..200 {
        let load = http(addr, "GET", "/v1/load", b"").await.json();
        assert_eq!(load["max_concurrency"], 1);
        if load["in_flight"] == 1 {
            saturated = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(saturated, "the slow request never showed up in /v1/load");

    let refused = chat(addr, request("Me too!", 4, false)).await;
    assert_error(&refused, 503, "overloaded");
    assert_eq!(refused.header("retry-after"), Some("1"));
    let refused = chat(addr, request("Me too!", 4, true)).await;
    assert_error(&refused, 503, "overloaded");

    assert_eq!(slow.await.unwrap().status, 200);
    let load = http(addr, "GET", "/v1/load", b"").await.json();
    assert_eq!(load["in_flight"], 0);
    assert_eq!(chat(addr, request("Me too!", 4, false)).await.status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_status_and_openai_error_body() {
    let addr = start(config()).await;
    let post = |body: &'static [u8]| http(addr, "POST", "/v1/chat/completions", body);

    assert_error(&post(b"{not json").await, 400, "invalid_json");
    assert_error(&post(b"").await, 400, "invalid_json");
    assert_error(&post(br#"{"messages": []}"#).await, 400, "invalid_json");
    assert_error(
        &post(br#"{"model": "gonka/reference-1", "messages": "hi"}"#).await,
        400,
        "invalid_json",
    );

    let mut unknown = request("hi", 4, false);
    unknown["model"] = json!("gpt-4o");
    assert_error(&chat(addr, unknown).await, 404, "model_not_found");

    let mut empty = request("hi", 4, false);
    empty["messages"] = json!([]);
    assert_error(&chat(addr, empty).await, 400, "invalid_messages");

    for bad in [json!(0), json!(-5), json!(513), json!(1_000_000_000_000u64)] {
        let mut body = request("hi", 4, false);
        body["max_tokens"] = bad;
        assert_error(&chat(addr, body).await, 400, "invalid_max_tokens");
    }
    let mut fractional = request("hi", 4, false);
    fractional["max_tokens"] = json!(2.5);
    assert_error(&chat(addr, fractional).await, 400, "invalid_json");

    // 2048-byte prompt cap: a 3000-byte message is too long.
    let long = "x".repeat(3000);
    assert_error(
        &chat(addr, request(&long, 4, false)).await,
        413,
        "context_length_exceeded",
    );
    // 16 KiB body cap.
    let huge = "y".repeat(20 * 1024);
    assert_error(
        &chat(addr, request(&huge, 4, false)).await,
        413,
        "request_too_large",
    );

    assert_error(
        &http(addr, "GET", "/v1/nothing", b"").await,
        404,
        "not_found",
    );

    // The node still serves good requests afterwards.
    assert_eq!(chat(addr, request("hi", 4, false)).await.status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_ml_nodes_give_identical_content() {
    let a = start(config()).await;
    let b = start(config()).await;
    for prompt in ["Hello, gonka!", "Explain proof of work in one line."] {
        let ra = chat(a, request(prompt, 40, false)).await.json();
        let rb = chat(b, request(prompt, 40, false)).await.json();
        assert_eq!(ra["choices"], rb["choices"]);
        assert_eq!(ra["usage"], rb["usage"]);
    }
    let x = chat(a, request("first prompt", 40, false)).await.json();
    let y = chat(a, request("a different second prompt", 40, false))
        .await
        .json();
    assert_ne!(
        x["choices"][0]["message"]["content"],
        y["choices"][0]["message"]["content"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn models_and_load_endpoints() {
    let addr = start(MlNodeConfig {
        model_id: "gonka/custom".to_string(),
        max_concurrency: 3,
        ..config()
    })
    .await;
    let models = http(addr, "GET", "/v1/models", b"").await;
    assert_eq!(models.status, 200);
    let v = models.json();
    assert_eq!(v["object"], "list");
    assert_eq!(v["data"][0]["id"], "gonka/custom");
    assert_eq!(v["data"][0]["object"], "model");
    let load = http(addr, "GET", "/v1/load", b"").await.json();
    assert_eq!(load, json!({"in_flight": 0, "max_concurrency": 3}));
    // The configured id is the only one served.
    let mut body = request("hi", 4, false);
    body["model"] = json!("gonka/custom");
    assert_eq!(chat(addr, body).await.status, 200);
    assert_error(
        &chat(addr, request("hi", 4, false)).await,
        404,
        "model_not_found",
    );
}
