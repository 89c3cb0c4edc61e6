//! The web explorer (`gonkad explorer`) in a real headless Chromium (Debian's `chromium`,
//! driven over CDP by `puppeteer-core` from the npm registry; `tests/explorer/browse.mjs`).
//!
//! It runs at the end of two tests whose networks have something to show, so it needs no
//! network of its own: the disputes test ([`crate::disputes`]: a lost dispute and its slash;
//! its epochs never end) and the staking test ([`crate::stake`]: epochs of 10 blocks, settled
//! with their rewards, and a validator that joined and left). The script opens the page as a
//! person would: the home page's height moves on by itself, a tx sent here is found through
//! the search box with its decoded message (its memo is markup, which must show as text and
//! never run), the recipient's account lists it, and the validators page — and the dispute or
//! the epoch page — show the values this test reads over RPC; every other page kind renders,
//! a search for an unknown hash says so, and a screenshot is written.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use base64::Engine as _;
use gonka_client::msg_send;
use gonka_proto::disputes::QueryDisputesRequest;
use gonka_proto::query as q;
use gonka_proto::rewards::{QueryEpochRewardsRequest, QueryEpochRewardsResponse};
use gonka_proto::stake::QueryParticipantsRequest;
use serde_json::{json, Value};
use tendermint_rpc::Client as _;

use crate::support::{addr, Net};

/// A memo a stranger could write: markup with a script in an attribute.
const MEMO: &str = "<img src=x onerror=\"window.__pwned=1\">";

/// The Chromium the test drives: `$GONKA_CHROMIUM`, else `chromium` on PATH.
fn chromium() -> PathBuf {
    if let Some(path) = std::env::var_os("GONKA_CHROMIUM") {
        return PathBuf::from(path);
    }
    std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|dir| dir.join("chromium"))
        .find(|path| path.is_file())
        .expect("chromium is not installed: `apt-get install chromium` (.ci/run does), or set GONKA_CHROMIUM")
}

/// A `gonkad explorer` process, stopped on drop.
struct Explorer {
    child: Child,
    url: String,
}

impl Explorer {
    fn start(node: &str) -> Explorer {
        let mut child = Command::new(env!("CARGO_BIN_EXE_gonkad"))
            .args(["--node", node, "explorer", "--listen", "127.0.0.1:0"])
            .stdout(Stdio::piped())
            .env_remove("RUST_LOG")
            .spawn()
            .expect("starting gonkad explorer");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .expect("reading the explorer's address");
        let url = line
            .split_whitespace()
            .last()
            .filter(|url| url.starts_with("http://"))
            .unwrap_or_else(|| panic!("gonkad explorer printed no URL: {line:?}"))
            .trim_end_matches('/')
            .to_string();
        Explorer { child, url }
    }
}

impl Drop for Explorer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Voting power by operator, from CometBFT's validator set and the participants' keys.
async fn powers(net: &Net) -> BTreeMap<String, String> {
    let client = &net.clients[0];
    let height = client.status().await.unwrap().sync_info.latest_block_height;
    let set = client
        .http()
        .validators(height, tendermint_rpc::Paging::All)
        .await
        .unwrap();
    let by_key: BTreeMap<String, String> = set
        .validators
        .iter()
        .map(|v| {
            let key = base64::engine::general_purpose::STANDARD.encode(v.pub_key.to_bytes());
            (key, v.power.value().to_string())
        })
        .collect();
    client
        .query_all::<q::stake::Participants>(QueryParticipantsRequest::default())
        .await
        .unwrap()
        .into_iter()
        .map(|p| {
            let key = base64::engine::general_purpose::STANDARD.encode(&p.consensus_pubkey);
            let power = by_key.get(&key).cloned().unwrap_or_else(|| "0".into());
            (p.operator, power)
        })
        .collect()
}

/// Which of the pages that need a network's history [`browse_and_check`] checks.
pub enum History {
    /// A resolved dispute's page.
    Dispute,
    /// The last settled epoch's page (the one with most work, if any had work).
    Epoch,
}

