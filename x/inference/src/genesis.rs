//! Genesis import for inference: parameters and the model table.

use gonka_proto::inference::GenesisState;
use gonka_sdk::{parse_amount, ErrorCode, Result, StateWrite};

use crate::msgs::validate_model_id;
use crate::{default_params, validate_params, InferenceError, InferenceRead, InferenceWrite};

/// Validates and stores the parameters (defaults when absent) and every model.
pub fn init(state: &mut dyn StateWrite, genesis: GenesisState) -> Result<()> {
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
        if state.model(&model.id)?.is_some() {
            return Err(
                InferenceError::InvalidModel.err(format!("genesis lists model {} twice", model.id))
            );
        }
        state.put_model(model);
    }
    Ok(())
}
