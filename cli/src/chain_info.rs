//! `gonkad chain-info`: the network described the way wallets and registries take it — a
//! Keplr `suggestChain` config and a chain-registry `chain.json` — from what the chain itself
//! answers (chain id, the native denom's metadata, the minimum gas price), so the documents
//! never drift from the chain.
//!
//! Decisions: the fee tiers offered are the chain's minimum gas price ×1 (low), ×2 (average)
//! and ×4 (high); the coin type is 118 (the keys' HD path m/44'/118'/0'/0/0); the bech32
//! prefixes Keplr requires for validator and consensus addresses are the conventional
//! `gonka…` ones, although the chain names participants by their account addresses.

use anyhow::{anyhow, bail, Context, Result};
use cosmos_sdk_proto::cosmos::bank::v1beta1 as bank;
use gonka_proto::address::ADDRESS_PREFIX;
use gonka_proto::gas::GasPrice;
use gonka_proto::query as q;
use serde_json::{json, Value};

use crate::Global;

/// SLIP-44 coin type of the chain's keys (m/44'/118'/0'/0/0).
const SLIP44: u32 = 118;

/// Which document to print.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Both, as `{"keplr": ..., "chain_registry": ...}`.
    Both,
    /// The config object Keplr's `window.keplr.experimentalSuggestChain` takes.
    Keplr,
    /// A chain-registry `chain.json`.
    Registry,
}

/// `gonkad chain-info` options.
#[derive(clap::Args)]
pub struct Args {
    /// Which document to print.
    #[arg(long, value_enum, default_value_t = Format::Both)]
    format: Format,
    /// RPC URL the documents advertise (default: --node).
    #[arg(long)]
    rpc: Option<String>,
    /// REST (LCD) URL the documents advertise; Keplr needs one to read balances.
    #[arg(long)]
    rest: Option<String>,
    /// Name people see (default: "Gonka (<chain id>)").
    #[arg(long)]
    pretty_name: Option<String>,
    /// The chain-registry `network_type`.
    #[arg(long, default_value = "devnet", value_parser = ["mainnet", "testnet", "devnet"])]
    network_type: String,
}

/// What the documents say, read from the chain.
struct ChainFacts {
    chain_id: String,
    /// Base denom, display denom and its exponent.
    base: String,
    display: String,
    exponent: u32,
    min_gas_price: GasPrice,
}

async fn facts(global: &Global) -> Result<ChainFacts> {
    let client = global.client()?;
    let chain_id = client.status().await?.node_info.network.to_string();
    let metadata = client
        .query::<q::cosmos::BankDenomsMetadata>(&bank::QueryDenomsMetadataRequest::default())
        .await
        .context("reading the native denom's metadata")?
        .metadatas;
    let native = metadata
        .into_iter()
        .next()
        .ok_or_else(|| anyhow!("the chain describes no denom"))?;
    let display = native
        .denom_units
        .iter()
        .find(|u| u.denom == native.display)
        .ok_or_else(|| anyhow!("the chain's display denom {:?} has no unit", native.display))?;
    let params = client
        .query::<q::auth::Params>(&Default::default())
        .await
        .context("reading the auth params")?
        .params
        .unwrap_or_default();
    let min_gas_price = GasPrice::parse(&params.min_gas_price)
        .map_err(|e| anyhow!("the chain's minimum gas price: {e}"))?;
    Ok(ChainFacts {
        chain_id,
        base: native.base.clone(),
        display: native.symbol.clone(),
        exponent: display.exponent,
        min_gas_price,
    })
}

/// A gas price as a JSON number (wallets take numbers; the decimal text is exact).
fn price(price: GasPrice) -> Result<Value> {
    serde_json::from_str(&price.to_string()).context("a gas price is a JSON number")
}

/// The (low, average, high) prices offered: ×1, ×2, ×4 the chain's minimum.
fn tiers(min: GasPrice) -> Result<(Value, Value, Value)> {
    let times = |factor| {
        min.times(factor)
            .ok_or_else(|| anyhow!("the minimum gas price is too large"))
            .and_then(price)
    };
    Ok((times(1)?, times(2)?, times(4)?))
}

