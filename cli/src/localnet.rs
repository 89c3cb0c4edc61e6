//! `gonkad localnet`: a 4-validator CometBFT network on 127.0.0.1 with funded test
//! accounts, running until Ctrl-C.

use std::path::PathBuf;

use anyhow::{Context, Result};
use std::sync::Arc;

use gonka_app::genesis::{GenesisAccount, GenesisConfig, GenesisEscrow, GenesisValidator};
use gonka_client::bls::account_bls_key;
use gonka_client::keys::well_known_mnemonic;
use gonka_client::Key;
use gonka_localnet::{
    find_cometbft, AppStateFn, CrashPolicy, GenesisValidatorKey, Localnet, LocalnetConfig,
    SidecarConfig,
};

use crate::keys::{Backend, Keyring};
use crate::Global;

/// Names of the funded test accounts; their mnemonics are derived from these names and
/// printed, so they are public: never use them outside a localnet.
pub const TEST_ACCOUNTS: [&str; 4] = ["alice", "bob", "carol", "dave"];

/// ngnk per GNK.
const GNK: u128 = 1_000_000_000;

/// Genesis balance of every test account: 1,000,000 GNK.
const TEST_BALANCE_NGNK: u128 = 1_000_000 * GNK;

/// Genesis bond of every validator: 10,000 GNK (plus 1,000 GNK liquid for fees).
const VALIDATOR_STAKE_NGNK: u128 = 10_000 * GNK;

/// Each test account's escrow for each transfer agent at genesis (closing after
/// [`ESCROW_EXPIRES_AT`] blocks), so they can chat at once.
const TEST_ESCROW_NGNK: u128 = 1_000 * GNK;
const ESCROW_EXPIRES_AT: u64 = 1_000_000_000;

/// Blocks per epoch on the localnet: about 20 s, so a person sees several epochs in minutes.
const EPOCH_LENGTH: u64 = 20;

/// Rewards emitted per localnet epoch: 1,000 GNK (Gonka's mainnet genesis uses 323,000).
const EPOCH_EMISSION_NGNK: u128 = 1_000 * GNK;

/// The operator account of genesis validator `index` (a well-known test key).
fn validator_operator(index: usize) -> Result<Key> {
    Key::from_mnemonic(&well_known_mnemonic(&format!("validator{index}")))
}

/// Genesis: the funded test accounts, each with an escrow for each of the first
/// `transfer_agents` validators' operators (the transfer agents), and every node's consensus
/// key bonded by its operator.
fn genesis(
    accounts: Vec<GenesisAccount>,
    transfer_agents: usize,
    keys: &[GenesisValidatorKey],
) -> Result<serde_json::Value> {
    let mut config = GenesisConfig {
        accounts,
        min_gas_price: None,
        epoch_length: Some(EPOCH_LENGTH),
        // The sidecar's built-in deterministic model, priced at 1 ngnk per token, and the
        // language model the ML nodes serve when its file is present (`--llm-model`), at 2.
        // Both are priced whether or not the file is there, so a network created without it
        // serves it once it is fetched.
        models: vec![
            gonka_proto::inference::Model {
                id: gonka_client::chat::DEFAULT_MODEL.into(),
                price_per_token: "1".into(),
                work_per_token: 1,
                ..gonka_proto::inference::Model::default()
            },
            gonka_client::chat::llm_model_entry(2),
        ],
        rewards_params: Some(gonka_proto::rewards::Params {
            initial_emission: EPOCH_EMISSION_NGNK.to_string(),
            decay_ppb: 474_970,
            validation_share_ppm: gonka_app::genesis::DEFAULT_VALIDATION_SHARE_PPM,
        }),
        // User disputes within 100 blocks (about 100 s): the 131-block challenge window
        // fits the default 7-epoch unbonding (140 blocks), as genesis requires.
        disputes_params: Some(gonka_proto::disputes::Params {
            dispute_window_blocks: 100,
            ..gonka_disputes::default_params()
        }),
        ..Default::default()
    };
    for key in keys {
        let operator = validator_operator(key.index)?;
        config.accounts.push(GenesisAccount {
            address: operator.address().to_string(),
            ngnk: 1_000 * GNK,
        });
        config.validators.push(GenesisValidator {
            operator: operator.address().to_string(),
            moniker: format!("node{}", key.index),
            consensus_pubkey: key.ed25519_pub_key,
            stake_ngnk: VALIDATOR_STAKE_NGNK,
        });
        // The key its validator sidecar derives: the genesis signers are known up front.
        config.bls_keys.push(gonka_proto::bls::BlsKey {
            address: operator.address().to_string(),
            pubkey: account_bls_key(&operator).public_key().to_bytes().to_vec(),
            registered_height: 0,
        });
    }
    for ta in 0..transfer_agents.min(keys.len()) {
        let ta = validator_operator(ta)?.address().to_string();
        for account in TEST_ACCOUNTS {
            config.escrows.push(GenesisEscrow {
                requester: Key::from_mnemonic(&well_known_mnemonic(account))?
                    .address()
                    .to_string(),
                transfer_agent: ta.clone(),
                ngnk: TEST_ESCROW_NGNK,
                expires_at: ESCROW_EXPIRES_AT,
            });
        }
    }
    Ok(config.app_state())
}

