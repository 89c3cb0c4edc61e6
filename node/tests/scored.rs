//! Scored receipts and the scoring endpoint of an ML node serving the real language model
//! (SmolLM2-135M-Instruct, `gonka_llm::default_model_path()` or `GONKA_LLM_MODEL`; the tests
//! fail when it is missing) validated by log-probabilities with top-k 5: every receipted
//! answer, plain or streamed, commits to its scored output (the client still gets only the
//! `top_logprobs` it asked for), and `POST /gonka/v1/score` of the executor's tokens — which
//! only the node's host may call — reproduces that output exactly.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use gonka_client::http::Limits;
use gonka_client::receipt::{Receipt, HEADER_RECEIPT};
use gonka_llm::{logprob_to_fixed, Llm, LoadOptions};
use gonka_node::access::Callers;
use gonka_node::score::{request_score, ScoreRequest, ScoreResponse, SCORE_PATH};
use gonka_node::testing::{assert_error, chat_with_receipt, http_request, HttpResponse};
use gonka_node::{LlmModel, MlNodeConfig, DEFAULT_MODEL_ID, LLM_MODEL_ID};
use gonka_proto::disputes::ScoredOutput;
use gonka_proto::scored::compare;
use k256::ecdsa::SigningKey;
use serde_json::{json, Value};
use tokio::net::TcpListener;

/// The chain's `logprob_top_k` of the model in these tests.
const K: u32 = 5;
/// Alternatives the client asks for.
const CLIENT_TOP: usize = 2;

/// The language model, loaded once per test binary.
fn model() -> Arc<Llm> {
    static MODEL: OnceLock<Arc<Llm>> = OnceLock::new();
    MODEL
        .get_or_init(|| {
            let path = std::env::var_os("GONKA_LLM_MODEL")
                .map(PathBuf::from)
                .unwrap_or_else(gonka_llm::default_model_path);
            assert!(
                path.is_file(),
                "the language model {} (GONKA_LLM_MODEL, else where scripts/fetch-model.sh stores it) is missing: run scripts/fetch-model.sh",
                path.display()
            );
            // One thread: the kernels' threads spin at barriers, so two on a 2-core machine
            // busy with other work (a build, the other tests) run several times slower. An
            // earlier load in this process (none here) would keep its own setting.
            let _ = gonka_llm::set_threads(1);
            Arc::new(Llm::load(&path, LoadOptions::default()).expect("loading the model"))
        })
        .clone()
}

fn response_key() -> SigningKey {
    SigningKey::from_slice(&[7; 32]).unwrap()
}

fn account(label: &str) -> gonka_client::Key {
    gonka_client::Key::from_mnemonic(&gonka_client::keys::well_known_mnemonic(label)).unwrap()
}

/// Starts an ML node serving the language model validated by logprobs with top-k [`K`];
/// `host`: on chain as node `n1` of that host (only it may score), else off chain.
async fn start(host: Option<&gonka_client::Key>, max_body_bytes: usize) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let config = MlNodeConfig {
        listen: addr,
        node_id: "n1".into(),
        host: host.map(|h| h.address().to_string()).unwrap_or_default(),
        callers: host.map(|h| Callers::new(h.address())),
        response_key: Some(response_key()),
        llm: Some(LlmModel {
            id: LLM_MODEL_ID.into(),
            model: model(),
            logprob_top_k: Some(K),
        }),
        max_body_bytes,
        ..MlNodeConfig::default()
    };
    tokio::spawn(gonka_node::serve(listener, config, std::future::pending()));
    addr
}

fn question(max_tokens: u64, stream: bool) -> Value {
    json!({
        "model": LLM_MODEL_ID,
        "messages": [{"role": "user", "content": "What is the capital of France? Answer in one word."}],
        "max_tokens": max_tokens,
        "logprobs": true,
        "top_logprobs": CLIENT_TOP,
        "stream": stream,
    })
}

/// The receipt's scored output, after checking the receipt verifies for `request_hash`.
fn checked_scored(receipt: &Receipt, request_hash: &[u8; 32]) -> ScoredOutput {
    let pubkey = response_key().verifying_key().to_encoded_point(true);
    receipt
        .verify(pubkey.as_bytes(), "", request_hash)
        .expect("the receipt verifies");
    receipt
        .scored_output(K)
        .expect("a well-formed scored output")
        .expect("a scored receipt")
}

