//! The per-requester rate limit: how many requests one requester address may make, so that
//! one account cannot take every ML node slot and queue place of a transfer agent.
//!
//! Each requester has a token bucket of [`RateLimit::burst`] requests, refilled at
//! [`RateLimit::per_second`]; a request finding it empty is refused (429 `rate_limit_exceeded`
//! with `Retry-After`). The buckets are kept as the GCRA's one instant per requester (when its
//! bucket would be full again), in a map bounded by [`RateLimit::requesters`]: beyond it the
//! requester seen least recently is forgotten (it comes back with a full bucket, which only
//! happens while that many other requesters are active). Like the router, it never reads the
//! clock: every call takes `now`.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// Settings of the per-requester rate limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimit {
    /// Requests one requester may make per second, sustained; 0 turns the limit off.
    pub per_second: u32,
    /// Requests one requester may make at once after a pause (the bucket size, at least 1).
    pub burst: u32,
    /// Requesters tracked at once; beyond, the one seen least recently is forgotten.
    pub requesters: usize,
}

impl Default for RateLimit {
    /// 20 requests per second with bursts of 40, for up to 100,000 requesters.
    fn default() -> Self {
        Self {
            per_second: 20,
            burst: 40,
            requesters: 100_000,
        }
    }
}

/// A refused request: how long until the requester may make another one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limited {
    /// Until the bucket holds a request again.
    pub retry_after: Duration,
}

impl Limited {
    /// [`Limited::retry_after`] in whole seconds, rounded up (as `Retry-After` says it), at
    /// least 1.
    pub fn retry_after_secs(&self) -> u32 {
        let secs = self.retry_after.as_secs() + u64::from(self.retry_after.subsec_nanos() > 0);
        u32::try_from(secs.max(1)).unwrap_or(u32::MAX)
    }
}

#[derive(Debug)]
struct Bucket {
    /// When the bucket is full again ("theoretical arrival time"); before `now` means full.
    full_at: Instant,
    /// This requester's place in the recency order.
    seen: u64,
}

/// The buckets of every requester seen recently.
#[derive(Debug)]
pub struct RateLimiter {
    limit: RateLimit,
    buckets: BTreeMap<String, Bucket>,
    /// Requesters by when they were last seen (a counter), oldest first.
    recency: BTreeMap<u64, String>,
    next_seen: u64,
}

impl RateLimiter {
    /// A limiter with no requester seen yet.
    pub fn new(limit: RateLimit) -> Self {
        Self {
            limit,
            buckets: BTreeMap::new(),
            recency: BTreeMap::new(),
            next_seen: 0,
        }
    }

    /// Requesters tracked now.
    pub fn tracked(&self) -> usize {
        self.buckets.len()
    }

    /// Takes one request from `requester`'s bucket at `now`, or says how long to wait.
    pub fn admit(&mut self, requester: &str, now: Instant) -> Result<(), Limited> {
        if self.limit.per_second == 0 {
            return Ok(());
        }
        // One request's worth of refill, and how far ahead of `now` the bucket may be
        // spent: burst - 1 requests beyond the one being made.
        let interval = Duration::from_secs(1) / self.limit.per_second;
        let tolerance = interval * self.limit.burst.max(1).saturating_sub(1);
        let seen = self.next_seen;
        self.next_seen += 1;
        let full_at = match self.buckets.get_mut(requester) {
            Some(bucket) => {
                self.recency.remove(&bucket.seen);
                bucket.seen = seen;
                bucket.full_at.max(now)
            }
            None => {
                if self.buckets.len() >= self.limit.requesters.max(1) {
                    if let Some((_, oldest)) = self.recency.pop_first() {
                        self.buckets.remove(&oldest);
                    }
                }
                self.buckets
                    .insert(requester.to_string(), Bucket { full_at: now, seen });
                now
            }
        };
        self.recency.insert(seen, requester.to_string());
        let bucket = self.buckets.get_mut(requester).expect("inserted above");
        let ahead = full_at - now;
        if ahead > tolerance {
            bucket.full_at = full_at;
            return Err(Limited {
                retry_after: ahead - tolerance,
            });
        }
        bucket.full_at = full_at + interval;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limiter(per_second: u32, burst: u32, requesters: usize) -> RateLimiter {
        RateLimiter::new(RateLimit {
            per_second,
            burst,
            requesters,
        })
    }

    #[test]
    fn a_burst_then_the_sustained_rate() {
        let mut l = limiter(10, 3, 10);
        let t = Instant::now();
        for _ in 0..3 {
            assert_eq!(l.admit("a", t), Ok(()));
        }
        let refused = l.admit("a", t).unwrap_err();
        assert_eq!(refused.retry_after, Duration::from_millis(100));
        assert_eq!(refused.retry_after_secs(), 1);
        // Another requester has its own bucket.
        assert_eq!(l.admit("b", t), Ok(()));
        // One refill later, exactly one more.
        let t1 = t + Duration::from_millis(100);
        assert_eq!(l.admit("a", t1), Ok(()));
        assert!(l.admit("a", t1).is_err());
        // A long pause refills the bucket, never beyond the burst.
        let t2 = t1 + Duration::from_secs(60);
        for _ in 0..3 {
            assert_eq!(l.admit("a", t2), Ok(()));
        }
        assert!(l.admit("a", t2).is_err());
    }

    #[test]
    fn refused_requests_do_not_spend_the_bucket() {
        let mut l = limiter(1, 1, 10);
        let t = Instant::now();
        assert_eq!(l.admit("a", t), Ok(()));
        for ms in [0, 100, 500, 999] {
            assert!(l.admit("a", t + Duration::from_millis(ms)).is_err());
        }
        assert_eq!(l.admit("a", t + Duration::from_secs(1)), Ok(()));
    }

    #[test]
    fn the_least_recently_seen_requester_is_forgotten() {
        let mut l = limiter(1, 1, 2);
        let t = Instant::now();
        assert_eq!(l.admit("a", t), Ok(()));
        assert_eq!(l.admit("b", t), Ok(()));
        assert!(
            l.admit("a", t).is_err(),
            "a is seen again, b is now the oldest"
        );
        assert_eq!(l.admit("c", t), Ok(()));
        assert_eq!(l.tracked(), 2);
        // b was forgotten: it comes back with a full bucket (and a, now the oldest, goes).
        assert_eq!(l.admit("b", t), Ok(()));
        assert_eq!(l.tracked(), 2);
        assert!(l.admit("b", t).is_err());
    }

    #[test]
    fn zero_per_second_is_off() {
        let mut l = limiter(0, 0, 0);
        let t = Instant::now();
        for _ in 0..1000 {
            assert_eq!(l.admit("a", t), Ok(()));
        }
        assert_eq!(l.tracked(), 0);
    }
}
