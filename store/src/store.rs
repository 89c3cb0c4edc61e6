//! The store: reads, two-phase writes (`prepare` then `commit`) and proofs.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use anyhow::{anyhow, Context};
use jmt::storage::TreeUpdateBatch;
use jmt::{JellyfishMerkleTree, KeyHash, Sha256Jmt};
use redb::{
    CommitError, Database, Durability, ReadOnlyTable, ReadableTable, TableDefinition,
    WriteTransaction,
};
use sha2::Sha256;

use crate::db::{self, Snapshot};
use crate::ChangeSet;

/// Errors with a meaning callers may want to act on. They travel inside `anyhow::Error`;
/// match them with `err.downcast_ref::<StoreError>()`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// `prepare` was asked for a first version other than 0 on a store with no commits.
    #[error(
        "prepare for version {requested} but the store is empty, so the first version must be 0"
    )]
    FirstVersionOnEmptyStore {
        /// The first version that was asked for.
        requested: u64,
    },
    /// `prepare` was asked for a first version other than latest + 1.
    #[error(
        "prepare for version {requested} but the latest committed version is {latest}, \
         so the first version must be {}", latest + 1
    )]
    WrongFirstVersion {
        /// The first version that was asked for.
        requested: u64,
        /// The latest committed version.
        latest: u64,
    },
    /// `commit` found that another commit landed since `prepare`; nothing was written.
    #[error(
        "commit of version {first_version} was prepared on top of {}, but the latest committed \
         version is now {}; nothing was written, prepare again",
        describe_latest(.prepared_on), describe_latest(.found)
    )]
    StaleCommit {
        /// First version of the prepared commit.
        first_version: u64,
        /// Latest version when the commit was prepared.
        prepared_on: Option<u64>,
        /// Latest version found when committing.
        found: Option<u64>,
    },
    /// A read asked for a version that has not been committed.
    #[error(
        "version {requested} is not committed: the latest committed version is {}",
        describe_latest(.latest)
    )]
    VersionNotCommitted {
        /// The version that was asked for.
        requested: u64,
        /// The latest committed version.
        latest: Option<u64>,
    },
    /// A change set contained the empty key.
    #[error(
        "the change set for version {version} writes the empty key; keys must be non-empty \
         (ics23 non-existence proofs cannot bound an empty key)"
    )]
    EmptyKey {
        /// The version whose change set held the empty key.
        version: u64,
    },
    /// `prepare` was called without change sets.
    #[error("prepare needs at least one change set (one per version), found none")]
    NoChangeSets,
    /// A read asked for a version that was pruned.
    #[error(
        "version {requested} was pruned: this node keeps versions from {oldest} on; ask a node \
         that keeps more history (an archive node)"
    )]
    VersionPruned {
        /// The version that was asked for.
        requested: u64,
        /// The oldest version still whole.
        oldest: u64,
    },
    /// A snapshot restore was asked of a store that already holds committed versions.
    #[error(
        "cannot restore a snapshot into a store that holds committed versions (latest \
         {latest}); state sync needs an empty state database"
    )]
    RestoreOverCommitted {
        /// The latest committed version.
        latest: u64,
    },
}

/// What one [`Store::prune`] deleted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pruned {
    /// Tree nodes deleted.
    pub nodes: u64,
    /// Versioned values deleted.
    pub values: u64,
}

fn describe_latest(latest: &Option<u64>) -> String {
    match latest {
        Some(v) => format!("version {v}"),
        None => "nothing (empty store)".to_string(),
    }
}

/// A versioned, authenticated key-value store: a Jellyfish Merkle tree persisted in redb.
///
/// Cheap to clone; all clones share one database. Safe to use from many threads at once:
/// reads run on redb read transactions (snapshots), and redb serializes writers.
#[derive(Clone)]
pub struct Store {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) db: Database,
    path: PathBuf,
    /// Write transactions committed so far (see [`Store::commit_write`]).
    writes: AtomicU64,
    /// The ordered index of the latest version, open for reads; opened on the first read
    /// after each write (opening a read transaction and its table costs more than the
    /// lookup itself).
    latest_index: Mutex<Option<Arc<IndexTable>>>,
}

/// The ordered index (latest values), open in a read transaction.
type IndexTable = ReadOnlyTable<&'static [u8], &'static [u8]>;

