//! Writes the seed corpus: real, valid inputs of every target, built from the fixture's keys
//! and chain (signed txs, each message type, every query path, signed HTTP requests, store
//! proofs). `seeds [DIR]` (default `corpus/` beside Cargo.toml) writes `DIR/<target>/seed-*`
//! and leaves other files (saved finds) alone. Deterministic except for the ECDSA signatures
//! the client makes (RFC 6979: deterministic too), so re-running it rewrites the same files.

use std::path::{Path, PathBuf};

use gonka_client::tx::{
    msg_register_node, msg_register_transfer_agent, msg_remove_node, msg_send, msg_stake,
    msg_unjail, msg_unstake, NodeSpec,
};
use gonka_client::Any as ClientAny;
use gonka_fuzz::fixture::{self, key, CHAIN_ID, NOW_SECS};
use gonka_fuzz::targets::{http, msgs, query};
use gonka_proto::query::{self as q, Query};
use prost::Message;

struct Writer {
    dir: PathBuf,
    count: usize,
}

impl Writer {
    fn new(root: &Path, target: &str) -> Writer {
        let dir = root.join(target);
        std::fs::create_dir_all(&dir).expect("creating the corpus directory");
        for entry in std::fs::read_dir(&dir).expect("reading the corpus directory") {
            let path = entry.expect("an entry").path();
            let seed = path
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("seed-"));
            if seed {
                std::fs::remove_file(path).expect("removing an old seed");
            }
        }
        Writer { dir, count: 0 }
    }

    fn put(&mut self, name: &str, data: &[u8]) {
        let file = self.dir.join(format!("seed-{:03}-{name}", self.count));
        std::fs::write(&file, data).expect("writing a seed");
        self.count += 1;
    }
}

fn addr(label: &str) -> String {
    key(label).address().to_string()
}

fn node_spec(host: &str) -> NodeSpec {
    let node_key = k256::ecdsa::SigningKey::from_slice(&[7; 32]).expect("a node key");
    NodeSpec {
        node_id: "node-1".into(),
        models: vec![http::MODEL.into()],
        vram_mib: 24_000,
        bandwidth_mbps: 1_000,
        max_concurrency: 4,
        endpoint: "http://127.0.0.1:9000".into(),
        pubkey: node_key
            .verifying_key()
            .to_encoded_point(true)
            .as_bytes()
            .to_vec(),
        key_proof: gonka_client::node_key_proof(&node_key, CHAIN_ID, host, "node-1"),
    }
}

/// Real messages of several modules, as clients build them.
fn messages() -> Vec<(&'static str, ClientAny)> {
    let (alice, bob) = (addr("alice"), addr("bob"));
    let cosmos_send = cosmrs::proto::cosmos::bank::v1beta1::MsgSend {
        from_address: bob.clone(),
        to_address: alice.clone(),
        amount: vec![cosmrs::proto::cosmos::base::v1beta1::Coin {
            denom: "ngnk".into(),
            amount: "5".into(),
        }],
    };
    vec![
        ("send", msg_send(&alice, &bob, 10)),
        (
            "cosmos-send",
            ClientAny {
                type_url: "/cosmos.bank.v1beta1.MsgSend".into(),
                value: cosmos_send.encode_to_vec(),
            },
        ),
        (
            "stake",
            msg_stake(&alice, 100_000_000_000, "alice", Some([3; 32])),
        ),
        ("unstake", msg_unstake(&alice, 10)),
        ("unjail", msg_unjail(&alice)),
        (
            "register-node",
            msg_register_node(&alice, &node_spec(&alice)),
        ),
        ("remove-node", msg_remove_node(&alice, "node-1")),
        (
            "register-ta",
            msg_register_transfer_agent(
                &bob,
                "http://127.0.0.1:9100",
                &key("bob").public_key().to_bytes(),
            ),
        ),
    ]
}

