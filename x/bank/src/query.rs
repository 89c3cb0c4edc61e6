//! Bank queries: the gonka queries ([`gonka_proto::query::bank`]) and the standard Cosmos
//! gRPC-over-ABCI paths stock clients call.

use cosmrs::proto::cosmos::bank::v1beta1 as cosmos_bank;
use cosmrs::proto::cosmos::base::query::v1beta1::{
    PageRequest as CosmosPageRequest, PageResponse as CosmosPageResponse,
};
use cosmrs::proto::cosmos::base::v1beta1::Coin as CosmosCoin;
use gonka_auth::validate_address;
use gonka_proto::bank as pb;
use gonka_proto::query::bank as q;
use gonka_proto::query::cosmos::{
    BankAllBalances, BankBalance, BankDenomMetadata, BankDenomsMetadata, BankSupplyOf,
    BankTotalSupply,
};
use gonka_proto::query::page::PageRequest;
use gonka_sdk::{ErrorCode, QueryRouter, Result, SdkError, StateRead};

use crate::{BankError, BankRead, Coin, DISPLAY_DENOM, DISPLAY_EXPONENT, NATIVE_DENOM};

/// What wallets show of the native denom: base `ngnk`, displayed as `GNK` with exponent 9.
pub fn native_metadata() -> cosmos_bank::Metadata {
    cosmos_bank::Metadata {
        description: "The native token of gonka: fees, stake, escrows and rewards".into(),
        denom_units: vec![
            cosmos_bank::DenomUnit {
                denom: NATIVE_DENOM.into(),
                exponent: 0,
                aliases: vec!["nanognk".into()],
            },
            cosmos_bank::DenomUnit {
                denom: DISPLAY_DENOM.into(),
                exponent: DISPLAY_EXPONENT,
                aliases: Vec::new(),
            },
        ],
        base: NATIVE_DENOM.into(),
        display: DISPLAY_DENOM.into(),
        name: "Gonka".into(),
        symbol: "GNK".into(),
        uri: String::new(),
        uri_hash: String::new(),
    }
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
            validate_address("address", &r.address)?;
            let page = state.balances_page(&r.address, r.pagination.as_ref())?;
            Ok(pb::QueryAllBalancesResponse {
                balances: page.items,
                pagination: page.pagination,
            })
        })
        .on::<q::Supply>(|r| {
            let amount = Coin::new(&r.denom, state.supply(&r.denom)?);
            Ok(pb::QuerySupplyResponse {
                amount: Some(amount.to_proto()),
            })
        })
        .on::<BankBalance>(|r| {
            let coin = balance(state, &r.address, &r.denom)?;
            Ok(cosmos_bank::QueryBalanceResponse {
                balance: Some(cosmos_coin(&coin)),
            })
        })
        .on::<BankSupplyOf>(|r| {
            let amount = Coin::new(&r.denom, state.supply(&r.denom)?);
            Ok(cosmos_bank::QuerySupplyOfResponse {
                amount: Some(cosmos_coin(&amount)),
            })
        })
        .on::<BankTotalSupply>(|r| {
            let request = cosmos_page(r.pagination)?;
            let page = state.supply_page(request.as_ref())?;
            Ok(cosmos_bank::QueryTotalSupplyResponse {
                supply: page.items.into_iter().map(cosmos_of).collect(),
                pagination: page.pagination.map(cosmos_page_response),
            })
        })
        .on::<BankDenomMetadata>(|r| {
            if r.denom != NATIVE_DENOM {
                return Err(BankError::UnknownDenom.err(format!(
                    "no metadata for denom {:?}; the chain's denom is {NATIVE_DENOM}",
                    r.denom
                )));
            }
            Ok(cosmos_bank::QueryDenomMetadataResponse {
                metadata: Some(native_metadata()),
            })
        })
        .on::<BankDenomsMetadata>(|_| {
            Ok(cosmos_bank::QueryDenomsMetadataResponse {
                metadatas: vec![native_metadata()],
                pagination: Some(CosmosPageResponse::default()),
            })
        })
        .on::<BankAllBalances>(|r| {
            validate_address("address", &r.address)?;
            let request = cosmos_page(r.pagination)?;
            let page = state.balances_page(&r.address, request.as_ref())?;
            Ok(cosmos_bank::QueryAllBalancesResponse {
                balances: page.items.into_iter().map(cosmos_of).collect(),
                pagination: page.pagination.map(cosmos_page_response),
            })
        })
        .answer()
}

