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
