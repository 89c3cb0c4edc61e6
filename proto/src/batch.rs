//! The Merkle sum tree of a settled batch, shared by the chain (which checks proofs in
//! challenges), transfer agents (which build trees and serve proofs) and validators and
//! requesters (who check the leaves they fetch).
//!
//! Every node is a hash and two sums: of charges (ngnk, u128) and of work units (u64):
//! - a leaf is `(SHA-256(0x00 ‖ protobuf BatchLeaf), cost + commission, its work)`, its work
//!   being [`record_work`] of its record at its `work_per_token`;
//! - a parent is `(SHA-256(0x01 ‖ left.hash ‖ left.sum ‖ left.work ‖ right.hash ‖ right.sum ‖
//!   right.work), left.sum + right.sum, left.work + right.work)` with charge sums as 16 and
//!   work sums as 8 big-endian bytes, so a parent's hash commits to its children's sums;
//! - each level pairs nodes left to right; an odd last node is carried up unchanged (never
//!   duplicated, which would count its sum twice).
//!
//! The batch's *root* is `SHA-256(0x02 ‖ leaf count (8 bytes) ‖ top.hash ‖ top.sum ‖
//! top.work)`: it binds the number of leaves (so every position has one proof shape), the
//! total charge and the total work (which the batch's host lines must add up to). A
//! tree built by someone else may record a sum for a node that is not its children's: such a
//! node is a fraud provable by its path and its children ([`root_of_path`] accepts any
//! claimed node, so the chain can check the claim that was signed).
//!
//! A proof of the node at `(level, index)` in a tree of `count` leaves is the list of its
//! ancestors' siblings from the bottom up, skipping the levels where it is carried up.
//! Walking it also yields the node's *prefix*: the sum of every leaf left of it, so two leaf
//! proofs give the exact sum of the leaves between them.

use sha2::{Digest, Sha256};

use crate::inference::WorkRecord;
use crate::settlement::{BatchLeaf, MsgSettleBatch, SumNode as SumNodeProto};

/// Most levels above the leaves: trees hold at most 2^32 leaves.
pub const MAX_DEPTH: u32 = 32;

/// A node of a sum tree.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SumNode {
    /// The node's hash.
    pub hash: [u8; 32],
    /// The sum of the charges below it, as recorded.
    pub sum: u128,
    /// The sum of the work units below it, as recorded.
    pub work: u64,
}

impl SumNode {
    /// The wire form.
    pub fn to_proto(&self) -> SumNodeProto {
        SumNodeProto {
            hash: self.hash.to_vec(),
            sum: self.sum.to_string(),
            work: self.work,
        }
    }

    /// From the wire form; `None` unless the hash is 32 bytes and the sum a canonical decimal.
    pub fn from_proto(node: &SumNodeProto) -> Option<SumNode> {
        Some(SumNode {
            hash: node.hash.as_slice().try_into().ok()?,
            sum: parse_decimal(&node.sum)?,
            work: node.work,
        })
    }
}

/// The work units `record` credits its host: its prompt and completion tokens times its
/// model's `work_per_token` (0 counts as 1, a reference-model token); `None` on overflow.
/// A host's running `host_work` in a batch adds these up.
pub fn record_work(record: &WorkRecord, work_per_token: u64) -> Option<u64> {
    record
        .prompt_tokens
        .checked_add(record.completion_tokens)?
        .checked_mul(work_per_token.max(1))
}

/// A canonical decimal u128 (no sign, no leading zeros except "0").
pub fn parse_decimal(text: &str) -> Option<u128> {
    let canonical = !text.is_empty()
        && text.len() <= 39
        && text.bytes().all(|b| b.is_ascii_digit())
        && (text == "0" || !text.starts_with('0'));
    canonical.then(|| text.parse().ok()).flatten()
}

/// A leaf's charge to its requester: `cost + commission`; `None` if either is not a
/// canonical decimal or the sum overflows.
pub fn leaf_charge(leaf: &BatchLeaf) -> Option<u128> {
    let commission = parse_decimal(&leaf.record.as_ref()?.commission)?;
    parse_decimal(&leaf.cost)?.checked_add(commission)
}

