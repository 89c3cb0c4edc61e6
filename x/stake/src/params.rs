//! Stake parameters.

use gonka_proto::stake::Params;
use gonka_sdk::{parse_amount, ErrorCode, Result};

use crate::StakeError;
use gonka_sdk::PPM;

/// Defaults: 100 GNK minimum, 7 unbonding epochs (with the default 100-block epochs, longer
/// than the default disputes' 631-block challenge window, as genesis requires), 10% stake
/// weight, 30% cap, 2 jail epochs; liveness over a 100-block window with at least half of it
/// signed, 10% slashed for downtime (as Gonka slashes) and 5% for double signing (the
/// Cosmos SDK's default); unstakes of at least 1 GNK (or everything left), at most 7
/// unbonding entries per participant (the Cosmos SDK's `MaxEntries`).
pub fn default_params() -> Params {
    Params {
        min_stake: "100000000000".into(),
        unbonding_epochs: 7,
        stake_weight_ppm: 100_000,
        max_power_share_ppm: 300_000,
        jail_epochs: 2,
        signed_blocks_window: 100,
        min_signed_ppm: 500_000,
        downtime_slash_ppm: 100_000,
        double_sign_slash_ppm: 50_000,
        min_unstake: "1000000000".into(),
        max_unbonding_entries: 7,
    }
}

/// Largest liveness window: a validator's missed-block bits (window / 8 bytes) are read and
/// written in every block it votes in.
pub const MAX_SIGNED_BLOCKS_WINDOW: u64 = 100_000;

fn invalid(log: String) -> gonka_sdk::Error {
    StakeError::InvalidParams.err(log)
}

/// Parameters as numbers, checked to be in range: what the module reads; the wire form
/// ([`Params`]) is parsed once, when it is stored or read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StakeParams {
    /// Least bond of a participant (and of a validator), in ngnk; positive.
    pub min_stake: u128,
    /// Epochs an unstaked amount waits before it is paid back.
    pub unbonding_epochs: u64,
    /// Weight of stake against work in the Sprint power rule, parts per million.
    pub stake_weight_ppm: u64,
    /// Largest share of the total power one validator may hold, parts per million (1..=10^6).
    pub max_power_share_ppm: u64,
    /// Epochs a jailed participant waits before `MsgUnjail` is accepted.
    pub jail_epochs: u64,
    /// Blocks in the liveness window (0: no downtime jailing).
    pub signed_blocks_window: u64,
    /// Least share of the window a validator signs, ppm.
    pub min_signed_ppm: u64,
    /// Share of stake slashed for downtime, ppm.
    pub downtime_slash_ppm: u64,
    /// Share of stake slashed for double signing, ppm.
    pub double_sign_slash_ppm: u64,
    /// Least amount of one unstake that leaves stake bonded, in ngnk.
    pub min_unstake: u128,
    /// Most unbonding entries one participant may have at once; positive.
    pub max_unbonding_entries: u64,
}

impl StakeParams {
    /// Parses and validates wire parameters, naming the offending one in the error.
    pub fn from_proto(params: &Params) -> Result<Self> {
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
        for (name, value) in [
            ("min_signed_ppm", params.min_signed_ppm),
            ("downtime_slash_ppm", params.downtime_slash_ppm),
            ("double_sign_slash_ppm", params.double_sign_slash_ppm),
        ] {
            if value > PPM {
                return Err(invalid(format!(
                    "app_state.stake.params.{name} must be at most {PPM}, found {value}"
                )));
            }
        }
        if params.signed_blocks_window > MAX_SIGNED_BLOCKS_WINDOW {
            return Err(invalid(format!(
                "app_state.stake.params.signed_blocks_window must be at most {MAX_SIGNED_BLOCKS_WINDOW}, found {}",
                params.signed_blocks_window
            )));
        }
        let min_unstake = parse_amount("app_state.stake.params.min_unstake", &params.min_unstake)
            .map_err(|e| invalid(e.log))?;
        if params.max_unbonding_entries == 0 {
            return Err(invalid(
                "app_state.stake.params.max_unbonding_entries must be positive".into(),
            ));
        }
        Ok(Self {
            min_stake,
            min_unstake,
            max_unbonding_entries: params.max_unbonding_entries,
            unbonding_epochs: params.unbonding_epochs,
            stake_weight_ppm: params.stake_weight_ppm,
            max_power_share_ppm: params.max_power_share_ppm,
            jail_epochs: params.jail_epochs,
            signed_blocks_window: params.signed_blocks_window,
            min_signed_ppm: params.min_signed_ppm,
            downtime_slash_ppm: params.downtime_slash_ppm,
            double_sign_slash_ppm: params.double_sign_slash_ppm,
        })
    }

    /// Wire form.
    pub fn to_proto(&self) -> Params {
        Params {
            min_stake: self.min_stake.to_string(),
            unbonding_epochs: self.unbonding_epochs,
            stake_weight_ppm: self.stake_weight_ppm,
            max_power_share_ppm: self.max_power_share_ppm,
            jail_epochs: self.jail_epochs,
            signed_blocks_window: self.signed_blocks_window,
            min_signed_ppm: self.min_signed_ppm,
            downtime_slash_ppm: self.downtime_slash_ppm,
            double_sign_slash_ppm: self.double_sign_slash_ppm,
            min_unstake: self.min_unstake.to_string(),
            max_unbonding_entries: self.max_unbonding_entries,
        }
    }
}
