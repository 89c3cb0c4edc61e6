//! Runs the real `cometbft` (v0.38) through `Localnet::prepare` and `Localnet::add_full_node`
//! and checks the network they lay out. Nothing is started: `gonkad` is not needed.
//!
//! Without `cometbft`, these tests fail with the install line when `CI` is set (to anything but
//! empty, `0` or `false`) and are skipped with a notice otherwise.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use gonka_localnet::{find_cometbft, Localnet, LocalnetConfig, COMETBFT_INSTALL, MANIFEST_FILE};
use serde_json::{json, Value};

/// Whether `CI` is set to something other than empty, `0` or `false`.
fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "0" && v != "false")
}

/// The `cometbft` binary, or `None` (test skipped) outside CI.
fn cometbft_or_skip(test: &str) -> Option<PathBuf> {
    match find_cometbft() {
        Ok(p) => Some(p),
        Err(e) if in_ci() => {
            panic!("CI is set, so {test} must run, but: {e:#}")
        }
        Err(e) => {
            eprintln!(
                "SKIPPING {test}: {e:#}\n(install with `{COMETBFT_INSTALL}`; with CI set this fails)"
            );
            None
        }
    }
}

fn app_state() -> Value {
    json!({
        "auth": { "accounts": [{ "address": "gonka1qqqsyqcyq5rqwzqfpg9scrgwpugpzysn3jrgvq", "number": "0" }] },
        "bank": { "balances": [{ "address": "gonka1qqqsyqcyq5rqwzqfpg9scrgwpugpzysn3jrgvq", "amount": "1000000000000" }] },
        "epochs": { "params": { "epoch_length": "20" } },
        "note": "quotes \" and unicode ✓ survive"
    })
}

fn config(dir: &Path, cometbft: PathBuf, base_port: u16) -> LocalnetConfig {
    let mut c = LocalnetConfig::new(dir, "/nonexistent/gonkad", cometbft);
    c.validators = 4;
    c.base_port = base_port;
    c.chain_id = "gonka-prepare-test".into();
    c.app_state = app_state();
    c.timeout_commit = "500ms".into();
    c
}

/// `[section] key` of a CometBFT config.toml (one-line values, quotes stripped).
fn toml_value(text: &str, section: &str, key: &str) -> String {
    let mut current = String::new();
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with('[') {
            current = t.trim_matches(|c| c == '[' || c == ']').to_string();
            continue;
        }
        if current != section {
            continue;
        }
        if let Some((k, v)) = t.split_once('=') {
            if k.trim() == key {
                return v.trim().trim_matches('"').to_string();
            }
        }
    }
    panic!("no [{section}] {key} in config.toml");
}

fn port_of(addr: &str) -> u16 {
    addr.rsplit(':').next().unwrap().parse().unwrap()
}