/// Locks `mutex`, even if a panic poisoned it (what it guards is a cache, whole either way).
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("path", &self.inner.path)
            .finish()
    }
}

impl Store {
    /// Opens the database file at `path`, creating it (and its parent directories) if missing.
    ///
    /// `path` names the database file itself (for example `<home>/data/state.redb`), not a
    /// directory. Only one process may hold the file open at a time.
    pub fn open(path: &Path) -> anyhow::Result<Store> {
        if path.is_dir() {
            return Err(anyhow!(
                "store path {} is a directory; pass the database file path instead \
                 (for example {})",
                path.display(),
                path.join("state.redb").display()
            ));
        }
        if let Some(parent) = path.parent() {
            if !parent.as_os_str().is_empty() {
                std::fs::create_dir_all(parent).with_context(|| {
                    format!("creating the store directory {}", parent.display())
                })?;
            }
        }
        let db = Database::create(path)
            .with_context(|| format!("opening the store database {}", path.display()))?;
        let store = Store {
            inner: Arc::new(Inner {
                db,
                path: path.to_path_buf(),
                writes: AtomicU64::new(0),
                latest_index: Mutex::new(None),
            }),
        };
        store
            .init_tables()
            .with_context(|| format!("initializing the store {}", path.display()))?;
        // A snapshot restore cut short (crash, kill) left a partial tree and no version: drop
        // it, so the node starts empty and state sync starts over.
        if store.restore_in_progress()? {
            tracing::warn!(path = %path.display(), "wiping an unfinished snapshot restore");
            store
                .wipe_restore()
                .with_context(|| format!("wiping an unfinished restore in {}", path.display()))?;
        }
        Ok(store)
    }

    /// Creates the tables of a new database and checks the layout version of an existing one.
    fn init_tables(&self) -> anyhow::Result<()> {
        let mut txn = self.inner.db.begin_write()?;
        txn.set_durability(Durability::Immediate);
        {
            txn.open_table(db::NODES)?;
            txn.open_table(db::VALUES)?;
            txn.open_table(db::PREIMAGES)?;
            txn.open_table(db::INDEX)?;
            txn.open_table(db::STALE_NODES)?;
            txn.open_table(db::STALE_VALUES)?;
            let mut meta = txn.open_table(db::META)?;
            let format = meta
                .get(db::META_FORMAT)?
                .map(|v| db::decode_u64(db::META_FORMAT, v.value()))
                .transpose()?;
            match format {
                Some(db::FORMAT_VERSION) => {}
                Some(other) => {
                    return Err(anyhow!(
                        "store layout version {other} is not supported: this build reads \
                         layout version {}",
                        db::FORMAT_VERSION
                    ))
                }
                None => {
                    meta.insert(db::META_FORMAT, db::FORMAT_VERSION.to_be_bytes().as_slice())?;
                }
            }
        }
        self.commit_write(txn)?;
        Ok(())
    }

    /// Commits `txn`, a write transaction of this store, and forgets the read view of the
    /// latest version: every write to the database lands through here.
    pub(crate) fn commit_write(&self, txn: WriteTransaction) -> Result<(), CommitError> {
        let committed = txn.commit();
        self.inner.writes.fetch_add(1, Ordering::SeqCst);
        *lock(&self.inner.latest_index) = None;
        committed
    }

    /// The ordered index of the latest committed version, open for reads.
    fn latest_index(&self) -> anyhow::Result<Arc<IndexTable>> {
        if let Some(table) = &*lock(&self.inner.latest_index) {
            return Ok(table.clone());
        }
        let writes = self.inner.writes.load(Ordering::SeqCst);
        let table = Arc::new(self.inner.db.begin_read()?.open_table(db::INDEX)?);
        let mut cached = lock(&self.inner.latest_index);
        // Kept only if no write landed since the read began: else this view may be older
        // than the latest version, and the next read opens a new one.
        if self.inner.writes.load(Ordering::SeqCst) == writes {
            *cached = Some(table.clone());
        }
        Ok(table)
    }

