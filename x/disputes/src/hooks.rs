//! Block hook: expire validations and disputes, sample the records stored in the last block
//! (x/inference queues them as it stores them, so this work follows the block, not the
//! epoch).

use gonka_bls::beacon::{purpose, seed};
use gonka_inference::{InferenceRead, InferenceWrite};
use gonka_proto::disputes::Validation;
use gonka_sdk::{BlockContext, Result, StateWrite};

use crate::sampling::{assign_validator, given_sampled, is_sampled, record_seed, sample_rate_ppm};
use crate::settle::{self, note_miss, ModelValidators, Opening};
use crate::{events, kind, status, DisputesRead, DisputesWrite};

/// Before the block's transactions: the disputes opened in the last block get their
/// committees, validations and disputes whose deadline was the last block are settled
/// (validations first, then disputes, each in key order), then the records stored in the
/// last block are sampled with the last block's validation-sampling seed.
///
/// A validation due is either still pending (its validator missed the deadline; a dispute
/// of the record waiting for the validator's commit now asks for the reveal) or committed
/// with its output never revealed (the transfer agent withheld it: a `reveal` dispute
/// settles that at once, unless the record's dispute decides it).
pub fn begin_block(ctx: &BlockContext, state: &mut dyn StateWrite) -> Result<()> {
    let draws = state.take_committee_draws(ctx.height)?;
    if !draws.is_empty() {
        match seed(state, purpose::DISPUTE_COMMITTEE, ctx.height - 1)? {
            Some(height_seed) => {
                for id in draws {
                    settle::draw_committee(state, ctx.height, &height_seed, id)?;
                }
            }
            // The last height has no randomness: the draws wait for the next block.
            None => {
                for id in draws {
                    state.queue_committee_draw(ctx.height, id);
                }
            }
        }
    }
    for id in state.take_validations_due(ctx.height)? {
        let Some(mut validation) = state.validation(&id)? else {
            continue;
        };
        let dispute = match state.record_dispute(&id)? {
            Some(d) => state.dispute(d)?,
            None => None,
        };
        if validation.status == status::PENDING {
            validation.status = status::MISSED.into();
            state.put_validation(&validation);
            state.emit(events::validation_missed(&validation));
            note_miss(state, &validation.validator)?;
            if let Some(d) = dispute.filter(|d| d.status == status::OPEN) {
                settle::ask_reveal(state, &id, &d.transfer_agent, d.deadline_height)?;
            }
        } else if validation.status == status::COMMITTED {
            validation.status = status::OUTPUT_WITHHELD.into();
            state.put_validation(&validation);
            state.emit(events::submitted(&validation, "output_withheld", 0));
            match dispute {
                Some(d) if d.status == status::OPEN => {}
                Some(_) => state.drop_reveal_due(&validation.transfer_agent, &id),
                None => {
                    if let Some(stored) = state.record(&id)? {
                        settle::open(
                            state,
                            ctx.height,
                            &stored,
                            Opening {
                                kind: kind::REVEAL,
                                accuser: &validation.validator,
                                accuser_commitment: validation.result_commitment.clone(),
                                deposit: 0,
                            },
                        )?;
                    }
                }
            }
        }
    }
    for id in state.take_disputes_due(ctx.height)? {
        let Some(mut dispute) = state.dispute(id)? else {
            continue;
        };
        // A dispute still waiting for its committee gets its deadline when it is drawn.
        if dispute.status == status::OPEN && !dispute.committee.is_empty() {
            settle::settle_at_deadline(state, ctx.height, &mut dispute)?;
        }
    }
    sample_queued(ctx, state)
}

/// Samples every record stored since the last sampling (x/inference's queue), in
/// inference-id order, with the last height's seed; while the last height has none (no
/// group signature), the records wait in the queue.
fn sample_queued(ctx: &BlockContext, state: &mut dyn StateWrite) -> Result<()> {
    if !state.has_new_records()? {
        return Ok(());
    }
    let Some(height_seed) = seed(state, purpose::VALIDATION_SAMPLING, ctx.height - 1)? else {
        return Ok(());
    };
    let queued = state.take_new_records()?;
    let params = state.disputes_params()?;
    let mut validators = ModelValidators::default();
    for id in queued {
        let Some(stored) = state.record(&id)? else {
            continue;
        };
        let host = stored.executor_host.clone();
        let mut stats = state.executor_stats(&host)?;
        stats.records += 1;
        let rate_ppm = sample_rate_ppm(&params, stats.clean_streak);
        let seed = record_seed(&height_seed, &id);
        let validator = if is_sampled(&seed, given_sampled(rate_ppm, stored.sampled_ppm)) {
            // Neither the executor's host nor the record's transfer agent (which holds the
            // answer and could vouch without re-executing) validates it.
            let parties = [host.as_str(), stored.transfer_agent.as_str()];
            let model = stored.record.as_ref().map_or("", |r| r.model.as_str());
            assign_validator(&seed, &validators.candidates(state, model, &parties)?)
        } else {
            None
        };
        if let Some(validator) = validator {
            stats.sampled += 1;
            let record = stored.record.clone().unwrap_or_default();
            let validation = Validation {
                inference_id: id,
                executor_host: host,
                executor_node: record.executor_node,
                model: record.model,
                transfer_agent: stored.transfer_agent.clone(),
                validator,
                sampled_height: ctx.height,
                deadline_height: ctx.height.saturating_add(params.validation_deadline_blocks),
                rate_ppm,
                status: status::PENDING.into(),
                result_commitment: Vec::new(),
                reveal_deadline_height: 0,
                reward: "0".into(),
                scored: None,
            };
            state.put_validation(&validation);
            state.emit(events::sampled(&validation));
        }
        state.put_executor_stats(&stats);
    }
    Ok(())
}
