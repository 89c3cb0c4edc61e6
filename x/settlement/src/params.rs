//! Settlement parameters and their validation.

use gonka_proto::settlement::Params;
use gonka_sdk::{ErrorCode, Result, PPM};

use crate::SettlementError;

/// Defaults: a 600-block challenge window (inside inference's default 720-block payload
/// retention), 1,000 requester and host lines per batch, 100,000 records per batch and
/// 200,000 per block (the next block hashes 50,000 times and writes at most 20,000 sample
/// demands; a transfer agent serving 60 requests a second settles 3,600 a minute), a
/// 20% fraud slash (the disputes module's slash for wrong work), 20 blocks to answer a leaf
/// demand, a 0.001 GNK demand deposit, records at most an hour from their batch's time,
/// settled batches kept a day, leaves sampled for validation at up to 10% (x/disputes'
/// default highest rate, so its rates apply unchanged), and 10% of a conviction's slash to
/// its challenger.
pub fn default_params() -> Params {
    Params {
        challenge_window_blocks: 600,
        max_batch_lines: 1_000,
        max_batch_records: 100_000,
        max_block_records: 200_000,
        fraud_slash_ppm: 200_000,
        leaf_answer_blocks: 20,
        min_leaf_deposit: "1000000".into(),
        max_record_age_secs: 3_600,
        batch_keep_secs: 86_400,
        leaf_sample_ppm: 100_000,
        challenger_bounty_ppm: 100_000,
    }
}

/// Checks every parameter is in range on its own, naming the offending one. Genesis also
/// checks the window against payload retention and unbonding ([`crate::genesis`]).
pub fn validate_params(params: &Params) -> Result<()> {
    let field = |name: &str, rule: &str, found: u64| {
        Err(SettlementError::InvalidParams.err(format!(
            "app_state.settlement.params.{name} must be {rule}, found {found}"
        )))
    };
    if params.challenge_window_blocks == 0 {
        return field("challenge_window_blocks", "positive", 0);
    }
    if params.max_batch_lines == 0 {
        return field("max_batch_lines", "positive", 0);
    }
    let max_records = 1u64 << gonka_proto::batch::MAX_DEPTH;
    if params.max_batch_records == 0 || params.max_batch_records > max_records {
        return field(
            "max_batch_records",
            &format!("1 to {max_records}"),
            params.max_batch_records,
        );
    }
    if params.max_block_records < params.max_batch_records {
        return field(
            "max_block_records",
            &format!(
                "at least max_batch_records ({}), so a full batch fits in a block",
                params.max_batch_records
            ),
            params.max_block_records,
        );
    }
    if params.leaf_answer_blocks == 0 || params.leaf_answer_blocks >= params.challenge_window_blocks
    {
        return field(
            "leaf_answer_blocks",
            &format!(
                "positive and below challenge_window_blocks ({}), so a demand fits in the window",
                params.challenge_window_blocks
            ),
            params.leaf_answer_blocks,
        );
    }
    if gonka_proto::batch::parse_decimal(&params.min_leaf_deposit).is_none_or(|d| d == 0) {
        return Err(SettlementError::InvalidParams.err(format!(
            "app_state.settlement.params.min_leaf_deposit must be a positive amount of ngnk, found {:?}",
            params.min_leaf_deposit
        )));
    }
    if params.max_record_age_secs == 0 {
        return field("max_record_age_secs", "positive", 0);
    }
    if params.batch_keep_secs < params.max_record_age_secs.saturating_mul(2) {
        return field(
            "batch_keep_secs",
            &format!(
                "at least twice max_record_age_secs ({}): a request can sit in two batches that far apart",
                params.max_record_age_secs
            ),
            params.batch_keep_secs,
        );
    }
    if params.leaf_sample_ppm > PPM {
        return field("leaf_sample_ppm", "at most 1000000", params.leaf_sample_ppm);
    }
    if params.challenger_bounty_ppm >= PPM {
        return field(
            "challenger_bounty_ppm",
            &format!("below {PPM} (a bounty below the slash, or voiding one's own batch pays)"),
            params.challenger_bounty_ppm,
        );
    }
    if params.fraud_slash_ppm > PPM {
        return field(
            "fraud_slash_ppm",
            &format!("at most {PPM}"),
            params.fraud_slash_ppm,
        );
    }
    Ok(())
}