    /// The path of the database file.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    pub(crate) fn snapshot(&self) -> anyhow::Result<Snapshot> {
        let txn = self.inner.db.begin_read()?;
        Snapshot::new(&txn)
    }

    /// Last committed version, None when nothing was ever committed.
    pub fn latest_version(&self) -> anyhow::Result<Option<u64>> {
        self.snapshot()?.latest_version()
    }

    /// Root hash (app hash) stored with the last commit, None when empty.
    pub fn latest_root(&self) -> anyhow::Result<Option<[u8; 32]>> {
        self.snapshot()?.latest_root()
    }

    /// The last committed version and its root hash, read from one snapshot so they always
    /// belong together (what ABCI `Info` reports). None when nothing was ever committed.
    pub fn latest_commit(&self) -> anyhow::Result<Option<(u64, [u8; 32])>> {
        let snap = self.snapshot()?;
        match (snap.latest_version()?, snap.latest_root()?) {
            (Some(version), Some(root)) => Ok(Some((version, root))),
            (None, None) => Ok(None),
            (version, root) => Err(anyhow!(
                "corrupt store metadata: latest version is {version:?} but latest root is \
                 {:?}; both must be present or both absent",
                root.map(hex::encode)
            )),
        }
    }

    /// Value at the latest committed version (served from the ordered index table, fast).
    pub fn get(&self, key: &[u8]) -> anyhow::Result<Option<Vec<u8>>> {
        let index = self.latest_index()?;
        let value = index.get(key)?.map(|v| v.value().to_vec());
        Ok(value)
    }

    /// Value at a past committed version (through the JMT). Error if version > latest.
    pub fn get_at(&self, key: &[u8], version: u64) -> anyhow::Result<Option<Vec<u8>>> {
        let snap = self.snapshot()?;
        check_committed(&snap, version)?;
        Sha256Jmt::new(&snap)
            .get(KeyHash::with::<Sha256>(key), version)
            .with_context(|| format!("reading key {} at version {version}", hex::encode(key)))
    }

    /// All (key, value) pairs whose key starts with `prefix` at the latest committed version,
    /// ascending key order (ordered index).
    pub fn prefix(&self, prefix: &[u8]) -> anyhow::Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.range(prefix, prefix, usize::MAX)
    }

    /// At most `limit` (key, value) pairs whose key starts with `prefix` and is at least
    /// `start`, ascending key order, at the latest committed version: one page of a prefix
    /// scan, read without touching the rows after it.
    pub fn range(
        &self,
        prefix: &[u8],
        start: &[u8],
        limit: usize,
    ) -> anyhow::Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let snap = self.snapshot()?;
        let from = start.max(prefix);
        let mut out = Vec::new();
        if limit == 0 {
            return Ok(out);
        }
        for entry in snap.index.range::<&[u8]>(from..)? {
            let (key, value) = entry?;
            if !key.value().starts_with(prefix) {
                break;
            }
            out.push((key.value().to_vec(), value.value().to_vec()));
            if out.len() == limit {
                break;
            }
        }
        Ok(out)
    }

    /// Root hash at a committed version.
    pub fn root_at(&self, version: u64) -> anyhow::Result<[u8; 32]> {
        let snap = self.snapshot()?;
        check_committed(&snap, version)?;
        let root = Sha256Jmt::new(&snap)
            .get_root_hash(version)
            .with_context(|| format!("reading the root hash at version {version}"))?;
        Ok(root.0)
    }

    /// Value plus an ics23 CommitmentProof (existence or non-existence) against
    /// root_at(version).
    ///
    /// Errors for the empty key, and for an absent key while the tree at `version` is empty:
    /// an ics23 non-existence proof needs at least one neighbouring key to point at.
    pub fn get_with_proof(
        &self,
        key: &[u8],
        version: u64,
    ) -> anyhow::Result<(Option<Vec<u8>>, ics23::CommitmentProof)> {
        if key.is_empty() {
            return Err(anyhow!(
                "cannot prove the empty key: keys are non-empty (ics23 non-existence proofs \
                 cannot bound an empty key)"
            ));
        }
        let snap = self.snapshot()?;
        check_committed(&snap, version)?;
        let tree = Sha256Jmt::new(&snap);
        let root = tree.get_root_hash(version)?;
        if root == JellyfishMerkleTree::<Snapshot, Sha256>::EMPTY_ROOT {
            return Err(anyhow!(
                "cannot prove key {} at version {version}: the tree is empty at that version, \
                 and an ics23 non-existence proof needs a neighbouring key",
                hex::encode(key)
            ));
        }
        tree.get_with_ics23_proof(key.to_vec(), version)
            .with_context(|| {
                format!(
                    "building the proof of key {} at version {version}",
                    hex::encode(key)
                )
            })
    }

    /// Computes root hashes for `change_sets`, applied as versions first_version,
    /// first_version+1, ... WITHOUT writing anything. first_version must be latest+1 (or 0
    /// when the store is empty; a non-zero first version on an empty store is an error with a
    /// clear message).
    pub fn prepare(
        &self,
        first_version: u64,
        change_sets: Vec<ChangeSet>,
    ) -> anyhow::Result<PreparedCommit> {
        let snap = self.snapshot()?;
        match snap.latest_version()? {
            None if first_version != 0 => {
                return Err(StoreError::FirstVersionOnEmptyStore {
                    requested: first_version,
                }
                .into())
            }
            Some(latest) if latest.checked_add(1) != Some(first_version) => {
                return Err(StoreError::WrongFirstVersion {
                    requested: first_version,
                    latest,
                }
                .into())
            }
            _ => {}
        }
        if change_sets.is_empty() {
            return Err(StoreError::NoChangeSets.into());
        }
        // Versions must not wrap; in practice heights never come close.
        first_version
            .checked_add(change_sets.len() as u64)
            .ok_or_else(|| anyhow!("versions starting at {first_version} overflow u64"))?;
        for (offset, change_set) in change_sets.iter().enumerate() {
            if change_set.contains_key(&[][..]) {
                return Err(StoreError::EmptyKey {
                    version: first_version + offset as u64,
                }
                .into());
            }
        }

        // Each change set is a BTreeMap, so the tree sees writes in key order; the resulting
        // tree does not depend on that order anyway (the JMT shape is canonical).
        let value_sets = change_sets.iter().map(|change_set| {
            change_set
                .iter()
                .map(|(key, value)| (KeyHash::with::<Sha256>(key), value.clone()))
        });
        let (roots, batch) = Sha256Jmt::new(&snap)
            .put_value_sets(value_sets, first_version)
            .with_context(|| {
                format!(
                    "computing the tree update for versions {first_version}..={}",
                    first_version + change_sets.len() as u64 - 1
                )
            })?;
        Ok(PreparedCommit {
            first_version,
            roots: roots.into_iter().map(|r| r.0).collect(),
            batch,
            change_sets,
        })
    }

    /// Writes a prepared commit — JMT nodes, versioned values, key preimages, the ordered index
    /// (latest values; deletes remove index entries), the new latest version and root — in ONE
    /// redb write transaction with immediate durability. Errors (writing nothing) if the
    /// store's latest version changed since prepare.
    pub fn commit(&self, prepared: PreparedCommit) -> anyhow::Result<()> {
        let mut txn = self.inner.db.begin_write()?;
        txn.set_durability(Durability::Immediate);
        if let Err(err) = write_prepared(&txn, &prepared) {
            txn.abort()?;
            return Err(err);
        }
        self.commit_write(txn).with_context(|| {
            format!(
                "committing versions {}..={}",
                prepared.first_version,
                prepared.version()
            )
        })?;
        tracing::debug!(
            version = prepared.version(),
            root = %hex::encode(prepared.root()),
            nodes = prepared.batch.node_batch.nodes().len(),
            "store committed"
        );
        Ok(())
    }
}

