//! Node selection: which ML node gets the next request, with per-node load and failure state.
//!
//! See the [module docs](super) for the policy. Time is always passed in, never read here.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// Static description of an ML node, as registered with the TA.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeInfo {
    /// Unique node id (also the last tie-breaker: smaller wins).
    pub id: String,
    /// Model ids the node serves.
    pub models: Vec<String>,
    /// GPU memory available, in MiB.
    pub vram_mib: u64,
    /// Network bandwidth, in Mbit/s (tie-breaker: higher wins).
    pub bandwidth_mbps: u64,
    /// Requests the node says it runs at once (0 = never picked). The TA never exceeds it,
    /// nor its own cap ([`Router::with_concurrency_cap`]): what a node declares is believed
    /// only up to that cap.
    pub max_concurrency: u32,
}

/// Exponential backoff for nodes that failed: `min(base * 2^(failures - 1), cap)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// Cooldown after the first consecutive failure.
    pub base: Duration,
    /// Longest cooldown.
    pub cap: Duration,
}

impl Default for Backoff {
    /// 1 s doubling up to 60 s.
    fn default() -> Self {
        Self {
            base: Duration::from_secs(1),
            cap: Duration::from_secs(60),
        }
    }
}

impl Backoff {
    /// Cooldown after `consecutive_failures` failures in a row (zero for 0).
    pub fn cooldown(&self, consecutive_failures: u32) -> Duration {
        if consecutive_failures == 0 {
            return Duration::ZERO;
        }
        let factor = 2u32.checked_pow(consecutive_failures - 1);
        factor
            .and_then(|f| self.base.checked_mul(f))
            .map_or(self.cap, |d| d.min(self.cap))
    }
}

/// How a leased request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The node answered; resets its failure count and cooldown.
    Ok,
    /// The node failed (error, timeout, refused); puts it in cooldown.
    Failed,
}

/// A reserved slot on a node, returned by [`Router::pick`]; hand it back via [`Router::finish`].
#[derive(Debug, PartialEq, Eq)]
#[must_use = "a lease holds a node slot until passed to Router::finish"]
pub struct Lease {
    node_id: String,
    incarnation: u64,
}

impl Lease {
    /// The node the request should go to.
    pub fn node_id(&self) -> &str {
        &self.node_id
    }
}

/// Snapshot of one node's scheduling state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeStatus {
    /// The node's registration.
    pub info: NodeInfo,
    /// Requests the TA has leased to the node and not yet finished.
    pub in_flight: u32,
    /// Last in-flight count the node reported itself.
    pub reported_in_flight: u32,
    /// The node is skipped until this instant (after a failure).
    pub cooldown_until: Option<Instant>,
    /// Failures in a row since the last success.
    pub consecutive_failures: u32,
}

#[derive(Debug, Clone)]
struct NodeState {
    status: NodeStatus,
    /// Distinguishes a re-added node from a removed one, so stale leases are ignored.
    incarnation: u64,
}

impl NodeState {
    /// `max(own, reported)` in-flight.
    fn load(&self) -> u32 {
        self.status.in_flight.max(self.status.reported_in_flight)
    }

    /// The requests the TA sends the node at once: what it declares, at most `cap`.
    fn capacity(&self, cap: u32) -> u32 {
        self.status.info.max_concurrency.min(cap)
    }

    fn eligible(&self, model: &str, min_vram_mib: u64, now: Instant, cap: u32) -> bool {
        let info = &self.status.info;
        info.vram_mib >= min_vram_mib
            && info.models.iter().any(|m| m == model)
            && self.status.cooldown_until.is_none_or(|until| now >= until)
            && self.load() < self.capacity(cap)
    }

    /// Better candidate first: lower relative load, then higher bandwidth, then smaller id.
    fn preference(&self, other: &Self, cap: u32) -> Ordering {
        // load_a / cap_a vs load_b / cap_b  <=>  load_a * cap_b vs load_b * cap_a (caps > 0).
        let lhs = u64::from(self.load()) * u64::from(other.capacity(cap));
        let rhs = u64::from(other.load()) * u64::from(self.capacity(cap));
        lhs.cmp(&rhs)
            .then_with(|| {
                other
                    .status
                    .info
                    .bandwidth_mbps
                    .cmp(&self.status.info.bandwidth_mbps)
            })
            .then_with(|| self.status.info.id.cmp(&other.status.info.id))
    }
}

