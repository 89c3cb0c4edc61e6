//! The duty pool: a proposer's own list of the duty transactions it has checked, which its
//! proposals carry first.
//!
//! A duty is work the chain asked of its sender by a deadline and punishes missing
//! ([`gonka_sdk::Msg::is_duty`]: output reveals, dispute votes, validations, demanded leaves,
//! DKG messages, checkpoints and their verifications). CometBFT's mempool reaps in arrival
//! order, so whoever fills blocks with cheap transactions (a full block costs about 0.002 GNK)
//! could push a reveal past its deadline and have an honest transfer agent slashed for
//! withholding. Every transaction whose messages are all duties and that passes `CheckTx` is
//! also kept here; `PrepareProposal` puts them first, oldest first, in up to
//! [`DUTY_SHARE_DIVISOR`]⁻¹ of the block's bytes, then the mempool's transactions it has not
//! already placed. Only the parties a duty is asked of can send one (`CheckTx` runs the
//! messages), and the pool is bounded ([`MAX_DUTY_TXS`], [`MAX_DUTY_BYTES`],
//! [`DUTY_TTL_BLOCKS`]), so strangers cannot fill it.
//!
//! The pool is node-local and only shapes this node's proposals: `ProcessProposal` does not
//! look at it, and the state machine's results do not depend on it.

use std::collections::BTreeMap;

use sha2::{Digest, Sha256};

/// The share of a block's bytes duties are sure of: one part in this many.
pub const DUTY_SHARE_DIVISOR: u64 = 4;
/// Most transactions the pool holds; past it, a duty waits in the mempool like any other.
pub const MAX_DUTY_TXS: usize = 4_096;
/// Most bytes the pool holds.
pub const MAX_DUTY_BYTES: usize = 8 << 20;
/// Blocks a duty stays in the pool without being included (it is rechecked meanwhile and
/// dropped when it fails).
pub const DUTY_TTL_BLOCKS: u64 = 100;

struct Entry {
    hash: [u8; 32],
    tx: Vec<u8>,
    admitted: u64,
}

/// The duty transactions a node has checked, in the order it admitted them.
#[derive(Default)]
pub(crate) struct DutyPool {
    by_order: BTreeMap<u64, Entry>,
    order_of: BTreeMap<[u8; 32], u64>,
    next: u64,
    bytes: usize,
}

fn tx_hash(tx: &[u8]) -> [u8; 32] {
    Sha256::digest(tx).into()
}

impl DutyPool {
    /// Keeps `tx`, a duty `CheckTx` accepted at `height`, unless already held or full.
    pub(crate) fn admit(&mut self, tx: &[u8], height: u64) {
        let hash = tx_hash(tx);
        if self.order_of.contains_key(&hash)
            || self.by_order.len() >= MAX_DUTY_TXS
            || self.bytes + tx.len() > MAX_DUTY_BYTES
        {
            return;
        }
        let order = self.next;
        self.next += 1;
        self.bytes += tx.len();
        self.order_of.insert(hash, order);
        self.by_order.insert(
            order,
            Entry {
                hash,
                tx: tx.to_vec(),
                admitted: height,
            },
        );
    }

    /// Drops `tx` (it failed a recheck, or was included). Hashes nothing while the pool is
    /// empty, as it is on every node most of the time.
    pub(crate) fn forget(&mut self, tx: &[u8]) {
        if !self.order_of.is_empty() {
            self.remove(&tx_hash(tx));
        }
    }

    fn remove(&mut self, hash: &[u8; 32]) {
        if let Some(order) = self.order_of.remove(hash) {
            if let Some(entry) = self.by_order.remove(&order) {
                self.bytes -= entry.tx.len();
            }
        }
    }

    /// After block `height` with `txs`: drops what it included and what waited longer than
    /// [`DUTY_TTL_BLOCKS`].
    pub(crate) fn settle_block(&mut self, height: u64, txs: &[impl AsRef<[u8]>]) {
        for tx in txs {
            self.forget(tx.as_ref());
        }
        let expired: Vec<[u8; 32]> = self
            .by_order
            .values()
            .take_while(|e| e.admitted + DUTY_TTL_BLOCKS < height)
            .map(|e| e.hash)
            .collect();
        for hash in &expired {
            self.remove(hash);
        }
    }

    /// The oldest duties that fit in `budget` bytes, none larger than `max_tx`.
    pub(crate) fn proposal(&self, budget: u64, max_tx: u64) -> Vec<Vec<u8>> {
        let mut left = budget;
        let mut txs = Vec::new();
        for entry in self.by_order.values() {
            let size = entry.tx.len() as u64;
            if size <= max_tx && size <= left {
                left -= size;
                txs.push(entry.tx.clone());
            }
        }
        txs
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duties_are_proposed_oldest_first_within_the_budget_and_leave_when_settled() {
        let mut pool = DutyPool::default();
        pool.admit(b"first duty", 1);
        pool.admit(b"second, longer duty", 1);
        pool.admit(b"first duty", 2);
        assert_eq!(
            pool.proposal(1_000, 1_000),
            vec![b"first duty".to_vec(), b"second, longer duty".to_vec()],
            "once each, in the order admitted"
        );
        assert_eq!(pool.proposal(12, 1_000), vec![b"first duty".to_vec()]);
        assert_eq!(pool.proposal(1_000, 12), vec![b"first duty".to_vec()]);
        pool.settle_block(2, &[b"first duty".to_vec()]);
        assert_eq!(
            pool.proposal(1_000, 1_000),
            vec![b"second, longer duty".to_vec()]
        );
        pool.forget(b"second, longer duty");
        assert!(pool.proposal(1_000, 1_000).is_empty());
        assert_eq!(pool.bytes, 0);
    }

    #[test]
    fn the_pool_is_bounded_and_forgets_what_waited_too_long() {
        let mut pool = DutyPool::default();
        for i in 0..MAX_DUTY_TXS + 10 {
            pool.admit(format!("duty {i}").as_bytes(), 5);
        }
        assert_eq!(
            pool.by_order.len(),
            MAX_DUTY_TXS,
            "full: the rest wait in the mempool"
        );
        pool.admit(b"late", 6);
        pool.settle_block(5 + DUTY_TTL_BLOCKS, &[] as &[Vec<u8>]);
        assert_eq!(pool.by_order.len(), MAX_DUTY_TXS, "not expired yet");
        pool.settle_block(6 + DUTY_TTL_BLOCKS, &[] as &[Vec<u8>]);
        assert!(pool.by_order.is_empty(), "every one waited too long");
        assert_eq!(pool.bytes, 0);
        let huge = vec![0u8; MAX_DUTY_BYTES + 1];
        pool.admit(&huge, 7);
        assert!(pool.by_order.is_empty(), "bounded in bytes too");
    }
}
