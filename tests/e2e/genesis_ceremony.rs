//! The genesis ceremony with the `gonkad genesis` commands, as separate operators run it: a
//! coordinator starts the genesis and funds two operators, each operator signs a statement
//! for its own CometBFT key (`cometbft init`), the coordinator collects and validates them;
//! a tampered statement is refused. Then a chain is started from a ceremony genesis with one
//! of them — `gonkad start` and `cometbft start` run by hand, as on a separate host — and
//! commits blocks with that validator bonded, its stake taken from its funded balance and its
//! BLS key registered.

use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use gonka_client::keys::well_known_mnemonic;
use gonka_client::{Client, Key};
use gonka_localnet::{find_cometbft, find_free_base_port};
use gonka_proto::query as q;
use gonka_proto::stake::QueryParticipantRequest;

use crate::inference::{eventually, GNK};
use crate::support::{gonkad_json, gonkad_ok, KEYRING_PASSPHRASE};

const CHAIN: &str = "ceremony-1";

/// Processes killed when the test ends, however it ends.
struct Processes(Vec<Child>);

impl Drop for Processes {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn operator(i: usize) -> Key {
    Key::from_mnemonic(&well_known_mnemonic(&format!("ceremony-v{i}"))).unwrap()
}

/// `cometbft init` in `home`: the node's keys and config.
fn cometbft_init(home: &Path) {
    let status = Command::new(find_cometbft().unwrap())
        .args(["init", "--home"])
        .arg(home)
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "cometbft init failed");
}

