//! `gonkad localnet` as an operator runs it, rehearsing a fault: a validator's app killed
//! with SIGKILL is reported, the other three keep committing, and with `--restart-crashed`
//! the node comes back and catches up to the same app hash.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use gonka_localnet::{find_free_base_port, rpc, NodePorts};

use crate::support::KillOnDrop;

const RPC_TIMEOUT: Duration = Duration::from_secs(2);

fn rpc_addr(base_port: u16, node: usize) -> SocketAddr {
    SocketAddr::from((
        [127, 0, 0, 1],
        NodePorts::for_node(base_port, node).unwrap().rpc,
    ))
}

fn height(base_port: u16, node: usize) -> Option<u64> {
    rpc::status(rpc_addr(base_port, node), RPC_TIMEOUT)
        .and_then(|s| rpc::latest_block_height(&s))
        .ok()
}

/// Waits until `node` reports a height of at least `min`; panics with `what` after `timeout`.
fn wait_height(base_port: u16, node: usize, min: u64, timeout: Duration, what: &str) -> u64 {
    let deadline = Instant::now() + timeout;
    loop {
        match height(base_port, node) {
            Some(h) if h >= min => return h,
            _ if Instant::now() > deadline => panic!("{what}: node {node} did not reach {min}"),
            _ => std::thread::sleep(Duration::from_millis(200)),
        }
    }
}

/// The app hash of block `h` on `node` (header `h + 1` carries the state after `h`).
fn app_hash_after(base_port: u16, node: usize, h: u64) -> String {
    let (status, body) = crate::support::http_get(
        rpc_addr(base_port, node),
        &format!("/block?height={}", h + 1),
    );
    assert_eq!(status, 200, "{body}");
    let json: serde_json::Value = serde_json::from_str(&body).unwrap();
    json["result"]["block"]["header"]["app_hash"]
        .as_str()
        .unwrap()
        .to_string()
}

/// The pid of the process whose command line holds `needle` (an app's home directory).
fn pid_with_arg(needle: &str) -> i32 {
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let args: Vec<&[u8]> = cmdline.split(|&b| b == 0).collect();
        if args.contains(&&b"start"[..]) && args.contains(&needle.as_bytes()) {
            return pid;
        }
    }
    panic!("no process has {needle} in its command line");
}

#[test]
fn a_killed_validator_is_reported_the_rest_runs_on_and_it_is_restarted() {
    crate::support::run(async {
        tokio::task::block_in_place(|| {
            let dir = tempfile::tempdir().unwrap();
            let base_port = find_free_base_port(4, 31_000).unwrap();
            let log_path = dir.path().join("localnet.log");
            let net_dir = dir.path().join("net");
            let localnet = std::process::Command::new(env!("CARGO_BIN_EXE_gonkad"))
                .args(["--home", dir.path().to_str().unwrap(), "localnet"])
                .args(["--dir", net_dir.to_str().unwrap()])
                .args(["--base-port", &base_port.to_string()])
                .args(["--no-sidecars", "--no-import-keys", "--restart-crashed"])
                .env_remove("RUST_LOG")
                .stdout(std::fs::File::create(dir.path().join("localnet.out")).unwrap())
                .stderr(std::fs::File::create(&log_path).unwrap())
                .spawn()
                .unwrap();
            let mut localnet = KillOnDrop(localnet);
            for node in 0..4 {
                wait_height(base_port, node, 3, Duration::from_secs(90), "start");
            }

            let app_home = net_dir.join("node3").join("app");
            let pid = pid_with_arg(app_home.to_str().unwrap());
            // SAFETY: sending a signal to a process this test's localnet started.
            assert_eq!(unsafe { libc::kill(pid, libc::SIGKILL) }, 0);
            let killed_at = height(base_port, 0).unwrap();

            // Three of four validators hold more than 2/3 of the power: the chain goes on,
            // and the localnet neither exits nor stops them.
            wait_height(
                base_port,
                0,
                killed_at + 3,
                Duration::from_secs(30),
                "after the kill",
            );
            assert!(
                localnet.0.try_wait().unwrap().is_none(),
                "gonkad localnet exited"
            );
            let log = std::fs::read_to_string(&log_path).unwrap();
            assert!(
                log.contains("node 3 app exited unexpectedly")
                    && log.contains("3 of 4 nodes running"),
                "the crash is not reported: {log}"
            );
            assert!(log.contains("restarting it in 1s"), "{log}");

            // Restarted, node 3 catches up to the others' height and app hash.
            let target = height(base_port, 0).unwrap() + 2;
            wait_height(base_port, 3, target, Duration::from_secs(60), "restart");
            wait_height(base_port, 0, target + 1, Duration::from_secs(30), "restart");
            assert_eq!(
                app_hash_after(base_port, 3, target),
                app_hash_after(base_port, 0, target),
                "node 3 caught up to another app hash"
            );
            let log = std::fs::read_to_string(&log_path).unwrap();
            assert!(log.contains("restarted after a crash"), "{log}");

            // Ctrl-C still stops everything cleanly.
            // SAFETY: signalling the child this test started.
            unsafe { libc::kill(localnet.0.id() as i32, libc::SIGINT) };
            let status = localnet.0.wait().unwrap();
            assert!(status.success(), "{status}");
        });
    });
}
