//! The query router: `/store/key` (raw value, optionally with an ics23 proof, at any
//! committed height), `/cosmos.tx.v1beta1.Service/Simulate` (against the mempool state) and
//! module paths (at the latest committed height, or at a past one for queries of single
//! items: [`StoreAt`]).

use cosmrs::proto::cosmos::base::abci::v1beta1::{GasInfo, Result as AbciResult};
use cosmrs::proto::cosmos::tx::v1beta1::{SimulateRequest, SimulateResponse};
use gonka_proto::query::{cosmos::Simulate, Query};
use gonka_sdk::{Error, ErrorCode, SdkError, StateRead, StoreAt};
use prost::Message;
use tendermint_proto::v0_38::abci::ResponseQuery;
use tendermint_proto::v0_38::crypto::{ProofOp, ProofOps};

use crate::App;

use gonka_store::PROOF_OP_TYPE;

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
    } else if path == Simulate::PATH {
        match requested == latest {
            true => simulate(app, data),
            false => Err(SdkError::UnknownQuery.err(format!(
                "simulation runs on the latest state, not at height {requested}"
            ))),
        }
    } else if requested == latest {
        module_query(app, path, data, app.store())
    } else {
        module_query(app, path, data, &StoreAt::new(app.store(), requested))
    }
    .unwrap_or_else(error);
    response.height = requested as i64;
    response
}

fn module_query(
    app: &App,
    path: &str,
    data: &[u8],
    state: &dyn StateRead,
) -> Result<ResponseQuery, Error> {
    let value = app
        .modules()
        .iter()
        .find_map(|module| module.query(path, data, state))
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

/// Slack over `max_tx_bytes` a `SimulateRequest` may take for its own framing.
const SIMULATE_REQUEST_SLACK: u64 = 64;

/// Answers `Simulate`: runs the tx (`tx_bytes`, or the deprecated `tx`) against a copy of the
/// mempool state and reports the gas it used with its events. A tx that fails is answered
/// with its error, as the Cosmos SDK does. The request is bounded by `max_tx_bytes`, so a
/// simulation costs at most what checking the largest tx does.
fn simulate(app: &App, data: &[u8]) -> Result<ResponseQuery, Error> {
    let max = app.max_tx_bytes();
    if data.len() as u64 > max.saturating_add(SIMULATE_REQUEST_SLACK) {
        return Err(SdkError::Decode.err(format!(
            "simulate request is {} bytes; a tx is at most {max} bytes",
            data.len()
        )));
    }
    let request = SimulateRequest::decode(data).map_err(|e| {
        SdkError::Decode.err(format!(
            "query data of {} is not a valid cosmos.tx.v1beta1.SimulateRequest: {e}",
            Simulate::PATH
        ))
    })?;
    #[allow(deprecated)] // the `tx` field, which older clients still send
    let tx_bytes = match (request.tx_bytes.is_empty(), request.tx) {
        (false, _) => request.tx_bytes,
        // A `Tx` encodes exactly as the `TxRaw` of its body and auth info.
        (true, Some(tx)) => tx.encode_to_vec(),
        (true, None) => {
            return Err(SdkError::Decode
                .err("simulate request carries no tx; put the encoded TxRaw in tx_bytes"))
        }
    };
    let outcome = app.simulate(&tx_bytes);
    if outcome.code != 0 {
        return Err(Error {
            codespace: outcome.codespace,
            code: outcome.code,
            log: outcome.log,
        });
    }
    let response = SimulateResponse {
        gas_info: Some(GasInfo {
            gas_wanted: u64::try_from(outcome.gas_wanted).unwrap_or(0),
            gas_used: u64::try_from(outcome.gas_used).unwrap_or(0),
        }),
        result: Some(AbciResult {
            log: outcome.log,
            events: crate::abci::to_abci_events(outcome.events),
            ..Default::default()
        }),
    };
    Ok(ResponseQuery {
        value: response.encode_to_vec().into(),
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
