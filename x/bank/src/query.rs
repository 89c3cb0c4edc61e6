//! Bank queries: the gonka queries ([`gonka_proto::query::bank`]) and the standard Cosmos
//! gRPC-over-ABCI paths stock clients call.

use cosmrs::proto::cosmos::bank::v1beta1 as cosmos_bank;
use cosmrs::proto::cosmos::base::v1beta1::Coin as CosmosCoin;
use gonka_auth::validate_address;
use gonka_proto::bank as pb;
use gonka_proto::query::{bank as q, Query};
use gonka_sdk::{QueryRouter, Result, StateRead};

use crate::{BankRead, Coin};

/// `/cosmos.bank.v1beta1.Query/Balance`.
struct CosmosBalance;

impl Query for CosmosBalance {
    const PATH: &'static str = "/cosmos.bank.v1beta1.Query/Balance";
    type Request = cosmos_bank::QueryBalanceRequest;
    type Response = cosmos_bank::QueryBalanceResponse;
}

/// `/cosmos.bank.v1beta1.Query/AllBalances`.
struct CosmosAllBalances;

impl Query for CosmosAllBalances {
    const PATH: &'static str = "/cosmos.bank.v1beta1.Query/AllBalances";
    type Request = cosmos_bank::QueryAllBalancesRequest;
    type Response = cosmos_bank::QueryAllBalancesResponse;
}

/// Answers a bank query; `None` if `path` is not one.
pub fn route(path: &str, data: &[u8], state: &dyn StateRead) -> Option<Result<Vec<u8>>> {
    QueryRouter::new(path, data)
        .on::<q::Balance>(|r| {
            let coin = balance(state, &r.address, &r.denom)?;
            Ok(pb::QueryBalanceResponse {
                balance: Some(coin.to_proto()),
            })
        })
        .on::<q::Balances>(|r| {
            let coins = all_balances(state, &r.address)?;
            Ok(pb::QueryAllBalancesResponse {
                balances: coins.iter().map(Coin::to_proto).collect(),
            })
        })
        .on::<q::Supply>(|r| {
            let amount = Coin::new(&r.denom, state.supply(&r.denom)?);
            Ok(pb::QuerySupplyResponse {
                amount: Some(amount.to_proto()),
            })
        })
        .on::<CosmosBalance>(|r| {
            let coin = balance(state, &r.address, &r.denom)?;
            Ok(cosmos_bank::QueryBalanceResponse {
                balance: Some(cosmos_coin(&coin)),
            })
        })
        .on::<CosmosAllBalances>(|r| {
            // Accounts hold a handful of denoms, so everything fits in one page.
            let coins = all_balances(state, &r.address)?;
            Ok(cosmos_bank::QueryAllBalancesResponse {
                balances: coins.iter().map(cosmos_coin).collect(),
                pagination: None,
            })
        })
        .answer()
}

fn balance(state: &dyn StateRead, address: &str, denom: &str) -> Result<Coin> {
    validate_address("address", address)?;
    Ok(Coin::new(denom, state.balance(address, denom)?))
}

fn all_balances(state: &dyn StateRead, address: &str) -> Result<Vec<Coin>> {
    validate_address("address", address)?;
    state.balances(address)
}

fn cosmos_coin(coin: &Coin) -> CosmosCoin {
    CosmosCoin {
        denom: coin.denom.clone(),
        amount: coin.amount.to_string(),
    }
}