#[test]
fn prepare_lays_out_four_validators() {
    let Some(cometbft) = cometbft_or_skip("prepare_lays_out_four_validators") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("net");
    let net = Localnet::prepare(config(&dir, cometbft.clone(), 27100)).unwrap();
    let nodes = net.nodes();
    assert_eq!(nodes.len(), 4);
    assert!(dir.join(MANIFEST_FILE).is_file());

    // Homes exist where documented.
    for (i, node) in nodes.iter().enumerate() {
        assert_eq!(node.index, i);
        assert_eq!(node.home, dir.join(format!("node{i}")));
        assert!(node
            .cometbft_home
            .join("config/priv_validator_key.json")
            .is_file());
        assert!(node.cometbft_home.join("config/node_key.json").is_file());
        assert!(node
            .cometbft_home
            .join("data/priv_validator_state.json")
            .is_file());
        assert!(node.app_home.is_dir());
    }
    assert!(!dir.join(".staging").exists());

    // One genesis, byte for byte, with our chain id, app state and 4 distinct validators.
    let genesis = fs::read(nodes[0].genesis_path()).unwrap();
    for node in &nodes[1..] {
        assert!(
            fs::read(node.genesis_path()).unwrap() == genesis,
            "genesis of node {} differs from node 0",
            node.index
        );
    }
    let doc: Value = serde_json::from_slice(&genesis).unwrap();
    assert_eq!(doc["chain_id"], "gonka-prepare-test");
    assert_eq!(doc["app_state"], app_state());
    let validators = doc["validators"].as_array().unwrap();
    assert_eq!(validators.len(), 4);
    let keys: BTreeSet<&str> = validators
        .iter()
        .map(|v| v["pub_key"]["value"].as_str().unwrap())
        .collect();
    assert_eq!(keys.len(), 4);
    // Each node's validator key is in the genesis set.
    for node in nodes {
        let key: Value = serde_json::from_str(
            &fs::read_to_string(node.cometbft_home.join("config/priv_validator_key.json")).unwrap(),
        )
        .unwrap();
        assert!(keys.contains(key["pub_key"]["value"].as_str().unwrap()));
    }

    // config.toml: distinct loopback ports matching NodeInfo, 3 peers each, relaxed p2p checks.
    let mut ports = BTreeSet::new();
    for node in nodes {
        let text = fs::read_to_string(node.config_toml_path()).unwrap();
        let p2p = toml_value(&text, "p2p", "laddr");
        let rpc = toml_value(&text, "rpc", "laddr");
        let abci = toml_value(&text, "", "proxy_app");
        let prom = toml_value(&text, "instrumentation", "prometheus_listen_addr");
        for addr in [&p2p, &rpc, &abci, &prom] {
            assert!(addr.contains("127.0.0.1:"), "{addr} is not loopback");
            assert!(ports.insert(port_of(addr)), "port of {addr} used twice");
        }
        assert_eq!(rpc, format!("tcp://{}", node.rpc_addr));
        assert_eq!(node.rpc_url, format!("http://{}", node.rpc_addr));
        assert_eq!(abci, format!("tcp://{}", node.abci_addr));
        assert_eq!(port_of(&p2p), node.p2p_port());

        let peers: Vec<String> = toml_value(&text, "p2p", "persistent_peers")
            .split(',')
            .map(str::to_string)
            .collect();
        assert_eq!(peers.len(), 3, "node {}: {peers:?}", node.index);
        let expected: BTreeSet<String> = nodes
            .iter()
            .filter(|o| o.index != node.index)
            .map(|o| o.peer_address())
            .collect();
        assert_eq!(peers.iter().cloned().collect::<BTreeSet<_>>(), expected);

        assert_eq!(toml_value(&text, "p2p", "addr_book_strict"), "false");
        assert_eq!(toml_value(&text, "p2p", "allow_duplicate_ip"), "true");
        assert_eq!(toml_value(&text, "consensus", "timeout_commit"), "500ms");
        assert_eq!(
            toml_value(&text, "", "moniker"),
            format!("node{}", node.index)
        );
    }
    assert_eq!(ports.len(), 16);

    // Node ids are what cometbft itself reports.
    for node in nodes {
        let out = Command::new(&cometbft)
            .args(["show-node-id", "--home"])
            .arg(&node.cometbft_home)
            .output()
            .unwrap();
        assert_eq!(String::from_utf8(out.stdout).unwrap().trim(), node.node_id);
    }
}

#[test]
fn prepare_resumes_an_existing_network_untouched() {
    let Some(cometbft) = cometbft_or_skip("prepare_resumes_an_existing_network_untouched") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("net");
    let first = Localnet::prepare(config(&dir, cometbft.clone(), 27200)).unwrap();
    let first_nodes = first.nodes().to_vec();
    drop(first);
    let snapshot = |p: &Path| {
        (
            fs::read(p).unwrap(),
            fs::metadata(p).unwrap().modified().unwrap(),
        )
    };
    let genesis_before = snapshot(&first_nodes[2].genesis_path());
    let config_before = snapshot(&first_nodes[2].config_toml_path());

    // Same settings (a changed app state is kept as created): same network, files untouched.
    let mut again = config(&dir, cometbft.clone(), 27200);
    again.app_state = json!({ "different": true });
    let second = Localnet::prepare(again).unwrap();
    assert_eq!(second.nodes(), &first_nodes[..]);
    assert_eq!(snapshot(&first_nodes[2].genesis_path()), genesis_before);
    assert_eq!(snapshot(&first_nodes[2].config_toml_path()), config_before);
    drop(second);

    // Conflicting shape: a clear error, nothing deleted.
    let mut wrong = config(&dir, cometbft.clone(), 27200);
    wrong.validators = 3;
    let err = Localnet::prepare(wrong).unwrap_err().to_string();
    assert!(
        err.contains("4 validators") && err.contains("3 were asked"),
        "{err}"
    );
    let mut wrong = config(&dir, cometbft.clone(), 27300);
    wrong.chain_id = "other".into();
    assert!(Localnet::prepare(wrong).is_err());
    assert!(dir.join(MANIFEST_FILE).is_file());

    // reset() deletes it; prepare then creates a new network with new keys.
    Localnet::reset(&dir).unwrap();
    assert!(!dir.exists());
    let third = Localnet::prepare(config(&dir, cometbft, 27200)).unwrap();
    assert_ne!(third.nodes()[0].node_id, first_nodes[0].node_id);
}

