//! The HTTP request checks of the transfer agent and the ML node, without a socket: the
//! signed-request headers (request/v2), the ML node's caller headers, the payload-fetch
//! headers, the chat-completion body as each of them parses it, and the server-sent event
//! parser every streaming reader uses.
//!
//! Input: header lines `name: value\n` up to the first empty line, then the body (no empty
//! line: no headers, all body). Header names and values HTTP would refuse are dropped, as
//! the server's HTTP parser would.
//!
//! Checked: no panic; a request whose signature verifies has a hash equal to its terms' hash;
//! the chat body's checks (`body_agrees`, the TA's `check_terms`) agree on what they
//! accept; the event parser gives the same events for the body fed whole and in pieces.

use axum::http::{HeaderMap, HeaderName, HeaderValue};
use gonka_client::openai::{ChatCompletionRequest, Usage};
use gonka_client::request::{body_agrees, verify_request, RequestTerms};
use gonka_client::sse::SseParser;

use crate::fixture::NOW_SECS;

/// The clock skew both servers allow (their default).
pub const MAX_SKEW_SECS: u64 = 300;
/// The ML node's id in the caller checks.
pub const NODE_ID: &str = "node-1";
/// The model the fixture's terms name.
pub const MODEL: &str = "gonka/reference";
/// The inference id a payload fetch is checked for.
pub const INFERENCE_ID: &str = "00000000000000000000000000000000000000000000000000000000000000aa";

/// Splits `data` into its headers and body.
pub fn parse(data: &[u8]) -> (HeaderMap, &[u8]) {
    let mut headers = HeaderMap::new();
    let Some(end) = data.windows(2).position(|w| w == b"\n\n") else {
        return (headers, data);
    };
    for line in data[..end].split(|&b| b == b'\n') {
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            continue;
        };
        let value = line[colon + 1..]
            .strip_prefix(b" ")
            .unwrap_or(&line[colon + 1..]);
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(&line[..colon]),
            HeaderValue::from_bytes(value),
        ) {
            headers.append(name, value);
        }
    }
    (headers, &data[end + 2..])
}

/// Runs every check on the request `data` describes.
pub fn run(data: &[u8]) {
    let (headers, body) = parse(data);
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());

    // The signed request, as the ML node checks it (`verify_request`, then `body_agrees`).
    let signed = verify_request(&header, body, NOW_SECS, MAX_SKEW_SECS);
    if let Ok(signed) = &signed {
        assert_eq!(
            signed.caller.signed,
            signed.terms.hash(),
            "a verified hash is its terms' hash"
        );
        let agreed = body_agrees(body, &signed.terms);
        // The TA's view of the same request: its own `verify` and `check_terms`.
        let auth = gonka_ta::auth::verify(&headers, body, NOW_SECS, MAX_SKEW_SECS)
            .expect("the TA verifies what verify_request verifies");
        let terms = gonka_ta::auth::check_terms(
            &auth,
            body,
            &signed.terms.transfer_agent,
            &signed.terms.chain_id,
            signed.terms.max_price_per_token,
            0,
        );
        // check_terms adds one refusal of its own: a zero completion budget.
        assert_eq!(
            agreed.as_ref().is_ok_and(|&budget| budget > 0),
            terms.is_ok(),
            "body_agrees {agreed:?} but the TA's check_terms {:?}",
            terms.as_ref().map_err(|e| &e.message)
        );
    } else {
        let _ = gonka_ta::auth::verify(&headers, body, NOW_SECS, MAX_SKEW_SECS)
            .map(|_| panic!("the TA verifies what verify_request refuses"));
    }
    // The body's agreement with fixed terms, whatever the signature.
    let terms = RequestTerms {
        chain_id: crate::fixture::CHAIN_ID.into(),
        body_hash: [0; 32],
        timestamp: NOW_SECS,
        nonce: "n".into(),
        commission: 0,
        transfer_agent: String::new(),
        model: MODEL.into(),
        max_price_per_token: 1,
        max_completion_tokens: 16,
        max_prompt_tokens: 64,
    };
    let _ = body_agrees(body, &terms);

    // The ML node's caller check (`gonka_node::access::Callers::admit` runs this, then
    // compares the caller with its host or the request's transfer agent), for the signed
    // request or an unsigned call. Called here directly: the node crate would bring its
    // whole inference engine into the instrumented build.
    let request_hash = signed.as_ref().ok().map(|s| s.caller.signed);
    let _ = gonka_client::node_call::verify_node_call(
        &header,
        NODE_ID,
        request_hash,
        body,
        NOW_SECS,
        MAX_SKEW_SECS,
    );

    // A payload fetch (the TA's payload store).
    let _ = gonka_client::payload_auth::verify_payload_request(header, INFERENCE_ID, NOW_SECS);

    // The chat body as the ML node reads it: messages to the reference model's prompt.
    if let Ok(request) = serde_json::from_slice::<ChatCompletionRequest>(body) {
        let _ = gonka_node::reference_prompt(&request.messages);
    }

    // The body as an event stream: whole, and in pieces of a size the body picks.
    let whole = SseParser::parse_all(body);
    let piece = 1 + body.first().map_or(0, |b| usize::from(b % 7));
    let mut parser = SseParser::default();
    let mut pieces: Vec<String> = body.chunks(piece).flat_map(|c| parser.push(c)).collect();
    pieces.extend(parser.finish());
    assert_eq!(
        whole, pieces,
        "events differ when the stream arrives in pieces of {piece}"
    );
    // What the TA reads of each event (`stream_answer`): the usage and the content delta.
    for data in whole {
        let Ok(event) = serde_json::from_str::<serde_json::Value>(&data) else {
            continue;
        };
        if let Some(usage) = event.get("usage").filter(|u| !u.is_null()) {
            let _ = serde_json::from_value::<Usage>(usage.clone());
        }
        let _ = event["choices"][0]["delta"]["content"].as_str();
    }
}