/// Sends a tx from the funded account `sender`, opens the explorer on node 0 in Chromium and
/// checks each page against RPC, with the `history` page; the screenshot is `label`'s.
pub async fn browse_and_check(net: &Net, sender: &str, history: History, label: &str) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/explorer");
    assert!(
        dir.join("node_modules/puppeteer-core").is_dir(),
        "puppeteer-core is not installed: run `(cd tests/explorer && npm ci)` (scripts/test.sh does)"
    );
    let recipient = addr("e2e-explorer-recipient");
    let sent = net
        .tx_ok(
            0,
            sender,
            vec![msg_send(&addr(sender), &recipient, 5_000_000_000)],
            MEMO,
        )
        .await;

    // What the pages must show, read over RPC: every validator's power, and a resolved
    // dispute or the last settled epoch.
    let client = &net.clients[0];
    let (dispute, epoch) = match history {
        History::Dispute => {
            let dispute = client
                .query::<q::disputes::List>(&QueryDisputesRequest::default())
                .await
                .unwrap()
                .disputes
                .into_iter()
                .find(|d| d.resolved_height > 0)
                .expect("a resolved dispute");
            (Some(dispute), None)
        }
        History::Epoch => {
            let current = net.current_epoch(0).await;
            assert!(current > 0, "no epoch has been settled yet");
            let number = current - 1;
            let rewards = client
                .query::<q::rewards::Epoch>(&QueryEpochRewardsRequest {
                    epoch: number,
                    pagination: None,
                })
                .await
                .unwrap();
            (None, Some((number, rewards)))
        }
    };
    let powers_before = powers(net).await;

    let explorer = Explorer::start(&net.node(0).rpc_url);
    // A stranger cannot use the explorer to reach the node's other RPC methods: no
    // broadcasting or dialing through it, and its reads are GETs.
    let http = reqwest::Client::new();
    let broadcast = http
        .get(format!("{}/rpc/broadcast_tx_sync?tx=0x00", explorer.url))
        .send()
        .await
        .unwrap();
    assert_eq!(broadcast.status().as_u16(), 404);
    assert!(broadcast.text().await.unwrap().contains("passes only"));
    let posted = http
        .post(format!("{}/rpc/status", explorer.url))
        .send()
        .await
        .unwrap();
    assert_eq!(posted.status().as_u16(), 405);
    let screenshot = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("explorer-{label}.png"));
    let _ = std::fs::remove_file(&screenshot);
    let plan = json!({
        "tx": sent.hash,
        "epoch": epoch.as_ref().map(|(number, _)| number),
        "dispute": dispute.as_ref().map(|d| d.id),
        "unknown": "ab".repeat(32),
        "chromium": chromium(),
    });
    let out = tokio::task::block_in_place(|| {
        Command::new("node")
            .current_dir(&dir)
            .args([
                "browse.mjs",
                &explorer.url,
                &plan.to_string(),
                screenshot.to_str().unwrap(),
            ])
            .output()
            .expect("running node (Node.js must be installed)")
    });
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "browse.mjs printed no JSON ({e}): {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let powers_after = powers(net).await;
    drop(explorer);
    assert!(report["failure"].is_null(), "{report:#}");
    // The browser logs every non-2xx answer ("not settled yet" reads are expected); anything
    // else on the console, or an uncaught script error, is a failure.
    let errors: Vec<&Value> = report["errors"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| !e.as_str().unwrap().contains("Failed to load resource"))
        .collect();
    assert!(errors.is_empty(), "{errors:?}");
    let pages = &report["pages"];

    let home = &pages["home"];
    assert!(home["later"].as_u64() > home["first"].as_u64(), "{home}");
    assert_eq!(home["blocks"], 10, "{home}");

    let tx = &pages["tx"];
    assert_eq!(tx["hash"], sent.hash.as_str(), "{tx}");
    assert_eq!(tx["result"], "ok", "{tx}");
    assert!(tx["type"].as_str().unwrap().ends_with(".MsgSend"), "{tx}");
    assert_eq!(tx["to"], recipient.as_str(), "{tx}");
    assert_eq!(tx["amount"], "5 GNK", "{tx}");
    assert_eq!(tx["memo"], MEMO, "the memo shows as text: {tx}");
    assert_eq!(tx["injected"], false, "the memo's markup ran: {tx}");
    assert!(
        pages["account"]["received"]
            .as_array()
            .unwrap()
            .contains(&json!(sent.hash)),
        "{}",
        pages["account"]
    );

    let shown = pages["validators"].as_array().unwrap();
    assert_eq!(shown.len(), powers_before.len(), "{shown:?}");
    for row in shown {
        let operator = row["operator"].as_str().unwrap();
        let power = row["power"].as_str().unwrap();
        assert!(
            powers_before.get(operator).map(String::as_str) == Some(power)
                || powers_after.get(operator).map(String::as_str) == Some(power),
            "{operator}'s power on the page {power}, over RPC {:?} then {:?}",
            powers_before.get(operator),
            powers_after.get(operator)
        );
    }

    if let Some((_, rewards)) = epoch {
        check_epoch(&pages["epoch"], rewards);
    }
    if let Some(dispute) = dispute {
        let page = &pages["dispute"];
        assert_eq!(page["status"], dispute.status.as_str(), "{page}");
        assert_eq!(page["slashed"], dispute.slashed.as_str(), "{page}");
        assert_eq!(
            page["slashed_amount"],
            dispute.slashed_amount.as_str(),
            "{page}"
        );
        assert_eq!(page["payouts"], dispute.payouts.len(), "{page}");
    }

    let rendered = pages["rendered"].as_object().unwrap();
    assert_eq!(rendered.len(), 7, "{rendered:?}");
    assert!(
        pages["unknown"].as_str().unwrap().contains("Nothing found"),
        "{}",
        pages["unknown"]
    );
    let png = std::fs::read(&screenshot).expect("the screenshot was written");
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 10_000,
        "{} bytes",
        png.len()
    );
    eprintln!("explorer screenshot: {}", screenshot.display());
}

/// The epoch page shows the epoch's rewards and who was paid, as the rewards query has them.
fn check_epoch(page: &Value, rewards: QueryEpochRewardsResponse) {
    let summary = rewards.rewards.expect("a settled epoch has rewards");
    assert_eq!(page["emission"], summary.emission.as_str(), "{page}");
    assert_eq!(page["distributed"], summary.distributed.as_str(), "{page}");
    assert_eq!(page["total_work"], summary.total_work.to_string(), "{page}");
    let mut paid: Vec<&str> = page["participants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["operator"].as_str().unwrap())
        .collect();
    let mut expected: Vec<&str> = rewards
        .participants
        .iter()
        .map(|p| p.operator.as_str())
        .collect();
    paid.sort();
    expected.sort();
    assert_eq!(paid, expected, "{page}");
}
