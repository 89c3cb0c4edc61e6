//! The TA's payload store: the exact request body of every work record it recorded (the
//! bytes the requester signed, whose SHA-256 is the record's `prompt_hash`), kept for the
//! validation window so the validator the chain assigns to a sampled record — or a member
//! of the record's dispute committee — can fetch it and re-execute the request.
//!
//! Bodies live in the TA's database (`<home>/ta.redb`, beside the outbox), written in the
//! same transaction as their records ([`crate::recorder`]) and pruned by [`run_pruner`] once
//! older than the retention. The same write keeps the record's [`OutputOpening`] (the salt of its output commitment and the
//! answer's hash), which nobody else learns until the chain asks for it (see
//! [`crate::reveal`]); served bodies never include it.
//!
//! # `GET /v1/payloads/{inference_id}`
//! Authenticated by the signed headers of [`gonka_client::payload_auth`]; the chain decides
//! who may read ([`chain_access`]: the record's assigned validator or a member of its dispute
//! committee). Answers:
//! - 200 `application/octet-stream`: the body, byte for byte; for a "logprobs" model's record
//!   with the output tokens and the seal over the executor's log-probabilities in
//!   `x-gonka-output-tokens` / `x-gonka-output-seal` ([`gonka_client::payload_auth`]), never
//!   the log-probabilities themselves;
//! - 401 `authentication_error`: missing or malformed headers, bad signature, key not of the
//!   address, timestamp more than 60 s off (checked first), or `replayed_request`: these
//!   exact signed headers were already used (each signed fetch is served once);
//! - 404 `invalid_request_error` / `payload_not_found`: unknown id or pruned (checked before
//!   asking the chain);
//! - 403 `permission_error` / `not_assigned`: the chain does not assign this record to the
//!   caller;
//! - 503 `chain_unavailable`: the chain could not be asked.

use gonka_proto::query as q;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result};
use axum::extract::{Path as UrlPath, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use futures_util::future::BoxFuture;
use gonka_client::payload_auth::{output_headers, verify_payload_request, MAX_SKEW_SECS};
use gonka_client::replay::{Refused, ReplayWindow};
use gonka_client::rpc::QueryError;
use gonka_proto::disputes as dpb;
use gonka_proto::disputes::ScoredOutput;
use prost::Message;
use redb::{Database, ReadableTable, TableDefinition, WriteTransaction};

use super::Clock;
use gonka_client::openai::ApiError;
use gonka_client::Chain;

/// Bodies: inference id → (stored at, unix seconds; body).
const BODIES: TableDefinition<&str, (u64, &[u8])> = TableDefinition::new("bodies");
/// Output openings: inference id → salt (32) ‖ response hash (32) [‖ protobuf ScoredOutput].
const OPENINGS: TableDefinition<&str, &[u8]> = TableDefinition::new("openings");
/// Pruning index: (stored at, inference id) → ().
const BY_AGE: TableDefinition<(u64, &str), ()> = TableDefinition::new("by_age");
/// Codespace of the disputes module's query errors (e.g. a record that was not sampled).
const DISPUTES_CODESPACE: &str = "disputes";

/// What opens a record's output commitment: the salt and the SHA-256 of the answer text, or
/// for a "logprobs" model the executor's scored output.
#[derive(Debug, Clone, PartialEq)]
pub struct OutputOpening {
    /// The 32-byte salt the executing node chose.
    pub salt: [u8; 32],
    /// SHA-256 of the answer text.
    pub response_hash: [u8; 32],
    /// A "logprobs" model's scored output (the commitment is to it, not to the text).
    pub scored: Option<ScoredOutput>,
}

impl OutputOpening {
    /// What a validator of a "logprobs" record gets besides the body: the output tokens and
    /// the salted seal over the log-probabilities, which open the record's commitment
    /// together ([`gonka_proto::scored::commitment_of`]) and say nothing of the scores.
    pub fn tokens_and_seal(&self) -> Option<(Vec<u32>, [u8; 32])> {
        let scored = self.scored.as_ref()?;
        let tokens = gonka_proto::scored::tokens_of(scored).collect();
        Some((
            tokens,
            gonka_proto::scored::logprobs_seal(&self.salt, scored),
        ))
    }
}

/// The durable store of request bodies.
pub struct PayloadStore {
    db: Arc<Database>,
}

impl std::fmt::Debug for PayloadStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PayloadStore").finish_non_exhaustive()
    }
}

