//! State-sync snapshots of the tree at one version: [`Store::export`] streams it in chunks,
//! [`Store::begin_restore`] rebuilds it, chunk by chunk, in an empty store.
//!
//! A chunk (format [`SNAPSHOT_FORMAT`]) is the borsh encoding of
//!
//! ```text
//! ChunkV1 { entries: Vec<(key, value)>, proof: Vec<u8> }
//! ```
//!
//! where `entries` are consecutive leaves of the tree in key-hash order (the order of the JMT
//! itself) and `proof` is the borsh-encoded `SparseMerkleRangeProof` of the chunk's last key:
//! the right siblings of its path. With the leaves restored so far it proves everything left
//! of that key under the snapshot's root, so every chunk is checked against the trusted app
//! hash as it arrives, not only at the end.
//!
//! Export reads one redb read transaction (a consistent view, whatever commits or prunes run
//! meanwhile) and holds one chunk in memory. Restore uses `jmt`'s `JellyfishMerkleRestore`,
//! which keeps only the right edge of the tree in memory and hands finished nodes to us per
//! chunk; each chunk's nodes, values, key preimages and index entries go to disk in one write
//! transaction. The store is marked as restoring (`meta` entry `restoring`) until
//! [`Restore::finish`] checks the root and writes the version, the root and the oldest
//! readable version (the snapshot's: nothing older exists) in one transaction. Until then the
//! store reports no version; a failed restore, or one cut short by a crash, is wiped
//! ([`Restore::abort`], or at the next [`Store::open`]), so the next attempt starts from an
//! empty store.

use std::sync::{Arc, Mutex};

use anyhow::{anyhow, bail, Context};
use borsh::{BorshDeserialize, BorshSerialize};
use jmt::proof::SparseMerkleRangeProof;
use jmt::restore::{JellyfishMerkleRestore, StateSnapshotReceiver};
use jmt::storage::{HasPreimage, NodeBatch, TreeWriter};
use jmt::{JellyfishMerkleIterator, KeyHash, RootHash, Sha256Jmt};
use redb::{Durability, ReadableTable, WriteTransaction};
use sha2::Sha256;

use crate::db::{self, Snapshot};
use crate::store::check_committed;
use crate::{Store, StoreError};

/// The chunk format this code writes and reads.
pub const SNAPSHOT_FORMAT: u32 = 1;

/// Chunk size [`Store::export`] aims at when asked for none: well under CometBFT's 16 MB
/// chunk message limit.
pub const DEFAULT_CHUNK_BYTES: usize = 4 * 1024 * 1024;

/// Longest range proof: one sibling per bit of a key hash.
const MAX_PROOF_SIBLINGS: u32 = 256;

/// Largest encoded range proof: a length prefix and 256 siblings (one per key-hash bit) of a tag
/// byte and two hashes each. A chunk is its entries (about the size asked for) plus this much.
pub const MAX_PROOF_BYTES: usize = 8 + MAX_PROOF_SIBLINGS as usize * 65;

/// One chunk on the wire (see the module doc).
#[derive(BorshSerialize, BorshDeserialize)]
struct ChunkV1 {
    entries: Vec<(Vec<u8>, Vec<u8>)>,
    proof: Vec<u8>,
}

/// Encoded size of an entry in a chunk: two borsh length prefixes and the bytes.
fn entry_bytes(key: &[u8], value: &[u8]) -> usize {
    8 + key.len() + value.len()
}

/// The chunks of the tree at one version, in order (see [`Store::export`]). Each item is one
/// encoded chunk.
pub struct Export {
    snap: Arc<Snapshot>,
    version: u64,
    root: [u8; 32],
    leaves: JellyfishMerkleIterator<Snapshot>,
    max_chunk_bytes: usize,
    /// A leaf read but not yet placed: the one that did not fit in the previous chunk.
    carry: Option<(Vec<u8>, Vec<u8>)>,
    done: bool,
}

