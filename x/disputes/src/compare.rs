//! How a re-execution is judged against the executor's revealed output, one rule for
//! validations and committee votes: by the text (an "exact" model: the result commitment
//! must be the revealed answer and token counts under the author's address) or by scores (a
//! "logprobs" model: the author's scores of the executor's tokens must be within the model's
//! `logprob_threshold` of the executor's on average and within `logprob_position_threshold`
//! at every position, [`gonka_proto::scored::compare`]).

use gonka_inference::{result_matches, validation_of, InferenceRead, Validation};
use gonka_proto::disputes::{OutputReveal, ScoredOutput};
use gonka_proto::inference::{Model, StoredRecord, WorkRecord};
use gonka_proto::scored;
use gonka_sdk::{ErrorCode, GasMeter, Result, StateRead};

use crate::DisputesError;

/// Gas per log-probability compared (the comparison looks each one up among the other
/// side's alternatives).
const GAS_PER_COMPARED_LOGPROB: u64 = 20;

/// What a validator or committee member submitted for a record.
#[derive(Debug, Clone, Copy)]
pub struct Submitted<'a> {
    /// Its address.
    pub author: &'a str,
    /// Its `gonka/result/v1` commitment ("exact" models).
    pub commitment: &'a [u8],
    /// Its scores ("logprobs" models).
    pub scored: Option<&'a ScoredOutput>,
}

/// The model of a stored record and how its work is validated (a model the table no longer
/// holds, or holds with a value the chain does not know, is exact).
pub fn model_of<S: StateRead + ?Sized>(
    state: &S,
    record: &WorkRecord,
) -> Result<(Model, Validation)> {
    let model = state.model(&record.model)?.unwrap_or_default();
    let validation = validation_of(&model).unwrap_or(Validation::Exact);
    Ok((model, validation))
}

/// The most gas one [`agrees`] of `record`'s results can charge: nothing for an "exact"
/// model; for a "logprobs" one, every position (the completion tokens and a stop token) with
/// its own log-probability and both sides' `logprob_top_k` alternatives.
pub fn max_compare_gas<S: StateRead + ?Sized>(state: &S, record: &WorkRecord) -> Result<u64> {
    let (model, validation) = model_of(state, record)?;
    Ok(match validation {
        Validation::Exact => 0,
        Validation::Logprobs => {
            let positions = record.completion_tokens.saturating_add(1);
            let per_position = 1 + 2 * u64::from(model.logprob_top_k);
            positions
                .saturating_mul(per_position)
                .saturating_mul(GAS_PER_COMPARED_LOGPROB)
        }
    })
}

/// Checks that a result fits the record's model before it is stored: a commitment for an
/// "exact" model; for a "logprobs" one, scores with the model's `logprob_top_k` at as many
/// positions as the record's completion tokens (or one more, the stop token).
pub fn check_result<S: StateRead + ?Sized>(
    state: &S,
    stored: &StoredRecord,
    field: &str,
    scored: Option<&ScoredOutput>,
) -> Result<()> {
    let none = WorkRecord::default();
    let record = stored.record.as_ref().unwrap_or(&none);
    let (model, validation) = model_of(state, record)?;
    match (validation, scored) {
        (Validation::Exact, None) => Ok(()),
        (Validation::Exact, Some(_)) => Err(DisputesError::WrongResultKind.err(format!(
            "model {} is validated by exact answers: submit a result_commitment, not {field}",
            model.id
        ))),
        (Validation::Logprobs, None) => Err(DisputesError::WrongResultKind.err(format!(
            "model {} is validated by log-probabilities: submit {field}, the scores of the executor's output tokens",
            record.model
        ))),
        (Validation::Logprobs, Some(scored)) => scored::check_against(
            field,
            scored,
            model.logprob_top_k,
            record.completion_tokens,
        )
        .map_err(|log| DisputesError::WrongResultKind.err(log)),
    }
}

/// Whether `found` agrees with the record's revealed output, charging the comparison of
/// scores to `gas`.
pub fn agrees<S: StateRead + ?Sized>(
    state: &S,
    record: &WorkRecord,
    reveal: &OutputReveal,
    found: Submitted<'_>,
    gas: &GasMeter,
) -> Result<bool> {
    match (&reveal.scored, found.scored) {
        (Some(executor), Some(theirs)) => {
            let (model, _) = model_of(state, record)?;
            let Some(distance) = scored::compare(executor, theirs) else {
                return Ok(false);
            };
            gas.consume(
                distance.entries.saturating_mul(GAS_PER_COMPARED_LOGPROB),
                "CompareScores",
            )?;
            Ok(distance.agrees(model.logprob_threshold, model.logprob_position_threshold))
        }
        (None, None) => {
            let answer = <[u8; 32]>::try_from(reveal.response_hash.as_slice()).unwrap_or_default();
            Ok(result_matches(
                record,
                &answer,
                found.author,
                found.commitment,
            ))
        }
        // Results are checked against the model when submitted and the reveal too: a mix
        // only follows a change of the model table, and agrees with nothing.
        _ => Ok(false),
    }
}
