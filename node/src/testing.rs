//! FOR TESTS ONLY (`testing` feature): hand-written HTTP/1.1 for the socket tests of the
//! sidecar roles (ML node, transfer agent, validator), with no HTTP client crate.

use std::net::SocketAddr;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A response as read off the wire.
#[derive(Debug)]
pub struct HttpResponse {
    /// HTTP status code.
    pub status: u16,
    /// Headers in order, names as sent.
    pub headers: Vec<(String, String)>,
    /// The body, de-chunked, as text.
    pub body: String,
}

impl HttpResponse {
    /// First header named `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The body as JSON; panics (failing the test) if it is not.
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("body is not JSON ({e}): {}", self.body))
    }
}

/// The Prometheus metrics a role serves at `addr` (`GET /metrics`, in the OpenMetrics text
/// format), parsed: sample (name with its labels) → value.
pub async fn scrape_metrics(addr: SocketAddr) -> std::collections::BTreeMap<String, f64> {
    let resp = http_request(addr, "GET", "/metrics", &[], &[]).await;
    assert_eq!(resp.status, 200, "GET /metrics: {}", resp.body);
    assert_eq!(
        resp.header("content-type"),
        Some(gonka_client::metrics::OPENMETRICS)
    );
    gonka_client::metrics::parse(&resp.body)
        .into_iter()
        .collect()
}

/// Sends one request with `Connection: close` and extra `headers`, and reads the whole
/// response, de-chunking a chunked body.
pub async fn http_request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, String)],
    body: &[u8],
) -> HttpResponse {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(body).await.unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await.unwrap();
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("response has a header block");
    let head = String::from_utf8(raw[..split].to_vec()).unwrap();
    let mut payload = raw[split + 4..].to_vec();
    let mut lines = head.split("\r\n");
    let status: u16 = lines
        .next()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    if headers
        .iter()
        .any(|(k, v)| k.eq_ignore_ascii_case("transfer-encoding") && v.contains("chunked"))
    {
        payload = dechunk(&payload);
    }
    HttpResponse {
        status,
        headers,
        body: String::from_utf8(payload).unwrap(),
    }
}

fn dechunk(mut data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let line_end = data.windows(2).position(|w| w == b"\r\n").unwrap();
        let size_text = std::str::from_utf8(&data[..line_end]).unwrap();
        let size = usize::from_str_radix(size_text.split(';').next().unwrap().trim(), 16).unwrap();
        data = &data[line_end + 2..];
        if size == 0 {
            return out;
        }
        out.extend_from_slice(&data[..size]);
        data = &data[size + 2..];
    }
}

/// Asserts an OpenAI-style JSON error body with `status` and `code`.
pub fn assert_error(resp: &HttpResponse, status: u16, code: &str) {
    assert_eq!(resp.status, status, "body: {}", resp.body);
    assert!(resp
        .header("content-type")
        .unwrap()
        .starts_with("application/json"));
    let body = resp.json();
    let error = &body["error"];
    assert!(error["message"].as_str().is_some_and(|m| !m.is_empty()));
    assert!(error["type"].as_str().is_some());
    assert_eq!(error["code"], code, "body: {}", resp.body);
    assert_eq!(body.as_object().unwrap().len(), 1);
}

/// Address the test requests of [`signed_request`] are signed for as their transfer agent.
pub const TEST_TRANSFER_AGENT: &str = "gonka1testtransferagent";

/// The requester key of [`signed_request`].
pub fn test_requester() -> gonka_client::Key {
    gonka_client::Key::from_mnemonic(&gonka_client::keys::well_known_mnemonic("requester"))
        .expect("the well-known mnemonic is valid")
}

