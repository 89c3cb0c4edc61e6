//! A tx's messages as JSON, by type URL: what explorers and the REST `GetTx` show of a tx,
//! and the way back for clients that post a tx as JSON (the REST `Simulate`).
//! Every gonka `Msg*` is listed by the build script from the .proto files, so a new message
//! is decoded without touching this file; the Cosmos bank `MsgSend` wallets sign and the
//! `BeaconTx` a proposer puts first in its block (which the node's API shows as a tx's one
//! message) are added here. Byte fields come out as serde renders them (arrays of numbers); callers that show
//! them to people re-encode them, as `gonkad --output json` does.

use prost::Message;
use serde_json::{json, Value};

/// Renders a message's protobuf bytes as JSON.
type Renderer = fn(&[u8]) -> Result<Value, String>;
/// Encodes a message from its JSON fields (proto-JSON's lowerCamelCase names or the .proto
/// snake_case ones).
type Parser = fn(Value) -> Result<Vec<u8>, String>;

include!(concat!(env!("OUT_DIR"), "/tx_messages.rs"));

/// [`Renderer`] of a gonka message type.
pub(crate) fn json_of<M: Message + Default + serde::Serialize>(
    bytes: &[u8],
) -> Result<Value, String> {
    let message = M::decode(bytes).map_err(|e| e.to_string())?;
    serde_json::to_value(&message).map_err(|e| e.to_string())
}

/// [`Parser`] of a gonka message type: its fields as serde reads them (byte fields as arrays
/// of numbers, as [`json_of`] writes them).
pub(crate) fn from_json_of<M: Message + serde::de::DeserializeOwned>(
    json: Value,
) -> Result<Vec<u8>, String> {
    serde_json::from_value::<M>(snake_case_keys(json))
        .map(|m| m.encode_to_vec())
        .map_err(|e| e.to_string())
}

/// `json` with every field name in snake_case (`fromAddress` → `from_address`). Keys that
/// start with a capital letter are not field names but the variant of a oneof as serde
/// writes it (`"kind": {"SumMismatch": {...}}`), and stay as they are.
fn snake_case_keys(json: Value) -> Value {
    match json {
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(key, value)| {
                    if key.starts_with(|c: char| c.is_ascii_uppercase()) {
                        return (key, snake_case_keys(value));
                    }
                    let mut snake = String::with_capacity(key.len() + 4);
                    for c in key.chars() {
                        if c.is_ascii_uppercase() {
                            snake.push('_');
                            snake.push(c.to_ascii_lowercase());
                        } else {
                            snake.push(c);
                        }
                    }
                    (snake, snake_case_keys(value))
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.into_iter().map(snake_case_keys).collect()),
        other => other,
    }
}