impl std::fmt::Debug for Export {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Export")
            .field("version", &self.version)
            .field("root", &hex::encode(self.root))
            .finish()
    }
}

impl Export {
    /// The version exported.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// The root hash (app hash) of the exported version: what a restore must end at.
    pub fn root(&self) -> [u8; 32] {
        self.root
    }

    /// The next leaf as (key, value), its key read from the preimage table.
    fn next_leaf(&mut self) -> anyhow::Result<Option<(Vec<u8>, Vec<u8>)>> {
        if let Some(leaf) = self.carry.take() {
            return Ok(Some(leaf));
        }
        let Some(leaf) = self.leaves.next() else {
            return Ok(None);
        };
        let (key_hash, value) = leaf.with_context(|| {
            format!(
                "reading the tree at version {} for a snapshot",
                self.version
            )
        })?;
        let key = self.snap.preimage(key_hash)?.ok_or_else(|| {
            anyhow!(
                "the tree at version {} has key hash {} but the store has no key for it",
                self.version,
                hex::encode(key_hash.0)
            )
        })?;
        Ok(Some((key, value)))
    }

    fn next_chunk(&mut self) -> anyhow::Result<Option<Vec<u8>>> {
        let mut entries = Vec::new();
        let mut size = 0;
        while let Some((key, value)) = self.next_leaf()? {
            let bytes = entry_bytes(&key, &value);
            // Every chunk holds at least one leaf, however large.
            if !entries.is_empty() && size + bytes > self.max_chunk_bytes {
                self.carry = Some((key, value));
                break;
            }
            size += bytes;
            entries.push((key, value));
        }
        let Some((last, _)) = entries.last() else {
            return Ok(None);
        };
        let proof = Sha256Jmt::new(&*self.snap)
            .get_range_proof(KeyHash::with::<Sha256>(last), self.version)
            .with_context(|| format!("proving a snapshot chunk at version {}", self.version))?;
        let chunk = ChunkV1 {
            entries,
            proof: borsh::to_vec(&proof).context("encoding a range proof")?,
        };
        Ok(Some(
            borsh::to_vec(&chunk).context("encoding a snapshot chunk")?,
        ))
    }
}

impl Iterator for Export {
    type Item = anyhow::Result<Vec<u8>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let chunk = self.next_chunk().transpose();
        if !matches!(chunk, Some(Ok(_))) {
            self.done = true;
        }
        chunk
    }
}

/// Finished tree nodes `JellyfishMerkleRestore` hands over, until we write them.
#[derive(Default)]
struct Sink(Mutex<Vec<NodeBatch>>);

impl TreeWriter for Sink {
    fn write_node_batch(&self, node_batch: &NodeBatch) -> anyhow::Result<()> {
        self.0
            .lock()
            .map_err(|_| anyhow!("restore sink lock poisoned"))?
            .push(node_batch.clone());
        Ok(())
    }
}

impl Sink {
    fn take(&self) -> anyhow::Result<Vec<NodeBatch>> {
        Ok(std::mem::take(
            &mut *self
                .0
                .lock()
                .map_err(|_| anyhow!("restore sink lock poisoned"))?,
        ))
    }
}

/// jmt's restorer, writing into a [`Sink`].
///
/// `JellyfishMerkleRestore` keeps its writer as an `Arc<dyn TreeWriter>`, a trait object
/// without `Send`/`Sync` bounds, so the compiler cannot see that it may move between threads
/// (the ABCI snapshot connection's thread calls it; the app keeps it in a `Mutex`). The only
/// writer ever behind that `Arc` is a `Sink` — a `Mutex<Vec<NodeBatch>>`, `Send` and `Sync` —
/// and the restorer's other fields are plain owned data.
struct Restorer(JellyfishMerkleRestore<Sha256>);

// SAFETY: see the type's doc: the `dyn TreeWriter` is always a `Sink`, which is Send + Sync,
// and nothing else in the restorer is tied to a thread.
unsafe impl Send for Restorer {}