/// The requester-signed headers of a request with `body` (its `model`, and its `max_tokens`
/// or 64 when absent, are the signed terms) for [`TEST_TRANSFER_AGENT`] with `nonce`, as a
/// transfer agent forwards them to an ML node; and the request hash the node must compute.
pub fn signed_request(body: &[u8], nonce: &str) -> (Vec<(&'static str, String)>, [u8; 32]) {
    signed_request_at(body, nonce, gonka_client::unix_now())
}

/// Posts `body` to the chat endpoint of the node at `addr` requester-signed (nonce `n-1`), as
/// a transfer agent forwards it; returns the response and the request hash its receipt must
/// name.
pub async fn chat_with_receipt(
    addr: std::net::SocketAddr,
    body: &Value,
) -> (HttpResponse, [u8; 32]) {
    let body = body.to_string();
    let (headers, request_hash) = signed_request(body.as_bytes(), "n-1");
    let resp = http_request(
        addr,
        "POST",
        "/v1/chat/completions",
        &headers,
        body.as_bytes(),
    )
    .await;
    (resp, request_hash)
}

/// [`signed_request`] signed at `timestamp` (unix seconds), for tests that must compute the
/// same request hash twice across a second boundary.
pub fn signed_request_at(
    body: &[u8],
    nonce: &str,
    timestamp: u64,
) -> (Vec<(&'static str, String)>, [u8; 32]) {
    let fields: Value = serde_json::from_slice(body).expect("a JSON test body");
    let terms = gonka_client::request::RequestTerms {
        chain_id: String::new(),
        body_hash: gonka_client::request::body_hash(body),
        timestamp,
        nonce: nonce.to_string(),
        commission: 0,
        transfer_agent: TEST_TRANSFER_AGENT.to_string(),
        model: fields["model"].as_str().unwrap_or_default().to_string(),
        max_price_per_token: 0,
        max_completion_tokens: fields["max_tokens"].as_u64().unwrap_or(64),
        max_prompt_tokens: gonka_proto::signing::prompt_token_bound(body),
    };
    let hash = terms.hash();
    let headers = gonka_client::request::sign_request(&test_requester(), body, terms)
        .expect("signing a test request");
    (headers, hash)
}

/// Reads one whole request off `socket` (its head, then a `content-length` body, so an answer
/// written next is not cut off by a reset) and returns its head; empty if the peer left.
pub async fn read_request(socket: &mut TcpStream) -> String {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        match socket.read(&mut chunk).await {
            Ok(0) | Err(_) => return String::new(),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
        let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
            continue;
        };
        let head = String::from_utf8_lossy(&buf[..end]).to_string();
        let length: usize = head
            .to_ascii_lowercase()
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
        if buf.len() >= end + 4 + length {
            return head;
        }
    }
}

/// What a node executed for a committed-batch test: request `nonce` on `chain` for transfer
/// agent `transfer_agent` (signed by `requester` at unix time 1,800,000,000 for the default
/// model at most `price` per token), `tokens` prompt and `tokens` completion tokens, its
/// receipt signed by `node_key` as node `node_id` of `host`, paid `2 × tokens × price`.
#[allow(clippy::too_many_arguments)]
pub fn served_record(
    chain: &str,
    transfer_agent: &str,
    requester: &gonka_client::Key,
    node_key: &k256::ecdsa::SigningKey,
    node_id: &str,
    host: &str,
    nonce: &str,
    tokens: u64,
    price: u128,
) -> gonka_client::settlement::Served {
    use gonka_client::tx::{signed_work_record, RequestTerms, WorkRecordInput};
    let input = WorkRecordInput {
        terms: RequestTerms {
            chain_id: chain.into(),
            body_hash: [1; 32],
            timestamp: 1_800_000_000,
            nonce: nonce.into(),
            commission: 1,
            transfer_agent: transfer_agent.into(),
            model: crate::DEFAULT_MODEL_ID.into(),
            max_price_per_token: price,
            max_completion_tokens: tokens,
            max_prompt_tokens: tokens,
        },
        response_hash: [2; 32],
        salt: [3; 32],
        scored: None,
        prompt_tokens: tokens,
        completion_tokens: tokens,
        executor_node: node_id.into(),
        host: host.into(),
    };
    gonka_client::settlement::Served {
        record: signed_work_record(requester, node_key, &input).expect("signing a test record"),
        host: host.into(),
        cost: u128::from(2 * tokens) * price,
        work_per_token: 0,
    }
}

/// Starts an ML node on 127.0.0.1 (the built-in model) as node `node_id` of `host`, signing
/// receipts with `node_key` and, when `cosigner` is given, co-signing its host's batches
/// with it; its address.
pub async fn start_receipting_node(
    node_id: &str,
    host: &str,
    node_key: k256::ecdsa::SigningKey,
    cosigner: Option<crate::cosign::Cosigner>,
) -> SocketAddr {
    let config = crate::MlNodeConfig {
        listen: "127.0.0.1:0".parse().expect("a socket address"),
        node_id: node_id.into(),
        host: host.into(),
        response_key: Some(node_key),
        ..crate::MlNodeConfig::default()
    };
    if let Some(cosigner) = cosigner {
        config
            .cosigner
            .set(cosigner)
            .expect("a fresh config has no co-signer");
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("binding a test ML node");
    let addr = listener.local_addr().expect("a bound address");
    tokio::spawn(crate::serve(listener, config, std::future::pending()));
    addr
}
