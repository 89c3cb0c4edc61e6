//! The settlement key schema: the only place settlement storage keys are formed. Addresses
//! are bech32 and never contain the `/` separator.

/// Module parameters.
pub fn params() -> Vec<u8> {
    b"settlement/params".to_vec()
}

/// Prefix of every escrow.
pub fn escrows() -> Vec<u8> {
    b"settlement/escrow/".to_vec()
}

/// The escrow of `requester` for `transfer_agent`.
pub fn escrow(requester: &str, transfer_agent: &str) -> Vec<u8> {
    let mut key = escrows();
    key.extend_from_slice(format!("{requester}/{transfer_agent}").as_bytes());
    key
}

/// Prefix of the escrows released at `height` (value: empty; requester and transfer agent
/// end the key).
pub fn releases_at(height: u64) -> Vec<u8> {
    format!("settlement/release/{height:020}/").into_bytes()
}

/// Queue entry: the escrow of `requester` for `transfer_agent` is released at `height`.
pub fn release(height: u64, requester: &str, transfer_agent: &str) -> Vec<u8> {
    let mut key = releases_at(height);
    key.extend_from_slice(format!("{requester}/{transfer_agent}").as_bytes());
    key
}

/// The (requester, transfer agent) of a [`release`] key under `prefix`.
pub fn parse_release(prefix: &[u8], key: &[u8]) -> Option<(String, String)> {
    let rest = std::str::from_utf8(key.strip_prefix(prefix)?).ok()?;
    let (requester, agent) = rest.split_once('/')?;
    Some((requester.to_string(), agent.to_string()))
}

/// Prefix of every batch.
pub fn batches() -> Vec<u8> {
    b"settlement/batch/".to_vec()
}

/// One batch, by id.
pub fn batch(id: u64) -> Vec<u8> {
    let mut key = batches();
    key.extend_from_slice(format!("{id:020}").as_bytes());
    key
}

/// Prefix of the batches that become final at `height` (value: empty; the id ends the key).
pub fn finals_at(height: u64) -> Vec<u8> {
    format!("settlement/final/{height:020}/").into_bytes()
}

/// Queue entry: batch `id` becomes final at `height`.
pub fn final_at(height: u64, id: u64) -> Vec<u8> {
    let mut key = finals_at(height);
    key.extend_from_slice(format!("{id:020}").as_bytes());
    key
}

/// The batch id of a queue key ([`final_at`], [`unsampled_batch`]) under `prefix`.
pub fn parse_batch_id(prefix: &[u8], key: &[u8]) -> Option<u64> {
    std::str::from_utf8(key.strip_prefix(prefix)?)
        .ok()?
        .parse()
        .ok()
}

/// Prefix of the batches waiting for their leaf sampling, in id (so settling) order.
pub fn unsampled() -> Vec<u8> {
    b"settlement/unsampled/".to_vec()
}

/// Queue entry: batch `id` waits for its leaf sampling.
pub fn unsampled_batch(id: u64) -> Vec<u8> {
    let mut key = unsampled();
    key.extend_from_slice(format!("{id:020}").as_bytes());
    key
}

/// Prefix of every open leaf demand.
pub fn demands() -> Vec<u8> {
    b"settlement/demand/".to_vec()
}

/// Prefix of the open demands of batch `batch`.
pub fn batch_demands(batch: u64) -> Vec<u8> {
    let mut key = demands();
    key.extend_from_slice(format!("{batch:020}/").as_bytes());
    key
}

/// The open demand of leaf `index` of batch `batch`.
pub fn demand(batch: u64, index: u64) -> Vec<u8> {
    let mut key = batch_demands(batch);
    key.extend_from_slice(format!("{index:020}").as_bytes());
    key
}

/// The (batch, index) that end a demand key under `prefix`: `{batch:020}/{index:020}`.
fn parse_leaf(prefix: &[u8], key: &[u8]) -> Option<(u64, u64)> {
    let rest = std::str::from_utf8(key.strip_prefix(prefix)?).ok()?;
    let (batch, index) = rest.split_once('/')?;
    Some((batch.parse().ok()?, index.parse().ok()?))
}

/// Prefix of the open demands on the batches of `transfer_agent`, by batch then index
/// (value: empty; batch and index end the key). An index of [`demand`]: an entry exists
/// exactly while the demand is open and its batch is stored.
pub fn demands_by_agent(transfer_agent: &str) -> Vec<u8> {
    format!("settlement/demand_by_agent/{transfer_agent}/").into_bytes()
}

/// Index entry: leaf `index` of batch `batch`, a batch of `transfer_agent`, is demanded.
pub fn demand_by_agent(transfer_agent: &str, batch: u64, index: u64) -> Vec<u8> {
    let mut key = demands_by_agent(transfer_agent);
    key.extend_from_slice(format!("{batch:020}/{index:020}").as_bytes());
    key
}

/// The (batch, index) of a [`demand_by_agent`] key under `prefix`.
pub fn parse_demand_by_agent(prefix: &[u8], key: &[u8]) -> Option<(u64, u64)> {
    parse_leaf(prefix, key)
}

