//! FOR TESTS AND THE SIMULATION ONLY: a cheating ML node, to exercise validation, disputes
//! and slashing end to end.
//!
//! With `--testing-cheat-fraction F` the node answers a deterministic fraction `F` of the
//! requests that carry a request hash (those a transfer agent settles) with a *wrong*
//! completion: the reference model with shifted weights ([`cheat_seed`]), as a host running a
//! cheaper model in place of the registered one would. It still signs a receipt over what it
//! returned, so the TA accepts the answer and it settles on chain; only a validator that
//! re-executes the request notices. A request is selected when the first two bytes of its
//! request hash, as a big-endian `u16`, are below `F · 65536` ([`selects`]); requests
//! without a request hash are never cheated on.

use std::sync::Arc;

use gonka_model::ReferenceModel;

use crate::{Backend, MlNodeConfig};

/// A cheating node's wrong backend and the fraction of requests it answers with it.
pub(crate) struct Cheat {
    fraction: f64,
    wrong: Backend,
}

impl Cheat {
    /// The cheat `config` asks for: `None` for an honest node (fraction 0) and for a node
    /// forwarding to an upstream (only the built-in backend cheats).
    pub(crate) fn new(config: &MlNodeConfig) -> Option<Cheat> {
        (config.testing_cheat_fraction > 0.0 && config.upstream.is_none()).then(|| Cheat {
            fraction: config.testing_cheat_fraction,
            wrong: Backend::Reference(Arc::new(ReferenceModel::new(cheat_seed(config.seed)))),
        })
    }

    /// The wrong backend, if the request with `request_hash` is one to cheat on.
    pub(crate) fn backend_for(&self, request_hash: Option<&[u8; 32]>) -> Option<&Backend> {
        let selected = request_hash.is_some_and(|h| selects(self.fraction, h));
        selected.then(|| {
            tracing::info!("TESTING: answering this request with the cheating model");
            &self.wrong
        })
    }
}

/// Seed of the cheating model's weights: the honest seed plus one.
pub fn cheat_seed(honest_seed: u64) -> u64 {
    honest_seed.wrapping_add(1)
}

/// Whether a node cheating on `fraction` (0.0 to 1.0) of requests cheats on the request
/// with `request_hash`.
pub fn selects(fraction: f64, request_hash: &[u8; 32]) -> bool {
    let draw = u16::from_be_bytes([request_hash[0], request_hash[1]]);
    f64::from(draw) < fraction * 65536.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use sha2::{Digest, Sha256};

    fn hash(i: u32) -> [u8; 32] {
        Sha256::digest(i.to_be_bytes()).into()
    }

    #[test]
    fn selection_is_deterministic_and_close_to_the_fraction() {
        for fraction in [0.0, 0.1, 0.25, 0.5, 1.0] {
            let selected = (0..10_000).filter(|&i| selects(fraction, &hash(i))).count();
            let expected = fraction * 10_000.0;
            assert!(
                (selected as f64 - expected).abs() <= 200.0,
                "fraction {fraction}: expected about {expected} of 10,000, found {selected}"
            );
            assert_eq!(
                selected,
                (0..10_000).filter(|&i| selects(fraction, &hash(i))).count()
            );
        }
        assert!((0..10_000).all(|i| selects(1.0, &hash(i))));
        assert!(!(0..10_000).any(|i| selects(0.0, &hash(i))));
        assert!(selects(0.5, &[0x7f; 32]) && !selects(0.5, &[0x80; 32]));
        assert_ne!(cheat_seed(u64::MAX), u64::MAX);
    }
}
