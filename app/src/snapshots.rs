//! State sync: the app's snapshots of its committed state, and restoring from a peer's.
//!
//! **Production.** With [`SnapshotConfig::interval`] N > 0, the commit of every height that is
//! a multiple of N opens a read view of the store at that height (cheap) and hands it to a
//! background thread, which writes `<dir>/<height>.tmp/` — one file per chunk (`0`, `1`, …)
//! and `metadata` — and renames it to `<dir>/<height>/` when whole. Block processing never
//! waits for it; if the previous snapshot is still being written, this one is skipped. Only
//! the newest [`SnapshotConfig::keep_recent`] snapshots are kept.
//!
//! **Format 1.** The chunks are [`gonka_store::Store::export`]'s: leaves of the tree in
//! key-hash order, each chunk with the range proof of its last key. The ABCI `Snapshot` has
//! `format = 1`, `chunks`, `metadata` = [`MetadataV1::encode`] (the app hash and every
//! chunk's SHA-256) and `hash` = SHA-256(metadata), so peers serving "the same" snapshot serve
//! the same chunks.
//!
//! **Restore.** `OfferSnapshot` accepts format 1 only, with metadata that decodes, holds as
//! many chunk hashes as the snapshot has chunks (1 to [`MAX_CHUNKS`]), hashes to the snapshot's
//! hash, and names the app hash CometBFT's light client verified for that height; it starts a
//! [`gonka_store::Restore`] into the (empty) store. `ApplySnapshotChunk` checks the chunk's
//! SHA-256 first (a mismatch: `RETRY` the chunk from another peer, the sender rejected), then
//! the store checks the chunk's leaves prove out to the trusted root (a failure: the restore
//! is wiped, `REJECT_SNAPSHOT`, the sender rejected). After the last chunk the store checks
//! the rebuilt root and commits the height; `Info` then answers that height and app hash, and
//! the node follows the chain from the next block.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use anyhow::{anyhow, bail, Context};
use gonka_store::{Export, Restore, Store, SNAPSHOT_FORMAT};
use sha2::{Digest, Sha256};
use tendermint_proto::v0_38::abci::{
    response_apply_snapshot_chunk::Result as ApplyResult,
    response_offer_snapshot::Result as OfferResult, RequestApplySnapshotChunk,
    RequestLoadSnapshotChunk, RequestOfferSnapshot, ResponseApplySnapshotChunk,
    ResponseListSnapshots, ResponseLoadSnapshotChunk, ResponseOfferSnapshot, Snapshot,
};

use crate::lock::lock;

/// Most chunks a snapshot may have: with 4 MiB chunks, 256 GiB of state; its metadata (32
/// bytes a chunk) stays within CometBFT's 4 MB snapshot message.
pub const MAX_CHUNKS: u32 = 65_536;

/// Name of the metadata file in a snapshot's directory.
const METADATA_FILE: &str = "metadata";

/// Suffix of a snapshot directory still being written.
const PARTIAL_SUFFIX: &str = ".tmp";

/// Where and how often a node writes snapshots.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotConfig {
    /// Write a snapshot at every height that is a multiple of this; 0 writes none (the node
    /// can still restore from others').
    pub interval: u64,
    /// Snapshots kept; older ones are deleted once a new one is whole. At least 1.
    pub keep_recent: u32,
    /// The directory holding one subdirectory per snapshot height.
    pub dir: PathBuf,
    /// Chunk size aimed at (entries; the range proof adds at most
    /// [`gonka_store::MAX_PROOF_BYTES`]).
    pub chunk_bytes: usize,
}

impl SnapshotConfig {
    /// Snapshots every `interval` heights under `<home>/data/snapshots`, keeping
    /// `keep_recent`, in chunks of [`gonka_store::DEFAULT_CHUNK_BYTES`].
    pub fn in_home(home: &Path, interval: u64, keep_recent: u32) -> SnapshotConfig {
        SnapshotConfig {
            interval,
            keep_recent: keep_recent.max(1),
            dir: home.join("data").join("snapshots"),
            chunk_bytes: gonka_store::DEFAULT_CHUNK_BYTES,
        }
    }
}

/// The `metadata` of a format-1 snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetadataV1 {
    /// The app hash (tree root) at the snapshot's height.
    pub app_hash: [u8; 32],
    /// SHA-256 of each chunk, in order.
    pub chunk_hashes: Vec<[u8; 32]>,
}

