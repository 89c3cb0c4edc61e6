//! Validators that do not do their part in consensus: downtime and double signing, read from
//! what CometBFT hands `FinalizeBlock` ([`BlockContext::last_commit`] and
//! [`BlockContext::misbehavior`]).
//!
//! - **Downtime**: every commit counts, for each validator in it, one slot of a sliding window
//!   of `signed_blocks_window` blocks, set when its signature is absent. Once a validator has
//!   been counted for a whole window, missing more than `1 − min_signed_ppm` of it jails it
//!   (it leaves the validator set at the end of the block) and slashes `downtime_slash_ppm` of
//!   its stake; its record is dropped, so after `MsgUnjail` counting starts afresh.
//! - **Double signing**: evidence of a duplicate vote or a light-client attack slashes
//!   `double_sign_slash_ppm`, jails the offender and tombstones it: it never unjails.
//!
//! Slashed stake goes to the fee collector, so it is paid out with the epoch's fees to the
//! participants who did the work. The work per block is one read and one write per vote and
//! per piece of evidence: proportional to the validator set, never to the state.

use gonka_bank::fee_collector_address;
use gonka_proto::stake::SigningInfo;
use gonka_sdk::{BlockContext, Event, Result, StateWrite, PPM};

use crate::{jail, slash, StakeRead, StakeWrite};

/// Applies the block's evidence, then counts its last commit.
pub fn begin_block(ctx: &BlockContext, state: &mut dyn StateWrite) -> Result<()> {
    let params = state.stake_params()?;
    for evidence in &ctx.misbehavior {
        let Some(operator) = state.consensus_address_owner(&evidence.validator_address)? else {
            continue;
        };
        let Some(mut participant) = state.participant(&operator)? else {
            continue;
        };
        if participant.tombstoned {
            continue; // punished once for all its offences
        }
        let taken = slash(
            state,
            &operator,
            params.double_sign_slash_ppm,
            &fee_collector_address(),
        )?;
        jail(state, &operator)?;
        participant = state.existing_participant(&operator)?;
        participant.tombstoned = true;
        participant.jailed_until_epoch = u64::MAX;
        state.put_participant(&participant);
        state.delete_signing_info(&operator);
        state.emit(
            Event::new("double_sign")
                .attr("operator", &operator)
                .attr("height", evidence.height)
                .attr(
                    "kind",
                    if evidence.duplicate_vote {
                        "duplicate_vote"
                    } else {
                        "light_client_attack"
                    },
                )
                .attr("slashed", format!("{taken}ngnk")),
        );
    }
    let window = params.signed_blocks_window;
    if window == 0 {
        return Ok(());
    }
    // Most slots of the window a validator may miss.
    let max_missed = window - window * params.min_signed_ppm / PPM;
    for vote in &ctx.last_commit {
        let Some(operator) = state.consensus_address_owner(&vote.validator_address)? else {
            continue;
        };
        match state.participant(&operator)? {
            Some(p) if !p.jailed && p.power > 0 => {}
            _ => continue, // jailed or out of the set: its absence is no news
        }
        // A record of another window size (the parameter changed) counts afresh.
        let bytes = window.div_ceil(8) as usize;
        let mut info = match state.signing_info(&operator)? {
            Some(info) if info.missed_bits.len() == bytes => info,
            _ => SigningInfo {
                operator: operator.clone(),
                missed_bits: vec![0; bytes],
                ..Default::default()
            },
        };
        let slot = info.counted % window;
        let (byte, bit) = ((slot / 8) as usize, 1u8 << (slot % 8));
        let was_missed = info.missed_bits[byte] & bit != 0;
        let missed = !vote.signed;
        match (was_missed, missed) {
            (false, true) => {
                info.missed_bits[byte] |= bit;
                info.missed += 1;
            }
            (true, false) => {
                info.missed_bits[byte] &= !bit;
                info.missed -= 1;
            }
            _ => {}
        }
        info.counted += 1;
        if info.counted >= window && info.missed > max_missed {
            let taken = slash(
                state,
                &operator,
                params.downtime_slash_ppm,
                &fee_collector_address(),
            )?;
            jail(state, &operator)?;
            state.delete_signing_info(&operator);
            state.emit(
                Event::new("downtime")
                    .attr("operator", &operator)
                    .attr("missed", info.missed)
                    .attr("window", window)
                    .attr("slashed", format!("{taken}ngnk")),
            );
        } else {
            state.put_signing_info(&info);
        }
    }
    Ok(())
}