/// The hash of a leaf: SHA-256(0x00 ‖ its protobuf encoding).
pub fn leaf_hash(leaf: &BatchLeaf) -> [u8; 32] {
    let mut hasher = Sha256::new();
    hasher.update([0u8]);
    hasher.update(prost::Message::encode_to_vec(leaf));
    hasher.finalize().into()
}

/// A leaf's work units: [`record_work`] of its record at its `work_per_token`; `None` without
/// a record or on overflow.
pub fn leaf_work(leaf: &BatchLeaf) -> Option<u64> {
    record_work(leaf.record.as_ref()?, leaf.work_per_token)
}

/// A leaf's node: its hash, its charge and its work; `None` if the charge is malformed or
/// the work overflows.
pub fn leaf_node(leaf: &BatchLeaf) -> Option<SumNode> {
    Some(SumNode {
        hash: leaf_hash(leaf),
        sum: leaf_charge(leaf)?,
        work: leaf_work(leaf)?,
    })
}

/// The hash a parent of `left` and `right` has.
pub fn parent_hash(left: &SumNode, right: &SumNode) -> [u8; 32] {
    let mut hasher = Sha256::new();
    hasher.update([1u8]);
    hasher.update(left.hash);
    hasher.update(left.sum.to_be_bytes());
    hasher.update(left.work.to_be_bytes());
    hasher.update(right.hash);
    hasher.update(right.sum.to_be_bytes());
    hasher.update(right.work.to_be_bytes());
    hasher.finalize().into()
}

/// The parent of `left` and `right`; `None` if their sums overflow.
pub fn parent(left: &SumNode, right: &SumNode) -> Option<SumNode> {
    Some(SumNode {
        hash: parent_hash(left, right),
        sum: left.sum.checked_add(right.sum)?,
        work: left.work.checked_add(right.work)?,
    })
}

/// Number of nodes at `level` of a tree of `count` leaves.
fn width(count: u64, level: u32) -> u64 {
    // ceil(count / 2^level) without overflow.
    if level >= 64 {
        return u64::from(count > 0);
    }
    let shifted = count >> level;
    shifted + u64::from(shifted << level != count)
}

/// A whole tree, level by level (level 0: the leaves).
#[derive(Clone, Debug)]
pub struct SumTree {
    levels: Vec<Vec<SumNode>>,
}

impl SumTree {
    /// Builds the tree over `leaves`; `None` if there are none, more than 2^32, or a sum
    /// overflows.
    pub fn build(leaves: Vec<SumNode>) -> Option<SumTree> {
        if leaves.is_empty() || leaves.len() as u64 > 1 << MAX_DEPTH {
            return None;
        }
        let mut levels = vec![leaves];
        while levels.last()?.len() > 1 {
            let below = levels.last()?;
            let mut above = Vec::with_capacity(below.len().div_ceil(2));
            for pair in below.chunks(2) {
                above.push(match pair {
                    [left, right] => parent(left, right)?,
                    [single] => *single,
                    _ => unreachable!("chunks of two"),
                });
            }
            levels.push(above);
        }
        Some(SumTree { levels })
    }

    /// The top node.
    pub fn top(&self) -> SumNode {
        self.levels.last().expect("a tree has a level")[0]
    }

    /// The committed root ([`commitment`]).
    pub fn root(&self) -> [u8; 32] {
        commitment(self.len(), &self.top())
    }

    /// What a batch of this tree commits to.
    pub fn committed(&self) -> Committed {
        let top = self.top();
        Committed {
            root: self.root(),
            total: top.sum,
            work: top.work,
            count: self.len(),
        }
    }

    /// Number of levels above the leaves.
    pub fn height(&self) -> u32 {
        (self.levels.len() - 1) as u32
    }

    /// Number of leaves.
    pub fn len(&self) -> u64 {
        self.levels[0].len() as u64
    }

    /// Always false: a tree has at least one leaf.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The node at `(level, index)`.
    pub fn node(&self, level: u32, index: u64) -> Option<SumNode> {
        let row = self.levels.get(level as usize)?;
        row.get(usize::try_from(index).ok()?).copied()
    }