impl MetadataV1 {
    /// The encoding (borsh's): the app hash, the number of chunks (u32 little-endian), the
    /// chunk hashes.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(36 + 32 * self.chunk_hashes.len());
        out.extend_from_slice(&self.app_hash);
        out.extend_from_slice(&(self.chunk_hashes.len() as u32).to_le_bytes());
        for hash in &self.chunk_hashes {
            out.extend_from_slice(hash);
        }
        out
    }

    /// Decodes [`MetadataV1::encode`]'s bytes; every byte must be used.
    pub fn decode(bytes: &[u8]) -> Result<MetadataV1, String> {
        if bytes.len() < 36 {
            return Err(format!(
                "{} bytes, fewer than the 36 of an empty list",
                bytes.len()
            ));
        }
        let (app_hash, rest) = bytes.split_at(32);
        let (count, hashes) = rest.split_at(4);
        let count = u32::from_le_bytes([count[0], count[1], count[2], count[3]]) as usize;
        if hashes.len() != 32 * count {
            return Err(format!(
                "{count} chunk hashes need {} bytes after the count, found {}",
                32 * count,
                hashes.len()
            ));
        }
        Ok(MetadataV1 {
            app_hash: app_hash.try_into().expect("split at 32"),
            chunk_hashes: hashes
                .chunks_exact(32)
                .map(|h| h.try_into().expect("chunks of 32"))
                .collect(),
        })
    }
}

/// Holds the "a snapshot is being written" flag; clears it when dropped.
struct Writing(Arc<AtomicBool>);

impl Drop for Writing {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

/// A restore under way: what the accepted snapshot promised and how far it got.
struct Restoring {
    restore: Restore,
    height: u64,
    metadata: MetadataV1,
    next: u32,
}

/// The app's snapshot state: its configuration, the writer in flight, a restore in progress.
#[derive(Default)]
pub(crate) struct Snapshots {
    config: Mutex<Option<SnapshotConfig>>,
    writing: Arc<AtomicBool>,
    restoring: Mutex<Option<Restoring>>,
}

fn sha256(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

impl Snapshots {
    /// Sets the configuration and removes snapshot directories a crash left half-written.
    pub(crate) fn configure(&self, config: SnapshotConfig) -> anyhow::Result<()> {
        std::fs::create_dir_all(&config.dir)
            .with_context(|| format!("creating the snapshot directory {}", config.dir.display()))?;
        for entry in std::fs::read_dir(&config.dir)? {
            let path = entry?.path();
            if path.extension().is_some_and(|e| *e == PARTIAL_SUFFIX[1..]) {
                std::fs::remove_dir_all(&path)
                    .with_context(|| format!("removing {}", path.display()))?;
            }
        }
        *lock(&self.config) = Some(config);
        Ok(())
    }

    fn config(&self) -> Option<SnapshotConfig> {
        lock(&self.config).clone()
    }

    /// After the commit of `height`: starts writing a snapshot of it if one is due.
    pub(crate) fn after_commit(&self, store: &Store, height: u64) {
        let Some(config) = self.config() else { return };
        if config.interval == 0 || height == 0 || !height.is_multiple_of(config.interval) {
            return;
        }
        if self.writing.swap(true, Ordering::AcqRel) {
            tracing::warn!(
                height,
                "skipping the snapshot of this height: the previous one is still being written"
            );
            return;
        }
        // Clears the flag when dropped: on any early return, or when the writer ends.
        let writing = Writing(Arc::clone(&self.writing));
        // The read view is taken now, so pruning cannot take the version away meanwhile.
        let export = match store.export(height, config.chunk_bytes) {
            Ok(export) => export,
            Err(e) => {
                tracing::warn!(height, error = %format!("{e:#}"), "cannot snapshot this height");
                return;
            }
        };
        let spawned = std::thread::Builder::new()
            .name(format!("snapshot-{height}"))
            .spawn(move || {
                // Dropped when this thread ends, even by a panic.
                let _writing = writing;
                match write_snapshot(&config, export) {
                    Ok(chunks) => {
                        tracing::info!(height, chunks, dir = %config.dir.display(), "snapshot written");
                        if let Err(e) = prune_snapshots(&config) {
                            tracing::warn!(error = %format!("{e:#}"), "deleting old snapshots failed");
                        }
                    }
                    Err(e) => {
                        tracing::warn!(height, error = %format!("{e:#}"), "writing a snapshot failed")
                    }
                }
            });
        if let Err(e) = spawned {
            tracing::warn!(height, error = %e, "cannot start the snapshot writer");
        }
    }

    /// The whole snapshots on disk, newest first.
    pub(crate) fn list(&self) -> ResponseListSnapshots {
        let Some(config) = self.config() else {
            return ResponseListSnapshots::default();
        };
        let snapshots = match list_snapshots(&config.dir) {
            Ok(list) => list,
            Err(e) => {
                tracing::warn!(error = %format!("{e:#}"), "listing snapshots failed");
                Vec::new()
            }
        };
        ResponseListSnapshots { snapshots }
    }

    /// One chunk of one of our snapshots; empty when we do not have it.
    pub(crate) fn load_chunk(
        &self,
        request: RequestLoadSnapshotChunk,
    ) -> ResponseLoadSnapshotChunk {
        let Some(config) = self.config() else {
            return ResponseLoadSnapshotChunk::default();
        };
        if request.format != SNAPSHOT_FORMAT {
            return ResponseLoadSnapshotChunk::default();
        }
        let path = config
            .dir
            .join(request.height.to_string())
            .join(request.chunk.to_string());
        match std::fs::read(&path) {
            Ok(chunk) => ResponseLoadSnapshotChunk {
                chunk: chunk.into(),
            },
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "a peer asked for a snapshot chunk we cannot read");
                ResponseLoadSnapshotChunk::default()
            }
        }
    }

