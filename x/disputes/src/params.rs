//! Disputes parameters and their validation.

use gonka_proto::disputes::Params;
use gonka_sdk::{parse_amount, ErrorCode, Result};

use crate::DisputesError;
use gonka_sdk::PPM;

/// Defaults: sampling between 1% and 10%, reaching 1% after 20 clean validations;
/// 20 blocks to validate, 10 to reveal, 30 to vote; committees of 3; 20% slashed; 1 GNK least deposit;
/// a validation earns the record's cost; jailed after 3 missed deadlines in a row, each
/// costing 10% reputation.
pub fn default_params() -> Params {
    Params {
        min_sample_ppm: 10_000,
        max_sample_ppm: 100_000,
        decay_validations: 20,
        validation_deadline_blocks: 20,
        dispute_deadline_blocks: 30,
        committee_size: 3,
        slash_fraction_ppm: 200_000,
        min_deposit: "1000000000".into(),
        validation_reward_ppm: PPM,
        jail_after_misses: 3,
        miss_penalty_ppm: 100_000,
        dispute_window_blocks: 600,
        reveal_deadline_blocks: 10,
    }
}

/// The last block, counted from a record's own block, in which anything about the record
/// can still be decided: a user dispute opened at the end of `dispute_window_blocks`, or a
/// validation dispute opened by the reveal of a result committed at its validation deadline
/// (sampled in the next block), plus the committee's `dispute_deadline_blocks` and the block
/// that settles at the deadline.
pub fn challenge_window_blocks(params: &Params) -> u64 {
    let opened = params.dispute_window_blocks.max(
        params
            .validation_deadline_blocks
            .saturating_add(1)
            .saturating_add(params.reveal_deadline_blocks),
    );
    opened
        .saturating_add(params.dispute_deadline_blocks)
        .saturating_add(1)
}

/// Genesis consistency of the time windows across modules, against the challenge window
/// ([`challenge_window_blocks`]):
/// - transfer agents must keep a record's payload (`payload_retention_blocks` of
///   x/inference) as long as anyone may be asked to re-execute it, so no validator or
///   committee member is ever assigned a request body that may already be gone;
/// - stake must stay at risk as long as work can be challenged: a participant that starts
///   unbonding right after its work is paid out at the end of the epoch `unbonding_epochs`
///   later, at least `unbonding_epochs × epoch_length` blocks on, and every dispute of that
///   work must be settled (and its slash taken from the unbonding entry) by then.
pub fn validate_windows(
    params: &Params,
    payload_retention_blocks: u64,
    unbonding_epochs: u64,
    epoch_length: u64,
) -> Result<()> {
    let needed = challenge_window_blocks(params);
    let unbonding_blocks = unbonding_epochs.saturating_mul(epoch_length);
    if unbonding_blocks < needed {
        return Err(invalid(format!(
            "app_state.stake.params.unbonding_epochs {unbonding_epochs} × app_state.epochs.params.epoch_length {epoch_length} is {unbonding_blocks} blocks but must be at least the {needed}-block challenge window of the disputes parameters, so stake unbonded right after some work is still there to slash when a dispute of it settles; raise unbonding_epochs or shorten the disputes windows"
        )));
    }
    if payload_retention_blocks < needed {
        return Err(invalid(format!(
            "app_state.inference.params.payload_retention_blocks is {payload_retention_blocks} but must be at least {needed}: max(dispute_window_blocks {}, validation_deadline_blocks {} + 1 + reveal_deadline_blocks {}) + dispute_deadline_blocks {} + 1, so every payload outlives every validation and dispute of its record",
            params.dispute_window_blocks,
            params.validation_deadline_blocks,
            params.reveal_deadline_blocks,
            params.dispute_deadline_blocks
        )));
    }
    Ok(())
}

fn invalid(log: String) -> gonka_sdk::Error {
    DisputesError::InvalidParams.err(log)
}

/// The least deposit of a user dispute, in ngnk.
pub fn min_deposit(params: &Params) -> Result<u128> {
    parse_amount("app_state.disputes.params.min_deposit", &params.min_deposit)
        .map_err(|e| invalid(e.log))
}

/// Checks every parameter is in range, naming the offending one.
pub fn validate_params(params: &Params) -> Result<()> {
    let field = |name: &str| format!("app_state.disputes.params.{name}");
    if params.max_sample_ppm > PPM || params.min_sample_ppm > params.max_sample_ppm {
        return Err(invalid(format!(
            "{} and {} must satisfy min ≤ max ≤ {PPM}, found {} and {}",
            field("min_sample_ppm"),
            field("max_sample_ppm"),
            params.min_sample_ppm,
            params.max_sample_ppm
        )));
    }
    let positive = [
        ("decay_validations", params.decay_validations),
        (
            "validation_deadline_blocks",
            params.validation_deadline_blocks,
        ),
        ("dispute_deadline_blocks", params.dispute_deadline_blocks),
        ("dispute_window_blocks", params.dispute_window_blocks),
        ("reveal_deadline_blocks", params.reveal_deadline_blocks),
        ("jail_after_misses", params.jail_after_misses),
    ];
    for (name, value) in positive {
        if value == 0 {
            return Err(invalid(format!(
                "{} must be positive, found 0",
                field(name)
            )));
        }
    }
    if params.committee_size.is_multiple_of(2) {
        return Err(invalid(format!(
            "{} must be odd (so a majority always exists), found {}",
            field("committee_size"),
            params.committee_size
        )));
    }
    let fractions = [
        ("slash_fraction_ppm", params.slash_fraction_ppm),
        ("validation_reward_ppm", params.validation_reward_ppm),
        ("miss_penalty_ppm", params.miss_penalty_ppm),
    ];
    for (name, value) in fractions {
        if value > PPM {
            return Err(invalid(format!(
                "{} must be at most {PPM}, found {value}",
                field(name)
            )));
        }
    }
    min_deposit(params)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_bad_values_are_named() {
        validate_params(&default_params()).unwrap();
        let cases = [
            (
                Params {
                    committee_size: 4,
                    ..default_params()
                },
                "committee_size must be odd",
            ),
            (
                Params {
                    min_sample_ppm: 200_000,
                    ..default_params()
                },
                "min ≤ max",
            ),
            (
                Params {
                    decay_validations: 0,
                    ..default_params()
                },
                "decay_validations must be positive",
            ),
            (
                Params {
                    slash_fraction_ppm: PPM + 1,
                    ..default_params()
                },
                "slash_fraction_ppm must be at most",
            ),
            (
                Params {
                    min_deposit: "x".into(),
                    ..default_params()
                },
                "min_deposit",
            ),
        ];
        for (params, fragment) in cases {
            let err = validate_params(&params).unwrap_err();
            assert_eq!((err.codespace, err.code), ("disputes", 2));
            assert!(err.log.contains(fragment), "{}", err.log);
        }
    }
}
