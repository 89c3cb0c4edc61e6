//! Snapshots: export at a version, restore into an empty store, and what a restore refuses.

use super::{commit, db_path, generated_change_sets, open_temp, store_error};
use crate::snapshot::MAX_PROOF_BYTES;
use crate::{verify_membership, verify_non_membership, ChangeSet, Export, Store, StoreError};

/// A store with `versions` generated versions committed (0..versions), and their change sets.
fn built(versions: u64) -> (tempfile::TempDir, Store, Vec<ChangeSet>) {
    let (dir, store) = open_temp();
    let change_sets = generated_change_sets(versions + 4, 60);
    for (version, change_set) in change_sets.iter().take(versions as usize).enumerate() {
        commit(&store, version as u64, change_set.clone());
    }
    (dir, store, change_sets)
}

fn chunks(export: Export) -> Vec<Vec<u8>> {
    export.map(|c| c.unwrap()).collect()
}

fn restore(store: &Store, version: u64, root: [u8; 32], chunks: &[Vec<u8>]) -> anyhow::Result<()> {
    let mut restore = store.begin_restore(version, root)?;
    for chunk in chunks {
        restore.add_chunk(chunk)?;
    }
    restore.finish()
}

#[test]
fn export_and_restore_move_between_threads() {
    fn assert_send<T: Send + 'static>() {}
    assert_send::<Export>();
    assert_send::<crate::Restore>();
}

#[test]
fn a_restored_store_reads_proves_and_continues_like_the_original() {
    let (_a, original, change_sets) = built(8);
    let version = 7;
    let root = original.root_at(version).unwrap();
    let export = original.export(version, 600).unwrap();
    assert_eq!((export.version(), export.root()), (version, root));
    let chunks = chunks(export);
    assert!(chunks.len() > 5, "small chunks make many: {}", chunks.len());
    // Entries up to the bound (one more entry may not fit), plus the range proof.
    assert!(
        chunks.iter().all(|c| c.len() < 600 + MAX_PROOF_BYTES),
        "chunks stay near the bound"
    );

    // Commits after the export do not change it.
    commit(&original, 8, change_sets[8].clone());
    assert_eq!(self::chunks(original.export(version, 600).unwrap()), chunks);

    let (_b, restored) = open_temp();
    restore(&restored, version, root, &chunks).unwrap();
    assert_eq!(restored.latest_commit().unwrap(), Some((version, root)));
    assert_eq!(restored.oldest_version().unwrap(), version);
    assert!(!restored.restore_in_progress().unwrap());

    // Same reads: the whole index, and point reads through the tree.
    let at_version: Vec<(Vec<u8>, Vec<u8>)> = {
        let keys: std::collections::BTreeSet<Vec<u8>> =
            change_sets.iter().flat_map(|c| c.keys().cloned()).collect();
        keys.into_iter()
            .filter_map(|k| original.get_at(&k, version).unwrap().map(|v| (k, v)))
            .collect()
    };
    assert!(!at_version.is_empty());
    assert_eq!(restored.prefix(b"").unwrap(), at_version);
    for (key, value) in &at_version {
        assert_eq!(restored.get_at(key, version).unwrap().as_ref(), Some(value));
        let (found, proof) = restored.get_with_proof(key, version).unwrap();
        assert_eq!(found.as_ref(), Some(value));
        assert!(verify_membership(&root, key, value, &proof));
    }
    let absent = b"bank/balance/nobody/ngnk";
    let (found, proof) = restored.get_with_proof(absent, version).unwrap();
    assert_eq!(found, None);
    assert!(verify_non_membership(&root, absent, &proof));
    // Nothing older than the snapshot exists.
    let err = restored.get_at(&at_version[0].0, version - 1).unwrap_err();
    assert_eq!(
        store_error(&err),
        &StoreError::VersionPruned {
            requested: version - 1,
            oldest: version
        }
    );

    // The next versions give the original's roots, and pruning works from there.
    assert_eq!(
        commit(&restored, 8, change_sets[8].clone()),
        original.root_at(8).unwrap()
    );
    for (version, change_set) in change_sets.iter().enumerate().skip(9) {
        let version = version as u64;
        assert_eq!(
            commit(&restored, version, change_set.clone()),
            commit(&original, version, change_set.clone()),
            "root of version {version}"
        );
    }
    let latest = restored.latest_version().unwrap().unwrap();
    restored.prune(latest).unwrap();
    assert_eq!(restored.prefix(b"").unwrap(), original.prefix(b"").unwrap());

    // A restored store exports the same snapshot as the original.
    assert_eq!(
        self::chunks(restored.export(latest, 600).unwrap()),
        self::chunks(original.export(latest, 600).unwrap())
    );
}

#[test]
fn a_restore_survives_a_reopen_only_once_finished() {
    let (_a, original, _) = built(4);
    let root = original.root_at(3).unwrap();
    let chunks = chunks(original.export(3, 500).unwrap());
    let dir = tempfile::tempdir().unwrap();
    {
        let store = Store::open(&db_path(&dir)).unwrap();
        let mut restore = store.begin_restore(3, root).unwrap();
        restore.add_chunk(&chunks[0]).unwrap();
        // The process dies here.
    }
    let store = Store::open(&db_path(&dir)).unwrap();
    assert!(!store.restore_in_progress().unwrap());
    assert_eq!(store.latest_commit().unwrap(), None);
    assert_eq!(store.prefix(b"").unwrap(), vec![]);
    restore(&store, 3, root, &chunks).unwrap();
    drop(store);
    let store = Store::open(&db_path(&dir)).unwrap();
    assert_eq!(store.latest_commit().unwrap(), Some((3, root)));
}