    /// Decides on a snapshot a peer offers (see the module doc) and starts restoring it.
    pub(crate) fn offer(
        &self,
        store: &Store,
        request: RequestOfferSnapshot,
    ) -> ResponseOfferSnapshot {
        let result = match self.try_offer(store, request) {
            Ok(()) => OfferResult::Accept,
            Err(refusal) => {
                tracing::warn!(reason = %refusal.reason, "refusing an offered snapshot");
                refusal.result
            }
        };
        ResponseOfferSnapshot {
            result: result as i32,
        }
    }

    fn try_offer(&self, store: &Store, request: RequestOfferSnapshot) -> Result<(), Refusal> {
        let snapshot = request
            .snapshot
            .ok_or_else(|| Refusal::reject("the offer holds no snapshot".into()))?;
        if let Some(latest) = store.latest_version().map_err(Refusal::abort)? {
            return Err(Refusal {
                result: OfferResult::Abort,
                reason: format!(
                    "state sync needs an empty state database, but this one holds height {latest}"
                ),
            });
        }
        let metadata = check_offer(&snapshot, &request.app_hash).map_err(|e| match e {
            OfferError::Format(found) => Refusal {
                result: OfferResult::RejectFormat,
                reason: format!(
                    "snapshot format {found} is not supported: this node restores format \
                     {SNAPSHOT_FORMAT}"
                ),
            },
            OfferError::Invalid(reason) => Refusal::reject(reason),
        })?;
        let mut restoring = lock(&self.restoring);
        // A snapshot offered again (CometBFT retrying it) or another one: start over clean.
        if let Some(previous) = restoring.take() {
            previous.restore.abort().map_err(Refusal::abort)?;
        }
        let restore = store
            .begin_restore(snapshot.height, metadata.app_hash)
            .map_err(Refusal::abort)?;
        tracing::info!(
            height = snapshot.height,
            chunks = snapshot.chunks,
            app_hash = %hex::encode(metadata.app_hash),
            "snapshot accepted, restoring"
        );
        *restoring = Some(Restoring {
            restore,
            height: snapshot.height,
            metadata,
            next: 0,
        });
        Ok(())
    }

