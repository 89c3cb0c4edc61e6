//! Red-team suite of the ML node (issue 10, hole 2), over real sockets: nobody obtains an
//! execution receipt for a request hash of their choosing, so nobody can bind an honest
//! node's signature to a body it never executed (and then frame its host in a dispute).

use std::net::SocketAddr;

use gonka_client::node_call::sign_node_call;
use gonka_client::receipt::{Receipt, HEADER_RECEIPT};
use gonka_client::request::{sign_request, RequestTerms, HEADER_SIGNATURE};
use gonka_node::access::Callers;
use gonka_node::{self as ml_node, MlNodeConfig, DEFAULT_MODEL_ID};
use k256::ecdsa::SigningKey;
use serde_json::json;
use tokio::net::TcpListener;

use gonka_node::testing::*;

async fn receipting_node() -> (SocketAddr, Vec<u8>) {
    let key = SigningKey::from_slice(&[7; 32]).unwrap();
    let pubkey = key
        .verifying_key()
        .to_encoded_point(true)
        .as_bytes()
        .to_vec();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let config = MlNodeConfig {
        listen: addr,
        host: "gonka1honesthost".into(),
        response_key: Some(key),
        ..MlNodeConfig::default()
    };
    tokio::spawn(ml_node::serve(listener, config, std::future::pending()));
    (addr, pubkey)
}

fn body(content: &str) -> Vec<u8> {
    json!({
        "model": DEFAULT_MODEL_ID,
        "messages": [{"role": "user", "content": content}],
        "max_tokens": 8
    })
    .to_string()
    .into_bytes()
}

async fn post(addr: SocketAddr, headers: &[(&str, String)], body: &[u8]) -> HttpResponse {
    http_request(addr, "POST", "/v1/chat/completions", headers, body).await
}

/// Before: `curl -H 'x-gonka-request-hash: aaaa…'` with any body returned a receipt signed
/// over the caller's hash. Now the header means nothing: an unsigned call gets no receipt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_chosen_request_hash_gets_no_receipt() {
    let (addr, _) = receipting_node().await;
    let chosen = [("x-gonka-request-hash", "aa".repeat(32))];
    let resp = post(addr, &chosen, &body("frame me")).await;
    assert_eq!(resp.status, 200, "{}", resp.body);
    assert_eq!(resp.header(HEADER_RECEIPT), None);
}

/// A requester's genuine signature moved onto another body is refused before anything runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signature_moved_to_another_body_is_refused() {
    let (addr, _) = receipting_node().await;
    let (headers, _) = signed_request(&body("the signed question"), "n-1");
    let resp = post(addr, &headers, &body("another question")).await;
    assert_error(&resp, 401, "invalid_signature");
    assert_eq!(resp.header(HEADER_RECEIPT), None);
    let mut forged = headers.clone();
    for (name, value) in &mut forged {
        if *name == HEADER_SIGNATURE {
            *value = "11".repeat(64);
        }
    }
    let resp = post(addr, &forged, &body("the signed question")).await;
    assert_eq!(resp.status, 401, "{}", resp.body);
}

/// Signed terms the body disagrees with: the body asks for more tokens than signed (the
/// requester would be charged for a budget it never agreed to), or the signed model is not
/// this node's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_that_disagrees_with_the_signed_terms_is_refused() {
    let (addr, _) = receipting_node().await;
    let question = body("hi"); // max_tokens 8
    let sign = |model: &str, max_completion_tokens: u64| {
        let terms = RequestTerms {
            chain_id: String::new(),
            body_hash: [0; 32],
            timestamp: gonka_client::unix_now(),
            nonce: format!("n-{model}-{max_completion_tokens}"),
            commission: 0,
            transfer_agent: TEST_TRANSFER_AGENT.into(),
            model: model.into(),
            max_price_per_token: 0,
            max_completion_tokens,
            max_prompt_tokens: gonka_proto::signing::prompt_token_bound(&question),
        };
        sign_request(&test_requester(), &question, terms).unwrap()
    };
    let resp = post(addr, &sign(DEFAULT_MODEL_ID, 4), &question).await;
    assert_error(&resp, 400, "terms_mismatch");
    let resp = post(addr, &sign("gonka/other", 8), &question).await;
    assert_error(&resp, 400, "terms_mismatch");
    assert_eq!(resp.header(HEADER_RECEIPT), None);
}

