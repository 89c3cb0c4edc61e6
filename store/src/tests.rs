//! Store behaviour tests: versions, index, proofs, determinism, durability, errors.

use std::path::PathBuf;

use crate::{verify_membership, verify_non_membership, ChangeSet, Store, StoreError};

mod snapshot;

/// A change set from `(key, Some(value) | None)` pairs.
fn cs(entries: &[(&str, Option<&str>)]) -> ChangeSet {
    entries
        .iter()
        .map(|(k, v)| (k.as_bytes().to_vec(), v.map(|v| v.as_bytes().to_vec())))
        .collect()
}

fn b(s: &str) -> Vec<u8> {
    s.as_bytes().to_vec()
}

fn db_path(dir: &tempfile::TempDir) -> PathBuf {
    dir.path().join("nested").join("state.redb")
}

fn open_temp() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&db_path(&dir)).unwrap();
    (dir, store)
}

/// Prepares and commits one version, returning its root.
fn commit(store: &Store, version: u64, change_set: ChangeSet) -> [u8; 32] {
    let prepared = store.prepare(version, vec![change_set]).unwrap();
    let root = prepared.root();
    store.commit(prepared).unwrap();
    root
}

fn store_error(err: &anyhow::Error) -> &StoreError {
    err.downcast_ref::<StoreError>()
        .unwrap_or_else(|| panic!("expected a StoreError, got: {err:#}"))
}

/// The history used by several tests:
/// v0: a=a0, b=b0 | v1: a=a1, c=c1 | v2: delete b | v3: nothing.
fn history(store: &Store) -> Vec<[u8; 32]> {
    vec![
        commit(store, 0, cs(&[("a", Some("a0")), ("b", Some("b0"))])),
        commit(store, 1, cs(&[("a", Some("a1")), ("c", Some("c1"))])),
        commit(store, 2, cs(&[("b", None)])),
        commit(store, 3, cs(&[])),
    ]
}

/// Deterministic pseudo-random change sets (no RNG crate, no clock): `versions` versions of
/// `per_version` writes over a key space that makes updates and deletes of earlier keys common.
fn generated_change_sets(versions: u64, per_version: u64) -> Vec<ChangeSet> {
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        state >> 33
    };
    (0..versions)
        .map(|_| {
            (0..per_version)
                .map(|_| {
                    let key = format!("bank/balance/gonka1{:04}/ngnk", next() % 500).into_bytes();
                    let value = if next() % 5 == 0 {
                        None
                    } else {
                        Some(next().to_be_bytes().to_vec())
                    };
                    (key, value)
                })
                .collect()
        })
        .collect()
}

#[test]
fn store_is_send_sync_and_clone() {
    fn assert_traits<T: Send + Sync + Clone + 'static>() {}
    assert_traits::<Store>();
}

#[test]
fn a_read_after_a_commit_sees_it_while_other_threads_read() {
    let (_dir, store) = open_temp();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    // Readers keep reopening the cached view of the latest version, racing the commits.
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let (store, stop) = (store.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut reads = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    store.get(b"counter").unwrap();
                    reads += 1;
                }
                reads
            })
        })
        .collect();
    for version in 0..200u64 {
        let value = version.to_string();
        commit(&store, version, cs(&[("counter", Some(value.as_str()))]));
        assert_eq!(
            store.get(b"counter").unwrap(),
            Some(b(&value)),
            "version {version}"
        );
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for reader in readers {
        assert!(reader.join().unwrap() > 0);
    }
}

#[test]
fn fresh_store_is_empty() {
    let (_dir, store) = open_temp();
    assert_eq!(store.latest_version().unwrap(), None);
    assert_eq!(store.latest_root().unwrap(), None);
    assert_eq!(store.latest_commit().unwrap(), None);
    assert_eq!(store.get(b"a").unwrap(), None);
    assert!(store.prefix(b"").unwrap().is_empty());
    let err = store.root_at(0).unwrap_err();
    assert_eq!(
        store_error(&err),
        &StoreError::VersionNotCommitted {
            requested: 0,
            latest: None
        }
    );
}

