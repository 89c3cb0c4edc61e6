//! Disputes queries ([`gonka_proto::query::disputes`]).

use gonka_proto::disputes as pb;
use gonka_proto::query::disputes as q;
use gonka_proto::query::page::{PageRequest, PageResponse};
use gonka_sdk::{ErrorCode, Pager, QueryRouter, Result, SdkError, StateRead};

use crate::sampling::sample_rate_ppm;
use crate::{kind, status, DisputesError, DisputesRead};

/// Answers a disputes query; `None` if `path` is not one.
pub fn route(path: &str, data: &[u8], state: &dyn StateRead) -> Option<Result<Vec<u8>>> {
    QueryRouter::new(path, data)
        .on::<q::Dispute>(|r| {
            let dispute = state.dispute(r.id)?.ok_or_else(|| {
                DisputesError::UnknownDispute.err(format!("no dispute with id {}", r.id))
            })?;
            Ok(pb::QueryDisputeResponse {
                dispute: Some(dispute),
            })
        })
        .on::<q::List>(|r| {
            if !(r.status.is_empty() || status::DISPUTE_ALL.contains(&r.status.as_str())) {
                return Err(DisputesError::InvalidMsg.err(format!(
                    "status must be empty or one of {}, found {:?}",
                    status::DISPUTE_ALL.join(", "),
                    r.status
                )));
            }
            let page = state.disputes_page(&r.status, r.pagination.as_ref())?;
            Ok(pb::QueryDisputesResponse {
                disputes: page.items,
                pagination: page.pagination,
            })
        })
        .on::<q::Participant>(|r| {
            let page = state.disputes_of_page(&r.address, r.pagination.as_ref())?;
            Ok(pb::QueryParticipantDisputesResponse {
                disputes: page.items,
                pagination: page.pagination,
            })
        })
        .on::<q::Pending>(|r| pending(state, &r.validator, r.pagination.as_ref()))
        .on::<q::RevealsDue>(|r| {
            let page = state.reveals_due_page(&r.transfer_agent, r.pagination.as_ref())?;
            Ok(pb::QueryRevealsDueResponse {
                reveals: page.items,
                pagination: page.pagination,
            })
        })
        .on::<q::Validation>(|r| {
            let validation = state.validation(&r.inference_id)?.ok_or_else(|| {
                DisputesError::NotSampled.err(format!(
                    "work record {:?} was not sampled for validation",
                    r.inference_id
                ))
            })?;
            Ok(pb::QueryValidationResponse {
                validation: Some(validation),
            })
        })
        .on::<q::Stats>(|r| {
            let executor = state.executor_stats(&r.address)?;
            Ok(pb::QueryStatsResponse {
                current_rate_ppm: sample_rate_ppm(&state.disputes_params()?, executor.clean_streak),
                executor: Some(executor),
                reputation: Some(state.reputation(&r.address)?),
            })
        })
        .on::<q::Params>(|_| {
            Ok(pb::QueryParamsResponse {
                params: Some(state.disputes_params()?),
            })
        })
        .answer()
}

/// Page keys of `/disputes/pending` start with one of these bytes: which index the page goes
/// on in (the validations owed, then the disputes the validator may owe a vote in). They
/// sort in that order, so page keys only grow, as clients check.
const VALIDATIONS: u8 = b'p';
const DISPUTES: u8 = b'v';

/// Pending validations of `validator`, then open disputes on whose committee it has not
/// voted yet: one page over both indexes, under one budget.
fn pending(
    state: &dyn StateRead,
    validator: &str,
    request: Option<&PageRequest>,
) -> Result<pb::QueryPendingResponse> {
    let key = request.map_or(&[][..], |r| &r.key);
    let (in_validations, start) = match key.split_first() {
        None => (true, &[][..]),
        Some((&VALIDATIONS, rest)) => (true, rest),
        Some((&DISPUTES, rest)) => (false, rest),
        Some(_) => {
            return Err(SdkError::InvalidPage.err(format!(
                "a /disputes/pending page key starts with 'p' or 'v', found {:?}",
                String::from_utf8_lossy(key)
            )))
        }
    };
    let mut pager = Pager::new(request);
    let mut work = Vec::new();
    let mut disputes_from = start;
    if in_validations {
        let next =
            state.scan_pending_validations(validator, &mut pager, start, &mut work, |v| {
                Some(pb::PendingWork {
                    kind: kind::VALIDATION.into(),
                    inference_id: v.inference_id,
                    dispute_id: 0,
                    model: v.model,
                    executor_node: v.executor_node,
                    executor_host: v.executor_host,
                    transfer_agent: v.transfer_agent,
                    deadline_height: v.deadline_height,
                })
            })?;
        if let Some(next) = next {
            return Ok(pending_page(work, VALIDATIONS, Some(next)));
        }
        disputes_from = &[];
    }
    let next = state.scan_disputes_of(validator, &mut pager, disputes_from, &mut work, |d| {
        let owes = d.status == status::OPEN
            && d.committee.iter().any(|m| m == validator)
            && !d.votes.iter().any(|v| v.voter == validator);
        owes.then(|| pb::PendingWork {
            kind: "dispute".into(),
            inference_id: d.inference_id,
            dispute_id: d.id,
            model: d.model,
            executor_node: d.executor_node,
            executor_host: d.executor_host,
            transfer_agent: d.transfer_agent,
            deadline_height: d.deadline_height,
        })
    })?;
    Ok(pending_page(work, DISPUTES, next))
}

