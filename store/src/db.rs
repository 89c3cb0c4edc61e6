//! The redb tables behind the store and the `jmt` reader over a read snapshot.
//!
//! | table | key | value |
//! |---|---|---|
//! | `jmt_nodes` | encoded `NodeKey` (version first, big-endian) | encoded `Node` |
//! | `jmt_values` | key hash (32) ++ version (u64 big-endian) | tag byte (0 deleted, 1 set) ++ value |
//! | `preimages` | key hash (32) | key |
//! | `index` | key | value at the latest version (deleted keys are absent) |
//! | `meta` | name | latest version (u64 big-endian), latest root (32 bytes), format, oldest readable version, version of a restore under way |
//! | `stale_nodes` | version it went stale at (u64 big-endian) ++ encoded `NodeKey` | empty |
//! | `stale_values` | version it was replaced at (u64 big-endian) ++ key hash ++ its own version | empty |
//!
//! The two `stale_` tables say what no version from a given one on needs: what
//! [`crate::Store::prune`] deletes.
//!
//! Big-endian versions after the key hash make `get_value_option(max_version, key_hash)` one
//! reverse range lookup: the last entry in `key_hash ++ 0 ..= key_hash ++ max_version`.

use anyhow::{anyhow, Context};
use jmt::storage::{HasPreimage, LeafNode, Node, NodeKey, TreeReader};
use jmt::{KeyHash, OwnedValue, Version};
use redb::{ReadOnlyTable, ReadTransaction, TableDefinition};

/// Table of `jmt` nodes.
pub(crate) const NODES: TableDefinition<&[u8], &[u8]> = TableDefinition::new("jmt_nodes");
/// Table of versioned values, as the tree sees them.
pub(crate) const VALUES: TableDefinition<&[u8], &[u8]> = TableDefinition::new("jmt_values");
/// Table from key hash to key, needed to build ics23 proofs (they carry the key itself).
pub(crate) const PREIMAGES: TableDefinition<&[u8], &[u8]> = TableDefinition::new("preimages");
/// Ordered index of the latest values, for `get` and prefix scans.
pub(crate) const INDEX: TableDefinition<&[u8], &[u8]> = TableDefinition::new("index");
/// Store metadata.
pub(crate) const META: TableDefinition<&str, &[u8]> = TableDefinition::new("meta");
/// Tree nodes by the version from which no tree uses them.
pub(crate) const STALE_NODES: TableDefinition<&[u8], &[u8]> = TableDefinition::new("stale_nodes");
/// Versioned values by the version that replaced them.
pub(crate) const STALE_VALUES: TableDefinition<&[u8], &[u8]> = TableDefinition::new("stale_values");

/// `meta` entry: the last committed version, u64 big-endian.
pub(crate) const META_LATEST_VERSION: &str = "latest_version";
/// `meta` entry: the root hash of the last committed version.
pub(crate) const META_LATEST_ROOT: &str = "latest_root";
/// `meta` entry: the oldest version whose tree is still whole (versions below it were
/// pruned), u64 big-endian; absent when nothing was pruned.
pub(crate) const META_OLDEST_VERSION: &str = "oldest_version";
/// `meta` entry: present while a snapshot restore of that version (u64 big-endian) is under
/// way; the tables then hold a partial tree and no version is committed.
pub(crate) const META_RESTORING: &str = "restoring";
/// `meta` entry: the on-disk layout version, u64 big-endian.
pub(crate) const META_FORMAT: &str = "format";
/// The on-disk layout this code reads and writes (2: JMT nodes and node keys in borsh).
pub(crate) const FORMAT_VERSION: u64 = 2;

/// Tag byte of a `jmt_values` entry recording a delete.
const TAG_DELETED: u8 = 0;
/// Tag byte of a `jmt_values` entry recording a set.
const TAG_SET: u8 = 1;

/// The `jmt_nodes` key of a node.
pub(crate) fn node_key_bytes(node_key: &NodeKey) -> anyhow::Result<Vec<u8>> {
    borsh::to_vec(node_key).context("encoding a jmt node key")
}

/// The stored form of a node.
pub(crate) fn node_bytes(node: &Node) -> anyhow::Result<Vec<u8>> {
    borsh::to_vec(node).context("encoding a jmt node")
}

/// The `jmt_values` key of `key_hash` at `version`.
pub(crate) fn value_key(key_hash: &KeyHash, version: Version) -> [u8; 40] {
    let mut out = [0u8; 40];
    out[..32].copy_from_slice(&key_hash.0);
    out[32..].copy_from_slice(&version.to_be_bytes());
    out
}

/// The stored form of a versioned value (`None` records a delete).
pub(crate) fn value_bytes(value: Option<&[u8]>) -> Vec<u8> {
    match value {
        Some(v) => {
            let mut out = Vec::with_capacity(1 + v.len());
            out.push(TAG_SET);
            out.extend_from_slice(v);
            out
        }
        None => vec![TAG_DELETED],
    }
}

fn decode_value(stored: &[u8]) -> anyhow::Result<Option<OwnedValue>> {
    match stored.split_first() {
        Some((&TAG_SET, value)) => Ok(Some(value.to_vec())),
        Some((&TAG_DELETED, [])) => Ok(None),
        _ => Err(anyhow!(
            "corrupt versioned value: expected tag 0 (deleted, no bytes) or 1 (set), found {:?}",
            stored.first()
        )),
    }
}