#[test]
fn reads_at_past_versions_go_through_the_tree() {
    let (_dir, store) = open_temp();
    let roots = history(&store);

    assert_eq!(store.latest_version().unwrap(), Some(3));
    assert_eq!(store.latest_root().unwrap(), Some(roots[3]));
    assert_eq!(store.latest_commit().unwrap(), Some((3, roots[3])));

    // Latest values from the index.
    assert_eq!(store.get(b"a").unwrap(), Some(b("a1")));
    assert_eq!(store.get(b"b").unwrap(), None);
    assert_eq!(store.get(b"c").unwrap(), Some(b("c1")));

    // A key updated later.
    assert_eq!(store.get_at(b"a", 0).unwrap(), Some(b("a0")));
    assert_eq!(store.get_at(b"a", 1).unwrap(), Some(b("a1")));
    assert_eq!(store.get_at(b"a", 3).unwrap(), Some(b("a1")));
    // A key deleted later.
    assert_eq!(store.get_at(b"b", 0).unwrap(), Some(b("b0")));
    assert_eq!(store.get_at(b"b", 1).unwrap(), Some(b("b0")));
    assert_eq!(store.get_at(b"b", 2).unwrap(), None);
    assert_eq!(store.get_at(b"b", 3).unwrap(), None);
    // A key not yet written at an older version.
    assert_eq!(store.get_at(b"c", 0).unwrap(), None);
    assert_eq!(store.get_at(b"c", 1).unwrap(), Some(b("c1")));
    // A key never written.
    assert_eq!(store.get_at(b"zz", 3).unwrap(), None);

    for (version, root) in roots.iter().enumerate() {
        assert_eq!(&store.root_at(version as u64).unwrap(), root);
    }
    assert_ne!(roots[0], roots[1]);
    assert_ne!(roots[1], roots[2]);

    let err = store.get_at(b"a", 4).unwrap_err();
    assert_eq!(
        store_error(&err),
        &StoreError::VersionNotCommitted {
            requested: 4,
            latest: Some(3)
        }
    );
    assert!(err
        .to_string()
        .contains("latest committed version is version 3"));
    assert!(store.root_at(4).is_err());
    assert!(store.get_with_proof(b"a", 4).is_err());
}

#[test]
fn prefix_scan_is_ordered_and_reflects_deletes() {
    let (_dir, store) = open_temp();
    commit(
        &store,
        0,
        cs(&[
            ("bank/balance/gonka1zz/ngnk", Some("3")),
            ("bank/balance/gonka1aa/ngnk", Some("1")),
            ("bank/balance/gonka1mm/ngnk", Some("2")),
            ("bank/params", Some("p")),
            ("auth/account/gonka1aa", Some("acc")),
            ("bank/balancf", Some("after the prefix")),
        ]),
    );
    let expected = vec![
        (b("bank/balance/gonka1aa/ngnk"), b("1")),
        (b("bank/balance/gonka1mm/ngnk"), b("2")),
        (b("bank/balance/gonka1zz/ngnk"), b("3")),
    ];
    assert_eq!(store.prefix(b"bank/balance/").unwrap(), expected);
    assert_eq!(store.prefix(b"bank/").unwrap().len(), 5);
    assert_eq!(store.prefix(b"").unwrap().len(), 6);
    assert_eq!(store.prefix(b"staking/").unwrap(), vec![]);

    commit(
        &store,
        1,
        cs(&[
            ("bank/balance/gonka1mm/ngnk", None),
            ("bank/balance/gonka1aa/ngnk", Some("10")),
            ("bank/balance/gonka1bb/ngnk", Some("5")),
        ]),
    );
    assert_eq!(
        store.prefix(b"bank/balance/").unwrap(),
        vec![
            (b("bank/balance/gonka1aa/ngnk"), b("10")),
            (b("bank/balance/gonka1bb/ngnk"), b("5")),
            (b("bank/balance/gonka1zz/ngnk"), b("3")),
        ]
    );
}

