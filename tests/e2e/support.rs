//! Helpers of the end-to-end tests: a 4-validator localnet of real `gonkad` + `cometbft`
//! processes on loopback ports (plus any full nodes a test adds), typed RPC calls with bounded waits, an expected-balance
//! ledger, the `gonkad` CLI as a subprocess and a raw HTTP GET.
//!
//! Every wait is bounded and every failure names the node and its log files; when a test
//! panics, [`Net`]'s destructor prints the tail of every node's logs and keeps the network's
//! directory on disk for inspection.

use std::collections::BTreeMap;
use std::future::Future;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Command, Output};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use gonka_app::genesis::{app_state, GenesisAccount};
use gonka_client::keys::well_known_mnemonic;
use gonka_client::{Client, GasFee, GasPrice, Included, Key, SignerData};
use gonka_localnet::{find_cometbft, find_free_base_port, Localnet, LocalnetConfig, NodeInfo};
use tendermint::Hash;
use tendermint_rpc::Client as _;

/// Chain id of every test network.
pub const CHAIN_ID: &str = "gonka-e2e";
/// `auth` `min_gas_price` of every test network, in ngnk per gas unit.
pub const MIN_GAS_PRICE: &str = "0.005";
/// Gas limit of the txs the tests sign themselves (sends and stake messages use well under).
pub const TX_GAS: u64 = 200_000;
/// ceil(TX_GAS × MIN_GAS_PRICE): the fee of every tx the tests sign themselves ([`tx_fee`]
/// checks it). Txs of `gonkad tx` and of the sidecars estimate their gas and pay for that.
pub const MIN_FEE: u128 = 1_000;

/// The test networks' minimum gas price.
pub fn min_gas_price() -> GasPrice {
    GasPrice::parse(MIN_GAS_PRICE).unwrap()
}

/// Gas limit and fee of a tx the tests sign: [`TX_GAS`] at the minimum gas price.
pub fn tx_fee() -> GasFee {
    let fee = GasFee::at_price(TX_GAS, &min_gas_price()).unwrap();
    assert_eq!(
        fee.amount, MIN_FEE,
        "MIN_FEE must be ceil(TX_GAS × MIN_GAS_PRICE)"
    );
    fee
}
/// Genesis balance of every funded account: 1,000,000 GNK.
pub const START_BALANCE: u128 = 1_000_000 * 1_000_000_000;
/// Validators per network.
pub const VALIDATORS: usize = 4;
/// Block interval: short, so the suite is fast.
const TIMEOUT_COMMIT: &str = "300ms";
/// Log lines printed per file when a test fails.
const TAIL_LINES: usize = 25;

/// Adds every genesis validator of `keys` to `config` as a stake participant: its operator
/// account (`validator{i}`, funded with 1,000 GNK for fees) bonds `bond` ngnk with the node's
/// consensus key, as `gonkad localnet` does.
pub fn stake_validators(
    config: &mut gonka_app::genesis::GenesisConfig,
    keys: &[gonka_localnet::GenesisValidatorKey],
    bond: u128,
) {
    for key in keys {
        let label = format!("validator{}", key.index);
        let operator = addr(&label);
        // The BLS key its validator sidecar derives: the genesis signers.
        config.bls_keys.push(gonka_proto::bls::BlsKey {
            address: operator.clone(),
            pubkey: gonka_client::bls::account_bls_key(crate::support::key(&label))
                .public_key()
                .to_bytes()
                .to_vec(),
            registered_height: 0,
        });
        config.accounts.push(GenesisAccount {
            address: operator.clone(),
            ngnk: 1_000 * 1_000_000_000,
        });
        config
            .validators
            .push(gonka_app::genesis::GenesisValidator {
                operator,
                moniker: format!("node{}", key.index),
                consensus_pubkey: key.ed25519_pub_key,
                stake_ngnk: bond,
            });
    }
}

