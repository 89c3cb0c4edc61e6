//! The red-team suite of the transfer agent and the ML node's servers (issue 10, holes 7
//! and 12): one test per known attack, each running it over real sockets on 127.0.0.1 and
//! asserting that it fails. Timeouts are set to a few hundred milliseconds so the suite stays
//! fast; the defaults are in seconds.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use gonka_client::http::Limits;
use gonka_client::keys::well_known_mnemonic;
use gonka_client::receipt::{response_hash, Receipt, HEADER_RECEIPT};
use gonka_client::request as auth;
use gonka_client::server::ServerLimits;
use gonka_client::Key;
use gonka_node::testing::*;
use gonka_node::{self as ml_node, MlNodeConfig, DEFAULT_MODEL_ID};
use gonka_proto::signing::text_output_commitment;
use gonka_ta::{server, RateLimit, TaConfig, TaNodeConfig, TransferAgent};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

fn account(label: &str) -> Key {
    Key::from_mnemonic(&well_known_mnemonic(label)).unwrap()
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

static NONCE: AtomicU64 = AtomicU64::new(0);

/// `key`'s signed headers of `body` with a fresh nonce, for the chain-less test TAs (address
/// and chain id empty, every model free).
fn sign(key: &Key, body: &[u8]) -> Vec<(&'static str, String)> {
    let fields: Value = serde_json::from_slice(body).unwrap();
    let terms = auth::RequestTerms {
        chain_id: String::new(),
        body_hash: auth::body_hash(body),
        timestamp: now(),
        nonce: format!("n-{}", NONCE.fetch_add(1, Ordering::Relaxed)),
        commission: 0,
        transfer_agent: String::new(),
        model: fields["model"].as_str().unwrap().to_string(),
        max_price_per_token: 0,
        max_completion_tokens: fields["max_tokens"].as_u64().unwrap(),
        max_prompt_tokens: gonka_proto::signing::prompt_token_bound(body),
    };
    auth::sign_request(key, body, terms).unwrap()
}

/// Posts a chat request signed by `key` now with a fresh nonce.
async fn signed_chat_as(key: &Key, addr: SocketAddr, body: &Value) -> HttpResponse {
    let bytes = body.to_string().into_bytes();
    let headers = sign(key, &bytes);
    http_request(addr, "POST", "/v1/chat/completions", &headers, &bytes).await
}

async fn signed_chat(addr: SocketAddr, body: &Value) -> HttpResponse {
    signed_chat_as(&account("requester"), addr, body).await
}

fn request(content: &str, stream: bool) -> Value {
    json!({
        "model": DEFAULT_MODEL_ID,
        "messages": [{"role": "user", "content": content}],
        "max_tokens": 8,
        "stream": stream,
    })
}

/// An honest ML node (the reference model) within `server` limits.
async fn honest_node(server: ServerLimits) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let config = MlNodeConfig {
        listen: addr,
        max_concurrency: 8,
        server,
        ..MlNodeConfig::default()
    };
    tokio::spawn(ml_node::serve(listener, config, std::future::pending()));
    addr
}

/// What a malicious ML node does once it has read a request.
#[derive(Clone, Copy)]
enum Malice {
    /// Never sends a byte (holds the connection).
    Silent,
    /// Sends its status line a byte every 50 ms, for ever.
    TrickleHeaders,
    /// Sends its headers, then its body a byte every 50 ms, for ever.
    TrickleBody,
    /// Sends a 4 MiB body.
    Oversized,
    /// Starts an event stream, then goes silent.
    SilentStream,
    /// Answers a valid completion after holding the request 300 ms.
    Slow,
    /// Answers a valid completion with a receipt committing to log-probabilities, for a model
    /// validated by exact answers (so the answer text itself is bound to nothing).
    ScoredReceipt,
}

