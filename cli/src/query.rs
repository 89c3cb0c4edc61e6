//! `gonkad query`: read chain state over CometBFT RPC (`abci_query`, `tx`).

mod bls;
mod disputes;
mod epochs;
mod inference;
mod pol;
mod rewards;
mod settlement;
mod stake;

use anyhow::{bail, Context, Result};
use gonka_proto::bank::QueryAllBalancesRequest;
use gonka_proto::query::{self as q, ListQuery, Query};
use prost::Message;
use serde_json::json;

use crate::output::to_json;
use crate::prove::{self, ProveArgs};
use crate::Global;

/// `gonkad query`: the module to ask, and the height to read.
#[derive(clap::Args)]
pub struct Args {
    /// Read the state committed at this height instead of the latest (single items only:
    /// lists are kept at the latest height; epoch history needs none, it stays in the
    /// latest state).
    // Its own id: subcommands have positional `height`s of their own (`bls beacon HEIGHT`).
    #[arg(
        long = "height",
        id = "query_height",
        value_name = "HEIGHT",
        global = true
    )]
    pub height: Option<u64>,
    #[command(subcommand)]
    pub command: Command,
}

/// `gonkad query` modules.
#[derive(clap::Subcommand)]
pub enum Command {
    /// Balances.
    #[command(subcommand)]
    Bank(BankQuery),
    /// Accounts.
    #[command(subcommand)]
    Auth(AuthQuery),
    /// Epochs: the running one and finished ones.
    #[command(subcommand)]
    Epochs(epochs::Query),
    /// Participants, unbonding, work and stake parameters.
    #[command(subcommand)]
    Stake(stake::Query),
    /// Settled epoch rewards, a participant's earnings and reward parameters.
    #[command(subcommand)]
    Rewards(rewards::Query),
    /// ML nodes, transfer agents, models, work records and inference parameters.
    #[command(subcommand)]
    Inference(inference::Query),
    /// Validations, disputes, executor statistics and disputes parameters.
    #[command(subcommand)]
    Disputes(disputes::Query),
    /// Participants' BLS keys.
    #[command(subcommand)]
    Bls(bls::Query),
    /// Settlement: escrows, settled batches, open leaf demands, parameters.
    #[command(subcommand)]
    Settlement(settlement::Query),
    /// Training: jobs, their checkpoints by round, a validator's re-executions, parameters.
    #[command(subcommand)]
    Pol(pol::Query),
    /// A transaction by hash, with its block height and result.
    Tx {
        /// Transaction hash (hex).
        hash: String,
    },
}

/// `gonkad query bank` subcommands.
#[derive(clap::Subcommand)]
pub enum BankQuery {
    /// Balance of one denom.
    Balance {
        /// Account address.
        address: String,
        /// Denom to read.
        #[arg(long, default_value = "ngnk")]
        denom: String,
        #[command(flatten)]
        prove: ProveArgs,
    },
    /// The balances of an account, by denom.
    Balances {
        /// Account address.
        address: String,
        #[command(flatten)]
        page: PageArgs,
    },
}

/// `gonkad query auth` subcommands.
#[derive(clap::Subcommand)]
pub enum AuthQuery {
    /// Account number, sequence and public key.
    Account {
        /// Account address.
        address: String,
        #[command(flatten)]
        prove: ProveArgs,
    },
    /// Transaction parameters: size limits, the minimum gas price and the gas costs.
    Params,
}

