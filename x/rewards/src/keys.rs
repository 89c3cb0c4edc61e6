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

#[cfg(test)]
mod tests {
    use super::*;

    const OPERATOR: &str = "gonka1operator";

    #[test]
    fn fixed_keys() {
        assert_eq!(params(), b"rewards/params");
    }

    #[test]
    fn epochs_sort_by_number() {
        assert_eq!(epoch(7), b"rewards/epoch/00000000000000000007");
        assert!(epoch(9) < epoch(10));
    }

    #[test]
    fn participant_rewards_sort_by_epoch_under_their_operator() {
        let key = participant_reward(OPERATOR, 7);
        assert_eq!(
            key,
            b"rewards/participant/gonka1operator/00000000000000000007"
        );
        assert!(key.starts_with(&participant_rewards(OPERATOR)));
        assert!(participant_reward(OPERATOR, 9) < participant_reward(OPERATOR, 10));
    }

    #[test]
    fn payees_are_indexed_under_their_epoch() {
        let key = payee(7, OPERATOR);
        assert_eq!(key, b"rewards/payee/00000000000000000007/gonka1operator");
        assert!(key.starts_with(&payees(7)));
    }
}