/// Arguments of `gonkad localnet`.
#[derive(clap::Args)]
pub struct Args {
    /// Directory holding the network; an existing one is resumed.
    #[arg(long, default_value = ".localnet")]
    dir: PathBuf,
    /// Delete the directory first and start a fresh chain.
    #[arg(long)]
    reset: bool,
    /// Number of validators.
    #[arg(long, default_value_t = 4)]
    validators: usize,
    /// First port; node i uses base+10i (p2p), +1 (RPC), +2 (ABCI), +3 (Prometheus).
    #[arg(long, default_value_t = 26656)]
    base_port: u16,
    /// Chain id of a new network.
    #[arg(long = "new-chain-id", default_value = "gonka-localnet")]
    chain_id: String,
    /// CometBFT block interval (Go duration).
    #[arg(long, default_value = "1s")]
    timeout_commit: String,
    /// Do not import the test accounts into the keyring under --home.
    #[arg(long)]
    no_import_keys: bool,
    /// Run the chain alone: no ML nodes, transfer agents or validator workers.
    #[arg(long)]
    no_sidecars: bool,
    /// Turn CometBFT vote extensions off in a new network's genesis: no randomness beacon
    /// (seeds come from block hashes) and no epoch certificates. For comparison only.
    #[arg(long)]
    no_vote_extensions: bool,
    /// Validators 0..N also run a transfer agent.
    #[arg(long, default_value_t = 2)]
    transfer_agents: usize,
    /// The `gonka-sidecar` binary (default: next to this gonkad).
    #[arg(long)]
    sidecar_bin: Option<PathBuf>,
    /// Start a node (or sidecar) that exits on its own again, after a backoff (1 s, doubling
    /// to 30 s while it keeps crashing). Without it a crashed node is reported and stays
    /// down while the rest of the network runs on.
    #[arg(long)]
    restart_crashed: bool,
    /// The GGUF language model every ML node also serves (SmolLM2-135M-Instruct as
    /// `scripts/fetch-model.sh` stores it) [default: ~/.gonka/models/SmolLM2-135M-Instruct.Q4_1.gguf
    /// when it exists].
    #[arg(long, value_name = "PATH", conflicts_with = "no_llm")]
    llm_model: Option<PathBuf>,
    /// Serve the reference model alone, even when the language model's file is present.
    #[arg(long)]
    no_llm: bool,
    /// Where to serve the web explorer (`gonkad explorer` over node 0's RPC); default the
    /// loopback port just after the network's last port block (base + 10 × validators).
    #[arg(long)]
    explorer_listen: Option<String>,
}