impl PayloadStore {
    /// Opens (or creates) the store at `path`.
    pub fn open(path: &Path) -> Result<PayloadStore> {
        let db = Database::create(path)
            .with_context(|| format!("opening the payload store {}", path.display()))?;
        Self::in_database(Arc::new(db))
    }

    /// The store in the tables of `db` (shared with the outbox, so that a body and its
    /// record become durable in one transaction, see [`crate::recorder`]).
    pub fn in_database(db: Arc<Database>) -> Result<PayloadStore> {
        let tx = db.begin_write()?;
        tx.open_table(BODIES)?;
        tx.open_table(OPENINGS)?;
        tx.open_table(BY_AGE)?;
        tx.commit()?;
        Ok(PayloadStore { db })
    }

    /// The database holding the store.
    pub fn database(&self) -> &Arc<Database> {
        &self.db
    }

    /// Durably keeps `body` and `opening` of `inference_id`, stored at `now_secs`.
    pub fn put(
        &self,
        inference_id: &str,
        body: &[u8],
        opening: &OutputOpening,
        now_secs: u64,
    ) -> Result<()> {
        self.put_many(&[(inference_id, body, opening)], now_secs)
    }

    /// [`PayloadStore::put`] of several bodies in one durable write.
    pub fn put_many(&self, items: &[(&str, &[u8], &OutputOpening)], now_secs: u64) -> Result<()> {
        let tx = self.db.begin_write()?;
        Self::write(&tx, items, now_secs)?;
        tx.commit()
            .context("writing request bodies to the payload store")
    }

    /// Writes `items` in `tx`, a transaction of this store's database.
    pub fn write(
        tx: &WriteTransaction,
        items: &[(&str, &[u8], &OutputOpening)],
        now_secs: u64,
    ) -> Result<()> {
        {
            let mut openings = tx.open_table(OPENINGS)?;
            let mut bodies = tx.open_table(BODIES)?;
            let mut by_age = tx.open_table(BY_AGE)?;
            for &(inference_id, body, opening) in items {
                let mut value = Vec::with_capacity(64);
                value.extend_from_slice(&opening.salt);
                value.extend_from_slice(&opening.response_hash);
                if let Some(scored) = &opening.scored {
                    value.extend_from_slice(&scored.encode_to_vec());
                }
                openings.insert(inference_id, value.as_slice())?;
                let previous = bodies
                    .insert(inference_id, (now_secs, body))?
                    .map(|old| old.value().0);
                if let Some(at) = previous {
                    by_age.remove((at, inference_id))?;
                }
                by_age.insert((now_secs, inference_id), ())?;
            }
        }
        Ok(())
    }

    /// The body of `inference_id`, `None` if unknown or pruned.
    pub fn get(&self, inference_id: &str) -> Result<Option<Vec<u8>>> {
        let read = self.db.begin_read()?;
        let bodies = read.open_table(BODIES)?;
        Ok(bodies.get(inference_id)?.map(|v| v.value().1.to_vec()))
    }

    /// The output opening of `inference_id`, `None` if unknown or pruned.
    pub fn opening(&self, inference_id: &str) -> Result<Option<OutputOpening>> {
        let read = self.db.begin_read()?;
        let openings = read.open_table(OPENINGS)?;
        Ok(openings.get(inference_id)?.and_then(|v| {
            let value = v.value();
            let rest = value.get(64..)?;
            Some(OutputOpening {
                salt: value.get(..32)?.try_into().ok()?,
                response_hash: value.get(32..64)?.try_into().ok()?,
                scored: if rest.is_empty() {
                    None
                } else {
                    Some(ScoredOutput::decode(rest).ok()?)
                },
            })
        }))
    }

