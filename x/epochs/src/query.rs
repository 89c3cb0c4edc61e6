//! Epochs queries: `/epochs/current`, `/epochs/epoch`.

use gonka_proto::epochs::{
    QueryCurrentRequest, QueryCurrentResponse, QueryEpochRequest, QueryEpochResponse,
};
use gonka_sdk::{decode_request, ErrorCode, Result, StateRead};
use prost::Message;

use crate::{EpochsError, EpochsRead};

/// Dispatches `path`; `None` if it is not an epochs path.
pub fn route(path: &str, data: &[u8], state: &dyn StateRead) -> Option<Result<Vec<u8>>> {
    let answer = match path {
        "/epochs/current" => decode_request::<QueryCurrentRequest>(data).and_then(|_| {
            Ok(QueryCurrentResponse {
                epoch: Some(state.current_epoch()?),
                params: Some(state.epochs_params()?),
            }
            .encode_to_vec())
        }),
        "/epochs/epoch" => decode_request::<QueryEpochRequest>(data).and_then(|request| {
            let current = state.current_epoch()?;
            let epoch = if request.number == current.number {
                current
            } else {
                state.finished_epoch(request.number)?.ok_or_else(|| {
                    EpochsError::UnknownEpoch.err(format!(
                        "epoch {} has not started; the current epoch is {}",
                        request.number, current.number
                    ))
                })?
            };
            Ok(QueryEpochResponse { epoch: Some(epoch) }.encode_to_vec())
        }),
        _ => return None,
    };
    Some(answer)
}