    /// Applies one chunk of the accepted snapshot; after the last one, `Some(height)` says
    /// the store now holds that height.
    pub(crate) fn apply_chunk(
        &self,
        request: RequestApplySnapshotChunk,
    ) -> (ResponseApplySnapshotChunk, Option<u64>) {
        let answer =
            |result: ApplyResult, refetch: Vec<u32>, reject: bool| ResponseApplySnapshotChunk {
                result: result as i32,
                refetch_chunks: refetch,
                reject_senders: if reject && !request.sender.is_empty() {
                    vec![request.sender.clone()]
                } else {
                    Vec::new()
                },
            };
        let mut slot = lock(&self.restoring);
        let Some(restoring) = slot.as_mut() else {
            tracing::warn!(
                index = request.index,
                "a snapshot chunk arrived but no snapshot was accepted"
            );
            return (answer(ApplyResult::Abort, Vec::new(), false), None);
        };
        let index = request.index;
        if index < restoring.next {
            // Applied already (a refetch raced it): nothing to do.
            return (answer(ApplyResult::Accept, Vec::new(), false), None);
        }
        if index > restoring.next {
            tracing::warn!(
                index,
                expected = restoring.next,
                "snapshot chunk out of order; restarting the snapshot"
            );
            return (answer(ApplyResult::RetrySnapshot, Vec::new(), false), None);
        }
        let expected = restoring.metadata.chunk_hashes[index as usize];
        let found = sha256(&request.chunk);
        if found != expected {
            tracing::warn!(
                index,
                sender = %request.sender,
                expected = %hex::encode(expected),
                found = %hex::encode(found),
                "snapshot chunk does not match its hash in the metadata; refetching it from another peer"
            );
            return (answer(ApplyResult::Retry, vec![index], true), None);
        }
        if let Err(e) = restoring.restore.add_chunk(&request.chunk) {
            tracing::warn!(index, sender = %request.sender, error = %format!("{e:#}"), "snapshot chunk refused; rejecting the snapshot");
            let failed = slot.take().expect("checked above");
            if let Err(e) = failed.restore.abort() {
                tracing::error!(error = %format!("{e:#}"), "wiping the failed restore failed");
                return (answer(ApplyResult::Abort, Vec::new(), true), None);
            }
            return (answer(ApplyResult::RejectSnapshot, Vec::new(), true), None);
        }
        restoring.next += 1;
        if (restoring.next as usize) < restoring.metadata.chunk_hashes.len() {
            return (answer(ApplyResult::Accept, Vec::new(), false), None);
        }
        let done = slot.take().expect("checked above");
        let height = done.height;
        match done.restore.finish() {
            Ok(()) => (answer(ApplyResult::Accept, Vec::new(), false), Some(height)),
            Err(e) => {
                tracing::warn!(height, error = %format!("{e:#}"), "the restored state does not match the snapshot; rejecting it");
                (answer(ApplyResult::RejectSnapshot, Vec::new(), true), None)
            }
        }
    }
}

/// Why an offer is refused, and what to tell CometBFT.
struct Refusal {
    result: OfferResult,
    reason: String,
}

impl Refusal {
    fn reject(reason: String) -> Refusal {
        Refusal {
            result: OfferResult::Reject,
            reason,
        }
    }

    /// A local failure (the disk, the database): stop state sync rather than try others.
    fn abort(error: anyhow::Error) -> Refusal {
        Refusal {
            result: OfferResult::Abort,
            reason: format!("{error:#}"),
        }
    }
}

/// What is wrong with an offered snapshot.
#[derive(Debug, PartialEq, Eq)]
pub enum OfferError {
    /// A format other than [`SNAPSHOT_FORMAT`].
    Format(u32),
    /// Anything else, said in words.
    Invalid(String),
}

/// Checks an offered snapshot against the app hash the light client trusts for its height
/// (see the module doc) and returns its metadata.
pub fn check_offer(snapshot: &Snapshot, trusted_app_hash: &[u8]) -> Result<MetadataV1, OfferError> {
    if snapshot.format != SNAPSHOT_FORMAT {
        return Err(OfferError::Format(snapshot.format));
    }
    let invalid = |s: String| Err(OfferError::Invalid(s));
    if snapshot.height == 0 || i64::try_from(snapshot.height).is_err() {
        return invalid(format!(
            "snapshot height {} is out of range",
            snapshot.height
        ));
    }
    if snapshot.chunks == 0 || snapshot.chunks > MAX_CHUNKS {
        return invalid(format!(
            "snapshot of height {} has {} chunks; expected 1 to {MAX_CHUNKS}",
            snapshot.height, snapshot.chunks
        ));
    }
    // Metadata of exactly this many hashes: a 32-byte hash, a 4-byte count, the hashes.
    let expected_len = 32 + 4 + 32 * snapshot.chunks as usize;
    if snapshot.metadata.len() != expected_len {
        return invalid(format!(
            "snapshot metadata of {} chunks must be {expected_len} bytes, found {}",
            snapshot.chunks,
            snapshot.metadata.len()
        ));
    }
    let metadata = MetadataV1::decode(&snapshot.metadata)
        .map_err(|e| OfferError::Invalid(format!("snapshot metadata does not decode: {e}")))?;
    if metadata.chunk_hashes.len() != snapshot.chunks as usize {
        return invalid(format!(
            "snapshot has {} chunks but its metadata lists {} chunk hashes",
            snapshot.chunks,
            metadata.chunk_hashes.len()
        ));
    }
    if snapshot.hash.as_ref() != sha256(&snapshot.metadata).as_slice() {
        return invalid("snapshot hash is not the SHA-256 of its metadata".into());
    }
    if trusted_app_hash != metadata.app_hash.as_slice() {
        return invalid(format!(
            "snapshot of height {} is of app hash {}, but the light client trusts {} for that \
             height",
            snapshot.height,
            hex::encode(metadata.app_hash),
            hex::encode(trusted_app_hash)
        ));
    }
    Ok(metadata)
}

