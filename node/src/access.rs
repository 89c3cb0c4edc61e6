//! Who may make an ML node registered on chain compute: its own host (the validation worker
//! re-executing records) and, for a requester-signed request, the registered transfer agent
//! that request names. Every call carries the caller's signature
//! ([`gonka_client::node_call`]); a caller the node cannot place gets 401 or 403 before
//! anything runs, so nobody else gets the node's compute for free, and a captured call
//! cannot be replayed within the clock window.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use axum::http::{HeaderMap, StatusCode};
use gonka_client::node_call::verify_node_call;
use gonka_client::openai::ApiError;
use gonka_client::replay::{Refused, ReplayWindow};
use gonka_client::request::RequestTerms;
use gonka_client::Client;
use gonka_proto::inference::QueryTransferAgentsRequest;
use gonka_proto::query as q;

/// Most recent call signatures remembered against replay (older ones are outside the clock
/// window anyway); beyond it new calls are refused (503) until old ones age out.
pub const MAX_REMEMBERED_CALLS: usize = 100_000;

/// The callers an ML node serves.
pub struct Callers {
    host: String,
    transfer_agents: RwLock<BTreeSet<String>>,
    seen: Mutex<ReplayWindow<Vec<u8>>>,
    /// Where the registered transfer agents are read from, and when they last were (a
    /// caller naming an unknown one triggers a re-read at most once per
    /// [`MIN_REFRESH_INTERVAL`], so a newly registered transfer agent is served at once).
    chain: Option<(Client, Mutex<Option<Instant>>)>,
}

impl std::fmt::Debug for Callers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Callers")
            .field("host", &self.host)
            .field("on_chain", &self.chain.is_some())
            .finish_non_exhaustive()
    }
}

/// Least time between two reads of the registered transfer agents caused by callers.
pub const MIN_REFRESH_INTERVAL: Duration = Duration::from_secs(1);

fn forbidden(message: String) -> ApiError {
    ApiError {
        status: StatusCode::FORBIDDEN,
        message,
        kind: "permission_error",
        code: "caller_not_allowed",
        retry_after_secs: None,
    }
}

impl Callers {
    /// The callers of a node hosted by `host`, with no transfer agent known yet (tests set
    /// them with [`Callers::set_transfer_agents`]).
    pub fn new(host: &str) -> Arc<Callers> {
        Arc::new(Callers {
            host: host.to_string(),
            transfer_agents: RwLock::new(BTreeSet::new()),
            seen: Mutex::new(ReplayWindow::new(MAX_REMEMBERED_CALLS)),
            chain: None,
        })
    }

    /// The callers of a node hosted by `host` on the chain `client` reaches: the registered
    /// transfer agents are read from it (see [`refresh_from_chain`]).
    pub fn on_chain(host: &str, client: Client) -> Arc<Callers> {
        Arc::new(Callers {
            host: host.to_string(),
            transfer_agents: RwLock::new(BTreeSet::new()),
            seen: Mutex::new(ReplayWindow::new(MAX_REMEMBERED_CALLS)),
            chain: Some((client, Mutex::new(None))),
        })
    }

    fn knows(&self, address: &str) -> bool {
        self.transfer_agents
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .contains(address)
    }

    /// Re-reads the registered transfer agents if `address` is not among them and the last
    /// caller-triggered read is older than [`MIN_REFRESH_INTERVAL`].
    pub async fn learn(&self, address: &str) {
        let Some((client, last)) = &self.chain else {
            return;
        };
        if self.knows(address) {
            return;
        }
        {
            let mut last = last.lock().unwrap_or_else(|p| p.into_inner());
            if last.is_some_and(|at| at.elapsed() < MIN_REFRESH_INTERVAL) {
                return;
            }
            *last = Some(Instant::now());
        }
        if let Err(e) = self.read_from(client).await {
            tracing::warn!(error = %format!("{e:#}"), "cannot read the registered transfer agents");
        }
    }

    async fn read_from(&self, client: &Client) -> anyhow::Result<()> {
        let agents = client
            .query_all::<q::inference::TransferAgents>(QueryTransferAgentsRequest::default())
            .await?;
        self.set_transfer_agents(agents.into_iter().map(|t| t.address));
        Ok(())
    }

    /// Replaces the registered transfer agents.
    pub fn set_transfer_agents(&self, addresses: impl IntoIterator<Item = String>) {
        *self
            .transfer_agents
            .write()
            .unwrap_or_else(|p| p.into_inner()) = addresses.into_iter().collect();
    }

    /// Checks the caller of a call of node `node_id` with `body`: a requester-signed request
    /// (`signed`: its terms and hash) must come from the registered transfer agent it names,
    /// anything else from the host.
    pub fn admit(
        &self,
        node_id: &str,
        headers: &HeaderMap,
        signed: Option<(&RequestTerms, [u8; 32])>,
        body: &[u8],
        now_secs: u64,
        max_skew_secs: u64,
    ) -> Result<(), ApiError> {
        let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
        let caller = verify_node_call(
            &header,
            node_id,
            signed.map(|(_, hash)| hash),
            body,
            now_secs,
            max_skew_secs,
        )
        .map_err(|e| {
            ApiError::unauthorized(
                e.code,
                format!("{}: this ML node serves its host and registered transfer agents only, each call signed (x-gonka-caller-*)", e.message),
            )
        })?;
        match signed {
            Some((terms, _)) => {
                if caller.address != terms.transfer_agent {
                    return Err(forbidden(format!(
                        "{} forwarded a request signed for transfer agent {}; only that transfer agent may",
                        caller.address, terms.transfer_agent
                    )));
                }
                if !self.knows(&caller.address) {
                    return Err(forbidden(format!(
                        "{} is not a transfer agent registered on chain",
                        caller.address
                    )));
                }
            }
            None if caller.address != self.host => {
                return Err(forbidden(format!(
                    "{} may not run unreceipted requests here: only the node's host {} may",
                    caller.address, self.host
                )));
            }
            None => {}
        }
        let admitted = self.seen.lock().unwrap_or_else(|p| p.into_inner()).admit(
            caller.timestamp,
            caller.signature,
            now_secs,
            max_skew_secs,
        );
        match admitted {
            Ok(()) => Ok(()),
            Err(Refused::Replayed) => Err(ApiError::unauthorized(
                "replayed_call",
                "this signed call was already made; sign each call anew".into(),
            )),
            Err(Refused::Full) => Err(ApiError {
                status: StatusCode::SERVICE_UNAVAILABLE,
                message: format!(
                    "this ML node remembers {MAX_REMEMBERED_CALLS} recent calls, its limit; retry shortly"
                ),
                kind: "server_error",
                code: "replay_cache_full",
                retry_after_secs: Some(1),
            }),
        }
    }
}

/// Keeps `callers`' transfer agents equal to the chain's registered ones, reading them
/// every `every` (a caller naming an unknown one also triggers a read, see
/// [`Callers::learn`]); a failed read keeps the last list.
pub async fn refresh_from_chain(callers: Arc<Callers>, every: Duration) {
    let Some((client, _)) = &callers.chain else {
        return;
    };
    loop {
        if let Err(e) = callers.read_from(client).await {
            tracing::warn!(error = %format!("{e:#}"), "cannot read the registered transfer agents; keeping the last list");
        }
        tokio::time::sleep(every).await;
    }
}