fn keplr(facts: &ChainFacts, name: &str, rpc: &str, rest: Option<&str>) -> Result<Value> {
    let (low, average, high) = tiers(facts.min_gas_price)?;
    let currency = json!({
        "coinDenom": facts.display,
        "coinMinimalDenom": facts.base,
        "coinDecimals": facts.exponent,
    });
    let mut fee_currency = currency.clone();
    fee_currency["gasPriceStep"] = json!({"low": low, "average": average, "high": high});
    let p = ADDRESS_PREFIX;
    let mut config = json!({
        "chainId": facts.chain_id,
        "chainName": name,
        "rpc": rpc,
        "bip44": {"coinType": SLIP44},
        "bech32Config": {
            "bech32PrefixAccAddr": p,
            "bech32PrefixAccPub": format!("{p}pub"),
            "bech32PrefixValAddr": format!("{p}valoper"),
            "bech32PrefixValPub": format!("{p}valoperpub"),
            "bech32PrefixConsAddr": format!("{p}valcons"),
            "bech32PrefixConsPub": format!("{p}valconspub"),
        },
        "currencies": [currency],
        "feeCurrencies": [fee_currency],
        "stakeCurrency": currency,
        "features": [],
    });
    if let Some(rest) = rest {
        config["rest"] = json!(rest);
    }
    Ok(config)
}

fn registry(facts: &ChainFacts, args: &Args, name: &str, rpc: &str) -> Result<Value> {
    let (low, average, high) = tiers(facts.min_gas_price)?;
    let api = |url: &str| json!([{"address": url, "provider": name}]);
    let mut apis = json!({"rpc": api(rpc)});
    if let Some(rest) = &args.rest {
        apis["rest"] = api(rest);
    }
    Ok(json!({
        "$schema": "../chain.schema.json",
        "chain_name": format!("gonka{}", facts.chain_id.to_lowercase().replace(|c: char| !c.is_ascii_alphanumeric(), "")),
        "chain_type": "cosmos",
        "status": "live",
        "network_type": args.network_type,
        "pretty_name": name,
        "chain_id": facts.chain_id,
        "bech32_prefix": ADDRESS_PREFIX,
        "daemon_name": "gonkad",
        "node_home": "$HOME/.gonka",
        "key_algos": ["secp256k1"],
        "slip44": SLIP44,
        "fees": {"fee_tokens": [{
            "denom": facts.base,
            "fixed_min_gas_price": price(facts.min_gas_price)?,
            "low_gas_price": low,
            "average_gas_price": average,
            "high_gas_price": high,
        }]},
        "staking": {"staking_tokens": [{"denom": facts.base}]},
        "codebase": {"recommended_version": env!("CARGO_PKG_VERSION")},
        "apis": apis,
    }))
}

/// Prints the documents `args.format` asks for (always JSON: they are documents).
pub async fn run(global: &Global, args: Args) -> Result<()> {
    let facts = facts(global).await?;
    if facts.exponent == 0 || facts.display.is_empty() {
        bail!("the chain's native denom has no display unit for wallets");
    }
    let name = args
        .pretty_name
        .clone()
        .unwrap_or_else(|| format!("Gonka ({})", facts.chain_id));
    let rpc = args.rpc.clone().unwrap_or_else(|| global.node.clone());
    let document = match args.format {
        Format::Keplr => keplr(&facts, &name, &rpc, args.rest.as_deref())?,
        Format::Registry => registry(&facts, &args, &name, &rpc)?,
        Format::Both => json!({
            "keplr": keplr(&facts, &name, &rpc, args.rest.as_deref())?,
            "chain_registry": registry(&facts, &args, &name, &rpc)?,
        }),
    };
    println!("{}", serde_json::to_string_pretty(&document)?);
    Ok(())
}