/// Writes every chunk of `export` and the metadata under `<dir>/<height>.tmp`, then renames it
/// to `<dir>/<height>`; returns the number of chunks.
fn write_snapshot(config: &SnapshotConfig, export: Export) -> anyhow::Result<u32> {
    let height = export.version();
    let app_hash = export.root();
    let done = config.dir.join(height.to_string());
    if done.exists() {
        bail!("a snapshot of height {height} exists already");
    }
    let partial = config.dir.join(format!("{height}{PARTIAL_SUFFIX}"));
    if partial.exists() {
        std::fs::remove_dir_all(&partial)?;
    }
    std::fs::create_dir_all(&partial).with_context(|| format!("creating {}", partial.display()))?;
    let written = (|| {
        let mut chunk_hashes = Vec::new();
        for (index, chunk) in export.enumerate() {
            let chunk = chunk?;
            if index as u32 >= MAX_CHUNKS {
                bail!("the state at height {height} needs more than {MAX_CHUNKS} chunks");
            }
            chunk_hashes.push(sha256(&chunk));
            let path = partial.join(index.to_string());
            std::fs::write(&path, &chunk).with_context(|| format!("writing {}", path.display()))?;
        }
        let chunks = chunk_hashes.len() as u32;
        let metadata = MetadataV1 {
            app_hash,
            chunk_hashes,
        }
        .encode();
        std::fs::write(partial.join(METADATA_FILE), metadata)?;
        std::fs::rename(&partial, &done)
            .with_context(|| format!("renaming {} to {}", partial.display(), done.display()))?;
        Ok(chunks)
    })();
    if written.is_err() {
        let _ = std::fs::remove_dir_all(&partial);
    }
    written
}

/// The heights of the whole snapshots in `dir`, ascending.
fn snapshot_heights(dir: &Path) -> anyhow::Result<Vec<u64>> {
    let mut heights = Vec::new();
    for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let entry = entry?;
        if let Some(height) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u64>().ok())
        {
            heights.push(height);
        }
    }
    heights.sort_unstable();
    Ok(heights)
}

/// The whole snapshots in `dir` as ABCI snapshots, newest first.
fn list_snapshots(dir: &Path) -> anyhow::Result<Vec<Snapshot>> {
    let mut out = Vec::new();
    for height in snapshot_heights(dir)?.into_iter().rev() {
        let path = dir.join(height.to_string()).join(METADATA_FILE);
        let metadata =
            std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
        let decoded = MetadataV1::decode(&metadata)
            .map_err(|e| anyhow!("{} does not decode: {e}", path.display()))?;
        out.push(Snapshot {
            height,
            format: SNAPSHOT_FORMAT,
            chunks: decoded.chunk_hashes.len() as u32,
            hash: sha256(&metadata).to_vec().into(),
            metadata: metadata.into(),
        });
    }
    Ok(out)
}

/// Deletes all but the newest `keep_recent` snapshots.
fn prune_snapshots(config: &SnapshotConfig) -> anyhow::Result<()> {
    let heights = snapshot_heights(&config.dir)?;
    let keep = (config.keep_recent.max(1) as usize).min(heights.len());
    for height in &heights[..heights.len() - keep] {
        let path = config.dir.join(height.to_string());
        std::fs::remove_dir_all(&path).with_context(|| format!("removing {}", path.display()))?;
        tracing::debug!(height, "old snapshot deleted");
    }
    Ok(())
}