/// Checks a scored output against the answer the client got: one position per completion
/// token plus the stop token when it stopped, the tokens decoding to the content, the client's
/// reported logprobs (only [`CLIENT_TOP`] alternatives) the first of the receipt's [`K`].
fn check_against_answer(
    scored: &ScoredOutput,
    content: &str,
    logprobs: &[Value],
    finish: &str,
    usage: &Value,
) {
    let completion = usage["completion_tokens"].as_u64().unwrap() as usize;
    let stopped = finish == "stop";
    assert_eq!(scored.positions.len(), completion + usize::from(stopped));
    assert_eq!(
        scored.prompt_tokens,
        usage["prompt_tokens"].as_u64().unwrap()
    );
    let llm = model();
    let generated: Vec<u32> = scored.positions[..completion]
        .iter()
        .map(|p| p.token)
        .collect();
    assert_eq!(llm.tokenizer().decode(&generated), content);
    if stopped {
        let stop = scored.positions.last().unwrap().token;
        assert!(llm.tokenizer().is_end_of_generation(stop), "{stop}");
    }
    assert_eq!(logprobs.len(), completion, "one reported entry per token");
    for (entry, position) in logprobs.iter().zip(&scored.positions) {
        let fixed = |v: &Value| logprob_to_fixed(v.as_f64().unwrap() as f32);
        assert_eq!(fixed(&entry["logprob"]), position.logprob);
        let top = entry["top_logprobs"].as_array().unwrap();
        assert_eq!(top.len(), CLIENT_TOP, "the client gets what it asked for");
        assert_eq!(position.top_tokens.len(), K as usize);
        for (i, alt) in top.iter().enumerate() {
            assert_eq!(fixed(&alt["logprob"]), position.top_logprobs[i]);
            let text = String::from_utf8_lossy(llm.tokenizer().token_bytes(position.top_tokens[i]));
            assert_eq!(alt["token"].as_str().unwrap(), text);
        }
    }
}

/// A stream's chunks: content, reported logprobs, finish reason and usage.
fn read_stream(resp: &HttpResponse) -> (String, Vec<Value>, String, Value) {
    let (mut content, mut logprobs, mut finish, mut usage) =
        (String::new(), Vec::new(), String::new(), Value::Null);
    for data in resp.body.lines().filter_map(|l| l.strip_prefix("data: ")) {
        if data == "[DONE]" {
            continue;
        }
        let chunk: Value = serde_json::from_str(data).unwrap();
        if !chunk["usage"].is_null() {
            usage = chunk["usage"].clone();
        }
        let Some(choice) = chunk["choices"].get(0) else {
            continue;
        };
        content.push_str(choice["delta"]["content"].as_str().unwrap_or_default());
        if let Some(entries) = choice["logprobs"]["content"].as_array() {
            logprobs.extend(entries.iter().cloned());
        }
        if let Some(reason) = choice["finish_reason"].as_str() {
            finish = reason.to_string();
        }
    }
    (content, logprobs, finish, usage)
}

