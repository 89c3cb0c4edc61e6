//! `gonka_client::chat` and `gonkad chat` against a real transfer agent and reference ML node
//! on 127.0.0.1, with stand-in TAs that fail in chosen ways (closed port, 5xx, 429, silence)
//! in front of it.

use std::net::SocketAddr;
use std::path::Path;
use std::process::Output;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use gonka_client::chat::{identity, ChatClient, ChatError, ChatRequest, ChatResponse, Message};
use gonka_client::keys::well_known_mnemonic;
use gonka_client::Key;
use gonka_node::testing::read_request;
use gonka_node::{self as ml_node, MlNodeConfig, DEFAULT_MODEL_ID};
use gonka_ta::{server, TaConfig, TaNodeConfig, TransferAgent};
use serde_json::Value;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;

const KEY_LABEL: &str = "chat-requester";
const PROMPT: &str = "Hello there";
const MAX_TOKENS: u32 = 24;

fn key() -> Key {
    Key::from_mnemonic(&well_known_mnemonic(KEY_LABEL)).unwrap()
}

async fn start_ml_node() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let config = MlNodeConfig {
        listen: addr,
        max_tokens_cap: 512,
        ..MlNodeConfig::default()
    };
    tokio::spawn(ml_node::serve(listener, config, std::future::pending()));
    addr
}

/// A TA in front of one fresh ML node; `clock` replaces its wall clock (unix seconds).
async fn start_ta(clock: Option<u64>) -> (String, Arc<TransferAgent>) {
    let node = start_ml_node().await;
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let config = TaConfig {
        address: "gonka1ta".into(),
        public_url: url.clone(),
        nodes: vec![TaNodeConfig {
            id: "node-0".into(),
            url: format!("http://{node}"),
            models: vec![DEFAULT_MODEL_ID.into()],
            vram_mib: 0,
            bandwidth_mbps: 0,
            max_concurrency: 4,
        }],
        ..TaConfig::default()
    };
    let ta = match clock {
        None => TransferAgent::new(config),
        Some(now) => TransferAgent::with_clock(config, Arc::new(move || now)),
    }
    .unwrap();
    tokio::spawn(server::serve(listener, ta.clone(), std::future::pending()));
    (url, ta)
}

/// A URL nothing listens on.
async fn closed_port() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    format!("http://{}", listener.local_addr().unwrap())
}

/// A stand-in TA answering `GET /v1/identity` with `identity` (when given) and every other
/// request with `status` and an OpenAI error body of `code` (or, with `status` `None`, never
/// answering); counts the requests it got.
async fn stub_ta(
    status: Option<&str>,
    code: &str,
    identity: Option<Value>,
) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let hits = Arc::new(AtomicUsize::new(0));
    let error = status.map(|status| {
        let body = format!(
            r#"{{"error":{{"message":"stub says {status}","type":"server_error","code":"{code}"}}}}"#
        );
        http_response(status, &body)
    });
    // Every stub says who it is (requests are signed for a TA's address and chain), so the
    // fail-over happens where the tests look at it: on the chat request.
    let identity = identity.unwrap_or_else(|| {
        serde_json::json!({"address": "gonka1stub", "pubkey": "02", "url": url, "chain_id": "",
               "models": [{"id": DEFAULT_MODEL_ID, "price_per_token": "0"}]})
    });
    let identity = Some(http_response("200 OK", &identity.to_string()));
    let counter = hits.clone();
    tokio::spawn(async move {
        loop {
            let (mut socket, _) = listener.accept().await.unwrap();
            let (error, identity, counter) = (error.clone(), identity.clone(), counter.clone());
            tokio::spawn(async move {
                let head = read_request(&mut socket).await;
                let answer = match identity {
                    Some(identity) if head.starts_with("GET /v1/identity ") => Some(identity),
                    _ => {
                        counter.fetch_add(1, Ordering::SeqCst);
                        error
                    }
                };
                match answer {
                    Some(answer) => {
                        let _ = socket.write_all(answer.as_bytes()).await;
                        let _ = socket.shutdown().await;
                    }
                    None => std::future::pending::<()>().await,
                }
            });
        }
    });
    (url, hits)
}

fn http_response(status: &str, json: &str) -> String {
    format!(
        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
         retry-after: 1\r\nconnection: close\r\n\r\n{json}",
        json.len()
    )
}

fn request(stream: bool) -> ChatRequest {
    ChatRequest {
        max_tokens: Some(MAX_TOKENS),
        stream,
        ..ChatRequest::new(DEFAULT_MODEL_ID, vec![Message::user(PROMPT)])
    }
}

