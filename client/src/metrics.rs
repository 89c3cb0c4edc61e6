//! Prometheus metrics of the sidecar roles. Each role registers its metrics in a
//! [`Registry`] and serves them at `GET /metrics` ([`router`]) in the OpenMetrics text
//! format, which Prometheus scrapes as it is. The names each role exports are listed in the
//! README ("Metrics").

use std::sync::Arc;

use axum::http::header::CONTENT_TYPE;
use axum::routing::get;
use prometheus_client::encoding::text::encode;
pub use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
pub use prometheus_client::metrics::{counter::Counter, family::Family, gauge::Gauge};
pub use prometheus_client::registry::Registry;

/// Where the metrics are served.
pub const PATH: &str = "/metrics";

/// The content type of the OpenMetrics text format.
pub const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Labels of a metric family: (name, value) pairs.
pub type Labels = Vec<(&'static str, String)>;

/// Buckets of a latency histogram in seconds: 50 µs to about 1.6 s, doubling.
pub fn latency_buckets() -> impl Iterator<Item = f64> {
    exponential_buckets(0.000_05, 2.0, 16)
}

/// Registers `metric` as `name` in `registry` and returns it (metrics are handles: the
/// registry and the caller share it).
pub fn register<M>(registry: &mut Registry, name: &str, help: &str, metric: M) -> M
where
    M: prometheus_client::registry::Metric + Clone,
{
    registry.register(name, help, metric.clone());
    metric
}

/// Requests answered, by HTTP status (a counter family labelled `status`).
#[derive(Debug, Clone, Default)]
pub struct ByStatus(Family<Labels, Counter>);

impl ByStatus {
    /// Registers a new family as `name` (exported as `name_total`) in `registry`.
    pub fn register(registry: &mut Registry, name: &str, help: &str) -> ByStatus {
        ByStatus(register(registry, name, help, Family::default()))
    }

    /// Counts one answer with `status`.
    pub fn count(&self, status: u16) {
        self.0
            .get_or_create(&vec![("status", status.to_string())])
            .inc();
    }
}

/// The `GET /metrics` route over `registry`; `refresh` runs before each rendering, to set
/// the gauges that are read at scrape time (queue depths, backlogs).
pub fn router<S: Clone + Send + Sync + 'static>(
    registry: Arc<Registry>,
    refresh: impl Fn() + Send + Sync + 'static,
) -> axum::Router<S> {
    let refresh = Arc::new(refresh);
    axum::Router::new().route(
        PATH,
        get(move || {
            let (registry, refresh) = (registry.clone(), refresh.clone());
            async move {
                refresh();
                ([(CONTENT_TYPE, OPENMETRICS)], render(&registry))
            }
        }),
    )
}

/// Serves `registry` alone at `GET /metrics` on `listener` (a role or process whose metrics
/// have a port of their own) until the process ends; `refresh` runs before each rendering.
pub async fn serve(
    listener: tokio::net::TcpListener,
    registry: Arc<Registry>,
    refresh: impl Fn() + Send + Sync + 'static,
) -> std::io::Result<()> {
    crate::server::serve(
        listener,
        router(registry, refresh),
        crate::server::ServerLimits::default(),
        std::future::pending(),
    )
    .await
}

/// `registry` in the OpenMetrics text format.
pub fn render(registry: &Registry) -> String {
    let mut text = String::new();
    encode(&mut text, registry).expect("writing to a String does not fail");
    text
}

/// The samples of an OpenMetrics (or Prometheus) text exposition: (name with its labels as
/// written, value), comments and `# EOF` left out. For tests and tools that read what a role
/// serves.
pub fn parse(text: &str) -> Vec<(String, f64)> {
    text.lines()
        .filter(|line| !line.starts_with('#') && !line.trim().is_empty())
        .filter_map(|line| {
            let (name, value) = line.rsplit_once(' ')?;
            Some((name.to_string(), value.parse().ok()?))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_what_parse_reads_back() {
        let mut registry = Registry::default();
        let requests = ByStatus::register(&mut registry, "demo_requests", "Requests by status");
        let depth = Gauge::<i64>::default();
        let latency = Histogram::new(latency_buckets());
        registry.register("demo_depth", "Queue depth", depth.clone());
        registry.register("demo_seconds", "Latency", latency.clone());
        requests.count(200);
        requests.count(200);
        depth.set(7);
        latency.observe(0.0003);
        let samples = parse(&render(&registry));
        let get = |name: &str| samples.iter().find(|(n, _)| n == name).map(|(_, v)| *v);
        assert_eq!(get("demo_requests_total{status=\"200\"}"), Some(2.0));
        assert_eq!(get("demo_depth"), Some(7.0));
        assert_eq!(get("demo_seconds_count"), Some(1.0));
        assert_eq!(get("demo_seconds_bucket{le=\"0.0002\"}"), Some(0.0));
        assert_eq!(get("demo_seconds_bucket{le=\"0.0004\"}"), Some(1.0));
    }
}
