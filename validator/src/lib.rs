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
//!    ([`gonka_client::payload_auth`]); a TA that is no longer registered or answers 404 is
//!    reported (`payload_unavailable`), and a committee decides whether it withheld the body;
//! 3. checks SHA-256(body) = the record's `prompt_hash`; a body that does not match is
//!    evidence against the record, not re-executed, and answered with SHA-256 of the bytes
//!    received (which no honest completion hashes to);
//! 4. re-executes the body on its own ML node (`POST /v1/chat/completions` with `stream`
//!    forced to false, which does not change the text of the deterministic reference model,
//!    and `max_tokens` set to the record's signed `max_completion_tokens`);
//! 5. commits its result ([`decide`]): `gonka/result/v1` over its address, the SHA-256 of
//!    `choices[0].message.content` ([`gonka_client::receipt::response_hash`]) and the prompt
//!    and completion tokens its node counted. It never sees the executor's answer: the
//!    record holds only a salted commitment, and the transfer agent reveals the salt and
//!    answer on chain after this commit, when the chain compares (so inflated counts are
//!    caught like wrong answers, and a validator that does not re-execute cannot match).
//!    Comparison is exact for "exact" models (the deterministic reference model and
//!    runtimes as bit-exact as gonka-llm's).
//!
//! A model the chain validates by log-probabilities (`Model.validation = "logprobs"`) is
//! not re-executed but scored: the TA serves the executor's output tokens with the body
//! (checked to open the record's commitment with the seal served beside them, see
//! [`gonka_client::payload_auth`]); the validator's ML node scores exactly those tokens after
//! the prompt in one teacher-forced pass ([`gonka_client::score`]) and the validator submits its
//! scores, which the chain compares with the executor's once they are revealed. A TA that
//! serves no tokens, tokens that do not open the commitment, or a body that is not the signed
//! one is reported as withholding the payload.
//!
//! Handled items are remembered in memory so each is answered once. A failure to reach the
//! chain, the TA or the ML node is logged and retried at the next poll; a refusal by the
//! chain (e.g. past the deadline) is logged and not retried.

pub mod cli;
pub mod dkg;
pub mod metrics;

use gonka_proto::query as q;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use gonka_client::disputes::{
    msg_report_payload_unavailable, msg_submit_validation, msg_vote_dispute,
    msg_vote_payload_unavailable, ReExecution,
};
use gonka_client::node_call::sign_node_call;
use gonka_client::payload_auth::{output_from_headers, sign_payload_request};
use gonka_client::request::body_hash;
use gonka_client::{Any, Key, TxOutcome};
use gonka_proto::disputes as dpb;
use gonka_proto::inference as ipb;
use sha2::{Digest, Sha256};

use gonka_client::http as upstream;
use gonka_client::receipt::response_hash;
use gonka_client::score::{request_score, ScoreRequest};
use gonka_client::{unix_now, Chain};
use metrics::Outcome;
use Finding::{Committed, TamperedPayload};

/// Pending-work kind answered with `MsgSubmitValidation`.
pub const KIND_VALIDATION: &str = "validation";
/// Pending-work kind answered with `MsgVoteDispute`.
pub const KIND_DISPUTE: &str = "dispute";

/// What the validator found about one record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finding {
    /// It re-executed the request; its result is committed (the chain compares it with the
    /// executor's once the output is revealed).
    Committed,
    /// The TA served a body whose SHA-256 is not the record's `prompt_hash`.
    TamperedPayload,
}

/// The answer to one pending item.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// What was found.
    pub finding: Finding,
    /// The submitted result.
    pub found: ReExecution,
    /// `MsgSubmitValidation` or `MsgVoteDispute` carrying it.
    pub msg: Any,
}

/// What the validator's own ML node produced for a record's request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnAnswer {
    /// `choices[0].message.content`.
    pub text: String,
    /// Its `usage.prompt_tokens`.
    pub prompt_tokens: u64,
    /// Its `usage.completion_tokens`.
    pub completion_tokens: u64,
}

/// Whether `payload` is the body the requester signed: SHA-256(payload) = `prompt_hash`.
pub fn payload_matches(record: &ipb::WorkRecord, payload: &[u8]) -> bool {
    body_hash(payload).as_slice() == record.prompt_hash
}

