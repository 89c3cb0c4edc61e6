//! Auth queries: gonka paths and the standard Cosmos gRPC-over-ABCI path.

use cosmrs::proto::cosmos::auth::v1beta1 as cosmos_auth;
use cosmrs::proto::cosmos::crypto::secp256k1::PubKey as CosmosPubKey;
use gonka_proto::auth::{Account, QueryAccountResponse, QueryParamsResponse};
use gonka_proto::query::auth as q;
use gonka_proto::query::cosmos::{AuthAccount, AuthParams};
use gonka_sdk::{type_url, Any, ErrorCode, QueryRouter, Result, StateRead};
use prost::Message;

use crate::{validate_address, AuthError, AuthRead};

/// Answers an auth query; `None` if `path` is not one.
pub fn route(path: &str, data: &[u8], state: &dyn StateRead) -> Option<Result<Vec<u8>>> {
    QueryRouter::new(path, data)
        .on::<q::Account>(|r| {
            Ok(QueryAccountResponse {
                account: Some(lookup(state, &r.address)?),
            })
        })
        .on::<q::Params>(|_| {
            Ok(QueryParamsResponse {
                params: Some(state.auth_params()?.to_proto()),
            })
        })
        .on::<AuthAccount>(|r| cosmos_account(state, &r.address))
        .on::<AuthParams>(|_| {
            let params = state.auth_params()?.to_proto();
            // In Cosmos terms: one signer per tx, a memo bounded only by the tx's size, and
            // no ed25519 account keys (so no cost for them).
            Ok(cosmos_auth::QueryParamsResponse {
                params: Some(cosmos_auth::Params {
                    max_memo_characters: params.max_tx_bytes,
                    tx_sig_limit: 1,
                    tx_size_cost_per_byte: params.tx_size_cost_per_byte,
                    sig_verify_cost_ed25519: 0,
                    sig_verify_cost_secp256k1: params.sig_verify_cost_secp256k1,
                }),
            })
        })
        .answer()
}

fn lookup(state: &dyn StateRead, address: &str) -> Result<Account> {
    validate_address("address", address)?;
    state.account(address)?.ok_or_else(|| {
        // cosmjs recognises "rpc error: code = NotFound" and reports "no account" instead of failing.
        AuthError::UnknownAccount.err(format!(
            "rpc error: code = NotFound desc = account {address} not found"
        ))
    })
}

/// Answers with `cosmos.auth.v1beta1.BaseAccount` packed in an Any, as stock clients expect.
fn cosmos_account(
    state: &dyn StateRead,
    address: &str,
) -> Result<cosmos_auth::QueryAccountResponse> {
    let account = lookup(state, address)?;
    let pub_key = (!account.pub_key.is_empty()).then(|| Any {
        type_url: type_url::<CosmosPubKey>(),
        value: CosmosPubKey {
            key: account.pub_key.clone(),
        }
        .encode_to_vec(),
    });
    let base = cosmos_auth::BaseAccount {
        address: account.address,
        pub_key,
        account_number: account.account_number,
        sequence: account.sequence,
    };
    Ok(cosmos_auth::QueryAccountResponse {
        account: Some(Any {
            type_url: type_url::<cosmos_auth::BaseAccount>(),
            value: base.encode_to_vec(),
        }),
    })
}