/// A plain receipted answer: its scored output, checked against the answer, and its content.
async fn plain_scored(addr: SocketAddr, body: &Value) -> (ScoredOutput, Value) {
    let (resp, request_hash) = chat_with_receipt(addr, body).await;
    assert_eq!(resp.status, 200, "{}", resp.body);
    let receipt = Receipt::from_header(resp.header(HEADER_RECEIPT).expect("a receipt")).unwrap();
    let scored = checked_scored(&receipt, &request_hash);
    let answer = resp.json();
    let choice = &answer["choices"][0];
    check_against_answer(
        &scored,
        choice["message"]["content"].as_str().unwrap(),
        choice["logprobs"]["content"].as_array().unwrap(),
        choice["finish_reason"].as_str().unwrap(),
        &answer["usage"],
    );
    assert_eq!(
        receipt.completion_tokens,
        answer["usage"]["completion_tokens"]
    );
    (scored, answer)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn receipted_answers_of_a_logprobs_model_commit_to_their_scored_output() {
    let addr = start(None, MlNodeConfig::default().max_body_bytes).await;
    // Plain: the model answers and stops within 16 tokens, so the stop token is scored too.
    let (plain, answer) = plain_scored(addr, &question(16, false)).await;
    assert_eq!(answer["choices"][0]["finish_reason"], "stop");
    assert!(answer["choices"][0]["message"]["content"]
        .as_str()
        .unwrap()
        .contains("Paris"));

    // Streamed with usage: the receipt comes before [DONE] and scores the same greedy answer.
    let mut body = question(16, true);
    body["stream_options"] = json!({"include_usage": true});
    let (resp, request_hash) = chat_with_receipt(addr, &body).await;
    assert_eq!(resp.status, 200, "{}", resp.body);
    let receipt = Receipt::find_in_sse(resp.body.as_bytes()).expect("a receipt comment");
    let streamed = checked_scored(&receipt, &request_hash);
    let (content, logprobs, finish, usage) = read_stream(&resp);
    check_against_answer(&streamed, &content, &logprobs, &finish, &usage);
    assert_eq!(streamed, plain, "greedy: the same scored output either way");

    // Cut short by max_tokens: no stop position.
    let (short, answer) = plain_scored(addr, &question(2, false)).await;
    assert_eq!(answer["choices"][0]["finish_reason"], "length");
    assert_eq!(short.positions.len(), 2);
    assert_eq!(short.positions[..], plain.positions[..2]);

    // An unreceipted request is answered as before: no receipt, the client's alternatives.
    let body = question(4, false).to_string();
    let resp = http_request(addr, "POST", "/v1/chat/completions", &[], body.as_bytes()).await;
    assert_eq!(resp.status, 200, "{}", resp.body);
    assert!(resp.header(HEADER_RECEIPT).is_none());
    let entries = resp.json()["choices"][0]["logprobs"]["content"].clone();
    assert!(entries.as_array().unwrap().iter().all(|e| e["top_logprobs"]
        .as_array()
        .unwrap()
        .len()
        == CLIENT_TOP));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scoring_the_executors_tokens_reproduces_its_scored_output() {
    let host = account("host");
    let executor = start(None, MlNodeConfig::default().max_body_bytes).await;
    let validator = start(Some(&host), MlNodeConfig::default().max_body_bytes).await;
    for max_tokens in [16, 3] {
        let body = question(max_tokens, false);
        let (executed, _) = plain_scored(executor, &body).await;
        // What a validator gets from the transfer agent: the request body and the tokens
        // (the stop token included), never the executor's log-probabilities.
        let tokens = executed.positions.iter().map(|p| p.token).collect();
        let asked = ScoreRequest::new(body.to_string().as_bytes(), tokens, K).unwrap();
        let scored = request_score(
            &host,
            &validator.to_string(),
            "n1",
            &asked,
            Limits::default(),
        )
        .await
        .unwrap();
        let distance = compare(&executed, &scored).expect("the same tokens and prompt");
        assert_eq!(distance.total, 0, "max_tokens {max_tokens}");
        assert_eq!(scored, executed);
    }
}

/// Posts a score request, signed by `key` unless `None`.
async fn post_score(
    addr: SocketAddr,
    key: Option<&gonka_client::Key>,
    asked: &Value,
) -> HttpResponse {
    let body = asked.to_string().into_bytes();
    let headers = match key {
        Some(key) => gonka_client::node_call::sign_node_call(
            key,
            "n1",
            None,
            &body,
            gonka_client::unix_now(),
        )
        .unwrap(),
        None => Vec::new(),
    };
    http_request(addr, "POST", SCORE_PATH, &headers, &body).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_host_scores_and_only_what_the_model_can_score() {
    let host = account("host");
    let addr = start(Some(&host), 16 * 1024).await;
    let request = question(16, false);
    let paris = model().tokenizer().encode("Paris", false);
    let asked =
        |tokens: Value, top_k: Value| json!({"request": request, "tokens": tokens, "top_k": top_k});
    let good = asked(json!(paris), json!(K));

    assert_error(
        &post_score(addr, None, &good).await,
        401,
        "missing_auth_header",
    );
    assert_error(
        &post_score(addr, Some(&account("stranger")), &good).await,
        403,
        "caller_not_allowed",
    );
    // The host is served, and its answer is the scored output of the tokens asked.
    let resp = post_score(addr, Some(&host), &good).await;
    assert_eq!(resp.status, 200, "{}", resp.body);
    let answer: ScoreResponse = serde_json::from_str(&resp.body).unwrap();
    let scored = answer
        .scored_output(&serde_json::from_value(good.clone()).unwrap())
        .unwrap();
    assert_eq!(scored.positions.len(), paris.len());

    let vocab = model().tokenizer().vocab_size() as u32;
    let mut reference = request.clone();
    reference["model"] = json!(DEFAULT_MODEL_ID);
    let mut unknown = request.clone();
    unknown["model"] = json!("no/such-model");
    let cases = [
        (asked(json!(paris), json!(0)), 400, "invalid_top_k"),
        (asked(json!(paris), json!(21)), 400, "invalid_top_k"),
        (asked(json!([1, vocab]), json!(K)), 400, "invalid_tokens"),
        (asked(json!([]), json!(K)), 400, "invalid_tokens"),
        (
            json!({"request": reference, "tokens": paris, "top_k": K}),
            400,
            "model_not_scored",
        ),
        (
            json!({"request": unknown, "tokens": paris, "top_k": K}),
            404,
            "model_not_found",
        ),
        (json!({"request": request, "top_k": K}), 400, "invalid_json"),
        (
            asked(json!(vec![1u32; 10_000]), json!(K)),
            413,
            "request_too_large",
        ),
    ];
    for (body, status, code) in cases {
        let resp = post_score(addr, Some(&host), &body).await;
        assert_error(&resp, status, code);
    }
    // A signed call is used once (another body than the calls above, whose signatures made
    // in the same second would be the same).
    let body = asked(json!(paris), json!(3)).to_string().into_bytes();
    let headers =
        gonka_client::node_call::sign_node_call(&host, "n1", None, &body, gonka_client::unix_now())
            .unwrap();
    let first = http_request(addr, "POST", SCORE_PATH, &headers, &body).await;
    assert_eq!(first.status, 200, "{}", first.body);
    let again = http_request(addr, "POST", SCORE_PATH, &headers, &body).await;
    assert_error(&again, 401, "replayed_call");
    let metrics = gonka_node::testing::scrape_metrics(addr).await;
    assert_eq!(
        metrics.get("gonka_node_score_requests_total{status=\"200\"}"),
        Some(&2.0),
        "{metrics:?}"
    );
}
