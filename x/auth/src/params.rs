//! Auth parameters: transaction size limits, the minimum gas price and the gas costs.

use gonka_proto::auth::Params;
use gonka_proto::gas::GasPrice;
use gonka_sdk::{ErrorCode, GasCosts, Result};

use crate::AuthError;

/// Defaults used when genesis gives none: 64 KiB txs, 32 messages, 0.01 ngnk per gas unit,
/// and the Cosmos SDK's gas costs (10 per tx byte, 1,000 per secp256k1 signature check,
/// reads 1,000 + 3 per byte, writes 2,000 + 30 per byte), plus 10,000 per BLS pairing check
/// (measured: 0.78 ms against about 0.07 ms for a secp256k1 check).
pub fn default_params() -> Params {
    Params {
        max_tx_bytes: 64 * 1024,
        max_msgs_per_tx: 32,
        min_gas_price: "0.01".into(),
        tx_size_cost_per_byte: 10,
        sig_verify_cost_secp256k1: 1_000,
        read_cost_flat: 1_000,
        read_cost_per_byte: 3,
        write_cost_flat: 2_000,
        write_cost_per_byte: 30,
        sig_verify_cost_bls12_381: 10_000,
    }
}

/// Parameters as numbers, checked to be in range: what the ante handler reads (the wire
/// form, [`Params`], is parsed once, when it is stored or read).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AuthParams {
    /// Largest accepted TxRaw, in bytes; positive.
    pub max_tx_bytes: u64,
    /// Most messages one transaction may carry; positive.
    pub max_msgs_per_tx: u64,
    /// Least fee per unit of gas: a tx's fee must be at least ceil(gas limit × this).
    pub min_gas_price: GasPrice,
    /// What each unit of work costs; every cost is positive.
    pub gas_costs: GasCosts,
}

impl AuthParams {
    /// Parses and validates wire parameters, naming the offending one in the error.
    pub fn from_proto(params: &Params) -> Result<Self> {
        let positive = |name: &str, value: u64| {
            if value == 0 {
                Err(AuthError::InvalidParams.err(format!(
                    "auth {name} must be positive, found 0 (default {})",
                    default_of(name)
                )))
            } else {
                Ok(value)
            }
        };
        let max_tx_bytes = positive("max_tx_bytes", params.max_tx_bytes)?;
        let max_msgs_per_tx = positive("max_msgs_per_tx", params.max_msgs_per_tx)?;
        let min_gas_price = GasPrice::parse(&params.min_gas_price)
            .map_err(|e| AuthError::InvalidParams.err(format!("auth min_gas_price: {e}")))?;
        Ok(Self {
            max_tx_bytes,
            max_msgs_per_tx,
            min_gas_price,
            gas_costs: GasCosts {
                tx_size_per_byte: positive("tx_size_cost_per_byte", params.tx_size_cost_per_byte)?,
                sig_verify_secp256k1: positive(
                    "sig_verify_cost_secp256k1",
                    params.sig_verify_cost_secp256k1,
                )?,
                read_flat: positive("read_cost_flat", params.read_cost_flat)?,
                read_per_byte: positive("read_cost_per_byte", params.read_cost_per_byte)?,
                write_flat: positive("write_cost_flat", params.write_cost_flat)?,
                write_per_byte: positive("write_cost_per_byte", params.write_cost_per_byte)?,
                sig_verify_bls12_381: positive(
                    "sig_verify_cost_bls12_381",
                    params.sig_verify_cost_bls12_381,
                )?,
            },
        })
    }

    /// Wire form.
    pub fn to_proto(&self) -> Params {
        let costs = &self.gas_costs;
        Params {
            max_tx_bytes: self.max_tx_bytes,
            max_msgs_per_tx: self.max_msgs_per_tx,
            min_gas_price: self.min_gas_price.to_string(),
            tx_size_cost_per_byte: costs.tx_size_per_byte,
            sig_verify_cost_secp256k1: costs.sig_verify_secp256k1,
            read_cost_flat: costs.read_flat,
            read_cost_per_byte: costs.read_per_byte,
            write_cost_flat: costs.write_flat,
            write_cost_per_byte: costs.write_per_byte,
            sig_verify_cost_bls12_381: costs.sig_verify_bls12_381,
        }
    }
}

/// The default of the numeric parameter `name`, for error messages.
fn default_of(name: &str) -> u64 {
    let d = default_params();
    match name {
        "max_tx_bytes" => d.max_tx_bytes,
        "max_msgs_per_tx" => d.max_msgs_per_tx,
        "tx_size_cost_per_byte" => d.tx_size_cost_per_byte,
        "sig_verify_cost_secp256k1" => d.sig_verify_cost_secp256k1,
        "read_cost_flat" => d.read_cost_flat,
        "read_cost_per_byte" => d.read_cost_per_byte,
        "write_cost_flat" => d.write_cost_flat,
        "sig_verify_cost_bls12_381" => d.sig_verify_cost_bls12_381,
        _ => d.write_cost_per_byte,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_round_trip() {
        let params = AuthParams::from_proto(&default_params()).unwrap();
        assert_eq!(params.to_proto(), default_params());
        assert_eq!(params.min_gas_price.fee_for(100_000), Some(1_000));
    }

    #[test]
    fn zero_costs_and_bad_prices_are_refused_by_name() {
        type Edit = fn(&mut Params);
        let cases: [(&str, Edit); 4] = [
            ("read_cost_flat", |p| p.read_cost_flat = 0),
            ("tx_size_cost_per_byte", |p| p.tx_size_cost_per_byte = 0),
            ("max_tx_bytes", |p| p.max_tx_bytes = 0),
            ("min_gas_price", |p| p.min_gas_price = "-1".into()),
        ];
        for (name, edit) in cases {
            let mut params = default_params();
            edit(&mut params);
            let err = AuthParams::from_proto(&params).unwrap_err();
            assert_eq!(err.code, AuthError::InvalidParams as u32);
            assert!(err.log.contains(name), "{name}: {}", err.log);
        }
        // A free chain is allowed: the price may be zero.
        let mut free = default_params();
        free.min_gas_price = "0".into();
        assert!(AuthParams::from_proto(&free)
            .unwrap()
            .min_gas_price
            .is_zero());
    }
}