#[test]
fn range_reads_one_page_of_a_prefix_from_a_start_key() {
    let (_dir, store) = open_temp();
    commit(
        &store,
        0,
        cs(&[
            ("bank/balance/gonka1aa/ngnk", Some("1")),
            ("bank/balance/gonka1bb/ngnk", Some("2")),
            ("bank/balance/gonka1cc/ngnk", Some("3")),
            ("bank/balancf", Some("after the prefix")),
            ("bank/a", Some("before the prefix")),
        ]),
    );
    let keys = |rows: Vec<(Vec<u8>, Vec<u8>)>| -> Vec<Vec<u8>> {
        rows.into_iter().map(|(k, _)| k).collect()
    };
    let prefix = b"bank/balance/";
    assert_eq!(
        keys(store.range(prefix, b"", 2).unwrap()),
        [
            b("bank/balance/gonka1aa/ngnk"),
            b("bank/balance/gonka1bb/ngnk")
        ]
    );
    // A start between keys begins at the next one; the page never leaves the prefix.
    assert_eq!(
        keys(store.range(prefix, b"bank/balance/gonka1b", 5).unwrap()),
        [
            b("bank/balance/gonka1bb/ngnk"),
            b("bank/balance/gonka1cc/ngnk")
        ]
    );
    assert!(store
        .range(prefix, b"bank/balance/gonka1zz", 5)
        .unwrap()
        .is_empty());
    assert!(store.range(prefix, b"", 0).unwrap().is_empty());
    // A start before the prefix is read as the prefix itself.
    assert_eq!(store.range(prefix, b"a", 10).unwrap().len(), 3);
}

#[test]
fn existence_proofs_verify_and_tampering_fails() {
    let (_dir, store) = open_temp();
    let roots = history(&store);

    let (value, proof) = store.get_with_proof(b"a", 3).unwrap();
    assert_eq!(value, Some(b("a1")));
    assert!(verify_membership(&roots[3], b"a", b"a1", &proof));
    // Tampered value, wrong key, wrong root, wrong kind of check.
    assert!(!verify_membership(&roots[3], b"a", b"a0", &proof));
    assert!(!verify_membership(&roots[3], b"c", b"a1", &proof));
    assert!(!verify_membership(&roots[0], b"a", b"a1", &proof));
    assert!(!verify_non_membership(&roots[3], b"a", &proof));

    // A tampered proof (one flipped byte in the leaf's value) fails too.
    let mut forged = proof.clone();
    if let Some(ics23::commitment_proof::Proof::Exist(exist)) = forged.proof.as_mut() {
        exist.value = b("a9");
    } else {
        panic!("expected an existence proof");
    }
    assert!(!verify_membership(&roots[3], b"a", b"a9", &forged));
}

#[test]
fn non_existence_proofs_verify_for_absent_keys() {
    let (_dir, store) = open_temp();
    let roots = history(&store);

    // Deleted at version 2.
    let (value, proof) = store.get_with_proof(b"b", 3).unwrap();
    assert_eq!(value, None);
    assert!(verify_non_membership(&roots[3], b"b", &proof));
    assert!(!verify_membership(&roots[3], b"b", b"b0", &proof));
    // The absence proof says nothing about another key.
    assert!(!verify_non_membership(&roots[3], b"a", &proof));

    // Never written, with many neighbours so left and right bounds both exist.
    let many: ChangeSet = (0..64)
        .map(|i| (format!("k{i:03}").into_bytes(), Some(vec![i as u8])))
        .collect();
    let root = commit(&store, 4, many);
    for key in [&b"zzz-absent"[..], b"k0005", b"0"] {
        let (value, proof) = store.get_with_proof(key, 4).unwrap();
        assert_eq!(value, None);
        assert!(verify_non_membership(&root, key, &proof), "key {key:?}");
        assert!(!verify_non_membership(&roots[3], key, &proof));
    }
    // A present key can't be proven absent: the store returns an existence proof instead.
    let (value, proof) = store.get_with_proof(b"k007", 4).unwrap();
    assert_eq!(value, Some(vec![7]));
    assert!(!verify_non_membership(&root, b"k007", &proof));
    assert!(verify_membership(&root, b"k007", &[7], &proof));
}

