//! Inference queries ([`gonka_proto::query::inference`]).

use gonka_proto::inference as pb;
use gonka_proto::query::inference as q;
use gonka_sdk::{ErrorCode, QueryRouter, Result, StateRead};

use crate::{InferenceError, InferenceRead};

/// Answers an inference query; `None` if `path` is not one.
pub fn route(path: &str, data: &[u8], state: &dyn StateRead) -> Option<Result<Vec<u8>>> {
    QueryRouter::new(path, data)
        .on::<q::Models>(|_| {
            Ok(pb::QueryModelsResponse {
                models: state.models()?,
            })
        })
        .on::<q::Nodes>(|r| {
            let nodes = state
                .nodes()?
                .into_iter()
                .filter(|n| r.host.is_empty() || n.host == r.host)
                .collect();
            Ok(pb::QueryNodesResponse { nodes })
        })
        .on::<q::Node>(|r| {
            let node = state.node(&r.node_id)?.ok_or_else(|| {
                InferenceError::UnknownNode.err(format!("node {:?} is not registered", r.node_id))
            })?;
            Ok(pb::QueryNodeResponse { node: Some(node) })
        })
        .on::<q::TransferAgents>(|_| {
            Ok(pb::QueryTransferAgentsResponse {
                transfer_agents: state.transfer_agents()?,
            })
        })
        .on::<q::Record>(|r| {
            let record = state.record(&r.inference_id)?.ok_or_else(|| {
                InferenceError::UnknownRecord.err(format!(
                    "no work record with inference id {:?}",
                    r.inference_id
                ))
            })?;
            Ok(pb::QueryRecordResponse {
                record: Some(record),
            })
        })
        .on::<q::Records>(|r| {
            let records = if r.executor.is_empty() {
                state.records_of_epoch(r.epoch)?
            } else {
                state.records_of_executor(&r.executor, r.epoch)?
            };
            Ok(pb::QueryRecordsResponse { records })
        })
        .on::<q::Params>(|_| {
            Ok(pb::QueryParamsResponse {
                params: Some(state.inference_params()?),
            })
        })
        .answer()
}
