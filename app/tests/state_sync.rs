//! State sync in-process: a chain writes snapshots, a fresh app restores one through the ABCI
//! snapshot calls and then executes the next blocks to the same app hashes; offers and chunks
//! that lie are refused and leave nothing behind.

mod common;

use std::path::Path;

use common::*;
use gonka_app::harness::TestChain;
use gonka_app::snapshots::MetadataV1;
use gonka_app::{App, SnapshotConfig};
use sha2::{Digest, Sha256};
use tendermint_abci::Application;
use tendermint_proto::v0_38::abci::{
    response_apply_snapshot_chunk::Result as ApplyResult,
    response_offer_snapshot::Result as OfferResult, RequestApplySnapshotChunk, RequestInfo,
    RequestLoadSnapshotChunk, RequestOfferSnapshot, Snapshot,
};

/// Snapshots every 4 heights in chunks of about 1 KiB (so there are several), keeping 2.
fn config(dir: &Path) -> SnapshotConfig {
    SnapshotConfig {
        interval: 4,
        keep_recent: 2,
        dir: dir.to_path_buf(),
        chunk_bytes: 1024,
    }
}

/// A chain of 8 blocks with a send in each (so the state has accounts, balances, fees), its
/// snapshots directory, and alice's next sequence.
struct Source {
    fixture: Fixture,
    _snapshots: tempfile::TempDir,
    sequence: u64,
}

impl Source {
    fn new() -> Source {
        let fixture = Fixture::new();
        let snapshots = tempfile::tempdir().unwrap();
        fixture
            .chain
            .app()
            .set_snapshots(config(snapshots.path()))
            .unwrap();
        let mut source = Source {
            fixture,
            _snapshots: snapshots,
            sequence: 0,
        };
        for _ in 0..8 {
            let tx = source.next_send();
            let block = source.fixture.chain.next_block(vec![tx]);
            assert_eq!(block.tx_results[0].code, 0, "{}", block.tx_results[0].log);
        }
        source
    }

    fn next_send(&mut self) -> Vec<u8> {
        let tx = send("alice", "bob", 1_000 + self.sequence as u128, self.sequence);
        self.sequence += 1;
        tx
    }

    fn app(&self) -> &App {
        self.fixture.chain.app()
    }

