//! Auth queries: gonka paths and the standard Cosmos gRPC-over-ABCI path.

use cosmrs::proto::cosmos::auth::v1beta1 as cosmos_auth;
use cosmrs::proto::cosmos::crypto::secp256k1::PubKey as CosmosPubKey;
use gonka_proto::auth::{
    Account, QueryAccountRequest, QueryAccountResponse, QueryParamsRequest, QueryParamsResponse,
};
use gonka_sdk::{decode_request, type_url, Any, ErrorCode, Result, StateRead};
use prost::Message;

use crate::{validate_address, AuthError, AuthRead};

/// Dispatches `path` to its handler; `None` if it is not an auth path.
pub fn route(path: &str, data: &[u8], state: &dyn StateRead) -> Option<Result<Vec<u8>>> {
    let answer = match path {
        "/auth/account" => account(state, decode_request(data)),
        "/auth/params" => params(state, decode_request(data)),
        "/cosmos.auth.v1beta1.Query/Account" => cosmos_account(state, decode_request(data)),
        _ => return None,
    };
    Some(answer)
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

fn account(state: &dyn StateRead, request: Result<QueryAccountRequest>) -> Result<Vec<u8>> {
    let account = lookup(state, &request?.address)?;
    Ok(QueryAccountResponse {
        account: Some(account),
    }
    .encode_to_vec())
}

fn params(state: &dyn StateRead, request: Result<QueryParamsRequest>) -> Result<Vec<u8>> {
    request?;
    Ok(QueryParamsResponse {
        params: Some(state.auth_params()?),
    }
    .encode_to_vec())
}

/// Answers with `cosmos.auth.v1beta1.BaseAccount` packed in an Any, as stock clients expect.
fn cosmos_account(
    state: &dyn StateRead,
    request: Result<cosmos_auth::QueryAccountRequest>,
) -> Result<Vec<u8>> {
    let account = lookup(state, &request?.address)?;
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
    }
    .encode_to_vec())
}
