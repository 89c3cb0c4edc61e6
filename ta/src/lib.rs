//! gonka-ta: the transfer agent (TA). Its pure scheduling core ([`Router`], [`WaitQueue`]:
//! which ML node gets a request, and who waits) and, on top of it, the HTTP front: request
//! authentication ([`auth`]), the OpenAI-compatible server ([`server`]), the payload store
//! validators fetch from ([`payloads`]), settlement of work records on chain ([`settle`];
//! committed batches co-signed by the hosts: [`commit`], [`committer`], paid from escrows
//! the TA keeps a view of: [`escrow`]),
//! the reveals of record outputs the chain asks for ([`reveal`]),
//! the chain registry of nodes ([`registry`]) and the background refresh ([`background`]),
//! and its command line ([`cli`]: `gonka-sidecar transfer-agent`). It calls ML nodes with
//! the byte-relaying HTTP client of `gonka_client::http`.
//!
//! The TA receives OpenAI requests and forwards each one to an ML node. `routing` and `queue` hold
//! only the decisions, with no HTTP, no chain and no clock: every time-dependent call takes the
//! current [`Instant`](std::time::Instant) as an argument, so behaviour is deterministic and
//! testable.
//!
//! # Routing policy ([`Router`])
//!
//! For a request for model `m` needing at least `v` MiB of VRAM, a node is *eligible* when:
//!
//! 1. it serves `m` and has `vram_mib >= v`;
//! 2. it is not cooling down after a failure (`now >= cooldown_until`);
//! 3. its load is strictly below its `max_concurrency`, where the load is
//!    `max(own in-flight, reported in-flight)`: the TA's own accounting of leases it handed out,
//!    and the last in-flight count the node reported itself (which also covers traffic the TA
//!    does not see). A node with `max_concurrency == 0` is never eligible. So the TA never
//!    sends a node more than `max_concurrency` requests at once, and never more than the
//!    TA's own cap ([`Router::with_concurrency_cap`]) whatever the node declares: a node
//!    declaring `u32::MAX` counts as the cap, in eligibility and in relative load alike.
//!
//! Among eligible nodes the one with the smallest *relative* load `load / max_concurrency` wins,
//! compared exactly by integer cross-multiplication (no floats), so 1/4 beats 1/2. Ties go to the
//! higher `bandwidth_mbps`, then to the smaller node id, so the choice is fully deterministic.
//! Picking reserves a slot (own in-flight += 1) and returns a [`Lease`], which must be handed back
//! through [`Router::finish`] with the [`Outcome`].
//!
//! A [`Outcome::Failed`] puts the node in cooldown with exponential backoff:
//! `min(base * 2^(consecutive_failures - 1), cap)` (see [`Backoff`]), so a retry picks another
//! node. An [`Outcome::Ok`] resets the failure count and clears the cooldown.
//!
//! # Per-requester rate limit ([`RateLimiter`])
//!
//! Before a request takes a node slot or a queue place, its (authenticated) requester spends
//! a token of its bucket; an empty bucket is 429 `rate_limit_exceeded` with `Retry-After`.
//! See [`ratelimit`].
//!
//! # Waiting policy ([`WaitQueue`])
//!
//! When no node is eligible the request waits in a bounded queue ordered by commission (higher
//! first), then by arrival (first in, first out). A full queue rejects new requests with
//! [`QueueFull`] (handing the request back); a waiting request can be withdrawn by its
//! [`Ticket`] on timeout or cancellation.
//!
//! [`Router`]: crate::Router
//! [`Lease`]: crate::Lease
//! [`Router::finish`]: crate::Router::finish
//! [`Outcome`]: crate::Outcome
//! [`Outcome::Ok`]: crate::Outcome::Ok
//! [`Outcome::Failed`]: crate::Outcome::Failed
//! [`Backoff`]: crate::Backoff
//! [`RateLimiter`]: crate::RateLimiter
//! [`Router::with_concurrency_cap`]: crate::Router::with_concurrency_cap
//! [`WaitQueue`]: crate::WaitQueue
//! [`QueueFull`]: crate::QueueFull
//! [`Ticket`]: crate::Ticket

pub mod auth;
pub mod background;
pub mod cli;
pub mod commit;
pub mod committer;
pub mod demands;
pub mod escrow;
pub mod journal;
pub mod leaves;
pub mod metrics;
pub mod payloads;
pub mod queue;
pub mod ratelimit;
pub mod recorder;
pub mod registry;
pub mod reveal;
pub mod routing;
pub mod server;
pub mod settle;

/// Wall-clock source in unix seconds (replaceable in tests).
pub type Clock = std::sync::Arc<dyn Fn() -> u64 + Send + Sync>;

/// Locks `m`, going on with the data of a thread that panicked while holding it.
pub(crate) fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

pub use queue::{QueueFull, Ticket, WaitQueue};
pub use ratelimit::{RateLimit, RateLimiter};
pub use registry::Registry;
pub use routing::{Backoff, Lease, NodeInfo, NodeStatus, Outcome, Router};
pub use server::{TaConfig, TaNodeConfig, TransferAgent};