/// A malicious ML node; counts the requests it received.
async fn malicious_node(malice: Malice) -> (SocketAddr, Arc<AtomicU64>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let received = Arc::new(AtomicU64::new(0));
    let counter = received.clone();
    tokio::spawn(async move {
        loop {
            let (mut s, _) = listener.accept().await.unwrap();
            counter.fetch_add(1, Ordering::Relaxed);
            tokio::spawn(async move {
                read_request(&mut s).await;
                let tick = Duration::from_millis(50);
                match malice {
                    Malice::Silent => std::future::pending::<()>().await,
                    Malice::TrickleHeaders => {
                        for b in b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                            .iter()
                            .cycle()
                        {
                            if s.write_all(&[*b]).await.is_err() {
                                return;
                            }
                            tokio::time::sleep(tick).await;
                        }
                    }
                    Malice::TrickleBody => {
                        let head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n{";
                        let _ = s.write_all(head.as_bytes()).await;
                        while s.write_all(b" ").await.is_ok() {
                            tokio::time::sleep(tick).await;
                        }
                    }
                    Malice::Oversized => {
                        let head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n";
                        let _ = s.write_all(head.as_bytes()).await;
                        let _ = s.write_all(&vec![b' '; 4 << 20]).await;
                    }
                    Malice::SilentStream => {
                        let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n";
                        let _ = s.write_all(head.as_bytes()).await;
                        std::future::pending::<()>().await;
                    }
                    Malice::Slow => {
                        tokio::time::sleep(Duration::from_millis(300)).await;
                        let _ = s.write_all(completion("").as_bytes()).await;
                    }
                    Malice::ScoredReceipt => {
                        // It commits to the (empty) text it sends, as an exact receipt would.
                        let salt = [9u8; 32];
                        let receipt = Receipt {
                            node_id: "bad".into(),
                            host: "bad.example".into(),
                            output_commitment: hex::encode(text_output_commitment(
                                &salt,
                                &response_hash(""),
                            )),
                            salt: hex::encode(salt),
                            prompt_tokens: 1,
                            completion_tokens: 2,
                            signature: hex::encode([1u8; 64]),
                            scored: Some(hex::encode([0u8; 4])),
                        };
                        let header = format!("{HEADER_RECEIPT}: {}\r\n", receipt.to_header());
                        let _ = s.write_all(completion(&header).as_bytes()).await;
                    }
                }
            });
        }
    });
    (addr, received)
}

/// A complete, valid completion answer with extra header lines `headers`.
fn completion(headers: &str) -> String {
    let body = r#"{"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2}}"#;
    format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{headers}Connection: close\r\n\r\n{body}",
        body.len()
    )
}

fn node(id: &str, addr: SocketAddr, max_concurrency: u32, bandwidth_mbps: u64) -> TaNodeConfig {
    TaNodeConfig {
        id: id.to_string(),
        url: format!("http://{addr}"),
        models: vec![DEFAULT_MODEL_ID.to_string()],
        vram_mib: 0,
        bandwidth_mbps,
        max_concurrency,
    }
}

/// Node limits of a few hundred milliseconds.
fn fast_node_limits() -> Limits {
    Limits {
        connect: Duration::from_millis(300),
        first_byte: Duration::from_millis(300),
        idle: Duration::from_millis(200),
        total: Duration::from_millis(800),
        max_body: 1 << 20,
    }
}

async fn start_ta(config: TaConfig) -> (SocketAddr, Arc<TransferAgent>) {
    let ta = TransferAgent::new(config).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(server::serve(listener, ta.clone(), std::future::pending()));
    (addr, ta)
}

/// A TA in front of the malicious node (preferred: higher bandwidth) and an honest one.
async fn ta_with_a_malicious_node(
    malice: Malice,
) -> (SocketAddr, Arc<TransferAgent>, Arc<AtomicU64>) {
    let (bad, received) = malicious_node(malice).await;
    let good = honest_node(ServerLimits::default()).await;
    let (addr, ta) = start_ta(TaConfig {
        nodes: vec![node("bad", bad, 4, 1000), node("good", good, 4, 1)],
        node_limits: fast_node_limits(),
        ..TaConfig::default()
    })
    .await;
    (addr, ta, received)
}

