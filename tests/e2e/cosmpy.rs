//! Node 0's API port (`gonkad start --api-listen`) as stock clients use it: cosmpy (0.12.2,
//! from PyPI; `tests/cosmpy/`) over gRPC and over REST — a balance read, a send with a
//! simulated gas limit (auth `Account`, consensus `Params`, tx `Simulate`, `BroadcastTx`), the
//! tx found again with `GetTx`, blocks, a duplicate refused — and a wallet's REST calls over
//! plain HTTP on the same port.
//! `scripts/test.sh` makes `tests/cosmpy/.venv` first.

use std::path::Path;

use gonka_proto::bank::QueryBalanceRequest;
use gonka_proto::query as q;

use crate::support::{addr, key, Net, MIN_GAS_PRICE, START_BALANCE};

#[test]
fn cosmpy_over_grpc_and_rest_and_a_wallet_over_rest_on_a_nodes_api_port() {
    crate::support::run(async {
        let net = Net::start("cosmpy", &["alice", "bob"]).await;
        // Every localnet node serves gRPC and REST (`gonkad start --api-listen`).
        let api = format!("127.0.0.1:{}", net.node(0).ports.api());
        // cosmpy over each transport, each with a sender of its own.
        for (transport, sender, amount) in [("grpc", "alice", 4242), ("rest", "bob", 4343)] {
            let recipient = addr(&format!("e2e-cosmpy-{transport}-recipient"));
            let url = format!("{transport}+http://{api}");
            cosmpy_sends_and_reads(&net, &url, sender, &recipient, amount).await;
        }
        rest_routes_answer_in_the_cosmos_shapes(&net, &api, &addr("e2e-cosmpy-grpc-recipient"))
            .await;
    });
}

/// Runs `tests/cosmpy/wallet.py` against `url` as `sender` and checks what it reports
/// against the chain.
async fn cosmpy_sends_and_reads(net: &Net, url: &str, sender: &str, recipient: &str, amount: u64) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/cosmpy");
    let python = dir.join(".venv/bin/python");
    assert!(
        python.exists(),
        "cosmpy is not installed: run `python3 -m venv tests/cosmpy/.venv && tests/cosmpy/.venv/bin/pip install -r tests/cosmpy/requirements.txt` (scripts/test.sh does)"
    );
    let out = tokio::task::block_in_place(|| {
        std::process::Command::new(&python)
            .arg(dir.join("wallet.py"))
            .args([
                url,
                crate::support::CHAIN_ID,
                MIN_GAS_PRICE,
                recipient,
                &amount.to_string(),
            ])
            .env("GONKA_PRIVATE_KEY", hex::encode(key(sender).secret_bytes()))
            .output()
            .unwrap()
    });
    assert!(
        out.status.success(),
        "wallet.py over {url} failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    assert_eq!(report["sender"], addr(sender), "{url}: {report}");
    assert_eq!(
        report["balanceBefore"], START_BALANCE as u64,
        "{url}: {report}"
    );
    assert_eq!(report["sequence"], 0, "{url}: {report}");
    // An account that does not exist is NOT_FOUND (gRPC's status, REST's 404), as Cosmos
    // nodes answer.
    assert_eq!(report["unknownAccount"], "NOT_FOUND", "{url}: {report}");
    // query_node_info parses the Cosmos SDK API version the node reports.
    assert_eq!(report["appName"], "gonka", "{url}: {report}");
    assert_eq!(report["cosmosSdkVersion"], "0.50.0", "{url}: {report}");
    assert_eq!(report["code"], 0, "{url}: {report}");
    let (used, wanted) = (
        report["gasUsed"].as_u64().unwrap(),
        report["gasWanted"].as_u64().unwrap(),
    );
    assert!(used > 0 && used <= wanted, "{url}: {report}");
    assert_eq!(report["recipientBalance"], amount, "{url}: {report}");
    // Blocks as the tendermint service serves them.
    assert_eq!(
        report["chainId"],
        crate::support::CHAIN_ID,
        "{url}: {report}"
    );
    assert!(
        report["latestHeight"].as_u64() >= report["height"].as_u64(),
        "{url}: {report}"
    );
    assert_eq!(report["txInBlock"], true, "{url}: {report}");
    // The same signed tx twice: the second is refused with Cosmos's code for it.
    let duplicate = report["duplicate"].as_str().unwrap();
    assert!(duplicate.contains("already submitted"), "{url}: {report}");

    // What cosmpy saw is what the chain says, asked of another node.
    let hash: tendermint::Hash = report["hash"].as_str().unwrap().parse().unwrap();
    let found = net.clients[2].find_tx(hash).await.unwrap().unwrap();
    assert_eq!(
        found.height,
        report["height"].as_u64().unwrap(),
        "{url}: {report}"
    );
    let received = net.clients[1]
        .query::<q::bank::Balance>(&QueryBalanceRequest {
            address: recipient.to_string(),
            denom: "ngnk".into(),
        })
        .await
        .unwrap()
        .balance
        .unwrap();
    assert_eq!(received.amount, amount.to_string());
}

