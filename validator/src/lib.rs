//! gonka-validator: the validation worker. It re-executes the work records the chain assigns
//! to this participant and reports what it found (see x/disputes); [`cli`] is its command
//! line (`gonka-sidecar validator`).
//!
//! Every poll it asks the chain for its pending work (`/disputes/pending`): validations of
//! sampled records (answered with `MsgSubmitValidation`) and seats on dispute committees
//! (answered with `MsgVoteDispute`). For each item not handled yet it
//! 1. reads the work record (`/inference/record`) and the URL of the transfer agent that
//!    submitted it (`/inference/transfer_agents`);
//! 2. fetches the request body from that TA with a signed `GET /v1/payloads/{inference_id}`
//!    ([`gonka_client::payload_auth`]);
//! 3. checks SHA-256(body) = the record's `prompt_hash`; a body that does not match is
//!    evidence against the record, not re-executed, and answered with SHA-256 of the bytes
//!    received (which no honest completion hashes to);
//! 4. re-executes the body on its own ML node (`POST /v1/chat/completions` with `stream`
//!    forced to false, which does not change the text of the deterministic reference model);
//! 5. compares ([`Compare`]) and submits its result hash (SHA-256 of
//!    `choices[0].message.content`, as [`gonka_client::receipt::response_hash`]).
//!
//! Handled items are remembered in memory so each is answered once. A failure to reach the
//! chain, the TA or the ML node is logged and retried at the next poll; a refusal by the
//! chain (e.g. past the deadline) is logged and not retried.

pub mod cli;

use gonka_proto::query as q;
use std::collections::BTreeSet;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use gonka_client::disputes::{msg_submit_validation, msg_vote_dispute};
use gonka_client::payload_auth::sign_payload_request;
use gonka_client::request::body_hash;
use gonka_client::{Any, Key, TxRejected};
use gonka_proto::disputes as dpb;
use gonka_proto::inference as ipb;
use sha2::{Digest, Sha256};

use gonka_client::http as upstream;
use gonka_client::receipt::response_hash;
use gonka_client::{unix_now, Chain};
use Finding::{Match, Mismatch, TamperedPayload};

/// Pending-work kind answered with `MsgSubmitValidation`.
pub const KIND_VALIDATION: &str = "validation";
/// Pending-work kind answered with `MsgVoteDispute`.
pub const KIND_DISPUTE: &str = "dispute";

/// How the validator's own completion is compared with the executor's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compare {
    /// The texts must be identical (the deterministic reference model): the result hash is
    /// SHA-256 of the validator's own text, which the chain compares with the record's.
    Exact,
    /// For a real upstream model: the first `N` characters of both texts must agree; then the
    /// validator vouches for the executor's text by submitting its hash. This needs the
    /// executor's text; when it is not known the comparison is exact. (A top-k log-prob
    /// comparison needs logprobs from the upstream and is not done.)
    Prefix(usize),
}

impl std::str::FromStr for Compare {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.split_once(':') {
            None if s == "exact" => Ok(Compare::Exact),
            Some(("prefix", n)) => match n.parse::<usize>() {
                Ok(n) if n > 0 => Ok(Compare::Prefix(n)),
                _ => Err(format!(
                    "prefix:N needs a positive number of characters, found {n:?}"
                )),
            },
            _ => Err(format!("expected `exact` or `prefix:N`, found {s:?}")),
        }
    }
}

/// What the validator found about one record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finding {
    /// Its completion agrees with the executor's.
    Match,
    /// Its completion differs.
    Mismatch,
    /// The TA served a body whose SHA-256 is not the record's `prompt_hash`.
    TamperedPayload,
}

/// The answer to one pending item.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// What was found.
    pub finding: Finding,
    /// The submitted result hash.
    pub result_hash: [u8; 32],
    /// `MsgSubmitValidation` or `MsgVoteDispute` carrying it.
    pub msg: Any,
}

