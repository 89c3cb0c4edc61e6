//! `--output text|json` rendering.

use serde_json::Value;

/// Output format of a command.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    /// Lines for people.
    Text,
    /// One JSON document for programs.
    Json,
}

impl Output {
    /// Prints `json` as JSON, or `text` lines for people.
    pub fn print(self, json: Value, text: impl FnOnce() -> String) {
        match self {
            Output::Json => println!(
                "{}",
                serde_json::to_string_pretty(&json).expect("JSON values serialise")
            ),
            Output::Text => println!("{}", text()),
        }
    }
}

/// Byte fields that hold keys people copy: base64 in JSON (serde would write an array of
/// numbers), the form CometBFT's key files and `--consensus-key` use.
/// A list page's `next_key` is base64 too, the form `--page-key` takes.
const BASE64_FIELDS: &[&str] = &["consensus_pubkey", "next_key"];

/// Byte fields of the inference module: lowercase hex in JSON, the form `--pubkey` takes
/// and inference ids (the hex of `request_hash`) use.
const HEX_FIELDS: &[&str] = &[
    "pubkey",
    "requester_pubkey",
    "requester_signature",
    "request_hash",
    "prompt_hash",
    "output_commitment",
    "executor_signature",
    "key_proof",
    "group_pubkey",
    "group_commitments",
];

/// A protobuf message as JSON with its .proto field names; the byte fields of
/// `BASE64_FIELDS` become base64 strings and those of `HEX_FIELDS` hex strings.
pub fn to_json<T: serde::Serialize>(message: &T) -> Value {
    fn fix(value: &mut Value) {
        match value {
            Value::Object(map) => {
                for (name, field) in map.iter_mut() {
                    let encode: Option<fn(&[u8]) -> String> =
                        if BASE64_FIELDS.contains(&name.as_str()) {
                            Some(crate::b64::encode)
                        } else if HEX_FIELDS.contains(&name.as_str()) {
                            Some(|bytes| hex::encode(bytes))
                        } else {
                            None
                        };
                    let bytes: Option<Vec<u8>> = match (field as &Value, encode) {
                        (Value::Array(items), Some(_)) => items
                            .iter()
                            .map(|b| b.as_u64().and_then(|b| u8::try_from(b).ok()))
                            .collect(),
                        _ => None,
                    };
                    match (bytes, encode) {
                        (Some(bytes), Some(encode)) => *field = Value::String(encode(&bytes)),
                        _ => fix(field),
                    }
                }
            }
            Value::Array(items) => items.iter_mut().for_each(fix),
            _ => {}
        }
    }
    let mut value = serde_json::to_value(message).expect("protobuf messages serialise");
    fix(&mut value);
    value
}

/// `name: value` lines.
pub fn fields(rows: &[(&str, String)]) -> String {
    rows.iter()
        .map(|(name, value)| format!("{name}: {value}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `items` rendered by `each`, separated by blank lines; `empty` when there are none.
pub fn list<T>(items: &[T], empty: &str, each: impl Fn(&T) -> String) -> String {
    if items.is_empty() {
        return empty.to_string();
    }
    items.iter().map(each).collect::<Vec<_>>().join("\n\n")
}

/// `parts` per `per` (a power of ten, e.g. 1_000_000 for ppm) with its percentage:
/// `250000 (25%)`. Exact, no floats.
pub fn percent(parts: u64, per: u64) -> String {
    let unit = (per / 100).max(1);
    let decimals = unit.ilog10() as usize;
    let mut share = format!("{}", parts / unit);
    if decimals > 0 {
        let fraction = format!("{:0decimals$}", parts % unit);
        let fraction = fraction.trim_end_matches('0');
        if !fraction.is_empty() {
            share = format!("{share}.{fraction}");
        }
    }
    format!("{parts} ({share}%)")
}

/// Unix seconds with their UTC date: `1700000000 (2023-11-14T22:13:20Z)`; `0` is unknown.
pub fn unix_time(seconds: i64) -> String {
    match tendermint::Time::from_unix_timestamp(seconds, 0) {
        Ok(time) if seconds > 0 => format!("{seconds} ({})", time.to_rfc3339()),
        _ => seconds.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_shows_keys_as_base64() {
        let participant = gonka_proto::stake::Participant {
            operator: "gonka1op".into(),
            consensus_pubkey: vec![7; 32],
            bonded: "5".into(),
            ..Default::default()
        };
        let json = to_json(&gonka_proto::stake::QueryParticipantsResponse {
            participants: vec![participant, Default::default()],
            pagination: Some(gonka_proto::base::PageResponse {
                next_key: b"gonka1op".to_vec(),
            }),
        });
        assert_eq!(
            json["participants"][0]["consensus_pubkey"],
            "BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc="
        );
        assert_eq!(json["participants"][0]["bonded"], "5");
        assert_eq!(json["participants"][1]["consensus_pubkey"], "");
        assert_eq!(json["pagination"]["next_key"], "Z29ua2Exb3A=");
    }

    #[test]
    fn json_shows_inference_bytes_as_hex() {
        use gonka_proto::inference::{
            Node, QueryNodesResponse, QueryRecordResponse, StoredRecord, WorkRecord,
        };
        let json = to_json(&QueryNodesResponse {
            nodes: vec![Node {
                id: "n1".into(),
                models: vec!["m".into()],
                pubkey: vec![2, 0xab, 0xff],
                ..Default::default()
            }],
            ..Default::default()
        });
        assert_eq!(json["nodes"][0]["pubkey"], "02abff");
        assert_eq!(json["nodes"][0]["models"][0], "m");
        let record = WorkRecord {
            request_hash: vec![0xab; 32],
            requester_pubkey: vec![3; 33],
            requester_signature: vec![1; 64],
            prompt_hash: vec![0; 32],
            output_commitment: vec![0x10; 32],
            executor_signature: vec![],
            prompt_tokens: 7,
            ..Default::default()
        };
        let json = to_json(&QueryRecordResponse {
            record: Some(StoredRecord {
                record: Some(record),
                epoch: 4,
                ..Default::default()
            }),
        });
        let r = &json["record"]["record"];
        assert_eq!(r["request_hash"], "ab".repeat(32));
        assert_eq!(r["requester_pubkey"], "03".repeat(33));
        assert_eq!(r["requester_signature"], "01".repeat(64));
        assert_eq!(r["prompt_hash"], "00".repeat(32));
        assert_eq!(r["output_commitment"], "10".repeat(32));
        assert_eq!(r["executor_signature"], "");
        assert_eq!(r["prompt_tokens"], 7);
        assert_eq!(json["record"]["epoch"], 4);
    }

    #[test]
    fn renders_text() {
        assert_eq!(percent(250_000, 1_000_000), "250000 (25%)");
        assert_eq!(percent(1, 1_000_000), "1 (0.0001%)");
        assert_eq!(
            percent(123_456_789, 1_000_000_000),
            "123456789 (12.3456789%)"
        );
        assert_eq!(percent(0, 1_000_000), "0 (0%)");
        assert_eq!(unix_time(0), "0");
        assert_eq!(
            unix_time(1_700_000_000),
            "1700000000 (2023-11-14T22:13:20Z)"
        );
        assert_eq!(
            fields(&[("a", "1".into()), ("b", "x".into())]),
            "a: 1\nb: x"
        );
        assert_eq!(list(&[1, 2], "none", |n| n.to_string()), "1\n\n2");
        assert_eq!(list::<u8>(&[], "none", |n| n.to_string()), "none");
    }
}