fn tx_check(root: &Path) {
    let mut w = Writer::new(root, "tx_check");
    let (alice, bob) = (addr("alice"), addr("bob"));
    // alice's sequence 0 went into the fixture's first block.
    w.put(
        "send",
        &fixture::signed("alice", 1, vec![msg_send(&alice, &bob, 7)], ""),
    );
    w.put(
        "send-memo",
        &fixture::signed("bob", 0, vec![msg_send(&bob, &alice, 7)], "a memo"),
    );
    let two = vec![
        msg_send(&alice, &bob, 1),
        msg_send(&alice, &addr("carol"), 2),
    ];
    w.put("two-sends", &fixture::signed("alice", 1, two, ""));
    for (name, msg) in messages() {
        let signer = if name == "cosmos-send" || name == "register-ta" {
            "bob"
        } else {
            "alice"
        };
        let sequence = if signer == "alice" { 1 } else { 0 };
        w.put(name, &fixture::signed(signer, sequence, vec![msg], ""));
    }
    w.put(
        "stale-sequence",
        &fixture::signed("alice", 0, vec![msg_send(&alice, &bob, 7)], ""),
    );
    w.put(
        "wrong-signer",
        &fixture::signed("carol", 0, vec![msg_send(&alice, &bob, 7)], ""),
    );
    w.put("empty", b"");
    w.put("garbage", b"\x0a\xffnot a tx");
    // What CheckTx says of each seed on a fresh fixture chain (the signed ones should pass).
    for entry in std::fs::read_dir(&w.dir).expect("the seeds") {
        let path = entry.expect("an entry").path();
        let chain = fixture::chain();
        let response = chain.check_tx(std::fs::read(&path).expect("a seed"));
        println!(
            "  {}: CheckTx code {} {}",
            path.file_name().unwrap().to_string_lossy(),
            response.code,
            response.log
        );
    }
}

fn msgs(root: &Path) {
    let mut w = Writer::new(root, "msgs");
    let urls = msgs::type_urls();
    let index = |url: &str| {
        urls.iter()
            .position(|u| *u == url)
            .expect("a known type URL") as u8
    };
    for (i, _) in urls.iter().enumerate() {
        w.put("empty", &[i as u8]);
    }
    for (name, msg) in messages() {
        let mut data = vec![index(&msg.type_url)];
        data.extend(&msg.value);
        w.put(name, &data);
    }
}

fn query(root: &Path) {
    let mut w = Writer::new(root, "query");
    let chain = fixture::chain();
    let paths = query::paths();
    let pick = |path: &str| paths.iter().position(|p| *p == path).expect("a known path") as u8;
    for (i, path) in paths.iter().enumerate() {
        let name = path.trim_start_matches('/').replace(['/', '.'], "_");
        w.put(&name, &[0, i as u8]);
    }
    let alice = addr("alice");
    let balance = gonka_proto::bank::QueryBalanceRequest {
        address: alice.clone(),
        denom: "ngnk".into(),
    };
    w.put(
        "balance",
        &[
            [0, pick(q::bank::Balance::PATH)].as_slice(),
            &balance.encode_to_vec(),
        ]
        .concat(),
    );
    w.put(
        "balance-at-1",
        &[
            [2, pick(q::bank::Balance::PATH)].as_slice(),
            &balance.encode_to_vec(),
        ]
        .concat(),
    );
    let account = gonka_proto::auth::QueryAccountRequest {
        address: alice.clone(),
    };
    w.put(
        "account",
        &[
            [0, pick(q::auth::Account::PATH)].as_slice(),
            &account.encode_to_vec(),
        ]
        .concat(),
    );
    let cosmos_balance = cosmrs::proto::cosmos::bank::v1beta1::QueryBalanceRequest {
        address: alice.clone(),
        denom: "ngnk".into(),
    };
    w.put(
        "cosmos-balance",
        &[
            [0, pick(q::cosmos::BankBalance::PATH)].as_slice(),
            &cosmos_balance.encode_to_vec(),
        ]
        .concat(),
    );
    let tx = fixture::signed("alice", 1, vec![msg_send(&alice, &addr("bob"), 7)], "");
    let simulate = cosmrs::proto::cosmos::tx::v1beta1::SimulateRequest {
        tx_bytes: tx,
        ..Default::default()
    };
    w.put(
        "simulate",
        &[
            [0, pick(q::cosmos::Simulate::PATH)].as_slice(),
            &simulate.encode_to_vec(),
        ]
        .concat(),
    );
    // Raw store keys, proved and not, at each height; and a key that is absent.
    let keys = chain.app().store().prefix(b"").expect("the store reads");
    for (n, (k, _)) in keys
        .iter()
        .step_by(keys.len().div_ceil(6).max(1))
        .enumerate()
    {
        for flags in [0u8, 1, 3, 5] {
            w.put(
                &format!("store-key-{n}-{flags}"),
                &[[flags, 0].as_slice(), k].concat(),
            );
        }
    }
    w.put(
        "store-key-absent",
        &[[1u8, 0].as_slice(), b"absent/key"].concat(),
    );
    w.put(
        "unknown-path",
        &[[0u8, 255].as_slice(), b"/nope/nothing\0data"].concat(),
    );
}