#[test]
fn prepare_with_one_validator_has_no_peers() {
    let Some(cometbft) = cometbft_or_skip("prepare_with_one_validator_has_no_peers") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let mut c = config(tmp.path(), cometbft, 27400);
    c.validators = 1;
    c.vote_extensions_enable_height = Some(1);
    let net = Localnet::prepare(c).unwrap();
    let node = &net.nodes()[0];
    let text = fs::read_to_string(node.config_toml_path()).unwrap();
    assert_eq!(toml_value(&text, "p2p", "persistent_peers"), "");
    let doc: Value =
        serde_json::from_str(&fs::read_to_string(node.genesis_path()).unwrap()).unwrap();
    assert_eq!(doc["validators"].as_array().unwrap().len(), 1);
    assert_eq!(
        doc["consensus_params"]["abci"]["vote_extensions_enable_height"],
        "1"
    );
}

/// `[consensus] timeout_commit`, `[p2p] persistent_peers` etc. of node `i`'s config.toml.
fn node_toml(net: &Localnet, i: usize, section: &str, key: &str) -> String {
    let text = fs::read_to_string(net.nodes()[i].config_toml_path()).unwrap();
    toml_value(&text, section, key)
}

#[test]
fn full_nodes_are_laid_out_like_validators_and_resumed() {
    let Some(cometbft) = cometbft_or_skip("full_nodes_are_laid_out_like_validators_and_resumed")
    else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("net");
    let mut net = Localnet::prepare(config(&dir, cometbft.clone(), 27500)).unwrap();
    let validators = net.nodes().to_vec();
    assert!(validators.iter().all(|n| n.genesis_validator));

    let index = net.add_full_node().unwrap();
    assert_eq!(index, 4);
    assert_eq!(net.nodes().len(), 5);
    let full = net.nodes()[4].clone();
    assert_eq!(net.node(4).unwrap(), &full);
    assert!(!full.genesis_validator);
    assert_eq!(full.index, 4);
    assert_eq!(full.home, dir.join("node4"));
    assert_eq!(full.moniker, "node4");
    for file in [
        "config/priv_validator_key.json",
        "config/node_key.json",
        "data/priv_validator_state.json",
    ] {
        assert!(full.cometbft_home.join(file).is_file(), "{file}");
    }
    assert!(full.app_home.is_dir());
    assert!(!dir.join(".staging").exists());

    // The ports of the next block of the scheme: distinct from every validator's.
    let mut ports = BTreeSet::new();
    for node in net.nodes() {
        for port in node.ports.bound() {
            assert!(
                ports.insert(port),
                "port {port} of node {} reused",
                node.index
            );
        }
    }
    assert_eq!(ports.len(), 20);
    assert_eq!(full.ports.p2p, 27500 + 40);
    let text = fs::read_to_string(full.config_toml_path()).unwrap();
    assert_eq!(toml_value(&text, "p2p", "laddr"), "tcp://127.0.0.1:27540");
    assert_eq!(
        toml_value(&text, "rpc", "laddr"),
        format!("tcp://{}", full.rpc_addr)
    );
    assert_eq!(
        toml_value(&text, "", "proxy_app"),
        format!("tcp://{}", full.abci_addr)
    );
    assert_eq!(
        toml_value(&text, "instrumentation", "prometheus_listen_addr"),
        format!("127.0.0.1:{}", full.ports.prometheus)
    );
    assert_eq!(toml_value(&text, "instrumentation", "prometheus"), "true");
    assert_eq!(toml_value(&text, "", "moniker"), "node4");

    // Peers: every validator. Relaxed p2p checks and the network's block interval.
    let peers: BTreeSet<String> = toml_value(&text, "p2p", "persistent_peers")
        .split(',')
        .map(str::to_string)
        .collect();
    let expected: BTreeSet<String> = validators.iter().map(|n| n.peer_address()).collect();
    assert_eq!(peers, expected);
    assert_eq!(toml_value(&text, "p2p", "addr_book_strict"), "false");
    assert_eq!(toml_value(&text, "p2p", "allow_duplicate_ip"), "true");
    assert_eq!(toml_value(&text, "consensus", "timeout_commit"), "500ms");
    // The validators' configs are untouched: they do not list the full node.
    assert!(!node_toml(&net, 0, "p2p", "persistent_peers").contains(&full.node_id));

    // The network's genesis, byte for byte; the full node's key is not a genesis validator.
    assert_eq!(
        fs::read(full.genesis_path()).unwrap(),
        fs::read(validators[0].genesis_path()).unwrap()
    );
    let key = gonka_localnet::read_consensus_key(&full.cometbft_home).unwrap();
    for v in &validators {
        assert_ne!(
            gonka_localnet::read_consensus_key(&v.cometbft_home).unwrap(),
            key
        );
    }
    let doc: Value =
        serde_json::from_str(&fs::read_to_string(full.genesis_path()).unwrap()).unwrap();
    let b64 = {
        let pv: Value = serde_json::from_str(
            &fs::read_to_string(full.cometbft_home.join("config/priv_validator_key.json")).unwrap(),
        )
        .unwrap();
        pv["pub_key"]["value"].as_str().unwrap().to_string()
    };
    assert!(doc["validators"]
        .as_array()
        .unwrap()
        .iter()
        .all(|v| v["pub_key"]["value"] != b64.as_str()));

    // Its node id is cometbft's, and unique.
    let out = Command::new(&cometbft)
        .args(["show-node-id", "--home"])
        .arg(&full.cometbft_home)
        .output()
        .unwrap();
    assert_eq!(String::from_utf8(out.stdout).unwrap().trim(), full.node_id);
    assert!(validators.iter().all(|v| v.node_id != full.node_id));

    // A second full node peers with every node before it, the first full node included.
    assert_eq!(net.add_full_node().unwrap(), 5);
    let second = net.nodes()[5].clone();
    let peers: BTreeSet<String> = node_toml(&net, 5, "p2p", "persistent_peers")
        .split(',')
        .map(str::to_string)
        .collect();
    assert_eq!(peers.len(), 5);
    assert!(peers.contains(&full.peer_address()));
    assert!(net.node(6).is_err());
    let all = net.nodes().to_vec();
    drop(net);

    // The manifest records them: a resumed network has the same six nodes.
    let manifest: Value =
        serde_json::from_str(&fs::read_to_string(dir.join(MANIFEST_FILE)).unwrap()).unwrap();
    assert_eq!(manifest["validators"], 4);
    assert_eq!(
        manifest["full_node_ids"],
        json!([full.node_id, second.node_id])
    );
    let resumed = Localnet::prepare(config(&dir, cometbft.clone(), 27500)).unwrap();
    assert_eq!(resumed.nodes(), &all[..]);
    drop(resumed);

    // A failed addition (here: no cometbft to run `init`) leaves nothing behind.
    let manifest_before = fs::read(dir.join(MANIFEST_FILE)).unwrap();
    let mut broken = config(&dir, tmp.path().join("no-cometbft"), 27500);
    broken.validators = 4;
    let mut net = Localnet::prepare(broken).unwrap();
    let err = format!("{:#}", net.add_full_node().unwrap_err());
    assert!(err.contains("no-cometbft"), "{err}");
    assert_eq!(net.nodes().len(), 6);
    assert!(!dir.join("node6").exists());
    assert!(!dir.join(".staging").exists());
    assert_eq!(fs::read(dir.join(MANIFEST_FILE)).unwrap(), manifest_before);
}
