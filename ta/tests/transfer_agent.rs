//! The transfer agent over real sockets on 127.0.0.1: ML nodes from `ml_node::serve`, one TA in
//! front, clients speaking hand-written HTTP/1.1 with signed `x-gonka-*` headers.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use gonka_client::keys::well_known_mnemonic;
use gonka_client::request::{self as auth, body_hash, RequestTerms};
use gonka_client::Key;
use gonka_node::{self as ml_node, MlNodeConfig, DEFAULT_MODEL_ID};
use gonka_ta::{server, TaConfig, TaNodeConfig, TransferAgent};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

use gonka_node::testing::*;

fn key() -> Key {
    account("requester")
}

fn account(label: &str) -> Key {
    Key::from_mnemonic(&well_known_mnemonic(label)).unwrap()
}

/// The address every test TA has, which requests are signed for.
const TA_ADDRESS: &str = "gonka1ta";

/// The terms of a request with `body` (its model and max_tokens, 64 when absent) for the test
/// TA (no chain, every model free).
fn terms(body: &[u8], timestamp: u64, nonce: &str, commission: u128) -> RequestTerms {
    let fields: Value = serde_json::from_slice(body).unwrap_or_default();
    RequestTerms {
        chain_id: String::new(),
        body_hash: body_hash(body),
        timestamp,
        nonce: nonce.to_string(),
        commission,
        transfer_agent: TA_ADDRESS.to_string(),
        model: fields["model"].as_str().unwrap_or_default().to_string(),
        max_price_per_token: 0,
        max_completion_tokens: fields["max_tokens"].as_u64().unwrap_or(64),
        max_prompt_tokens: gonka_proto::signing::prompt_token_bound(body),
    }
}