/// The TA's node table and selection policy.
#[derive(Debug, Clone)]
pub struct Router {
    nodes: BTreeMap<String, NodeState>,
    backoff: Backoff,
    /// Most requests in flight on one node, whatever it declares.
    concurrency_cap: u32,
    next_incarnation: u64,
}

impl Default for Router {
    fn default() -> Self {
        Self::new(Backoff::default())
    }
}

impl Router {
    /// An empty router with the given failure backoff, believing what nodes declare.
    pub fn new(backoff: Backoff) -> Self {
        Self {
            nodes: BTreeMap::new(),
            backoff,
            concurrency_cap: u32::MAX,
            next_incarnation: 0,
        }
    }

    /// The router sending no node more than `cap` requests at once, whatever the node
    /// declares: a node cannot draw all traffic by declaring a huge `max_concurrency`.
    pub fn with_concurrency_cap(mut self, cap: u32) -> Self {
        self.concurrency_cap = cap;
        self
    }

    /// The failure backoff in use.
    pub fn backoff(&self) -> Backoff {
        self.backoff
    }

    /// Add a node, or update an existing node's info keeping its load and failure state.
    pub fn upsert_node(&mut self, info: NodeInfo) {
        if let Some(state) = self.nodes.get_mut(&info.id) {
            state.status.info = info;
            return;
        }
        let incarnation = self.next_incarnation;
        self.next_incarnation += 1;
        let id = info.id.clone();
        let state = NodeState {
            status: NodeStatus {
                info,
                in_flight: 0,
                reported_in_flight: 0,
                cooldown_until: None,
                consecutive_failures: 0,
            },
            incarnation,
        };
        self.nodes.insert(id, state);
    }

    /// Forget a node; returns its info if it was known. Outstanding leases on it become no-ops.
    pub fn remove_node(&mut self, node_id: &str) -> Option<NodeInfo> {
        self.nodes.remove(node_id).map(|s| s.status.info)
    }

    /// Record the in-flight count the node reported; returns `false` for an unknown node.
    pub fn report_load(&mut self, node_id: &str, in_flight: u32) -> bool {
        match self.nodes.get_mut(node_id) {
            Some(state) => {
                state.status.reported_in_flight = in_flight;
                true
            }
            None => false,
        }
    }

    /// Choose the least loaded eligible node for `model` and reserve a slot on it.
    ///
    /// `None` when no node serves the model with `min_vram_mib`, or all such nodes are cooling
    /// down or at their `max_concurrency` (the caller should then queue the request).
    pub fn pick(&mut self, model: &str, min_vram_mib: u64, now: Instant) -> Option<Lease> {
        let cap = self.concurrency_cap;
        let best = self
            .nodes
            .values_mut()
            .filter(|s| s.eligible(model, min_vram_mib, now, cap))
            .min_by(|a, b| a.preference(b, cap))?;
        best.status.in_flight += 1;
        Some(Lease {
            node_id: best.status.info.id.clone(),
            incarnation: best.incarnation,
        })
    }

    /// Release a lease's slot and record how the request went.
    ///
    /// [`Outcome::Failed`] starts (or extends) the node's cooldown at `now`; [`Outcome::Ok`]
    /// resets failures and cooldown. A lease on a node removed since is ignored.
    pub fn finish(&mut self, lease: Lease, outcome: Outcome, now: Instant) {
        let Some(state) = self.nodes.get_mut(&lease.node_id) else {
            return;
        };
        if state.incarnation != lease.incarnation {
            return;
        }
        let status = &mut state.status;
        status.in_flight = status.in_flight.saturating_sub(1);
        match outcome {
            Outcome::Ok => {
                status.consecutive_failures = 0;
                status.cooldown_until = None;
            }
            Outcome::Failed => {
                status.consecutive_failures = status.consecutive_failures.saturating_add(1);
                let cooldown = self.backoff.cooldown(status.consecutive_failures);
                status.cooldown_until = Some(now.checked_add(cooldown).unwrap_or(now));
            }
        }
    }

