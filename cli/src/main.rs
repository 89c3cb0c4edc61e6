//! `gonkad`: run a gonka node's application, manage keys, send transactions, query the
//! chain, and start a local multi-validator network.

mod amount;
mod app_metrics;
mod b64;
mod background;
mod chain_info;
mod chat;
mod consensus_key;
mod explorer;
mod export;
mod genesis;
mod grpc;
mod init;
mod keys;
mod localnet;
mod output;
mod prove;
mod proxy;
mod query;
mod rest;
mod start;
mod status;
mod tx;
mod verify_epochs;

use std::path::PathBuf;

use clap::{Parser, Subcommand};
use output::Output;

/// gonkad — the gonka-rs node and command-line client.
#[derive(Parser)]
#[command(name = "gonkad", version, about, long_about = None)]
struct Cli {
    #[command(flatten)]
    global: Global,
    #[command(subcommand)]
    command: Command,
}

/// Options every command accepts.
#[derive(clap::Args, Clone)]
pub struct Global {
    /// CometBFT RPC endpoint of the node to talk to.
    #[arg(
        long,
        global = true,
        env = "GONKA_NODE",
        default_value = "http://127.0.0.1:26657"
    )]
    pub node: String,
    /// Chain id to sign for; asked from the node when omitted.
    #[arg(long, global = true, env = "GONKA_CHAIN_ID")]
    pub chain_id: Option<String>,
    /// Output format.
    #[arg(long, global = true, value_enum, default_value_t = Output::Text)]
    pub output: Output,
    /// Home directory: the keyring and, for `start`, the state database in data/.
    #[arg(long, global = true, env = "GONKA_HOME")]
    pub home: Option<PathBuf>,
    /// Keyring backend: `file` encrypts keys with a passphrase (asked on the terminal, or
    /// from GONKA_KEYRING_PASSPHRASE); `test` keeps them unencrypted, for local test networks.
    #[arg(long, global = true, value_enum, env = "GONKA_KEYRING_BACKEND", default_value_t = keys::Backend::File)]
    pub keyring_backend: keys::Backend,
    /// The committed height queries read (`gonkad query --height`; none: the latest).
    #[arg(skip)]
    pub query_height: Option<u64>,
}

impl Global {
    /// The home directory (`--home`, else `$GONKA_HOME`, else `~/.gonka`).
    pub fn home(&self) -> PathBuf {
        self.home
            .clone()
            .unwrap_or_else(gonka_client::chat::default_home)
    }

    /// The keyring `--home` and `--keyring-backend` select.
    pub fn keyring(&self) -> keys::Keyring {
        let passphrase = std::env::var(keys::PASSPHRASE_ENV).ok();
        keys::Keyring::new(self.home(), self.keyring_backend, passphrase)
    }

    /// An RPC client for `--node` (reading at `gonkad query --height`, if given).
    pub fn client(&self) -> anyhow::Result<gonka_client::Client> {
        Ok(gonka_client::Client::new(&self.node)?.at_height(self.query_height.unwrap_or(0)))
    }
}

#[derive(Subcommand)]
enum Command {
    /// Create a home directory and a genesis app_state funding accounts.
    Init(init::Args),
    /// Run the ABCI application for a CometBFT node.
    Start(start::Args),
    /// Manage account keys (BIP-39 mnemonics, m/44'/118'/0'/0/0).
    #[command(subcommand)]
    Keys(keys::Command),
    /// Sign and broadcast transactions.
    #[command(subcommand)]
    Tx(tx::Command),
    /// Read chain state.
    Query(query::Args),
    /// Show the node's chain id, height and app hash.
    Status,
    /// Print the network's Keplr `suggestChain` config and chain-registry `chain.json`, read
    /// from the chain (chain id, denom, minimum gas price).
    ChainInfo(chain_info::Args),
    /// Print the state at the last committed height as a genesis `app_state` for a new
    /// chain (the node must be stopped).
    Export,
    /// Serve a web explorer of the chain (blocks, txs, accounts, validators, epochs, work,
    /// disputes, training, BLS) read from `--node`.
    Explorer(explorer::Args),
    /// The genesis ceremony of a network on separate hosts: new, add-account, gentx,
    /// collect-gentxs, validate.
    #[command(subcommand)]
    Genesis(genesis::Command),
    /// Run a local multi-validator network (apps + CometBFT) on 127.0.0.1.
    Localnet(localnet::Args),
    /// Ask a model through a transfer agent: a signed OpenAI chat request, streamed back.
    Chat(chat::Args),
    /// Serve a local OpenAI endpoint that signs each request with a key and sends it to the
    /// network's transfer agents, for clients that cannot sign.
    Proxy(proxy::Args),
    /// Verify every epoch certificate from genesis.json alone (a light client of the chain
    /// of group keys).
    VerifyEpochs(verify_epochs::Args),
}

fn init_tracing(default: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // Colours only on a terminal: node logs go to files.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
}

