//! Genesis import and export for inference: parameters, the model table, and the registered
//! ML nodes and transfer agents. Work records stay with the old chain.

use gonka_auth::validate_address;
use gonka_proto::inference::{GenesisState, Model};

use crate::{validation_of, Validation};
use gonka_sdk::{
    parse_amount, ErrorCode, Genesis, HookOutput, Result, SdkError, StateRead, StateWrite,
};
use gonka_stake::StakeRead;

use crate::msgs::{check_key_unique, node_from, validate_model_id, validate_pubkey, validate_url};
use crate::{
    default_params, validate_params, Inference, InferenceError, InferenceRead, InferenceWrite, NAME,
};
use gonka_proto::ids::TRAINED_MODEL_PREFIX;

impl Genesis for Inference {
    const NAME: &'static str = NAME;
    type State = GenesisState;

    /// Validates and stores the parameters (defaults when absent), every model, then every
    /// node and transfer agent (whose hosts must be genesis participants).
    fn init_genesis(
        &self,
        state: &mut dyn StateWrite,
        genesis: GenesisState,
    ) -> Result<HookOutput> {
        let params = genesis.params.unwrap_or_else(default_params);
        validate_params(&params)?;
        state.put_inference_params(&params);
        for model in &genesis.models {
            validate_model_id("app_state.inference.models[].id", &model.id)
                .map_err(|e| InferenceError::InvalidModel.err(e.log))?;
            parse_amount(
                &format!("app_state.inference.models[{}].price_per_token", model.id),
                &model.price_per_token,
            )
            .map_err(|e| InferenceError::InvalidModel.err(e.log))?;
            check_model_origin(model).map_err(|log| InferenceError::InvalidModel.err(log))?;
            check_model_validation(model).map_err(|log| InferenceError::InvalidModel.err(log))?;
            if state.model(&model.id)?.is_some() {
                return Err(InferenceError::InvalidModel
                    .err(format!("genesis lists model {} twice", model.id)));
            }
            state.put_model(model)?;
        }
        for node in genesis.nodes {
            let node = node_from(Some(node))?;
            require_participant(state, &node.host)?;
            if let Some(model) = node
                .models
                .iter()
                .find(|m| !state.model(m).is_ok_and(|m| m.is_some()))
            {
                return Err(InferenceError::UnknownModel.err(format!(
                    "genesis node {} serves model {model}, which app_state.inference.models does not list",
                    node.id
                )));
            }
            // Genesis is trusted by its validators: no proof of possession (an exported node's
            // proof names the old chain), but keys stay unique.
            check_key_unique(state, &node).map_err(|e| SdkError::InvalidGenesis.err(e.log))?;
            if state.node(&node.id)?.is_some() {
                return Err(InferenceError::InvalidNode
                    .err(format!("genesis lists node {} twice", node.id)));
            }
            state.put_node(&node);
        }
        for agent in &genesis.transfer_agents {
            validate_address(
                "app_state.inference.transfer_agents[].address",
                &agent.address,
            )?;
            validate_url("url", &agent.url)
                .and_then(|()| validate_pubkey("pubkey", &agent.pubkey))
                .map_err(|log| InferenceError::InvalidTransferAgent.err(log))?;
            require_participant(state, &agent.address)?;
            state.put_transfer_agent(agent);
        }
        Ok(HookOutput::default())
    }

    fn export_genesis(&self, state: &dyn StateRead) -> Result<GenesisState> {
        Ok(GenesisState {
            params: Some(state.inference_params()?),
            models: state.models()?,
            nodes: state.nodes()?,
            transfer_agents: state.transfer_agents()?,
        })
    }
}

/// A genesis node or transfer agent belongs to a genesis participant (the stake module's
/// genesis runs first). Staking minimums are checked when it registers or serves, not here,
/// so a jailed participant's registration survives an export.
fn require_participant(state: &dyn StateRead, address: &str) -> Result<()> {
    match state.participant(address)? {
        Some(_) => Ok(()),
        None => Err(InferenceError::NotStaked.err(format!(
            "genesis registers {address}, which app_state.stake.participants does not list"
        ))),
    }
}