#[test]
fn proofs_at_old_versions_verify_against_old_roots() {
    let (_dir, store) = open_temp();
    let roots = history(&store);

    let (value, proof) = store.get_with_proof(b"a", 0).unwrap();
    assert_eq!(value, Some(b("a0")));
    assert!(verify_membership(&roots[0], b"a", b"a0", &proof));
    assert!(!verify_membership(&roots[3], b"a", b"a0", &proof));

    let (value, proof) = store.get_with_proof(b"b", 1).unwrap();
    assert_eq!(value, Some(b("b0")));
    assert!(verify_membership(&roots[1], b"b", b"b0", &proof));

    let (value, proof) = store.get_with_proof(b"c", 0).unwrap();
    assert_eq!(value, None);
    assert!(verify_non_membership(&roots[0], b"c", &proof));
}

#[test]
fn proofs_need_a_key_and_a_non_empty_tree() {
    let (_dir, store) = open_temp();
    commit(&store, 0, cs(&[]));
    assert!(store.get_with_proof(b"a", 0).is_err());
    commit(&store, 1, cs(&[("a", Some("1"))]));
    assert!(store.get_with_proof(b"", 1).is_err());
    let (_, proof) = store.get_with_proof(b"a", 1).unwrap();
    assert!(verify_membership(
        &store.root_at(1).unwrap(),
        b"a",
        b"1",
        &proof
    ));
}

#[test]
fn roots_are_deterministic_across_stores() {
    let change_sets = generated_change_sets(12, 40);
    let (_dir_a, a) = open_temp();
    let (_dir_b, b) = open_temp();
    let (_dir_c, c) = open_temp();

    let mut roots_a = Vec::new();
    for (version, change_set) in change_sets.iter().enumerate() {
        let root_a = commit(&a, version as u64, change_set.clone());
        let root_b = commit(&b, version as u64, change_set.clone());
        assert_eq!(root_a, root_b, "roots differ at version {version}");
        roots_a.push(root_a);
    }
    for (version, root) in roots_a.iter().enumerate() {
        assert_eq!(&b.root_at(version as u64).unwrap(), root);
    }
    // Changes actually happened: roots are not all equal.
    assert_ne!(roots_a[0], roots_a[11]);

    // One batch of many versions gives the same roots as one version at a time.
    let prepared = c.prepare(0, change_sets.clone()).unwrap();
    assert_eq!(prepared.roots(), roots_a.as_slice());
    assert_eq!(prepared.version(), 11);
    assert_eq!(prepared.root(), roots_a[11]);
    c.commit(prepared).unwrap();
    assert_eq!(c.latest_commit().unwrap(), Some((11, roots_a[11])));
    assert_eq!(c.prefix(b"").unwrap(), a.prefix(b"").unwrap());
    for (version, root) in roots_a.iter().enumerate() {
        assert_eq!(&c.root_at(version as u64).unwrap(), root);
    }

    // The index agrees with the tree on every key, including deleted ones.
    let mut all_keys: Vec<&Vec<u8>> = change_sets.iter().flat_map(|cs| cs.keys()).collect();
    all_keys.sort();
    all_keys.dedup();
    for key in all_keys {
        assert_eq!(c.get(key).unwrap(), c.get_at(key, 11).unwrap());
    }
}