/// The pure part of the validator: how `validator` answers `work` on `record`, given the
/// `payload` the TA served and the validator's `own` answer (ignored when the payload does
/// not match the record). The validator never sees the executor's answer before it
/// commits: it commits its own result (`gonka/result/v1`, bound to its address) and the
/// chain compares once the transfer agent reveals the output.
pub fn decide(
    validator: &str,
    work: &dpb::PendingWork,
    record: &ipb::WorkRecord,
    payload: &[u8],
    own: &OwnAnswer,
) -> Result<Decision> {
    let (finding, found) = if payload_matches(record, payload) {
        let own_result = ReExecution {
            result_hash: response_hash(&own.text),
            prompt_tokens: own.prompt_tokens,
            completion_tokens: own.completion_tokens,
        };
        (Committed, own_result)
    } else {
        // Evidence against the record: SHA-256 of the bytes received, which no honest
        // completion hashes to.
        let evidence = ReExecution {
            result_hash: Sha256::digest(payload).into(),
            prompt_tokens: 0,
            completion_tokens: 0,
        };
        (TamperedPayload, evidence)
    };
    let msg = answer_msg(validator, work, (&found).into())?;
    Ok(Decision {
        finding,
        found,
        msg,
    })
}

/// The message answering `work` with `found`: `MsgSubmitValidation` for a validation,
/// `MsgVoteDispute` for a committee seat.
pub fn answer_msg(
    validator: &str,
    work: &dpb::PendingWork,
    found: gonka_client::disputes::Finding<'_>,
) -> Result<Any> {
    Ok(match work.kind.as_str() {
        KIND_VALIDATION => msg_submit_validation(validator, &work.inference_id, found),
        KIND_DISPUTE => msg_vote_dispute(validator, work.dispute_id, found),
        other => bail!(
            "pending work of kind {other:?} for {}: expected {KIND_VALIDATION:?} or {KIND_DISPUTE:?}; is the sidecar older than the chain?",
            work.inference_id
        ),
    })
}