/// A restore in progress (see [`Store::begin_restore`]). Dropping it without
/// [`Restore::finish`] or [`Restore::abort`] leaves the partial tree behind the `restoring`
/// mark; the next `begin_restore` or `open` wipes it.
pub struct Restore {
    store: Store,
    version: u64,
    root: [u8; 32],
    sink: Arc<Sink>,
    /// `None` once a chunk failed: the jmt restorer has taken part of it and cannot go on.
    tree: Option<Restorer>,
    chunks: u64,
    keys: u64,
}

impl std::fmt::Debug for Restore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Restore")
            .field("version", &self.version)
            .field("root", &hex::encode(self.root))
            .field("chunks", &self.chunks)
            .field("keys", &self.keys)
            .finish()
    }
}

impl Restore {
    /// The version being restored.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// Chunks applied so far.
    pub fn chunks(&self) -> u64 {
        self.chunks
    }

    /// Decodes one chunk, checks its leaves follow the previous chunk's in key-hash order and
    /// that, with the leaves before them, they prove out to the expected root, and writes them.
    /// An error poisons the restore (the leaves went into the restorer before its proof
    /// failed): [`Restore::abort`] it and start over.
    pub fn add_chunk(&mut self, bytes: &[u8]) -> anyhow::Result<()> {
        let chunk = ChunkV1::try_from_slice(bytes).map_err(|e| {
            anyhow!(
                "snapshot chunk {} is not a format-{SNAPSHOT_FORMAT} chunk: {e}",
                self.chunks
            )
        })?;
        if chunk.entries.is_empty() {
            bail!("snapshot chunk {} holds no entries", self.chunks);
        }
        // The first borsh field of the proof is its sibling count (u32 little-endian); more
        // than one per key-hash bit would underflow jmt's verifier.
        let siblings = chunk
            .proof
            .get(..4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .unwrap_or(u32::MAX);
        if siblings > MAX_PROOF_SIBLINGS {
            bail!(
                "snapshot chunk {} carries a range proof of {siblings} siblings; at most \
                 {MAX_PROOF_SIBLINGS} exist",
                self.chunks
            );
        }
        let proof: SparseMerkleRangeProof<Sha256> = borsh::from_slice(&chunk.proof)
            .map_err(|e| anyhow!("snapshot chunk {} has a garbled proof: {e}", self.chunks))?;
        let mut hashed = Vec::with_capacity(chunk.entries.len());
        for (key, value) in &chunk.entries {
            if key.is_empty() {
                bail!("snapshot chunk {} holds the empty key", self.chunks);
            }
            hashed.push((KeyHash::with::<Sha256>(key), value.clone()));
        }
        let Some(tree) = self.tree.as_mut() else {
            bail!(
                "the restore of version {} failed on an earlier chunk; abort it and start over",
                self.version
            );
        };
        // jmt asserts its invariants; input that trips one is refused like a bad proof.
        let added = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            tree.0.add_chunk(hashed, proof)
        }))
        .unwrap_or_else(|_| Err(anyhow!("the jmt restorer panicked on this chunk")));
        if let Err(e) = added {
            self.tree = None;
            return Err(e.context(format!(
                "snapshot chunk {} does not prove out to root {} at version {}",
                self.chunks,
                hex::encode(self.root),
                self.version
            )));
        }
        let batches = self.sink.take()?;
        self.store.write_restored(&batches, &chunk.entries)?;
        self.chunks += 1;
        self.keys += chunk.entries.len() as u64;
        Ok(())
    }

    /// Writes the last nodes, checks the rebuilt tree's root is the expected one and makes
    /// the version the store's latest (and oldest). On a wrong root the restore is wiped and
    /// an error returned.
    pub fn finish(mut self) -> anyhow::Result<()> {
        let Some(tree) = self.tree.take() else {
            let version = self.version;
            self.abort()?;
            bail!("the restore of version {version} failed on an earlier chunk");
        };
        if self.chunks == 0 {
            let version = self.version;
            self.abort()?;
            bail!("the restore of version {version} received no chunk");
        }
        let finished = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| tree.0.finish()))
            .unwrap_or_else(|_| Err(anyhow!("the jmt restorer panicked when finishing")));
        let written = finished.and_then(|()| {
            let batches = self.sink.take()?;
            self.store.write_restored(&batches, &[])
        });
        if let Err(e) = written {
            let version = self.version;
            self.abort()?;
            return Err(e.context(format!("finishing the restore of version {version}")));
        }
        let found = {
            let snap = self.store.snapshot()?;
            Sha256Jmt::new(&snap)
                .get_root_hash(self.version)
                .map(|r| r.0)
        };
        match found {
            Ok(found) if found == self.root => {}
            found => {
                let (version, root) = (self.version, self.root);
                self.abort()?;
                let found = match found {
                    Ok(found) => hex::encode(found),
                    Err(e) => format!("no root ({e:#})"),
                };
                bail!(
                    "the restored tree at version {version} has root {found}, but the snapshot \
                     promised {}; nothing was kept",
                    hex::encode(root)
                );
            }
        }
        let mut txn = self.store.inner.db.begin_write()?;
        txn.set_durability(Durability::Immediate);
        {
            let mut meta = txn.open_table(db::META)?;
            let version = self.version.to_be_bytes();
            meta.insert(db::META_LATEST_VERSION, version.as_slice())?;
            meta.insert(db::META_LATEST_ROOT, self.root.as_slice())?;
            meta.insert(db::META_OLDEST_VERSION, version.as_slice())?;
            meta.remove(db::META_RESTORING)?;
        }
        self.store.commit_write(txn)?;
        tracing::info!(
            version = self.version,
            root = %hex::encode(self.root),
            chunks = self.chunks,
            keys = self.keys,
            "store restored from a snapshot"
        );
        Ok(())
    }

    /// Wipes everything this restore wrote, leaving an empty store.
    pub fn abort(self) -> anyhow::Result<()> {
        self.store.wipe_restore()
    }
}