/// Prefix of the demands that expire at `height` (value: empty; batch and index end the key).
pub fn demands_due(height: u64) -> Vec<u8> {
    format!("settlement/demand_due/{height:020}/").into_bytes()
}

/// Queue entry: the demand of leaf `index` of batch `batch` expires at `height`.
pub fn demand_due(height: u64, batch: u64, index: u64) -> Vec<u8> {
    let mut key = demands_due(height);
    key.extend_from_slice(format!("{batch:020}/{index:020}").as_bytes());
    key
}

/// The (batch, index) of a [`demand_due`] key under `prefix`.
pub fn parse_demand_due(prefix: &[u8], key: &[u8]) -> Option<(u64, u64)> {
    parse_leaf(prefix, key)
}

/// Prefix of the queue of settled batches by the time they may be pruned.
pub fn expiries() -> Vec<u8> {
    b"settlement/batch_expiry/".to_vec()
}

/// Queue entry: batch `id` may be pruned from unix time `time` on.
pub fn expiry(time: u64, id: u64) -> Vec<u8> {
    let mut key = expiries();
    key.extend_from_slice(format!("{time:020}/{id:020}").as_bytes());
    key
}

/// The (time, id) of an [`expiry`] key.
pub fn parse_expiry(key: &[u8]) -> Option<(u64, u64)> {
    let rest = std::str::from_utf8(key.strip_prefix(expiries().as_slice())?).ok()?;
    let (time, id) = rest.split_once('/')?;
    Some((time.parse().ok()?, id.parse().ok()?))
}

/// Prefix of every transfer agent's last batch number.
pub fn batch_numbers() -> Vec<u8> {
    b"settlement/batch_number/".to_vec()
}

/// The last batch number of `transfer_agent` (value: u64 big-endian).
pub fn batch_number(transfer_agent: &str) -> Vec<u8> {
    let mut key = batch_numbers();
    key.extend_from_slice(transfer_agent.as_bytes());
    key
}

/// Index entry: the stored batch `number` of `transfer_agent` has the id in the value (u64
/// big-endian). Written with the batch, removed when it is pruned.
pub fn batch_by_number(transfer_agent: &str, number: u64) -> Vec<u8> {
    format!("settlement/batch_by_number/{transfer_agent}/{number:020}").into_bytes()
}

/// The id the next batch gets (value: u64 big-endian).
pub fn next_batch_id() -> Vec<u8> {
    b"settlement/next_batch_id".to_vec()
}

/// The records committed by the batches settled so far in one block (value: the block's
/// height and the count, 8 bytes big-endian each; a later block overwrites it).
pub fn block_records() -> Vec<u8> {
    b"settlement/block_records".to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_keys_parse_back_and_sort_by_height() {
        let key = release(7, "gonka1r", "gonka1t");
        assert_eq!(
            key,
            b"settlement/release/00000000000000000007/gonka1r/gonka1t"
        );
        assert_eq!(
            parse_release(&releases_at(7), &key),
            Some(("gonka1r".into(), "gonka1t".into()))
        );
        assert!(release(9, "a", "b") < release(10, "a", "b"));
        let key = final_at(12, 3);
        assert_eq!(parse_batch_id(&finals_at(12), &key), Some(3));
        assert_eq!(parse_batch_id(&finals_at(13), &key), None);
        let key = demand_due(30, 2, 7);
        assert_eq!(parse_demand_due(&demands_due(30), &key), Some((2, 7)));
        assert!(demand(2, 7).starts_with(&demands()));
        assert_eq!(
            parse_expiry(&expiry(1_800_000_000, 4)),
            Some((1_800_000_000, 4))
        );
        assert!(expiry(999, 9) < expiry(1_000, 1));
        assert_eq!(
            escrow("gonka1r", "gonka1t"),
            b"settlement/escrow/gonka1r/gonka1t"
        );
        assert!(batch(9) < batch(10));
    }

    #[test]
    fn demand_keys_parse_back_and_sort_by_batch_then_index() {
        assert_eq!(
            demand(2, 7),
            b"settlement/demand/00000000000000000002/00000000000000000007"
        );
        assert!(demand(2, 7).starts_with(&batch_demands(2)));
        assert!(!demand(20, 7).starts_with(&batch_demands(2)));
        let key = demand_by_agent("gonka1t", 2, 7);
        assert_eq!(
            key,
            b"settlement/demand_by_agent/gonka1t/00000000000000000002/00000000000000000007"
        );
        let prefix = demands_by_agent("gonka1t");
        assert_eq!(parse_demand_by_agent(&prefix, &key), Some((2, 7)));
        assert_eq!(
            parse_demand_by_agent(&demands_by_agent("gonka1u"), &key),
            None
        );
        // One agent's prefix is not another's whose address it starts.
        assert!(!demand_by_agent("gonka1tt", 2, 7).starts_with(&prefix));
        assert!(demand_by_agent("gonka1t", 2, 9) < demand_by_agent("gonka1t", 10, 0));
        // The index does not fall under the demands' own prefix (genesis exports those).
        assert!(!key.starts_with(&demands()));
    }
}
