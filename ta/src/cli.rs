//! The `gonka-sidecar transfer-agent` command line.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;

use super::committer::{CommitPolicy, Committer};
use super::escrow::EscrowBook;
use super::leaves::Leaves;
use super::payloads::{self, PayloadStore, Payloads};
use super::recorder::Recorder;
use super::registry::refresh_from_chain;
use super::settle::Outbox;
use super::{
    background, demands, reveal, server, RateLimit, TaConfig, TaNodeConfig, TransferAgent,
};
use gonka_client::http::Limits;
use gonka_client::server::ServerArgs;
use gonka_client::{key_from_mnemonic_file, Chain};
use gonka_proto::inference as pb;
use gonka_proto::query as q;

/// Arguments of `gonka-sidecar transfer-agent`.
///
/// With `--chain-rpc` the TA is a network member: it registers itself on chain, routes to the
/// ML nodes registered there, refuses requesters who cannot pay (402), and settles every served
/// request as a work record. Without it (tests, benches) it forwards to the `--node`s given.
#[derive(Debug, clap::Args)]
pub struct TransferAgentArgs {
    /// Address to listen on.
    #[arg(long, env = "GONKA_TA_LISTEN", default_value = "127.0.0.1:9000")]
    listen: SocketAddr,
    /// CometBFT RPC of a node of the chain, e.g. http://127.0.0.1:26657.
    #[arg(long, requires_all = ["mnemonic_file", "home"], conflicts_with = "nodes")]
    chain_rpc: Option<String>,
    /// File holding the BIP-39 mnemonic of the TA's account (a staked participant).
    #[arg(long)]
    mnemonic_file: Option<PathBuf>,
    /// Directory of the TA's database (`ta.redb`: the outbox of work records, committed
    /// batches and the request bodies kept for validators) and of its write-ahead journal
    /// (`journal/`).
    #[arg(long)]
    home: Option<PathBuf>,
    /// Work records per committed batch (capped by the chain's max_batch_records).
    #[arg(long, default_value_t = 10_000)]
    batch_max_records: usize,
    /// Longest a work record waits for its batch to fill, in milliseconds.
    #[arg(long, default_value_t = 1000)]
    batch_interval_ms: u64,
    /// How often the registry (nodes, models, transfer agents) is re-read from chain, in ms.
    #[arg(long, default_value_t = 2000)]
    registry_refresh_ms: u64,
    /// How often the chain is asked which record outputs this TA must reveal and which
    /// leaves of its batches are demanded, in ms (a reveal or leaf missed by its deadline is
    /// slashed as withheld).
    #[arg(long, default_value_t = 1000)]
    reveal_poll_ms: u64,
    /// How often every ML node is asked for its load, in milliseconds.
    #[arg(long, default_value_t = 1000)]
    load_poll_ms: u64,
    /// Without a chain: an ML node, `ID=URL,MODEL,MAX_CONCURRENCY` (repeatable), e.g.
    /// `n1=http://127.0.0.1:8080,gonka/reference-1,4`.
    #[arg(long = "node", value_parser = parse_node, required_unless_present = "chain_rpc")]
    nodes: Vec<TaNodeConfig>,
    /// Allowed clock difference of request timestamps, in seconds.
    #[arg(long, default_value_t = 60)]
    max_skew: u64,
    /// Requests allowed to wait for a free ML node; more get 429.
    #[arg(long, default_value_t = 64)]
    queue_capacity: usize,
    /// Longest a request waits for a free ML node before 429, in milliseconds.
    #[arg(long, default_value_t = 30_000)]
    queue_timeout_ms: u64,
    /// The URL clients reach this TA at, registered on chain and served at /v1/identity
    /// (default: http://LISTEN).
    #[arg(long)]
    public_url: Option<String>,
    /// With a chain: how long request bodies are kept for validators in
    /// `<home>/ta.redb`, in seconds. Raised at start to twice the chain's
    /// `payload_retention_blocks` at its recent block time: a body dropped while validators may
    /// still ask for it gets the TA slashed for withholding it.
    #[arg(long, default_value_t = 3600)]
    payload_retention_secs: u64,
    /// Most requests in flight on one ML node, whatever `max_concurrency` it declares.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..))]
    max_node_concurrency: u32,
    /// Longest connecting to an ML node may take, in milliseconds.
    #[arg(long, default_value_t = 2_000)]
    node_connect_timeout_ms: u64,
    /// Longest an ML node may take to send its answer's header block (for a non-streaming
    /// answer: the whole generation), in milliseconds.
    #[arg(long, default_value_t = 120_000)]
    node_first_byte_timeout_ms: u64,
    /// Longest an ML node may go silent in the middle of an answer, in milliseconds.
    #[arg(long, default_value_t = 30_000)]
    node_idle_timeout_ms: u64,
    /// Longest one answer of an ML node may take in all, in milliseconds.
    #[arg(long, default_value_t = 600_000)]
    node_total_timeout_ms: u64,
    /// Largest answer (body or whole stream) read from an ML node, in bytes.
    #[arg(long, default_value_t = 16 * 1024 * 1024)]
    node_max_answer_bytes: usize,
    /// Requests one requester address may make per second, sustained (0: no limit); more
    /// get 429 `rate_limit_exceeded` with Retry-After.
    #[arg(long, default_value_t = 20)]
    rate_limit_per_sec: u32,
    /// Requests one requester may make at once after a pause.
    #[arg(long, default_value_t = 40)]
    rate_limit_burst: u32,
    /// Requesters whose rate is tracked at once (the least recently seen is forgotten).
    #[arg(long, default_value_t = 100_000)]
    rate_limit_requesters: usize,
    /// How long a requester's escrow as last read from chain is relied on before it is
    /// read again, in milliseconds (the TA's own debits are counted at once either way).
    #[arg(long, default_value_t = 5_000)]
    escrow_refresh_ms: u64,
    /// Requesters whose escrow is tracked at once (those with nothing in flight are
    /// forgotten first).
    #[arg(long, default_value_t = 100_000)]
    escrow_requesters: usize,
    #[command(flatten)]
    server: ServerArgs,
    #[command(flatten)]
    testing: TestingArgs,
}