/// The language model file the ML nodes serve: `explicit` (which must exist), else the one
/// `scripts/fetch-model.sh` stores under the gonka home when it is there; `None` with
/// `--no-llm`.
fn llm_model(global: &Global, explicit: Option<PathBuf>, off: bool) -> Result<Option<PathBuf>> {
    if off {
        return Ok(None);
    }
    match explicit {
        Some(path) if path.is_file() => Ok(Some(path)),
        Some(path) => anyhow::bail!(
            "--llm-model {} does not exist; fetch it with scripts/fetch-model.sh, or run without --llm-model",
            path.display()
        ),
        None => {
            let fetched = global.home().join(gonka_client::chat::LLM_MODEL_FILE);
            if fetched.is_file() {
                Ok(Some(fetched))
            } else {
                eprintln!(
                    "no language model at {}: the ML nodes serve the reference model alone (scripts/fetch-model.sh fetches SmolLM2-135M-Instruct)",
                    fetched.display()
                );
                Ok(None)
            }
        }
    }
}

/// The `gonka-sidecar` binary: `explicit`, or the one built next to this `gonkad`.
fn sidecar_binary(explicit: Option<PathBuf>) -> Result<PathBuf> {
    if let Some(path) = explicit {
        return Ok(path);
    }
    let beside = std::env::current_exe()
        .context("cannot locate the gonkad binary")?
        .with_file_name("gonka-sidecar");
    if !beside.exists() {
        anyhow::bail!(
            "{} is missing: build it with `cargo build -p gonka-sidecar` (scripts/localnet.sh does), pass --sidecar-bin, or run with --no-sidecars",
            beside.display()
        );
    }
    Ok(beside)
}