/// Runs one end-to-end test body on a multi-thread tokio runtime.
///
/// Tests hold a process-wide lock while they run: one 4-validator network is 8 processes, and
/// two at once on a small machine slow block production enough to make timing assertions
/// meaningless.
pub fn run<F: Future<Output = ()>>(body: F) {
    static ONE_NETWORK_AT_A_TIME: Mutex<()> = Mutex::new(());
    // A previous test's panic poisons the lock; the network it guarded is gone by then.
    let _guard = ONE_NETWORK_AT_A_TIME
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("building the tokio runtime");
    runtime.block_on(body);
}

/// The well-known key of `label` (see `gonka_client::keys::well_known_mnemonic`), derived once
/// per test binary.
pub fn key(label: &str) -> &'static Key {
    static KEYS: OnceLock<Mutex<BTreeMap<String, &'static Key>>> = OnceLock::new();
    let mut keys = KEYS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    keys.entry(label.to_string()).or_insert_with(|| {
        let key = Key::from_mnemonic(&well_known_mnemonic(label))
            .unwrap_or_else(|e| panic!("deriving the well-known key {label:?}: {e:#}"));
        Box::leak(Box::new(key))
    })
}

/// Address of the well-known key of `label`.
pub fn addr(label: &str) -> String {
    key(label).address().to_string()
}

/// Expected balances: genesis funding, then every successful send applied by hand.
#[derive(Debug, Clone, Default)]
pub struct Ledger {
    balances: BTreeMap<String, u128>,
}

impl Ledger {
    /// Every account in `labels` holds [`START_BALANCE`].
    pub fn genesis(labels: &[&str]) -> Ledger {
        Ledger {
            balances: labels.iter().map(|l| (addr(l), START_BALANCE)).collect(),
        }
    }

    /// A successful `MsgSend` of `amount` paying [`MIN_FEE`].
    pub fn send(&mut self, from: &str, to: &str, amount: u128) {
        let balance = self.balances.entry(from.to_string()).or_default();
        *balance = balance
            .checked_sub(amount + MIN_FEE)
            .unwrap_or_else(|| panic!("test bug: {from} cannot afford {amount} + fee"));
        *self.balances.entry(to.to_string()).or_default() += amount;
    }

    /// Expected balance of `address` (zero if it never received anything).
    pub fn balance(&self, address: &str) -> u128 {
        self.balances.get(address).copied().unwrap_or_default()
    }

    /// Every address the ledger knows, with its expected balance.
    pub fn iter(&self) -> impl Iterator<Item = (&str, u128)> {
        self.balances.iter().map(|(a, b)| (a.as_str(), *b))
    }
}

/// A running 4-validator network with an RPC client per node. Dropping it stops every process;
/// if the test is panicking, the logs' tails are printed and the directory is kept.
pub struct Net {
    // Field order is drop order: processes stop before the directory is deleted.
    pub net: Localnet,
    pub clients: Vec<Client>,
    dir: Option<tempfile::TempDir>,
}

impl Net {
    /// Creates and starts a network whose genesis funds each of `funded` (well-known key
    /// labels) with [`START_BALANCE`], and waits for its first blocks.
    pub async fn start(label: &str, funded: &[&str]) -> Net {
        let accounts: Vec<GenesisAccount> = funded
            .iter()
            .map(|l| GenesisAccount {
                address: addr(l),
                ngnk: START_BALANCE,
            })
            .collect();
        Net::start_with(label, VALIDATORS, move |config| {
            config.app_state = app_state(&accounts, min_gas_price());
        })
        .await
    }

    /// Creates and starts a [`VALIDATORS`]-validator network whose configuration `configure`
    /// completes (typically its genesis `app_state` or `app_state_for_validators`), with free
    /// ports for `reserve_nodes` nodes (more than [`VALIDATORS`] if the test adds full nodes),
    /// and waits for its first blocks.
    pub async fn start_with(
        label: &str,
        reserve_nodes: usize,
        configure: impl Fn(&mut LocalnetConfig),
    ) -> Net {
        let (net, dir) =
            tokio::task::block_in_place(|| start_localnet(label, reserve_nodes, &configure));
        let clients = net
            .nodes()
            .iter()
            .map(|n| Client::new(&n.rpc_url).unwrap_or_else(|e| panic!("{e:#}")))
            .collect();
        let net = Net {
            net,
            clients,
            dir: Some(dir),
        };
        // Queries need a committed block; height 2 also proves the validators reach consensus.
        net.wait_all_heights(2, Duration::from_secs(60)).await;
        net
    }

