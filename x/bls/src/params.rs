//! Bls parameters and their validation.

use gonka_proto::bls::Params;
use gonka_sdk::{ErrorCode, Result};

use crate::BlsError;

/// Defaults: 100 slots; 10 blocks to deal, 5 to complain, 5 to answer complaints; the
/// beacons of the last 10,000 heights kept in state.
pub fn default_params() -> Params {
    Params {
        dkg_slots: 100,
        dkg_deal_blocks: 10,
        dkg_complaint_blocks: 5,
        dkg_reveal_blocks: 5,
        beacon_keep_blocks: 10_000,
    }
}

/// Checks every parameter is positive and the slots fit a dealing in one transaction.
pub fn validate_params(params: &Params) -> Result<()> {
    let checks = [
        ("dkg_slots", params.dkg_slots),
        ("dkg_deal_blocks", params.dkg_deal_blocks),
        ("dkg_complaint_blocks", params.dkg_complaint_blocks),
        ("dkg_reveal_blocks", params.dkg_reveal_blocks),
        ("beacon_keep_blocks", params.beacon_keep_blocks),
    ];
    for (name, value) in checks {
        if value == 0 {
            return Err(BlsError::InvalidParams.err(format!(
                "app_state.bls.params.{name} must be positive, found 0"
            )));
        }
    }
    if params.dkg_slots > MAX_SLOTS {
        return Err(BlsError::InvalidParams.err(format!(
            "app_state.bls.params.dkg_slots must be at most {MAX_SLOTS} (a dealing carries 80 bytes per slot and must fit one transaction), found {}",
            params.dkg_slots
        )));
    }
    Ok(())
}

/// Most slots a round may have.
pub const MAX_SLOTS: u64 = 500;