/// A 64-bit (or wider) integer the Cosmos JSON shapes carry as a string.
fn number(value: &serde_json::Value) -> u128 {
    value
        .as_str()
        .and_then(|text| text.parse().ok())
        .unwrap_or_else(|| panic!("{value} is not an integer in a string"))
}

/// The REST routes on the same port, as a wallet calls them (plain HTTP/1.1, JSON).
async fn rest_routes_answer_in_the_cosmos_shapes(net: &Net, api: &str, recipient: &str) {
    let http = reqwest::Client::new();
    let get = |path: String| {
        let http = http.clone();
        async move {
            let r = http
                .get(format!("http://{api}{path}"))
                .send()
                .await
                .unwrap();
            let status = r.status().as_u16();
            (
                status,
                serde_json::from_slice::<serde_json::Value>(&r.bytes().await.unwrap()).unwrap(),
            )
        }
    };
    let alice = addr("alice");
    let (status, balance) = get(format!("/cosmos/bank/v1beta1/balances/{recipient}")).await;
    assert_eq!(status, 200, "{balance}");
    assert_eq!(
        balance["balances"][0],
        serde_json::json!({"denom": "ngnk", "amount": "4242"}),
        "{balance}"
    );
    let (_, by_denom) = get(format!(
        "/cosmos/bank/v1beta1/balances/{alice}/by_denom?denom=ngnk"
    ))
    .await;
    let chain = net.clients[0].balance(&alice, "ngnk").await.unwrap();
    assert_eq!(
        by_denom["balance"]["amount"],
        chain.to_string(),
        "{by_denom}"
    );
    let (_, account) = get(format!("/cosmos/auth/v1beta1/accounts/{alice}")).await;
    assert_eq!(
        account["account"]["@type"], "/cosmos.auth.v1beta1.BaseAccount",
        "{account}"
    );
    assert_eq!(
        account["account"]["pub_key"]["@type"], "/cosmos.crypto.secp256k1.PubKey",
        "{account}"
    );
    let signer = net.signer(0, "alice").await;
    assert_eq!(
        account["account"]["sequence"],
        signer.sequence.to_string(),
        "{account}"
    );
    assert_eq!(
        account["account"]["account_number"],
        signer.account_number.to_string(),
        "{account}"
    );
    let (_, metadata) = get("/cosmos/bank/v1beta1/denoms_metadata".into()).await;
    assert_eq!(metadata["metadatas"][0]["base"], "ngnk", "{metadata}");

    // Simulate and broadcast a signed tx as Keplr does (tx_bytes), then find it.
    let tx = gonka_client::sign(
        key("alice"),
        vec![gonka_client::msg_send(&alice, recipient, 1)],
        &signer,
        crate::support::tx_fee(),
        "rest",
    )
    .unwrap();
    let body = serde_json::json!({"tx_bytes": base64::Engine::encode(&base64::engine::general_purpose::STANDARD, &tx), "mode": "BROADCAST_MODE_SYNC"});
    let post = |path: &'static str| {
        let (http, body) = (http.clone(), body.clone());
        async move {
            let r = http
                .post(format!("http://{api}{path}"))
                .header("content-type", "application/json")
                .body(body.to_string())
                .send()
                .await
                .unwrap();
            let status = r.status().as_u16();
            let json: serde_json::Value =
                serde_json::from_slice(&r.bytes().await.unwrap()).unwrap();
            (status, json)
        }
    };
    let (status, simulated) = post("/cosmos/tx/v1beta1/simulate").await;
    assert_eq!(status, 200, "{simulated}");
    assert!(
        number(&simulated["gas_info"]["gas_used"]) > 0,
        "{simulated}"
    );
    let (status, sent) = post("/cosmos/tx/v1beta1/txs").await;
    assert_eq!(
        (status, &sent["tx_response"]["code"]),
        (200, &serde_json::json!(0)),
        "{sent}"
    );
    let hash = sent["tx_response"]["txhash"].as_str().unwrap().to_string();
    let found = crate::inference::eventually("the REST tx by hash", || async {
        let (status, found) = get(format!("/cosmos/tx/v1beta1/txs/{hash}")).await;
        (status == 200).then_some(found)
    })
    .await;
    assert_eq!(found["tx_response"]["code"], 0, "{found}");
    assert!(number(&found["tx_response"]["height"]) > 0, "{found}");
    // The tx itself, its message decoded, in `tx` and again in `tx_response.tx`.
    for tx in [&found["tx"], &found["tx_response"]["tx"]] {
        assert_eq!(tx["body"]["memo"], "rest", "{found}");
        let message = &tx["body"]["messages"][0];
        assert!(
            message["@type"].as_str().unwrap().ends_with(".MsgSend"),
            "{found}"
        );
        assert_eq!(message["to_address"], recipient, "{found}");
        assert_eq!(
            tx["auth_info"]["signer_infos"][0]["sequence"],
            signer.sequence.to_string(),
            "{found}"
        );
    }
    // The recipient's balance before that tx, read at the height before its block: over
    // REST with the Cosmos height header, and with `gonkad query --height`.
    let before = number(&found["tx_response"]["height"]) - 1;
    let past = http
        .get(format!(
            "http://{api}/gonka/bank/v1/balance?address={recipient}&denom=ngnk"
        ))
        .header("x-cosmos-block-height", before.to_string())
        .send()
        .await
        .unwrap();
    let past: serde_json::Value = serde_json::from_slice(&past.bytes().await.unwrap()).unwrap();
    let latest = net.clients[0].balance(recipient, "ngnk").await.unwrap();
    assert_eq!(number(&past["balance"]["amount"]), latest - 1, "{past}");
    let cli = crate::support::gonkad_json(&[
        "--node",
        &net.node(0).rpc_url,
        "--output",
        "json",
        "query",
        "--height",
        &before.to_string(),
        "bank",
        "balance",
        recipient,
    ]);
    assert_eq!(number(&cli["amount"]), latest - 1, "{cli}");
    let (status, refused) = {
        let r = http
            .get(format!(
                "http://{api}/gonka/bank/v1/balances?address={recipient}"
            ))
            .header("x-cosmos-block-height", before.to_string())
            .send()
            .await
            .unwrap();
        (r.status().as_u16(), r.text().await.unwrap())
    };
    assert!(
        status >= 400 && refused.contains("latest height only"),
        "{status} {refused}"
    );

    // Txs by event (`GetTxsEvent`): the sender's, newest first.
    let (status, by_sender) = get(format!(
        "/cosmos/tx/v1beta1/txs?query=message.sender%3D%27{alice}%27&order_by=ORDER_BY_DESC&limit=1"
    ))
    .await;
    assert_eq!(status, 200, "{by_sender}");
    assert_eq!(
        by_sender["tx_responses"][0]["txhash"],
        hash.as_str(),
        "{by_sender}"
    );
    assert!(number(&by_sender["total"]) >= 2, "{by_sender}");
    let (status, bad) = get("/cosmos/tx/v1beta1/txs?query=%3D%3D".into()).await;
    assert_eq!(
        (status, &bad["code"]),
        (400, &serde_json::json!(3)),
        "{bad}"
    );

    // Blocks and node info: the tx's block holds it, and names the chain.
    let height = found["tx_response"]["height"].as_str().unwrap().to_string();
    let (status, block) = get(format!("/cosmos/base/tendermint/v1beta1/blocks/{height}")).await;
    assert_eq!(status, 200, "{block}");
    assert_eq!(
        block["block"]["header"]["chain_id"],
        crate::support::CHAIN_ID,
        "{block}"
    );
    assert_eq!(
        block["block"]["header"]["height"],
        height.as_str(),
        "{block}"
    );
    assert!(
        block["block"]["data"]["txs"]
            .as_array()
            .unwrap()
            .contains(&serde_json::json!(base64::Engine::encode(
                &base64::engine::general_purpose::STANDARD,
                &tx
            ))),
        "{block}"
    );
    let (_, latest) = get("/cosmos/base/tendermint/v1beta1/blocks/latest".into()).await;
    assert!(
        number(&latest["block"]["header"]["height"]) >= height.parse::<u128>().unwrap(),
        "{latest}"
    );
    let (_, info) = get("/cosmos/base/tendermint/v1beta1/node_info".into()).await;
    assert_eq!(
        info["default_node_info"]["network"],
        crate::support::CHAIN_ID,
        "{info}"
    );

    // The chain's own module queries, as `gonkad query --output json` prints them.
    let (status, balance) = get(format!("/gonka/bank/v1/balance?address={alice}&denom=ngnk")).await;
    assert_eq!(status, 200, "{balance}");
    let chain = net.clients[0].balance(&alice, "ngnk").await.unwrap();
    assert!(number(&balance["balance"]["amount"]) >= chain, "{balance}");
    let (status, page) = get(format!(
        "/gonka/bank/v1/balances?address={recipient}&pagination.limit=1"
    ))
    .await;
    assert_eq!(status, 200, "{page}");
    assert_eq!(page["balances"].as_array().map(Vec::len), Some(1), "{page}");
    let (status, none) = get("/gonka/bank/v1/nothing".into()).await;
    assert_eq!(status, 501, "{none}");

    // Errors are gRPC statuses with the gateway's HTTP status.
    let (status, missing) =
        get("/cosmos/auth/v1beta1/accounts/gonka1qqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqrk8pql".into())
            .await;
    assert_eq!(
        (status, &missing["code"]),
        (404, &serde_json::json!(5)),
        "{missing}"
    );
    let (status, unknown) = get("/cosmos/staking/v1beta1/validators".into()).await;
    assert_eq!(status, 501, "{unknown}");

    // A body over the 4 MiB bound is refused before it is read whole.
    let huge = vec![b' '; 5 << 20];
    let r = http
        .post(format!("http://{api}/cosmos/tx/v1beta1/simulate"))
        .body(huge)
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    let refused: serde_json::Value = serde_json::from_slice(&r.bytes().await.unwrap()).unwrap();
    assert_eq!(status, 400, "{refused}");
    assert!(
        refused["message"].as_str().unwrap().contains("at most"),
        "{refused}"
    );
}