/// A model's validation fields: `exact` (or empty) with no logprob fields, or `logprobs`
/// with 1 to [`gonka_proto::scored::MAX_TOP_K`] alternatives per position.
fn check_model_validation(model: &Model) -> std::result::Result<(), String> {
    let field = format!("app_state.inference.models[{}]", model.id);
    match validation_of(model) {
        Some(Validation::Exact)
            if model.logprob_top_k != 0
                || model.logprob_threshold != 0
                || model.logprob_position_threshold != 0 =>
        {
            Err(format!(
                "{field}: logprob_top_k and the logprob thresholds apply to validation \"logprobs\" only"
            ))
        }
        Some(Validation::Logprobs)
            if !(1..=gonka_proto::scored::MAX_TOP_K).contains(&model.logprob_top_k) =>
        {
            Err(format!(
                "{field}.logprob_top_k must be 1 to {} for validation \"logprobs\", found {}",
                gonka_proto::scored::MAX_TOP_K,
                model.logprob_top_k
            ))
        }
        Some(_) => Ok(()),
        None => Err(format!(
            "{field}.validation must be \"exact\" or \"logprobs\", found {:?}",
            model.validation
        )),
    }
}

/// Ids under [`TRAINED_MODEL_PREFIX`] belong to models trained on chain (a re-imported
/// export): `pol/job-{trained_by_job}` with a 32-byte weights hash. No other model may take
/// that prefix or name a job; any model may name its weights' SHA-256.
fn check_model_origin(model: &Model) -> std::result::Result<(), String> {
    let field = format!("app_state.inference.models[{}]", model.id);
    if !model.weights_sha256.is_empty() && model.weights_sha256.len() != 32 {
        return Err(format!("{field}.weights_sha256 must be empty or 32 bytes"));
    }
    let trained = model.id.starts_with(TRAINED_MODEL_PREFIX);
    if trained
        && (model.id != format!("{TRAINED_MODEL_PREFIX}{}", model.trained_by_job)
            || model.weights_sha256.is_empty())
    {
        return Err(format!(
            "{field}: ids starting with {TRAINED_MODEL_PREFIX} are reserved for models trained on chain, {TRAINED_MODEL_PREFIX}<trained_by_job> with their weights_sha256"
        ));
    }
    if !trained && model.trained_by_job != 0 {
        return Err(format!(
            "{field}.trained_by_job is set but the id does not start with {TRAINED_MODEL_PREFIX}"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_model_is_validated_exactly_or_by_logprobs_with_1_to_20_alternatives() {
        let model = |validation: &str, k: u32, threshold: u64| Model {
            id: "org/m".into(),
            validation: validation.into(),
            logprob_top_k: k,
            logprob_threshold: threshold,
            ..Model::default()
        };
        for ok in [
            model("", 0, 0),
            model("exact", 0, 0),
            model("logprobs", 1, 0),
        ] {
            check_model_validation(&ok).unwrap();
        }
        check_model_validation(&model("logprobs", 20, 6554)).unwrap();
        for (bad, why) in [
            (model("fuzzy", 0, 0), "must be \"exact\" or \"logprobs\""),
            (
                model("exact", 5, 0),
                "apply to validation \"logprobs\" only",
            ),
            (model("", 0, 9), "apply to validation \"logprobs\" only"),
            (model("logprobs", 0, 9), "must be 1 to 20"),
            (model("logprobs", 21, 9), "must be 1 to 20"),
        ] {
            let err = check_model_validation(&bad).unwrap_err();
            assert!(err.contains(why), "{err}");
        }
    }

    #[test]
    fn the_trained_model_prefix_is_reserved_for_models_trained_on_chain() {
        let model = |id: &str, hash_len: usize, job: u64| Model {
            id: id.into(),
            price_per_token: "1".into(),
            min_vram_mib: 0,
            weights_sha256: vec![7; hash_len],
            trained_by_job: job,
            ..Model::default()
        };
        check_model_origin(&model("org/m", 0, 0)).unwrap();
        check_model_origin(&model("org/m", 32, 0)).unwrap();
        check_model_origin(&model("pol/job-3", 32, 3)).unwrap();
        for bad in [
            model("pol/job-3", 32, 4),
            model("pol/job-3", 0, 3),
            model("pol/job-x", 32, 0),
            model("org/m", 32, 3),
            model("org/m", 31, 0),
        ] {
            assert!(check_model_origin(&bad).is_err(), "{bad:?}");
        }
    }
}