    /// Removes every body (and opening) stored before `cutoff_secs`; returns how many.
    pub fn prune(&self, cutoff_secs: u64) -> Result<usize> {
        let tx = self.db.begin_write()?;
        let removed = {
            let mut by_age = tx.open_table(BY_AGE)?;
            let mut bodies = tx.open_table(BODIES)?;
            let mut openings = tx.open_table(OPENINGS)?;
            let old: Vec<(u64, String)> = by_age
                .range((0, "")..(cutoff_secs, ""))?
                .map(|entry| entry.map(|(k, _)| (k.value().0, k.value().1.to_string())))
                .collect::<Result<_, _>>()?;
            for (at, id) in &old {
                by_age.remove((*at, id.as_str()))?;
                bodies.remove(id.as_str())?;
                openings.remove(id.as_str())?;
            }
            old.len()
        };
        tx.commit().context("pruning the payload store")?;
        Ok(removed)
    }
}

/// Prunes bodies older than `retention` every `every`, on the wall clock `clock`.
pub async fn run_pruner(
    store: Arc<PayloadStore>,
    retention: Duration,
    every: Duration,
    clock: Clock,
) {
    loop {
        tokio::time::sleep(every).await;
        let cutoff = clock().saturating_sub(retention.as_secs());
        match store.prune(cutoff) {
            Ok(0) => {}
            Ok(removed) => {
                tracing::info!(removed, "pruned request bodies past the validation window")
            }
            Err(e) => {
                tracing::error!(error = %format!("{e:#}"), "cannot prune the payload store; retrying at the next interval")
            }
        }
    }
}

/// Whether `address` may read the payload of `inference_id` (arguments in that order);
/// `Err` when that cannot be decided now (e.g. the chain is unreachable).
pub type AccessCheck =
    Arc<dyn Fn(String, String) -> BoxFuture<'static, Result<bool>> + Send + Sync>;

/// The chain's rule: `address` is the validator assigned to the record, or sits on the
/// committee of a dispute over it.
pub fn chain_access(chain: Arc<Chain>) -> AccessCheck {
    Arc::new(move |address: String, inference_id: String| {
        let chain = chain.clone();
        Box::pin(async move { assigned_on_chain(&chain, &address, &inference_id).await })
    })
}

async fn assigned_on_chain(chain: &Chain, address: &str, inference_id: &str) -> Result<bool> {
    let client = chain.client();
    let validation = client
        .query::<q::disputes::Validation>(&dpb::QueryValidationRequest {
            inference_id: inference_id.to_string(),
        })
        .await;
    match validation {
        Ok(r)
            if r.validation
                .as_ref()
                .is_some_and(|v| v.validator == address) =>
        {
            return Ok(true)
        }
        Ok(_) => {}
        // Not sampled: only a user dispute can make the record readable.
        Err(e)
            if e.downcast_ref::<QueryError>()
                .is_some_and(|q| q.codespace == DISPUTES_CODESPACE) => {}
        Err(e) => return Err(e),
    }
    let disputes = client
        .query_all::<q::disputes::Participant>(dpb::QueryParticipantDisputesRequest {
            address: address.to_string(),
            ..Default::default()
        })
        .await?;
    Ok(disputes
        .iter()
        .any(|d| d.inference_id == inference_id && d.committee.iter().any(|m| m == address)))
}

/// What the payload route needs: the store, who may read, and the clock the signed
/// timestamps are checked against.
pub struct Payloads {
    /// The stored bodies.
    pub store: Arc<PayloadStore>,
    access: AccessCheck,
    clock: Clock,
    /// Fetches seen within the clock window (replays are refused).
    seen: Mutex<ReplayWindow<Vec<u8>>>,
}

/// Most payload fetches remembered against replay.
pub const MAX_REMEMBERED_FETCHES: usize = 100_000;

