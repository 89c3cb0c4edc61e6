//! Cross-validation over real sockets on 127.0.0.1: the transfer agent's payload endpoint
//! (with an injected allow-list in place of the chain's assignments) and a cheating ML node
//! whose wrong, signed answers a validator catches.

use std::net::SocketAddr;
use std::sync::Arc;

use gonka_client::keys::well_known_mnemonic;
use gonka_client::payload_auth::{sign_payload_request, HEADER_SIGNATURE};
use gonka_client::receipt::{response_hash, Receipt, HEADER_RECEIPT};
use gonka_client::request::body_hash;
use gonka_client::Key;
use gonka_node::{self as ml_node, cheat, MlNodeConfig};
use gonka_proto::disputes::PendingWork;
use gonka_proto::inference::WorkRecord;
use gonka_proto::signing::{opens, result_matches, text_output_commitment};
use gonka_ta::payloads::{self, AccessCheck, PayloadStore, Payloads};
use gonka_validator::{decide, Finding, OwnAnswer, KIND_VALIDATION};
use k256::ecdsa::SigningKey;
use serde_json::json;
use tokio::net::TcpListener;

use gonka_node::testing::*;

const BODY: &[u8] =
    br#"{"model":"gonka/reference-1","messages":[{"role":"user","content":"Check me."}],"max_tokens":24}"#;

fn key(label: &str) -> Key {
    Key::from_mnemonic(&well_known_mnemonic(label)).unwrap()
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// Serves the payload route over a fresh store holding `BODY` under `id`; only `reader` may
/// read `id`.
async fn start_payloads(id: &str, reader: &str) -> (SocketAddr, std::path::PathBuf) {
    let path = std::env::temp_dir().join(format!(
        "gonka-validation-payloads-{}-{id}.redb",
        std::process::id()
    ));
    let _ = std::fs::remove_file(&path);
    let store = Arc::new(PayloadStore::open(&path).unwrap());
    let opening = payloads::OutputOpening {
        salt: [1; 32],
        response_hash: [2; 32],
        scored: None,
    };
    store.put(id, BODY, &opening, now()).unwrap();
    let allowed = (reader.to_string(), id.to_string());
    let access: AccessCheck = Arc::new(move |address, inference_id| {
        let ok = (address, inference_id) == allowed;
        Box::pin(async move { Ok(ok) })
    });
    let service = Payloads::new(store, access, Arc::new(now));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(listener, payloads::router(service))
            .await
            .unwrap()
    });
    (addr, path)
}

async fn fetch(addr: SocketAddr, id: &str, headers: Vec<(&'static str, String)>) -> HttpResponse {
    let headers: Vec<(&str, String)> = headers.into_iter().collect();
    http_request(addr, "GET", &format!("/v1/payloads/{id}"), &headers, b"").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn payloads_go_only_to_the_assigned_validator() {
    let id = "ab".repeat(32);
    let validator = key("validator");
    let (addr, path) = start_payloads(&id, validator.address()).await;

    let ok = fetch(
        addr,
        &id,
        sign_payload_request(&validator, &id, now()).unwrap(),
    )
    .await;
    assert_eq!(ok.status, 200, "body: {}", ok.body);
    assert_eq!(ok.body.as_bytes(), BODY, "the exact signed bytes");
    assert_eq!(body_hash(ok.body.as_bytes()), body_hash(BODY));

    let other = fetch(
        addr,
        &id,
        sign_payload_request(&key("bob"), &id, now()).unwrap(),
    )
    .await;
    assert_error(&other, 403, "not_assigned");

    // A signature made for another id does not authenticate this one.
    let mut forged = sign_payload_request(&validator, &id, now()).unwrap();
    let foreign = sign_payload_request(&validator, "other", now()).unwrap();
    for (name, value) in forged.iter_mut() {
        if *name == HEADER_SIGNATURE {
            *value = foreign.iter().find(|(n, _)| n == name).unwrap().1.clone();
        }
    }
    assert_error(&fetch(addr, &id, forged).await, 401, "invalid_signature");
    assert_error(
        &fetch(addr, &id, Vec::new()).await,
        401,
        "missing_auth_header",
    );
    let stale = sign_payload_request(&validator, &id, now() - 600).unwrap();
    assert_error(&fetch(addr, &id, stale).await, 401, "stale_timestamp");

    let unknown = "cd".repeat(32);
    let missing = fetch(
        addr,
        &unknown,
        sign_payload_request(&validator, &unknown, now()).unwrap(),
    )
    .await;
    assert_error(&missing, 404, "payload_not_found");
    std::fs::remove_file(&path).unwrap();
}

/// Attack (hole 12): capture an assigned validator's signed payload fetch off the wire and
/// replay it within the clock window to read the prompt. The transfer agent serves each
/// signed fetch once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_captured_payload_fetch_cannot_be_replayed() {
    let id = "ef".repeat(32);
    let validator = key("validator");
    let (addr, path) = start_payloads(&id, validator.address()).await;
    let captured = sign_payload_request(&validator, &id, now()).unwrap();
    let first = fetch(addr, &id, captured.clone()).await;
    assert_eq!(first.status, 200, "body: {}", first.body);
    let replayed = fetch(addr, &id, captured).await;
    assert_error(&replayed, 401, "replayed_request");
    assert!(!replayed.body.contains("Check me"), "{}", replayed.body);
    std::fs::remove_file(&path).unwrap();
}

async fn start_node(cheat_fraction: f64, key_byte: u8) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let config = MlNodeConfig {
        listen: addr,
        response_key: Some(SigningKey::from_slice(&[key_byte; 32]).unwrap()),
        testing_cheat_fraction: cheat_fraction,
        ..MlNodeConfig::default()
    };
    tokio::spawn(ml_node::serve(listener, config, std::future::pending()));
    addr
}

