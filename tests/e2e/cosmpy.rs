//! Stock cosmpy (0.12.2, from PyPI; `tests/cosmpy/`) against a real network over gRPC, node
//! 0's own endpoint (`gonkad start --grpc-listen`): a balance read, a send with a simulated gas limit (auth `Account`, tx
//! `Simulate`, `BroadcastTx`), the tx found again with `GetTx`, and the recipient's balance.
//! `scripts/test.sh` makes `tests/cosmpy/.venv` first.

use std::path::Path;

use gonka_proto::bank::QueryBalanceRequest;
use gonka_proto::query as q;

use crate::support::{addr, key, Net, MIN_GAS_PRICE, START_BALANCE};

#[test]
fn cosmpy_reads_and_sends_over_a_nodes_grpc() {
    crate::support::run(async {
        let net = Net::start("cosmpy", &["alice"]).await;
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/cosmpy");
        let python = dir.join(".venv/bin/python");
        assert!(
            python.exists(),
            "cosmpy is not installed: run `python3 -m venv tests/cosmpy/.venv && tests/cosmpy/.venv/bin/pip install -r tests/cosmpy/requirements.txt` (scripts/test.sh does)"
        );
        // Every localnet node serves gRPC (`gonkad start --grpc-listen`).
        let grpc = format!("127.0.0.1:{}", net.node(0).ports.grpc());
        let recipient = addr("e2e-cosmpy-recipient");
        let out = tokio::task::block_in_place(|| {
            std::process::Command::new(&python)
                .arg(dir.join("wallet.py"))
                .args([
                    &format!("grpc+http://{grpc}"),
                    crate::support::CHAIN_ID,
                    MIN_GAS_PRICE,
                    &recipient,
                    "4242",
                ])
                .env(
                    "GONKA_PRIVATE_KEY",
                    hex::encode(key("alice").secret_bytes()),
                )
                .output()
                .unwrap()
        });
        assert!(
            out.status.success(),
            "wallet.py failed: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let report: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
        assert_eq!(report["sender"], addr("alice"), "{report}");
        assert_eq!(report["balanceBefore"], START_BALANCE as u64, "{report}");
        assert_eq!(report["sequence"], 0, "{report}");
        // An account that does not exist is gRPC's NOT_FOUND, as Cosmos nodes answer.
        assert_eq!(report["unknownAccount"], "NOT_FOUND", "{report}");
        assert_eq!(report["code"], 0, "{report}");
        let (used, wanted) = (
            report["gasUsed"].as_u64().unwrap(),
            report["gasWanted"].as_u64().unwrap(),
        );
        assert!(used > 0 && used <= wanted, "{report}");
        assert_eq!(report["recipientBalance"], 4242, "{report}");
        // Blocks as the tendermint service serves them.
        assert_eq!(report["chainId"], crate::support::CHAIN_ID, "{report}");
        assert!(
            report["latestHeight"].as_u64() >= report["height"].as_u64(),
            "{report}"
        );
        assert_eq!(report["txInBlock"], true, "{report}");
        // The same signed tx twice: the second is refused with Cosmos's code for it.
        let duplicate = report["duplicate"].as_str().unwrap();
        assert!(duplicate.contains("already submitted"), "{report}");

        // What cosmpy saw is what the chain says, asked of another node.
        let hash: tendermint::Hash = report["hash"].as_str().unwrap().parse().unwrap();
        let found = net.clients[2].find_tx(hash).await.unwrap().unwrap();
        assert_eq!(found.height, report["height"].as_u64().unwrap(), "{report}");
        let received = net.clients[1]
            .query::<q::bank::Balance>(&QueryBalanceRequest {
                address: recipient,
                denom: "ngnk".into(),
            })
            .await
            .unwrap()
            .balance
            .unwrap();
        assert_eq!(received.amount, "4242");
    });
}
