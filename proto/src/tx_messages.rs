//! A tx's messages as JSON, by type URL: what explorers and the REST `GetTx` show of a tx.
//! Every gonka `Msg*` is listed by the build script from the .proto files, so a new message
//! is decoded without touching this file; the Cosmos bank `MsgSend` wallets sign and the
//! `BeaconTx` a proposer puts first in its block (which the node's API shows as a tx's one
//! message) are added here. Byte fields come out as serde renders them (arrays of numbers); callers that show
//! them to people re-encode them, as `gonkad --output json` does.

use prost::Message;
use serde_json::{json, Value};

/// Renders a message's protobuf bytes as JSON.
type Renderer = fn(&[u8]) -> Result<Value, String>;

include!(concat!(env!("OUT_DIR"), "/tx_messages.rs"));

/// [`Renderer`] of a gonka message type.
pub(crate) fn json_of<M: Message + Default + serde::Serialize>(
    bytes: &[u8],
) -> Result<Value, String> {
    let message = M::decode(bytes).map_err(|e| e.to_string())?;
    serde_json::to_value(&message).map_err(|e| e.to_string())
}

/// `cosmos.bank.v1beta1.MsgSend` (cosmos-sdk-proto types carry no serde).
fn cosmos_send(bytes: &[u8]) -> Result<Value, String> {
    let send = cosmos_sdk_proto::cosmos::bank::v1beta1::MsgSend::decode(bytes)
        .map_err(|e| e.to_string())?;
    let amount: Vec<Value> = send
        .amount
        .iter()
        .map(|c| json!({"denom": c.denom, "amount": c.amount}))
        .collect();
    Ok(json!({"from_address": send.from_address, "to_address": send.to_address, "amount": amount}))
}

/// The JSON of a tx message `{"@type": type_url, ...fields}`; `None` for a type URL no module
/// accepts, an error for bytes that do not decode as their type.
pub fn to_json(type_url: &str, value: &[u8]) -> Option<Result<Value, String>> {
    let render: Renderer = match type_url {
        "/cosmos.bank.v1beta1.MsgSend" => cosmos_send,
        "/gonka.bls.v1.BeaconTx" => json_of::<crate::bls::BeaconTx>,
        _ => GONKA_MESSAGES.iter().find(|(url, _)| *url == type_url)?.1,
    };
    Some(render(value).map(|mut json| {
        if let Value::Object(fields) = &mut json {
            fields.insert("@type".into(), Value::String(type_url.into()));
        }
        json
    }))
}

/// The type URLs [`to_json`] renders.
pub fn type_urls() -> impl Iterator<Item = &'static str> {
    ["/cosmos.bank.v1beta1.MsgSend", "/gonka.bls.v1.BeaconTx"]
        .into_iter()
        .chain(GONKA_MESSAGES.iter().map(|(url, _)| *url))
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Name;

    #[test]
    fn every_module_message_is_rendered_with_its_type() {
        assert!(
            type_urls().count() >= 29,
            "{:?}",
            type_urls().collect::<Vec<_>>()
        );
        let send = crate::bank::MsgSend {
            from_address: "gonka1a".into(),
            to_address: "gonka1b".into(),
            ..Default::default()
        };
        let url = format!("/{}", crate::bank::MsgSend::full_name());
        let json = to_json(&url, &send.encode_to_vec()).unwrap().unwrap();
        assert_eq!(json["@type"], url);
        assert_eq!(json["to_address"], "gonka1b");
        let unjail = format!("/{}", crate::stake::MsgUnjail::full_name());
        assert!(type_urls().any(|u| u == unjail));
    }

    #[test]
    fn unknown_types_and_bad_bytes_are_told_apart() {
        assert!(to_json("/gonka.bank.v1.MsgNothing", &[]).is_none());
        assert!(to_json("/cosmos.bank.v1beta1.MsgSend", &[0xff, 0xff])
            .unwrap()
            .is_err());
        let send = cosmos_sdk_proto::cosmos::bank::v1beta1::MsgSend {
            from_address: "gonka1a".into(),
            to_address: "gonka1b".into(),
            amount: vec![cosmos_sdk_proto::cosmos::base::v1beta1::Coin {
                denom: "ngnk".into(),
                amount: "5".into(),
            }],
        };
        let json = to_json("/cosmos.bank.v1beta1.MsgSend", &send.encode_to_vec())
            .unwrap()
            .unwrap();
        assert_eq!(json["amount"][0]["amount"], "5");
    }
}
