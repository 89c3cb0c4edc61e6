//! `gonkad start --metrics-listen ADDR`: the app's Prometheus metrics at `GET /metrics`.
//! [`Metered`] wraps the ABCI application, times and counts the calls CometBFT makes and
//! passes every request and response through unchanged: the clock is read here, around the
//! state machine, never inside it.
//!
//! | name | type | what |
//! |---|---|---|
//! | `gonka_app_finalize_block_seconds` | histogram | FinalizeBlock time per block |
//! | `gonka_app_commit_seconds` | histogram | Commit time per block |
//! | `gonka_app_check_tx_seconds` | histogram | CheckTx time per tx (new and recheck) |
//! | `gonka_app_check_tx_total{result,kind}` | counter | CheckTx answers: `accepted` or `rejected`; `new` or `recheck` |
//! | `gonka_app_txs_total{result}` | counter | txs of finalized blocks: `ok` or `failed` |
//! | `gonka_app_height` | gauge | height of the last finalized block |
//! | `gonka_app_cpu_seconds_total{call}` | counter | CPU time of the calling thread in each ABCI call (`check_tx`, `recheck_tx`, `finalize_block`, `commit`, …): what the app costs, apart from waiting |
//! | `gonka_app_signature_checks_total{cache}` | counter | secp256k1 checks of tx signatures: `hit` (verified before, answered from memory) or `miss` (verified now) |

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use anyhow::Result;
use gonka_client::metrics::{
    latency_buckets, register, Counter, Family, Gauge, Histogram, Labels, Registry,
};
use tendermint_abci::Application;
use tendermint_proto::v0_38::abci::{
    CheckTxType, RequestApplySnapshotChunk, RequestCheckTx, RequestEcho, RequestExtendVote,
    RequestFinalizeBlock, RequestInfo, RequestInitChain, RequestLoadSnapshotChunk,
    RequestOfferSnapshot, RequestPrepareProposal, RequestProcessProposal, RequestQuery,
    RequestVerifyVoteExtension, ResponseApplySnapshotChunk, ResponseCheckTx, ResponseCommit,
    ResponseEcho, ResponseExtendVote, ResponseFinalizeBlock, ResponseFlush, ResponseInfo,
    ResponseInitChain, ResponseListSnapshots, ResponseLoadSnapshotChunk, ResponseOfferSnapshot,
    ResponsePrepareProposal, ResponseProcessProposal, ResponseQuery, ResponseVerifyVoteExtension,
};

/// What the app's metrics record.
#[derive(Debug)]
struct AppMetrics {
    registry: Arc<Registry>,
    finalize_block: Histogram,
    commit: Histogram,
    check_tx: Histogram,
    check_tx_results: Family<Labels, Counter>,
    tx_results: Family<Labels, Counter>,
    height: Gauge,
    cpu_seconds: Family<Labels, Counter<f64, AtomicU64>>,
    signature_checks: Family<Labels, Counter>,
}

impl Default for AppMetrics {
    fn default() -> Self {
        let mut r = Registry::default();
        let histogram = || Histogram::new(latency_buckets());
        AppMetrics {
            finalize_block: register(
                &mut r,
                "gonka_app_finalize_block_seconds",
                "FinalizeBlock time per block",
                histogram(),
            ),
            commit: register(
                &mut r,
                "gonka_app_commit_seconds",
                "Commit time per block",
                histogram(),
            ),
            check_tx: register(
                &mut r,
                "gonka_app_check_tx_seconds",
                "CheckTx time per tx (new and recheck)",
                histogram(),
            ),
            check_tx_results: register(
                &mut r,
                "gonka_app_check_tx",
                "CheckTx answers: accepted or rejected",
                Family::default(),
            ),
            tx_results: register(
                &mut r,
                "gonka_app_txs",
                "Txs of finalized blocks: ok or failed",
                Family::default(),
            ),
            height: register(
                &mut r,
                "gonka_app_height",
                "Height of the last finalized block",
                Gauge::default(),
            ),
            cpu_seconds: register(
                &mut r,
                "gonka_app_cpu_seconds",
                "CPU time of the calling thread in each ABCI call",
                Family::default(),
            ),
            signature_checks: register(
                &mut r,
                "gonka_app_signature_checks",
                "secp256k1 checks of tx signatures: hit (answered from memory) or miss",
                Family::default(),
            ),
            registry: Arc::new(r),
        }
    }
}

impl AppMetrics {
    /// Runs `call`, adding the CPU time the calling thread spent in it to `name`'s counter.
    fn cpu<R>(&self, name: &str, call: impl FnOnce() -> R) -> R {
        let started = thread_cpu_seconds();
        let response = call();
        self.cpu_seconds
            .get_or_create(&vec![("call", name.to_string())])
            .inc_by((thread_cpu_seconds() - started).max(0.0));
        response
    }

