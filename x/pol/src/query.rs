//! Pol queries ([`gonka_proto::query::pol`]).

use gonka_auth::validate_address;
use gonka_proto::pol as pb;
use gonka_proto::query::pol as q;
use gonka_sdk::{paginate_proto, QueryRouter, Result, StateRead};

use crate::{keys, PolRead};

/// Answers a pol query; `None` if `path` is not one.
pub fn route(path: &str, data: &[u8], state: &dyn StateRead) -> Option<Result<Vec<u8>>> {
    QueryRouter::new(path, data)
        .on::<q::Job>(|r| {
            Ok(pb::QueryJobResponse {
                job: Some(state.existing_job(r.id)?),
            })
        })
        .on::<q::Jobs>(|r| {
            let page = paginate_proto(state, &keys::jobs(), r.pagination.as_ref(), |_, job| {
                Ok(Some(job))
            })?;
            Ok(pb::QueryJobsResponse {
                jobs: page.items,
                pagination: page.pagination,
            })
        })
        .on::<q::Checkpoints>(|r| {
            state.existing_job(r.job_id)?;
            let prefix = match r.round {
                0 => keys::job_checkpoints(r.job_id),
                round => keys::round_checkpoints(r.job_id, round),
            };
            let page = paginate_proto(state, &prefix, r.pagination.as_ref(), |_, c| Ok(Some(c)))?;
            Ok(pb::QueryCheckpointsResponse {
                checkpoints: page.items,
                pagination: page.pagination,
            })
        })
        .on::<q::Duties>(|r| {
            validate_address("validator", &r.validator)?;
            let mut checkpoints = Vec::new();
            for id in state.duties(&r.validator, q::MAX_DUTIES)? {
                checkpoints.extend(state.checkpoint(id.job, id.round, &id.worker)?);
            }
            Ok(pb::QueryDutiesResponse { checkpoints })
        })
        .on::<q::Params>(|_| {
            Ok(pb::QueryParamsResponse {
                params: Some(state.pol_params()?),
            })
        })
        .answer()
}