    /// The proof of the node at `(level, index)`: its ancestors' siblings, bottom up.
    pub fn proof(&self, level: u32, index: u64) -> Option<Vec<SumNode>> {
        self.node(level, index)?;
        let mut siblings = Vec::new();
        let mut index = index;
        for row in &self.levels[level as usize..self.levels.len() - 1] {
            let sibling = index ^ 1;
            if let Some(node) = row.get(sibling as usize) {
                siblings.push(*node);
            }
            index /= 2;
        }
        Some(siblings)
    }
}

/// The committed root of a tree of `count` leaves whose top node is `top`.
pub fn commitment(count: u64, top: &SumNode) -> [u8; 32] {
    let mut hasher = Sha256::new();
    hasher.update([2u8]);
    hasher.update(count.to_be_bytes());
    hasher.update(top.hash);
    hasher.update(top.sum.to_be_bytes());
    hasher.update(top.work.to_be_bytes());
    hasher.finalize().into()
}

/// What a batch commits its tree to: the root, the total charge and the total work.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Committed {
    /// The root ([`commitment`]).
    pub root: [u8; 32],
    /// The top node's charge sum.
    pub total: u128,
    /// The top node's work sum.
    pub work: u64,
    /// Number of leaves.
    pub count: u64,
}

impl Committed {
    /// What `msg` commits to; `None` if its root is not 32 bytes or its total no canonical
    /// decimal.
    pub fn of(msg: &MsgSettleBatch) -> Option<Committed> {
        Some(Committed {
            root: msg.root.as_slice().try_into().ok()?,
            total: parse_decimal(&msg.total)?,
            work: msg.total_work,
            count: msg.record_count,
        })
    }
}

/// Checks that `node`, claimed at `(level, index)` of the batch `batch` commits to, is on
/// its tree through `siblings`; returns its prefix.
pub fn verify_path(
    batch: &Committed,
    level: u32,
    index: u64,
    node: SumNode,
    siblings: &[SumNode],
) -> Option<u128> {
    let (top, prefix) = root_of_path(batch.count, level, index, node, siblings)?;
    let committed = top.sum == batch.total
        && top.work == batch.work
        && commitment(batch.count, &top) == batch.root;
    committed.then_some(prefix)
}

/// The top node reached from `node`, claimed to be at `(level, index)` of a tree of `count`
/// leaves, through `siblings`, and the node's prefix (the sum of every leaf left of it);
/// `None` if the position is outside the tree, the proof has the wrong length, or a sum
/// overflows. The caller compares the root with the committed one.
pub fn root_of_path(
    count: u64,
    level: u32,
    index: u64,
    node: SumNode,
    siblings: &[SumNode],
) -> Option<(SumNode, u128)> {
    if count == 0 || count > 1 << MAX_DEPTH || level > MAX_DEPTH {
        return None;
    }
    if index >= width(count, level) {
        return None;
    }
    let (mut current, mut index, mut prefix) = (node, index, 0u128);
    let mut siblings = siblings.iter();
    let mut level = level;
    while width(count, level) > 1 {
        let row = width(count, level);
        if index % 2 == 1 {
            let left = siblings.next()?;
            prefix = prefix.checked_add(left.sum)?;
            current = parent(left, &current)?;
        } else if index + 1 < row {
            current = parent(&current, siblings.next()?)?;
        }
        index /= 2;
        level += 1;
    }
    siblings.next().is_none().then_some((current, prefix))
}