    /// Node `i`'s addresses and paths.
    pub fn node(&self, i: usize) -> &NodeInfo {
        &self.net.nodes()[i]
    }

    /// Where to look when node `i` misbehaves.
    pub fn logs_of(&self, i: usize) -> String {
        let n = self.node(i);
        format!(
            "node {i} ({}); logs: {} and {}",
            n.rpc_url,
            n.app_log.display(),
            n.cometbft_log.display()
        )
    }

    /// SIGKILLs node `i`'s app and CometBFT node.
    pub fn kill(&mut self, i: usize) {
        tokio::task::block_in_place(|| self.net.kill_node(i))
            .unwrap_or_else(|e| panic!("killing {}: {e:#}", self.logs_of(i)));
    }

    /// Starts node `i` (again, or for the first time if it was added by
    /// [`Net::add_full_node`]) and waits for its RPC.
    pub fn restart(&mut self, i: usize) {
        tokio::task::block_in_place(|| self.net.start_node(i))
            .unwrap_or_else(|e| panic!("restarting {}: {e:#}", self.logs_of(i)));
    }

    /// Adds a full node (`Localnet::add_full_node`) and an RPC client for it, and returns its
    /// index. Nothing is started: see [`Net::restart`].
    pub fn add_full_node(&mut self) -> usize {
        let i = tokio::task::block_in_place(|| self.net.add_full_node()).unwrap_or_else(|e| {
            panic!("adding a full node to {}: {e:#}", self.net.dir().display())
        });
        let url = &self.net.nodes()[i].rpc_url;
        self.clients
            .push(Client::new(url).unwrap_or_else(|e| panic!("{e:#}")));
        i
    }

    /// Node `i`'s latest block height.
    pub async fn height(&self, i: usize) -> u64 {
        match self.clients[i].status().await {
            Ok(s) => s.sync_info.latest_block_height.value(),
            Err(e) => panic!("status of {}: {e:#}", self.logs_of(i)),
        }
    }

    /// The current epoch's number, as node `i` reads it.
    pub async fn current_epoch(&self, i: usize) -> u64 {
        self.clients[i]
            .query::<gonka_proto::query::epochs::Current>(
                &gonka_proto::epochs::QueryCurrentRequest {},
            )
            .await
            .unwrap_or_else(|e| panic!("the current epoch of {}: {e:#}", self.logs_of(i)))
            .epoch
            .expect("a current epoch")
            .number
    }

