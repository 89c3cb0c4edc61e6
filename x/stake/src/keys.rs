//! The stake key schema: the only place stake storage keys are formed.

/// Module parameters.
pub fn params() -> Vec<u8> {
    b"stake/params".to_vec()
}

/// Prefix of every participant.
pub fn participants() -> Vec<u8> {
    b"stake/participant/".to_vec()
}

/// One participant, by operator address.
pub fn participant(operator: &str) -> Vec<u8> {
    let mut key = participants();
    key.extend_from_slice(operator.as_bytes());
    key
}

/// Which operator uses a consensus key (uniqueness index).
pub fn consensus_key(pubkey: &[u8]) -> Vec<u8> {
    format!("stake/consensus_key/{}", hex::encode(pubkey)).into_bytes()
}

/// Which operator's consensus key has this CometBFT address (the first 20 bytes of its
/// SHA-256): how commit signatures and evidence, which name addresses, find a participant.
pub fn consensus_address(address: &[u8; 20]) -> Vec<u8> {
    format!("stake/consensus_address/{}", hex::encode(address)).into_bytes()
}

/// A validator's liveness over the signing window.
pub fn signing_info(operator: &str) -> Vec<u8> {
    format!("stake/signing_info/{operator}").into_bytes()
}

/// Prefix of every unbonding entry.
pub fn unbondings() -> Vec<u8> {
    b"stake/unbonding/".to_vec()
}

/// Prefix of the unbonding entries paid at the end of `epoch`.
pub fn unbondings_completing(epoch: u64) -> Vec<u8> {
    format!("stake/unbonding/{epoch:020}/").into_bytes()
}

/// One unbonding entry.
pub fn unbonding(completes_epoch: u64, operator: &str, id: u64) -> Vec<u8> {
    let mut key = unbondings_completing(completes_epoch);
    key.extend_from_slice(format!("{operator}/{id:020}").as_bytes());
    key
}

/// Prefix of the index of `operator`'s unbonding entries (value: empty; the completion
/// epoch and the id end the key, which locate the entry under [`unbonding`]). Not under
/// [`unbondings`]: `_` follows `unbonding` here, `/` there.
pub fn unbondings_of(operator: &str) -> Vec<u8> {
    format!("stake/unbonding_of/{operator}/").into_bytes()
}

/// The index entry of `operator`'s unbonding entry `id`, completing at `completes_epoch`.
pub fn unbonding_of(operator: &str, completes_epoch: u64, id: u64) -> Vec<u8> {
    let mut key = unbondings_of(operator);
    key.extend_from_slice(format!("{completes_epoch:020}/{id:020}").as_bytes());
    key
}

/// The (completion epoch, id) of an [`unbonding_of`] key under `prefix`.
pub fn parse_unbonding_of(prefix: &[u8], key: &[u8]) -> Option<(u64, u64)> {
    let rest = std::str::from_utf8(key.strip_prefix(prefix)?).ok()?;
    let (epoch, id) = rest.split_once('/')?;
    Some((epoch.parse().ok()?, id.parse().ok()?))
}

/// Counter for unbonding entry ids.
pub fn next_unbonding_id() -> Vec<u8> {
    b"stake/next_unbonding_id".to_vec()
}

/// Prefix of the work ledger of `epoch`.
pub fn work_of_epoch(epoch: u64) -> Vec<u8> {
    format!("stake/work/{epoch:020}/").into_bytes()
}

/// Work units of `operator` in `epoch`.
pub fn work(epoch: u64, operator: &str) -> Vec<u8> {
    let mut key = work_of_epoch(epoch);
    key.extend_from_slice(operator.as_bytes());
    key
}

/// The operator of a [`work`] key of `epoch`.
pub fn parse_work(epoch: u64, key: &[u8]) -> Option<String> {
    let operator = key.strip_prefix(work_of_epoch(epoch).as_slice())?;
    String::from_utf8(operator.to_vec()).ok()
}

/// Prefix of participants jailed since the last block, whose power must drop to zero.
pub fn jail_queue() -> Vec<u8> {
    b"stake/jail_queue/".to_vec()
}

/// One queued jailing.
pub fn jail_queued(operator: &str) -> Vec<u8> {
    let mut key = jail_queue();
    key.extend_from_slice(operator.as_bytes());
    key
}

/// Prefix of participants whose bond fell below `min_stake` since other modules last looked
/// (x/inference deregisters their nodes and transfer agent).
pub fn below_min_queue() -> Vec<u8> {
    b"stake/below_min/".to_vec()
}

/// One participant whose bond fell below `min_stake`.
pub fn below_min_queued(operator: &str) -> Vec<u8> {
    let mut key = below_min_queue();
    key.extend_from_slice(operator.as_bytes());
    key
}

#[cfg(test)]
mod tests {
    use super::*;

    const OPERATOR: &str = "gonka1operator";

    #[test]
    fn fixed_keys() {
        assert_eq!(params(), b"stake/params");
        assert_eq!(next_unbonding_id(), b"stake/next_unbonding_id");
        assert_eq!(consensus_key(&[0xab, 0x01]), b"stake/consensus_key/ab01");
    }

    #[test]
    fn participants_are_keyed_by_operator() {
        assert_eq!(participant(OPERATOR), b"stake/participant/gonka1operator");
        assert!(participant(OPERATOR).starts_with(&participants()));
    }

    #[test]
    fn unbondings_sort_by_completion_epoch_then_operator_then_id() {
        let key = unbonding(3, OPERATOR, 7);
        assert_eq!(
            key,
            b"stake/unbonding/00000000000000000003/gonka1operator/00000000000000000007"
        );
        assert!(key.starts_with(&unbondings_completing(3)));
        assert!(key.starts_with(&unbondings()));
        assert!(unbonding(9, "z", 0) < unbonding(10, "a", 0));
        assert!(unbonding(3, OPERATOR, 9) < unbonding(3, OPERATOR, 10));
        let index = unbonding_of(OPERATOR, 3, 7);
        assert!(!index.starts_with(&unbondings()), "the index is no entry");
        assert_eq!(
            parse_unbonding_of(&unbondings_of(OPERATOR), &index),
            Some((3, 7))
        );
        assert!(unbonding_of(OPERATOR, 9, 0) < unbonding_of(OPERATOR, 10, 0));
    }

    #[test]
    fn work_keys_sort_by_epoch_and_parse_back() {
        let key = work(4, OPERATOR);
        assert_eq!(key, b"stake/work/00000000000000000004/gonka1operator");
        assert!(key.starts_with(&work_of_epoch(4)));
        assert!(work(9, "z") < work(10, "a"));
        assert_eq!(parse_work(4, &key).as_deref(), Some(OPERATOR));
        assert_eq!(parse_work(5, &key), None);
    }

    #[test]
    fn jail_queue_keys() {
        assert_eq!(jail_queued(OPERATOR), b"stake/jail_queue/gonka1operator");
        assert!(jail_queued(OPERATOR).starts_with(&jail_queue()));
        assert_eq!(
            below_min_queued(OPERATOR),
            b"stake/below_min/gonka1operator"
        );
        assert!(below_min_queued(OPERATOR).starts_with(&below_min_queue()));
        assert!(!below_min_queue().starts_with(&jail_queue()));
    }
}