#[test]
fn a_flipped_byte_is_refused_and_a_retry_starts_clean() {
    let (_a, original, _) = built(4);
    let root = original.root_at(3).unwrap();
    let chunks = chunks(original.export(3, 500).unwrap());
    let (_b, store) = open_temp();
    // Flip one byte in turn at several places of the second chunk: a key, a value, the proof.
    for at in [10, chunks[1].len() / 2, chunks[1].len() - 5] {
        let mut bad = chunks[1].clone();
        bad[at] ^= 0x01;
        let mut restore = store.begin_restore(3, root).unwrap();
        restore.add_chunk(&chunks[0]).unwrap();
        let err = restore.add_chunk(&bad).unwrap_err();
        assert!(format!("{err:#}").contains("chunk 1"), "{err:#}");
        // Poisoned: even the good chunk is refused now.
        assert!(restore.add_chunk(&chunks[1]).is_err());
        restore.abort().unwrap();
        assert_eq!(store.prefix(b"").unwrap(), vec![]);
        assert!(!store.restore_in_progress().unwrap());
    }
    restore(&store, 3, root, &chunks).unwrap();
    assert_eq!(store.latest_commit().unwrap(), Some((3, root)));
}

#[test]
fn a_snapshot_of_another_root_or_cut_short_is_refused() {
    let (_a, original, _) = built(4);
    let root = original.root_at(3).unwrap();
    let chunks = chunks(original.export(3, 500).unwrap());
    let (_b, store) = open_temp();

    // Chunks of version 3 against the root of version 2: the first proof fails.
    let other = original.root_at(2).unwrap();
    let err = restore(&store, 3, other, &chunks).unwrap_err();
    assert!(format!("{err:#}").contains("does not prove out"), "{err:#}");
    store.begin_restore(3, root).unwrap().abort().unwrap();

    // The last chunk missing: every chunk proves, but the tree ends short of the root.
    let err = restore(&store, 3, root, &chunks[..chunks.len() - 1]).unwrap_err();
    assert!(format!("{err:#}").contains("promised"), "{err:#}");
    assert_eq!(store.latest_commit().unwrap(), None);
    assert_eq!(store.prefix(b"").unwrap(), vec![]);

    // A chunk skipped or repeated: out of key-hash order or missing leaves.
    let mut reordered = chunks.clone();
    reordered.swap(0, 1);
    assert!(restore(&store, 3, root, &reordered).is_err());
    store.begin_restore(3, root).unwrap().abort().unwrap();
    let mut repeated = chunks.clone();
    repeated.insert(1, chunks[0].clone());
    assert!(restore(&store, 3, root, &repeated).is_err());
    store.begin_restore(3, root).unwrap().abort().unwrap();

    // Garbage and an empty chunk are refused with a clear error.
    let mut restore_garbage = store.begin_restore(3, root).unwrap();
    let err = restore_garbage.add_chunk(b"not a chunk").unwrap_err();
    assert!(
        format!("{err:#}").contains("not a format-1 chunk"),
        "{err:#}"
    );
    restore_garbage.abort().unwrap();

    restore(&store, 3, root, &chunks).unwrap();
    assert_eq!(store.latest_commit().unwrap(), Some((3, root)));
}

#[test]
fn restore_needs_an_empty_store_and_export_a_kept_version() {
    let (_a, original, _) = built(4);
    let root = original.root_at(3).unwrap();
    let err = original.begin_restore(3, root).unwrap_err();
    assert_eq!(
        store_error(&err),
        &StoreError::RestoreOverCommitted { latest: 3 }
    );
    let err = original.export(9, 500).unwrap_err();
    assert!(matches!(
        store_error(&err),
        StoreError::VersionNotCommitted { requested: 9, .. }
    ));
    original.prune(2).unwrap();
    let err = original.export(1, 500).unwrap_err();
    assert!(matches!(
        store_error(&err),
        StoreError::VersionPruned { requested: 1, .. }
    ));
}

#[test]
fn a_single_key_tree_round_trips() {
    let (_a, original) = open_temp();
    let mut one = ChangeSet::new();
    one.insert(b"app/chain_id".to_vec(), Some(b"gonka".to_vec()));
    let root = commit(&original, 0, one.clone());
    commit(&original, 1, ChangeSet::new());
    let chunks = chunks(original.export(1, 500).unwrap());
    assert_eq!(chunks.len(), 1);
    let (_b, store) = open_temp();
    restore(&store, 1, root, &chunks).unwrap();
    assert_eq!(store.latest_commit().unwrap(), Some((1, root)));
    assert_eq!(store.get(b"app/chain_id").unwrap(), Some(b"gonka".to_vec()));
    let mut next = ChangeSet::new();
    next.insert(b"bank/x".to_vec(), Some(b"1".to_vec()));
    assert_eq!(commit(&store, 2, next.clone()), commit(&original, 2, next));
}
