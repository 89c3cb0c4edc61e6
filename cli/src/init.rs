//! `gonkad init`: a home directory and a genesis `app_state` funding accounts.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use gonka_app::genesis::{app_state, GenesisAccount};
use gonka_client::GasPrice;
use serde_json::json;

use crate::{amount::parse_ngnk, Global};

/// Arguments of `gonkad init`.
#[derive(clap::Args)]
pub struct Args {
    /// Chain id of the new chain.
    #[arg(long = "new-chain-id", default_value = "gonka-local")]
    chain_id: String,
    /// Fund an account at genesis: ADDRESS=AMOUNT (e.g. gonka1...=1000gnk). Repeatable.
    #[arg(long = "fund", value_name = "ADDRESS=AMOUNT")]
    funds: Vec<String>,
    /// Least fee per unit of gas, in ngnk (a decimal such as 0.01): every tx's fee must be
    /// at least ceil(gas limit × this).
    #[arg(long, default_value = "0.01", value_parser = parse_gas_price)]
    min_gas_price: GasPrice,
    /// Also write chain_id and app_state into this CometBFT genesis.json.
    #[arg(long, value_name = "PATH")]
    cometbft_genesis: Option<PathBuf>,
}

fn parse_gas_price(text: &str) -> Result<GasPrice, String> {
    GasPrice::parse(text)
}

/// Runs `gonkad init`.
pub fn run(global: &Global, args: Args) -> Result<()> {
    let accounts = args
        .funds
        .iter()
        .map(|fund| {
            let Some((address, amount)) = fund.split_once('=') else {
                bail!("--fund {fund:?} must look like ADDRESS=AMOUNT");
            };
            Ok(GenesisAccount {
                address: address.to_string(),
                ngnk: parse_ngnk(amount)?,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let state = app_state(&accounts, args.min_gas_price);

    let home = global.home();
    let config_dir = home.join("config");
    std::fs::create_dir_all(home.join("data"))
        .and_then(|_| std::fs::create_dir_all(&config_dir))
        .with_context(|| format!("cannot create {}", home.display()))?;
    let app_state_path = config_dir.join("app_state.json");
    std::fs::write(&app_state_path, serde_json::to_vec_pretty(&state)?)
        .with_context(|| format!("cannot write {}", app_state_path.display()))?;

    if let Some(path) = &args.cometbft_genesis {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read CometBFT genesis {}", path.display()))?;
        let mut genesis: serde_json::Value = serde_json::from_str(&text)
            .with_context(|| format!("{} is not JSON", path.display()))?;
        genesis["chain_id"] = json!(args.chain_id);
        genesis["app_state"] = state.clone();
        std::fs::write(path, serde_json::to_vec_pretty(&genesis)?)
            .with_context(|| format!("cannot write {}", path.display()))?;
    }

    global.output.print(
        json!({"home": home, "chain_id": args.chain_id, "app_state": state}),
        || {
            format!(
                "initialised {} for chain {} with {} funded account(s)\napp_state written to {}",
                home.display(),
                args.chain_id,
                accounts.len(),
                app_state_path.display()
            )
        },
    );
    Ok(())
}