/// Whether `payload` is the body the requester signed: SHA-256(payload) = `prompt_hash`.
pub fn payload_matches(record: &ipb::WorkRecord, payload: &[u8]) -> bool {
    body_hash(payload).as_slice() == record.prompt_hash
}

/// The pure part of the validator: how `validator` answers `work` on `record`, given the
/// `payload` the TA served, the validator's own completion text `own` (ignored when the
/// payload does not match the record) and, for [`Compare::Prefix`], the executor's text if
/// known (trusted only when it hashes to the record's `response_hash`).
pub fn decide(
    validator: &str,
    work: &dpb::PendingWork,
    record: &ipb::WorkRecord,
    payload: &[u8],
    own: &str,
    compare: Compare,
    executor_text: Option<&str>,
) -> Result<Decision> {
    let (finding, result_hash) = if !payload_matches(record, payload) {
        (TamperedPayload, Sha256::digest(payload).into())
    } else {
        let own_hash = response_hash(own);
        let vouched = match (compare, executor_text) {
            (Compare::Prefix(n), Some(theirs))
                if response_hash(theirs).as_slice() == record.response_hash =>
            {
                own.chars().take(n).eq(theirs.chars().take(n))
            }
            _ => own_hash.as_slice() == record.response_hash,
        };
        if vouched {
            let agreed: [u8; 32] = record.response_hash.as_slice().try_into().map_err(|_| {
                anyhow!(
                    "record {} has a response_hash of {} bytes, expected 32",
                    record.inference_id,
                    record.response_hash.len()
                )
            })?;
            (Match, agreed)
        } else {
            (Mismatch, own_hash)
        }
    };
    let msg = match work.kind.as_str() {
        KIND_VALIDATION => msg_submit_validation(validator, &work.inference_id, &result_hash),
        KIND_DISPUTE => msg_vote_dispute(validator, work.dispute_id, &result_hash),
        other => bail!(
            "pending work of kind {other:?} for {}: expected {KIND_VALIDATION:?} or {KIND_DISPUTE:?}; is the sidecar older than the chain?",
            work.inference_id
        ),
    };
    Ok(Decision {
        finding,
        result_hash,
        msg,
    })
}

/// Settings of a running validator.
#[derive(Debug, Clone)]
pub struct ValidatorConfig {
    /// `host:port` of the validator's own ML node.
    pub ml_node: String,
    /// Pause between polls of the chain.
    pub poll: Duration,
    /// How completions are compared.
    pub compare: Compare,
    /// Longest wait to connect to a transfer agent or the ML node.
    pub connect_timeout: Duration,
    /// Longest wait for a whole answer of a transfer agent or of the ML node (re-execution).
    pub request_timeout: Duration,
    /// Longest wait for an answer's inclusion in a block.
    pub inclusion_timeout: Duration,
}

/// Identifies one pending item across polls.
type ItemKey = (String, String, u64);

fn item_key(work: &dpb::PendingWork) -> ItemKey {
    (
        work.kind.clone(),
        work.inference_id.clone(),
        work.dispute_id,
    )
}

/// Why an item was not answered.
enum Failure {
    /// Try again at the next poll.
    Retry(anyhow::Error),
    /// The chain refused the answer: do not try again.
    Refused(String),
}

impl From<anyhow::Error> for Failure {
    fn from(e: anyhow::Error) -> Self {
        Failure::Retry(e)
    }
}