/// A prompt longer than the requester signed for is refused before anything runs: the node
/// would otherwise receipt, and the requester pay for, prompt tokens nothing it signed
/// bounds (request/v2 signed no prompt bound at all). The reference model reads one token
/// per byte of the chat-formatted prompt, so "hi" in the chat format is about 26 tokens.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_longer_than_the_signed_bound_is_refused() {
    let (addr, _) = receipting_node().await;
    let question = body("hi");
    let sign = |max_prompt_tokens: u64| {
        let terms = RequestTerms {
            chain_id: String::new(),
            body_hash: [0; 32],
            timestamp: gonka_client::unix_now(),
            nonce: format!("n-prompt-{max_prompt_tokens}"),
            commission: 0,
            transfer_agent: TEST_TRANSFER_AGENT.into(),
            model: DEFAULT_MODEL_ID.into(),
            max_price_per_token: 0,
            max_completion_tokens: 8,
            max_prompt_tokens,
        };
        sign_request(&test_requester(), &question, terms).unwrap()
    };
    let resp = post(addr, &sign(10), &question).await;
    assert_error(&resp, 400, "prompt_too_long");
    assert!(resp.body.contains("signs at most 10"), "{}", resp.body);
    assert_eq!(resp.header(HEADER_RECEIPT), None);
    let bound = gonka_proto::signing::prompt_token_bound(&question);
    let resp = post(addr, &sign(bound), &question).await;
    assert_eq!(resp.status, 200, "the body's bound suffices: {}", resp.body);
    let receipt = Receipt::from_header(resp.header(HEADER_RECEIPT).unwrap()).unwrap();
    assert!(receipt.prompt_tokens <= bound && receipt.prompt_tokens > 10);
}

/// The receipt the node does sign names the hash it computed from the body it executed and
/// the host it belongs to; no other hash or host verifies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_receipt_binds_the_computed_hash_and_the_host() {
    let (addr, pubkey) = receipting_node().await;
    let question = body("what is 2+2?");
    let (headers, request_hash) = signed_request(&question, "n-4");
    let resp = post(addr, &headers, &question).await;
    assert_eq!(resp.status, 200, "{}", resp.body);
    let receipt = Receipt::from_header(resp.header(HEADER_RECEIPT).unwrap()).unwrap();
    receipt
        .verify(&pubkey, "gonka1honesthost", &request_hash)
        .unwrap();
    assert!(receipt
        .verify(&pubkey, "gonka1honesthost", &[0xaa; 32])
        .is_err());
    assert!(receipt
        .verify(&pubkey, "gonka1attacker", &request_hash)
        .is_err());
}

/// A node on chain, hosted by "host", that knows `TEST_TRANSFER_AGENT` as the only registered
/// transfer agent.
async fn node_on_chain() -> SocketAddr {
    let host =
        gonka_client::Key::from_mnemonic(&gonka_client::keys::well_known_mnemonic("host")).unwrap();
    let callers = Callers::new(host.address());
    callers.set_transfer_agents([TEST_TRANSFER_AGENT.to_string()]);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let config = MlNodeConfig {
        listen: addr,
        node_id: "n1".into(),
        host: host.address().into(),
        callers: Some(callers),
        response_key: Some(SigningKey::from_slice(&[7; 32]).unwrap()),
        ..MlNodeConfig::default()
    };
    tokio::spawn(ml_node::serve(listener, config, std::future::pending()));
    addr
}

fn account(label: &str) -> gonka_client::Key {
    gonka_client::Key::from_mnemonic(&gonka_client::keys::well_known_mnemonic(label)).unwrap()
}

/// Attack (hole 12): use a registered ML node's compute for free by calling it directly,
/// or by replaying a requester's signed request (or a transfer agent's signed call) to it.
/// A node on chain serves only its host (unreceipted) and the registered transfer agent a
/// request names; every call is signed and used once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strangers_get_no_compute_from_a_node_on_chain() {
    let addr = node_on_chain().await;
    let question = body("free compute please");
    // A plain OpenAI call: no caller signature.
    let resp = post(addr, &[], &question).await;
    assert_error(&resp, 401, "missing_auth_header");
    // Signed by a stranger.
    let stranger = sign_node_call(&account("stranger"), "n1", None, &question, now()).unwrap();
    let resp = post(addr, &stranger, &question).await;
    assert_error(&resp, 403, "caller_not_allowed");
    // The host's own call (its validation worker) is served, once.
    let host = sign_node_call(&account("host"), "n1", None, &question, now()).unwrap();
    let resp = post(addr, &host, &question).await;
    assert_eq!(resp.status, 200, "{}", resp.body);
    let resp = post(addr, &host, &question).await;
    assert_error(&resp, 401, "replayed_call");
    // A host signature for another node does not open this one.
    let elsewhere = sign_node_call(&account("host"), "n2", None, &question, now()).unwrap();
    assert_error(
        &post(addr, &elsewhere, &question).await,
        401,
        "invalid_signature",
    );

    // A requester's genuine request, replayed straight to the node by its holder.
    let (requester, request_hash) = signed_request(&question, "n-direct");
    assert_error(
        &post(addr, &requester, &question).await,
        401,
        "missing_auth_header",
    );
    // Forwarded by someone who is not the transfer agent the requester named.
    let mut forged = requester.clone();
    forged.extend(
        sign_node_call(&account("host"), "n1", Some(request_hash), &question, now()).unwrap(),
    );
    assert_error(
        &post(addr, &forged, &question).await,
        403,
        "caller_not_allowed",
    );
}

fn now() -> u64 {
    gonka_client::unix_now()
}
