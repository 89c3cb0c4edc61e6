//! Inference queries ([`gonka_proto::query::inference`]).

use gonka_proto::inference as pb;
use gonka_proto::query::inference as q;
use gonka_sdk::{ErrorCode, QueryRouter, Result, StateRead};

use crate::{InferenceError, InferenceRead};

/// Answers an inference query; `None` if `path` is not one.
pub fn route(path: &str, data: &[u8], state: &dyn StateRead) -> Option<Result<Vec<u8>>> {
    QueryRouter::new(path, data)
        .on::<q::Models>(|r| {
            let page = state.models_page(r.pagination.as_ref())?;
            Ok(pb::QueryModelsResponse {
                models: page.items,
                pagination: page.pagination,
            })
        })
        .on::<q::Nodes>(|r| {
            let page = state.nodes_page(&r.host, r.pagination.as_ref())?;
            Ok(pb::QueryNodesResponse {
                nodes: page.items,
                pagination: page.pagination,
            })
        })
        .on::<q::Node>(|r| {
            let node = state.node(&r.node_id)?.ok_or_else(|| {
                InferenceError::UnknownNode.err(format!("node {:?} is not registered", r.node_id))
            })?;
            Ok(pb::QueryNodeResponse { node: Some(node) })
        })
        .on::<q::TransferAgents>(|r| {
            let page = state.transfer_agents_page(r.pagination.as_ref())?;
            Ok(pb::QueryTransferAgentsResponse {
                transfer_agents: page.items,
                pagination: page.pagination,
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
            let page = state.records_page(r.epoch, &r.executor, r.pagination.as_ref())?;
            Ok(pb::QueryRecordsResponse {
                records: page.items,
                pagination: page.pagination,
            })
        })
        .on::<q::Params>(|_| {
            Ok(pb::QueryParamsResponse {
                params: Some(state.inference_params()?),
            })
        })
        .answer()
}

#[cfg(test)]
mod tests {
    use gonka_proto::inference::{
        Model, Node, QueryNodesRequest, QueryRecordsRequest, StoredRecord, TransferAgent,
        WorkRecord,
    };
    use gonka_sdk::{assert_pages, Delta, MemoryState};

    use super::*;
    use crate::InferenceWrite;

    fn record(n: usize, epoch: u64, executor: &str) -> StoredRecord {
        StoredRecord {
            record: Some(WorkRecord {
                inference_id: format!("{n:064x}"),
                executor_node: executor.into(),
                ..Default::default()
            }),
            epoch,
            cost: n.to_string(),
            ..Default::default()
        }
    }

    #[test]
    fn every_list_spans_its_pages() {
        let empty = MemoryState::default();
        let mut state = Delta::new(&empty);
        let models: Vec<Model> = (0..9)
            .map(|i| Model {
                id: format!("org/model-{i}"),
                ..Default::default()
            })
            .collect();
        let nodes: Vec<Node> = (0..14)
            .map(|i| Node {
                id: format!("node-{i:02}"),
                host: format!("gonka1host{}", i % 3),
                ..Default::default()
            })
            .collect();
        let agents: Vec<TransferAgent> = (0..6)
            .map(|i| TransferAgent {
                address: format!("gonka1ta{i}"),
                ..Default::default()
            })
            .collect();
        let records: Vec<StoredRecord> = (0..17)
            .map(|n| record(n, 3, if n % 2 == 0 { "node-00" } else { "node-01" }))
            .collect();
        models.iter().for_each(|m| state.put_model(m).unwrap());
        nodes.iter().for_each(|n| state.put_node(n));
        agents.iter().for_each(|t| state.put_transfer_agent(t));
        records.iter().for_each(|r| state.put_record(r));
        state.put_record(&record(99, 4, "node-00"));
        let route = |path: &str, data: &[u8]| route(path, data, &state);

        assert_pages::<q::Models>(route, Default::default(), &models);
        assert_pages::<q::Nodes>(route, Default::default(), &nodes);
        let of_host: Vec<Node> = nodes
            .iter()
            .filter(|n| n.host == "gonka1host1")
            .cloned()
            .collect();
        let request = QueryNodesRequest {
            host: "gonka1host1".into(),
            ..Default::default()
        };
        assert_pages::<q::Nodes>(route, request, &of_host);
        assert_pages::<q::TransferAgents>(route, Default::default(), &agents);
        let request = QueryRecordsRequest {
            epoch: 3,
            ..Default::default()
        };
        assert_pages::<q::Records>(route, request, &records);
        let of_executor: Vec<StoredRecord> = records
            .iter()
            .filter(|r| r.record.as_ref().unwrap().executor_node == "node-01")
            .cloned()
            .collect();
        let request = QueryRecordsRequest {
            epoch: 3,
            executor: "node-01".into(),
            ..Default::default()
        };
        assert_pages::<q::Records>(route, request, &of_executor);
    }
}
