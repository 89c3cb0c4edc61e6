//! Epochs queries ([`gonka_proto::query::epochs`]).

use gonka_proto::epochs::{QueryCurrentResponse, QueryEpochResponse};
use gonka_proto::query::epochs as q;
use gonka_sdk::{ErrorCode, QueryRouter, Result, StateRead};

use crate::{EpochsError, EpochsRead};

/// Answers an epochs query; `None` if `path` is not one.
pub fn route(path: &str, data: &[u8], state: &dyn StateRead) -> Option<Result<Vec<u8>>> {
    QueryRouter::new(path, data)
        .on::<q::Current>(|_| {
            Ok(QueryCurrentResponse {
                epoch: Some(state.current_epoch()?),
                params: Some(state.epochs_params()?),
            })
        })
        .on::<q::Epoch>(|request| {
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
            Ok(QueryEpochResponse { epoch: Some(epoch) })
        })
        .answer()
}