#[test]
fn golden_root_hash() {
    // Pins the tree's hashing (jmt version, SHA-256 key hashing): if this changes, every app
    // hash changes, so it must only ever change on purpose.
    let (_dir, store) = open_temp();
    let root = commit(
        &store,
        0,
        cs(&[
            ("auth/account/gonka1aa", Some("acc")),
            ("bank/balance/gonka1aa/ngnk", Some("1000")),
        ]),
    );
    assert_eq!(
        hex::encode(root),
        "08a7450f7d1595c8162565b927c240f5f0a0fe86fcae426b61dba0a15809f654",
        "the root hash of a fixed change set changed"
    );

    // Independently of jmt: a one-key tree's root is its leaf hash,
    // sha256("JMT::LeafNode" || sha256(key) || sha256(value)).
    use sha2::{Digest, Sha256};
    let (_dir, single) = open_temp();
    let root = commit(&single, 0, cs(&[("bank/params", Some("p"))]));
    let mut leaf = Sha256::new();
    leaf.update(b"JMT::LeafNode");
    leaf.update(Sha256::digest(b"bank/params"));
    leaf.update(Sha256::digest(b"p"));
    assert_eq!(root, <[u8; 32]>::from(leaf.finalize()));
}

#[test]
fn reopen_restores_exactly_the_committed_state() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_path(&dir);
    let (roots, uncommitted_root) = {
        let store = Store::open(&path).unwrap();
        let roots = history(&store);
        // Prepared but never committed: a crash between FinalizeBlock and Commit.
        let prepared = store
            .prepare(4, vec![cs(&[("a", Some("lost")), ("d", Some("lost"))])])
            .unwrap();
        (roots, prepared.root())
    };
    assert_ne!(uncommitted_root, roots[3]);

    let store = Store::open(&path).unwrap();
    assert_eq!(store.latest_version().unwrap(), Some(3));
    assert_eq!(store.latest_root().unwrap(), Some(roots[3]));
    assert_eq!(store.root_at(3).unwrap(), roots[3]);
    assert_eq!(store.get(b"a").unwrap(), Some(b("a1")));
    assert_eq!(store.get(b"d").unwrap(), None);
    assert_eq!(store.get_at(b"b", 1).unwrap(), Some(b("b0")));
    assert!(store.get_at(b"a", 4).is_err());
    assert_eq!(
        store.prefix(b"").unwrap(),
        vec![(b("a"), b("a1")), (b("c"), b("c1"))]
    );

    // The same block can be replayed after the crash and yields the same root.
    let replayed = commit(&store, 4, cs(&[("a", Some("lost")), ("d", Some("lost"))]));
    assert_eq!(replayed, uncommitted_root);
}

#[test]
fn prepare_rejects_wrong_first_version_and_bad_input() {
    let (_dir, store) = open_temp();
    let err = store.prepare(1, vec![cs(&[("a", Some("1"))])]).unwrap_err();
    assert_eq!(
        store_error(&err),
        &StoreError::FirstVersionOnEmptyStore { requested: 1 }
    );
    assert!(err.to_string().contains("first version must be 0"));

    history(&store);
    for requested in [0, 3, 5, u64::MAX] {
        let err = store
            .prepare(requested, vec![cs(&[("a", Some("1"))])])
            .unwrap_err();
        assert_eq!(
            store_error(&err),
            &StoreError::WrongFirstVersion {
                requested,
                latest: 3
            }
        );
    }
    let err = store.prepare(3, vec![]).unwrap_err();
    assert!(err.to_string().contains("the first version must be 4"));

    let err = store.prepare(4, vec![]).unwrap_err();
    assert_eq!(store_error(&err), &StoreError::NoChangeSets);

    let err = store
        .prepare(4, vec![cs(&[]), cs(&[("", Some("x"))])])
        .unwrap_err();
    assert_eq!(store_error(&err), &StoreError::EmptyKey { version: 5 });

    // Nothing above wrote anything.
    assert_eq!(store.latest_version().unwrap(), Some(3));
}

