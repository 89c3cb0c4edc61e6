//! The query router: `/store/key` (raw value, optionally with an ics23 proof, at any
//! committed height) and module paths (at the latest committed height).

use gonka_sdk::{Error, ErrorCode, SdkError};
use prost::Message;
use tendermint_proto::v0_38::abci::ResponseQuery;
use tendermint_proto::v0_38::crypto::{ProofOp, ProofOps};

use crate::App;

/// Proof op type of the JMT's ics23 proofs in `/store/key` answers.
pub const PROOF_OP_TYPE: &str = "ics23:jmt";

/// Answers one ABCI query. Errors are reported in the response, never by panicking.
pub fn answer(app: &App, path: &str, data: &[u8], height: i64, prove: bool) -> ResponseQuery {
    let latest =
        match app.store().latest_version() {
            Ok(Some(latest)) => latest,
            Ok(None) => return error(SdkError::UnknownQuery.err(
                "no block has been committed yet; wait for the chain to produce its first block",
            )),
            Err(e) => return error(SdkError::Internal.err(format!("store failure: {e:#}"))),
        };
    let requested = match u64::try_from(height) {
        Ok(0) => latest,
        Ok(h) if h <= latest => h,
        _ => {
            return error(SdkError::UnknownQuery.err(format!(
                "height {height} is not committed; the latest committed height is {latest}"
            )))
        }
    };
    let mut response = if path == "/store/key" {
        store_key(app, data, requested, prove)
    } else if requested != latest {
        Err(SdkError::UnknownQuery.err(format!(
            "module queries read the latest height {latest}; for height {requested} use /store/key"
        )))
    } else {
        module_query(app, path, data)
    }
    .unwrap_or_else(error);
    response.height = requested as i64;
    response
}

fn module_query(app: &App, path: &str, data: &[u8]) -> Result<ResponseQuery, Error> {
    let value = app
        .modules()
        .iter()
        .find_map(|module| module.query(path, data, app.store()))
        .unwrap_or_else(|| {
            Err(SdkError::UnknownQuery.err(format!(
                "no module answers query path {path:?}; paths look like /bank/balance, /auth/account or /store/key"
            )))
        })?;
    Ok(ResponseQuery {
        value: value.into(),
        ..Default::default()
    })
}

fn store_key(app: &App, key: &[u8], version: u64, prove: bool) -> Result<ResponseQuery, Error> {
    let internal = |e: anyhow::Error| SdkError::Internal.err(format!("store failure: {e:#}"));
    let (value, proof_ops) = if prove {
        let (value, proof) = app.store().get_with_proof(key, version).map_err(internal)?;
        let op = ProofOp {
            r#type: PROOF_OP_TYPE.into(),
            key: key.to_vec(),
            data: proof.encode_to_vec(),
        };
        (value, Some(ProofOps { ops: vec![op] }))
    } else {
        (app.store().get_at(key, version).map_err(internal)?, None)
    };
    Ok(ResponseQuery {
        key: key.to_vec().into(),
        value: value.unwrap_or_default().into(),
        proof_ops,
        ..Default::default()
    })
}

fn error(error: Error) -> ResponseQuery {
    ResponseQuery {
        code: error.code,
        codespace: error.codespace.into(),
        log: error.log,
        ..Default::default()
    }
}