    /// Copies the signature cache's counts (kept by `gonka_app`) into the counters.
    fn refresh_signature_checks(&self) {
        let counts = gonka_app::sig_cache::counts();
        for (cache, count) in [("hit", counts.hits), ("miss", counts.misses)] {
            let counter = self
                .signature_checks
                .get_or_create(&vec![("cache", cache.to_string())]);
            counter.inner().store(count, Ordering::Relaxed);
        }
    }
}

/// CPU seconds the calling thread has used (`CLOCK_THREAD_CPUTIME_ID`): time spent waiting
/// for a lock or for a core is not in it.
fn thread_cpu_seconds() -> f64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a valid timespec to write; this clock exists on every Linux.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) };
    if rc != 0 {
        return 0.0;
    }
    now.tv_sec as f64 + now.tv_nsec as f64 * 1e-9
}

fn result(ok: bool, yes: &str, no: &str) -> Labels {
    vec![("result", if ok { yes } else { no }.to_string())]
}

/// An ABCI application whose calls are timed and counted.
#[derive(Debug, Clone)]
pub struct Metered<A> {
    app: A,
    metrics: Arc<AppMetrics>,
}

impl<A: Application> Metered<A> {
    /// Wraps `app` and serves its metrics on `listen` from a thread of its own; returns the
    /// wrapper and the address it listens on.
    pub fn serve_metrics(app: A, listen: &str) -> Result<(Metered<A>, SocketAddr)> {
        let metrics = Arc::new(AppMetrics::default());
        let registry = metrics.registry.clone();
        let refreshed = metrics.clone();
        let refresh = move || refreshed.refresh_signature_checks();
        let addr =
            crate::background::serve_in_thread("metrics", listen, move |listener| async move {
                if let Err(e) = gonka_client::metrics::serve(listener, registry, refresh).await {
                    tracing::error!(error = %e, "the metrics server stopped");
                }
            })?;
        tracing::info!(%addr, "metrics at GET /metrics");
        Ok((Metered { app, metrics }, addr))
    }
}

impl<A: Application> Application for Metered<A> {
    fn echo(&self, request: RequestEcho) -> ResponseEcho {
        self.app.echo(request)
    }

    fn info(&self, request: RequestInfo) -> ResponseInfo {
        self.app.info(request)
    }

    fn init_chain(&self, request: RequestInitChain) -> ResponseInitChain {
        self.app.init_chain(request)
    }

    fn query(&self, request: RequestQuery) -> ResponseQuery {
        self.metrics.cpu("query", || self.app.query(request))
    }

    fn check_tx(&self, request: RequestCheckTx) -> ResponseCheckTx {
        let recheck = request.r#type == CheckTxType::Recheck as i32;
        let kind = if recheck { "recheck" } else { "new" };
        let m = &self.metrics;
        let started = Instant::now();
        let response = m.cpu(if recheck { "recheck_tx" } else { "check_tx" }, || {
            self.app.check_tx(request)
        });
        m.check_tx.observe(started.elapsed().as_secs_f64());
        let mut labels = result(response.code == 0, "accepted", "rejected");
        labels.push(("kind", kind.to_string()));
        m.check_tx_results.get_or_create(&labels).inc();
        response
    }

    fn flush(&self) -> ResponseFlush {
        self.app.flush()
    }

    fn commit(&self) -> ResponseCommit {
        let started = Instant::now();
        let response = self.metrics.cpu("commit", || self.app.commit());
        self.metrics.commit.observe(started.elapsed().as_secs_f64());
        response
    }

    fn list_snapshots(&self) -> ResponseListSnapshots {
        self.app.list_snapshots()
    }

    fn offer_snapshot(&self, request: RequestOfferSnapshot) -> ResponseOfferSnapshot {
        self.app.offer_snapshot(request)
    }

    fn load_snapshot_chunk(&self, request: RequestLoadSnapshotChunk) -> ResponseLoadSnapshotChunk {
        self.app.load_snapshot_chunk(request)
    }

    fn apply_snapshot_chunk(
        &self,
        request: RequestApplySnapshotChunk,
    ) -> ResponseApplySnapshotChunk {
        self.app.apply_snapshot_chunk(request)
    }

    fn prepare_proposal(&self, request: RequestPrepareProposal) -> ResponsePrepareProposal {
        self.metrics
            .cpu("prepare_proposal", || self.app.prepare_proposal(request))
    }

    fn process_proposal(&self, request: RequestProcessProposal) -> ResponseProcessProposal {
        self.metrics
            .cpu("process_proposal", || self.app.process_proposal(request))
    }