/// Runs a `gonkad query` subcommand.
pub async fn run(global: &Global, command: Command) -> Result<()> {
    let client = global.client()?;
    let out = global.output;
    match command {
        Command::Epochs(query) => return epochs::run(global, query).await,
        Command::Stake(query) => return stake::run(global, query).await,
        Command::Rewards(query) => return rewards::run(global, query).await,
        Command::Inference(query) => return inference::run(global, query).await,
        Command::Disputes(query) => return disputes::run(global, query).await,
        Command::Bls(query) => return bls::run(global, query).await,
        Command::Settlement(query) => return settlement::run(global, query).await,
        Command::Pol(query) => return pol::run(global, query).await,
        Command::Bank(BankQuery::Balance {
            address,
            denom,
            prove,
        }) if prove.prove => {
            let proven = prove::read(
                &client,
                &prove,
                &gonka_bank::keys::balance(&address, &denom),
            )
            .await?;
            let amount = match &proven.value {
                Some(bytes) => {
                    gonka_proto::bank::Coin::decode(bytes.as_slice())
                        .context("the proven balance is not a Coin")?
                        .amount
                }
                None => "0".into(),
            };
            out.print(
                json!({"address": address, "denom": denom, "amount": amount, "verified_at_height": proven.height}),
                || format!("{amount}{denom}\nverified at height {}", proven.height),
            );
        }
        Command::Bank(BankQuery::Balance { address, denom, .. }) => {
            let amount = client.balance(&address, &denom).await?;
            out.print(
                json!({"address": address, "denom": denom, "amount": amount.to_string()}),
                || format!("{amount}{denom}"),
            );
        }
        Command::Bank(BankQuery::Balances { address, page }) => {
            let request = QueryAllBalancesRequest {
                address,
                ..Default::default()
            };
            show_page::<q::bank::Balances>(global, request, &page, |r| {
                if r.balances.is_empty() {
                    return "no balances".into();
                }
                let coins: Vec<_> = r
                    .balances
                    .iter()
                    .map(|c| format!("{}{}", c.amount, c.denom))
                    .collect();
                coins.join("\n")
            })
            .await?;
        }
        Command::Auth(AuthQuery::Account { address, prove }) => {
            let (account, verified) = if prove.prove {
                let proven =
                    prove::read(&client, &prove, &gonka_auth::keys::account(&address)).await?;
                let account = proven
                    .value
                    .map(|bytes| gonka_proto::auth::Account::decode(bytes.as_slice()))
                    .transpose()
                    .context("the proven account is not an Account")?;
                (account, Some(proven.height))
            } else {
                (client.account(&address).await?, None)
            };
            let Some(account) = account else {
                let at = verified.map_or(String::new(), |h| format!(" (verified at height {h})"));
                bail!(
                    "account {address} does not exist{at}; it is created when it first receives funds"
                );
            };
            let pub_key = hex::encode(&account.pub_key);
            let mut json = json!({"address": account.address, "account_number": account.account_number, "sequence": account.sequence, "pub_key": pub_key});
            if let Some(height) = verified {
                json["verified_at_height"] = json!(height);
            }
            out.print(json, || {
                let mut text = format!(
                    "address: {}\naccount_number: {}\nsequence: {}\npub_key: {}",
                    account.address,
                    account.account_number,
                    account.sequence,
                    if pub_key.is_empty() {
                        "(none yet)"
                    } else {
                        &pub_key
                    }
                );
                if let Some(height) = verified {
                    text.push_str(&format!("\nverified at height {height}"));
                }
                text
            });
        }
        Command::Auth(AuthQuery::Params) => {
            let params = client
                .query::<q::auth::Params>(&Default::default())
                .await?
                .params
                .unwrap_or_default();
            out.print(to_json(&params), || {
                format!(
                    "max_tx_bytes: {}\nmax_msgs_per_tx: {}\nmin_gas_price: {}ngnk per gas unit\n\
                     gas per tx byte: {}\ngas per signature check: {}\n\
                     gas per read: {} + {} per byte\ngas per write: {} + {} per byte",
                    params.max_tx_bytes,
                    params.max_msgs_per_tx,
                    params.min_gas_price,
                    params.tx_size_cost_per_byte,
                    params.sig_verify_cost_secp256k1,
                    params.read_cost_flat,
                    params.read_cost_per_byte,
                    params.write_cost_flat,
                    params.write_cost_per_byte
                )
            });
        }
        Command::Tx { hash } => {
            let parsed = tendermint::Hash::from_hex_upper(
                tendermint::hash::Algorithm::Sha256,
                &hash.to_uppercase(),
            )
            .with_context(|| format!("{hash:?} is not a 64-character hex tx hash"))?;
            let Some(found) = client.find_tx(parsed).await? else {
                bail!(
                    "tx {hash} is not in any block known to {} (yet)",
                    client.url()
                );
            };
            out.print(
                json!({"hash": found.hash, "height": found.height, "code": found.code, "codespace": found.codespace, "log": found.log}),
                || format!("hash: {}\nheight: {}\ncode: {}\nlog: {}", found.hash, found.height, found.code, found.log),
            );
        }
    }
    Ok(())
}

