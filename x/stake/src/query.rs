//! Stake queries ([`gonka_proto::query::stake`]).

use gonka_proto::query::stake as q;
use gonka_proto::stake::{
    QueryParamsResponse, QueryParticipantResponse, QueryParticipantsResponse,
    QueryUnbondingResponse, QueryWorkResponse,
};
use gonka_sdk::{QueryRouter, Result, StateRead};

use crate::StakeRead;

/// Answers a stake query; `None` if `path` is not one.
pub fn route(path: &str, data: &[u8], state: &dyn StateRead) -> Option<Result<Vec<u8>>> {
    QueryRouter::new(path, data)
        .on::<q::Participants>(|r| {
            let page = state.participants_page(r.pagination.as_ref())?;
            Ok(QueryParticipantsResponse {
                participants: page.items,
                pagination: page.pagination,
            })
        })
        .on::<q::Participant>(|r| {
            Ok(QueryParticipantResponse {
                participant: Some(state.existing_participant(&r.operator)?),
            })
        })
        .on::<q::Unbonding>(|r| {
            let page = state.unbonding_page(&r.operator, r.pagination.as_ref())?;
            Ok(QueryUnbondingResponse {
                entries: page.items,
                pagination: page.pagination,
            })
        })
        .on::<q::Work>(|r| {
            let page = state.work_page(r.epoch, r.pagination.as_ref())?;
            Ok(QueryWorkResponse {
                credits: page.items,
                pagination: page.pagination,
            })
        })
        .on::<q::Params>(|_| {
            Ok(QueryParamsResponse {
                params: Some(state.stake_params()?.to_proto()),
            })
        })
        .answer()
}

#[cfg(test)]
mod tests {
    use gonka_proto::stake::{
        Participant, QueryUnbondingRequest, QueryWorkRequest, UnbondingEntry, WorkCredit,
    };
    use gonka_sdk::{assert_pages, Delta, MemoryState};

    use super::*;
    use crate::StakeWrite;

    #[test]
    fn every_list_spans_its_pages() {
        let empty = MemoryState::default();
        let mut state = Delta::new(&empty);
        let participants: Vec<Participant> = (0..12)
            .map(|i| Participant {
                operator: format!("gonka1op{i:02}"),
                ..Default::default()
            })
            .collect();
        participants.iter().for_each(|p| state.put_participant(p));
        // Ordered by completion epoch, then operator, then id.
        let entries: Vec<UnbondingEntry> = (0..13u64)
            .map(|i| UnbondingEntry {
                operator: format!("gonka1op{:02}", i % 4),
                amount: "1".into(),
                completes_epoch: 5 + i / 4,
                id: i,
                ..Default::default()
            })
            .collect();
        entries.iter().for_each(|e| state.put_unbonding(e));
        let credits: Vec<WorkCredit> = (0..10)
            .map(|i| WorkCredit {
                epoch: 2,
                operator: format!("gonka1op{i:02}"),
                units: 100 + i,
            })
            .collect();
        credits
            .iter()
            .for_each(|c| state.put_work_units(c.epoch, &c.operator, c.units));
        state.put_work_units(3, "gonka1op00", 1);
        let route = |path: &str, data: &[u8]| route(path, data, &state);

        assert_pages::<q::Participants>(route, Default::default(), &participants);
        assert_pages::<q::Unbonding>(route, Default::default(), &entries);
        let of_one: Vec<UnbondingEntry> = entries
            .iter()
            .filter(|e| e.operator == "gonka1op01")
            .cloned()
            .collect();
        let request = QueryUnbondingRequest {
            operator: "gonka1op01".into(),
            ..Default::default()
        };
        assert_pages::<q::Unbonding>(route, request, &of_one);
        let request = QueryWorkRequest {
            epoch: 2,
            ..Default::default()
        };
        assert_pages::<q::Work>(route, request, &credits);
    }
}