    /// The scheduling state of one node.
    pub fn node(&self, node_id: &str) -> Option<&NodeStatus> {
        self.nodes.get(node_id).map(|s| &s.status)
    }

    /// All nodes, in id order.
    pub fn nodes(&self) -> impl Iterator<Item = &NodeStatus> {
        self.nodes.values().map(|s| &s.status)
    }

    /// Number of registered nodes.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether no node is registered.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const M: &str = "gonka/reference-1";
    const SEC: Duration = Duration::from_secs(1);

    fn node(id: &str, vram: u64, bw: u64, conc: u32) -> NodeInfo {
        NodeInfo {
            id: id.into(),
            models: vec![M.into()],
            vram_mib: vram,
            bandwidth_mbps: bw,
            max_concurrency: conc,
        }
    }

    fn router(nodes: impl IntoIterator<Item = NodeInfo>) -> Router {
        let mut r = Router::new(Backoff {
            base: SEC,
            cap: 8 * SEC,
        });
        for n in nodes {
            r.upsert_node(n);
        }
        r
    }

    fn pick_id(r: &mut Router, now: Instant) -> Option<String> {
        // Dropping a lease without `finish` keeps its slot reserved, which builds up load.
        r.pick(M, 0, now).map(|l| l.node_id().to_owned())
    }

    #[test]
    fn only_nodes_with_model_and_enough_vram() {
        let t = Instant::now();
        let mut other = node("other-model", 100_000, 1000, 4);
        other.models = vec!["x/other".into()];
        let mut r = router([
            other,
            node("small", 8_000, 1000, 4),
            node("big", 24_000, 10, 4),
        ]);
        let lease = r.pick(M, 16_000, t).unwrap();
        assert_eq!(lease.node_id(), "big");
        r.finish(lease, Outcome::Ok, t);
        assert!(r.pick("x/unknown", 0, t).is_none());
        assert!(r.pick(M, 32_000, t).is_none());
        assert_eq!(r.pick("x/other", 0, t).unwrap().node_id(), "other-model");
    }

    #[test]
    fn least_loaded_relative_to_capacity() {
        let t = Instant::now();
        // Own accounting only. a: capacity 2, high bandwidth; b: capacity 4.
        let mut r = router([node("a", 0, 1000, 2), node("b", 0, 10, 4)]);
        let order: Vec<String> = (0..6).map(|_| pick_id(&mut r, t).unwrap()).collect();
        // 0/2 = 0/4 → a (bandwidth); 1/2 vs 0/4 → b; 1/2 vs 1/4 → b (1/4 beats 1/2);
        // 1/2 = 2/4 → a (bandwidth); a full at 2/2 → b, b.
        assert_eq!(order, ["a", "b", "b", "a", "b", "b"]);
        assert!(r.pick(M, 0, t).is_none());
        assert_eq!(r.node("a").unwrap().in_flight, 2);
        assert_eq!(r.node("b").unwrap().in_flight, 4);
    }

    #[test]
    fn relative_load_beats_absolute_load() {
        let t = Instant::now();
        // big: 3/8 (0.375) vs small: 1/2 (0.5) → big, despite more requests in flight.
        let mut r = router([node("big", 0, 1, 8), node("small", 0, 1, 2)]);
        r.report_load("big", 3);
        r.report_load("small", 1);
        assert_eq!(pick_id(&mut r, t).as_deref(), Some("big"));
    }

    #[test]
    fn never_exceeds_max_concurrency() {
        let t = Instant::now();
        let mut r = router([
            node("a", 0, 1, 2),
            node("b", 0, 1, 3),
            node("zero", 0, 9, 0),
        ]);
        let leases: Vec<Lease> = (0..5).map(|_| r.pick(M, 0, t).unwrap()).collect();
        assert!(r.pick(M, 0, t).is_none(), "all full");
        assert_eq!(r.node("a").unwrap().in_flight, 2);
        assert_eq!(r.node("b").unwrap().in_flight, 3);
        assert_eq!(r.node("zero").unwrap().in_flight, 0);
        assert!(leases.iter().all(|l| l.node_id() != "zero"));
        // Releasing one slot makes exactly that node pickable again.
        let mut leases = leases;
        let a = leases.remove(leases.iter().position(|l| l.node_id() == "a").unwrap());
        r.finish(a, Outcome::Ok, t);
        assert_eq!(r.pick(M, 0, t).unwrap().node_id(), "a");
        assert!(r.pick(M, 0, t).is_none());
    }

