//! Every message type's decode and stateless check: the first input byte picks a type URL of
//! [`gonka_proto::tx_messages::type_urls`] (every gonka `Msg*`, the Cosmos bank `MsgSend`
//! and the `BeaconTx`), the rest is the message's protobuf value. It goes to every module's
//! `decode_msg` (what the ante handler calls for each message of a tx), and to the JSON
//! rendering explorers and the REST `GetTx` use, and back.
//!
//! Checked: no panic; at most one module claims a type URL; a message that renders as JSON
//! parses back from that JSON (when its type is one clients post as JSON) to bytes that
//! render as the same JSON.

use std::sync::OnceLock;

use gonka_sdk::{Any, Module};

fn modules() -> &'static [Box<dyn Module>] {
    static MODULES: OnceLock<Vec<Box<dyn Module>>> = OnceLock::new();
    MODULES.get_or_init(gonka_app::modules::all)
}

/// Every type URL the target picks from, in a fixed order.
pub fn type_urls() -> &'static [&'static str] {
    static URLS: OnceLock<Vec<&'static str>> = OnceLock::new();
    URLS.get_or_init(|| gonka_proto::tx_messages::type_urls().collect())
}

/// Decodes `data[1..]` as the message type `data[0]` picks.
pub fn run(data: &[u8]) {
    let Some((&pick, value)) = data.split_first() else {
        return;
    };
    let urls = type_urls();
    let url = urls[usize::from(pick) % urls.len()];
    let msg = Any {
        type_url: url.to_string(),
        value: value.to_vec(),
    };
    let mut claimed = 0;
    for module in modules() {
        if let Some(decoded) = module.decode_msg(&msg) {
            claimed += 1;
            if let Ok(decoded) = decoded {
                let _ = decoded.signer().len();
            }
        }
    }
    assert!(claimed <= 1, "{claimed} modules claim {url}");

    let Some(Ok(json)) = gonka_proto::tx_messages::to_json(url, value) else {
        return;
    };
    let mut fields = json.clone();
    if let serde_json::Value::Object(map) = &mut fields {
        map.remove("@type");
    }
    // `None`: a type that is rendered but never posted as JSON (the proposer's `BeaconTx`).
    let bytes = match gonka_proto::tx_messages::from_json(url, fields) {
        None => return,
        Some(Ok(bytes)) => bytes,
        Some(Err(e)) => panic!("{url} renders as {json} but does not parse back: {e}"),
    };
    let again = gonka_proto::tx_messages::to_json(url, &bytes)
        .expect("a known type URL")
        .expect("bytes from JSON decode");
    assert_eq!(
        json, again,
        "{url}: JSON → bytes → JSON changed the message"
    );
}
