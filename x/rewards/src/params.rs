//! Rewards parameters and their validation.

use gonka_proto::rewards::Params;
use gonka_sdk::{parse_amount, ErrorCode, Result};

use crate::RewardsError;
use gonka_sdk::PPM;

/// Parts per billion in one whole (decay).
pub const PPB: u64 = 1_000_000_000;

/// Largest accepted `initial_emission`: 10^30 ngnk (10^21 GNK). Even without decay the supply
/// then needs more than 10^8 epochs to approach 2^128, so minting can never overflow and halt
/// the chain.
pub const MAX_INITIAL_EMISSION: u128 = 1_000_000_000_000_000_000_000_000_000_000;

/// Defaults: 323,000 GNK in epoch 0, decaying by 474,970 ppb per epoch (the emission halves
/// about every 1,459 epochs), nothing reserved for validation.
pub fn default_params() -> Params {
    Params {
        initial_emission: "323000000000000".into(),
        decay_ppb: 474_970,
        validation_share_ppm: 0,
    }
}

/// Parameters as numbers, checked to be in range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RewardsParams {
    /// Emission of epoch 0 in ngnk.
    pub initial_emission: u128,
    /// Per-epoch decay, parts per billion (below 10^9).
    pub decay_ppb: u64,
    /// Share of each epoch's rewards moved to the validation pool, parts per million.
    pub validation_share_ppm: u64,
}

fn invalid(log: String) -> gonka_sdk::Error {
    RewardsError::InvalidParams.err(log)
}

impl RewardsParams {
    /// Parses and validates wire parameters, naming the offending one in the error.
    pub fn from_proto(params: &Params) -> Result<Self> {
        let initial_emission = parse_amount(
            "app_state.rewards.params.initial_emission",
            &params.initial_emission,
        )
        .map_err(|e| invalid(e.log))?;
        if initial_emission > MAX_INITIAL_EMISSION {
            return Err(invalid(format!(
                "app_state.rewards.params.initial_emission must be at most {MAX_INITIAL_EMISSION} ngnk, found {initial_emission}"
            )));
        }
        if params.decay_ppb >= PPB {
            return Err(invalid(format!(
                "app_state.rewards.params.decay_ppb must be below {PPB}, found {}",
                params.decay_ppb
            )));
        }
        if params.validation_share_ppm > PPM {
            return Err(invalid(format!(
                "app_state.rewards.params.validation_share_ppm must be at most {PPM}, found {}",
                params.validation_share_ppm
            )));
        }
        Ok(Self {
            initial_emission,
            decay_ppb: params.decay_ppb,
            validation_share_ppm: params.validation_share_ppm,
        })
    }

    /// Wire form.
    pub fn to_proto(&self) -> Params {
        Params {
            initial_emission: self.initial_emission.to_string(),
            decay_ppb: self.decay_ppb,
            validation_share_ppm: self.validation_share_ppm,
        }
    }
}

/// Checks every parameter is in range, naming the offending one.
pub fn validate_params(params: &Params) -> Result<()> {
    RewardsParams::from_proto(params).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_round_trip() {
        let params = RewardsParams::from_proto(&default_params()).unwrap();
        assert_eq!(params.initial_emission, 323_000 * 1_000_000_000);
        assert_eq!(params.to_proto(), default_params());
    }

    #[test]
    fn each_bad_parameter_is_named() {
        let cases = [
            (
                Params {
                    decay_ppb: PPB,
                    ..default_params()
                },
                "app_state.rewards.params.decay_ppb must be below 1000000000",
            ),
            (
                Params {
                    validation_share_ppm: PPM + 1,
                    ..default_params()
                },
                "app_state.rewards.params.validation_share_ppm",
            ),
            (
                Params {
                    initial_emission: "12x".into(),
                    ..default_params()
                },
                "app_state.rewards.params.initial_emission",
            ),
            (
                Params {
                    initial_emission: (MAX_INITIAL_EMISSION + 1).to_string(),
                    ..default_params()
                },
                "app_state.rewards.params.initial_emission must be at most",
            ),
        ];
        for (params, expected) in cases {
            let err = validate_params(&params).unwrap_err();
            assert_eq!((err.codespace, err.code), ("rewards", 2));
            assert!(err.log.contains(expected), "{}", err.log);
        }
        validate_params(&Params {
            decay_ppb: PPB - 1,
            validation_share_ppm: PPM,
            initial_emission: "0".into(),
        })
        .unwrap();
    }
}
