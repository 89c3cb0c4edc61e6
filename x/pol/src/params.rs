//! Pol parameters and their validation.

use gonka_proto::pol::Params;
use gonka_sdk::{parse_amount, ErrorCode, Result, PPM};

use crate::PolError;

/// Hard ceiling of `max_workers`: a round's close, and a checkpoint submission, read every
/// worker of the job, so the job size bounds that work.
pub const WORKERS_CEILING: u64 = 256;

/// Defaults: jobs of up to 16 workers, 10,000 rounds of up to 10,000 inner steps, rounds of
/// 2 to 10,000 blocks, 1,000 blocks to fill a job, 10% of checkpoints re-executed (x/disputes'
/// highest sampling rate), 20 blocks to verify and 30 for a committee of 3 to vote (as
/// x/disputes), a 20% slash, 10% of a checkpoint's slot paying its verification, budgets of
/// at least 1 GNK, at most 100 live jobs, trained models priced at 1 ngnk per token (the
/// localnet's price of the reference model they share the runtime with), a verifier
/// re-executing [`DEFAULT_VERIFIER_TOKENS_PER_BLOCK`] trained tokens per block, and an
/// unanswered verification handed to 2 more validators before the checkpoint goes unverified.
pub fn default_params() -> Params {
    Params {
        max_workers: 16,
        max_outer_rounds: 10_000,
        max_inner_steps: 10_000,
        min_round_blocks: 2,
        max_round_blocks: 10_000,
        formation_blocks: 1_000,
        checkpoint_sample_ppm: 100_000,
        verification_deadline_blocks: 20,
        committee_size: 3,
        dispute_deadline_blocks: 30,
        slash_fraction_ppm: 200_000,
        verification_fee_ppm: 100_000,
        min_reward_budget: "1000000000".into(),
        max_live_jobs: 100,
        trained_model_price_per_token: "1".into(),
        verifier_tokens_per_block: DEFAULT_VERIFIER_TOKENS_PER_BLOCK,
        max_reassignments: 2,
    }
}

/// Trained tokens of `gonka-ref-v1` one validator re-executes per block, with room to spare:
/// about a tenth of what the DiLoCo bench's re-execution (`verify_round` of a whole round)
/// measures on this project's 2-core machine — 39,424 trained tokens/s with `cargo bench -p
/// gonka-trainer --bench diloco -- --smoke` (H = 10, batch 4, while another build ran) — so
/// at 1-second blocks a verifier keeps up on a tenth of a core, the rest left to serving and
/// validating inference. With the default 20 blocks to answer, a checkpoint trains at most
/// 20 × this many tokens.
pub const DEFAULT_VERIFIER_TOKENS_PER_BLOCK: u64 = 4_000;

/// The trained tokens of one checkpoint: `seq_len · batch_size · inner_steps`, saturating.
pub fn checkpoint_tokens(config: &gonka_proto::pol::TrainingConfig) -> u64 {
    config
        .seq_len
        .saturating_mul(config.batch_size)
        .saturating_mul(config.inner_steps)
}

/// Checks every parameter is in range, naming the offending one.
pub fn validate_params(params: &Params) -> Result<()> {
    let field = |name: &str, rule: &str, found: u64| {
        Err(PolError::InvalidParams.err(format!(
            "app_state.pol.params.{name} must be {rule}, found {found}"
        )))
    };
    if params.max_workers == 0 || params.max_workers > WORKERS_CEILING {
        return field(
            "max_workers",
            &format!("1 to {WORKERS_CEILING}"),
            params.max_workers,
        );
    }
    for (name, value) in [
        ("max_outer_rounds", params.max_outer_rounds),
        ("max_inner_steps", params.max_inner_steps),
        ("min_round_blocks", params.min_round_blocks),
        ("formation_blocks", params.formation_blocks),
        (
            "verification_deadline_blocks",
            params.verification_deadline_blocks,
        ),
        ("dispute_deadline_blocks", params.dispute_deadline_blocks),
        ("max_live_jobs", params.max_live_jobs),
        (
            "verifier_tokens_per_block",
            params.verifier_tokens_per_block,
        ),
    ] {
        if value == 0 {
            return field(name, "positive", 0);
        }
    }
    if params.max_round_blocks < params.min_round_blocks {
        return field(
            "max_round_blocks",
            &format!("at least min_round_blocks ({})", params.min_round_blocks),
            params.max_round_blocks,
        );
    }
    if params.committee_size == 0 || params.committee_size.is_multiple_of(2) {
        return field("committee_size", "odd and positive", params.committee_size);
    }
    for (name, value) in [
        ("checkpoint_sample_ppm", params.checkpoint_sample_ppm),
        ("slash_fraction_ppm", params.slash_fraction_ppm),
        ("verification_fee_ppm", params.verification_fee_ppm),
    ] {
        if value > PPM {
            return field(name, &format!("at most {PPM}"), value);
        }
    }
    for (name, amount) in [
        ("min_reward_budget", &params.min_reward_budget),
        (
            "trained_model_price_per_token",
            &params.trained_model_price_per_token,
        ),
    ] {
        parse_amount(&format!("app_state.pol.params.{name}"), amount)
            .map_err(|e| PolError::InvalidParams.err(e.log))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_each_bound_is_checked() {
        validate_params(&default_params()).unwrap();
        let bad = [
            Params {
                max_workers: 0,
                ..default_params()
            },
            Params {
                max_workers: WORKERS_CEILING + 1,
                ..default_params()
            },
            Params {
                committee_size: 2,
                ..default_params()
            },
            Params {
                max_round_blocks: 1,
                ..default_params()
            },
            Params {
                checkpoint_sample_ppm: PPM + 1,
                ..default_params()
            },
            Params {
                min_reward_budget: "ten".into(),
                ..default_params()
            },
            Params {
                formation_blocks: 0,
                ..default_params()
            },
            Params {
                trained_model_price_per_token: String::new(),
                ..default_params()
            },
            Params {
                verifier_tokens_per_block: 0,
                ..default_params()
            },
        ];
        for params in bad {
            let err = validate_params(&params).unwrap_err();
            assert!(err.log.contains("app_state.pol.params."), "{}", err.log);
        }
    }
}