impl Store {
    /// The tree at `version` as snapshot chunks of about `max_chunk_bytes` of entries (at least
    /// one leaf each) plus a range proof of at most 16.7 KB, in key-hash order, each with the range proof of its last key (see the module
    /// doc). The version must be committed and not pruned; it is read from the state as it is
    /// now, so later commits and prunes do not change what the export yields. Errors for an
    /// empty tree (a snapshot needs at least one key).
    pub fn export(&self, version: u64, max_chunk_bytes: usize) -> anyhow::Result<Export> {
        let snap = Arc::new(self.snapshot()?);
        check_committed(&snap, version)?;
        let root = Sha256Jmt::new(&*snap)
            .get_root_hash(version)
            .with_context(|| format!("reading the root at version {version}"))?;
        if root == jmt::JellyfishMerkleTree::<Snapshot, Sha256>::EMPTY_ROOT {
            bail!("the tree at version {version} is empty; there is nothing to snapshot");
        }
        let leaves = JellyfishMerkleIterator::new(Arc::clone(&snap), version, KeyHash([0; 32]))
            .with_context(|| format!("iterating the tree at version {version}"))?;
        Ok(Export {
            snap,
            version,
            root: root.0,
            leaves,
            max_chunk_bytes: max_chunk_bytes.max(1),
            carry: None,
            done: false,
        })
    }