/// Runs the localnet in the foreground until Ctrl-C.
pub fn run(global: &Global, args: Args) -> Result<()> {
    let cometbft = find_cometbft()?;
    if args.reset && args.dir.exists() {
        Localnet::reset(&args.dir)?;
        println!("reset: removed {}", args.dir.display());
    }
    let accounts: Vec<(&str, String, Key)> = TEST_ACCOUNTS
        .iter()
        .map(|name| {
            let mnemonic = well_known_mnemonic(name);
            let key = Key::from_mnemonic(&mnemonic)?;
            Ok((*name, mnemonic, key))
        })
        .collect::<Result<_>>()?;
    let genesis_accounts: Vec<GenesisAccount> = accounts
        .iter()
        .map(|(_, _, key)| GenesisAccount {
            address: key.address().to_string(),
            ngnk: TEST_BALANCE_NGNK,
        })
        .collect();

    let gonkad = std::env::current_exe().context("cannot locate the gonkad binary")?;
    let mut config = LocalnetConfig::new(&args.dir, gonkad, cometbft);
    config.validators = args.validators;
    config.base_port = args.base_port;
    config.chain_id = args.chain_id;
    config.timeout_commit = args.timeout_commit;
    // The validators sign the randomness beacon in their vote extensions from the start.
    config.vote_extensions_enable_height = (!args.no_vote_extensions).then_some(1);
    let transfer_agents = if args.no_sidecars {
        0
    } else {
        args.transfer_agents
    };
    config.app_state_for_validators = Some(AppStateFn(Arc::new(move |keys| {
        genesis(genesis_accounts.clone(), transfer_agents, keys).expect("well-known keys derive")
    })));
    if !args.no_sidecars {
        let mnemonics = (0..args.validators)
            .map(|i| well_known_mnemonic(&format!("validator{i}")))
            .collect();
        let mut sidecar = SidecarConfig::new(sidecar_binary(args.sidecar_bin)?, mnemonics);
        sidecar.transfer_agents = args.transfer_agents;
        sidecar.validator_role = true;
        // Every validator trains: its trainer joins each training job it can run.
        sidecar.trainer_role = true;
        sidecar.trainer_args = (0..args.validators)
            .map(|_| vec!["--auto-join".into()])
            .collect();
        sidecar.llm_model_file = llm_model(global, args.llm_model, args.no_llm)?;
        config.sidecar = Some(sidecar);
    }
    let mut net = Localnet::prepare(config)?;

    // The accounts' mnemonics are public: they go to the unencrypted test keyring, never
    // into the (encrypted) file keyring a user keeps real keys in.
    let test_keyring = Keyring::new(global.home(), Backend::Test, None);
    if !args.no_import_keys {
        for (name, mnemonic, _) in &accounts {
            test_keyring.import_if_absent(name, mnemonic)?;
        }
    }
    let stopper = net.stopper();
    ctrlc::set_handler(move || {
        eprintln!("\nstopping the localnet...");
        if let Err(e) = stopper.stop() {
            eprintln!("error while stopping: {e:#}");
        }
    })
    .context("cannot install the Ctrl-C handler")?;

    println!(
        "starting {} validators of chain {} in {}",
        net.nodes().len(),
        net.chain_id(),
        net.dir().display()
    );
    net.start()?;
    println!("\nRPC endpoints:");
    for node in net.nodes() {
        println!(
            "  node{}: {}   (logs: {}, {})",
            node.index,
            node.rpc_url,
            node.app_log.display(),
            node.cometbft_log.display()
        );
    }
    let explorer_listen = args.explorer_listen.clone().unwrap_or_else(|| {
        format!(
            "127.0.0.1:{}",
            usize::from(args.base_port) + 10 * args.validators
        )
    });
    let explorer_node = net.nodes()[0].rpc_url.clone();
    let explorer = crate::background::serve_in_thread(
        "explorer",
        &explorer_listen,
        move |listener| async move {
            if let Err(e) = crate::explorer::serve(listener, &explorer_node).await {
                tracing::error!(error = %format!("{e:#}"), "the explorer stopped");
            }
        },
    )?;
    println!("\nexplorer (blocks, txs, accounts, validators, epochs, work, disputes): http://{explorer}/");
    if !args.no_sidecars {
        println!("\nML nodes (reference model, registered on chain by each validator):");
        for node in net.nodes() {
            println!(
                "  node{}: {}   (log: {})",
                node.index,
                net.ml_node_url(node.index)?,
                node.home.join("ml-node.log").display()
            );
        }
        println!("\nOpenAI base URLs (transfer agents; requests must be signed, see README):");
        for (i, url) in net.transfer_agent_urls().iter().enumerate() {
            println!(
                "  {url}   (log: {})",
                net.nodes()[i].home.join("transfer-agent.log").display()
            );
        }
    }
    println!("\nfunded test accounts (1,000,000 GNK each; public mnemonics, localnet only):");
    for (name, mnemonic, key) in &accounts {
        println!("  {name}: {}\n    {mnemonic}", key.address());
    }
    if !args.no_import_keys {
        println!(
            "\nimported into the test keyring {} (unencrypted; use it with --keyring-backend test or GONKA_KEYRING_BACKEND=test): {}",
            test_keyring.path().display(),
            TEST_ACCOUNTS.join(", ")
        );
    }
    let first = &net.nodes()[0].rpc_url;
    println!(
        "\ntry:\n  export GONKA_KEYRING_BACKEND=test\n  gonkad --node {first} tx bank send alice {} 5gnk\n  gonkad --node {first} query bank balance {}\n  gonkad --node {first} chat --from alice \"Hello, gonka\"\n\nCtrl-C stops every node; run again to resume, --reset to start over.",
        accounts[1].2.address(),
        accounts[1].2.address()
    );
    let policy = match args.restart_crashed {
        true => CrashPolicy::Restart,
        false => CrashPolicy::Report,
    };
    net.supervise(policy)
}
