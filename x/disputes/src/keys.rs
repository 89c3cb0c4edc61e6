//! The disputes key schema: the only place disputes storage keys are formed.
//!
//! Inference ids are lowercase hex and addresses bech32, so neither contains `/`; numbers
//! are zero-padded so keys sort numerically.

/// Module parameters.
pub fn params() -> Vec<u8> {
    b"disputes/params".to_vec()
}

/// The validation of a sampled record.
pub fn validation(inference_id: &str) -> Vec<u8> {
    format!("disputes/validation/{inference_id}").into_bytes()
}

/// Prefix of the pending validations assigned to `validator`.
pub fn pending_of(validator: &str) -> Vec<u8> {
    format!("disputes/pending/{validator}/").into_bytes()
}

/// Index entry: `validator` owes the validation of `inference_id`.
pub fn pending(validator: &str, inference_id: &str) -> Vec<u8> {
    let mut key = pending_of(validator);
    key.extend_from_slice(inference_id.as_bytes());
    key
}

/// Prefix of the validation deadline index.
pub fn validation_deadlines() -> Vec<u8> {
    b"disputes/validation_deadline/".to_vec()
}

/// Index entry: the validation of `inference_id` is due by `height`.
pub fn validation_deadline(height: u64, inference_id: &str) -> Vec<u8> {
    let mut key = validation_deadlines();
    key.extend_from_slice(format!("{height:020}/{inference_id}").as_bytes());
    key
}

/// Counter of dispute ids.
pub fn next_dispute_id() -> Vec<u8> {
    b"disputes/next_dispute_id".to_vec()
}

/// Prefix of every dispute.
pub fn disputes() -> Vec<u8> {
    b"disputes/dispute/".to_vec()
}

/// One dispute, by id.
pub fn dispute(id: u64) -> Vec<u8> {
    let mut key = disputes();
    key.extend_from_slice(format!("{id:020}").as_bytes());
    key
}

/// Prefix of the disputes with `status`.
pub fn disputes_with_status(status: &str) -> Vec<u8> {
    format!("disputes/status/{status}/").into_bytes()
}

/// Index entry: dispute `id` has `status`.
pub fn dispute_status(status: &str, id: u64) -> Vec<u8> {
    let mut key = disputes_with_status(status);
    key.extend_from_slice(format!("{id:020}").as_bytes());
    key
}

/// Prefix of the disputes `address` takes part in.
pub fn disputes_of(address: &str) -> Vec<u8> {
    format!("disputes/participant/{address}/").into_bytes()
}

/// Index entry: `address` takes part in dispute `id`.
pub fn participant_dispute(address: &str, id: u64) -> Vec<u8> {
    let mut key = disputes_of(address);
    key.extend_from_slice(format!("{id:020}").as_bytes());
    key
}

/// Prefix of the dispute deadline index.
pub fn dispute_deadlines() -> Vec<u8> {
    b"disputes/dispute_deadline/".to_vec()
}

/// Index entry: dispute `id` is decided at the latest after `height`.
pub fn dispute_deadline(height: u64, id: u64) -> Vec<u8> {
    height_id(dispute_deadlines(), height, id)
}

/// Prefix of the disputes whose committee is still to be drawn.
pub fn committee_draws() -> Vec<u8> {
    b"disputes/committee_draw/".to_vec()
}

/// Index entry: dispute `id`, opened at `height`, gets its committee from the beacon of
/// `height` in the next block.
pub fn committee_draw(height: u64, id: u64) -> Vec<u8> {
    height_id(committee_draws(), height, id)
}

/// `prefix` ‖ height ‖ `/` ‖ id, both zero-padded so keys sort by height then id.
fn height_id(mut prefix: Vec<u8>, height: u64, id: u64) -> Vec<u8> {
    prefix.extend_from_slice(format!("{height:020}/{id:020}").as_bytes());
    prefix
}

/// The dispute on record `inference_id` (value: the dispute id).
pub fn record_dispute(inference_id: &str) -> Vec<u8> {
    format!("disputes/record_dispute/{inference_id}").into_bytes()
}

/// The revealed output opening of record `inference_id`.
pub fn reveal(inference_id: &str) -> Vec<u8> {
    format!("disputes/reveal/{inference_id}").into_bytes()
}

/// Prefix of the reveals transfer agent `transfer_agent` owes.
pub fn reveals_due_of(transfer_agent: &str) -> Vec<u8> {
    format!("disputes/reveal_due/{transfer_agent}/").into_bytes()
}