fn balance(state: &dyn StateRead, address: &str, denom: &str) -> Result<Coin> {
    validate_address("address", address)?;
    Ok(Coin::new(denom, state.balance(address, denom)?))
}

/// The gonka page of a Cosmos `PageRequest`: by key and limit only. An offset or a reverse
/// scan is refused (an offset would make the chain read and skip every earlier row);
/// `count_total` is ignored and `total` answered as 0.
fn cosmos_page(request: Option<CosmosPageRequest>) -> Result<Option<PageRequest>> {
    let Some(request) = request else {
        return Ok(None);
    };
    if request.offset != 0 || request.reverse {
        return Err(SdkError::InvalidPage.err(format!(
            "pages go forward by key only: offset must be 0 and reverse false, found offset {} \
             and reverse {}",
            request.offset, request.reverse
        )));
    }
    Ok(Some(PageRequest {
        key: request.key,
        limit: request.limit,
    }))
}

fn cosmos_of(coin: pb::Coin) -> CosmosCoin {
    CosmosCoin {
        denom: coin.denom,
        amount: coin.amount,
    }
}

fn cosmos_page_response(page: gonka_proto::query::page::PageResponse) -> CosmosPageResponse {
    CosmosPageResponse {
        next_key: page.next_key,
        total: 0,
    }
}

fn cosmos_coin(coin: &Coin) -> CosmosCoin {
    CosmosCoin {
        denom: coin.denom.clone(),
        amount: coin.amount.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use gonka_auth::module_address;
    use gonka_proto::query::Query;
    use gonka_sdk::{assert_pages, Delta, MemoryState};

    use super::*;
    use crate::BankWrite;

    #[test]
    fn balances_span_their_pages() {
        let empty = MemoryState::default();
        let mut state = Delta::new(&empty);
        let address = module_address("pages");
        let coins: Vec<pb::Coin> = (1..=11u128)
            .map(|i| Coin::new(format!("denom{i:02}"), i).to_proto())
            .collect();
        for coin in &coins {
            state.set_balance(&address, &coin.denom, coin.amount.parse().unwrap());
        }
        state.set_balance(&module_address("other"), "denom00", 5);
        let route = |path: &str, data: &[u8]| route(path, data, &state);
        let request = pb::QueryAllBalancesRequest {
            address,
            ..Default::default()
        };
        assert_pages::<q::Balances>(route, request, &coins);
    }

    #[test]
    fn cosmos_all_balances_pages_by_key_and_refuses_offsets() {
        let empty = MemoryState::default();
        let mut state = Delta::new(&empty);
        let address = module_address("pages");
        for i in 0..3 {
            state.set_balance(&address, &format!("d{i}"), 1);
        }
        let ask = |pagination| {
            let request = cosmos_bank::QueryAllBalancesRequest {
                address: address.clone(),
                pagination,
                resolve_denom: false,
            };
            route(
                BankAllBalances::PATH,
                &prost::Message::encode_to_vec(&request),
                &state,
            )
            .unwrap()
            .map(|bytes| {
                <cosmos_bank::QueryAllBalancesResponse as prost::Message>::decode(&bytes[..])
                    .unwrap()
            })
        };
        let first = ask(Some(CosmosPageRequest {
            limit: 2,
            ..Default::default()
        }))
        .unwrap();
        assert_eq!(first.balances.len(), 2);
        let next_key = first.pagination.unwrap().next_key;
        assert_eq!(next_key, b"d2");
        let rest = ask(Some(CosmosPageRequest {
            key: next_key,
            limit: 2,
            ..Default::default()
        }))
        .unwrap();
        assert_eq!(rest.balances[0].denom, "d2");
        assert!(rest.pagination.unwrap().next_key.is_empty());
        let err = ask(Some(CosmosPageRequest {
            offset: 1,
            ..Default::default()
        }))
        .unwrap_err();
        assert_eq!((err.codespace, err.code), ("sdk", 7));
    }
}
