//! Block and epoch hooks: expire validations and disputes, sample last block's records,
//! notice the records stored in this block.

use gonka_inference::InferenceRead;
use gonka_proto::disputes::Validation;
use gonka_sdk::{BlockContext, Result, StateRead, StateWrite};

use crate::sampling::{assign_validator, is_sampled, record_seed, sample_rate_ppm};
use crate::settle::{self, active_validators, note_miss};
use crate::{events, keys, status, DisputesRead, DisputesWrite};

/// Index keys under `prefix` whose zero-padded deadline height is below `height`.
fn due(state: &dyn StateRead, prefix: &[u8], height: u64) -> Result<Vec<Vec<u8>>> {
    Ok(state
        .prefix_raw(prefix)?
        .into_iter()
        .map(|(key, _)| key)
        .take_while(|key| keys::deadline_height(&key[prefix.len()..]).is_some_and(|h| h < height))
        .collect())
}

/// Before the block's transactions: validations and disputes whose deadline was the last
/// block are settled (missed validations first, then disputes, each in key order), then
/// the records stored in the last block are sampled with this block's hash.
pub fn begin_block(ctx: &BlockContext, state: &mut dyn StateWrite) -> Result<()> {
    for key in due(state, &keys::validation_deadlines(), ctx.height)? {
        let prefix_len = keys::validation_deadlines().len() + 21;
        let id = String::from_utf8_lossy(&key[prefix_len..]).into_owned();
        state.delete_raw(key);
        let Some(mut validation) = state.validation(&id)? else {
            continue;
        };
        if validation.status != status::PENDING {
            continue;
        }
        validation.status = status::MISSED.into();
        state.put_validation(&validation);
        state.emit(events::validation_missed(&validation));
        note_miss(state, &validation.validator)?;
    }
    for key in due(state, &keys::dispute_deadlines(), ctx.height)? {
        let suffix = &key[keys::dispute_deadlines().len() + 21..];
        let id = std::str::from_utf8(suffix)
            .ok()
            .and_then(|s| s.parse().ok());
        state.delete_raw(key);
        let Some(mut dispute) = id.map(|id| state.dispute(id)).transpose()?.flatten() else {
            continue;
        };
        if dispute.status == status::OPEN {
            settle::settle_at_deadline(state, ctx.height, &mut dispute)?;
        }
    }
    sample_queued(ctx, state)
}

/// Samples every queued record (stored in the previous block) in inference-id order.
fn sample_queued(ctx: &BlockContext, state: &mut dyn StateWrite) -> Result<()> {
    let queue = keys::to_sample_queue();
    let queued = state.prefix_raw(&queue)?;
    if queued.is_empty() {
        return Ok(());
    }
    let params = state.disputes_params()?;
    for (key, _) in queued {
        let id = String::from_utf8_lossy(&key[queue.len()..]).into_owned();
        state.delete_raw(key);
        let Some(stored) = state.record(&id)? else {
            continue;
        };
        let host = stored.executor_host.clone();
        let mut stats = state.executor_stats(&host)?;
        stats.records += 1;
        let rate_ppm = sample_rate_ppm(&params, stats.clean_streak);
        let seed = record_seed(&ctx.block_hash, &id);
        let validator = if is_sampled(&seed, rate_ppm) {
            assign_validator(&seed, &active_validators(state, &[&host])?)
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
                result_hash: Vec::new(),
                reward: "0".into(),
            };
            state.put_validation(&validation);
            state.emit(events::sampled(&validation));
        }
        state.put_executor_stats(&stats);
    }
    Ok(())
}

/// After the block's transactions: queues the records stored in this block for sampling
/// in the next one. They are found by comparing the current epoch's records with the ones
/// already seen (records are always stored in the current epoch).
pub fn end_block(state: &mut dyn StateWrite) -> Result<()> {
    let epoch = gonka_epochs::current(state)?;
    let seen_prefix = keys::seen_in_epoch(epoch);
    let seen: std::collections::BTreeSet<Vec<u8>> = state
        .prefix_raw(&seen_prefix)?
        .into_iter()
        .map(|(key, _)| key[seen_prefix.len()..].to_vec())
        .collect();
    for stored in state.records_of_epoch(epoch)? {
        let Some(record) = stored.record else {
            continue;
        };
        let id = record.inference_id;
        if seen.contains(id.as_bytes()) {
            continue;
        }
        state.put_raw(keys::seen(epoch, &id), Vec::new());
        state.put_raw(keys::to_sample(&id), Vec::new());
    }
    Ok(())
}

/// At the end of `epoch` (after its last `end_block`, so every record of it has been
/// seen): forgets which of its records were seen.
pub fn end_epoch(epoch: u64, state: &mut dyn StateWrite) -> Result<()> {
    for (key, _) in state.prefix_raw(&keys::seen_in_epoch(epoch))? {
        state.delete_raw(key);
    }
    Ok(())
}