fn headers_and_body(headers: &[(&str, String)], body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    for (name, value) in headers {
        out.extend(format!("{name}: {value}\n").as_bytes());
    }
    out.push(b'\n');
    out.extend(body);
    out
}

fn http(root: &Path) {
    let mut w = Writer::new(root, "http");
    let body = format!(
        r#"{{"model":"{}","messages":[{{"role":"user","content":"hello"}}],"max_tokens":16,"stream":false}}"#,
        http::MODEL
    );
    let terms = gonka_client::request::RequestTerms {
        chain_id: CHAIN_ID.into(),
        body_hash: [0; 32],
        timestamp: NOW_SECS,
        nonce: "nonce-1".into(),
        commission: 3,
        transfer_agent: addr("bob"),
        model: http::MODEL.into(),
        max_price_per_token: 10,
        max_completion_tokens: 16,
        max_prompt_tokens: gonka_proto::signing::prompt_token_bound(body.as_bytes()),
    };
    let signed = gonka_client::request::sign_request(key("alice"), body.as_bytes(), terms.clone())
        .expect("signing a request");
    w.put("signed", &headers_and_body(&signed, body.as_bytes()));
    // As the TA forwards it to the ML node: the request's headers and its own caller headers.
    let mut hashed = terms.clone();
    hashed.body_hash = gonka_client::request::body_hash(body.as_bytes());
    let call = gonka_client::node_call::sign_node_call(
        key("bob"),
        http::NODE_ID,
        Some(hashed.hash()),
        body.as_bytes(),
        NOW_SECS,
    )
    .expect("signing a node call");
    w.put(
        "forwarded",
        &headers_and_body(&[signed.clone(), call].concat(), body.as_bytes()),
    );
    // The host's own unsigned call (a validation re-execution).
    let host_call = gonka_client::node_call::sign_node_call(
        key("alice"),
        http::NODE_ID,
        None,
        body.as_bytes(),
        NOW_SECS,
    )
    .expect("signing a node call");
    w.put("host-call", &headers_and_body(&host_call, body.as_bytes()));
    // A body that disagrees with its signed terms, and one with no max_tokens.
    let other = body.replace("\"max_tokens\":16", "\"max_tokens\":17");
    let signed_other =
        gonka_client::request::sign_request(key("alice"), other.as_bytes(), terms.clone())
            .expect("signing");
    w.put(
        "signed-mismatch",
        &headers_and_body(&signed_other, other.as_bytes()),
    );
    let zero = gonka_client::request::RequestTerms {
        max_completion_tokens: 0,
        ..terms.clone()
    };
    let plain = format!(
        r#"{{"model":"{}","messages":[{{"role":"system","content":"be brief"}},{{"role":"user","content":[{{"type":"text","text":"hi"}}]}}]}}"#,
        http::MODEL
    );
    let signed_zero =
        gonka_client::request::sign_request(key("alice"), plain.as_bytes(), zero).expect("signing");
    w.put(
        "signed-zero-budget",
        &headers_and_body(&signed_zero, plain.as_bytes()),
    );
    w.put("unsigned", plain.as_bytes());
    // A payload fetch.
    let fetch =
        gonka_client::payload_auth::sign_payload_request(key("bob"), http::INFERENCE_ID, NOW_SECS)
            .expect("signing a payload fetch");
    w.put("payload-fetch", &headers_and_body(&fetch, b""));
    // An event stream as an ML node sends it.
    let sse = concat!(
        ": keep-alive\n\n",
        "data: {\"choices\":[{\"delta\":{\"content\":\"Hel\"}}]}\n\n",
        "data: {\"choices\":[{\"delta\":{\"content\":\"lo\"}}]}\r\n\r\n",
        "event: x\ndata: {\"choices\":[],\n",
        "data: \"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2,\"total_tokens\":5}}\n\n",
        "data: [DONE]\n\n",
    );
    w.put("sse", sse.as_bytes());
    // What the signed-request check says of each seed (the signed ones should pass).
    for entry in std::fs::read_dir(&w.dir).expect("the seeds") {
        let path = entry.expect("an entry").path();
        let data = std::fs::read(&path).expect("a seed");
        let (headers, body) = http::parse(&data);
        let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
        let verdict =
            gonka_client::request::verify_request(&header, body, NOW_SECS, http::MAX_SKEW_SECS)
                .map(|s| gonka_client::request::body_agrees(body, &s.terms).map_err(|e| e.code));
        println!(
            "  {}: {:?}",
            path.file_name().unwrap().to_string_lossy(),
            verdict.map_err(|e| e.code)
        );
    }
}