    /// The snapshots listed once the one of `height` is written (in the background).
    fn snapshots_through(&self, height: u64) -> Vec<Snapshot> {
        for _ in 0..500 {
            let listed = self.app().list_snapshots().snapshots;
            if listed.first().is_some_and(|s| s.height >= height) {
                return listed;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        panic!("no snapshot of height {height} after 10 s");
    }

    fn chunks(&self, snapshot: &Snapshot) -> Vec<Vec<u8>> {
        (0..snapshot.chunks)
            .map(|chunk| {
                let loaded = self.app().load_snapshot_chunk(RequestLoadSnapshotChunk {
                    height: snapshot.height,
                    format: snapshot.format,
                    chunk,
                });
                assert!(!loaded.chunk.is_empty(), "chunk {chunk} served");
                loaded.chunk.to_vec()
            })
            .collect()
    }

    fn app_hash_at(&self, height: u64) -> Vec<u8> {
        self.app().store().root_at(height).unwrap().to_vec()
    }
}

fn offer(app: &App, snapshot: &Snapshot, trusted: &[u8]) -> OfferResult {
    let response = app.offer_snapshot(RequestOfferSnapshot {
        snapshot: Some(snapshot.clone()),
        app_hash: trusted.to_vec().into(),
    });
    OfferResult::try_from(response.result).unwrap()
}

fn apply(
    app: &App,
    index: u32,
    chunk: &[u8],
    sender: &str,
) -> (ApplyResult, Vec<u32>, Vec<String>) {
    let response = app.apply_snapshot_chunk(RequestApplySnapshotChunk {
        index,
        chunk: chunk.to_vec().into(),
        sender: sender.into(),
    });
    (
        ApplyResult::try_from(response.result).unwrap(),
        response.refetch_chunks,
        response.reject_senders,
    )
}

fn info(app: &App) -> (i64, Vec<u8>) {
    let info = app.info(RequestInfo::default());
    (info.last_block_height, info.last_block_app_hash.to_vec())
}

/// A snapshot whose metadata is `metadata`, consistent in itself (chunk count and hash).
fn snapshot_of(height: u64, metadata: &MetadataV1) -> Snapshot {
    let bytes = metadata.encode();
    Snapshot {
        height,
        format: 1,
        chunks: metadata.chunk_hashes.len() as u32,
        hash: Sha256::digest(&bytes).to_vec().into(),
        metadata: bytes.into(),
    }
}

fn metadata_of(snapshot: &Snapshot) -> MetadataV1 {
    MetadataV1::decode(&snapshot.metadata).unwrap()
}

#[test]
fn a_restored_app_executes_the_next_blocks_to_the_same_app_hashes() {
    let mut source = Source::new();
    let listed = source.snapshots_through(8);
    // Every 4 heights, the newest 2 kept.
    assert_eq!(
        listed.iter().map(|s| s.height).collect::<Vec<_>>(),
        vec![8, 4]
    );
    let snapshot = listed[0].clone();
    assert!(snapshot.chunks > 1, "small chunks make several");
    let chunks = source.chunks(&snapshot);
    let trusted = source.app_hash_at(8);

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.redb");
    {
        let fresh = App::open(&path).unwrap();
        assert_eq!(info(&fresh), (0, vec![]));
        assert_eq!(offer(&fresh, &snapshot, &trusted), OfferResult::Accept);
        for (index, chunk) in chunks.iter().enumerate() {
            let (result, refetch, reject) = apply(&fresh, index as u32, chunk, "peer-a");
            assert_eq!(
                (result, refetch, reject),
                (ApplyResult::Accept, vec![], vec![])
            );
        }
        // What CometBFT checks after the last chunk.
        assert_eq!(info(&fresh), (8, trusted.clone()));
        // The mempool state follows the restored chain at once.
        let tx = source.next_send();
        assert_eq!(
            fresh
                .check_tx(tendermint_proto::v0_38::abci::RequestCheckTx {
                    tx: tx.clone().into(),
                    r#type: 0
                })
                .code,
            0
        );
        source.sequence -= 1;
        // An offer to a node that holds state is aborted.
        assert_eq!(offer(&fresh, &snapshot, &trusted), OfferResult::Abort);
    }

    let mut restored = TestChain::reopen(&path).unwrap();
    assert_eq!(restored.height(), 8);
    for height in 9..=14 {
        let txs = vec![source.next_send()];
        let a = source.fixture.chain.next_block(txs.clone());
        let b = restored.next_block(txs);
        assert_eq!(b.tx_results[0].code, 0, "{}", b.tx_results[0].log);
        assert_eq!(a.tx_results, b.tx_results, "height {height}");
        assert_eq!(a.app_hash, b.app_hash, "app hash of height {height}");
    }
    assert_eq!(restored.app_hash(), source.fixture.chain.app_hash());
    // The restored node snapshots too: its snapshot of height 16 is the source's, byte for
    // byte.
    let snapshots = tempfile::tempdir().unwrap();
    restored
        .app()
        .set_snapshots(config(snapshots.path()))
        .unwrap();
    for _ in 15..=16 {
        restored.next_block(vec![]);
        source.fixture.chain.next_block(vec![]);
    }
    assert_eq!(restored.app_hash(), source.fixture.chain.app_hash());
    let ours = source.snapshots_through(16)[0].clone();
    let theirs = (0..500)
        .find_map(|_| {
            let listed = restored.app().list_snapshots().snapshots;
            if listed.first().is_some_and(|s| s.height == 16) {
                return Some(listed[0].clone());
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
            None
        })
        .expect("the restored node writes its snapshot of height 16");
    assert_eq!(theirs, ours);
}

#[test]
fn a_chunk_with_a_flipped_byte_is_refetched_and_its_sender_rejected() {
    let source = Source::new();
    let snapshot = source.snapshots_through(8)[0].clone();
    let chunks = source.chunks(&snapshot);
    let trusted = source.app_hash_at(8);
    let dir = tempfile::tempdir().unwrap();
    let fresh = App::open(&dir.path().join("state.redb")).unwrap();
    assert_eq!(offer(&fresh, &snapshot, &trusted), OfferResult::Accept);
    assert_eq!(apply(&fresh, 0, &chunks[0], "a").0, ApplyResult::Accept);
    let mut bad = chunks[1].clone();
    let middle = bad.len() / 2;
    bad[middle] ^= 0x40;
    assert_eq!(
        apply(&fresh, 1, &bad, "liar"),
        (ApplyResult::Retry, vec![1], vec!["liar".to_string()])
    );
    // The honest copy from another peer goes on where the bad one was refused.
    for (index, chunk) in chunks.iter().enumerate().skip(1) {
        assert_eq!(
            apply(&fresh, index as u32, chunk, "b").0,
            ApplyResult::Accept
        );
    }
    assert_eq!(info(&fresh), (8, trusted));
}

#[test]
fn a_consistent_but_false_snapshot_is_rejected_and_leaves_nothing() {
    let source = Source::new();
    let snapshot = source.snapshots_through(8)[0].clone();
    let chunks = source.chunks(&snapshot);
    let trusted = source.app_hash_at(8);
    let dir = tempfile::tempdir().unwrap();
    let fresh = App::open(&dir.path().join("state.redb")).unwrap();

    // A forger changes a byte of chunk 1 and republishes metadata and hash to match: the
    // chunk passes its hash check, but not its proof against the trusted app hash.
    let mut forged_chunks = chunks.clone();
    let last = forged_chunks[1].len() - 40;
    forged_chunks[1][last] ^= 0x01;
    let mut metadata = metadata_of(&snapshot);
    metadata.chunk_hashes[1] = Sha256::digest(&forged_chunks[1]).into();
    let forged = snapshot_of(8, &metadata);
    assert_eq!(offer(&fresh, &forged, &trusted), OfferResult::Accept);
    assert_eq!(
        apply(&fresh, 0, &forged_chunks[0], "a").0,
        ApplyResult::Accept
    );
    assert_eq!(
        apply(&fresh, 1, &forged_chunks[1], "forger"),
        (
            ApplyResult::RejectSnapshot,
            vec![],
            vec!["forger".to_string()]
        )
    );
    assert_eq!(info(&fresh), (0, vec![]));
    assert!(
        fresh.store().prefix(b"").unwrap().is_empty(),
        "nothing half-written"
    );
    // A chunk after the rejection finds no snapshot.
    assert_eq!(apply(&fresh, 2, &chunks[2], "a").0, ApplyResult::Abort);

    // A snapshot that ends early (its last chunk dropped, metadata made to match): every
    // chunk proves, the rebuilt root does not.
    let mut metadata = metadata_of(&snapshot);
    metadata.chunk_hashes.pop();
    let short = snapshot_of(8, &metadata);
    assert_eq!(offer(&fresh, &short, &trusted), OfferResult::Accept);
    let n = chunks.len() - 1;
    for (index, chunk) in chunks[..n - 1].iter().enumerate() {
        assert_eq!(
            apply(&fresh, index as u32, chunk, "a").0,
            ApplyResult::Accept
        );
    }
    assert_eq!(
        apply(&fresh, n as u32 - 1, &chunks[n - 1], "a").0,
        ApplyResult::RejectSnapshot
    );
    assert_eq!(info(&fresh), (0, vec![]));

    // The real snapshot still restores afterwards.
    assert_eq!(offer(&fresh, &snapshot, &trusted), OfferResult::Accept);
    for (index, chunk) in chunks.iter().enumerate() {
        assert_eq!(
            apply(&fresh, index as u32, chunk, "a").0,
            ApplyResult::Accept
        );
    }
    assert_eq!(info(&fresh), (8, trusted));
}

#[test]
fn offers_that_do_not_add_up_are_refused() {
    let source = Source::new();
    let listed = source.snapshots_through(8);
    let snapshot = listed[0].clone();
    let trusted = source.app_hash_at(8);
    let dir = tempfile::tempdir().unwrap();
    let fresh = App::open(&dir.path().join("state.redb")).unwrap();

    // Another app hash than the light client trusts: the snapshot of height 4 offered as 8's,
    // and 8's against the hash of another height.
    let mut older = listed[1].clone();
    older.height = 8;
    assert_eq!(offer(&fresh, &older, &trusted), OfferResult::Reject);
    assert_eq!(
        offer(&fresh, &snapshot, &source.app_hash_at(7)),
        OfferResult::Reject
    );
    assert_eq!(offer(&fresh, &snapshot, b"short"), OfferResult::Reject);

    // Absurd chunk counts, with metadata to match or not.
    let mut huge = metadata_of(&snapshot);
    huge.chunk_hashes = vec![[7; 32]; 70_000];
    assert_eq!(
        offer(&fresh, &snapshot_of(8, &huge), &trusted),
        OfferResult::Reject
    );
    let mut lying_count = snapshot.clone();
    lying_count.chunks = u32::MAX;
    assert_eq!(offer(&fresh, &lying_count, &trusted), OfferResult::Reject);
    let mut none = metadata_of(&snapshot);
    none.chunk_hashes.clear();
    assert_eq!(
        offer(&fresh, &snapshot_of(8, &none), &trusted),
        OfferResult::Reject
    );
    let mut fewer_hashes = snapshot.clone();
    fewer_hashes.chunks += 1;
    assert_eq!(offer(&fresh, &fewer_hashes, &trusted), OfferResult::Reject);

    // Hash, format, height and garbage metadata.
    let mut wrong_hash = snapshot.clone();
    wrong_hash.hash = vec![0; 32].into();
    assert_eq!(offer(&fresh, &wrong_hash, &trusted), OfferResult::Reject);
    let mut format_2 = snapshot.clone();
    format_2.format = 2;
    assert_eq!(
        offer(&fresh, &format_2, &trusted),
        OfferResult::RejectFormat
    );
    let mut height_0 = snapshot.clone();
    height_0.height = 0;
    assert_eq!(offer(&fresh, &height_0, &trusted), OfferResult::Reject);
    let mut garbage = snapshot.clone();
    garbage.metadata = vec![0xff; garbage.metadata.len()].into();
    garbage.hash = Sha256::digest(&garbage.metadata).to_vec().into();
    assert_eq!(offer(&fresh, &garbage, &trusted), OfferResult::Reject);

    assert_eq!(info(&fresh), (0, vec![]));
    assert!(!fresh.store().restore_in_progress().unwrap());
}