async fn chat(urls: &[String], request: &ChatRequest) -> Result<ChatResponse, ChatError> {
    ChatClient::new(key(), urls)
        .unwrap()
        .with_timeout(Duration::from_secs(2))
        .chat(request, |_| {})
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamed_and_plain_answers_match() {
    let (url, ta) = start_ta(None).await;
    let client = ChatClient::new(key(), std::slice::from_ref(&url)).unwrap();

    let mut deltas = Vec::new();
    let streamed = client
        .chat(&request(true), |d| deltas.push(d.to_string()))
        .await
        .unwrap();
    let plain = client.chat(&request(false), |_| {}).await.unwrap();

    assert!(!plain.content.is_empty());
    assert_eq!(streamed.content, plain.content);
    assert!(deltas.len() > 1, "the answer came in pieces: {deltas:?}");
    assert_eq!(deltas.concat(), streamed.content);
    assert_eq!(streamed.model, DEFAULT_MODEL_ID);
    assert_eq!(plain.model, DEFAULT_MODEL_ID);
    assert_eq!(streamed.usage, plain.usage);
    assert!(plain.usage.unwrap().completion_tokens > 0);

    let records = ta.completed_records();
    assert_eq!(records.len(), 2);
    for (answer, record) in [&streamed, &plain].into_iter().zip(&records) {
        assert_eq!(answer.inference_id.as_deref(), Some(&*record.inference_id));
        assert_eq!(answer.executor.as_deref(), Some("node-0"));
        assert_eq!(answer.transfer_agent, url);
        assert!(answer.failed_over.is_empty());
        assert_eq!(record.requester, key().address());
    }
    assert_ne!(records[0].nonce, records[1].nonce);

    let id = identity(&format!("{url}/v1/"), Duration::from_secs(2))
        .await
        .unwrap();
    assert_eq!((id.address.as_str(), id.url.as_str()), ("gonka1ta", &*url));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fails_over_past_a_closed_port_5xx_429_and_silence() {
    let (url, ta) = start_ta(None).await;
    let closed = closed_port().await;
    let (unavailable, unavailable_hits) =
        stub_ta(Some("503 Service Unavailable"), "overloaded", None).await;
    let (busy, busy_hits) = stub_ta(Some("429 Too Many Requests"), "queue_full", None).await;
    let (silent, silent_hits) = stub_ta(None, "", None).await;
    let urls = [
        closed.clone(),
        unavailable.clone(),
        busy.clone(),
        silent.clone(),
        url.clone(),
    ];

    let answer = chat(&urls, &request(true)).await.unwrap();
    assert_eq!(answer.transfer_agent, url);
    assert!(!answer.content.is_empty());
    let tried: Vec<&str> = answer.failed_over.iter().map(|f| f.url.as_str()).collect();
    assert_eq!(tried, [&closed, &unavailable, &busy, &silent]);
    let errors: Vec<&str> = answer
        .failed_over
        .iter()
        .map(|f| f.error.as_str())
        .collect();
    assert!(errors[0].contains("onnect"), "{errors:?}");
    assert!(
        errors[1].starts_with("503 overloaded: stub says 503"),
        "{errors:?}"
    );
    assert!(errors[2].starts_with("429 queue_full"), "{errors:?}");
    assert!(errors[3].starts_with("no answer within"), "{errors:?}");
    for hits in [&unavailable_hits, &busy_hits, &silent_hits] {
        assert_eq!(hits.load(Ordering::SeqCst), 1);
    }
    // Only the TA that answered saw a valid request through.
    assert_eq!(ta.completed_records().len(), 1);
    assert_eq!(
        answer.inference_id.as_deref(),
        Some(&*ta.completed_records()[0].inference_id)
    );

    match chat(&[closed.clone(), unavailable.clone()], &request(false)).await {
        Err(ChatError::Exhausted(failed)) => {
            let tried: Vec<&str> = failed.iter().map(|f| f.url.as_str()).collect();
            assert_eq!(tried, [&closed, &unavailable]);
        }
        other => panic!("expected every TA to fail, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_is_returned_at_once() {
    // A TA whose clock is at 0 finds every signed timestamp stale: 401.
    let (refusing, refusing_ta) = start_ta(Some(0)).await;
    let (next, next_hits) =
        stub_ta(Some("500 Internal Server Error"), "internal_error", None).await;

    let e = chat(&[refusing.clone(), next.clone()], &request(true))
        .await
        .unwrap_err();
    match &e {
        ChatError::Refused {
            url, status, code, ..
        } => {
            assert_eq!(url, &refusing);
            assert_eq!(*status, 401);
            assert_eq!(code.as_deref(), Some("stale_timestamp"));
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert!(e.to_string().contains("(401 stale_timestamp)"), "{e}");
    assert!(refusing_ta.completed_records().is_empty());

    // A model no ML node serves is the caller's fault too: 404.
    let (url, _) = start_ta(None).await;
    let unknown_model = ChatRequest {
        model: "no/such-model".into(),
        ..request(false)
    };
    match chat(&[url, next], &unknown_model).await {
        Err(ChatError::Refused {
            status: 404, code, ..
        }) => {
            assert_eq!(code.as_deref(), Some("model_not_found"));
        }
        other => panic!("expected a 404 refusal, got {other:?}"),
    }
    assert_eq!(next_hits.load(Ordering::SeqCst), 0, "no fail-over on 4xx");
}

/// Runs the gonkad binary with `args` under `home`, its keyring the encrypted default.
async fn gonkad(home: &Path, args: &[&str]) -> Output {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_gonkad"));
    command
        .arg("--home")
        .arg(home)
        .args(args)
        .env_remove("GONKA_KEYRING_BACKEND")
        .env("GONKA_KEYRING_PASSPHRASE", "chat test passphrase");
    tokio::task::spawn_blocking(move || command.output().unwrap())
        .await
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gonkad_chat_prints_the_library_answer() {
    let (url, ta) = start_ta(None).await;
    let expected = chat(std::slice::from_ref(&url), &request(false))
        .await
        .unwrap();

    let home = tempfile::tempdir().unwrap();
    let mnemonic = well_known_mnemonic(KEY_LABEL);
    let import = gonkad(
        home.path(),
        &["keys", "import", "me", "--mnemonic", &mnemonic],
    )
    .await;
    assert!(import.status.success(), "{}", text(&import.stderr));

    let max_tokens = MAX_TOKENS.to_string();
    let args = [
        "chat",
        "--from",
        "me",
        "--ta",
        &url,
        "--max-tokens",
        &max_tokens,
    ];
    let streamed = gonkad(home.path(), &[&args[..], &["Hello", "there"][..]].concat()).await;
    assert!(streamed.status.success(), "{}", text(&streamed.stderr));
    assert_eq!(text(&streamed.stdout), format!("{}\n", expected.content));
    let record = ta.completed_records().pop().unwrap();
    assert_eq!(record.requester, key().address());
    let via = format!(
        "via TA {url} (inference {}, executor node-0)",
        record.inference_id
    );
    assert!(
        text(&streamed.stderr).contains(&via),
        "{}",
        text(&streamed.stderr)
    );

    let json_args = [&args[..], &["--no-stream", "--output", "json", PROMPT][..]].concat();
    let plain = gonkad(home.path(), &json_args).await;
    assert!(plain.status.success(), "{}", text(&plain.stderr));
    let json: Value = serde_json::from_slice(&plain.stdout).unwrap();
    assert_eq!(json["content"], expected.content.as_str());
    assert_eq!(json["model"], DEFAULT_MODEL_ID);
    assert_eq!(json["executor"], "node-0");
    assert_eq!(json["transfer_agent"], url.as_str());
    assert_eq!(json["failed_over"], Value::Array(vec![]));
    assert_eq!(
        json["inference_id"],
        ta.completed_records().pop().unwrap().inference_id.as_str()
    );
    assert!(json["usage"]["completion_tokens"].as_u64().unwrap() > 0);

    // Given one TA, the CLI also tries the TAs it lists at /v1/identity.
    let peers = serde_json::json!({
        "address": "gonka1stub", "pubkey": "02ab", "url": "http://stub", "chain_id": "gonka-test",
        "transfer_agents": [{"address": "gonka1ta", "url": format!("{url}/v1")}],
    });
    let (stub, stub_hits) = stub_ta(Some("502 Bad Gateway"), "upstream_failed", Some(peers)).await;
    let args = [
        "chat",
        "--from",
        "me",
        "--ta",
        &stub,
        "--max-tokens",
        &max_tokens,
        PROMPT,
    ];
    let learned = gonkad(home.path(), &args).await;
    assert!(learned.status.success(), "{}", text(&learned.stderr));
    assert_eq!(text(&learned.stdout), format!("{}\n", expected.content));
    let stderr = text(&learned.stderr);
    assert!(
        stderr.contains(&format!("skipped TA {stub}: 502 upstream_failed")),
        "{stderr}"
    );
    assert!(stderr.contains(&format!("via TA {url} ")), "{stderr}");
    assert_eq!(
        stub_hits.load(Ordering::SeqCst),
        1,
        "one chat request (identity calls are not counted)"
    );

    let closed = closed_port().await;
    let args = [
        "chat", "--from", "me", "--ta", &closed, "--ta", &closed, PROMPT,
    ];
    let failed = gonkad(home.path(), &args).await;
    assert!(!failed.status.success());
    let stderr = text(&failed.stderr);
    assert!(
        stderr.contains("no transfer agent could serve the request") && stderr.contains(&closed),
        "{stderr}"
    );
}