/// Which page of a list to show: the first by default; a page that is not the last ends
/// with the `--page-key` of the next one.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct PageArgs {
    /// Where the page starts: the next page key a previous page printed (base64); the
    /// first page when omitted.
    #[arg(long, value_name = "BASE64")]
    page_key: Option<String>,
    /// Most items the page reads (default 100; above 1000 the chain clamps it to 1000).
    #[arg(long)]
    limit: Option<u64>,
}

impl PageArgs {
    /// The request's `pagination`.
    fn request(&self) -> Result<Option<q::page::PageRequest>> {
        let key = match &self.page_key {
            Some(key) => crate::b64::decode(key)
                .map_err(|e| anyhow::anyhow!("--page-key {key:?} is not base64: {e}"))?,
            None => Vec::new(),
        };
        Ok(Some(q::page::PageRequest {
            key,
            limit: self.limit.unwrap_or(0),
        }))
    }
}

/// [`show`] for a list query: asks the page `page` names and ends the text with the next
/// page's `--page-key` when the list goes on (JSON carries it as `pagination.next_key`).
async fn show_page<Q: ListQuery>(
    global: &Global,
    request: Q::Request,
    page: &PageArgs,
    text: impl FnOnce(&Q::Response) -> String,
) -> Result<()>
where
    Q::Response: serde::Serialize,
{
    show_page_as::<Q>(global, request, page, to_json, text).await
}

/// [`show_page`], rendering the JSON output with `json`.
async fn show_page_as<Q: ListQuery>(
    global: &Global,
    mut request: Q::Request,
    page: &PageArgs,
    json: impl FnOnce(&Q::Response) -> serde_json::Value,
    text: impl FnOnce(&Q::Response) -> String,
) -> Result<()> {
    *Q::page(&mut request) = page.request()?;
    show_as::<Q>(global, request, json, |r| {
        let shown = text(r);
        match Q::next_key(r) {
            [] => shown,
            next => format!("{shown}\n\n(more: --page-key {})", crate::b64::encode(next)),
        }
    })
    .await
}

/// Runs the query `path` with `request` and prints the `R` it answers: as JSON (the message's
/// fields, see [`to_json`]) or as `text` renders it.
async fn show<Q: Query>(
    global: &Global,
    request: Q::Request,
    text: impl FnOnce(&Q::Response) -> String,
) -> Result<()>
where
    Q::Response: serde::Serialize,
{
    show_as::<Q>(global, request, to_json, text).await
}

/// [`show`] for a query that answers one stored value; with `--prove`, the value is read
/// from the store at `key` with its proof instead ([`prove::read`]) and answered as the module
/// would (`wrap` puts it into the response), with the height it was verified at. `absent`
/// says what a proven absence means.
async fn show_value<Q: Query, V: Message + Default>(
    global: &Global,
    request: Q::Request,
    (prove, key): (&ProveArgs, Vec<u8>),
    wrap: impl FnOnce(V) -> Q::Response,
    absent: impl FnOnce() -> String,
    text: impl FnOnce(&Q::Response) -> String,
) -> Result<()>
where
    Q::Response: serde::Serialize,
{
    if !prove.prove {
        return show::<Q>(global, request, text).await;
    }
    let proven = prove::read(&global.client()?, prove, &key).await?;
    let Some(bytes) = proven.value else {
        bail!("{} (verified at height {})", absent(), proven.height);
    };
    let response = wrap(V::decode(bytes.as_slice()).context("the proven value does not decode")?);
    let mut json = to_json(&response);
    json["verified_at_height"] = json!(proven.height);
    global.output.print(json, || {
        format!("{}\nverified at height {}", text(&response), proven.height)
    });
    Ok(())
}

/// Like [`show`], rendering the JSON output with `json`.
async fn show_as<Q: Query>(
    global: &Global,
    request: Q::Request,
    json: impl FnOnce(&Q::Response) -> serde_json::Value,
    text: impl FnOnce(&Q::Response) -> String,
) -> Result<()> {
    let response = global.client()?.query::<Q>(&request).await?;
    global.output.print(json(&response), || text(&response));
    Ok(())
}