/// Index entry: `transfer_agent` owes the reveal of `inference_id` (value: the
/// `RevealDue`).
pub fn reveal_due(transfer_agent: &str, inference_id: &str) -> Vec<u8> {
    let mut key = reveals_due_of(transfer_agent);
    key.extend_from_slice(inference_id.as_bytes());
    key
}

/// Sampling statistics of executor host `host`.
pub fn executor_stats(host: &str) -> Vec<u8> {
    format!("disputes/executor/{host}").into_bytes()
}

/// Reputation of `validator`.
pub fn reputation(validator: &str) -> Vec<u8> {
    format!("disputes/reputation/{validator}").into_bytes()
}

/// The text after `prefix` in `key`, if `key` starts with it and the rest is UTF-8.
fn suffix<'a>(key: &'a [u8], prefix: &[u8]) -> Option<&'a str> {
    std::str::from_utf8(key.strip_prefix(prefix)?).ok()
}

/// `(height, inference_id)` of a [`validation_deadline`] key.
pub fn parse_validation_deadline(key: &[u8]) -> Option<(u64, String)> {
    let (height, id) = suffix(key, &validation_deadlines())?.split_once('/')?;
    Some((height.parse().ok()?, id.to_string()))
}

/// `(height, dispute id)` of a [`dispute_deadline`] key.
pub fn parse_dispute_deadline(key: &[u8]) -> Option<(u64, u64)> {
    parse_height_id(key, &dispute_deadlines())
}

/// `(height, dispute id)` of a [`committee_draw`] key.
pub fn parse_committee_draw(key: &[u8]) -> Option<(u64, u64)> {
    parse_height_id(key, &committee_draws())
}

fn parse_height_id(key: &[u8], prefix: &[u8]) -> Option<(u64, u64)> {
    let (height, id) = suffix(key, prefix)?.split_once('/')?;
    Some((height.parse().ok()?, id.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "ab12";
    const HOST: &str = "gonka1host";

    #[test]
    fn fixed_keys() {
        assert_eq!(params(), b"disputes/params");
        assert_eq!(next_dispute_id(), b"disputes/next_dispute_id");
        assert_eq!(validation(ID), b"disputes/validation/ab12");
        assert_eq!(record_dispute(ID), b"disputes/record_dispute/ab12");
        assert_eq!(reveal(ID), b"disputes/reveal/ab12");
        assert_eq!(reveal_due(HOST, ID), b"disputes/reveal_due/gonka1host/ab12");
        assert!(reveal_due(HOST, ID).starts_with(&reveals_due_of(HOST)));
        assert_eq!(executor_stats(HOST), b"disputes/executor/gonka1host");
        assert_eq!(reputation(HOST), b"disputes/reputation/gonka1host");
    }

    #[test]
    fn pending_keys_group_by_validator() {
        assert_eq!(pending(HOST, ID), b"disputes/pending/gonka1host/ab12");
        assert!(pending(HOST, ID).starts_with(&pending_of(HOST)));
    }

    #[test]
    fn validation_deadlines_sort_by_height_and_parse_back() {
        let key = validation_deadline(42, ID);
        assert_eq!(
            key,
            b"disputes/validation_deadline/00000000000000000042/ab12"
        );
        assert!(validation_deadline(9, "ff") < validation_deadline(10, "00"));
        assert_eq!(parse_validation_deadline(&key), Some((42, ID.into())));
        assert_eq!(parse_validation_deadline(&dispute_deadline(42, 1)), None);
    }

    #[test]
    fn disputes_and_their_indexes_sort_by_id() {
        assert_eq!(dispute(3), b"disputes/dispute/00000000000000000003");
        assert!(dispute(9) < dispute(10));
        assert!(dispute(3).starts_with(&disputes()));
        assert_eq!(
            dispute_status("open", 3),
            b"disputes/status/open/00000000000000000003"
        );
        assert!(dispute_status("open", 3).starts_with(&disputes_with_status("open")));
        assert!(participant_dispute(HOST, 3).starts_with(&disputes_of(HOST)));
    }

    #[test]
    fn dispute_deadlines_sort_by_height_and_parse_back() {
        let key = dispute_deadline(42, 3);
        assert_eq!(
            key,
            b"disputes/dispute_deadline/00000000000000000042/00000000000000000003"
        );
        assert!(dispute_deadline(9, 99) < dispute_deadline(10, 0));
        assert_eq!(parse_dispute_deadline(&key), Some((42, 3)));
        assert_eq!(parse_dispute_deadline(&validation_deadline(42, ID)), None);
    }
}
