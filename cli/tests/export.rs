//! `gonkad export` as a process: it reads a stopped node's state database and prints the
//! same `app_state` the app exports, and refuses readably where there is no database.

use std::process::Command;

use gonka_app::genesis::{app_state, GenesisAccount};
use gonka_app::harness::TestChain;
use gonka_client::keys::well_known_mnemonic;
use gonka_client::Key;

fn gonkad(home: &std::path::Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_gonkad"))
        .args(["--home", home.to_str().unwrap(), "export"])
        .output()
        .unwrap()
}

#[test]
fn export_prints_the_committed_state_as_app_state() {
    let home = tempfile::tempdir().unwrap();
    let alice = Key::from_mnemonic(&well_known_mnemonic("alice")).unwrap();
    let genesis = app_state(
        &[GenesisAccount {
            address: alice.address().into(),
            ngnk: 7_000_000_000,
        }],
        gonka_client::GasPrice::parse("0.01").unwrap(),
    );
    let path = home.path().join("data").join(gonka_app::STATE_FILE);
    let expected = {
        let mut chain = TestChain::new(&path, "gonka-export", &genesis).unwrap();
        chain.next_block(vec![]);
        chain.app().export_genesis().unwrap()
        // The chain (and its database lock) is dropped here, as a stopped node's.
    };

    let output = gonkad(home.path());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let printed: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(printed, expected);
    let balances = printed["bank"]["balances"].as_array().unwrap();
    assert!(
        balances
            .iter()
            .any(|b| b["address"] == alice.address() && b["coins"][0]["amount"] == "7000000000"),
        "{printed}"
    );
}

#[test]
fn export_without_a_state_database_says_which_home_to_pass() {
    let home = tempfile::tempdir().unwrap();
    let output = gonkad(home.path());
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("no state database") && stderr.contains("--home"),
        "{stderr}"
    );
}