/// `gonkad args` with the test's keyring under `home`.
fn gonkad_in(home: &Path, args: &[&str]) -> String {
    let mut all = vec!["--home", home.to_str().unwrap()];
    all.extend_from_slice(args);
    gonkad_ok(&all)
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A ceremony genesis at `genesis` with the statements of operators `validators`.
fn ceremony(dir: &Path, keyring: &Path, genesis: &Path, validators: &[usize]) -> Vec<PathBuf> {
    gonkad_ok(&[
        "genesis",
        "new",
        "--new-chain-id",
        CHAIN,
        "--epoch-length",
        "20",
        "--genesis",
        path(genesis),
    ]);
    let mut gentxs = Vec::new();
    for &i in validators {
        let address = operator(i).address().to_string();
        gonkad_ok(&[
            "genesis",
            "add-account",
            &address,
            "20000gnk",
            "--genesis",
            path(genesis),
        ]);
        let node = dir.join(format!("node{i}"));
        if !node.exists() {
            cometbft_init(&node);
        }
        let gentx = dir.join(format!("gentx-{i}-{}.json", validators.len()));
        gonkad_in(
            keyring,
            &[
                "genesis",
                "gentx",
                "--from",
                &format!("v{i}"),
                "--stake",
                "10000gnk",
                "--moniker",
                &format!("v{i}"),
                "--consensus-key",
                path(&node.join("config/priv_validator_key.json")),
                "--for-chain-id",
                CHAIN,
                "--output-document",
                path(&gentx),
            ],
        );
        gentxs.push(gentx);
    }
    gentxs
}

#[test]
fn operators_sign_statements_the_coordinator_collects_them_and_the_chain_starts() {
    crate::support::run(async {
        let dir = tempfile::tempdir().unwrap();
        let keyring = dir.path().join("keyring");
        for i in 0..2 {
            let out = Command::new(env!("CARGO_BIN_EXE_gonkad"))
                .args([
                    "--home",
                    path(&keyring),
                    "keys",
                    "import",
                    &format!("v{i}"),
                    "--mnemonic",
                ])
                .arg(well_known_mnemonic(&format!("ceremony-v{i}")))
                .env("GONKA_KEYRING_PASSPHRASE", KEYRING_PASSPHRASE)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }

        // Two validators: collected, validated.
        let genesis = dir.path().join("genesis.json");
        let gentxs = ceremony(dir.path(), &keyring, &genesis, &[0, 1]);
        let mut tampered = genesis.clone();
        tampered.set_extension("tampered.json");
        std::fs::copy(&genesis, &tampered).unwrap();
        let mut collect = vec![
            "--output",
            "json",
            "genesis",
            "collect-gentxs",
            "--genesis",
            path(&genesis),
        ];
        collect.extend(gentxs.iter().map(|g| path(g)));
        let collected = gonkad_json(&collect);
        assert_eq!(
            collected["validators"].as_array().map(Vec::len),
            Some(2),
            "{collected}"
        );
        let valid = gonkad_json(&[
            "--output",
            "json",
            "genesis",
            "validate",
            "--genesis",
            path(&genesis),
        ]);
        assert_eq!(valid["validators"], 2, "{valid}");

        // A statement whose stake was raised after signing is refused, naming the file.
        let mut forged: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&gentxs[1]).unwrap()).unwrap();
        forged["stake"] = serde_json::json!((15_000 * GNK).to_string());
        let forged_path = dir.path().join("gentx-forged.json");
        std::fs::write(&forged_path, forged.to_string()).unwrap();
        let out = crate::support::gonkad(&[
            "genesis",
            "collect-gentxs",
            "--genesis",
            path(&tampered),
            path(&forged_path),
        ]);
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("gentx-forged.json") && err.contains("signature"),
            "{err}"
        );

        // One validator on its own: a chain that runs.
        let solo = dir.path().join("solo-genesis.json");
        ceremony(dir.path(), &keyring, &solo, &[0]);
        let gentx = dir.path().join("gentx-0-1.json");
        gonkad_ok(&[
            "genesis",
            "collect-gentxs",
            "--genesis",
            path(&solo),
            path(&gentx),
        ]);
        let node = dir.path().join("node0");
        std::fs::copy(&solo, node.join("config/genesis.json")).unwrap();
        let base = find_free_base_port(1, 41_000).unwrap();
        let (p2p, rpc, abci) = (base, base + 1, base + 2);
        let config = node.join("config/config.toml");
        let text = std::fs::read_to_string(&config)
            .unwrap()
            .replace("tcp://127.0.0.1:26658", &format!("tcp://127.0.0.1:{abci}"))
            .replace("tcp://127.0.0.1:26657", &format!("tcp://127.0.0.1:{rpc}"))
            .replace("tcp://0.0.0.0:26656", &format!("tcp://127.0.0.1:{p2p}"))
            .replace("timeout_commit = \"1s\"", "timeout_commit = \"200ms\"");
        std::fs::write(&config, text).unwrap();
        let app_home = dir.path().join("app0");
        let mut processes = Processes(vec![Command::new(env!("CARGO_BIN_EXE_gonkad"))
            .args([
                "start",
                "--home",
                path(&app_home),
                "--abci-addr",
                &format!("127.0.0.1:{abci}"),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()]);
        // CometBFT gives up at once if its app is not listening yet: wait for the ABCI port
        // (a slow machine may take more than any fixed pause to start the app).
        let abci_addr: SocketAddr = format!("127.0.0.1:{abci}").parse().unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        while TcpStream::connect_timeout(&abci_addr, Duration::from_millis(500)).is_err() {
            assert!(
                Instant::now() < deadline,
                "the ceremony's app never listened on {abci_addr}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        processes.0.push(
            Command::new(find_cometbft().unwrap())
                .args(["start", "--home", path(&node)])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
        let client = Client::new(&format!("http://127.0.0.1:{rpc}")).unwrap();
        eventually("the ceremony chain at height 3", || async {
            let height = client
                .status()
                .await
                .ok()?
                .sync_info
                .latest_block_height
                .value();
            (height >= 3).then_some(())
        })
        .await;
        let v0 = operator(0).address().to_string();
        let participant = client
            .query::<q::stake::Participant>(&QueryParticipantRequest {
                operator: v0.clone(),
            })
            .await
            .unwrap()
            .participant
            .unwrap();
        assert_eq!(participant.bonded, (10_000 * GNK).to_string());
        assert!(participant.power > 0);
        assert_eq!(client.balance(&v0, "ngnk").await.unwrap(), 10_000 * GNK);
        let bls = client
            .query::<q::bls::Key>(&gonka_proto::bls::QueryKeyRequest { address: v0 })
            .await
            .unwrap();
        assert!(bls.key.is_some(), "the statement's BLS key is registered");
        drop(processes);
    });
}