/// Decodes a wire proof's siblings; `None` if one is malformed or there are more than
/// [`MAX_DEPTH`].
pub fn siblings_from_proto(siblings: &[SumNodeProto]) -> Option<Vec<SumNode>> {
    if siblings.len() > MAX_DEPTH as usize {
        return None;
    }
    siblings.iter().map(SumNode::from_proto).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Leaves charging `sums`, each with twice its charge in work.
    fn leaves(sums: &[u128]) -> Vec<SumNode> {
        sums.iter()
            .enumerate()
            .map(|(i, sum)| SumNode {
                hash: Sha256::digest((i as u64).to_be_bytes()).into(),
                sum: *sum,
                work: 2 * *sum as u64,
            })
            .collect()
    }

    #[test]
    fn every_leaf_and_node_proves_its_place_and_prefix() {
        for count in 1..=17u64 {
            let sums: Vec<u128> = (1..=count as u128).map(|i| i * 10).collect();
            let tree = SumTree::build(leaves(&sums)).unwrap();
            let committed = tree.committed();
            assert_eq!(committed.total, sums.iter().sum::<u128>());
            assert_eq!(u128::from(committed.work), 2 * committed.total);
            for level in 0..=tree.height() {
                for index in 0..width(count, level) {
                    let node = tree.node(level, index).unwrap();
                    let proof = tree.proof(level, index).unwrap();
                    let prefix = verify_path(&committed, level, index, node, &proof);
                    let prefix = prefix.expect("an honest proof verifies");
                    if level == 0 {
                        assert_eq!(prefix, sums[..index as usize].iter().sum::<u128>());
                    }
                }
            }
        }
    }

    #[test]
    fn a_changed_leaf_sum_or_position_does_not_reach_the_root() {
        let tree = SumTree::build(leaves(&[5, 6, 7, 8, 9])).unwrap();
        let committed = tree.committed();
        let proof = tree.proof(0, 2).unwrap();
        let mut node = tree.node(0, 2).unwrap();
        let verify = |count, index, node, proof: &[SumNode]| {
            verify_path(&Committed { count, ..committed }, 0, index, node, proof)
        };
        assert_eq!(verify(5, 2, node, &proof), Some(11));
        assert_eq!(verify(5, 3, node, &proof), None);
        assert_eq!(verify(5, 5, node, &proof), None);
        // Same proof shape, but the count is committed.
        assert_eq!(verify(6, 2, node, &proof), None);
        // So are both totals.
        let more = |total, work| Committed {
            total,
            work,
            ..committed
        };
        assert_eq!(verify_path(&more(36, 70), 0, 2, node, &proof), None);
        assert_eq!(verify_path(&more(35, 71), 0, 2, node, &proof), None);
        assert_eq!(verify(5, 2, node, &proof[1..]), None);
        node.work += 1;
        assert_eq!(
            verify(5, 2, node, &proof),
            None,
            "a leaf's work is committed"
        );
        node.work -= 1;
        node.sum += 1;
        assert_eq!(verify(5, 2, node, &proof), None);
    }

    #[test]
    fn a_recorded_sum_that_does_not_add_up_is_visible_at_its_node() {
        // A cheat records 1 instead of 11 for the parent of leaves 0 and 1, and 1,000 work
        // units instead of 22.
        let base = leaves(&[5, 6, 7, 8]);
        let (left, right) = (base[0], base[1]);
        let forged = SumNode {
            hash: parent_hash(&left, &right),
            sum: 1,
            work: 1_000,
        };
        let sibling = parent(&base[2], &base[3]).unwrap();
        let top = parent(&forged, &sibling).unwrap();
        assert_eq!((top.sum, top.work), (16, 1_030));
        let committed = Committed {
            root: commitment(4, &top),
            total: 16,
            work: 1_030,
            count: 4,
        };
        // The forged node is on the committed tree, and its children do not add up to it.
        assert_eq!(verify_path(&committed, 1, 0, forged, &[sibling]), Some(0));
        assert_eq!(parent_hash(&left, &right), forged.hash);
        assert_ne!(left.sum + right.sum, forged.sum);
        assert_ne!(left.work + right.work, forged.work);
        // So is the top itself, with no path.
        assert_eq!(verify_path(&committed, 2, 0, top, &[]), Some(0));
    }

    #[test]
    fn decimals_are_canonical() {
        assert_eq!(parse_decimal("0"), Some(0));
        assert_eq!(parse_decimal("120"), Some(120));
        for bad in [
            "",
            "01",
            "+1",
            "1 ",
            "-1",
            "340282366920938463463374607431768211456",
        ] {
            assert_eq!(parse_decimal(bad), None, "{bad:?}");
        }
    }
}
