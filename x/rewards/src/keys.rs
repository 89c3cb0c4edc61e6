//! The rewards key schema: the only place rewards storage keys are formed.

/// Module parameters.
pub fn params() -> Vec<u8> {
    b"rewards/params".to_vec()
}

/// How `epoch` was settled; zero-padded so keys sort by epoch.
pub fn epoch(epoch: u64) -> Vec<u8> {
    format!("rewards/epoch/{epoch:020}").into_bytes()
}

/// Prefix of every reward of `operator`, ascending by epoch.
pub fn participant_rewards(operator: &str) -> Vec<u8> {
    format!("rewards/participant/{operator}/").into_bytes()
}

/// What `operator` earned in `epoch`.
pub fn participant_reward(operator: &str, epoch: u64) -> Vec<u8> {
    let mut key = participant_rewards(operator);
    key.extend_from_slice(format!("{epoch:020}").as_bytes());
    key
}

/// Prefix of the index of operators rewarded in `epoch` (value: the operator), so an epoch's
/// rewards are found without scanning every participant's history.
pub fn payees(epoch: u64) -> Vec<u8> {
    format!("rewards/payee/{epoch:020}/").into_bytes()
}

/// Index entry: `operator` was rewarded in `epoch`.
pub fn payee(epoch: u64, operator: &str) -> Vec<u8> {
    let mut key = payees(epoch);
    key.extend_from_slice(operator.as_bytes());
    key
}
