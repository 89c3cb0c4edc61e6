//! What the localnet benches share: the well-known keys, the validators' genesis stake and
//! escrows, and starting a 4-validator localnet on free ports.

use std::path::Path;

use anyhow::{bail, Context, Result};
use gonka_app::genesis::{GenesisAccount, GenesisConfig, GenesisEscrow, GenesisValidator};
use gonka_client::keys::well_known_mnemonic;
use gonka_client::Key;
use gonka_localnet::{
    find_cometbft, find_free_base_port, GenesisValidatorKey, Localnet, LocalnetConfig,
};

/// Validators of the benches' networks.
pub const VALIDATORS: usize = 4;
/// ngnk per GNK.
pub const GNK: u128 = 1_000_000_000;

/// Logs to stderr, `warn` and above unless `RUST_LOG` says otherwise.
pub fn init_logs() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
}

/// The well-known key of `label` (see `gonka_client::keys::well_known_mnemonic`).
pub fn key(label: &str) -> Result<Key> {
    Key::from_mnemonic(&well_known_mnemonic(label))
        .with_context(|| format!("deriving the well-known key {label:?}"))
}

/// Operator account of validator `i`, as `gonkad localnet` names it.
pub fn operator(i: usize) -> Result<Key> {
    key(&format!("validator{i}"))
}

/// Adds every validator of `keys` to `config` as `gonkad localnet` does: its operator funded
/// with 1,000 GNK and staking 10,000.
pub fn stake_validators(config: &mut GenesisConfig, keys: &[GenesisValidatorKey]) -> Result<()> {
    for key in keys {
        let address = operator(key.index)?.address().to_string();
        config.accounts.push(GenesisAccount {
            address: address.clone(),
            ngnk: 1_000 * GNK,
        });
        config.validators.push(GenesisValidator {
            operator: address,
            moniker: format!("node{}", key.index),
            consensus_pubkey: key.ed25519_pub_key,
            stake_ngnk: 10_000 * GNK,
        });
    }
    Ok(())
}

/// An escrow of `ngnk` for `transfer_agent` for every one of `requesters`, open until
/// height `expires_at` (its money is minted into the settlement pool at genesis).
pub fn escrows(
    requesters: &[String],
    transfer_agent: &str,
    ngnk: u128,
    expires_at: u64,
) -> Vec<GenesisEscrow> {
    requesters
        .iter()
        .map(|requester| GenesisEscrow {
            requester: requester.clone(),
            transfer_agent: transfer_agent.to_string(),
            ngnk,
            expires_at,
        })
        .collect()
}

/// Prepares and starts a localnet of [`VALIDATORS`] in `dir` on the first free port block
/// from `first_port`, with `configure` applied, retrying on a fresh block (up to three times)
/// if another process took one of the ports between the free-port check and the start.
pub fn start_localnet(
    dir: &Path,
    first_port: u16,
    configure: impl Fn(&mut LocalnetConfig),
) -> Result<Localnet> {
    let cometbft = find_cometbft()?;
    let mut errors = Vec::new();
    for attempt in 0..3 {
        let base_port = find_free_base_port(VALIDATORS, first_port)?;
        let mut config = LocalnetConfig::new(
            dir.join(format!("net{attempt}")),
            env!("CARGO_BIN_EXE_gonkad"),
            &cometbft,
        );
        config.validators = VALIDATORS;
        config.base_port = base_port;
        configure(&mut config);
        let mut net = Localnet::prepare(config)?;
        match net.start() {
            Ok(()) => return Ok(net),
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
    bail!("starting the localnet failed:\n{}", errors.join("\n---\n"))
}