impl std::fmt::Debug for Payloads {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Payloads").finish_non_exhaustive()
    }
}

impl Payloads {
    /// Serves `store`, letting readers through when `access` says so; signed timestamps are
    /// checked against `clock` (unix seconds).
    pub fn new(store: Arc<PayloadStore>, access: AccessCheck, clock: Clock) -> Arc<Payloads> {
        Arc::new(Payloads {
            store,
            access,
            clock,
            seen: Mutex::new(ReplayWindow::new(MAX_REMEMBERED_FETCHES)),
        })
    }
}

/// The route `GET /v1/payloads/{inference_id}` over `payloads`.
pub fn router(payloads: Arc<Payloads>) -> axum::Router {
    axum::Router::new()
        .route("/v1/payloads/{inference_id}", get(fetch))
        .with_state(payloads)
}

async fn fetch(
    State(payloads): State<Arc<Payloads>>,
    UrlPath(inference_id): UrlPath<String>,
    headers: HeaderMap,
) -> Response {
    match serve(&payloads, &inference_id, &headers).await {
        Ok(body) => {
            let mut response =
                ([(header::CONTENT_TYPE, "application/octet-stream")], body).into_response();
            // A "logprobs" record: the tokens to score and the seal that proves them.
            let output = payloads.store.opening(&inference_id).ok().flatten();
            if let Some((tokens, seal)) = output.as_ref().and_then(OutputOpening::tokens_and_seal) {
                for (name, value) in output_headers(&tokens, &seal) {
                    if let Ok(value) = header::HeaderValue::try_from(value) {
                        response.headers_mut().insert(name, value);
                    }
                }
            }
            response
        }
        Err(e) => {
            tracing::info!(inference = %inference_id, status = e.status.as_u16(), code = e.code, "payload refused");
            e.into_response()
        }
    }
}