    #[test]
    fn a_declared_capacity_is_believed_only_up_to_the_cap() {
        let t = Instant::now();
        let mut r = router([node("greedy", 0, 1000, u32::MAX), node("honest", 0, 1, 2)])
            .with_concurrency_cap(4);
        let order: Vec<String> = (0..6).map(|_| pick_id(&mut r, t).unwrap()).collect();
        // greedy counts as 4 slots, not 4 billion (in relative load too): it takes its 4,
        // honest its 2, interleaved by relative load.
        assert_eq!(
            order,
            ["greedy", "honest", "greedy", "greedy", "honest", "greedy"]
        );
        assert!(r.pick(M, 0, t).is_none());
        assert_eq!(r.node("greedy").unwrap().in_flight, 4);
        // Without a cap the declaration draws all but an idle node's first request.
        let mut r = router([node("greedy", 0, 1000, u32::MAX), node("honest", 0, 1, 2)]);
        let greedy = (0..100)
            .filter(|_| pick_id(&mut r, t).as_deref() == Some("greedy"))
            .count();
        assert_eq!(greedy, 99);
    }

    #[test]
    fn reported_load_counts() {
        let t = Instant::now();
        let mut r = router([node("a", 0, 1000, 2), node("b", 0, 1, 2)]);
        // The node reports itself full (traffic the TA did not route): skipped.
        assert!(r.report_load("a", 2));
        assert_eq!(pick_id(&mut r, t).as_deref(), Some("b"));
        assert_eq!(pick_id(&mut r, t).as_deref(), Some("b"));
        assert!(r.pick(M, 0, t).is_none());
        // Lower report frees it again; own accounting still bounds b.
        r.report_load("a", 0);
        r.report_load("b", 0);
        assert_eq!(pick_id(&mut r, t).as_deref(), Some("a"));
        assert!(!r.report_load("unknown", 1));
    }

    #[test]
    fn failed_node_cools_down_then_returns() {
        let t0 = Instant::now();
        let mut r = router([node("fast", 0, 1000, 4), node("slow", 0, 1, 4)]);
        let lease = r.pick(M, 0, t0).unwrap();
        assert_eq!(lease.node_id(), "fast");
        r.finish(lease, Outcome::Failed, t0);
        let st = r.node("fast").unwrap();
        assert_eq!(st.in_flight, 0);
        assert_eq!(st.consecutive_failures, 1);
        assert_eq!(st.cooldown_until, Some(t0 + SEC));
        // Retry goes elsewhere during the cooldown.
        let retry = r.pick(M, 0, t0 + SEC / 2).unwrap();
        assert_eq!(retry.node_id(), "slow");
        r.finish(retry, Outcome::Ok, t0 + SEC / 2);
        // At the cooldown's end the node is back.
        assert_eq!(r.pick(M, 0, t0 + SEC).unwrap().node_id(), "fast");
    }

    #[test]
    fn only_node_cooling_down_gives_none() {
        let t0 = Instant::now();
        let mut r = router([node("a", 0, 1, 4)]);
        let lease = r.pick(M, 0, t0).unwrap();
        r.finish(lease, Outcome::Failed, t0);
        assert!(r.pick(M, 0, t0).is_none());
        assert!(r.pick(M, 0, t0 + SEC).is_some());
    }

