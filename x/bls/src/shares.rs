//! Reading a member's shares of a group from the state (see
//! [`gonka_bls_crypto::member`] for the derivation).

use gonka_bls_crypto::member::group_shares;
use gonka_bls_crypto::threshold::SecretShare;
use gonka_bls_crypto::SecretKey;
use gonka_proto::bls::DkgRound;
use gonka_sdk::StateRead;

use crate::BlsRead;

/// [`group_shares`] of `round` with the qualified dealers' dealings read from `state`.
pub fn group_shares_in_state<S: StateRead + ?Sized>(
    state: &S,
    key: &SecretKey,
    chain_id: &str,
    round: &DkgRound,
) -> Result<Vec<SecretShare>, String> {
    let dealings = round
        .qualified_dealers
        .iter()
        .map(|dealer| {
            state
                .dealing(round.id, dealer)
                .map_err(|e| e.to_string())?
                .ok_or_else(|| format!("qualified dealer {dealer} has no dealing"))
        })
        .collect::<Result<Vec<_>, String>>()?;
    group_shares(key, chain_id, round, &dealings)
}
