//! A driver for profiling what one served request costs the transfer agent in full chain
//! mode (escrow check, the call signed for the node, the receipt checked, body and record
//! made durable): the TA runs alone in its own process, so a profiler (callgrind, perf) or
//! its `/proc` CPU counters see only the TA.
//!
//! Three roles, chosen by `TA_PROFILE_ROLE`, meeting in the directory `TA_PROFILE_DIR`:
//! - `backend`: the fake chain RPC, a stub OpenAI server and [`NODES`] ML nodes forwarding to
//!   it and signing receipts (see `support`); writes `backend.json`, then serves until killed.
//! - `ta`: the transfer agent in chain mode over that backend (database in
//!   `TA_PROFILE_DIR/ta-db`); writes `ta.json` (address, account, pid), serves until its
//!   standard input closes, then exits normally (so a profiler writes its output).
//! - `load`: sends `TA_PROFILE_REQUESTS` (default 1,000) signed requests to the TA,
//!   `TA_PROFILE_CONCURRENCY` (default 1) at a time, each on a new connection, all signed
//!   before the first is sent; prints the time taken, the errors, and the TA process's CPU
//!   time per request (user and system, from `/proc/PID/stat`).
//!
//! Instructions per request with callgrind (the TA's user-space work only; the kernel's
//! share — sockets, fsync — shows in the `/proc` system time):
//!
//! ```sh
//! B=$(ls -t target/release/deps/ta_profile-* | grep -v '\.d$' | head -1); D=/tmp/tap
//! TA_PROFILE_ROLE=backend TA_PROFILE_DIR=$D $B & sleep 1
//! sleep infinity | TA_PROFILE_ROLE=ta TA_PROFILE_DIR=$D valgrind --tool=callgrind \
//!     --callgrind-out-file=$D/cg.out $B &
//! TA_PROFILE_ROLE=load TA_PROFILE_DIR=$D TA_PROFILE_REQUESTS=200 $B   # warm-up
//! callgrind_control -z; TA_PROFILE_ROLE=load TA_PROFILE_DIR=$D $B; callgrind_control -d
//! ```
//!
//! Without `TA_PROFILE_ROLE` (`cargo test --bench ta_profile`, `cargo bench`) it runs all
//! three in one process for a few requests, as a smoke test of chain mode.

#[path = "support/mod.rs"]
mod support;

use std::io::Read;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use gonka_client::keys::well_known_mnemonic;
use gonka_client::Key;
use gonka_node::forward::Upstream;
use gonka_node::DEFAULT_MODEL_ID;
use gonka_ta::{server, RateLimit, TaConfig};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// ML nodes behind the TA.
const NODES: usize = 4;
/// Requests each node admits at once.
const NODE_CONCURRENCY: usize = 32;