fn run(cli: Cli) -> anyhow::Result<()> {
    let global = cli.global;
    match cli.command {
        Command::Start(args) => {
            init_tracing("info");
            start::run(&global, args)
        }
        Command::Localnet(args) => {
            init_tracing("info");
            localnet::run(&global, args)
        }
        command => {
            init_tracing("warn");
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()?;
            runtime.block_on(async {
                match command {
                    Command::Init(args) => init::run(&global, args),
                    Command::Keys(command) => keys::run(&global, command),
                    Command::Tx(command) => tx::run(&global, command).await,
                    Command::Query(args) => {
                        let global = Global {
                            query_height: args.height,
                            ..global.clone()
                        };
                        query::run(&global, args.command).await
                    }
                    Command::Status => status::run(&global).await,
                    Command::ChainInfo(args) => chain_info::run(&global, args).await,
                    Command::Export => export::run(&global),
                    Command::Genesis(command) => genesis::run(&global, command),
                    Command::Explorer(args) => explorer::run(&global, args).await,
                    Command::Chat(args) => chat::run(&global, args).await,
                    Command::Proxy(args) => proxy::run(&global, args).await,
                    Command::VerifyEpochs(args) => verify_epochs::run(&global, args).await,
                    Command::Start(_) | Command::Localnet(_) => unreachable!("handled above"),
                }
            })
        }
    }
}

fn main() {
    // Like other Unix tools, end quietly when the reader of stdout goes away
    // (`gonkad query ... | head`) instead of panicking on a broken pipe.
    // SAFETY: restoring the default disposition of SIGPIPE before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    if let Err(error) = run(Cli::parse()) {
        eprintln!("Error: {error:#}");
        std::process::exit(1);
    }
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, Parser};

    use super::Cli;

    #[test]
    fn command_tree_is_consistent() {
        Cli::command().debug_assert();
        for line in [
            "gonkad tx stake create alice 100gnk --moniker a --consensus-key x --fees 2000ngnk",
            "gonkad tx stake add alice 5gnk --gas 150000 --gas-prices 0.02ngnk",
            "gonkad tx stake add alice 5gnk --gas auto --gas-adjustment 1.5",
            "gonkad tx stake add alice 5gnk",
            "gonkad tx stake unstake alice 5gnk --timeout 5",
            "gonkad tx stake unjail alice --memo m",
            "gonkad query stake unbonding",
            "gonkad query auth params --output json",
            "gonkad query rewards epoch 3 --output json",
            "gonkad query inference models",
            "gonkad query inference nodes",
            "gonkad query inference nodes --host gonka1h --output json",
            "gonkad query inference node n1",
            "gonkad query inference transfer-agents",
            "gonkad query inference record abcd",
            "gonkad query inference records --epoch 3 --executor n1",
            "gonkad query inference params",
            "gonkad tx inference remove-node alice n1 --fee 2000",
            "gonkad tx inference register-transfer-agent alice --url https://ta",
            "gonkad chat --from alice Hello there",
            "gonkad proxy --from alice --listen 127.0.0.1:9000 --ta http://127.0.0.1:26661/v1",
            "gonkad chat --from alice --ta http://a --ta b:8080 --model m --max-tokens 8 \
             --commission 1.5gnk --system Be-brief --no-stream --timeout-secs 3 --output json Hi",
        ] {
            let words = line.split(' ');
            assert!(Cli::try_parse_from(words).is_ok(), "{line}");
        }
        let missing_moniker = ["gonkad", "tx", "stake", "create", "alice", "1"];
        assert!(Cli::try_parse_from(missing_moniker).is_err());

        let pubkey = format!("02{}", "ab".repeat(32));
        let node = "gonkad tx inference register-node alice --id n1 --model m1 --model m2 \
             --vram-mib 8192 --bandwidth-mbps 100 --max-concurrency 4 \
             --endpoint http://127.0.0.1:9000 --response-key-file node.key";
        let words = || node.split_whitespace();
        assert!(Cli::try_parse_from(words()).is_ok(), "{node}");
        let update = words().map(|w| w.replace("register-node", "update-node"));
        assert!(Cli::try_parse_from(update).is_ok());
        let no_key = words().filter(|w| !w.starts_with("--response-key-file") && *w != "node.key");
        assert!(Cli::try_parse_from(no_key).is_err());
        let no_model = words().filter(|w| !w.starts_with("--model") && !w.starts_with('m'));
        assert!(Cli::try_parse_from(no_model).is_err());
        let ta = format!(
            "gonkad tx inference register-transfer-agent bob --url https://ta --pubkey {pubkey}"
        );
        assert!(Cli::try_parse_from(ta.split(' ')).is_ok());
        assert!(Cli::try_parse_from("gonkad query inference records".split(' ')).is_err());
        assert!(Cli::try_parse_from("gonkad chat --from alice".split(' ')).is_err());
        assert!(Cli::try_parse_from("gonkad chat --from a --commission x Hi".split(' ')).is_err());
    }

    #[test]
    fn the_query_height_is_not_a_subcommands_own_height() {
        let height = |line: &str| match Cli::try_parse_from(line.split(' ')).unwrap().command {
            super::Command::Query(args) => args.height,
            _ => unreachable!("a query"),
        };
        // `bls beacon HEIGHT` names the beacon's height, read at the latest state.
        assert_eq!(height("gonkad query bls beacon 41"), None);
        assert_eq!(height("gonkad query --height 5 bls beacon 41"), Some(5));
        assert_eq!(
            height("gonkad query bank balance gonka1x --height 7"),
            Some(7)
        );
    }
}