impl Store {
    /// Deletes what no version from `keep_from` on needs — tree nodes and versioned values
    /// made stale by version `keep_from` or earlier — so the store keeps versions
    /// `keep_from..=latest` whole, and reads below `keep_from` fail with
    /// [`StoreError::VersionPruned`]. Never touches the latest version's tree or the index;
    /// the app hash does not depend on it. Asking again for an older or the same
    /// `keep_from` deletes nothing. One write transaction; per call, the work is what the
    /// versions newly out of the window wrote.
    pub fn prune(&self, keep_from: u64) -> anyhow::Result<Pruned> {
        let mut txn = self.inner.db.begin_write()?;
        txn.set_durability(Durability::Immediate);
        let mut pruned = Pruned::default();
        {
            let mut meta = txn.open_table(db::META)?;
            let latest = meta
                .get(db::META_LATEST_VERSION)?
                .map(|v| db::decode_u64(db::META_LATEST_VERSION, v.value()))
                .transpose()?;
            let oldest = meta
                .get(db::META_OLDEST_VERSION)?
                .map(|v| db::decode_u64(db::META_OLDEST_VERSION, v.value()))
                .transpose()?
                .unwrap_or(0);
            match latest {
                Some(latest) if keep_from <= latest => {}
                _ => {
                    return Err(StoreError::VersionNotCommitted {
                        requested: keep_from,
                        latest,
                    }
                    .into())
                }
            }
            if keep_from <= oldest {
                return Ok(pruned);
            }
            // Everything stale since a version up to keep_from: stale keys start with it.
            let end = db::stale_key(keep_from + 1, &[]);
            pruned.nodes = drop_stale(&txn, db::STALE_NODES, db::NODES, &end)?;
            pruned.values = drop_stale(&txn, db::STALE_VALUES, db::VALUES, &end)?;
            meta.insert(db::META_OLDEST_VERSION, keep_from.to_be_bytes().as_slice())?;
        }
        self.commit_write(txn)?;
        Ok(pruned)
    }