    fn extend_vote(&self, request: RequestExtendVote) -> ResponseExtendVote {
        self.metrics
            .cpu("extend_vote", || self.app.extend_vote(request))
    }

    fn verify_vote_extension(
        &self,
        request: RequestVerifyVoteExtension,
    ) -> ResponseVerifyVoteExtension {
        self.metrics.cpu("verify_vote_extension", || {
            self.app.verify_vote_extension(request)
        })
    }

    fn finalize_block(&self, request: RequestFinalizeBlock) -> ResponseFinalizeBlock {
        let height = request.height;
        let started = Instant::now();
        let response = self
            .metrics
            .cpu("finalize_block", || self.app.finalize_block(request));
        let m = &self.metrics;
        m.finalize_block.observe(started.elapsed().as_secs_f64());
        for tx in &response.tx_results {
            m.tx_results
                .get_or_create(&result(tx.code == 0, "ok", "failed"))
                .inc();
        }
        m.height.set(height);
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use std::io::{Read, Write};
    use tendermint_proto::v0_38::abci::ExecTxResult;

    /// Accepts a tx that starts with `ok`; a block's txs succeed likewise.
    #[derive(Clone)]
    struct Judge;

    impl Application for Judge {
        fn check_tx(&self, request: RequestCheckTx) -> ResponseCheckTx {
            ResponseCheckTx {
                code: u32::from(!request.tx.starts_with(b"ok")),
                ..Default::default()
            }
        }

        fn finalize_block(&self, request: RequestFinalizeBlock) -> ResponseFinalizeBlock {
            ResponseFinalizeBlock {
                tx_results: request
                    .txs
                    .iter()
                    .map(|tx| ExecTxResult {
                        code: u32::from(!tx.starts_with(b"ok")),
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            }
        }
    }

    fn scrape(addr: SocketAddr) -> BTreeMap<String, f64> {
        let mut stream = std::net::TcpStream::connect(addr).unwrap();
        stream
            .write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .unwrap();
        let mut text = String::new();
        stream.read_to_string(&mut text).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        assert!(head.contains(gonka_client::metrics::OPENMETRICS), "{head}");
        gonka_client::metrics::parse(body).into_iter().collect()
    }

    #[test]
    fn calls_are_counted_and_timed_and_answers_pass_through() {
        let (app, addr) = Metered::serve_metrics(Judge, "127.0.0.1:0").unwrap();
        let check = |tx: &[u8]| {
            app.check_tx(RequestCheckTx {
                tx: tx.to_vec().into(),
                ..Default::default()
            })
            .code
        };
        assert_eq!((check(b"ok 1"), check(b"ok 2"), check(b"bad")), (0, 0, 1));
        let recheck = app.check_tx(RequestCheckTx {
            tx: b"ok 1".to_vec().into(),
            r#type: CheckTxType::Recheck as i32,
        });
        assert_eq!(recheck.code, 0);
        let finalized = app.finalize_block(RequestFinalizeBlock {
            txs: vec![b"ok".to_vec().into(), b"no".to_vec().into()],
            height: 7,
            ..Default::default()
        });
        let codes: Vec<u32> = finalized.tx_results.iter().map(|r| r.code).collect();
        assert_eq!(codes, vec![0, 1]);
        app.commit();
        let metrics = scrape(addr);
        let get = |name: &str| metrics.get(name).copied();
        assert_eq!(
            get("gonka_app_check_tx_total{result=\"accepted\",kind=\"new\"}"),
            Some(2.0)
        );
        assert_eq!(
            get("gonka_app_check_tx_total{result=\"rejected\",kind=\"new\"}"),
            Some(1.0)
        );
        assert_eq!(
            get("gonka_app_check_tx_total{result=\"accepted\",kind=\"recheck\"}"),
            Some(1.0)
        );
        for call in ["check_tx", "recheck_tx", "finalize_block", "commit"] {
            let cpu = get(&format!("gonka_app_cpu_seconds_total{{call=\"{call}\"}}"));
            assert!(cpu.is_some_and(|s| s >= 0.0), "{call}: {cpu:?}");
        }
        assert!(get("gonka_app_signature_checks_total{cache=\"hit\"}").is_some());
        assert!(get("gonka_app_signature_checks_total{cache=\"miss\"}").is_some());
        assert_eq!(get("gonka_app_check_tx_seconds_count"), Some(4.0));
        assert_eq!(get("gonka_app_txs_total{result=\"ok\"}"), Some(1.0));
        assert_eq!(get("gonka_app_txs_total{result=\"failed\"}"), Some(1.0));
        assert_eq!(get("gonka_app_finalize_block_seconds_count"), Some(1.0));
        assert_eq!(get("gonka_app_commit_seconds_count"), Some(1.0));
        assert_eq!(get("gonka_app_height"), Some(7.0));
    }
}
