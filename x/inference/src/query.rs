//! Inference queries: `/inference/models`, `/inference/nodes`, `/inference/node`,
//! `/inference/transfer_agents`, `/inference/record`, `/inference/records`,
//! `/inference/params`.

use gonka_proto::inference as pb;
use gonka_sdk::{decode_request, ErrorCode, Result, StateRead};
use prost::Message;

use crate::{InferenceError, InferenceRead};

/// Dispatches `path`; `None` if it is not an inference path.
pub fn route(path: &str, data: &[u8], state: &dyn StateRead) -> Option<Result<Vec<u8>>> {
    let answer = match path {
        "/inference/models" => decode_request::<pb::QueryModelsRequest>(data).and_then(|_| {
            Ok(pb::QueryModelsResponse {
                models: state.models()?,
            }
            .encode_to_vec())
        }),
        "/inference/nodes" => decode_request::<pb::QueryNodesRequest>(data).and_then(|r| {
            let nodes = state
                .nodes()?
                .into_iter()
                .filter(|n| r.host.is_empty() || n.host == r.host)
                .collect();
            Ok(pb::QueryNodesResponse { nodes }.encode_to_vec())
        }),
        "/inference/node" => decode_request::<pb::QueryNodeRequest>(data).and_then(|r| {
            let node = state.node(&r.node_id)?.ok_or_else(|| {
                InferenceError::UnknownNode.err(format!("node {:?} is not registered", r.node_id))
            })?;
            Ok(pb::QueryNodeResponse { node: Some(node) }.encode_to_vec())
        }),
        "/inference/transfer_agents" => decode_request::<pb::QueryTransferAgentsRequest>(data)
            .and_then(|_| {
                Ok(pb::QueryTransferAgentsResponse {
                    transfer_agents: state.transfer_agents()?,
                }
                .encode_to_vec())
            }),
        "/inference/record" => decode_request::<pb::QueryRecordRequest>(data).and_then(|r| {
            let record = state.record(&r.inference_id)?.ok_or_else(|| {
                InferenceError::UnknownRecord.err(format!(
                    "no work record with inference id {:?}",
                    r.inference_id
                ))
            })?;
            Ok(pb::QueryRecordResponse {
                record: Some(record),
            }
            .encode_to_vec())
        }),
        "/inference/records" => decode_request::<pb::QueryRecordsRequest>(data).and_then(|r| {
            let records = if r.executor.is_empty() {
                state.records_of_epoch(r.epoch)?
            } else {
                state.records_of_executor(&r.executor, r.epoch)?
            };
            Ok(pb::QueryRecordsResponse { records }.encode_to_vec())
        }),
        "/inference/params" => decode_request::<pb::QueryParamsRequest>(data).and_then(|_| {
            Ok(pb::QueryParamsResponse {
                params: Some(state.inference_params()?),
            }
            .encode_to_vec())
        }),
        _ => return None,
    };
    Some(answer)
}