/// Settings of a running validator.
#[derive(Debug, Clone)]
pub struct ValidatorConfig {
    /// `host:port` of each of the validator's own ML nodes; a record is re-executed on the
    /// first one serving its model.
    pub ml_nodes: Vec<String>,
    /// Pause between polls of the chain.
    pub poll: Duration,
    /// Longest wait to connect to a transfer agent or the ML node.
    pub connect_timeout: Duration,
    /// Longest wait for a whole answer of a transfer agent or of the ML node (re-execution).
    pub request_timeout: Duration,
    /// Longest wait for an answer's inclusion in a block.
    pub inclusion_timeout: Duration,
    /// The directory of the validator's BLS key and key generation secrets ([`dkg`]); no
    /// key generation without one.
    pub bls_dir: Option<std::path::PathBuf>,
    /// Where to count what it does ([`metrics`]), when its metrics are served.
    pub metrics: Option<std::sync::Arc<metrics::ValidatorMetrics>>,
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
    // The own ML nodes' ids and models, asked once (calls are signed for a node's id).
    let mut nodes = OwnNodes::default();
    let mut keygen = config.bls_dir.as_deref().and_then(|dir| {
        dkg::DkgParticipant::open(dir, &key)
            .map_err(|e| tracing::error!(dir = %dir.display(), error = %format!("{e:#}"), "cannot open the BLS key directory; this validator takes no part in key generation"))
            .ok()
    });
    loop {
        match pending(&chain).await {
            Ok(work) => {
                if let Some(m) = &config.metrics {
                    m.pending(work.len());
                }
                // Items leave the pending list once answered or expired; forget those.
                let current: BTreeSet<ItemKey> = work.iter().map(item_key).collect();
                handled.retain(|k| current.contains(k));
                for item in work {
                    let k = item_key(&item);
                    if handled.contains(&k) {
                        continue;
                    }
                    let answered = answer(&chain, &key, &config, &mut nodes, &item).await;
                    if let Some(m) = &config.metrics {
                        let outcome = match &answered {
                            Ok(()) => Outcome::Included,
                            Err(Failure::Refused(_)) => Outcome::Refused,
                            Err(Failure::Retry(_)) => Outcome::Retry,
                        };
                        m.answer(&item.kind, outcome);
                    }
                    match answered {
                        Ok(()) => {
                            handled.insert(k);
                        }
                        Err(Failure::Refused(reason)) => {
                            tracing::error!(inference = %item.inference_id, kind = %item.kind, dispute = item.dispute_id, %reason, "the chain refused the answer; not retrying (past the deadline or already answered needs nothing; otherwise check the account's balance, which pays each tx's gas)");
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
        if let Some(m) = &config.metrics {
            match reputation(&chain).await {
                Ok(Some(reputation)) => m.reputation(&reputation),
                Ok(None) => {}
                Err(e) => {
                    tracing::debug!(error = %format!("{e:#}"), "cannot read this validator's reputation for its metrics")
                }
            }
        }
        if let Some(participant) = keygen.as_mut() {
            if let Err(e) = participant.step(&chain, config.inclusion_timeout).await {
                tracing::warn!(error = %format!("{e:#}"), "key generation step failed; retrying at the next poll");
            }
        }
        tokio::time::sleep(config.poll).await;
    }
}

/// The chain's record of this validator's answers in time and missed deadlines.
async fn reputation(chain: &Chain) -> Result<Option<dpb::Reputation>> {
    let stats = chain
        .client()
        .query::<q::disputes::Stats>(&dpb::QueryStatsRequest {
            address: chain.address().to_string(),
        })
        .await?;
    Ok(stats.reputation)
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
    nodes: &mut OwnNodes,
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
        .map(|t| t.url);
    let logprob_top_k = chain
        .models()
        .await?
        .into_iter()
        .find(|m| m.id == record.model && m.validation == "logprobs")
        .map(|m| m.logprob_top_k);
    let payload = match &ta_url {
        Some(url) => fetch_payload(key, url, &record, config).await?,
        None => None,
    };
    // A "logprobs" record is scored over the executor's committed tokens: a TA that does not
    // serve them (or serves a body that is not the signed one) withholds what validation
    // needs.
    let payload = payload.filter(|p| {
        logprob_top_k.is_none() || (p.tokens.is_some() && payload_matches(&record, &p.body))
    });
    let Some(payload) = payload else {
        // The transfer agent is gone or says it no longer has the body it must keep for the
        // whole challenge window: report it (a committee checks) instead of missing the
        // deadline, which would be this validator's fault.
        tracing::warn!(inference = %work.inference_id, transfer_agent = %stored.transfer_agent, "the transfer agent does not serve the request body; reporting it");
        let msg = match work.kind.as_str() {
            KIND_DISPUTE => msg_vote_payload_unavailable(chain.address(), work.dispute_id),
            _ => msg_report_payload_unavailable(chain.address(), &work.inference_id),
        };
        return submit_answer(chain, config, vec![msg]).await.map(|height| {
            tracing::info!(inference = %work.inference_id, height, "reported the payload unavailable");
        });
    };
    if let (Some(top_k), Some(tokens)) = (logprob_top_k, &payload.tokens) {
        let (ml_node, node_id) = nodes.serving(&record.model, config).await?;
        let scored = score(
            key,
            &ml_node,
            &node_id,
            &payload.body,
            tokens,
            top_k,
            config,
        )
        .await
        .inspect_err(|_| nodes.forget(&ml_node))?;
        let msg = answer_msg(chain.address(), work, (&scored).into())?;
        let height = submit_answer(chain, config, vec![msg]).await?;
        tracing::info!(inference = %work.inference_id, kind = %work.kind, positions = scored.positions.len(), height, "submitted scores");
        return Ok(());
    }
    let payload = payload.body;
    let ta_url = ta_url.unwrap_or_default();
    let own = if payload_matches(&record, &payload) {
        let (ml_node, node_id) = nodes.serving(&record.model, config).await?;
        let own = reexecute(
            key,
            &ml_node,
            &node_id,
            &payload,
            record.max_completion_tokens,
            config,
        )
        .await;
        if own.is_err() {
            // Perhaps restarted under another id or model: ask again next time.
            nodes.forget(&ml_node);
        }
        own?
    } else {
        tracing::warn!(inference = %work.inference_id, ta = %ta_url, "the transfer agent served a body whose SHA-256 is not the record's prompt_hash; answering with a mismatch");
        OwnAnswer {
            text: String::new(),
            prompt_tokens: 0,
            completion_tokens: 0,
        }
    };
    let decision = decide(chain.address(), work, &record, &payload, &own)?;
    let height = submit_answer(chain, config, vec![decision.msg]).await?;
    let finding = match decision.finding {
        Committed => "committed",
        TamperedPayload => "tampered payload",
    };
    let result_hash = hex::encode(decision.found.result_hash);
    if work.kind == KIND_DISPUTE {
        tracing::info!(inference = %work.inference_id, dispute = work.dispute_id, finding, %result_hash, height, "voted");
    } else {
        tracing::info!(inference = %work.inference_id, finding, %result_hash, height, "validated");
    }
    Ok(())
}

/// Submits an answer and returns the height that included it; a refusal by the chain is
/// final, anything else is retried at the next poll.
async fn submit_answer(
    chain: &Chain,
    config: &ValidatorConfig,
    msgs: Vec<Any>,
) -> Result<u64, Failure> {
    match chain
        .submit_for_outcome(msgs, config.inclusion_timeout)
        .await
        .map_err(Failure::Retry)?
    {
        TxOutcome::Executed(included) => Ok(included.height),
        TxOutcome::Refused(reason) => Err(Failure::Refused(reason)),
    }
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
    let (status, _, body) =
        exchange_with_headers(authority, method, path, headers, body, config).await?;
    Ok((status, body))
}

/// [`exchange`], with the response's headers.
async fn exchange_with_headers(
    authority: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
    config: &ValidatorConfig,
) -> Result<(u16, Vec<(String, String)>, Vec<u8>)> {
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
        let headers = response.headers.clone();
        Ok::<_, std::io::Error>((status, headers, response.read_body().await?))
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

/// What a transfer agent served for a record.
struct Payload {
    /// The request body.
    body: Vec<u8>,
    /// For a "logprobs" record: the output tokens, checked to open the record's commitment
    /// (with the seal served beside them); `None` when the TA sent none or sent tokens that
    /// do not open it (then the record cannot be validated: the TA withholds its output).
    tokens: Option<Vec<u32>>,
}

/// `GET /v1/payloads/{inference_id}` from the TA at `ta_url`, signed by `key`: the body (and
/// a "logprobs" record's output tokens, checked against `record`), or `None` when the TA
/// answers 404 (it does not have it).
async fn fetch_payload(
    key: &Key,
    ta_url: &str,
    record: &ipb::WorkRecord,
    config: &ValidatorConfig,
) -> Result<Option<Payload>> {
    let inference_id = &record.inference_id;
    let authority = upstream::authority(ta_url).map_err(|e| anyhow!("transfer agent URL {e}"))?;
    let headers = sign_payload_request(key, inference_id, unix_now())?;
    let headers: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
    let path = format!("/v1/payloads/{inference_id}");
    match exchange_with_headers(&authority, "GET", &path, &headers, b"", config).await? {
        (200, headers, body) => {
            let header = |name: &str| upstream::header_in(&headers, name);
            let tokens = output_from_headers(header, &record.output_commitment)
                .inspect_err(|e| tracing::warn!(inference = %inference_id, ta = %ta_url, error = %e, "the transfer agent served output tokens that are not the record's"))
                .ok()
                .flatten();
            Ok(Some(Payload { body, tokens }))
        }
        // The transfer agent no longer has it (or never had it).
        (404, _, _) => Ok(None),
        (status, _, body) => bail!(
            "the transfer agent at {ta_url} answered {status} for the payload of {inference_id}: {}",
            String::from_utf8_lossy(&body)
        ),
    }
}

/// What the validator's own ML nodes said at `/v1/identity`: id and models, by `host:port`.
#[derive(Default)]
struct OwnNodes {
    known: BTreeMap<String, (String, Vec<String>)>,
}

impl OwnNodes {
    /// The first of `config.ml_nodes` serving `model`, with its node id.
    async fn serving(&mut self, model: &str, config: &ValidatorConfig) -> Result<(String, String)> {
        for ml_node in &config.ml_nodes {
            if !self.known.contains_key(ml_node) {
                match identity(ml_node, config).await {
                    Ok(identity) => {
                        self.known.insert(ml_node.clone(), identity);
                    }
                    Err(e) => {
                        tracing::warn!(%ml_node, error = %format!("{e:#}"), "cannot ask the ML node who it is");
                        continue;
                    }
                }
            }
            let (id, models) = &self.known[ml_node];
            if models.iter().any(|m| m == model) {
                return Ok((ml_node.clone(), id.clone()));
            }
        }
        bail!(
            "none of this validator's ML nodes ({}) serves model {model}; run one that does (`gonka-sidecar ml-node --model-id {model}`) and pass it with --ml-node",
            config.ml_nodes.join(", ")
        )
    }

    /// Forgets what `ml_node` said, so it is asked again.
    fn forget(&mut self, ml_node: &str) {
        self.known.remove(ml_node);
    }
}

/// The id and models of the ML node at `ml_node`, from its `/v1/identity`.
async fn identity(ml_node: &str, config: &ValidatorConfig) -> Result<(String, Vec<String>)> {
    let (status, identity) = exchange(ml_node, "GET", "/v1/identity", &[], b"", config)
        .await
        .context("asking the ML node who it is; is --ml-node running?")?;
    let identity = serde_json::from_slice::<serde_json::Value>(&identity)
        .ok()
        .filter(|_| status == 200)
        .ok_or_else(|| anyhow!("the ML node at {ml_node} answered {status} at /v1/identity"))?;
    let id = identity["node_id"].as_str().ok_or_else(|| {
        anyhow!("the ML node at {ml_node} did not say its node_id at /v1/identity")
    })?;
    let models = identity["models"]
        .as_array()
        .map(|models| {
            models
                .iter()
                .filter_map(|m| m.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    Ok((id.to_string(), models))
}

/// What the validator's ML node `ml_node` (`host:port`, registered as `node_id`) answers to
/// `payload`, with `stream` forced to false and `max_tokens` set to the signed budget
/// `max_tokens`. The call is signed by `key`, the node's host: an ML node on chain runs
/// unreceipted requests for nobody else.
async fn reexecute(
    key: &Key,
    ml_node: &str,
    node_id: &str,
    payload: &[u8],
    max_tokens: u64,
    config: &ValidatorConfig,
) -> Result<OwnAnswer> {
    let mut request: serde_json::Value = serde_json::from_slice(payload)
        .context("the payload is not JSON; the record's request cannot be re-executed")?;
    let Some(fields) = request.as_object_mut() else {
        bail!("the payload is JSON but not an object {{model, messages, ...}}");
    };
    fields.insert("stream".into(), serde_json::Value::Bool(false));
    fields.remove("max_completion_tokens");
    fields.insert("max_tokens".into(), max_tokens.into());
    let body = serde_json::to_vec(&request).context("re-serializing the request")?;
    let caller = sign_node_call(key, node_id, None, &body, unix_now())?;
    let caller: Vec<(&str, &str)> = caller.iter().map(|(n, v)| (*n, v.as_str())).collect();
    let (status, answer) = exchange(
        ml_node,
        "POST",
        "/v1/chat/completions",
        &caller,
        &body,
        config,
    )
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
    let text = completion["choices"][0]["message"]["content"]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| {
            anyhow!("the ML node at {ml_node} answered without choices[0].message.content")
        })?;
    let count = |field: &str| {
        completion["usage"][field].as_u64().ok_or_else(|| {
            anyhow!("the ML node at {ml_node} answered without usage.{field}; token counts are part of the result")
        })
    };
    Ok(OwnAnswer {
        text,
        prompt_tokens: count("prompt_tokens")?,
        completion_tokens: count("completion_tokens")?,
    })
}

/// What the validator's ML node `ml_node` (registered as `node_id`) scores for `tokens` (the
/// executor's committed output) after the prompt of `payload`, with `top_k` alternatives per
/// position ([`gonka_client::score`], signed by `key`, the node's host), checked.
async fn score(
    key: &Key,
    ml_node: &str,
    node_id: &str,
    payload: &[u8],
    tokens: &[u32],
    top_k: u32,
    config: &ValidatorConfig,
) -> Result<dpb::ScoredOutput> {
    let request = ScoreRequest::new(payload, tokens.to_vec(), top_k)?;
    let limits = upstream::Limits::connect(config.connect_timeout);
    tokio::time::timeout(
        config.request_timeout,
        request_score(key, ml_node, node_id, &request, limits),
    )
    .await
    .map_err(|_| {
        anyhow!(
            "the ML node at {ml_node} did not score within {:?}",
            config.request_timeout
        )
    })?
    .context("scoring on the ML node; is --ml-node running?")
}

#[cfg(test)]
mod tests {
    use super::*;
    use gonka_proto::disputes::{MsgSubmitValidation, MsgVoteDispute};
    use gonka_proto::signing::{result_commitment, text_output_commitment};
    use prost::Message;

    const PAYLOAD: &[u8] = br#"{"model":"m","messages":[{"role":"user","content":"hi"}]}"#;

    /// Token counts of every answer in these tests.
    const COUNTS: (u64, u64) = (5, 3);

    fn record(executor_text: &str) -> ipb::WorkRecord {
        ipb::WorkRecord {
            inference_id: "ab".into(),
            prompt_hash: body_hash(PAYLOAD).to_vec(),
            output_commitment: text_output_commitment(&[1; 32], &response_hash(executor_text))
                .to_vec(),
            prompt_tokens: COUNTS.0,
            completion_tokens: COUNTS.1,
            ..ipb::WorkRecord::default()
        }
    }

    fn own(text: &str) -> OwnAnswer {
        OwnAnswer {
            text: text.into(),
            prompt_tokens: COUNTS.0,
            completion_tokens: COUNTS.1,
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

    /// How validator "v" answers `kind` work on `record("x")` given `payload` and its own
    /// answer `text`.
    fn answer(kind: &str, payload: &[u8], text: &str) -> Decision {
        decide("v", &work(kind), &record("x"), payload, &own(text)).unwrap()
    }

    fn validation_commitment(msg: &Any) -> Vec<u8> {
        assert_eq!(msg.type_url, "/gonka.disputes.v1.MsgSubmitValidation");
        let m = MsgSubmitValidation::decode(msg.value.as_slice()).unwrap();
        assert_eq!((m.validator.as_str(), m.inference_id.as_str()), ("v", "ab"));
        m.result_commitment
    }

    #[test]
    fn the_validator_commits_its_own_answer_and_counts_under_its_address() {
        for text in ["x", "y"] {
            let d = answer(KIND_VALIDATION, PAYLOAD, text);
            assert_eq!(d.finding, Committed);
            assert_eq!(
                validation_commitment(&d.msg),
                result_commitment("v", &response_hash(text), COUNTS.0, COUNTS.1)
            );
        }
        // The commitment hides the answer: it is neither the answer hash nor the record's
        // output commitment.
        let d = answer(KIND_VALIDATION, PAYLOAD, "x");
        let c = validation_commitment(&d.msg);
        assert_ne!(c, response_hash("x").to_vec());
        assert_ne!(c, record("x").output_commitment);
    }

    #[test]
    fn dispute_seats_vote_a_commitment() {
        let d = answer(KIND_DISPUTE, PAYLOAD, "y");
        assert_eq!(d.msg.type_url, "/gonka.disputes.v1.MsgVoteDispute");
        let m = MsgVoteDispute::decode(d.msg.value.as_slice()).unwrap();
        assert_eq!((m.voter.as_str(), m.dispute_id), ("v", 7));
        assert_eq!(
            m.result_commitment,
            result_commitment("v", &response_hash("y"), COUNTS.0, COUNTS.1)
        );
        assert!(decide("v", &work("other"), &record("x"), PAYLOAD, &own("x")).is_err());
    }

    #[test]
    fn a_body_that_is_not_the_signed_one_commits_evidence_against_the_record() {
        let tampered = br#"{"model":"m","messages":[]}"#;
        let d = answer(KIND_VALIDATION, tampered, "x");
        assert_eq!(d.finding, TamperedPayload);
        assert_eq!(
            d.found.result_hash,
            <[u8; 32]>::from(Sha256::digest(tampered))
        );
        assert_eq!(
            validation_commitment(&d.msg),
            result_commitment("v", &Sha256::digest(tampered).into(), 0, 0)
        );
    }

    /// Starts an ML node serving `model` as `node_id` on a free port: its `host:port`.
    async fn ml_node(model: &str, node_id: &str) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let config = gonka_node::MlNodeConfig {
            model_id: model.into(),
            node_id: node_id.into(),
            ..gonka_node::MlNodeConfig::default()
        };
        tokio::spawn(gonka_node::serve(listener, config, std::future::pending()));
        addr.to_string()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn each_record_goes_to_the_own_ml_node_serving_its_model() {
        let reference = ml_node("gonka/reference-1", "ref-node").await;
        let trained = ml_node("pol/job-1", "trained-node").await;
        let config = ValidatorConfig {
            ml_nodes: vec!["127.0.0.1:1".into(), reference.clone(), trained.clone()],
            poll: Duration::from_secs(1),
            connect_timeout: Duration::from_secs(2),
            request_timeout: Duration::from_secs(5),
            inclusion_timeout: Duration::from_secs(5),
            bls_dir: None,
            metrics: None,
        };
        let mut nodes = OwnNodes::default();
        // The unreachable first node is skipped, not fatal.
        assert_eq!(
            nodes.serving("pol/job-1", &config).await.unwrap(),
            (trained, "trained-node".to_string())
        );
        assert_eq!(
            nodes.serving("gonka/reference-1", &config).await.unwrap(),
            (reference, "ref-node".to_string())
        );
        let err = nodes.serving("pol/job-9", &config).await.unwrap_err();
        assert!(err.to_string().contains("serves model pol/job-9"), "{err}");
    }
}