    #[test]
    fn backoff_doubles_and_caps() {
        let b = Backoff {
            base: SEC,
            cap: 8 * SEC,
        };
        let got: Vec<Duration> = (0..7).map(|n| b.cooldown(n)).collect();
        let want = [0, 1, 2, 4, 8, 8, 8].map(Duration::from_secs);
        assert_eq!(got, want);
        assert_eq!(b.cooldown(u32::MAX), 8 * SEC, "no overflow");

        // Through the router: each consecutive failure doubles the cooldown, up to the cap.
        let mut r = router([node("a", 0, 1, 1)]);
        let mut now = Instant::now();
        for expected in [1, 2, 4, 8, 8] {
            let lease = r.pick(M, 0, now).unwrap();
            r.finish(lease, Outcome::Failed, now);
            let until = r.node("a").unwrap().cooldown_until.unwrap();
            assert_eq!(until - now, expected * SEC);
            assert!(r.pick(M, 0, until - Duration::from_millis(1)).is_none());
            now = until;
        }
        assert_eq!(r.node("a").unwrap().consecutive_failures, 5);
    }

    #[test]
    fn success_resets_backoff() {
        let mut r = router([node("a", 0, 1, 1)]);
        let mut now = Instant::now();
        for _ in 0..3 {
            let lease = r.pick(M, 0, now).unwrap();
            r.finish(lease, Outcome::Failed, now);
            now = r.node("a").unwrap().cooldown_until.unwrap();
        }
        let lease = r.pick(M, 0, now).unwrap();
        r.finish(lease, Outcome::Ok, now);
        let st = r.node("a").unwrap();
        assert_eq!(st.consecutive_failures, 0);
        assert_eq!(st.cooldown_until, None);
        // The next failure starts again from the base.
        let lease = r.pick(M, 0, now).unwrap();
        r.finish(lease, Outcome::Failed, now);
        assert_eq!(r.node("a").unwrap().cooldown_until, Some(now + SEC));
    }

    #[test]
    fn ties_by_bandwidth_then_id() {
        let t = Instant::now();
        let mut r = router([
            node("c", 0, 100, 4),
            node("b", 0, 500, 4),
            node("a", 0, 100, 4),
        ]);
        let order: Vec<String> = (0..3).map(|_| pick_id(&mut r, t).unwrap()).collect();
        // All idle: b (highest bandwidth); then a 0/4 vs c 0/4 tie on bandwidth → id "a".
        assert_eq!(order, ["b", "a", "c"]);
        // Equal relative load 1/4 everywhere again: same order.
        let order: Vec<String> = (0..3).map(|_| pick_id(&mut r, t).unwrap()).collect();
        assert_eq!(order, ["b", "a", "c"]);
    }

    #[test]
    fn equal_ratios_compare_exactly() {
        let t = Instant::now();
        // 1/3 vs 2/6 are equal exactly; bandwidth decides.
        let mut r = router([node("three", 0, 1, 3), node("six", 0, 2, 6)]);
        r.report_load("three", 1);
        r.report_load("six", 2);
        assert_eq!(pick_id(&mut r, t).as_deref(), Some("six"));
    }

    #[test]
    fn upsert_keeps_state_and_remove_invalidates_leases() {
        let t = Instant::now();
        let mut r = router([node("a", 0, 1, 2)]);
        let lease = r.pick(M, 0, t).unwrap();
        // Updating info keeps the in-flight count.
        r.upsert_node(node("a", 0, 1, 1));
        assert_eq!(r.node("a").unwrap().in_flight, 1);
        assert!(
            r.pick(M, 0, t).is_none(),
            "new max_concurrency 1 is reached"
        );
        // Removing and re-adding starts fresh; the old lease no longer affects it.
        assert_eq!(r.remove_node("a").map(|i| i.id), Some("a".into()));
        assert!(r.remove_node("a").is_none());
        assert!(r.is_empty());
        r.upsert_node(node("a", 0, 1, 2));
        let fresh = r.pick(M, 0, t).unwrap();
        r.finish(lease, Outcome::Failed, t);
        let st = r.node("a").unwrap();
        assert_eq!((st.in_flight, st.consecutive_failures), (1, 0));
        r.finish(fresh, Outcome::Ok, t);
        assert_eq!(r.node("a").unwrap().in_flight, 0);
        assert_eq!(r.len(), 1);
        assert_eq!(r.nodes().count(), 1);
    }
}