/// The test-only flags of `gonka-sidecar transfer-agent` (`testing` feature).
#[cfg(feature = "testing")]
#[derive(Debug, clap::Args)]
struct TestingArgs {
    /// FOR TESTS ONLY: abort right after storing committed batch N, before submitting it
    /// (the end-to-end test of a crash in the middle of a batch).
    #[arg(long)]
    testing_crash_after_batch: Option<u64>,
}

/// Release builds (no `testing` feature) have no test-only flags.
#[cfg(not(feature = "testing"))]
#[derive(Debug, clap::Args)]
struct TestingArgs {}

/// Parses `ID=URL,MODEL,MAX_CONCURRENCY`.
fn parse_node(s: &str) -> Result<TaNodeConfig, String> {
    let (id, rest) = s
        .split_once('=')
        .ok_or_else(|| format!("`{s}`: expected ID=URL,MODEL,MAX_CONCURRENCY"))?;
    let parts: Vec<&str> = rest.split(',').collect();
    let [url, model, max] = parts[..] else {
        return Err(format!("`{s}`: expected ID=URL,MODEL,MAX_CONCURRENCY"));
    };
    let max_concurrency: u32 = max
        .parse()
        .map_err(|_| format!("`{s}`: MAX_CONCURRENCY must be a number but is `{max}`"))?;
    if id.is_empty() || model.is_empty() {
        return Err(format!("`{s}`: ID and MODEL must not be empty"));
    }
    gonka_client::http::authority(url)?;
    Ok(TaNodeConfig {
        id: id.to_string(),
        url: url.to_string(),
        models: vec![model.to_string()],
        vram_mib: 0,
        bandwidth_mbps: 0,
        max_concurrency,
    })
}