    /// Entries of the tree's node and value tables (what pruning bounds).
    #[cfg(test)]
    pub(crate) fn tree_entries(&self) -> anyhow::Result<(u64, u64)> {
        use redb::ReadableTableMetadata as _;
        let txn = self.inner.db.begin_read()?;
        Ok((
            txn.open_table(db::NODES)?.len()?,
            txn.open_table(db::VALUES)?.len()?,
        ))
    }

    /// The oldest version whose tree is whole: 0, or the last `keep_from` given to
    /// [`Store::prune`].
    pub fn oldest_version(&self) -> anyhow::Result<u64> {
        self.snapshot()?.oldest_version()
    }
}

/// Removes the entries of `stale` below `end` and the `target` rows they name (a stale key's
/// 8-byte version prefix dropped); returns how many rows were really removed (a delete is
/// recorded at its own version and again when its key is set anew).
fn drop_stale(
    txn: &WriteTransaction,
    stale: TableDefinition<&[u8], &[u8]>,
    target: TableDefinition<&[u8], &[u8]>,
    end: &[u8],
) -> anyhow::Result<u64> {
    let mut target = txn.open_table(target)?;
    let mut stale = txn.open_table(stale)?;
    let mut removed = 0;
    for entry in stale.extract_from_if(..end, |_, _| true)? {
        let (key, _) = entry?;
        if target.remove(&key.value()[8..])?.is_some() {
            removed += 1;
        }
    }
    Ok(removed)
}

/// Errors unless `version` is committed (versions 0..=latest all are: commits are contiguous)
/// and not pruned.
pub(crate) fn check_committed(snap: &Snapshot, version: u64) -> anyhow::Result<()> {
    let latest = snap.latest_version()?;
    match latest {
        Some(latest) if version <= latest => {
            let oldest = snap.oldest_version()?;
            if version < oldest {
                return Err(StoreError::VersionPruned {
                    requested: version,
                    oldest,
                }
                .into());
            }
            Ok(())
        }
        _ => Err(StoreError::VersionNotCommitted {
            requested: version,
            latest,
        }
        .into()),
    }
}

