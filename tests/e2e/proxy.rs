//! `gonkad proxy` with the official `openai` Python client (PyPI; `tests/openai/`), unchanged
//! and holding no gonka key: through the proxy, which signs each request with alice's key,
//! it lists the models, gets a plain and a streamed answer (identical: the reference model is
//! deterministic) with usage, and an unknown model's refusal as an OpenAI error.
//! `scripts/test.sh` installs the client in `tests/openai/.venv` first.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use gonka_localnet::AppStateFn;

use crate::inference::{
    alice_escrow, genesis_config, keyring_with_alice, sidecars, wait_for_registry, MODEL,
};
use crate::support::{gonkad, KillOnDrop, Net, VALIDATORS};

#[test]
fn the_official_openai_client_chats_through_the_signing_proxy() {
    crate::support::run(async {
        let net = Net::start_with("proxy", VALIDATORS, |config| {
            config.app_state_for_validators = Some(AppStateFn(Arc::new(|keys| {
                let mut genesis = genesis_config(keys, 100_000);
                genesis.escrows = vec![alice_escrow(0)];
                genesis.app_state()
            })));
            config.sidecar = Some(sidecars());
        })
        .await;
        wait_for_registry(&net).await;
        let tas = net.net.transfer_agent_urls();

        let keyring = keyring_with_alice();
        let home = keyring.path().to_str().unwrap().to_string();
        let (_proxy, listen) = start_proxy(&net, &home, &tas[0]).await;
        // A non-loopback address is refused without --allow-remote.
        let remote = gonkad(&[
            "--home",
            &home,
            "proxy",
            "--from",
            "alice",
            "--ta",
            &tas[0],
            "--listen",
            "0.0.0.0:0",
        ]);
        assert!(!remote.status.success());
        assert!(
            String::from_utf8_lossy(&remote.stderr).contains("--allow-remote"),
            "{remote:?}"
        );

        let report = run_openai_script("chat.py", &listen, MODEL);
        assert!(
            report["models"]
                .as_array()
                .unwrap()
                .iter()
                .any(|m| m == MODEL),
            "{report}"
        );
        let plain = report["plain"].as_str().unwrap();
        assert!(!plain.is_empty(), "{report}");
        assert_eq!(report["streamed"], plain, "{report}");
        let tokens = report["completion_tokens"].as_u64().unwrap();
        assert!((1..=16).contains(&tokens), "{report}");
        assert_eq!(report["stream_completion_tokens"], tokens, "{report}");
        assert!(
            matches!(report["finish_reason"].as_str(), Some("stop" | "length")),
            "{report}"
        );
        // The completion id is the network's inference id (hex of the signed request hash).
        let id = report["id"].as_str().unwrap();
        let inference = id.strip_prefix("chatcmpl-").unwrap();
        assert_eq!(inference.len(), 64, "{report}");
        assert_eq!(report["refused"], 404, "{report}");
    });
}

/// Starts `gonkad proxy` signing with alice's key (in the keyring at `home`) in front of the
/// transfer agent `ta`; returns the process and its listen address once it listens.
pub async fn start_proxy(net: &Net, home: &str, ta: &str) -> (KillOnDrop, String) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let listen = format!("127.0.0.1:{port}");
    let log = std::fs::File::create(net.node(0).home.join("proxy.log")).unwrap();
    let proxy = KillOnDrop(
        std::process::Command::new(env!("CARGO_BIN_EXE_gonkad"))
            .env_remove("GONKA_KEYRING_BACKEND")
            .env(
                "GONKA_KEYRING_PASSPHRASE",
                crate::support::KEYRING_PASSPHRASE,
            )
            .args([
                "--home",
                home,
                "--node",
                &net.node(0).rpc_url,
                "proxy",
                "--from",
                "alice",
                "--ta",
                ta,
                "--listen",
                &listen,
            ])
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap(),
    );
    let started = Instant::now();
    while std::net::TcpStream::connect(&listen).is_err() {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the proxy did not listen on {listen}; see {}",
            net.node(0).home.join("proxy.log").display()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    (proxy, listen)
}

/// Runs `tests/openai/<script> http://<listen>/v1 <model>` with the official client (installed
/// by `scripts/test.sh` in `tests/openai/.venv`) and returns the JSON it prints.
pub fn run_openai_script(script: &str, listen: &str, model: &str) -> serde_json::Value {
    let python = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/openai/.venv/bin/python");
    assert!(
        python.exists(),
        "the openai client is not installed: run scripts/test.sh (it makes tests/openai/.venv)"
    );
    let out = tokio::task::block_in_place(|| {
        std::process::Command::new(&python)
            .arg(
                Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("../tests/openai")
                    .join(script),
            )
            .args([&format!("http://{listen}/v1"), model])
            .output()
            .unwrap()
    });
    assert!(
        out.status.success(),
        "{script} failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}
