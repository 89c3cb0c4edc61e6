//! Query routing for `/bls/*` paths.

use gonka_proto::bls as pb;
use gonka_proto::query::bls as q;
use gonka_sdk::{ErrorCode, QueryRouter, Result, StateRead};

use crate::{BlsError, BlsRead};

/// Answers `path` if it is a bls query.
pub fn route(path: &str, data: &[u8], state: &dyn StateRead) -> Option<Result<Vec<u8>>> {
    QueryRouter::new(path, data)
        .on::<q::Key>(|r| {
            let key = state.bls_key(&r.address)?.ok_or_else(|| {
                BlsError::UnknownKey.err(format!(
                    "{} has no BLS key; register one with gonkad tx bls register-key",
                    r.address
                ))
            })?;
            Ok(pb::QueryKeyResponse { key: Some(key) })
        })
        .on::<q::Keys>(|r| {
            let page = state.bls_keys_page(r.pagination.as_ref())?;
            Ok(pb::QueryKeysResponse {
                keys: page.items,
                pagination: page.pagination,
            })
        })
        .answer()
}