/// Runs a transfer agent until Ctrl-C.
pub async fn run(args: TransferAgentArgs) -> anyhow::Result<()> {
    let public_url = args
        .public_url
        .clone()
        .unwrap_or_else(|| format!("http://{}", args.listen));
    let config = TaConfig {
        public_url: public_url.clone(),
        nodes: args.nodes.clone(),
        max_skew_secs: args.max_skew,
        queue_capacity: args.queue_capacity,
        queue_timeout: Duration::from_millis(args.queue_timeout_ms),
        node_limits: Limits {
            connect: Duration::from_millis(args.node_connect_timeout_ms),
            first_byte: Duration::from_millis(args.node_first_byte_timeout_ms),
            idle: Duration::from_millis(args.node_idle_timeout_ms),
            total: Duration::from_millis(args.node_total_timeout_ms),
            max_body: args.node_max_answer_bytes,
        },
        max_node_concurrency: args.max_node_concurrency,
        server: args.server.limits(),
        rate_limit: RateLimit {
            per_second: args.rate_limit_per_sec,
            burst: args.rate_limit_burst,
            requesters: args.rate_limit_requesters,
        },
        ..TaConfig::default()
    };
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("binding the transfer agent to {}", args.listen))?;
    let ta = match &args.chain_rpc {
        None => TransferAgent::new(config).map_err(anyhow::Error::msg)?,
        Some(rpc) => join_chain(&args, rpc, config, &public_url).await?,
    };
    tokio::spawn(background::poll_loads(
        ta.clone(),
        Duration::from_millis(args.load_poll_ms),
        Duration::from_secs(1),
    ));
    let addr = listener.local_addr()?;
    tracing::info!(role = "transfer-agent", %addr, url = %public_url, "transfer agent listening");
    server::serve(listener, ta, async {
        let _ = tokio::signal::ctrl_c().await;
        tracing::info!(role = "transfer-agent", "shutting down");
    })
    .await
    .context("serving the transfer agent")
}