/// The content and receipt of a plain answer to `body` signed with `nonce` at `at` (unix
/// seconds: one instant per test, so a request's hash is the same every time it is signed).
async fn complete(addr: SocketAddr, body: &[u8], nonce: &str, at: u64) -> (String, Receipt) {
    let (headers, _) = signed_request_at(body, nonce, at);
    let resp = http_request(addr, "POST", "/v1/chat/completions", &headers, body).await;
    assert_eq!(resp.status, 200, "body: {}", resp.body);
    let receipt = Receipt::from_header(resp.header(HEADER_RECEIPT).unwrap()).unwrap();
    let content = resp.json()["choices"][0]["message"]["content"]
        .as_str()
        .unwrap()
        .to_string();
    (content, receipt)
}

/// A nonce whose request of `body` signed at `at` the cheat selects (`selected`) or spares,
/// and that request's hash.
fn nonce_where(body: &[u8], selected: bool, at: u64) -> (String, [u8; 32]) {
    (0..)
        .map(|i| format!("n-{i}"))
        .map(|nonce| {
            let (_, hash) = signed_request_at(body, &nonce, at);
            (nonce, hash)
        })
        .find(|(_, hash)| cheat::selects(0.5, hash) == selected)
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cheating_node_signs_wrong_answers_that_a_validator_catches() {
    let honest = start_node(0.0, 3).await;
    let cheater = start_node(0.5, 4).await;
    let cheater_pubkey = SigningKey::from_slice(&[4; 32])
        .unwrap()
        .verifying_key()
        .to_encoded_point(true);
    let at = now();
    let (selected_nonce, selected) = nonce_where(BODY, true, at);
    let (spared_nonce, _) = nonce_where(BODY, false, at);

    let (truth, _) = complete(honest, BODY, &selected_nonce, at).await;
    let (wrong, receipt) = complete(cheater, BODY, &selected_nonce, at).await;
    assert_ne!(
        wrong, truth,
        "a selected request gets a different completion"
    );
    let verified = receipt
        .verify(cheater_pubkey.as_bytes(), "", &selected)
        .expect("the wrong answer carries a receipt that verifies");
    assert!(receipt.commits_to(&wrong));

    let (spared_truth, _) = complete(honest, BODY, &spared_nonce, at).await;
    let (spared_answer, _) = complete(cheater, BODY, &spared_nonce, at).await;
    assert_eq!(
        spared_answer, spared_truth,
        "unselected requests are answered honestly"
    );

    // Streaming a selected request cheats the same way.
    let mut streamed: serde_json::Value = serde_json::from_slice(BODY).unwrap();
    streamed["stream"] = json!(true);
    let streamed = streamed.to_string();
    let (streamed_nonce, _) = nonce_where(streamed.as_bytes(), true, at);
    let (headers, _) = signed_request_at(streamed.as_bytes(), &streamed_nonce, at);
    let resp = http_request(
        cheater,
        "POST",
        "/v1/chat/completions",
        &headers,
        streamed.as_bytes(),
    )
    .await;
    let stream_receipt = Receipt::find_in_sse(resp.body.as_bytes()).unwrap();
    let streamed_text: String = resp
        .body
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str::<serde_json::Value>(d).ok())
        .filter_map(|c| {
            c["choices"][0]["delta"]["content"]
                .as_str()
                .map(str::to_string)
        })
        .collect();
    assert_ne!(
        streamed_text, truth,
        "the stream of a selected request is wrong too"
    );
    assert!(stream_receipt.commits_to(&streamed_text));

    // The record the TA would settle, judged by a validator that re-executed honestly.
    let record = WorkRecord {
        inference_id: hex::encode(selected),
        prompt_hash: body_hash(BODY).to_vec(),
        output_commitment: verified.output_commitment.to_vec(),
        prompt_tokens: receipt.prompt_tokens,
        completion_tokens: receipt.completion_tokens,
        ..WorkRecord::default()
    };
    let work = PendingWork {
        kind: KIND_VALIDATION.into(),
        inference_id: record.inference_id.clone(),
        ..PendingWork::default()
    };
    let own = OwnAnswer {
        text: truth.clone(),
        prompt_tokens: receipt.prompt_tokens,
        completion_tokens: receipt.completion_tokens,
    };
    let caught = decide("v", &work, &record, BODY, &own).unwrap();
    assert_eq!(caught.finding, Finding::Committed);
    assert_eq!(caught.found.result_hash, response_hash(&truth));
    // The TA reveals what the receipt committed to, and the chain compares: the honest
    // validator's commitment is not the revealed (wrong) answer's.
    let revealed = response_hash(&wrong);
    assert!(opens(&record, &verified.salt, &revealed));
    let commitment = caught.found.commitment("v");
    assert!(!result_matches(&record, &revealed, "v", &commitment));
    // Had the executor answered with what the validator found, the commitment would match.
    let honest = WorkRecord {
        output_commitment: text_output_commitment(&verified.salt, &response_hash(&truth)).to_vec(),
        ..record.clone()
    };
    assert!(result_matches(
        &honest,
        &response_hash(&truth),
        "v",
        &commitment
    ));
}