/// Decodes a big-endian u64 `meta` entry.
pub(crate) fn decode_u64(name: &str, bytes: &[u8]) -> anyhow::Result<u64> {
    let arr: [u8; 8] = bytes.try_into().map_err(|_| {
        anyhow!(
            "corrupt meta entry {name}: expected 8 bytes, found {}",
            bytes.len()
        )
    })?;
    Ok(u64::from_be_bytes(arr))
}

/// Decodes a 32-byte `meta` entry.
pub(crate) fn decode_root(bytes: &[u8]) -> anyhow::Result<[u8; 32]> {
    bytes.try_into().map_err(|_| {
        anyhow!(
            "corrupt meta entry {META_LATEST_ROOT}: expected 32 bytes, found {}",
            bytes.len()
        )
    })
}

/// A consistent read view of every table, taken from one redb read transaction.
///
/// Implements the `jmt` reader traits, so the tree can compute updates and proofs against
/// exactly one committed state even while a writer commits the next one.
pub(crate) struct Snapshot {
    nodes: ReadOnlyTable<&'static [u8], &'static [u8]>,
    values: ReadOnlyTable<&'static [u8], &'static [u8]>,
    preimages: ReadOnlyTable<&'static [u8], &'static [u8]>,
    pub(crate) index: ReadOnlyTable<&'static [u8], &'static [u8]>,
    meta: ReadOnlyTable<&'static str, &'static [u8]>,
}

/// A `stale_` table key: `version` (big-endian) first, so one range finds everything stale
/// by a version.
pub(crate) fn stale_key(version: Version, rest: &[&[u8]]) -> Vec<u8> {
    let mut key = version.to_be_bytes().to_vec();
    for part in rest {
        key.extend_from_slice(part);
    }
    key
}

impl Snapshot {
    /// Opens every table of `txn`. The tables keep the transaction's snapshot alive.
    pub(crate) fn new(txn: &ReadTransaction) -> anyhow::Result<Self> {
        Ok(Self {
            nodes: txn.open_table(NODES)?,
            values: txn.open_table(VALUES)?,
            preimages: txn.open_table(PREIMAGES)?,
            index: txn.open_table(INDEX)?,
            meta: txn.open_table(META)?,
        })
    }

    /// The last committed version, `None` on an empty store.
    pub(crate) fn latest_version(&self) -> anyhow::Result<Option<u64>> {
        match self.meta.get(META_LATEST_VERSION)? {
            Some(v) => Ok(Some(decode_u64(META_LATEST_VERSION, v.value())?)),
            None => Ok(None),
        }
    }

    /// The oldest version whose tree is whole (0 unless versions were pruned).
    pub(crate) fn oldest_version(&self) -> anyhow::Result<u64> {
        match self.meta.get(META_OLDEST_VERSION)? {
            Some(v) => decode_u64(META_OLDEST_VERSION, v.value()),
            None => Ok(0),
        }
    }

    /// The root hash recorded with the last commit, `None` on an empty store.
    pub(crate) fn latest_root(&self) -> anyhow::Result<Option<[u8; 32]>> {
        match self.meta.get(META_LATEST_ROOT)? {
            Some(v) => Ok(Some(decode_root(v.value())?)),
            None => Ok(None),
        }
    }
}

impl TreeReader for Snapshot {
    fn get_node_option(&self, node_key: &NodeKey) -> anyhow::Result<Option<Node>> {
        let key = node_key_bytes(node_key)?;
        match self.nodes.get(key.as_slice())? {
            Some(stored) => {
                let node = borsh::from_slice(stored.value())
                    .with_context(|| format!("decoding the jmt node at {node_key:?}"))?;
                Ok(Some(node))
            }
            None => Ok(None),
        }
    }

    fn get_value_option(
        &self,
        max_version: Version,
        key_hash: KeyHash,
    ) -> anyhow::Result<Option<OwnedValue>> {
        let lo = value_key(&key_hash, 0);
        let hi = value_key(&key_hash, max_version);
        let mut range = self.values.range(lo.as_slice()..=hi.as_slice())?;
        match range.next_back() {
            Some(entry) => {
                let (_, stored) = entry?;
                decode_value(stored.value())
            }
            None => Ok(None),
        }
    }

    fn get_rightmost_leaf(&self) -> anyhow::Result<Option<(NodeKey, LeafNode)>> {
        // Only jmt's resuming restore asks; gonka-store restores with `new_overwrite` and
        // wipes an interrupted restore instead of resuming it.
        Err(anyhow!(
            "gonka-store does not resume interrupted restores: get_rightmost_leaf is only used \
             by jmt's resuming restore"
        ))
    }
}

impl HasPreimage for Snapshot {
    fn preimage(&self, key_hash: KeyHash) -> anyhow::Result<Option<Vec<u8>>> {
        Ok(self
            .preimages
            .get(key_hash.0.as_slice())?
            .map(|k| k.value().to_vec()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn value_keys_sort_by_key_hash_then_version() {
        let a = KeyHash([1; 32]);
        let b = KeyHash([2; 32]);
        assert!(value_key(&a, 5) < value_key(&a, 256));
        assert!(value_key(&a, u64::MAX) < value_key(&b, 0));
    }

    #[test]
    fn values_round_trip_and_corruption_is_reported() {
        assert_eq!(
            decode_value(&value_bytes(Some(b"x"))).unwrap(),
            Some(b"x".to_vec())
        );
        assert_eq!(decode_value(&value_bytes(Some(b""))).unwrap(), Some(vec![]));
        assert_eq!(decode_value(&value_bytes(None)).unwrap(), None);
        assert!(decode_value(&[]).is_err());
        assert!(decode_value(&[0, 1]).is_err());
        assert!(decode_value(&[7]).is_err());
    }
}