/// The request went to the malicious node first, failed there within the limits, was
/// served by the honest node, and the malicious node is cooling down.
async fn assert_served_elsewhere_and_cooled_down(malice: Malice, stream: bool) {
    let (addr, ta, received) = ta_with_a_malicious_node(malice).await;
    let started = Instant::now();
    let resp = signed_chat(addr, &request("hello", stream)).await;
    assert_eq!(resp.status, 200, "body: {}", resp.body);
    assert_eq!(resp.header("x-gonka-executor"), Some("good"));
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(
        received.load(Ordering::Relaxed),
        1,
        "the malicious node was tried once"
    );
    let bad = &ta.node_status()[0];
    assert_eq!(bad.info.id, "bad");
    assert_eq!(bad.consecutive_failures, 1, "{bad:?}");
    assert!(bad
        .cooldown_until
        .is_some_and(|until| until > Instant::now()));
    assert_eq!(bad.in_flight, 0);
    // While it cools down, the next request does not go there at all.
    let again = signed_chat(addr, &request("again", stream)).await;
    assert_eq!(again.status, 200, "body: {}", again.body);
    assert_eq!(received.load(Ordering::Relaxed), 1);
}

/// Attack (hole 7): an ML node accepts requests and never answers, so every TA request
/// routed there hangs. The TA gives up at the first-byte timeout, cools the node down and
/// serves the request on another node.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_node_that_never_sends_its_first_byte_is_cooled_down_and_replaced() {
    assert_served_elsewhere_and_cooled_down(Malice::Silent, false).await;
}

/// Attack (hole 7): an ML node trickles its header block a byte at a time, resetting any
/// per-read timer. The whole header block has a deadline.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_node_that_trickles_its_headers_is_cooled_down_and_replaced() {
    assert_served_elsewhere_and_cooled_down(Malice::TrickleHeaders, false).await;
}

/// Attack (hole 7): an ML node sends its headers and then its body a byte at a time, never
/// silent long enough for an idle timeout. The whole answer has a deadline.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_node_that_trickles_its_body_is_cooled_down_and_replaced() {
    assert_served_elsewhere_and_cooled_down(Malice::TrickleBody, false).await;
}

/// Attack (hole 7): an ML node answers with a body far larger than any completion, to
/// exhaust the TA's memory. The TA reads at most `max_body` bytes of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_node_that_sends_an_oversized_answer_is_cooled_down_and_replaced() {
    assert_served_elsewhere_and_cooled_down(Malice::Oversized, false).await;
}

/// Attack (hole 7): an ML node starts an event stream and goes silent. Nothing went to the
/// client yet, so the stream is replaced by another node's.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_node_whose_stream_goes_silent_is_cooled_down_and_replaced() {
    assert_served_elsewhere_and_cooled_down(Malice::SilentStream, true).await;
}

/// Attack: an ML node serving a model validated by exact answers sends a receipt of the other
/// kind, committing to log-probabilities instead of the answer, so that whatever text it sent
/// could never be checked. The TA refuses to settle it and serves the request elsewhere.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_node_whose_receipt_is_of_the_wrong_kind_is_cooled_down_and_replaced() {
    assert_served_elsewhere_and_cooled_down(Malice::ScoredReceipt, false).await;
}

/// Attack (hole 7): an ML node declares `max_concurrency` u32::MAX, so the relative-load
/// routing would send it nearly every request. The TA believes it only up to its cap.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_node_declaring_u32_max_concurrency_gets_no_more_than_the_cap() {
    let (greedy, _) = malicious_node(Malice::Slow).await;
    let (honest, _) = malicious_node(Malice::Slow).await;
    let (addr, ta) = start_ta(TaConfig {
        nodes: vec![
            node("greedy", greedy, u32::MAX, 1000),
            node("honest", honest, 3, 1),
        ],
        max_node_concurrency: 3,
        ..TaConfig::default()
    })
    .await;
    let watcher = {
        let ta = ta.clone();
        tokio::spawn(async move {
            let mut most = (0, 0);
            for _ in 0..100 {
                let flight = ta.in_flight();
                most.0 = most.0.max(flight[0].1);
                most.1 = most.1.max(flight[1].1);
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            most
        })
    };
    let tasks: Vec<_> = (0..6)
        .map(|i| {
            tokio::spawn(async move { signed_chat(addr, &request(&format!("r{i}"), false)).await })
        })
        .collect();
    for task in tasks {
        let resp = task.await.unwrap();
        assert_eq!(resp.status, 200, "body: {}", resp.body);
    }
    let (greedy_most, honest_most) = watcher.await.unwrap();
    // Uncapped, the greedy node would have had 5 of the 6 at once.
    assert_eq!(
        greedy_most, 3,
        "the greedy node got more than the cap at once"
    );
    assert_eq!(honest_most, 3, "the honest node took the rest");
}