/// Polls the chain and answers the validator's pending work until the process ends.
pub async fn follow(chain: Chain, key: Key, config: ValidatorConfig) {
    let mut handled: BTreeSet<ItemKey> = BTreeSet::new();
    loop {
        match pending(&chain).await {
            Ok(work) => {
                // Items leave the pending list once answered or expired; forget those.
                let current: BTreeSet<ItemKey> = work.iter().map(item_key).collect();
                handled.retain(|k| current.contains(k));
                for item in work {
                    let k = item_key(&item);
                    if handled.contains(&k) {
                        continue;
                    }
                    match answer(&chain, &key, &config, &item).await {
                        Ok(()) => {
                            handled.insert(k);
                        }
                        Err(Failure::Refused(reason)) => {
                            tracing::error!(inference = %item.inference_id, kind = %item.kind, dispute = item.dispute_id, %reason, "the chain refused the answer; not retrying (past the deadline or already answered needs nothing; otherwise check --fee and the account's balance)");
                            handled.insert(k);
                        }
                        Err(Failure::Retry(e)) => {
                            tracing::warn!(inference = %item.inference_id, kind = %item.kind, error = %format!("{e:#}"), "cannot answer yet; retrying at the next poll");
                        }
                    }
                }
            }
            Err(e) => {
                tracing::warn!(error = %format!("{e:#}"), "cannot read pending work from the chain; is --chain-rpc reachable? retrying")
            }
        }
        tokio::time::sleep(config.poll).await;
    }
}

async fn pending(chain: &Chain) -> Result<Vec<dpb::PendingWork>> {
    chain
        .client()
        .query_all::<q::disputes::Pending>(dpb::QueryPendingRequest {
            validator: chain.address().to_string(),
            ..Default::default()
        })
        .await
}

/// Answers one item: fetch, check, re-execute, decide, submit.
async fn answer(
    chain: &Chain,
    key: &Key,
    config: &ValidatorConfig,
    work: &dpb::PendingWork,
) -> Result<(), Failure> {
    let stored = chain
        .client()
        .query::<q::inference::Record>(&ipb::QueryRecordRequest {
            inference_id: work.inference_id.clone(),
        })
        .await?
        .record
        .ok_or_else(|| anyhow!("the chain answered /inference/record without a record"))?;
    let record = stored
        .record
        .ok_or_else(|| anyhow!("the chain's stored record holds no work record"))?;
    let ta_url = chain
        .transfer_agents()
        .await?
        .into_iter()
        .find(|t| t.address == stored.transfer_agent)
        .map(|t| t.url)
        .ok_or_else(|| {
            anyhow!(
                "transfer agent {} of the record is not registered on chain any more",
                stored.transfer_agent
            )
        })?;
    let payload = fetch_payload(key, &ta_url, &work.inference_id, config).await?;
    let own = if payload_matches(&record, &payload) {
        reexecute(&config.ml_node, &payload, config).await?
    } else {
        tracing::warn!(inference = %work.inference_id, ta = %ta_url, "the transfer agent served a body whose SHA-256 is not the record's prompt_hash; answering with a mismatch");
        String::new()
    };
    let decision = decide(
        chain.address(),
        work,
        &record,
        &payload,
        &own,
        config.compare,
        None,
    )?;
    let included = match chain
        .submit(vec![decision.msg], config.inclusion_timeout)
        .await
    {
        Ok(included) => included,
        Err(e) => {
            return Err(match e.downcast_ref::<TxRejected>() {
                Some(r) if !r.is_sequence_mismatch() => Failure::Refused(r.to_string()),
                _ => Failure::Retry(e),
            })
        }
    };
    if included.code != 0 {
        return Err(Failure::Refused(format!(
            "{} {}: {}",
            included.codespace, included.code, included.log
        )));
    }
    let finding = match decision.finding {
        Match => "match",
        Mismatch => "mismatch",
        TamperedPayload => "tampered payload",
    };
    let result_hash = hex::encode(decision.result_hash);
    if work.kind == KIND_DISPUTE {
        tracing::info!(inference = %work.inference_id, dispute = work.dispute_id, finding, %result_hash, height = included.height, "voted");
    } else {
        tracing::info!(inference = %work.inference_id, finding, %result_hash, height = included.height, "validated");
    }
    Ok(())
}