fn proof(root: &Path) {
    let mut w = Writer::new(root, "proof");
    let chain = fixture::chain();
    let store = chain.app().store();
    let (version, _) = store.latest_commit().expect("readable").expect("committed");
    let root_hash = store.root_at(version).expect("a root");
    let keys = store.prefix(b"").expect("the store reads");
    let mut put = |name: &str, key: &[u8], value: &[u8], proof: &ics23::CommitmentProof| {
        let mut data = root_hash.to_vec();
        data.push(key.len() as u8);
        data.extend(key);
        data.push(value.len() as u8);
        data.extend(value);
        data.extend(proof.encode_to_vec());
        w.put(name, &data);
    };
    for (n, (k, _)) in keys
        .iter()
        .filter(|(k, v)| k.len() < 256 && v.len() < 256)
        .step_by(4)
        .take(6)
        .enumerate()
    {
        let (value, proof) = store.get_with_proof(k, version).expect("a proof");
        put(
            &format!("member-{n}"),
            k,
            &value.unwrap_or_default(),
            &proof,
        );
    }
    let (_, absent) = store
        .get_with_proof(b"absent/key", version)
        .expect("a proof");
    put("absent", b"absent/key", b"", &absent);
    for entry in std::fs::read_dir(&w.dir).expect("the seeds") {
        let path = entry.expect("an entry").path();
        let data = std::fs::read(&path).expect("a seed");
        let key = &data[33..33 + usize::from(data[32])];
        let rest = &data[33 + key.len()..];
        let value = &rest[1..1 + usize::from(rest[0])];
        let proof = ics23::CommitmentProof::decode(&rest[1 + value.len()..]).expect("a proof");
        println!(
            "  {}: member {} absent {}",
            path.file_name().unwrap().to_string_lossy(),
            gonka_store::verify_membership(&root_hash, key, value, &proof),
            gonka_store::verify_non_membership(&root_hash, key, &proof)
        );
    }
}

fn main() {
    let root = std::env::args()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus"));
    tx_check(&root);
    msgs(&root);
    query(&root);
    http(&root);
    proof(&root);
    for target in gonka_fuzz::TARGETS {
        let n = std::fs::read_dir(root.join(target.0))
            .map(|d| d.count())
            .unwrap_or(0);
        println!(
            "{}: {n} files in {}",
            target.0,
            root.join(target.0).display()
        );
    }
}