/// Every write of `prepared`, into `txn`; checks first that nothing was committed since prepare.
fn write_prepared(txn: &WriteTransaction, prepared: &PreparedCommit) -> anyhow::Result<()> {
    let mut meta = txn.open_table(db::META)?;
    let found = meta
        .get(db::META_LATEST_VERSION)?
        .map(|v| db::decode_u64(db::META_LATEST_VERSION, v.value()))
        .transpose()?;
    // prepare guaranteed first_version == latest + 1, or 0 on an empty store.
    let prepared_on = prepared.first_version.checked_sub(1);
    if found != prepared_on {
        return Err(StoreError::StaleCommit {
            first_version: prepared.first_version,
            prepared_on,
            found,
        }
        .into());
    }

    let mut nodes = txn.open_table(db::NODES)?;
    for (node_key, node) in prepared.batch.node_batch.nodes() {
        let key = db::node_key_bytes(node_key)?;
        let value = db::node_bytes(node)?;
        nodes.insert(key.as_slice(), value.as_slice())?;
    }
    // What these versions made stale, for pruning: the tree says which nodes; a value is
    // stale from the version that writes the key again.
    let mut stale_nodes = txn.open_table(db::STALE_NODES)?;
    for stale in &prepared.batch.stale_node_index_batch {
        let node_key = db::node_key_bytes(&stale.node_key)?;
        let key = db::stale_key(stale.stale_since_version, &[&node_key]);
        stale_nodes.insert(key.as_slice(), [].as_slice())?;
    }
    let mut stale_values = txn.open_table(db::STALE_VALUES)?;
    let mut values = txn.open_table(db::VALUES)?;
    // In (version, key hash) order, so a key written in two versions of one batch finds the
    // first when the second is written.
    for ((version, key_hash), value) in prepared.batch.node_batch.values() {
        let key = db::value_key(key_hash, *version);
        let lowest = db::value_key(key_hash, 0);
        let replaced = values
            .range(lowest.as_slice()..key.as_slice())?
            .next_back()
            .transpose()?
            .map(|(previous, _)| previous.value().to_vec());
        if let Some(previous) = replaced {
            let stale = db::stale_key(*version, &[&previous]);
            stale_values.insert(stale.as_slice(), [].as_slice())?;
        }
        // A delete needs no record of its own once what it deleted is gone: reads from its
        // version on find nothing either way.
        if value.is_none() {
            let stale = db::stale_key(*version, &[&key]);
            stale_values.insert(stale.as_slice(), [].as_slice())?;
        }
        let value = db::value_bytes(value.as_deref());
        values.insert(key.as_slice(), value.as_slice())?;
    }

    // Change sets in version order, so the index ends at the last version's values.
    let mut preimages = txn.open_table(db::PREIMAGES)?;
    let mut index = txn.open_table(db::INDEX)?;
    for change_set in &prepared.change_sets {
        for (key, value) in change_set {
            match value {
                Some(value) => {
                    let key_hash = KeyHash::with::<Sha256>(key);
                    preimages.insert(key_hash.0.as_slice(), key.as_slice())?;
                    index.insert(key.as_slice(), value.as_slice())?;
                }
                None => {
                    index.remove(key.as_slice())?;
                }
            }
        }
    }

    meta.insert(
        db::META_LATEST_VERSION,
        prepared.version().to_be_bytes().as_slice(),
    )?;
    meta.insert(db::META_LATEST_ROOT, prepared.root().as_slice())?;
    Ok(())
}

/// The result of [`Store::prepare`]: root hashes plus everything [`Store::commit`] will write.
///
/// Holding one writes nothing; dropping it uncommitted leaves the store untouched.
#[derive(Clone)]
pub struct PreparedCommit {
    first_version: u64,
    roots: Vec<[u8; 32]>,
    batch: TreeUpdateBatch,
    change_sets: Vec<ChangeSet>,
}

impl PreparedCommit {
    /// Last version in the batch.
    pub fn version(&self) -> u64 {
        // prepare guarantees at least one change set and no overflow.
        self.first_version + self.roots.len() as u64 - 1
    }

    /// First version in the batch.
    pub fn first_version(&self) -> u64 {
        self.first_version
    }

    /// Root hash of the last version (the app hash).
    pub fn root(&self) -> [u8; 32] {
        *self
            .roots
            .last()
            .expect("prepare guarantees at least one change set")
    }

    /// Root hashes, one per change set.
    pub fn roots(&self) -> &[[u8; 32]] {
        &self.roots
    }

    /// The change sets, one per version.
    pub fn change_sets(&self) -> &[ChangeSet] {
        &self.change_sets
    }

    /// The tree nodes this commit will write.
    #[cfg(test)]
    pub(crate) fn batch_nodes_for_test(
        &self,
    ) -> &std::collections::BTreeMap<jmt::storage::NodeKey, jmt::storage::Node> {
        self.batch.node_batch.nodes()
    }
}

impl std::fmt::Debug for PreparedCommit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PreparedCommit")
            .field("first_version", &self.first_version)
            .field(
                "roots",
                &self.roots.iter().map(hex::encode).collect::<Vec<_>>(),
            )
            .field("nodes", &self.batch.node_batch.nodes().len())
            .field("values", &self.batch.node_batch.values().len())
            .finish()
    }
}
