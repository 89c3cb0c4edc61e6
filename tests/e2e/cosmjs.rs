//! Stock cosmjs (0.39, from the npm registry; `tests/cosmjs/`) against the localnet, as a
//! Keplr-style wallet uses a chain: `sendTokens` with `fee: "auto"` (gas from `Simulate`),
//! the tx found again with `getTx` and `searchTx` by sender, the supply with `supplyOf` and the
//! native denom's display unit with `denomMetadata`. Node.js runs `tests/cosmjs/wallet.mjs`;
//! `scripts/test.sh` installs its packages (`npm ci`) first.

use std::path::Path;

use gonka_client::keys::well_known_mnemonic;
use gonka_proto::bank::{QueryBalanceRequest, QuerySupplyRequest};
use gonka_proto::query as q;

use crate::support::{addr, Net, MIN_GAS_PRICE, START_BALANCE};

#[test]
fn cosmjs_sends_with_an_auto_fee_and_reads_txs_supply_and_metadata() {
    crate::support::run(async {
        let net = Net::start("cosmjs", &["alice"]).await;
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/cosmjs");
        assert!(
            dir.join("node_modules/@cosmjs/stargate").is_dir(),
            "cosmjs is not installed: run `(cd tests/cosmjs && npm ci)` (scripts/test.sh does)"
        );
        let recipient = addr("e2e-cosmjs-recipient");
        let out = tokio::task::block_in_place(|| {
            std::process::Command::new("node")
                .current_dir(&dir)
                .args([
                    "wallet.mjs",
                    &net.node(0).rpc_url,
                    &format!("{MIN_GAS_PRICE}ngnk"),
                    &recipient,
                    "777",
                ])
                .env("GONKA_MNEMONIC", well_known_mnemonic("alice"))
                .output()
                .expect("running node (Node.js must be installed)")
        });
        assert!(
            out.status.success(),
            "wallet.mjs failed: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let report: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
        assert_eq!(report["sender"], addr("alice"), "{report}");
        assert_eq!(report["code"], 0, "{report}");
        // The simulated gas, adjusted, covered what the tx used.
        let (used, wanted) = (
            report["gasUsed"].as_u64().unwrap(),
            report["gasWanted"].as_u64().unwrap(),
        );
        assert!(used > 0 && used <= wanted, "{report}");
        assert_eq!(report["foundHeight"], report["height"], "{report}");
        let hash = report["hash"].as_str().unwrap();
        assert!(
            report["bySender"]
                .as_array()
                .unwrap()
                .iter()
                .any(|h| h == hash),
            "{report}"
        );
        assert_eq!(report["recipientBalance"], "777", "{report}");
        assert_eq!(report["display"], "gnk", "{report}");
        assert_eq!(report["exponent"], 9, "{report}");

        // What cosmjs read is what the chain says.
        let client = &net.clients[1];
        let received = client
            .query::<q::bank::Balance>(&QueryBalanceRequest {
                address: recipient,
                denom: "ngnk".into(),
            })
            .await
            .unwrap_or_else(|e| panic!("{e:#}"))
            .balance
            .unwrap();
        assert_eq!(received.amount, "777");
        let supply = client
            .query::<q::bank::Supply>(&QuerySupplyRequest {
                denom: "ngnk".into(),
            })
            .await
            .unwrap_or_else(|e| panic!("{e:#}"))
            .amount
            .unwrap();
        // Epoch emission only ever adds to the supply between the two reads.
        assert_eq!(report["supply"]["denom"], "ngnk");
        let read: u128 = report["supply"]["amount"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        assert!(read >= START_BALANCE, "{report}");
        assert!(read <= supply.amount.parse::<u128>().unwrap(), "{report}");
    });
}