fn pending_page(
    work: Vec<pb::PendingWork>,
    index: u8,
    next: Option<Vec<u8>>,
) -> pb::QueryPendingResponse {
    let next_key = next.map_or_else(Vec::new, |suffix| {
        let mut key = vec![index];
        key.extend_from_slice(&suffix);
        key
    });
    pb::QueryPendingResponse {
        work,
        pagination: Some(PageResponse { next_key }),
    }
}

#[cfg(test)]
mod tests {
    use gonka_proto::disputes::{
        Dispute, PendingWork, QueryDisputesRequest, QueryParticipantDisputesRequest,
        QueryPendingRequest, Validation,
    };
    use gonka_proto::query::page::PageRequest;
    use gonka_sdk::{assert_pages, Delta, MemoryState};

    use super::*;
    use crate::DisputesWrite;

    const VALIDATOR: &str = "gonka1validator";

    fn dispute(id: u64) -> Dispute {
        Dispute {
            id,
            inference_id: format!("{id:064x}"),
            status: if id.is_multiple_of(3) {
                status::OPEN
            } else {
                status::DISPUTE_ALL[1]
            }
            .into(),
            accuser: "gonka1accuser".into(),
            executor_host: format!("gonka1host{}", id % 2),
            committee: if id.is_multiple_of(2) {
                vec![VALIDATOR.into()]
            } else {
                vec!["gonka1other".into()]
            },
            ..Default::default()
        }
    }

    fn validation(n: usize) -> Validation {
        Validation {
            inference_id: format!("{n:064x}"),
            validator: VALIDATOR.into(),
            status: status::PENDING.into(),
            deadline_height: 50,
            ..Default::default()
        }
    }

    fn owed_validation(v: &Validation) -> PendingWork {
        PendingWork {
            kind: kind::VALIDATION.into(),
            inference_id: v.inference_id.clone(),
            deadline_height: v.deadline_height,
            ..Default::default()
        }
    }

    fn owed_vote(d: &Dispute) -> PendingWork {
        PendingWork {
            kind: "dispute".into(),
            inference_id: d.inference_id.clone(),
            dispute_id: d.id,
            executor_host: d.executor_host.clone(),
            ..Default::default()
        }
    }

    #[test]
    fn every_list_spans_its_pages() {
        let empty = MemoryState::default();
        let mut state = Delta::new(&empty);
        let disputes: Vec<Dispute> = (0..16).map(dispute).collect();
        disputes.iter().for_each(|d| state.insert_dispute(d));
        let validations: Vec<Validation> = (100..107).map(validation).collect();
        validations.iter().for_each(|v| state.put_validation(v));
        let route = |path: &str, data: &[u8]| route(path, data, &state);

        assert_pages::<q::List>(route, Default::default(), &disputes);
        let open: Vec<Dispute> = disputes
            .iter()
            .filter(|d| d.status == status::OPEN)
            .cloned()
            .collect();
        let request = QueryDisputesRequest {
            status: status::OPEN.into(),
            ..Default::default()
        };
        assert_pages::<q::List>(route, request, &open);
        let of_host: Vec<Dispute> = disputes.iter().filter(|d| d.id % 2 == 1).cloned().collect();
        let request = QueryParticipantDisputesRequest {
            address: "gonka1host1".into(),
            ..Default::default()
        };
        assert_pages::<q::Participant>(route, request, &of_host);

        // The validations owed, then the open disputes whose committee still waits for the
        // validator's vote, across both indexes.
        let owed: Vec<PendingWork> = validations
            .iter()
            .map(owed_validation)
            .chain(
                disputes
                    .iter()
                    .filter(|d| d.status == status::OPEN && d.id % 2 == 0)
                    .map(owed_vote),
            )
            .collect();
        assert!(owed.len() > validations.len());
        let request = QueryPendingRequest {
            validator: VALIDATOR.into(),
            ..Default::default()
        };
        assert_pages::<q::Pending>(route, request, &owed);
    }

    #[test]
    fn a_pending_page_key_it_never_hands_out_is_refused() {
        let empty = MemoryState::default();
        let request = QueryPendingRequest {
            validator: VALIDATOR.into(),
            pagination: Some(PageRequest {
                key: b"x".to_vec(),
                limit: 1,
            }),
        };
        let err = route(
            <q::Pending as gonka_proto::query::Query>::PATH,
            &prost::Message::encode_to_vec(&request),
            &empty,
        );
        let err = err.unwrap().unwrap_err();
        assert_eq!((err.codespace, err.code), ("sdk", 7));
    }
}