    /// Waits until node `i`'s block store reaches `min` and returns its height. A node whose
    /// store holds block `h + 1` has committed block `h` in its app.
    pub async fn wait_for_height(&self, i: usize, min: u64, timeout: Duration) -> u64 {
        let deadline = Instant::now() + timeout;
        loop {
            let last = match self.clients[i].status().await {
                Ok(s) if s.sync_info.latest_block_height.value() >= min => {
                    return s.sync_info.latest_block_height.value()
                }
                Ok(s) => format!("height {}", s.sync_info.latest_block_height),
                Err(e) => format!("error: {e:#}"),
            };
            if Instant::now() >= deadline {
                panic!(
                    "{} did not reach height {min} within {timeout:?} (last: {last})",
                    self.logs_of(i)
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits until every node reaches `min`.
    pub async fn wait_all_heights(&self, min: u64, timeout: Duration) {
        for i in 0..self.clients.len() {
            self.wait_for_height(i, min, timeout).await;
        }
    }

    /// Header of block `height` as node `i` stores it: `(app_hash, block hash)`, both hex.
    /// `app_hash` of block `h` is the app's state root after block `h - 1`.
    pub async fn block_hashes(&self, i: usize, height: u64) -> (String, String) {
        let block = self.clients[i]
            .http()
            .block(
                tendermint::block::Height::try_from(height)
                    .unwrap_or_else(|e| panic!("height {height}: {e}")),
            )
            .await
            .unwrap_or_else(|e| panic!("block {height} from {}: {e:#}", self.logs_of(i)));
        (
            hex::encode_upper(block.block.header.app_hash.as_bytes()),
            block.block_id.hash.to_string(),
        )
    }

    /// What node `i`'s app itself reports through ABCI `Info`: last committed height and
    /// app hash (hex).
    ///
    /// Read with a plain GET of `/abci_info`: tendermint-rpc 0.40.4 deserializes
    /// `last_block_app_hash` without base64-decoding it (it returns the base64 text's bytes).
    pub async fn app_info(&self, i: usize) -> (u64, String) {
        let (status, body) = http_get(self.node(i).rpc_addr, "/abci_info");
        let json: serde_json::Value = serde_json::from_str(&body)
            .unwrap_or_else(|e| panic!("abci_info of {}: not JSON ({e}): {body}", self.logs_of(i)));
        let info = &json["result"]["response"];
        let height = info["last_block_height"]
            .as_str()
            .and_then(|h| h.parse().ok());
        let app_hash = info["last_block_app_hash"].as_str().map(base64_decode);
        match (status, height, app_hash) {
            (200, Some(height), Some(app_hash)) => (height, hex::encode_upper(app_hash)),
            _ => panic!(
                "abci_info of {}: unexpected answer {status}: {body}",
                self.logs_of(i)
            ),
        }
    }

    /// Asserts that every node in `nodes` stores the same block `height` (same block hash and
    /// header app hash). Returns that app hash.
    pub async fn assert_same_block(&self, nodes: &[usize], height: u64) -> String {
        let (app_hash, block_hash) = self.block_hashes(nodes[0], height).await;
        for &i in &nodes[1..] {
            let (other_app, other_block) = self.block_hashes(i, height).await;
            assert_eq!(
                (&other_app, &other_block),
                (&app_hash, &block_hash),
                "block {height}: {} has (app hash, block hash) ({other_app}, {other_block}) but {} \
                 has ({app_hash}, {block_hash})",
                self.logs_of(i),
                self.logs_of(nodes[0])
            );
        }
        app_hash
    }

    /// Asserts that the app behind node `i` (ABCI `Info`) holds the state root that node
    /// `reference` agreed on: the app hash of its last committed height `h` equals the header
    /// app hash of block `h + 1` on `reference`. Returns `h`.
    pub async fn assert_app_agrees(&self, i: usize, reference: usize) -> u64 {
        let (height, app_hash) = self.app_info(i).await;
        self.wait_for_height(reference, height + 1, Duration::from_secs(30))
            .await;
        let (agreed, _) = self.block_hashes(reference, height + 1).await;
        assert_eq!(
            app_hash,
            agreed,
            "the app of {} reports app hash {app_hash} after height {height}, but block {} on {} \
             records {agreed}",
            self.logs_of(i),
            height + 1,
            self.logs_of(reference)
        );
        height
    }

    /// Balance of `address` in ngnk through node `i`'s `abci_query /bank/balance`.
    pub async fn balance(&self, i: usize, address: &str) -> u128 {
        self.clients[i]
            .balance(address, gonka_client::DENOM)
            .await
            .unwrap_or_else(|e| panic!("balance of {address} on {}: {e:#}", self.logs_of(i)))
    }

    /// Asserts that node `i` reports exactly the balances of `ledger`.
    pub async fn assert_balances(&self, i: usize, ledger: &Ledger) {
        for (address, expected) in ledger.iter() {
            let actual = self.balance(i, address).await;
            assert_eq!(
                actual,
                expected,
                "balance of {address} on {}: expected {expected} ngnk, node reports {actual}",
                self.logs_of(i)
            );
        }
    }

    /// Account number and next sequence of `label`'s account, read through node `i`.
    pub async fn signer(&self, i: usize, label: &str) -> SignerData {
        self.clients[i]
            .signer_data(key(label).address(), Some(CHAIN_ID))
            .await
            .unwrap_or_else(|e| panic!("signer data of {label} on {}: {e:#}", self.logs_of(i)))
    }

    /// Waits until node `i` has the tx with `hash` in a block.
    pub async fn wait_included(&self, i: usize, hash: Hash) -> Included {
        self.clients[i]
            .wait_for_tx(hash, Duration::from_secs(60))
            .await
            .unwrap_or_else(|e| panic!("waiting for tx {hash} on {}: {e:#}", self.logs_of(i)))
    }

    /// The ngnk of fees `address` paid in the blocks after `after`, read through node `i`:
    /// the `fee` of every tx event whose `fee_payer` it is (`tx_search`), so a sidecar's txs,
    /// whose gas each is estimated, are counted at what they paid.
    pub async fn fees_paid(&self, i: usize, address: &str, after: u64) -> u128 {
        use tendermint_rpc::query::Query;
        let query = Query::eq("tx.fee_payer", address).and_gt("tx.height", after);
        let mut total = 0;
        for page in 1.. {
            let found = self.clients[i]
                .http()
                .tx_search(
                    query.clone(),
                    false,
                    page,
                    100,
                    tendermint_rpc::Order::Ascending,
                )
                .await
                .unwrap_or_else(|e| panic!("tx_search on {}: {e:#}", self.logs_of(i)));
            for tx in &found.txs {
                for event in tx.tx_result.events.iter().filter(|e| e.kind == "tx") {
                    let attr = |key: &str| {
                        event
                            .attributes
                            .iter()
                            .find(|a| a.key_str().ok() == Some(key))
                            .and_then(|a| a.value_str().ok().map(str::to_string))
                    };
                    if attr("fee_payer").as_deref() == Some(address) {
                        let fee = attr("fee").unwrap_or_default();
                        total +=
                            fee.trim_end_matches("ngnk")
                                .parse::<u128>()
                                .unwrap_or_else(|_| {
                                    panic!("tx {} has a malformed fee {fee:?}", tx.hash)
                                });
                    }
                }
            }
            if page * 100 >= found.total_count {
                break;
            }
        }
        total
    }

    /// Signs `msgs` as the well-known account `label` (with [`tx_fee`]), sends them to node
    /// `i` and asserts they executed; returns the inclusion.
    pub async fn tx_ok(
        &self,
        i: usize,
        label: &str,
        msgs: Vec<gonka_client::Any>,
        memo: &str,
    ) -> Included {
        let signer = self.signer(i, label).await;
        let tx = gonka_client::sign(key(label), msgs, &signer, tx_fee(), memo)
            .unwrap_or_else(|e| panic!("signing {memo}: {e:#}"));
        let hash = self.broadcast_ok(i, tx).await;
        let included = self.wait_included(i, hash).await;
        assert_eq!(
            included.code,
            0,
            "{memo} failed in block {} ({} {}): {} ({})",
            included.height,
            included.codespace,
            included.code,
            included.log,
            self.logs_of(i)
        );
        included
    }

    /// Broadcasts `tx` to node `i` with `broadcast_tx_sync` and asserts `CheckTx` accepted it.
    pub async fn broadcast_ok(&self, i: usize, tx: Vec<u8>) -> Hash {
        broadcast_ok(&self.clients[i], tx)
            .await
            .unwrap_or_else(|e| panic!("{e} ({})", self.logs_of(i)))
    }
}

/// Broadcasts `tx` with `broadcast_tx_sync`; an error unless `CheckTx` returned code 0.
pub async fn broadcast_ok(client: &Client, tx: Vec<u8>) -> Result<Hash, String> {
    let response = client
        .http()
        .broadcast_tx_sync(tx)
        .await
        .map_err(|e| format!("broadcast_tx_sync to {}: {e:#}", client.url()))?;
    if response.code.is_err() {
        return Err(format!(
            "tx {} refused by {} ({} {}): {}",
            response.hash,
            client.url(),
            response.codespace,
            response.code.value(),
            response.log
        ));
    }
    Ok(response.hash)
}

impl Drop for Net {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            return; // `Localnet`'s and `TempDir`'s destructors stop and delete everything.
        }
        eprintln!("\n===== e2e failure: last lines of every node's logs =====");
        for n in self.net.nodes() {
            let sidecars = ["ml-node.log", "transfer-agent.log", "validator.log"]
                .map(|name| n.home.join(name));
            for log in [&n.app_log, &n.cometbft_log]
                .into_iter()
                .chain(sidecars.iter().filter(|p| p.exists()))
            {
                eprintln!("----- {} -----\n{}", log.display(), tail(log, TAIL_LINES));
            }
        }
        let _ = self.net.stop();
        if let Some(dir) = self.dir.take() {
            eprintln!(
                "===== network kept for inspection in {} =====",
                dir.keep().display()
            );
        }
    }
}

/// Creates and starts the localnet, retrying on a fresh port block if another process took one
/// of the ports between the free-port check and the start.
fn start_localnet(
    label: &str,
    reserve_nodes: usize,
    configure: &dyn Fn(&mut LocalnetConfig),
) -> (Localnet, tempfile::TempDir) {
    let cometbft = find_cometbft().unwrap_or_else(|e| {
        panic!("the end-to-end tests run real CometBFT validators and never skip: {e:#}")
    });
    // Spread concurrent test processes (e.g. other checkouts) over 27000..31000, below the
    // ephemeral range so outgoing connections never take a node's port.
    let first = 27_000 + (std::process::id() % 100) as u16 * 40;
    let mut errors = Vec::new();
    for _attempt in 0..3 {
        let base_port = find_free_base_port(reserve_nodes.max(VALIDATORS), first)
            .unwrap_or_else(|e| panic!("finding free ports: {e:#}"));
        let dir = tempfile::Builder::new()
            .prefix(&format!("gonka-e2e-{label}-"))
            .tempdir()
            .expect("creating a temporary directory");
        let mut config = LocalnetConfig::new(
            dir.path().join("net"),
            env!("CARGO_BIN_EXE_gonkad"),
            &cometbft,
        );
        config.validators = VALIDATORS;
        config.base_port = base_port;
        config.chain_id = CHAIN_ID.to_string();
        config.timeout_commit = TIMEOUT_COMMIT.to_string();
        // As on `gonkad localnet`: the randomness beacon rides in the vote extensions.
        config.vote_extensions_enable_height = Some(1);
        configure(&mut config);
        config.start_timeout = Duration::from_secs(60);
        let mut net = Localnet::prepare(config)
            .unwrap_or_else(|e| panic!("creating the localnet in {}: {e:#}", dir.path().display()));
        match net.start() {
            Ok(()) => return (net, dir),
            Err(e) => {
                let message = format!("{e:#}");
                let port_clash =
                    message.contains("is not free") || message.contains("answers for chain");
                errors.push(message);
                if !port_clash {
                    break;
                }
            }
        }
    }
    panic!("starting the localnet failed:\n{}", errors.join("\n---\n"));
}

/// The last `lines` lines of the file at `path` (or why it cannot be read).
pub fn tail(path: &Path, lines: usize) -> String {
    match std::fs::read(path) {
        Ok(bytes) => {
            let text = strip_ansi(&String::from_utf8_lossy(&bytes));
            let all: Vec<&str> = text.lines().collect();
            all[all.len().saturating_sub(lines)..].join("\n")
        }
        Err(e) => format!("(cannot read {}: {e})", path.display()),
    }
}

/// `text` without ANSI colour sequences (`ESC [ ... m`), which the app's logger writes.
fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The passphrase of the tests' keyrings: they use the default, encrypted `file` backend.
pub const KEYRING_PASSPHRASE: &str = "e2e keyring passphrase";

/// The `gonkad` binary under test with `args`, with no `GONKA_*` variables from the
/// environment leaking in but the keyring passphrase ([`KEYRING_PASSPHRASE`]).
fn gonkad_command(args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_gonkad"));
    command
        .args(args)
        .env_remove("GONKA_NODE")
        .env_remove("GONKA_CHAIN_ID")
        .env_remove("GONKA_HOME")
        .env_remove("GONKA_KEYRING_BACKEND")
        .env("GONKA_KEYRING_PASSPHRASE", KEYRING_PASSPHRASE)
        .env_remove("RUST_LOG");
    command
}

/// Runs [`gonkad_command`] and waits for it.
pub fn gonkad(args: &[&str]) -> Output {
    tokio::task::block_in_place(|| {
        gonkad_command(args)
            .output()
            .unwrap_or_else(|e| panic!("running gonkad {args:?}: {e}"))
    })
}

/// Runs `gonkad args` with `input` on its standard input, asserts it succeeded and parses
/// its standard output as JSON.
pub fn gonkad_json_with_input(args: &[&str], input: &str) -> serde_json::Value {
    use std::io::Write;
    use std::process::Stdio;
    let out = tokio::task::block_in_place(|| {
        let mut child = gonkad_command(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("running gonkad {args:?}: {e}"));
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
        child.wait_with_output().unwrap()
    });
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "gonkad {args:?} failed ({}):\nstdout: {stdout}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("gonkad {args:?} printed no JSON ({e}): {stdout}"))
}

/// Runs `gonkad args`, asserts it succeeded and returns its standard output.
pub fn gonkad_ok(args: &[&str]) -> String {
    let out = gonkad(args);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "gonkad {args:?} failed ({}):\nstdout: {stdout}\nstderr: {stderr}",
        out.status
    );
    stdout
}

/// Runs `gonkad args` with `--output json` output and parses its standard output.
pub fn gonkad_json(args: &[&str]) -> serde_json::Value {
    let stdout = gonkad_ok(args);
    serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("gonkad {args:?} printed no JSON ({e}): {stdout}"))
}

