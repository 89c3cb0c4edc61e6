//! Bank queries: gonka paths and the standard Cosmos gRPC-over-ABCI paths.

use cosmrs::proto::cosmos::bank::v1beta1 as cosmos_bank;
use cosmrs::proto::cosmos::base::v1beta1::Coin as CosmosCoin;
use gonka_auth::validate_address;
use gonka_proto::bank as pb;
use gonka_sdk::{decode_request, Result, StateRead};
use prost::Message;

use crate::{BankRead, Coin};

/// Dispatches `path` to its handler; `None` if it is not a bank path.
pub fn route(path: &str, data: &[u8], state: &dyn StateRead) -> Option<Result<Vec<u8>>> {
    let answer = match path {
        "/bank/balance" => decode_request(data).and_then(|r: pb::QueryBalanceRequest| {
            let coin = balance(state, &r.address, &r.denom)?;
            Ok(pb::QueryBalanceResponse {
                balance: Some(coin.to_proto()),
            }
            .encode_to_vec())
        }),
        "/bank/balances" => decode_request(data).and_then(|r: pb::QueryAllBalancesRequest| {
            let coins = all_balances(state, &r.address)?;
            Ok(pb::QueryAllBalancesResponse {
                balances: coins.iter().map(Coin::to_proto).collect(),
            }
            .encode_to_vec())
        }),
        "/bank/supply" => decode_request(data).and_then(|r: pb::QuerySupplyRequest| {
            let amount = Coin::new(&r.denom, state.supply(&r.denom)?);
            Ok(pb::QuerySupplyResponse {
                amount: Some(amount.to_proto()),
            }
            .encode_to_vec())
        }),
        "/cosmos.bank.v1beta1.Query/Balance" => {
            decode_request(data).and_then(|r: cosmos_bank::QueryBalanceRequest| {
                let coin = balance(state, &r.address, &r.denom)?;
                Ok(cosmos_bank::QueryBalanceResponse {
                    balance: Some(cosmos_coin(&coin)),
                }
                .encode_to_vec())
            })
        }
        "/cosmos.bank.v1beta1.Query/AllBalances" => {
            decode_request(data).and_then(|r: cosmos_bank::QueryAllBalancesRequest| {
                // Accounts hold a handful of denoms, so everything fits in one page.
                let coins = all_balances(state, &r.address)?;
                Ok(cosmos_bank::QueryAllBalancesResponse {
                    balances: coins.iter().map(cosmos_coin).collect(),
                    pagination: None,
                }
                .encode_to_vec())
            })
        }
        _ => return None,
    };
    Some(answer)
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