/// One HTTP exchange with `authority` (`host:port`) within the configured timeouts: the
/// status and the whole body.
async fn exchange(
    authority: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
    config: &ValidatorConfig,
) -> Result<(u16, Vec<u8>)> {
    let call = async {
        let response = upstream::request_with_headers(
            authority,
            method,
            path,
            headers,
            body,
            upstream::Limits::connect(config.connect_timeout),
        )
        .await?;
        let status = response.status;
        Ok::<_, std::io::Error>((status, response.read_body().await?))
    };
    tokio::time::timeout(config.request_timeout, call)
        .await
        .map_err(|_| {
            anyhow!(
                "{method} http://{authority}{path} got no whole answer within {:?}",
                config.request_timeout
            )
        })?
        .with_context(|| format!("{method} http://{authority}{path}"))
}

/// `GET /v1/payloads/{inference_id}` from the TA at `ta_url`, signed by `key`.
async fn fetch_payload(
    key: &Key,
    ta_url: &str,
    inference_id: &str,
    config: &ValidatorConfig,
) -> Result<Vec<u8>> {
    let authority = upstream::authority(ta_url).map_err(|e| anyhow!("transfer agent URL {e}"))?;
    let headers = sign_payload_request(key, inference_id, unix_now())?;
    let headers: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
    let path = format!("/v1/payloads/{inference_id}");
    match exchange(&authority, "GET", &path, &headers, b"", config).await? {
        (200, body) => Ok(body),
        (status, body) => bail!(
            "the transfer agent at {ta_url} answered {status} for the payload of {inference_id}: {}",
            String::from_utf8_lossy(&body)
        ),
    }
}