    /// Starts restoring the tree at `version` with root `root` into this store, which must
    /// hold no committed version (a leftover partial restore is wiped first). Feed it the
    /// chunks of [`Store::export`] in order, then [`Restore::finish`].
    pub fn begin_restore(&self, version: u64, root: [u8; 32]) -> anyhow::Result<Restore> {
        if let Some(latest) = self.latest_version()? {
            return Err(StoreError::RestoreOverCommitted { latest }.into());
        }
        self.wipe_restore()?;
        let mut txn = self.inner.db.begin_write()?;
        txn.set_durability(Durability::Immediate);
        {
            let mut meta = txn.open_table(db::META)?;
            meta.insert(db::META_RESTORING, version.to_be_bytes().as_slice())?;
        }
        self.commit_write(txn)?;
        let sink = Arc::new(Sink::default());
        let tree =
            JellyfishMerkleRestore::new_overwrite(Arc::clone(&sink), version, RootHash(root))?;
        tracing::info!(version, root = %hex::encode(root), "restoring the store from a snapshot");
        Ok(Restore {
            store: self.clone(),
            version,
            root,
            sink,
            tree: Some(Restorer(tree)),
            chunks: 0,
            keys: 0,
        })
    }

    /// Whether a restore was started and neither finished nor wiped.
    pub fn restore_in_progress(&self) -> anyhow::Result<bool> {
        let txn = self.inner.db.begin_read()?;
        Ok(txn.open_table(db::META)?.get(db::META_RESTORING)?.is_some())
    }

    /// One chunk's writes: the restorer's nodes and values, and the keys and index entries of
    /// `entries`.
    fn write_restored(
        &self,
        batches: &[NodeBatch],
        entries: &[(Vec<u8>, Vec<u8>)],
    ) -> anyhow::Result<()> {
        let mut txn = self.inner.db.begin_write()?;
        txn.set_durability(Durability::Immediate);
        if let Err(e) = write_restored_into(&txn, batches, entries) {
            txn.abort()?;
            return Err(e);
        }
        self.commit_write(txn)?;
        Ok(())
    }

    /// Empties every table of a store with no committed version (what a partial restore
    /// wrote), keeping only the layout version. Refuses on a store with commits.
    pub(crate) fn wipe_restore(&self) -> anyhow::Result<()> {
        let mut txn = self.inner.db.begin_write()?;
        txn.set_durability(Durability::Immediate);
        {
            let mut meta = txn.open_table(db::META)?;
            if let Some(latest) = meta.get(db::META_LATEST_VERSION)? {
                let latest = db::decode_u64(db::META_LATEST_VERSION, latest.value())?;
                return Err(StoreError::RestoreOverCommitted { latest }.into());
            }
            meta.remove(db::META_RESTORING)?;
            meta.remove(db::META_LATEST_ROOT)?;
            meta.remove(db::META_OLDEST_VERSION)?;
        }
        for table in [
            db::NODES,
            db::VALUES,
            db::PREIMAGES,
            db::INDEX,
            db::STALE_NODES,
            db::STALE_VALUES,
        ] {
            txn.delete_table(table)?;
            txn.open_table(table)?;
        }
        self.commit_write(txn)?;
        Ok(())
    }
}

fn write_restored_into(
    txn: &WriteTransaction,
    batches: &[NodeBatch],
    entries: &[(Vec<u8>, Vec<u8>)],
) -> anyhow::Result<()> {
    let mut nodes = txn.open_table(db::NODES)?;
    let mut values = txn.open_table(db::VALUES)?;
    for batch in batches {
        for (node_key, node) in batch.nodes() {
            let key = db::node_key_bytes(node_key)?;
            nodes.insert(key.as_slice(), db::node_bytes(node)?.as_slice())?;
        }
        for ((version, key_hash), value) in batch.values() {
            let key = db::value_key(key_hash, *version);
            values.insert(key.as_slice(), db::value_bytes(value.as_deref()).as_slice())?;
        }
    }
    let mut preimages = txn.open_table(db::PREIMAGES)?;
    let mut index = txn.open_table(db::INDEX)?;
    for (key, value) in entries {
        let key_hash = KeyHash::with::<Sha256>(key);
        preimages.insert(key_hash.0.as_slice(), key.as_slice())?;
        index.insert(key.as_slice(), value.as_slice())?;
    }
    Ok(())
}
