//! The ML node over real sockets on 127.0.0.1, spoken to with hand-written HTTP/1.1 (no HTTP
//! client crate).

use std::net::SocketAddr;
use std::time::Duration;

use gonka_client::receipt::{Receipt, HEADER_RECEIPT};
use gonka_node::forward::Upstream;
use gonka_node::{self as ml_node, MlNodeConfig, DEFAULT_MODEL_ID};
use gonka_proto::signing::ReceiptTerms;
use k256::ecdsa::signature::Verifier;
use k256::ecdsa::{Signature, SigningKey};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use gonka_node::testing::*;

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

/// The JSON payloads of a server-sent event stream, in order (comment events skipped).
fn sse_data(body: &str) -> Vec<String> {
    assert!(
        body.ends_with("\n\n"),
        "event stream ends with a blank line"
    );
    body.split("\n\n")
        .filter(|e| !e.is_empty() && !e.starts_with(':'))
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
    assert_saturation_refuses(addr).await;
}

/// Holds the only slot of the node at `addr` with a slow request and checks that plain and
/// streaming requests get 503 meanwhile, and are served again afterwards.
async fn assert_saturation_refuses(addr: SocketAddr) {
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
async fn a_node_given_trained_weights_answers_with_them_not_with_its_seed() {
    let weights = gonka_model::weights::Weights::generate(99);
    let trained = start(MlNodeConfig {
        trained_weights: Some(std::sync::Arc::new(weights)),
        ..config()
    })
    .await;
    let seed_99 = start(MlNodeConfig {
        seed: 99,
        ..config()
    })
    .await;
    let default = start(config()).await;
    let content = |addr| async move {
        chat(addr, request("Hello, trained model", 40, false))
            .await
            .json()["choices"][0]["message"]["content"]
            .clone()
    };
    let answer = content(trained).await;
    assert_eq!(answer, content(seed_99).await, "the weights it was given");
    assert_ne!(answer, content(default).await, "not its seed's");
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

fn response_key(byte: u8) -> SigningKey {
    SigningKey::from_slice(&[byte; 32]).unwrap()
}

fn pubkey(key: &SigningKey) -> Vec<u8> {
    key.verifying_key()
        .to_encoded_point(true)
        .as_bytes()
        .to_vec()
}

/// The concatenated `delta.content` of the chunks of a stream.
fn streamed_text(body: &str) -> String {
    sse_data(body)
        .iter()
        .filter(|e| *e != "[DONE]")
        .map(|e| serde_json::from_str::<Value>(e).unwrap())
        .filter_map(|c| {
            c["choices"][0]["delta"]["content"]
                .as_str()
                .map(str::to_string)
        })
        .collect()
}

/// Checks `receipt` for `request_hash` with `key` (host `host`) both through
/// [`Receipt::verify`] and by hand over the chain's receipt/v2 sign bytes; returns its output
/// commitment.
fn assert_receipt_verifies(
    receipt: &Receipt,
    key: &SigningKey,
    host: &str,
    request_hash: &[u8; 32],
) -> [u8; 32] {
    let verified = receipt.verify(&pubkey(key), host, request_hash).unwrap();
    let signed = ReceiptTerms {
        request_hash: *request_hash,
        output_commitment: verified.output_commitment,
        prompt_tokens: receipt.prompt_tokens,
        completion_tokens: receipt.completion_tokens,
        node_id: receipt.node_id.clone(),
        host: host.to_string(),
    };
    key.verifying_key()
        .verify(
            &signed.sign_bytes(),
            &Signature::from_slice(&verified.signature).unwrap(),
        )
        .unwrap();
    verified.output_commitment
}

/// A stream's receipt, which must sit immediately before `data: [DONE]`.
fn stream_receipt(body: &str) -> Receipt {
    let receipt = Receipt::find_in_sse(body.as_bytes())
        .unwrap_or_else(|| panic!("the stream carries no receipt: {body}"));
    assert!(
        body.ends_with(&format!("{}data: [DONE]\n\n", receipt.sse_comment())),
        "the receipt comment comes right before [DONE]: {body}"
    );
    receipt
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn receipts_of_plain_and_streamed_answers_verify_and_agree() {
    let key = response_key(7);
    let addr = start(MlNodeConfig {
        node_id: "node-a".into(),
        host: "gonka1host".into(),
        response_key: Some(key.clone()),
        ..config()
    })
    .await;

    let (plain, request_hash) =
        chat_with_receipt(addr, &request("Sign this answer.", 32, false)).await;
    assert_eq!(plain.status, 200, "body: {}", plain.body);
    let receipt = Receipt::from_header(plain.header(HEADER_RECEIPT).unwrap()).unwrap();
    let v = plain.json();
    let content = v["choices"][0]["message"]["content"].as_str().unwrap();
    assert_eq!(
        (receipt.node_id.as_str(), receipt.host.as_str()),
        ("node-a", "gonka1host")
    );
    assert_eq!(receipt.prompt_tokens, v["usage"]["prompt_tokens"]);
    assert_eq!(receipt.completion_tokens, v["usage"]["completion_tokens"]);
    assert_receipt_verifies(&receipt, &key, "gonka1host", &request_hash);
    assert!(receipt.commits_to(content));
    // Another request hash or host does not verify.
    assert!(receipt
        .verify(&pubkey(&key), "gonka1host", &[0xcd; 32])
        .is_err());
    assert!(receipt
        .verify(&pubkey(&key), "gonka1other", &request_hash)
        .is_err());

    let (streamed, stream_hash) =
        chat_with_receipt(addr, &request("Sign this answer.", 32, true)).await;
    assert_eq!(streamed.status, 200);
    assert_eq!(streamed_text(&streamed.body), content);
    let stream_receipt = stream_receipt(&streamed.body);
    assert_receipt_verifies(&stream_receipt, &key, "gonka1host", &stream_hash);
    // Same completion, same counts, a commitment to the same text (under its own salt).
    assert!(stream_receipt.commits_to(content));
    assert_eq!(
        (
            stream_receipt.prompt_tokens,
            stream_receipt.completion_tokens
        ),
        (receipt.prompt_tokens, receipt.completion_tokens)
    );
    assert_ne!(stream_receipt.salt, receipt.salt);

    // Direct use without signed headers: no receipt.
    let direct = chat(addr, request("Sign this answer.", 32, false)).await;
    assert_eq!(direct.status, 200);
    assert_eq!(direct.header(HEADER_RECEIPT), None);
    let direct = chat(addr, request("Sign this answer.", 32, true)).await;
    assert!(Receipt::find_in_sse(direct.body.as_bytes()).is_none());
    assert!(direct.body.ends_with("}\n\ndata: [DONE]\n\n"));

    // A node without a response key answers without a receipt.
    let keyless = start(config()).await;
    let (resp, _) = chat_with_receipt(keyless, &request("Sign this answer.", 32, false)).await;
    assert_eq!(resp.status, 200);
    assert_eq!(resp.header(HEADER_RECEIPT), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identity_names_the_node_its_key_models_and_capacity() {
    let key = response_key(5);
    let addr = start(MlNodeConfig {
        node_id: "gpu-7".into(),
        model_id: "gonka/custom".into(),
        response_key: Some(key.clone()),
        max_concurrency: 3,
        ..config()
    })
    .await;
    let resp = http(addr, "GET", "/v1/identity", b"").await;
    assert_eq!(resp.status, 200);
    assert_eq!(
        resp.json(),
        json!({
            "node_id": "gpu-7",
            "pubkey": hex::encode(pubkey(&key)),
            "models": ["gonka/custom"],
            "max_concurrency": 3
        })
    );
    let keyless = start(config()).await;
    assert_eq!(
        http(keyless, "GET", "/v1/identity", b"").await.json()["pubkey"],
        Value::Null
    );
}

/// The model name the "upstream OpenAI server" (a reference ML node) serves.
const UPSTREAM_MODEL: &str = "upstream/reference";

/// Starts a reference ML node serving [`UPSTREAM_MODEL`] as the upstream, and an ML node
/// with response key `key` forwarding [`DEFAULT_MODEL_ID`] to it; returns both addresses.
async fn start_forwarding(key: &SigningKey, upstream: MlNodeConfig) -> (SocketAddr, SocketAddr) {
    let upstream = start(MlNodeConfig {
        model_id: UPSTREAM_MODEL.into(),
        ..upstream
    })
    .await;
    let forwarder = start(MlNodeConfig {
        node_id: "forwarder".into(),
        response_key: Some(key.clone()),
        upstream: Some(forward_to(upstream, None)),
        ..config()
    })
    .await;
    (upstream, forwarder)
}

fn forward_to(addr: SocketAddr, api_key: Option<&str>) -> Upstream {
    Upstream::new(
        &format!("http://{addr}"),
        Some(UPSTREAM_MODEL.into()),
        api_key.map(str::to_string),
    )
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forwarding_node_relays_the_upstream_and_signs_with_its_own_key() {
    let key = response_key(9);
    let (upstream, forwarder) = start_forwarding(&key, config()).await;
    let prompt = "Forward me, please.";
    let mut direct_request = request(prompt, 40, false);
    direct_request["model"] = json!(UPSTREAM_MODEL);
    let direct = chat(upstream, direct_request).await.json();
    let expected = direct["choices"][0]["message"]["content"].as_str().unwrap();

    // Plain: the upstream's content and usage, the served model id, the forwarder's receipt.
    let (plain, request_hash) = chat_with_receipt(forwarder, &request(prompt, 40, false)).await;
    assert_eq!(plain.status, 200, "body: {}", plain.body);
    let v = plain.json();
    assert_eq!(v["model"], DEFAULT_MODEL_ID);
    assert_eq!(v["choices"][0]["message"]["content"], expected);
    assert_eq!(v["usage"], direct["usage"]);
    let receipt = Receipt::from_header(plain.header(HEADER_RECEIPT).unwrap()).unwrap();
    assert_eq!(receipt.node_id, "forwarder");
    assert_eq!(
        receipt.completion_tokens,
        direct["usage"]["completion_tokens"]
    );
    assert_receipt_verifies(&receipt, &key, "", &request_hash);
    assert!(receipt.commits_to(expected));

    // Stream with usage: relayed chunks under the served id, the usage chunk, the receipt.
    let mut body = request(prompt, 40, true);
    body["stream_options"] = json!({"include_usage": true});
    let (streamed, _) = chat_with_receipt(forwarder, &body).await;
    assert_eq!(streamed.status, 200);
    assert!(streamed
        .header("content-type")
        .unwrap()
        .starts_with("text/event-stream"));
    assert_eq!(streamed_text(&streamed.body), expected);
    let events = sse_data(&streamed.body);
    let chunks: Vec<Value> = events[..events.len() - 1]
        .iter()
        .map(|e| serde_json::from_str(e).unwrap())
        .collect();
    assert!(chunks.iter().all(|c| c["model"] == DEFAULT_MODEL_ID));
    assert_eq!(chunks.last().unwrap()["usage"], direct["usage"]);
    assert!(stream_receipt(&streamed.body).commits_to(expected));

    // Stream without usage: the forced usage chunk is not relayed, the receipt still is.
    let (streamed, _) = chat_with_receipt(forwarder, &request(prompt, 40, true)).await;
    assert!(!streamed.body.contains("\"usage\""));
    let streamed_receipt = stream_receipt(&streamed.body);
    assert!(streamed_receipt.commits_to(expected));
    assert_eq!(
        streamed_receipt.completion_tokens,
        receipt.completion_tokens
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forwarding_respects_the_concurrency_limit() {
    let key = response_key(9);
    let upstream = MlNodeConfig {
        testing_delay_per_token: Duration::from_millis(10),
        ..config()
    };
    let upstream = start(MlNodeConfig {
        model_id: UPSTREAM_MODEL.into(),
        ..upstream
    })
    .await;
    let forwarder = start(MlNodeConfig {
        response_key: Some(key),
        upstream: Some(forward_to(upstream, None)),
        max_concurrency: 1,
        ..config()
    })
    .await;
    assert_saturation_refuses(forwarder).await;
}

/// A one-request fake OpenAI server: answers with `status` and `body` (close-delimited, no
/// `Content-Length`) and hands back the request head and body it received.
async fn fake_upstream(
    status: u16,
    body: &'static str,
) -> (SocketAddr, tokio::task::JoinHandle<(String, Value)>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let served = tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        let mut raw = Vec::new();
        let (head, length) = loop {
            let mut chunk = [0u8; 4096];
            let n = socket.read(&mut chunk).await.unwrap();
            raw.extend_from_slice(&chunk[..n]);
            if let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8(raw[..end].to_vec()).unwrap();
                let length: usize = head
                    .lines()
                    .find_map(|l| l.strip_prefix("Content-Length: "))
                    .unwrap()
                    .parse()
                    .unwrap();
                raw.drain(..end + 4);
                break (head, length);
            }
        };
        while raw.len() < length {
            let mut chunk = [0u8; 4096];
            let n = socket.read(&mut chunk).await.unwrap();
            raw.extend_from_slice(&chunk[..n]);
        }
        let answer = format!(
            "HTTP/1.1 {status} Whatever\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n{body}"
        );
        socket.write_all(answer.as_bytes()).await.unwrap();
        socket.shutdown().await.unwrap();
        (head, serde_json::from_slice(&raw).unwrap())
    });
    (addr, served)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forwarding_names_the_upstream_model_and_sends_the_api_key() {
    let (addr, served) = fake_upstream(
        200,
        r#"{"id":"x","object":"chat.completion","model":"upstream/reference","choices":[{"index":0,"message":{"role":"assistant","content":"Paris."},"finish_reason":"stop"}],"usage":{"prompt_tokens":11,"completion_tokens":2,"total_tokens":13}}"#,
    )
    .await;
    let forwarder = start(MlNodeConfig {
        upstream: Some(forward_to(addr, Some("sk-test"))),
        ..config()
    })
    .await;
    let mut body = request("Capital of France?", 8, false);
    body.as_object_mut().unwrap().remove("max_tokens");
    let resp = chat(forwarder, body).await;
    assert_eq!(resp.status, 200, "body: {}", resp.body);
    let v = resp.json();
    assert_eq!(v["model"], DEFAULT_MODEL_ID);
    assert_eq!(v["choices"][0]["message"]["content"], "Paris.");
    assert_eq!(v["usage"]["total_tokens"], 13);

    let (head, sent) = served.await.unwrap();
    assert!(head.starts_with("POST /v1/chat/completions HTTP/1.1\r\n"));
    assert!(head.contains("\r\nAuthorization: Bearer sk-test"));
    assert_eq!(sent["model"], UPSTREAM_MODEL);
    assert_eq!(
        sent["max_tokens"], 256,
        "the default max_tokens is resolved"
    );
    assert_eq!(sent["stream"], false);
    assert_eq!(sent["temperature"], 0.7, "other fields pass through");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_failures_give_502_with_an_openai_error_body() {
    // Nothing listens: connection refused.
    let closed = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let gone = closed.local_addr().unwrap();
    drop(closed);
    let forwarder = start(MlNodeConfig {
        upstream: Some(forward_to(gone, None)),
        ..config()
    })
    .await;
    for stream in [false, true] {
        let resp = chat(forwarder, request("hi", 4, stream)).await;
        assert_error(&resp, 502, "upstream_error");
    }
    // The slot is given back after a failure.
    assert_eq!(
        http(forwarder, "GET", "/v1/load", b"").await.json()["in_flight"],
        0
    );

    // The upstream refuses: its message is quoted.
    let (addr, _served) = fake_upstream(
        400,
        r#"{"error":{"message":"context too long for this model","type":"invalid_request_error"}}"#,
    )
    .await;
    let forwarder = start(MlNodeConfig {
        upstream: Some(forward_to(addr, None)),
        ..config()
    })
    .await;
    let resp = chat(forwarder, request("hi", 4, false)).await;
    assert_error(&resp, 502, "upstream_error");
    let message = resp.json()["error"]["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        message.contains("400") && message.contains("context too long"),
        "{message}"
    );

    // The upstream answers something that is not a completion.
    let (addr, _served) = fake_upstream(200, "<html>proxy error</html>").await;
    let forwarder = start(MlNodeConfig {
        upstream: Some(forward_to(addr, None)),
        ..config()
    })
    .await;
    assert_error(
        &chat(forwarder, request("hi", 4, false)).await,
        502,
        "upstream_error",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_answers_by_status_and_show_slots() {
    let addr = start(MlNodeConfig {
        max_concurrency: 3,
        ..config()
    })
    .await;
    let before = scrape_metrics(addr).await;
    assert_eq!(before.get("gonka_node_slots"), Some(&3.0));
    assert_eq!(before.get("gonka_node_busy_slots"), Some(&0.0));
    assert_eq!(before.get("gonka_node_response_seconds_count"), Some(&0.0));
    assert_eq!(chat(addr, request("hi", 2, false)).await.status, 200);
    assert_eq!(chat(addr, request("hi", 2, false)).await.status, 200);
    let mut wrong_model = request("hi", 2, false);
    wrong_model["model"] = json!("no-such-model");
    assert_eq!(chat(addr, wrong_model).await.status, 404);
    let after = scrape_metrics(addr).await;
    assert_eq!(
        after.get("gonka_node_requests_total{status=\"200\"}"),
        Some(&2.0)
    );
    assert_eq!(
        after.get("gonka_node_requests_total{status=\"404\"}"),
        Some(&1.0)
    );
    assert_eq!(after.get("gonka_node_response_seconds_count"), Some(&3.0));
    assert_eq!(after.get("gonka_node_busy_slots"), Some(&0.0));
}