/// Sends `text` a byte every `tick` until the server closes the connection; how long that
/// took, or `None` if it was still open after `give_up`.
async fn trickle_until_closed(
    addr: SocketAddr,
    text: &[u8],
    tick: Duration,
    give_up: Duration,
) -> Option<Duration> {
    let mut s = TcpStream::connect(addr).await.unwrap();
    let started = Instant::now();
    let mut buf = [0u8; 1024];
    for b in text.iter().cycle() {
        if started.elapsed() > give_up {
            return None;
        }
        if s.write_all(&[*b]).await.is_err() {
            return Some(started.elapsed());
        }
        // A closed connection reads as end of stream (or reset).
        if let Ok(read) = tokio::time::timeout(tick, s.read(&mut buf)).await {
            if matches!(read, Ok(0) | Err(_)) {
                return Some(started.elapsed());
            }
        }
    }
    unreachable!()
}

fn fast_server() -> ServerLimits {
    ServerLimits {
        header_timeout: Duration::from_millis(300),
        body_timeout: Duration::from_millis(300),
        max_connections: 64,
    }
}

/// Attack (hole 12): slow-loris on the transfer agent — send the header block a byte at a
/// time so that a connection (and a task) is held for ever; enough of them exhaust the
/// server. The connection is closed at the header timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn slow_loris_on_the_transfer_agent_is_disconnected() {
    let (addr, _) = start_ta(TaConfig {
        server: fast_server(),
        ..TaConfig::default()
    })
    .await;
    let head = b"POST /v1/chat/completions HTTP/1.1\r\nHost: ta\r\nX-Padding: aaaaaaaaaaaaaaaa";
    let closed = trickle_until_closed(
        addr,
        head,
        Duration::from_millis(20),
        Duration::from_secs(3),
    )
    .await
    .expect("the TA kept a slow-loris connection open for 3 s");
    assert!(closed >= Duration::from_millis(250), "{closed:?}");
}

/// Attack (hole 12): slow-loris on the ML node, likewise.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn slow_loris_on_the_ml_node_is_disconnected() {
    let addr = honest_node(fast_server()).await;
    let head = b"GET /v1/load HTTP/1.1\r\nHost: node\r\nX-Padding: aaaaaaaaaaaaaaaa";
    let closed = trickle_until_closed(
        addr,
        head,
        Duration::from_millis(20),
        Duration::from_secs(3),
    )
    .await
    .expect("the ML node kept a slow-loris connection open for 3 s");
    assert!(closed >= Duration::from_millis(250), "{closed:?}");
}

/// Sends a chat request's headers announcing a body, then a part of the body only.
async fn send_headers_and_half_a_body(addr: SocketAddr, path: &str, signed: bool) -> HttpResponse {
    let body = request("hello", false).to_string().into_bytes();
    let mut headers = String::new();
    if signed {
        for (name, value) in sign(&account("requester"), &body) {
            headers.push_str(&format!("{name}: {value}\r\n"));
        }
    }
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{headers}Connection: close\r\n\r\n",
        body.len()
    );
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(head.as_bytes()).await.unwrap();
    s.write_all(&body[..body.len() / 2]).await.unwrap();
    let mut raw = Vec::new();
    tokio::time::timeout(Duration::from_secs(3), s.read_to_end(&mut raw))
        .await
        .expect("no answer within 3 s")
        .unwrap();
    let text = String::from_utf8_lossy(&raw);
    let (head, body) = text.split_once("\r\n\r\n").expect("an HTTP response");
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    let headers = head
        .lines()
        .skip(1)
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    HttpResponse {
        status,
        headers,
        body: body.to_string(),
    }
}