/// The signed headers of `body` by `key` (commission 0).
fn sign_request(
    key: &Key,
    body: &[u8],
    timestamp: u64,
    nonce: &str,
) -> Vec<(&'static str, String)> {
    auth::sign_request(key, body, terms(body, timestamp, nonce, 0)).unwrap()
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// Starts an ML node; the handle aborts its accept loop ("kills" it).
async fn start_node(max_concurrency: usize, delay_ms: u64) -> (SocketAddr, JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let config = MlNodeConfig {
        listen: addr,
        max_concurrency,
        max_tokens_cap: 512,
        testing_delay_per_token: Duration::from_millis(delay_ms),
        ..MlNodeConfig::default()
    };
    let handle = tokio::spawn(async move {
        let _ = ml_node::serve(listener, config, std::future::pending()).await;
    });
    (addr, handle)
}

fn node(id: &str, addr: SocketAddr, max_concurrency: u32) -> TaNodeConfig {
    TaNodeConfig {
        id: id.to_string(),
        url: format!("http://{addr}"),
        models: vec![DEFAULT_MODEL_ID.to_string()],
        vram_mib: 0,
        bandwidth_mbps: 0,
        max_concurrency,
    }
}

async fn start_ta(config: TaConfig) -> (SocketAddr, Arc<TransferAgent>) {
    let ta = TransferAgent::new(config).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(server::serve(listener, ta.clone(), std::future::pending()));
    (addr, ta)
}

fn request(content: &str, max_tokens: u32, stream: bool) -> Value {
    json!({
        "model": DEFAULT_MODEL_ID,
        "messages": [{"role": "user", "content": content}],
        "max_tokens": max_tokens,
        "stream": stream,
    })
}

static NONCE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

fn fresh_nonce() -> String {
    format!(
        "n-{}",
        NONCE.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    )
}

/// Posts a chat request signed now with a fresh nonce.
async fn signed_chat(addr: SocketAddr, body: &Value) -> HttpResponse {
    let bytes = body.to_string().into_bytes();
    let headers = sign_request(&key(), &bytes, now(), &fresh_nonce());
    http_request(addr, "POST", "/v1/chat/completions", &headers, &bytes).await
}

fn sse_content(body: &str) -> String {
    let mut out = String::new();
    for event in body.split("\n\n").filter(|e| !e.is_empty()) {
        let data = event.strip_prefix("data: ").unwrap();
        if data == "[DONE]" {
            continue;
        }
        let v: Value = serde_json::from_str(data).unwrap();
        if let Some(c) = v["choices"][0]["delta"]["content"].as_str() {
            out.push_str(c);
        }
    }
    out
}

async fn three_nodes(max_concurrency: usize, delay_ms: u64) -> Vec<(SocketAddr, JoinHandle<()>)> {
    let mut nodes = Vec::new();
    for _ in 0..3 {
        nodes.push(start_node(max_concurrency, delay_ms).await);
    }
    nodes
}

fn ta_config(nodes: &[(SocketAddr, JoinHandle<()>)], max_concurrency: u32) -> TaConfig {
    TaConfig {
        address: TA_ADDRESS.to_string(),
        pubkey: "02ab".to_string(),
        public_url: "http://ta.example".to_string(),
        nodes: nodes
            .iter()
            .enumerate()
            .map(|(i, (addr, _))| node(&format!("node-{i}"), *addr, max_concurrency))
            .collect(),
        queue_timeout: Duration::from_secs(10),
        ..TaConfig::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn signed_requests_are_forwarded_and_recorded() {
    let nodes = three_nodes(2, 0).await;
    let (ta_addr, ta) = start_ta(ta_config(&nodes, 2)).await;

    let models = http_request(ta_addr, "GET", "/v1/models", &[], b"").await;
    assert_eq!(models.status, 200);
    let models = models.json();
    assert_eq!(models["data"].as_array().unwrap().len(), 1);
    assert_eq!(models["data"][0]["id"], DEFAULT_MODEL_ID);
    let id = http_request(ta_addr, "GET", "/v1/identity", &[], b"")
        .await
        .json();
    assert_eq!(
        id,
        json!({"address": "gonka1ta", "pubkey": "02ab", "url": "http://ta.example",
               "chain_id": "", "transfer_agents": [],
               "models": [{"id": DEFAULT_MODEL_ID, "price_per_token": "0"}]})
    );

    let plain = signed_chat(ta_addr, &request("Hello there", 24, false)).await;
    assert_eq!(plain.status, 200, "body: {}", plain.body);
    let plain_json = plain.json();
    let content = plain_json["choices"][0]["message"]["content"]
        .as_str()
        .unwrap()
        .to_string();
    let streamed = signed_chat(ta_addr, &request("Hello there", 24, true)).await;
    assert_eq!(streamed.status, 200, "body: {}", streamed.body);
    assert!(streamed
        .header("content-type")
        .unwrap()
        .starts_with("text/event-stream"));
    assert!(streamed.body.ends_with("data: [DONE]\n\n"));
    assert_eq!(sse_content(&streamed.body), content);

    let records = ta.completed_records();
    assert_eq!(records.len(), 2);
    let r = &records[0];
    assert_eq!(r.requester, key().address());
    assert_eq!(r.inference_id, hex::encode(&r.request_hash));
    assert_eq!(
        r.request_hash[..],
        terms(
            request("Hello there", 24, false).to_string().as_bytes(),
            r.timestamp,
            &r.nonce,
            0
        )
        .hash()[..]
    );
    assert_eq!(
        plain.header("x-gonka-inference-id"),
        Some(r.inference_id.as_str())
    );
    assert_eq!(
        r.prompt_tokens,
        plain_json["usage"]["prompt_tokens"].as_u64().unwrap()
    );
    assert_eq!(
        r.completion_tokens,
        plain_json["usage"]["completion_tokens"].as_u64().unwrap()
    );
    assert!(r.executor_node.starts_with("node-"));
    assert_eq!(
        (r.transfer_agent.as_str(), r.max_completion_tokens),
        (TA_ADDRESS, 24)
    );
    assert_eq!(records[1].completion_tokens, r.completion_tokens);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn authentication_failures_are_401_and_unknown_model_404() {
    let nodes = three_nodes(2, 0).await;
    let (ta_addr, ta) = start_ta(ta_config(&nodes, 2)).await;
    let body = request("hi", 4, false).to_string().into_bytes();
    let post = |headers: Vec<(&'static str, String)>, body: Vec<u8>| async move {
        http_request(ta_addr, "POST", "/v1/chat/completions", &headers, &body).await
    };

    // Missing headers.
    assert_error(
        &post(vec![], body.clone()).await,
        401,
        "missing_auth_header",
    );
    let mut partial = sign_request(&key(), &body, now(), "a1");
    partial.retain(|(k, _)| *k != auth::HEADER_SIGNATURE);
    assert_error(
        &post(partial, body.clone()).await,
        401,
        "missing_auth_header",
    );
    // Malformed header.
    let mut bad_pk = sign_request(&key(), &body, now(), "a2");
    bad_pk[1].1 = "zz".to_string();
    assert_error(
        &post(bad_pk, body.clone()).await,
        401,
        "invalid_auth_header",
    );
    // Bad signature: signed for another body.
    let other = request("hi!", 4, false).to_string().into_bytes();
    let wrong = sign_request(&key(), &other, now(), "a3");
    assert_error(&post(wrong, body.clone()).await, 401, "invalid_signature");
    // Bad signature: another key's signature with this pubkey.
    let mut swapped = sign_request(&key(), &body, now(), "a4");
    let foreign = sign_request(&account("other"), &body, now(), "a4");
    let signature = |h: &[(&'static str, String)]| {
        h.iter()
            .position(|(k, _)| *k == auth::HEADER_SIGNATURE)
            .unwrap()
    };
    let at = signature(&swapped);
    swapped[at].1 = foreign[signature(&foreign)].1.clone();
    assert_error(&post(swapped, body.clone()).await, 401, "invalid_signature");
    // Stale and future timestamps.
    let stale = sign_request(&key(), &body, now() - 600, "a5");
    assert_error(&post(stale, body.clone()).await, 401, "stale_timestamp");
    let future = sign_request(&key(), &body, now() + 600, "a6");
    assert_error(&post(future, body.clone()).await, 401, "stale_timestamp");
    // Replayed nonce: the first use succeeds, the second is refused.
    let once = sign_request(&key(), &body, now(), "a7");
    let first = post(once.clone(), body.clone()).await;
    assert_eq!(first.status, 200, "body: {}", first.body);
    assert_error(&post(once, body.clone()).await, 401, "replayed_nonce");

    // Unknown model.
    let unknown = json!({"model": "nope/1", "messages": [{"role": "user", "content": "x"}]});
    assert_error(
        &signed_chat(ta_addr, &unknown).await,
        404,
        "model_not_found",
    );
    // Only the one good request was recorded.
    assert_eq!(ta.completed_records().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_requests_spread_without_exceeding_concurrency() {
    let nodes = three_nodes(2, 3).await;
    let (ta_addr, ta) = start_ta(ta_config(&nodes, 2)).await;
    let node_addrs: Vec<SocketAddr> = nodes.iter().map(|(a, _)| *a).collect();

    let watcher = {
        let ta = ta.clone();
        tokio::spawn(async move {
            let mut max_seen = BTreeMap::new();
            for _ in 0..200 {
                for (id, n) in ta.in_flight() {
                    assert!(n <= 2, "TA sent node {id} {n} requests at once");
                    let e = max_seen.entry(id).or_insert(0);
                    *e = (*e).max(n);
                }
                for addr in &node_addrs {
                    let load = http_request(*addr, "GET", "/v1/load", &[], b"")
                        .await
                        .json();
                    assert!(load["in_flight"].as_u64().unwrap() <= 2);
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            max_seen
        })
    };
    let mut tasks = Vec::new();
    for i in 0..12 {
        tasks.push(tokio::spawn(async move {
            signed_chat(ta_addr, &request(&format!("prompt {i}"), 40, i % 2 == 0)).await
        }));
    }
    for t in tasks {
        let r = t.await.unwrap();
        assert_eq!(r.status, 200, "body: {}", r.body);
    }
    let max_seen = watcher.await.unwrap();
    assert!(
        max_seen.values().any(|&n| n == 2),
        "nodes were saturated: {max_seen:?}"
    );
    let records = ta.completed_records();
    assert_eq!(records.len(), 12);
    let executors: BTreeSet<&str> = records.iter().map(|r| r.executor_node.as_str()).collect();
    assert_eq!(executors.len(), 3, "all nodes served: {executors:?}");
    assert_eq!(ta.queued(), 0);
    assert!(ta.in_flight().iter().all(|(_, n)| *n == 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn killed_node_requests_are_retried_elsewhere() {
    let mut nodes = three_nodes(2, 2).await;
    let (ta_addr, ta) = start_ta(ta_config(&nodes, 2)).await;
    // A first wave uses every node.
    let mut tasks = Vec::new();
    for i in 0..6 {
        tasks.push(tokio::spawn(async move {
            signed_chat(ta_addr, &request(&format!("wave one {i}"), 30, false)).await
        }));
    }
    // Kill node-0 mid-run: its accept loop goes away, new connections are refused.
    tokio::time::sleep(Duration::from_millis(20)).await;
    let killed = nodes.remove(0);
    killed.1.abort();
    let _ = killed.1.await;
    for i in 0..9 {
        tasks.push(tokio::spawn(async move {
            signed_chat(ta_addr, &request(&format!("wave two {i}"), 30, i % 3 == 0)).await
        }));
    }
    for t in tasks {
        let r = t.await.unwrap();
        assert_eq!(r.status, 200, "body: {}", r.body);
    }
    assert_eq!(ta.completed_records().len(), 15);
    // Node-0 was tried, failed (so its requests went elsewhere) and is cooling down.
    let status = ta.node_status();
    assert_eq!(status[0].info.id, "node-0");
    assert!(status[0].consecutive_failures >= 1, "{status:?}");
    assert!(status[0].cooldown_until.is_some());
    assert!(status.iter().all(|s| s.in_flight == 0));
}

/// A fake ML node that accepts connections and answers only when released.
async fn stuck_node() -> (SocketAddr, Arc<tokio::sync::Notify>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let release = Arc::new(tokio::sync::Notify::new());
    let r = release.clone();
    tokio::spawn(async move {
        loop {
            let (mut s, _) = listener.accept().await.unwrap();
            let r = r.clone();
            tokio::spawn(async move {
                read_request(&mut s).await;
                r.notified().await;
                let body = r#"{"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2}}"#;
                let resp = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = s.write_all(resp.as_bytes()).await;
            });
        }
    });
    (addr, release)
}

async fn wait_until(mut f: impl FnMut() -> bool) {
    for _ in 0..500 {
        if f() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("condition not reached");
}

/// A TA in front of one node that holds every request until released, with room for one
/// more request in its queue, and both taken: the first request on the node, the second
/// queued.
struct Saturated {
    node_addr: SocketAddr,
    ta_addr: SocketAddr,
    ta: Arc<TransferAgent>,
    release: Arc<tokio::sync::Notify>,
    first: JoinHandle<HttpResponse>,
    second: JoinHandle<HttpResponse>,
}

async fn saturated() -> Saturated {
    let (node_addr, release) = stuck_node().await;
    let config = TaConfig {
        address: TA_ADDRESS.to_string(),
        nodes: vec![node("stuck", node_addr, 1)],
        queue_capacity: 1,
        queue_timeout: Duration::from_secs(10),
        ..TaConfig::default()
    };
    let (ta_addr, ta) = start_ta(config).await;
    let first = tokio::spawn(async move { signed_chat(ta_addr, &request("a", 4, false)).await });
    wait_until(|| ta.in_flight()[0].1 == 1).await;
    let second = tokio::spawn(async move { signed_chat(ta_addr, &request("b", 4, false)).await });
    wait_until(|| ta.queued() == 1).await;
    Saturated {
        node_addr,
        ta_addr,
        ta,
        release,
        first,
        second,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn saturated_nodes_queue_then_429() {
    let Saturated {
        node_addr: addr,
        ta_addr,
        ta,
        release,
        first,
        second,
    } = saturated().await;
    // Node busy and queue full: refused at once.
    let third = signed_chat(ta_addr, &request("c", 4, false)).await;
    assert_error(&third, 429, "queue_full");
    assert_eq!(third.header("retry-after"), Some("1"));
    // Releasing the node serves the first, which wakes the queued second.
    release.notify_one();
    assert_eq!(first.await.unwrap().status, 200);
    wait_until(|| ta.in_flight()[0].1 == 1 && ta.queued() == 0).await;
    release.notify_one();
    assert_eq!(second.await.unwrap().status, 200);
    assert_eq!(ta.completed_records().len(), 2);
    assert_eq!(ta.completed_records()[0].completion_tokens, 2);

    // A queued request that times out also gets 429.
    let config = TaConfig {
        address: TA_ADDRESS.to_string(),
        nodes: vec![node("stuck", addr, 1)],
        queue_capacity: 4,
        queue_timeout: Duration::from_millis(100),
        ..TaConfig::default()
    };
    let (ta_addr, ta) = start_ta(config).await;
    let hold = tokio::spawn(async move { signed_chat(ta_addr, &request("d", 4, false)).await });
    wait_until(|| ta.in_flight()[0].1 == 1).await;
    let timed_out = signed_chat(ta_addr, &request("e", 4, false)).await;
    assert_error(&timed_out, 429, "queue_full");
    assert!(timed_out.header("retry-after").is_some());
    assert_eq!(ta.queued(), 0);
    release.notify_one();
    assert_eq!(hold.await.unwrap().status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn metrics_show_answers_by_status_queue_and_node_load() {
    let Saturated {
        ta_addr,
        ta,
        release,
        first,
        second,
        ..
    } = saturated().await;
    assert_error(
        &signed_chat(ta_addr, &request("c", 4, false)).await,
        429,
        "queue_full",
    );
    let busy = scrape_metrics(ta_addr).await;
    assert_eq!(busy.get("gonka_ta_queued_requests"), Some(&1.0));
    assert_eq!(
        busy.get("gonka_ta_node_in_flight{node=\"stuck\"}"),
        Some(&1.0)
    );
    assert_eq!(
        busy.get("gonka_ta_requests_total{status=\"429\"}"),
        Some(&1.0)
    );
    assert_eq!(busy.get("gonka_ta_requests_total{status=\"200\"}"), None);
    assert_eq!(busy.get("gonka_ta_added_seconds_count"), Some(&0.0));
    release.notify_one();
    assert_eq!(first.await.unwrap().status, 200);
    wait_until(|| ta.in_flight()[0].1 == 1 && ta.queued() == 0).await;
    release.notify_one();
    assert_eq!(second.await.unwrap().status, 200);
    let idle = scrape_metrics(ta_addr).await;
    assert_eq!(idle.get("gonka_ta_queued_requests"), Some(&0.0));
    assert_eq!(
        idle.get("gonka_ta_node_in_flight{node=\"stuck\"}"),
        Some(&0.0)
    );
    assert_eq!(
        idle.get("gonka_ta_requests_total{status=\"200\"}"),
        Some(&2.0)
    );
    assert_eq!(idle.get("gonka_ta_added_seconds_count"), Some(&2.0));
    // The second request's wait in the queue is time the TA added; the node's time is not.
    let added = idle["gonka_ta_added_seconds_sum"];
    assert!(added > 0.0, "added {added} s");
}

/// Posts a chat request signed now with a fresh nonce and `commission` ngnk.
async fn signed_chat_with_commission(
    addr: SocketAddr,
    body: &Value,
    commission: u128,
) -> HttpResponse {
    let bytes = body.to_string().into_bytes();
    let headers = auth::sign_request(
        &key(),
        &bytes,
        terms(&bytes, now(), &fresh_nonce(), commission),
    )
    .unwrap();
    http_request(addr, "POST", "/v1/chat/completions", &headers, &bytes).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn saturated_nodes_serve_queued_requests_in_commission_order() {
    // Three ML nodes, one slot each, all held busy; only node 0 is ever released, one request
    // at a time, so the order in which requests complete there is the order the TA dequeued.
    let mut nodes = Vec::new();
    for _ in 0..3 {
        nodes.push(stuck_node().await);
    }
    let config = TaConfig {
        address: TA_ADDRESS.to_string(),
        nodes: nodes
            .iter()
            .enumerate()
            .map(|(i, (addr, _))| node(&format!("node-{i}"), *addr, 1))
            .collect(),
        queue_capacity: 16,
        queue_timeout: Duration::from_secs(20),
        ..TaConfig::default()
    };
    let (ta_addr, ta) = start_ta(config).await;
    let mut tasks = Vec::new();
    for i in 0..3 {
        tasks.push(tokio::spawn(async move {
            signed_chat_with_commission(ta_addr, &request(&format!("blocker {i}"), 2, false), 0)
                .await
        }));
        wait_until(|| ta.in_flight().iter().map(|(_, n)| n).sum::<u32>() == i + 1).await;
    }
    // Arrival order 2, 9, 4, 7, 1, 9: ties keep arrival order.
    let bids: [u128; 6] = [2, 9, 4, 7, 1, 9];
    for (i, bid) in bids.iter().copied().enumerate() {
        tasks.push(tokio::spawn(async move {
            signed_chat_with_commission(ta_addr, &request(&format!("bid {i}"), 2, false), bid).await
        }));
        wait_until(|| ta.queued() == i + 1).await;
    }
    let release = nodes[0].1.clone();
    for done in 1..=bids.len() + 1 {
        release.notify_one();
        wait_until(|| ta.completed_records().len() == done).await;
    }
    let served: Vec<(String, String)> = ta
        .completed_records()
        .iter()
        .map(|r| (r.commission.clone(), r.nonce.clone()))
        .collect();
    let commissions: Vec<&str> = served.iter().map(|(c, _)| c.as_str()).collect();
    assert_eq!(commissions, ["0", "9", "9", "7", "4", "2", "1"]);
    let arrival = |nonce: &str| nonce.trim_start_matches("n-").parse::<u64>().unwrap();
    assert!(
        arrival(&served[1].1) < arrival(&served[2].1),
        "equal bids are served in arrival order: {served:?}"
    );
    for (_, release) in &nodes[1..] {
        release.notify_one();
    }
    for task in tasks {
        assert_eq!(task.await.unwrap().status, 200);
    }
}

/// Attack (issue 10, hole 11): a client that hangs up right after the content it wanted used
/// to get it for free, because the TA recorded a stream only when the client read it to the
/// end. Now the TA reads the node's stream to its end regardless and settles the work.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn attack_hanging_up_mid_stream_does_not_make_the_answer_free() {
    let nodes = three_nodes(1, 15).await;
    let (ta_addr, ta) = start_ta(ta_config(&nodes, 1)).await;
    let body = request("Stream me and leave", 24, true)
        .to_string()
        .into_bytes();
    let headers = sign_request(&key(), &body, now(), &fresh_nonce());
    let mut stream = TcpStream::connect(ta_addr).await.unwrap();
    let mut head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: {ta_addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in &headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(&body).await.unwrap();
    // Read until the first content delta arrives, then hang up.
    let mut seen = Vec::new();
    let mut buf = [0u8; 1024];
    while !String::from_utf8_lossy(&seen).contains("\"content\":\"") {
        let n = stream.read(&mut buf).await.unwrap();
        assert!(n > 0, "the TA closed before any content");
        seen.extend_from_slice(&buf[..n]);
    }
    drop(stream);
    assert!(
        ta.completed_records().is_empty(),
        "the answer is still being generated"
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while ta.completed_records().is_empty() && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let records = ta.completed_records();
    assert_eq!(records.len(), 1, "the delivered answer is settled");
    assert!(records[0].completion_tokens > 0);
}