#[test]
fn commit_after_another_commit_errors_and_writes_nothing() {
    let (_dir, store) = open_temp();
    commit(&store, 0, cs(&[("a", Some("0"))]));

    let first = store.prepare(1, vec![cs(&[("a", Some("first"))])]).unwrap();
    let second = store
        .prepare(1, vec![cs(&[("a", Some("second")), ("b", Some("second"))])])
        .unwrap();
    let first_root = first.root();
    store.commit(first).unwrap();

    let err = store.commit(second).unwrap_err();
    assert_eq!(
        store_error(&err),
        &StoreError::StaleCommit {
            first_version: 1,
            prepared_on: Some(0),
            found: Some(1)
        }
    );
    assert_eq!(store.latest_commit().unwrap(), Some((1, first_root)));
    assert_eq!(store.get(b"a").unwrap(), Some(b("first")));
    assert_eq!(store.get(b"b").unwrap(), None);
    assert_eq!(store.prefix(b"").unwrap().len(), 1);

    // A genesis commit prepared twice: the second one finds the store no longer empty.
    let (_dir2, fresh) = open_temp();
    let g1 = fresh.prepare(0, vec![cs(&[("a", Some("1"))])]).unwrap();
    let g2 = fresh.prepare(0, vec![cs(&[("a", Some("2"))])]).unwrap();
    fresh.commit(g1).unwrap();
    let err = fresh.commit(g2).unwrap_err();
    assert_eq!(
        store_error(&err),
        &StoreError::StaleCommit {
            first_version: 0,
            prepared_on: None,
            found: Some(0)
        }
    );
    assert_eq!(fresh.get(b"a").unwrap(), Some(b("1")));
}

#[test]
fn empty_change_sets_keep_the_root() {
    let (_dir, store) = open_temp();
    // Genesis with no state: the empty tree's root.
    let genesis = commit(&store, 0, cs(&[]));
    assert_eq!(&genesis, b"SPARSE_MERKLE_PLACEHOLDER_HASH__");
    let v1 = commit(&store, 1, cs(&[]));
    assert_eq!(v1, genesis);

    let v2 = commit(&store, 2, cs(&[("a", Some("1"))]));
    assert_ne!(v2, genesis);
    let prepared = store.prepare(3, vec![cs(&[]), cs(&[])]).unwrap();
    assert_eq!(prepared.roots(), &[v2, v2]);
    store.commit(prepared).unwrap();
    assert_eq!(store.latest_commit().unwrap(), Some((4, v2)));
    assert_eq!(store.root_at(3).unwrap(), v2);
    assert_eq!(store.get_at(b"a", 4).unwrap(), Some(b("1")));

    // Deleting the only key returns to the empty root.
    let v5 = commit(&store, 5, cs(&[("a", None)]));
    assert_eq!(v5, genesis);
    assert_eq!(store.get_at(b"a", 5).unwrap(), None);
    assert_eq!(store.get_at(b"a", 4).unwrap(), Some(b("1")));
}

#[test]
fn stored_nodes_round_trip_through_borsh() {
    let (_dir, store) = open_temp();
    let prepared = store.prepare(0, generated_change_sets(3, 60)).unwrap();
    let nodes = prepared.batch_nodes_for_test();
    assert!(nodes.len() > 60);
    for (node_key, node) in nodes {
        let key_bytes = crate::db::node_key_bytes(node_key).unwrap();
        let back: jmt::storage::NodeKey = borsh::from_slice(&key_bytes).unwrap();
        assert_eq!(&back, node_key);
        let node_bytes = crate::db::node_bytes(node).unwrap();
        let back: jmt::storage::Node = borsh::from_slice(&node_bytes).unwrap();
        assert_eq!(&back, node);
    }
}

#[test]
fn readers_see_only_whole_commits_while_a_writer_commits() {
    let (_dir, store) = open_temp();
    commit(&store, 0, cs(&[("counter", Some("0"))]));
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));

    let readers: Vec<_> = (0..2)
        .map(|_| {
            let store = store.clone();
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut checks = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) || checks == 0 {
                    let (version, root) = store.latest_commit().unwrap().unwrap();
                    assert_eq!(store.root_at(version).unwrap(), root);
                    let value = store.get_at(b"counter", version).unwrap().unwrap();
                    assert_eq!(value, version.to_string().into_bytes());
                    checks += 1;
                }
                checks
            })
        })
        .collect();

    for version in 1..=30u64 {
        let value = version.to_string();
        commit(&store, version, cs(&[("counter", Some(value.as_str()))]));
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for reader in readers {
        assert!(reader.join().unwrap() > 0);
    }
    assert_eq!(store.get(b"counter").unwrap(), Some(b("30")));
}