/// Attack (hole 12): send the headers of a request and then its body never (or slowly),
/// holding the handler. The body must arrive within the body timeout: 408.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_body_that_never_arrives_is_408_on_both_servers() {
    let (ta, _) = start_ta(TaConfig {
        server: fast_server(),
        ..TaConfig::default()
    })
    .await;
    let resp = send_headers_and_half_a_body(ta, "/v1/chat/completions", true).await;
    assert_error(&resp, 408, "request_timeout");
    let node = honest_node(fast_server()).await;
    let resp = send_headers_and_half_a_body(node, "/v1/chat/completions", false).await;
    assert_error(&resp, 408, "request_timeout");
}

/// Attack (hole 12): open connections and hold them, so that the server runs out of file
/// descriptors and memory. At most `max_connections` are served at once; one more waits in
/// the listen backlog until a served one closes.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn connections_beyond_the_cap_wait_for_a_free_slot() {
    let (addr, _) = start_ta(TaConfig {
        server: ServerLimits {
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(10),
            max_connections: 2,
        },
        ..TaConfig::default()
    })
    .await;
    // Two idle connections take both slots (a request on each shows they are served).
    let mut held = Vec::new();
    for _ in 0..2 {
        let s = TcpStream::connect(addr).await.unwrap();
        held.push(s);
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let third =
        tokio::spawn(async move { http_request(addr, "GET", "/v1/identity", &[], b"").await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !third.is_finished(),
        "a third connection was served beyond the cap of 2"
    );
    // A slot frees: the waiting connection is served.
    drop(held.pop());
    let resp = tokio::time::timeout(Duration::from_secs(3), third)
        .await
        .expect("the waiting connection was never served")
        .unwrap();
    assert_eq!(resp.status, 200, "body: {}", resp.body);
}

/// Attack (hole 12): one requester floods the TA, taking every node slot and queue place
/// from everyone else. Beyond its rate it gets 429 `rate_limit_exceeded` with Retry-After;
/// other requesters are served meanwhile, and it is served again once its bucket refills.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_requester_over_its_rate_gets_429_with_retry_after() {
    let good = honest_node(ServerLimits::default()).await;
    let (addr, ta) = start_ta(TaConfig {
        nodes: vec![node("good", good, 8, 1)],
        // One token a second: the three requests below land within it even on a loaded
        // machine (at 5/s a slow machine refilled the bucket before the third).
        rate_limit: RateLimit {
            per_second: 1,
            burst: 2,
            requesters: 100,
        },
        ..TaConfig::default()
    })
    .await;
    let flooder = account("flooder");
    for i in 0..2 {
        let resp = signed_chat_as(&flooder, addr, &request(&format!("f{i}"), false)).await;
        assert_eq!(resp.status, 200, "body: {}", resp.body);
    }
    let refused = signed_chat_as(&flooder, addr, &request("f2", false)).await;
    assert_error(&refused, 429, "rate_limit_exceeded");
    assert_eq!(refused.json()["error"]["type"], "rate_limit_error");
    assert_eq!(refused.header("retry-after"), Some("1"));
    // Someone else is not held back by the flooder.
    let other = signed_chat_as(&account("other"), addr, &request("o", false)).await;
    assert_eq!(other.status, 200, "body: {}", other.body);
    // One refill (1 s at 1/s) later the flooder may send one more.
    tokio::time::sleep(Duration::from_millis(1_050)).await;
    let later = signed_chat_as(&flooder, addr, &request("f3", false)).await;
    assert_eq!(later.status, 200, "body: {}", later.body);
    assert_eq!(ta.completed_records().len(), 4);
}