/// The text the validator's own ML node at `ml_node` (`host:port`) generates for `payload`,
/// with `stream` forced to false.
async fn reexecute(ml_node: &str, payload: &[u8], config: &ValidatorConfig) -> Result<String> {
    let mut request: serde_json::Value = serde_json::from_slice(payload)
        .context("the payload is not JSON; the record's request cannot be re-executed")?;
    let Some(fields) = request.as_object_mut() else {
        bail!("the payload is JSON but not an object {{model, messages, ...}}");
    };
    fields.insert("stream".into(), serde_json::Value::Bool(false));
    let body = serde_json::to_vec(&request).context("re-serializing the request")?;
    let (status, answer) = exchange(ml_node, "POST", "/v1/chat/completions", &[], &body, config)
        .await
        .context("re-executing on the ML node; is --ml-node running?")?;
    if status != 200 {
        bail!(
            "the ML node at {ml_node} answered {status}: {}",
            String::from_utf8_lossy(&answer)
        );
    }
    let completion: serde_json::Value = serde_json::from_slice(&answer)
        .with_context(|| format!("the ML node at {ml_node} answered something that is not JSON"))?;
    completion["choices"][0]["message"]["content"]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| {
            anyhow!("the ML node at {ml_node} answered without choices[0].message.content")
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use gonka_proto::disputes::{MsgSubmitValidation, MsgVoteDispute};
    use prost::Message;

    const PAYLOAD: &[u8] = br#"{"model":"m","messages":[{"role":"user","content":"hi"}]}"#;

    fn record(executor_text: &str) -> ipb::WorkRecord {
        ipb::WorkRecord {
            inference_id: "ab".into(),
            prompt_hash: body_hash(PAYLOAD).to_vec(),
            response_hash: response_hash(executor_text).to_vec(),
            ..ipb::WorkRecord::default()
        }
    }

    fn work(kind: &str) -> dpb::PendingWork {
        dpb::PendingWork {
            kind: kind.into(),
            inference_id: "ab".into(),
            dispute_id: 7,
            ..dpb::PendingWork::default()
        }
    }

    fn validation_hash(msg: &Any) -> Vec<u8> {
        assert_eq!(msg.type_url, "/gonka.disputes.v1.MsgSubmitValidation");
        let m = MsgSubmitValidation::decode(msg.value.as_slice()).unwrap();
        assert_eq!((m.validator.as_str(), m.inference_id.as_str()), ("v", "ab"));
        m.result_hash
    }

    #[test]
    fn exact_comparison_submits_its_own_hash() {
        let rec = record("hello");
        let d = decide(
            "v",
            &work(KIND_VALIDATION),
            &rec,
            PAYLOAD,
            "hello",
            Compare::Exact,
            None,
        )
        .unwrap();
        assert_eq!(d.finding, Match);
        assert_eq!(validation_hash(&d.msg), response_hash("hello"));

        let d = decide(
            "v",
            &work(KIND_VALIDATION),
            &rec,
            PAYLOAD,
            "olleh",
            Compare::Exact,
            None,
        )
        .unwrap();
        assert_eq!(d.finding, Mismatch);
        assert_eq!(validation_hash(&d.msg), response_hash("olleh"));
    }

    #[test]
    fn dispute_seats_vote() {
        let d = decide(
            "v",
            &work(KIND_DISPUTE),
            &record("x"),
            PAYLOAD,
            "y",
            Compare::Exact,
            None,
        )
        .unwrap();
        assert_eq!(d.msg.type_url, "/gonka.disputes.v1.MsgVoteDispute");
        let m = MsgVoteDispute::decode(d.msg.value.as_slice()).unwrap();
        assert_eq!((m.voter.as_str(), m.dispute_id), ("v", 7));
        assert_eq!(m.result_hash, response_hash("y"));
        assert!(decide(
            "v",
            &work("other"),
            &record("x"),
            PAYLOAD,
            "x",
            Compare::Exact,
            None
        )
        .is_err());
    }

    #[test]
    fn a_body_that_is_not_the_signed_one_is_a_mismatch() {
        let tampered = br#"{"model":"m","messages":[]}"#;
        let d = decide(
            "v",
            &work(KIND_VALIDATION),
            &record("x"),
            tampered,
            "x",
            Compare::Exact,
            None,
        )
        .unwrap();
        assert_eq!(d.finding, TamperedPayload);
        let hash = validation_hash(&d.msg);
        assert_eq!(hash, Sha256::digest(tampered).to_vec());
        assert_ne!(hash, response_hash("x"));
    }

    #[test]
    fn prefix_comparison_vouches_for_a_close_executor_text() {
        let rec = record("the cat sat");
        let close = Compare::Prefix(7);
        let d = decide(
            "v",
            &work(KIND_VALIDATION),
            &rec,
            PAYLOAD,
            "the cat ran",
            close,
            Some("the cat sat"),
        )
        .unwrap();
        assert_eq!(d.finding, Match);
        assert_eq!(validation_hash(&d.msg), response_hash("the cat sat"));
        let d = decide(
            "v",
            &work(KIND_VALIDATION),
            &rec,
            PAYLOAD,
            "a dog ran",
            close,
            Some("the cat sat"),
        )
        .unwrap();
        assert_eq!(d.finding, Mismatch);
        // An executor text that is not the recorded one is not trusted: exact comparison.
        let d = decide(
            "v",
            &work(KIND_VALIDATION),
            &rec,
            PAYLOAD,
            "the cat ran",
            close,
            Some("the cat ran"),
        )
        .unwrap();
        assert_eq!(d.finding, Mismatch);
        let d = decide(
            "v",
            &work(KIND_VALIDATION),
            &rec,
            PAYLOAD,
            "the cat ran",
            close,
            None,
        )
        .unwrap();
        assert_eq!(d.finding, Mismatch);
    }

    #[test]
    fn compare_modes_parse() {
        assert_eq!("exact".parse::<Compare>(), Ok(Compare::Exact));
        assert_eq!("prefix:32".parse::<Compare>(), Ok(Compare::Prefix(32)));
        assert!("prefix:0".parse::<Compare>().is_err());
        assert!("prefix:x".parse::<Compare>().is_err());
        assert!("topk".parse::<Compare>().is_err());
    }
}