fn dir() -> PathBuf {
    PathBuf::from(std::env::var("TA_PROFILE_DIR").unwrap_or_else(|_| "/tmp/ta-profile".into()))
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

fn read_json(path: &Path) -> Value {
    for _ in 0..600 {
        if let Ok(text) = std::fs::read_to_string(path) {
            if let Ok(v) = serde_json::from_str(&text) {
                return v;
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("{} did not appear", path.display());
}

fn write_json(path: &Path, value: &Value) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, value.to_string()).expect("writing");
    std::fs::rename(&tmp, path).expect("renaming");
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

async fn backend() -> Value {
    let rpc = support::start_fake_chain().await;
    let stub = support::start_stub(DEFAULT_MODEL_ID).await;
    let upstream = Upstream::new(&format!("http://{stub}"), None, None).expect("stub URL");
    let nodes = support::start_nodes(Some(upstream), NODES, NODE_CONCURRENCY, true).await;
    json!({
        "rpc": rpc.to_string(),
        "nodes": nodes.iter().map(|n| json!({"id": n.id, "addr": n.addr.to_string(),
            "max_concurrency": n.max_concurrency, "model": n.model})).collect::<Vec<_>>(),
    })
}

async fn start_ta(backend: &Value, db: &Path) -> (SocketAddr, String) {
    let rpc: SocketAddr = backend["rpc"].as_str().expect("rpc").parse().expect("rpc");
    let nodes: Vec<support::ChainNode> = backend["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .map(|n| support::ChainNode {
            id: n["id"].as_str().expect("id").to_string(),
            addr: n["addr"].as_str().expect("addr").parse().expect("addr"),
            max_concurrency: n["max_concurrency"].as_u64().expect("concurrency") as u32,
            model: n["model"].as_str().expect("model").to_string(),
        })
        .collect();
    let config = TaConfig {
        // One requester sends every request: no per-requester limit.
        rate_limit: RateLimit {
            per_second: 0,
            ..RateLimit::default()
        },
        ..TaConfig::default()
    };
    let (ta, account) = support::chain_ta(rpc, &nodes, config, db).await;
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("local addr");
    tokio::spawn(server::serve(listener, ta, std::future::pending()));
    (addr, account)
}

fn request_body() -> Vec<u8> {
    json!({
        "model": DEFAULT_MODEL_ID,
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": support::STUB_COMPLETION_TOKENS,
        "stream": false,
    })
    .to_string()
    .into_bytes()
}

/// `count` whole HTTP requests to the TA at `addr`, signed for `account`.
fn signed_messages(addr: SocketAddr, account: &str, count: usize) -> Vec<Vec<u8>> {
    let key = Key::from_mnemonic(&well_known_mnemonic("requester")).expect("well-known key");
    let body = request_body();
    let run = std::process::id();
    (0..count)
        .map(|i| {
            let headers = support::sign_request(
                &key,
                &body,
                support::CHAIN_ID,
                account,
                support::PRICE,
                format!("p{run}-{i}-{}", gonka_client::unix_now()),
            )
            .expect("signing");
            let mut head = format!(
                "POST /v1/chat/completions HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n",
                body.len()
            );
            for (name, value) in headers {
                head.push_str(&format!("{name}: {value}\r\n"));
            }
            head.push_str("\r\n");
            let mut message = head.into_bytes();
            message.extend_from_slice(&body);
            message
        })
        .collect()
}

/// Sends `message` on a new connection; returns the status of the answer.
async fn exchange(addr: SocketAddr, message: &[u8]) -> std::io::Result<u16> {
    let mut stream = TcpStream::connect(addr).await?;
    stream.set_nodelay(true)?;
    stream.write_all(message).await?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await?;
    let status = std::str::from_utf8(&answer)
        .ok()
        .and_then(|t| t.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    Ok(status)
}

/// Sends every message, `concurrency` at a time; returns the failures.
async fn load(addr: SocketAddr, messages: Vec<Vec<u8>>, concurrency: usize) -> Vec<String> {
    let queue = Arc::new(std::sync::Mutex::new(messages.into_iter()));
    let workers: Vec<_> = (0..concurrency.max(1))
        .map(|_| {
            let queue = queue.clone();
            tokio::spawn(async move {
                let mut errors = Vec::new();
                loop {
                    let next = queue.lock().expect("queue").next();
                    let Some(message) = next else { break };
                    match exchange(addr, &message).await {
                        Ok(200) => {}
                        Ok(status) => errors.push(format!("HTTP {status}")),
                        Err(e) => errors.push(e.to_string()),
                    }
                }
                errors
            })
        })
        .collect();
    let mut errors = Vec::new();
    for w in workers {
        errors.extend(w.await.expect("a load worker panicked"));
    }
    errors
}

/// User and system CPU time of process `pid`, in clock ticks.
fn cpu_ticks(pid: u64) -> Option<(u64, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split(' ').collect();
    Some((fields.get(11)?.parse().ok()?, fields.get(12)?.parse().ok()?))
}

fn main() {
    let role = std::env::var("TA_PROFILE_ROLE").unwrap_or_default();
    let dir = dir();
    match role.as_str() {
        "backend" => {
            std::fs::create_dir_all(&dir).expect("profile directory");
            let _ = std::fs::remove_file(dir.join("ta.json"));
            let rt = runtime();
            let info = rt.block_on(backend());
            write_json(&dir.join("backend.json"), &info);
            println!("backend ready: {info}");
            rt.block_on(std::future::pending::<()>());
        }
        "ta" => {
            let info = read_json(&dir.join("backend.json"));
            let db = dir.join("ta-db");
            let _ = std::fs::remove_dir_all(&db);
            std::fs::create_dir_all(&db).expect("database directory");
            let rt = runtime();
            let (addr, account) = rt.block_on(start_ta(&info, &db));
            write_json(
                &dir.join("ta.json"),
                &json!({"addr": addr.to_string(), "account": account, "pid": std::process::id()}),
            );
            println!("transfer agent at {addr}; close standard input to stop it");
            let mut sink = Vec::new();
            let _ = std::io::stdin().read_to_end(&mut sink);
            rt.shutdown_timeout(Duration::from_secs(1));
        }
        "load" => {
            let info = read_json(&dir.join("ta.json"));
            let addr: SocketAddr = info["addr"].as_str().expect("addr").parse().expect("addr");
            let account = info["account"].as_str().expect("account");
            let pid = info["pid"].as_u64().expect("pid");
            let count = env_usize("TA_PROFILE_REQUESTS", 1_000);
            let concurrency = env_usize("TA_PROFILE_CONCURRENCY", 1);
            let messages = signed_messages(addr, account, count);
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            let before = cpu_ticks(pid);
            let t0 = Instant::now();
            let errors = rt.block_on(load(addr, messages, concurrency));
            let elapsed = t0.elapsed();
            let after = cpu_ticks(pid);
            println!(
                "{count} requests, {concurrency} at a time, in {:.3} s ({:.1} us each); {} errors {:?}",
                elapsed.as_secs_f64(),
                elapsed.as_secs_f64() * 1e6 / count as f64,
                errors.len(),
                errors.iter().take(3).collect::<Vec<_>>()
            );
            if let (Some((u0, s0)), Some((u1, s1))) = (before, after) {
                // Clock ticks of 10 ms.
                let per = |ticks: u64| ticks as f64 * 1e4 / count as f64;
                println!(
                    "TA CPU per request: user {:.0} us, system {:.0} us, total {:.0} us",
                    per(u1 - u0),
                    per(s1 - s0),
                    per(u1 + s1 - u0 - s0)
                );
            }
        }
        _ => {
            // Smoke run of chain mode, all in one process.
            let rt = runtime();
            let db = tempfile::tempdir().expect("temporary directory");
            let errors = rt.block_on(async {
                let info = backend().await;
                let (addr, account) = start_ta(&info, db.path()).await;
                let messages = signed_messages(addr, &account, 20);
                load(addr, messages, 4).await
            });
            assert!(errors.is_empty(), "chain-mode requests failed: {errors:?}");
            println!("chain mode: 20 requests served");
        }
    }
}