async fn serve(
    payloads: &Payloads,
    inference_id: &str,
    headers: &HeaderMap,
) -> Result<Vec<u8>, ApiError> {
    let now = (payloads.clock)();
    let caller = verify_payload_request(
        |name| headers.get(name).and_then(|v| v.to_str().ok()),
        inference_id,
        now,
    )
    .map_err(|e| ApiError::unauthorized(e.code, e.message))?;
    // A fetch is good once: headers seen on the wire do not open the body to anyone else.
    let admitted = payloads
        .seen
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .admit(caller.timestamp, caller.signature, now, MAX_SKEW_SECS);
    match admitted {
        Ok(()) => {}
        Err(Refused::Replayed) => {
            return Err(ApiError::unauthorized(
                "replayed_request",
                "this signed payload fetch was already made; sign each fetch anew".into(),
            ))
        }
        Err(Refused::Full) => {
            return Err(ApiError {
                status: StatusCode::SERVICE_UNAVAILABLE,
                message: "too many recent payload fetches; retry shortly".into(),
                kind: "server_error",
                code: "replay_cache_full",
                retry_after_secs: Some(1),
            })
        }
    }
    let address = caller.address;
    // Existence first: a probe for an unknown id costs no chain query.
    let body = payloads
        .store
        .get(inference_id)
        .map_err(|e| ApiError::internal(format!("cannot read the payload store: {e:#}")))?
        .ok_or_else(|| ApiError {
            status: StatusCode::NOT_FOUND,
            message: format!("this transfer agent holds no request body for work record {inference_id}: unknown id, or older than its retention window"),
            kind: "invalid_request_error",
            code: "payload_not_found",
            retry_after_secs: None,
        })?;
    let allowed = (payloads.access)(address.clone(), inference_id.to_string())
        .await
        .map_err(|e| ApiError {
            status: StatusCode::SERVICE_UNAVAILABLE,
            message: format!("cannot ask the chain who is assigned to work record {inference_id}: {e:#}; retry later"),
            kind: "server_error",
            code: "chain_unavailable",
            retry_after_secs: Some(2),
        })?;
    if !allowed {
        return Err(ApiError {
            status: StatusCode::FORBIDDEN,
            message: format!("{address} is neither the validator assigned to work record {inference_id} nor on its dispute committee, as the chain says"),
            kind: "permission_error",
            code: "not_assigned",
            retry_after_secs: None,
        });
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An opening of an "exact" record, or for an odd `n` of a "logprobs" one.
    fn opening(n: u8) -> OutputOpening {
        let scored = (n % 2 == 1).then(|| ScoredOutput {
            prompt_tokens: u64::from(n),
            positions: vec![gonka_proto::disputes::ScoredToken {
                token: u32::from(n),
                logprob: -5,
                top_tokens: vec![u32::from(n), 7],
                top_logprobs: vec![-5, -9_000],
            }],
        });
        OutputOpening {
            salt: [n; 32],
            response_hash: [n + 100; 32],
            scored,
        }
    }

    #[test]
    fn a_logprobs_record_shows_its_tokens_and_seal_never_its_scores() {
        let exact = opening(2);
        assert_eq!(exact.tokens_and_seal(), None);
        let scored = opening(3);
        let (tokens, seal) = scored.tokens_and_seal().unwrap();
        assert_eq!(tokens, vec![3]);
        let output = scored.scored.as_ref().unwrap();
        // The tokens and the seal open the commitment; the headers carry only those.
        let commitment = gonka_proto::scored::output_commitment(&scored.salt, output);
        // What a validator reads back from the headers a fetch carries.
        let read = |headers: &[(&str, String)]| {
            gonka_client::payload_auth::output_from_headers(
                |name| {
                    headers
                        .iter()
                        .find(|(n, _)| *n == name)
                        .map(|(_, v)| v.as_str())
                },
                &commitment,
            )
        };
        let headers = output_headers(&tokens, &seal);
        assert_eq!(read(&headers).unwrap(), Some(vec![3]));
        assert!(!headers.iter().any(|(_, v)| v.contains("9000")));
        // Other tokens under the same seal do not open it.
        let refused = read(&output_headers(&[4], &seal));
        assert!(refused.unwrap_err().to_string().contains("do not open"));
    }

    #[test]
    fn bodies_and_openings_survive_reopen_and_are_pruned_by_age() {
        let path = std::env::temp_dir().join(format!("gonka-payloads-{}.redb", std::process::id()));
        let _ = std::fs::remove_file(&path);
        {
            let store = PayloadStore::open(&path).unwrap();
            store.put("a", b"{\"a\":1}", &opening(1), 100).unwrap();
            store.put("b", b"{\"b\":2}", &opening(2), 200).unwrap();
            store.put("c", b"", &opening(3), 300).unwrap();
            // Storing again moves the body's age forward.
            store.put("a", b"{\"a\":1}", &opening(1), 250).unwrap();
        }
        let store = PayloadStore::open(&path).unwrap();
        assert_eq!(store.get("a").unwrap().as_deref(), Some(&b"{\"a\":1}"[..]));
        assert_eq!(store.get("c").unwrap().as_deref(), Some(&b""[..]));
        assert_eq!(store.opening("c").unwrap(), Some(opening(3)));
        assert_eq!(store.get("zz").unwrap(), None);
        assert_eq!(store.opening("zz").unwrap(), None);
        assert_eq!(store.prune(250).unwrap(), 1, "only b is older than 250");
        assert_eq!(store.get("b").unwrap(), None);
        assert_eq!(
            store.opening("b").unwrap(),
            None,
            "the opening goes with the body"
        );
        assert!(store.get("a").unwrap().is_some());
        drop(store);
        let store = PayloadStore::open(&path).unwrap();
        assert_eq!(store.get("b").unwrap(), None, "pruning is durable");
        assert_eq!(store.prune(1000).unwrap(), 2);
        assert_eq!(store.get("a").unwrap(), None);
        assert_eq!(store.opening("a").unwrap(), None);
        drop(store);
        std::fs::remove_file(&path).unwrap();
    }
}