/// A plain HTTP/1.0 GET of `path_and_query` from `addr`, as `curl` would send it. Returns the
/// status code and the body.
pub fn http_get(addr: SocketAddr, path_and_query: &str) -> (u16, String) {
    let (status, body) = http_get_bytes(addr, path_and_query);
    let body = String::from_utf8(body)
        .unwrap_or_else(|e| panic!("GET {path_and_query} from {addr} is not UTF-8: {e}"));
    (status, body)
}

/// The Prometheus metrics served at `addr` (`GET /metrics`), parsed: sample (name with its
/// labels) → value.
pub fn scrape(addr: SocketAddr) -> std::collections::BTreeMap<String, f64> {
    let (status, body) = http_get(addr, "/metrics");
    assert_eq!(status, 200, "GET /metrics from {addr}: {body}");
    gonka_client::metrics::parse(&body).into_iter().collect()
}

/// [`http_get`] of a binary body.
pub fn http_get_bytes(addr: SocketAddr, path_and_query: &str) -> (u16, Vec<u8>) {
    tokio::task::block_in_place(|| {
        let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))
            .unwrap_or_else(|e| panic!("connecting to {addr}: {e}"));
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .expect("setting a read timeout");
        write!(
            stream,
            "GET {path_and_query} HTTP/1.0\r\nHost: {addr}\r\nAccept: application/json\r\n\r\n"
        )
        .unwrap_or_else(|e| panic!("sending GET {path_and_query} to {addr}: {e}"));
        let mut response = Vec::new();
        stream.read_to_end(&mut response).unwrap_or_else(|e| {
            panic!("reading the answer to GET {path_and_query} from {addr}: {e}")
        });
        let split = response
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .unwrap_or_else(|| panic!("malformed HTTP answer from {addr}: {response:?}"));
        let head = String::from_utf8_lossy(&response[..split]);
        let status = head
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("no HTTP status in {head:?}"));
        (status, response[split + 4..].to_vec())
    })
}

/// Decodes standard base64 (with padding), as CometBFT's JSON encodes bytes.
pub fn base64_decode(text: &str) -> Vec<u8> {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in text.bytes().filter(|&c| c != b'=') {
        let v = ALPHABET
            .iter()
            .position(|&a| a == c)
            .unwrap_or_else(|| panic!("{text:?} is not base64")) as u32;
        acc = (acc << 6) | v;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    out
}

/// `cosmos.tx.v1beta1.TxRaw`, to tamper with signed transactions.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TxRaw {
    #[prost(bytes = "vec", tag = "1")]
    pub body_bytes: Vec<u8>,
    #[prost(bytes = "vec", tag = "2")]
    pub auth_info_bytes: Vec<u8>,
    #[prost(bytes = "vec", repeated, tag = "3")]
    pub signatures: Vec<Vec<u8>>,
}

/// A child process (a sidecar or `gonkad` started by a test) killed when dropped.
pub struct KillOnDrop(pub std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
