//! Stake parameters.

use gonka_proto::stake::Params;
use gonka_sdk::{parse_amount, ErrorCode, Result};

use crate::StakeError;
use gonka_sdk::PPM;

/// Defaults: 100 GNK minimum, 2 unbonding epochs, 10% stake weight, 30% cap, 2 jail epochs.
pub fn default_params() -> Params {
    Params {
        min_stake: "100000000000".into(),
        unbonding_epochs: 2,
        stake_weight_ppm: 100_000,
        max_power_share_ppm: 300_000,
        jail_epochs: 2,
    }
}

fn invalid(log: String) -> gonka_sdk::Error {
    StakeError::InvalidParams.err(log)
}

/// Checks every parameter is in range, naming the offending one.
pub fn validate_params(params: &Params) -> Result<()> {
    let min_stake = parse_amount("app_state.stake.params.min_stake", &params.min_stake)
        .map_err(|e| invalid(e.log))?;
    if min_stake == 0 {
        return Err(invalid(
            "app_state.stake.params.min_stake must be positive".into(),
        ));
    }
    if params.stake_weight_ppm > PPM {
        return Err(invalid(format!(
            "app_state.stake.params.stake_weight_ppm must be at most {PPM}, found {}",
            params.stake_weight_ppm
        )));
    }
    if params.max_power_share_ppm == 0 || params.max_power_share_ppm > PPM {
        return Err(invalid(format!(
            "app_state.stake.params.max_power_share_ppm must be in 1..={PPM}, found {}",
            params.max_power_share_ppm
        )));
    }
    Ok(())
}