#[test]
fn open_refuses_a_directory() {
    let dir = tempfile::tempdir().unwrap();
    let err = Store::open(dir.path()).unwrap_err();
    assert!(err.to_string().contains("is a directory"), "{err:#}");
}

#[test]
fn pruning_keeps_the_window_whole_and_refuses_reads_below_it() {
    let (_dir, store) = open_temp();
    let (_reference_dir, reference) = open_temp();
    let sets = generated_change_sets(80, 12);
    let keys: Vec<Vec<u8>> = sets
        .iter()
        .flat_map(|s| s.keys().cloned())
        .take(40)
        .collect();
    let mut roots = Vec::new();
    let mut seen = Vec::new();
    for (version, set) in sets[..60].iter().enumerate() {
        roots.push(commit(&store, version as u64, set.clone()));
        commit(&reference, version as u64, set.clone());
        seen.push(
            keys.iter()
                .map(|k| store.get_at(k, version as u64).unwrap())
                .collect::<Vec<_>>(),
        );
    }
    let before = store.tree_entries().unwrap();
    let pruned = store.prune(40).unwrap();
    assert!(pruned.nodes > 0 && pruned.values > 0, "{pruned:?}");
    let after = store.tree_entries().unwrap();
    assert_eq!(after.0, before.0 - pruned.nodes);
    assert_eq!(after.1, before.1 - pruned.values);
    assert_eq!(store.oldest_version().unwrap(), 40);

    // Every kept version reads and proves as before; the pruned ones say so.
    for version in 40..60u64 {
        for (key, expected) in keys.iter().zip(&seen[version as usize]) {
            assert_eq!(&store.get_at(key, version).unwrap(), expected);
            let (value, proof) = store.get_with_proof(key, version).unwrap();
            assert_eq!(&value, expected);
            let root = roots[version as usize];
            match value {
                Some(v) => assert!(verify_membership(&root, key, &v, &proof)),
                None => assert!(verify_non_membership(&root, key, &proof)),
            }
        }
    }
    let err = store.get_at(&keys[0], 39).unwrap_err();
    assert!(matches!(
        store_error(&err),
        StoreError::VersionPruned {
            requested: 39,
            oldest: 40
        }
    ));
    assert!(store.get_with_proof(&keys[0], 10).is_err());
    // Pruning less than is already pruned deletes nothing; beyond the latest is refused.
    assert_eq!(store.prune(30).unwrap(), Default::default());
    assert!(store.prune(60).is_err());

    // The tree goes on exactly as an unpruned one.
    for (version, set) in sets.iter().enumerate().skip(60) {
        let root = commit(&store, version as u64, set.clone());
        assert_eq!(root, commit(&reference, version as u64, set.clone()));
        store.prune(version as u64 - 5).unwrap();
    }
    for key in &keys {
        assert_eq!(store.get(key).unwrap(), reference.get(key).unwrap());
    }
}

#[test]
fn a_long_run_pruned_to_a_window_stays_flat() {
    let (_dir, store) = open_temp();
    // The same history unpruned, for the figure beside it.
    let (_archive_dir, archive) = open_temp();
    const KEEP: u64 = 100;
    let mut at = Vec::new();
    for (version, set) in generated_change_sets(1_000, 10).into_iter().enumerate() {
        let version = version as u64;
        commit(&store, version, set.clone());
        commit(&archive, version, set);
        if version >= KEEP {
            store.prune(version + 1 - KEEP).unwrap();
        }
        if version == 299 || version == 999 {
            let (nodes, values) = store.tree_entries().unwrap();
            at.push(nodes + values);
        }
    }
    let (early, late) = (at[0] as f64, at[1] as f64);
    let (nodes, values) = archive.tree_entries().unwrap();
    eprintln!(
        "tree entries with the last {KEEP} versions kept: {early} at version 300, {late} at \
         version 1000; unpruned at version 1000: {}",
        nodes + values
    );
    assert!((late - early).abs() / early <= 0.20, "{early} -> {late}");
}
