//! Bounded wait queue for requests that found no free ML node.
//!
//! Ordered by commission (higher first), then arrival order (FIFO). Backed by a [`BTreeMap`]
//! keyed by `(Reverse(commission), sequence)`, so iteration order is fully deterministic.

use std::cmp::Reverse;
use std::collections::BTreeMap;
use std::fmt;

/// Handle to a queued request, used to withdraw it (timeout or cancellation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Ticket {
    commission: u64,
    seq: u64,
}

impl Ticket {
    /// The commission the request was queued with.
    pub fn commission(&self) -> u64 {
        self.commission
    }

    /// The arrival sequence number (unique within one queue, increasing).
    pub fn sequence(&self) -> u64 {
        self.seq
    }

    fn key(&self) -> (Reverse<u64>, u64) {
        (Reverse(self.commission), self.seq)
    }
}

/// The queue was at capacity; the rejected item is handed back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueFull<T> {
    /// The item that was not queued.
    pub item: T,
    /// The queue's capacity at the time.
    pub capacity: usize,
}

impl<T> fmt::Display for QueueFull<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "wait queue is full (capacity {})", self.capacity)
    }
}

impl<T: fmt::Debug> std::error::Error for QueueFull<T> {}

/// Bounded priority queue: highest commission first, then first come first served.
#[derive(Debug, Clone)]
pub struct WaitQueue<T> {
    entries: BTreeMap<(Reverse<u64>, u64), T>,
    capacity: usize,
    next_seq: u64,
}

impl<T> WaitQueue<T> {
    /// An empty queue holding at most `capacity` items (0 rejects everything).
    pub fn new(capacity: usize) -> Self {
        Self {
            entries: BTreeMap::new(),
            capacity,
            next_seq: 0,
        }
    }

    /// Queue `item` with `commission`; fails with the item handed back when full.
    pub fn push(&mut self, item: T, commission: u64) -> Result<Ticket, QueueFull<T>> {
        if self.entries.len() >= self.capacity {
            return Err(QueueFull {
                item,
                capacity: self.capacity,
            });
        }
        let ticket = Ticket {
            commission,
            seq: self.next_seq,
        };
        self.next_seq += 1;
        self.entries.insert(ticket.key(), item);
        Ok(ticket)
    }

    /// Take the best item: highest commission, earliest arrival among equals.
    pub fn pop(&mut self) -> Option<T> {
        self.pop_with_ticket().map(|(_, item)| item)
    }

    /// Like [`pop`](Self::pop), also returning the item's ticket.
    pub fn pop_with_ticket(&mut self) -> Option<(Ticket, T)> {
        self.entries
            .pop_first()
            .map(|((Reverse(commission), seq), item)| (Ticket { commission, seq }, item))
    }

    /// The item [`pop`](Self::pop) would return, without removing it.
    pub fn peek(&self) -> Option<&T> {
        self.entries.values().next()
    }

    /// Withdraw the item queued under `ticket`; `None` if it already left the queue.
    pub fn remove(&mut self, ticket: Ticket) -> Option<T> {
        self.entries.remove(&ticket.key())
    }

    /// Whether the item queued under `ticket` is still waiting.
    pub fn contains(&self, ticket: Ticket) -> bool {
        self.entries.contains_key(&ticket.key())
    }

    /// Number of waiting items.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether nothing is waiting.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Whether a [`push`](Self::push) would be rejected.
    pub fn is_full(&self) -> bool {
        self.entries.len() >= self.capacity
    }

    /// Maximum number of waiting items.
    pub fn capacity(&self) -> usize {
        self.capacity
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain(q: &mut WaitQueue<&'static str>) -> Vec<&'static str> {
        std::iter::from_fn(|| q.pop()).collect()
    }

    #[test]
    fn orders_by_commission_then_arrival() {
        let mut q = WaitQueue::new(10);
        q.push("low-1", 1).unwrap();
        q.push("high-1", 5).unwrap();
        q.push("mid-1", 3).unwrap();
        q.push("high-2", 5).unwrap();
        q.push("low-2", 1).unwrap();
        q.push("mid-2", 3).unwrap();
        assert_eq!(q.len(), 6);
        assert_eq!(q.peek(), Some(&"high-1"));
        assert_eq!(
            drain(&mut q),
            ["high-1", "high-2", "mid-1", "mid-2", "low-1", "low-2"]
        );
        assert!(q.is_empty());
        assert_eq!(q.pop(), None);
    }

    #[test]
    fn fifo_continues_across_pops() {
        let mut q = WaitQueue::new(10);
        q.push("a", 2).unwrap();
        q.push("b", 2).unwrap();
        assert_eq!(q.pop(), Some("a"));
        q.push("c", 2).unwrap();
        assert_eq!(drain(&mut q), ["b", "c"]);
    }

    #[test]
    fn full_queue_rejects_and_returns_item() {
        let mut q = WaitQueue::new(2);
        assert_eq!(q.capacity(), 2);
        q.push("a", 1).unwrap();
        q.push("b", 1).unwrap();
        assert!(q.is_full());
        let err = q.push("c", 100).unwrap_err();
        assert_eq!(
            err,
            QueueFull {
                item: "c",
                capacity: 2
            }
        );
        assert_eq!(err.to_string(), "wait queue is full (capacity 2)");
        assert_eq!(q.len(), 2);
        // Space frees up after a pop.
        q.pop().unwrap();
        assert!(q.push("c", 100).is_ok());
    }

    #[test]
    fn zero_capacity_rejects_everything() {
        let mut q = WaitQueue::new(0);
        assert!(q.is_full());
        assert!(q.push("a", 1).is_err());
        assert!(q.is_empty());
    }

    #[test]
    fn remove_by_ticket() {
        let mut q = WaitQueue::new(10);
        let a = q.push("a", 1).unwrap();
        let b = q.push("b", 7).unwrap();
        let c = q.push("c", 1).unwrap();
        assert_eq!(b.commission(), 7);
        assert!(a.sequence() < c.sequence());
        assert!(q.contains(b));
        assert_eq!(q.remove(b), Some("b"));
        assert!(!q.contains(b));
        assert_eq!(q.remove(b), None, "second remove is a no-op");
        assert_eq!(q.len(), 2);
        assert_eq!(q.pop_with_ticket(), Some((a, "a")));
        assert_eq!(q.remove(a), None, "popped items cannot be removed");
        assert_eq!(q.remove(c), Some("c"));
        assert!(q.is_empty());
    }
}