/// `cosmos.bank.v1beta1.MsgSend` read from JSON.
fn cosmos_send_from_json(json: Value) -> Result<Vec<u8>, String> {
    let json = snake_case_keys(json);
    let text = |name: &str| {
        json[name]
            .as_str()
            .map(str::to_string)
            .ok_or(format!("MsgSend has no {name}"))
    };
    let amount = json["amount"]
        .as_array()
        .ok_or("MsgSend has no amount")?
        .iter()
        .map(|c| {
            Ok(cosmos_sdk_proto::cosmos::base::v1beta1::Coin {
                denom: c["denom"].as_str().ok_or("a coin has no denom")?.into(),
                amount: c["amount"]
                    .as_str()
                    .ok_or("a coin's amount is not a string")?
                    .into(),
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    Ok(cosmos_sdk_proto::cosmos::bank::v1beta1::MsgSend {
        from_address: text("from_address")?,
        to_address: text("to_address")?,
        amount,
    }
    .encode_to_vec())
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
        _ => {
            GONKA_MESSAGES
                .iter()
                .find(|(url, _, _)| *url == type_url)?
                .1
        }
    };
    Some(render(value).map(|mut json| {
        if let Value::Object(fields) = &mut json {
            fields.insert("@type".into(), Value::String(type_url.into()));
        }
        json
    }))
}

/// The protobuf bytes of a tx message from its JSON fields (without `@type`); `None` for a
/// type URL no module accepts.
pub fn from_json(type_url: &str, fields: Value) -> Option<Result<Vec<u8>, String>> {
    let parse: Parser = match type_url {
        "/cosmos.bank.v1beta1.MsgSend" => cosmos_send_from_json,
        _ => {
            GONKA_MESSAGES
                .iter()
                .find(|(url, _, _)| *url == type_url)?
                .2
        }
    };
    Some(parse(fields))
}

/// The type URLs [`to_json`] renders.
pub fn type_urls() -> impl Iterator<Item = &'static str> {
    ["/cosmos.bank.v1beta1.MsgSend", "/gonka.bls.v1.BeaconTx"]
        .into_iter()
        .chain(GONKA_MESSAGES.iter().map(|(url, _, _)| *url))
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

    /// Found by fuzzing (fuzz/ `msgs`): a message with a oneof (a batch challenge) rendered
    /// as `"kind": {"SumMismatch": ...}` did not parse back, its variant name having been
    /// snake-cased as if it were a field (`_sum_mismatch`).
    #[test]
    fn a_oneof_variant_reads_back_from_its_own_json() {
        use crate::settlement::{msg_challenge_batch::Kind, MsgChallengeBatch, SumMismatch};
        let challenge = MsgChallengeBatch {
            challenger: "gonka1a".into(),
            batch_id: 3,
            kind: Some(Kind::SumMismatch(SumMismatch::default())),
        };
        let url = format!("/{}", MsgChallengeBatch::full_name());
        let mut json = to_json(&url, &challenge.encode_to_vec()).unwrap().unwrap();
        assert!(json["kind"]["SumMismatch"].is_object(), "{json}");
        json.as_object_mut().unwrap().remove("@type");
        let bytes = from_json(&url, json).unwrap().unwrap();
        assert_eq!(
            MsgChallengeBatch::decode(bytes.as_slice()).unwrap(),
            challenge
        );
        // Field names inside the variant are still read in lowerCamelCase.
        let camel = json!({"batchId": 4, "kind": {"Unsorted": {}}});
        let bytes = from_json(&url, camel).unwrap().unwrap();
        let read = MsgChallengeBatch::decode(bytes.as_slice()).unwrap();
        assert_eq!(read.batch_id, 4);
        assert!(matches!(read.kind, Some(Kind::Unsorted(_))), "{read:?}");
    }

    #[test]
    fn messages_read_back_from_proto_json_and_from_their_own_json() {
        let camel = json!({"fromAddress": "gonka1a", "toAddress": "gonka1b", "amount": [{"denom": "ngnk", "amount": "5"}]});
        let bytes = from_json("/cosmos.bank.v1beta1.MsgSend", camel)
            .unwrap()
            .unwrap();
        let send =
            cosmos_sdk_proto::cosmos::bank::v1beta1::MsgSend::decode(bytes.as_slice()).unwrap();
        assert_eq!(
            (send.to_address.as_str(), send.amount[0].amount.as_str()),
            ("gonka1b", "5")
        );
        assert!(
            from_json("/cosmos.bank.v1beta1.MsgSend", json!({"toAddress": "x"}))
                .unwrap()
                .is_err()
        );

        let unjail = crate::stake::MsgUnjail {
            operator: "gonka1a".into(),
        };
        let url = format!("/{}", crate::stake::MsgUnjail::full_name());
        let json = to_json(&url, &unjail.encode_to_vec()).unwrap().unwrap();
        let bytes = from_json(&url, json).unwrap().unwrap();
        assert_eq!(
            crate::stake::MsgUnjail::decode(bytes.as_slice()).unwrap(),
            unjail
        );
        assert!(from_json("/gonka.stake.v1.MsgNothing", json!({})).is_none());
    }
}