/// Connects to the chain (waiting for it), registers the TA, loads the registry and the
/// outbox, and starts following the chain and settling records.
async fn join_chain(
    args: &TransferAgentArgs,
    rpc: &str,
    config: TaConfig,
    public_url: &str,
) -> anyhow::Result<Arc<TransferAgent>> {
    let mnemonic_file = args.mnemonic_file.as_deref().expect("required by clap");
    let home = args.home.as_deref().expect("required by clap");
    std::fs::create_dir_all(home)
        .with_context(|| format!("creating the TA home {}", home.display()))?;
    // The outbox and the payload store share one database: a served request's body and
    // record become durable in one transaction (see `recorder`).
    let path = home.join("ta.redb");
    let db = Arc::new(
        redb::Database::create(&path)
            .with_context(|| format!("opening the TA's database {}", path.display()))?,
    );
    let outbox = Arc::new(Outbox::in_database(db.clone())?);
    let store = Arc::new(PayloadStore::in_database(db)?);
    let clock: super::Clock = Arc::new(gonka_client::unix_now);
    // Before anything reads the outbox: the journal may hold requests answered before a
    // crash that the database does not have yet.
    let recorder = Recorder::open(
        &home.join("journal"),
        outbox.clone(),
        store.clone(),
        clock.clone(),
    )?;
    if !outbox.is_empty() {
        tracing::info!(
            records = outbox.len(),
            "unsettled work records from a previous run will be settled"
        );
    }
    let chain = loop {
        let key = key_from_mnemonic_file(mnemonic_file)?;
        match Chain::connect(rpc, key).await {
            Ok(chain) => break Arc::new(chain),
            Err(e) => {
                tracing::warn!(%rpc, error = %format!("{e:#}"), "chain not reachable yet; retrying in 2 s");
                tokio::time::sleep(Duration::from_secs(2)).await;
            }
        }
    };
    tracing::info!(address = %chain.address(), chain_id = %chain.chain_id(), "connected to the chain");
    background::register_self(&chain, public_url).await;
    let registry = loop {
        match refresh_from_chain(&chain).await {
            Ok(r) => break r,
            Err(e) => {
                tracing::warn!(error = %format!("{e:#}"), "cannot read the registry; retrying in 2 s");
                tokio::time::sleep(Duration::from_secs(2)).await;
            }
        }
    };
    let retention =
        payload_retention(&chain, Duration::from_secs(args.payload_retention_secs)).await;
    tokio::spawn(payloads::run_pruner(
        store.clone(),
        retention,
        // Every tenth of the window, at most a minute apart: a body outlives its retention
        // by one interval at most.
        (retention / 10)
            .min(Duration::from_secs(60))
            .max(Duration::from_secs(1)),
        clock.clone(),
    ));
    tokio::spawn(reveal::run_revealer(
        chain.clone(),
        store.clone(),
        Duration::from_millis(args.reveal_poll_ms),
    ));
    let payloads = Payloads::new(store, payloads::chain_access(chain.clone()), clock);
    let escrows = EscrowBook::new(
        Duration::from_millis(args.escrow_refresh_ms),
        args.escrow_requesters,
    );
    let ta = TransferAgent::with_chain(
        config,
        registry,
        chain.clone(),
        outbox.clone(),
        payloads,
        escrows.clone(),
        recorder,
    );
    tokio::spawn(background::follow_registry(
        ta.clone(),
        chain.clone(),
        Duration::from_millis(args.registry_refresh_ms),
    ));
    let policy = CommitPolicy {
        max_records: args.batch_max_records,
        interval: Duration::from_millis(args.batch_interval_ms),
        #[cfg(feature = "testing")]
        crash_after_batch: args.testing.testing_crash_after_batch,
        ..CommitPolicy::default()
    };
    let backlog = Arc::new(demands::Backlog::default());
    tokio::spawn(demands::run_answerer(
        chain.clone(),
        Leaves::new(outbox.clone(), chain.address()),
        backlog.clone(),
        Duration::from_millis(args.reveal_poll_ms),
    ));
    let committer = Committer::new(chain, outbox, escrows, ta.clone(), policy, backlog);
    tokio::spawn(committer.run());
    Ok(ta)
}

/// How long to keep request bodies: `configured`, raised to twice the chain's
/// `payload_retention_blocks` at the chain's average block time so far (the chain holds the
/// TA to serving every body that long and slashes a TA that cannot). A chain too young to
/// measure, or unreachable, leaves `configured`.
async fn payload_retention(chain: &Chain, configured: Duration) -> Duration {
    let client = chain.client();
    let params = client
        .query::<q::inference::Params>(&pb::QueryParamsRequest {})
        .await
        .ok()
        .and_then(|r| r.params);
    let status = client.status().await.ok();
    let (Some(params), Some(status)) = (params, status) else {
        return configured;
    };
    let sync = &status.sync_info;
    let blocks = sync
        .latest_block_height
        .value()
        .saturating_sub(sync.earliest_block_height.value());
    let seconds = sync
        .latest_block_time
        .duration_since(sync.earliest_block_time)
        .unwrap_or_default();
    if blocks < 10 {
        return configured;
    }
    let needed = seconds
        .saturating_mul(2)
        .saturating_mul(u32::try_from(params.payload_retention_blocks).unwrap_or(u32::MAX))
        / u32::try_from(blocks).unwrap_or(u32::MAX);
    if needed > configured {
        tracing::warn!(
            configured_secs = configured.as_secs(),
            retention_secs = needed.as_secs(),
            payload_retention_blocks = params.payload_retention_blocks,
            "--payload-retention-secs is shorter than the chain's payload retention at its block time; keeping bodies longer"
        );
        needed
    } else {
        configured
    }
}
